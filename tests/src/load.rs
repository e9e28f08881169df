//! The load benches' parts: server processes under test (their CPU time and RSS from `/proc`),
//! their operator config files, and kept-alive HTTP/1.1 MCP clients that POST `tools/call`.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gatehouse_host::HostConfig;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use wasmtime_wasi_http::io::TokioIo;

/// The tool call every client sends.
#[derive(Debug, Clone, Copy)]
pub enum Call {
    /// `gatehouse.echo.echo`, read-only.
    Echo,
    /// [`Call::Echo`] from a client that holds a session id (every official SDK client, since
    /// `initialize` names one): each call is registered for `notifications/cancelled`.
    EchoInSession,
    /// `test.ledger.transfer`, write-class, a fresh idempotency key each call.
    Transfer,
}

impl Call {
    /// The JSON-RPC request of the `n`th call of client `client`.
    pub fn body(self, client: usize, n: u64) -> String {
        match self {
            Self::Echo | Self::EchoInSession => json!({
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": { "name": "gatehouse.echo.echo", "arguments": { "message": "hi" } },
            }),
            Self::Transfer => json!({
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {
                    "name": "test.ledger.transfer",
                    "arguments": { "amount": 1, "currency": "EUR" },
                    "_meta": {
                        "gatehouse/idempotency_key":
                            format!("load-{}-{client}-{n}-{}", std::process::id(), crate::unique()),
                    },
                },
            }),
        }
        .to_string()
    }

    /// The `Mcp-Session-Id` client `client` sends, if it holds one.
    pub fn session(self, client: usize) -> Option<String> {
        matches!(self, Self::EchoInSession).then(|| format!("load-session-{client}"))
    }
}

/// A server process under test; killed when dropped.
pub struct Server {
    child: Child,
    /// Its MCP (or floor) port on loopback.
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Spawns `command` and waits (at most 120 s) until it accepts connections on loopback
    /// `port`, polling every millisecond: the server, and how long that took from spawn.
    pub fn start(command: &mut Command, port: u16) -> (Self, Duration) {
        let started = Instant::now();
        let server = Self {
            child: command.spawn().expect("the server starts"),
            port,
        };
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the server listens on {port}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        (server, started.elapsed())
    }

    /// (utime, stime) of the server process so far, in seconds.
    pub fn cpu_seconds(&self) -> (f64, f64) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("the server's stat");
        stat_cpu_seconds(&stat)
    }

    /// CPU seconds (user + kernel) so far of the server's threads named `name` (the SQLite
    /// store's writer is `gatehouse-store`). Panics if it has none: a renamed thread must not
    /// read as a share of 0.
    pub fn thread_cpu_seconds(&self, name: &str) -> f64 {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id()))
            .expect("the server's threads");
        let times: Vec<f64> = tasks
            .filter_map(Result::ok)
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
            .map(|stat| {
                let (user, system) = stat_cpu_seconds(&stat);
                user + system
            })
            .collect();
        assert!(
            !times.is_empty(),
            "the server (pid {}) has no thread named {name:?}",
            self.child.id()
        );
        times.iter().sum()
    }

    /// Resident set size now, in MiB.
    pub fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .expect("VmRSS")
            / 1024.0
    }
}

/// (utime, stime) in seconds from a `/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat` line.
fn stat_cpu_seconds(stat: &str) -> (f64, f64) {
    // Fields after the command name (which is in parentheses): state is field 3, utime 14.
    let rest = &stat[stat.rfind(')').expect("stat's command") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: f64 = fields[11].parse().expect("utime");
    let stime: f64 = fields[12].parse().expect("stime");
    let ticks = clock_ticks();
    (utime / ticks, stime / ticks)
}

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .expect("getconf CLK_TCK runs");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("CLK_TCK is a number")
    })
}

/// `gatehouse serve` (a child process, see [`crate::cli::gatehouse_child`]) with `config` plus the
/// TOML tables in `extra` and an `[mcp]` table on loopback `port` admitting anonymous callers,
/// written to `dir/<name>.toml`, and `plugins` (flag, signed bytes) written beside it; stdout
/// discarded, stderr to `dir/<name>.log`.
pub fn serve_command(
    dir: &Path,
    name: &str,
    config: &HostConfig,
    port: u16,
    extra: &str,
    plugins: &[(&str, Vec<u8>)],
) -> Command {
    let config_path = dir.join(format!("{name}.toml"));
    let text = format!(
        "{}\n[mcp]\nlisten = \"127.0.0.1:{port}\"\nanonymous_tenant = \"default\"\n{extra}\n",
        toml::to_string_pretty(config).expect("the config serializes")
    );
    std::fs::write(&config_path, text).expect("write config");
    let mut args = vec![
        "serve".to_owned(),
        "--config".to_owned(),
        config_path.display().to_string(),
    ];
    for (i, (flag, bytes)) in plugins.iter().enumerate() {
        let path = dir.join(format!("{name}-{i}.signed.wasm"));
        std::fs::write(&path, bytes).expect("write plugin");
        args.extend([(*flag).to_owned(), path.display().to_string()]);
    }
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log");
    let mut command = crate::cli::gatehouse_child(&json!(args));
    command.stdout(std::process::Stdio::null()).stderr(log);
    command
}

/// When the clients stop.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// After this long.
    Elapsed(Duration),
    /// When this many calls have been sent, by all clients together.
    Calls(u64),
}

/// How fast the clients send.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// Each client sends its next call as soon as the last is answered.
    BackToBack,
    /// All clients together send at most this many calls a second: each client sends its
    /// `n`th call no earlier than `n` of its intervals after the start, the clients staggered
    /// across an interval (tokio's timers round each wait up to a millisecond).
    CallsPerSecond(f64),
}

/// What the clients have done so far, readable while they run.
#[derive(Debug, Default)]
pub struct Progress {
    /// Calls answered, failed ones included.
    pub calls: AtomicU64,
    /// Calls that failed: not HTTP 200 with `"isError":false`, or the connection broke.
    pub failed: AtomicU64,
    /// The first few failures, described.
    failures: Mutex<Vec<String>>,
}

impl Progress {
    /// The first few failures, described.
    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().expect("failures").clone()
    }

    fn fail(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut failures = self.failures.lock().expect("failures");
        if failures.len() < 5 {
            failures.push(what);
        }
    }
}

/// `clients` kept-alive connections to the MCP endpoint on loopback `port`, each sending `call`
/// back to back until `until`: every call's latency, and the elapsed time. Failures are counted
/// in `progress` (a client whose connection broke stops); the caller decides whether they are
/// allowed.
pub async fn drive(
    port: u16,
    call: Call,
    clients: usize,
    until: Until,
    progress: &Arc<Progress>,
) -> (Vec<Duration>, Duration) {
    drive_paced(port, call, clients, until, Pace::BackToBack, progress).await
}

/// [`drive`] at `pace`.
pub async fn drive_paced(
    port: u16,
    call: Call,
    clients: usize,
    until: Until,
    pace: Pace,
    progress: &Arc<Progress>,
) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    // The interval between one client's calls.
    let interval = match pace {
        Pace::BackToBack => None,
        Pace::CallsPerSecond(rate) => Some(Duration::from_secs_f64(clients as f64 / rate)),
    };
    let sent = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let (progress, sent) = (Arc::clone(progress), Arc::clone(&sent));
            let more = move || match until {
                Until::Elapsed(window) => started.elapsed() < window,
                Until::Calls(total) => sent.fetch_add(1, Ordering::Relaxed) < total,
            };
            let schedule = interval.map(|interval| {
                let first = started + interval.mul_f64(client as f64 / clients as f64);
                move |n: u64| first + interval.mul_f64(n as f64)
            });
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                if let Err(broke) = client_loop(
                    port,
                    call,
                    client,
                    more,
                    schedule,
                    &progress,
                    &mut latencies,
                )
                .await
                {
                    progress.fail(format!("client {client}: {broke}"));
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("client task"));
    }
    (latencies, started.elapsed())
}

/// One client: a connection, then calls while `more()`, the `n`th no earlier than
/// `schedule(n)` if there is one; an error when the connection breaks.
async fn client_loop(
    port: u16,
    call: Call,
    client: usize,
    mut more: impl FnMut() -> bool,
    schedule: Option<impl Fn(u64) -> Instant>,
    progress: &Progress,
    latencies: &mut Vec<Duration>,
) -> Result<(), String> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(connection);
    let host = format!("127.0.0.1:{port}");
    let session = call.session(client);
    let mut n = 0u64;
    loop {
        if let Some(schedule) = &schedule {
            tokio::time::sleep_until(schedule(n).into()).await;
        }
        if !more() {
            break;
        }
        let mut request = hyper::Request::post("/mcp")
            .header("host", &host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(session) = &session {
            request = request.header("mcp-session-id", session);
        }
        let request = request
            .body(Full::new(Bytes::from(call.body(client, n))))
            .expect("request");
        let begun = Instant::now();
        sender
            .ready()
            .await
            .map_err(|e| format!("not kept alive: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        latencies.push(begun.elapsed());
        progress.calls.fetch_add(1, Ordering::Relaxed);
        if status != 200 || !contains(&body, b"\"isError\":false") {
            progress.fail(format!("{status}: {}", String::from_utf8_lossy(&body)));
        }
        n += 1;
    }
    Ok(())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The `q` quantile of sorted `latencies`.
pub fn quantile(latencies: &[Duration], q: f64) -> Duration {
    latencies[((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1))]
}
