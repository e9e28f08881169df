//! Scale and memory, each against `gatehouse serve` as a separate process (this workspace's
//! code in the bench profile, run through this binary as `gatehouse_tests::cli::gatehouse_child`):
//!
//! 1. **Start-up with many adapters**: `--adapters N` (default 100) signed adapters, each the
//!    echo component made distinct by a custom section (so each has its own digest and its own
//!    compiled artifact) under its own id, `gatehouse.echo000` ... From spawn until the MCP
//!    port accepts: once with an empty compile cache (verify + compile each), then three times
//!    with the cache warm (verify + the artifact from the cache); then `tools/list` must list
//!    every adapter's tool. A server with the echo adapter alone is the baseline (process
//!    start, store, listeners).
//! 2. **A policy swap under load**: 32 clients call echo with `test.policy-probe` 1.0.0 bound
//!    to every call; after 1 s an operator pushes 2.0.0 through the admin API (`POST
//!    /v1/plugins`); the load goes on for 1 s more. Reports the push's round trip, the calls
//!    that failed (the target is none), and, from the audit log (every decision names the
//!    version that made it), how long after the push was acknowledged the last call decided
//!    by 1.0.0 was recorded (the target: within 100 ms) and when the first decided by 2.0.0 was.
//! 3. **Soak**: echo at 32 clients for `--calls N` (default 1,000,000) calls; the server's RSS
//!    after a warm-up and at every tenth of the calls, CPU per call and calls/s over the whole.
//!
//! Run: `cargo bench -p gatehouse-tests --bench scale -- [--only startup,swap,soak] [--adapters
//! N] [--calls N] [--json PATH]`. The soak of a million calls takes a few minutes and writes a
//! million audit entries (about 1 GB of SQLite) to a temporary directory.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gatehouse_host::HostConfig;
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_tests::artifacts::{ECHO, POLICY_PROBE};
use gatehouse_tests::load::{self, Call, Progress, Server, Until};
use gatehouse_tests::{flag, publisher};
use serde_json::{Value, json};

/// Clients of the swap and the soak.
const CLIENTS: usize = 32;
/// The admin token of the swap's server (its environment variable's name).
const ADMIN_TOKEN_ENV: &str = "GATEHOUSE_BENCH_ADMIN_TOKEN";
const ADMIN_TOKEN: &str = "bench-operator-token-4b1d9e0c7a2f";

fn main() {
    gatehouse_tests::cli::run_gatehouse_child();
    let only = flag("--only");
    let selected = |part: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|name| name == part))
    };
    let adapters: usize = flag("--adapters").map_or(100, |n| n.parse().expect("--adapters N"));
    let calls: u64 = flag("--calls").map_or(1_000_000, |n| n.parse().expect("--calls N"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut report = serde_json::Map::new();
    if selected("startup") {
        report.insert("startup".into(), startup(dir.path(), adapters, &runtime));
    }
    if selected("swap") {
        report.insert("swap".into(), swap(dir.path(), &runtime));
    }
    if selected("soak") {
        report.insert("soak".into(), soak(dir.path(), calls, &runtime));
    }
    if let Some(path) = flag("--json") {
        std::fs::write(&path, serde_json::to_vec_pretty(&report).expect("json"))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        println!("wrote {path}");
    }
}

/// The operator config of every server here: the test publisher trusted, every tool visible,
/// the state store and the compile cache in `dir`.
fn host_config(dir: &Path, name: &str) -> HostConfig {
    let mut config = gatehouse_tests::config(&["gatehouse.*"], &["test.*"]);
    config.sandbox.max_concurrent_calls = 64;
    config.store.path = Some(dir.join(format!("{name}.db")));
    config.cache.enabled = true;
    config.cache.dir = Some(dir.join(format!("{name}.cache")));
    config
}

/// The echo component, made distinct by a custom section holding `n`, signed as adapter `id`.
fn distinct_echo(id: &str, n: u32) -> Vec<u8> {
    const NAME: &[u8] = b"gatehouse-bench";
    let mut bytes = ECHO.bytes();
    // A custom section (id 0) appended to the component: its size, then the name (length
    // first), then the payload. Both sizes are below 128, one LEB128 byte each.
    bytes.push(0);
    bytes.push(u8::try_from(1 + NAME.len() + 4).expect("a small section"));
    bytes.push(u8::try_from(NAME.len()).expect("a short name"));
    bytes.extend_from_slice(NAME);
    bytes.extend_from_slice(&n.to_le_bytes());
    let mut manifest = ECHO.manifest();
    let Manifest::Adapter(adapter) = &mut manifest else {
        panic!("echo is an adapter")
    };
    adapter.id = id.to_owned();
    gatehouse_host::plugin::pack(&bytes, &manifest, publisher()).expect("packs")
}

fn startup(dir: &Path, adapters: usize, runtime: &tokio::runtime::Runtime) -> Value {
    println!(
        "start-up: {adapters} signed adapters (distinct components), spawn until the MCP port accepts"
    );
    let plugins: Vec<(&str, Vec<u8>)> = (0..adapters)
        .map(|n| {
            let n = u32::try_from(n).expect("a few adapters");
            (
                "--adapter",
                distinct_echo(&format!("gatehouse.echo{n:03}"), n),
            )
        })
        .collect();
    let config = host_config(dir, "startup");
    let run = |name: &str, plugins: &[(&str, Vec<u8>)]| {
        let port = gatehouse_tests::free_port();
        Server::start(
            &mut load::serve_command(dir, name, &config, port, "", plugins),
            port,
        )
    };
    // Twice: the first run fills the cache.
    let one = [("--adapter", ECHO.signed())];
    drop(run("startup-one", &one));
    let (_, baseline) = run("startup-one", &one);
    println!("  one adapter, warm cache:       {:>8.1} ms", ms(baseline));
    let (server, cold) = run("startup", &plugins);
    println!("  {adapters} adapters, empty cache:   {:>8.1} ms", ms(cold));
    drop(server);
    let mut warm = Vec::new();
    for _ in 0..3 {
        let (server, took) = run("startup", &plugins);
        println!("  {adapters} adapters, warm cache:    {:>8.1} ms", ms(took));
        warm.push(took);
        let listed = runtime.block_on(list_tools(server.port));
        let served = (0..adapters)
            .filter(|n| listed.contains(&format!("gatehouse.echo{n:03}.echo")))
            .count();
        assert_eq!(
            served, adapters,
            "every adapter's tool is listed: {listed:?}"
        );
    }
    warm.sort_unstable();
    json!({
        "adapters": adapters,
        "one_adapter_warm_ms": ms(baseline),
        "cold_ms": ms(cold),
        "warm_ms": warm.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
        "warm_median_ms": ms(warm[warm.len() / 2]),
    })
}

/// The tool names `tools/list` answers on loopback `port`.
async fn list_tools(port: u16) -> Vec<String> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }).to_string();
    let (status, _, body) = gatehouse_tests::mcp::mcp_post(port, "/mcp", &[], body).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    answer["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

fn swap(dir: &Path, runtime: &tokio::runtime::Runtime) -> Value {
    println!(
        "policy swap: {CLIENTS} clients on echo, test.policy-probe 1.0.0 -> 2.0.0 pushed through the admin API after 1 s"
    );
    let mut config = host_config(dir, "swap");
    config.pipeline.policies.push(gatehouse_tests::bind(
        "test.policy-probe",
        "*",
        0,
        json!({ "verdict": "allow" }),
    ));
    let (port, admin_port) = (gatehouse_tests::free_port(), gatehouse_tests::free_port());
    let admin = format!(
        "[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n[[admin.token]]\nprincipal = \"bench-operator\"\n\
         roles = [\"operator\"]\nenv = \"{ADMIN_TOKEN_ENV}\"\n"
    );
    let plugins = [
        ("--adapter", ECHO.signed()),
        ("--policy", POLICY_PROBE.signed_as_version("1.0.0")),
    ];
    let mut command = load::serve_command(dir, "swap", &config, port, &admin, &plugins);
    command.env(ADMIN_TOKEN_ENV, ADMIN_TOKEN);
    let (server, progress) = start_warm(&mut command, port, Duration::from_millis(500), runtime);

    let v2 = POLICY_PROBE.signed_as_version("2.0.0");
    let (calls, pushed_at, acknowledged_at, push) = runtime.block_on(async {
        let clients = {
            let progress = Arc::clone(&progress);
            tokio::spawn(async move {
                load::drive(
                    port,
                    Call::Echo,
                    CLIENTS,
                    Until::Elapsed(Duration::from_secs(2)),
                    &progress,
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let pushed_at = gatehouse_host::state::now_ms();
        let started = Instant::now();
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let (status, _, body) = gatehouse_tests::mcp::mcp_post(
            admin_port,
            "/v1/plugins",
            &[
                ("authorization", &auth),
                ("content-type", "application/wasm"),
            ],
            v2,
        )
        .await;
        let push = started.elapsed();
        let acknowledged_at = gatehouse_host::state::now_ms();
        assert_eq!(status, 201, "the push installs 2.0.0: {body}");
        let (latencies, _) = clients.await.expect("clients");
        (latencies.len(), pushed_at, acknowledged_at, push)
    });
    let failed = progress.failed.load(Ordering::Relaxed);
    drop(server);

    // Every call's decision, from the audit log: (recorded at, version).
    let store = rusqlite::Connection::open(dir.join("swap.db")).expect("the store opens");
    let mut statement = store
        .prepare("SELECT at, record FROM audit WHERE kind = 'call' ORDER BY seq")
        .expect("query");
    let decisions: Vec<(u64, String)> = statement
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })
        .expect("rows")
        .map(|row| {
            let (at, record) = row.expect("row");
            let record: Value = serde_json::from_str(&record).expect("a JSON record");
            let version = record["result"]["policy_decision"]["modules"][0]["module"]["version"]
                .as_str()
                .unwrap_or("none")
                .to_owned();
            (u64::try_from(at).expect("a time"), version)
        })
        .collect();
    let installed_at: Option<u64> = store
        .query_row(
            "SELECT max(at) FROM audit WHERE kind = 'plugin'",
            [],
            |row| row.get::<_, Option<i64>>(0),
        )
        .expect("the plugin entry")
        .map(|at| u64::try_from(at).expect("a time"));
    let last_v1 = decisions
        .iter()
        .filter(|(_, v)| v == "1.0.0")
        .map(|(at, _)| *at)
        .max();
    let first_v2 = decisions
        .iter()
        .filter(|(_, v)| v == "2.0.0")
        .map(|(at, _)| *at)
        .min();
    let by = |version: &str| decisions.iter().filter(|(_, v)| v == version).count();
    let relative = |at: Option<u64>, to: u64| at.map(|at| at as f64 - to as f64);
    let report = json!({
        "clients": CLIENTS,
        "calls_during_swap_run": calls,
        "failed_calls": failed,
        "failures": progress.failures(),
        "push_round_trip_ms": ms(push),
        "decided_by_1_0_0": by("1.0.0"),
        "decided_by_2_0_0": by("2.0.0"),
        "decided_by_neither": decisions.len() - by("1.0.0") - by("2.0.0"),
        "last_1_0_0_after_acknowledged_ms": relative(last_v1, acknowledged_at),
        "first_2_0_0_after_pushed_ms": relative(first_v2, pushed_at),
        "installed_after_pushed_ms": relative(installed_at, pushed_at),
        "first_2_0_0_after_installed_ms": installed_at.and_then(|at| relative(first_v2, at)),
    });
    println!(
        "  push round trip {:.1} ms; {calls} calls in the 2 s around it, {failed} failed",
        ms(push)
    );
    println!(
        "  decided by 1.0.0: {}, by 2.0.0: {}, by neither: {}",
        report["decided_by_1_0_0"], report["decided_by_2_0_0"], report["decided_by_neither"]
    );
    println!(
        "  last call decided by 1.0.0 recorded {} ms after the push was acknowledged (target <= 100); first by 2.0.0 {} ms after it was sent",
        report["last_1_0_0_after_acknowledged_ms"], report["first_2_0_0_after_pushed_ms"]
    );
    println!(
        "  the install was recorded {} ms after the push was sent; the first call decided by 2.0.0 {} ms after that",
        report["installed_after_pushed_ms"], report["first_2_0_0_after_installed_ms"]
    );
    report
}

fn soak(dir: &Path, calls: u64, runtime: &tokio::runtime::Runtime) -> Value {
    println!("soak: {calls} echo calls at {CLIENTS} clients, the server's RSS every tenth");
    let port = gatehouse_tests::free_port();
    let config = host_config(dir, "soak");
    let mut command = load::serve_command(
        dir,
        "soak",
        &config,
        port,
        "",
        &[("--adapter", ECHO.signed())],
    );
    let (server, progress) = start_warm(&mut command, port, Duration::from_secs(1), runtime);
    let warmed = progress.calls.load(Ordering::Relaxed);
    let start_rss = server.rss_mib();
    println!(
        "  {:>9} calls  {:>8.1} MiB  (after a 1 s warm-up of {warmed} calls)",
        0, start_rss
    );
    let mut samples = vec![json!({ "calls": 0, "rss_mib": start_rss, "seconds": 0.0 })];
    let cpu_before = server.cpu_seconds();
    let started = Instant::now();
    let (latencies, elapsed) = runtime.block_on(async {
        let clients = {
            let progress = Arc::clone(&progress);
            tokio::spawn(async move {
                load::drive(port, Call::Echo, CLIENTS, Until::Calls(calls), &progress).await
            })
        };
        let step = (calls / 10).max(1);
        let mut next = step;
        while next <= calls {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let done = progress.calls.load(Ordering::Relaxed) - warmed;
            if done >= next || clients.is_finished() {
                let rss = server.rss_mib();
                let seconds = started.elapsed().as_secs_f64();
                println!("  {done:>9} calls  {rss:>8.1} MiB  {seconds:>6.1} s");
                samples.push(json!({ "calls": done, "rss_mib": rss, "seconds": seconds }));
                next += step;
            }
        }
        clients.await.expect("clients")
    });
    let cpu_after = server.cpu_seconds();
    let failed = progress.failed.load(Ordering::Relaxed);
    assert_eq!(failed, 0, "{:#?}", progress.failures());
    let cpu = (cpu_after.0 - cpu_before.0) + (cpu_after.1 - cpu_before.1);
    let done = latencies.len() as f64;
    let end_rss = server.rss_mib();
    println!(
        "  {:.0} calls/s, {:.1} us CPU per call; RSS {start_rss:.1} -> {end_rss:.1} MiB",
        done / elapsed.as_secs_f64(),
        cpu * 1e6 / done
    );
    json!({
        "clients": CLIENTS,
        "calls": latencies.len(),
        "calls_per_s": done / elapsed.as_secs_f64(),
        "server_cpu_us_per_call": cpu * 1e6 / done,
        "rss": samples,
    })
}

/// Starts the server `command` runs on MCP port `port` and warms it up with echo calls from
/// [`CLIENTS`] clients for `warm_up`: the server, and the clients' progress (to go on with).
fn start_warm(
    command: &mut std::process::Command,
    port: u16,
    warm_up: Duration,
    runtime: &tokio::runtime::Runtime,
) -> (Server, Arc<Progress>) {
    let (server, _) = Server::start(command, port);
    let progress = Arc::new(Progress::default());
    runtime.block_on(load::drive(
        port,
        Call::Echo,
        CLIENTS,
        Until::Elapsed(warm_up),
        &progress,
    ));
    (server, progress)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
