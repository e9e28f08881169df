//! A stdio MCP server behind gatehouse: npm's filesystem server, its `read_text_file` tool on a
//! 1 KiB file, called
//! 1. **directly**: a client that starts the server itself (`node …`, no sandbox) and speaks
//!    newline-delimited JSON-RPC on its standard streams, requests multiplexed by id;
//! 2. **through gatehouse**: the same `tools/call` as an MCP request over HTTP/1.1 (kept-alive
//!    connections, API key), through the pipeline, the signed `mcp-upstream` component and the
//!    egress gate's `stdio://` transport to the server in its bubblewrap sandbox.
//!
//! It reports p50 and p99 at 1 and at 8 concurrent callers, the cold start (the first call:
//! process start, `initialize` and the call), the warm start (the first call after the server
//! was stopped for idleness), and the memory of the server's processes (the sum of their RSS).
//! The package is installed by `gatehouse import mcp --stdio`'s own code, as an operator's
//! import would, into a temporary directory.
//!
//! Run: `cargo bench -p gatehouse-tests --bench stdio` (`-- --calls N` per row, default 400).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse_cli::import::Options;
use gatehouse_cli::import::stdio::{Source, import};
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_host::stdio::spec::PACKAGE_PLACEHOLDER;
use gatehouse_tests::artifacts::MCP_UPSTREAM;
use gatehouse_tests::mcp::KeptAlive;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::oneshot;

const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
const KEY: &str = "bench-key";
const ID: &str = "bench.fs";

fn main() {
    let calls: usize =
        gatehouse_tests::flag("--calls").map_or(400, |n| n.parse().expect("--calls N"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(calls));
}

async fn run(calls: usize) {
    let open = || {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        dir
    };
    let (packages, docs) = (open(), open());
    let file = docs.path().join("page.txt");
    std::fs::write(&file, "x".repeat(1024)).expect("write");
    let docs_dir = docs.path().display().to_string();
    let source = Source {
        command: ["npx", "-y", FILESYSTEM, &docs_dir]
            .map(str::to_owned)
            .to_vec(),
        dirs: vec![Source::parse_dir(&format!("{docs_dir}:ro")).expect("dir")],
        packages_dir: Some(packages.path().to_owned()),
        ..Source::default()
    };
    let imported = import(&source, &Options::new(ID))
        .await
        .expect("the import");
    let spec = imported.manifest.stdio.clone().expect("a stdio import");
    let pin = spec.package.clone().expect("an npm pin");
    let install = pin.install_dir(packages.path()).display().to_string();
    let arguments = json!({ "path": file });

    // Directly.
    let expand = |text: &str| text.replace(PACKAGE_PLACEHOLDER, &install);
    let program = expand(&spec.command);
    let args: Vec<String> = spec.args.iter().map(|a| expand(a)).collect();
    let started = Instant::now();
    let direct = Direct::start(&program, &args).await;
    direct.call(&arguments).await;
    let direct_cold = started.elapsed();
    let direct_memory = tree_rss(direct.pid);
    let direct_1 = latencies(calls, 1, |_| direct.call(&arguments)).await;
    let direct_8 = latencies(calls, 8, |_| direct.call(&arguments)).await;
    drop(direct);
    let started = Instant::now();
    let again = Direct::start(&program, &args).await;
    again.call(&arguments).await;
    let direct_warm = started.elapsed();
    drop(again);

    // Through gatehouse.
    let mut config = gatehouse_tests::config(&["bench.*"], &[]);
    config.sandbox.max_concurrent_calls = 64;
    let mut stdio = imported.stdio.clone().expect("a [stdio] table");
    stdio.servers[0].idle_stop_seconds = 1;
    config.stdio = stdio;
    let host = Arc::new(Host::new(config).expect("host"));
    let signed = gatehouse_host::plugin::pack(
        &MCP_UPSTREAM.bytes(),
        &Manifest::Adapter(imported.manifest.clone()),
        gatehouse_tests::publisher(),
    )
    .expect("packs");
    host.install_adapter(&signed).expect("loads");
    let (mcp, _key_dir) = gatehouse_tests::mcp::with_api_key(KEY);
    let port = gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await;
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(KeptAlive::open(port).await);
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": { "name": format!("{ID}.read_text_file"), "arguments": arguments },
    })
    .to_string();
    let started = Instant::now();
    clients[0].tools_call(KEY, &body).await;
    let gateway_cold = started.elapsed();
    let status = host.stdio().statuses().pop().expect("the server");
    let gateway_memory = tree_rss(status.pid.expect("it runs"));
    let gateway_1 = latencies(calls, 1, |i| {
        let (client, body) = (&clients[i], &body);
        async move {
            client.tools_call(KEY, body).await;
        }
    })
    .await;
    let gateway_8 = latencies(calls, 8, |i| {
        let (client, body) = (&clients[i], &body);
        async move {
            client.tools_call(KEY, body).await;
        }
    })
    .await;
    // Stopped for idleness (1 s without calls), then started again by a call.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let stopped = host.stdio().statuses().pop().expect("the server");
    assert_eq!(stopped.pid, None, "stopped for idleness: {stopped:?}");
    let started = Instant::now();
    clients[0].tools_call(KEY, &body).await;
    let gateway_warm = started.elapsed();
    host.stdio().shutdown().await;

    println!("stdio MCP server: {FILESYSTEM}, read_text_file on 1 KiB, {calls} calls per row");
    println!("| path | p50 @1 | p99 @1 | p50 @8 | p99 @8 | cold start | warm start | memory |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, one, eight, cold, warm, memory) in [
        (
            "direct (stdio)",
            &direct_1,
            &direct_8,
            direct_cold,
            direct_warm,
            direct_memory,
        ),
        (
            "through gatehouse",
            &gateway_1,
            &gateway_8,
            gateway_cold,
            gateway_warm,
            gateway_memory,
        ),
    ] {
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.0} ms | {:.0} ms | {:.1} MiB |",
            ms(percentile(one, 50)),
            ms(percentile(one, 99)),
            ms(percentile(eight, 50)),
            ms(percentile(eight, 99)),
            ms(cold),
            ms(warm),
            memory as f64 / f64::from(1 << 20),
        );
    }
    println!(
        "gatehouse adds {:.2} ms at p50 with 1 caller",
        ms(percentile(&gateway_1, 50)) - ms(percentile(&direct_1, 50))
    );
}

/// `calls` calls, `callers` at a time (caller `i` runs `call(i)` in turn): each call's time.
async fn latencies<F, Fut>(calls: usize, callers: usize, call: F) -> Vec<Duration>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let per_caller = calls / callers;
    let runs = (0..callers).map(|i| {
        let call = &call;
        async move {
            let mut times = Vec::with_capacity(per_caller);
            for _ in 0..per_caller {
                let started = Instant::now();
                call(i).await;
                times.push(started.elapsed());
            }
            times
        }
    });
    let mut all: Vec<Duration> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();
    all.sort();
    all
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The RSS of `pid` and every process below it, in bytes.
fn tree_rss(pid: u32) -> u64 {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        if let Some(parent) = after.split(' ').nth(1).and_then(|p| p.parse().ok()) {
            children.entry(parent).or_default().push(child);
        }
    }
    let mut total = 0;
    let mut todo = vec![pid];
    while let Some(pid) = todo.pop() {
        total += rss(pid);
        todo.extend(children.get(&pid).into_iter().flatten());
    }
    total
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))
        .unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| {
            kib.trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// A client that runs the server itself and speaks to it on its standard streams.
struct Direct {
    pid: u32,
    stdin: tokio::sync::Mutex<tokio::process::ChildStdin>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>,
    next: std::sync::atomic::AtomicU64,
    _child: tokio::process::Child,
}

impl Direct {
    async fn start(program: &str, args: &[String]) -> Self {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().expect("piped");
        let pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>> = Arc::default();
        let routes = Arc::clone(&pending);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = message["id"].as_u64()
                    && let Some(answer) = routes.lock().expect("routes").remove(&id)
                {
                    let _ = answer.send(message);
                }
            }
        });
        let direct = Self {
            pid: child.id().expect("running"),
            stdin: tokio::sync::Mutex::new(child.stdin.take().expect("piped")),
            pending,
            next: std::sync::atomic::AtomicU64::new(1),
            _child: child,
        };
        let init = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "bench", "version": "1" },
        });
        direct.request("initialize", init).await;
        direct
            .write(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        direct
    }

    async fn write(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.flush().await.expect("flush");
    }

    async fn request(&self, method: &str, params: Value) -> Value {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending.lock().expect("routes").insert(id, answer);
        self.write(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        answered.await.expect("an answer")
    }

    async fn call(&self, arguments: &Value) {
        let answer = self
            .request(
                "tools/call",
                json!({ "name": "read_text_file", "arguments": arguments }),
            )
            .await;
        assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
        assert!(answer["result"]["content"].is_array(), "{answer}");
    }
}
