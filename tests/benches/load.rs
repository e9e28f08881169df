//! Load: `gatehouse serve` against a native hyper floor, under 1, 8 and 32 concurrent
//! kept-alive HTTP/1.1 MCP clients (POST `tools/call`, JSON response).
//!
//! 1. The bare cost: `Host::call` of the echo tool in this process (every gate, a fresh
//!    instance, the envelope), its CPU per call from this thread's own CPU time.
//! 2. The floor: this binary again as a separate process, a minimal hyper HTTP/1.1 server
//!    that parses each JSON-RPC request and answers it with a canned `tools/call` result.
//! 3. `gatehouse serve` as a separate process (this binary again, running the `gatehouse`
//!    binary's entry point, built in this workspace's bench profile), one process per
//!    scenario: (a) read-only echo; (b) echo from clients that hold a session id
//!    (`Mcp-Session-Id`, as every official SDK client does: each call registered for
//!    `notifications/cancelled`); (c) echo with the `gatehouse.baseline` policy bound to
//!    every call; (d) the write-class `test.ledger.transfer` with a fresh idempotency key per
//!    call (a durable claim and a recorded result in the SQLite store); (e) (c) from clients
//!    that hold a session id, each session first filled with about 1,000 actions (issue 58:
//!    the policy sees the session's latest actions and its labels; echo's results carry
//!    `untrusted`, joined once).
//! 4. Each server under 1, 8 and 32 clients (tasks of this process, one connection each):
//!    calls/s, p50/p99 latency, server CPU per call (the server process's utime + stime from
//!    `/proc/<pid>/stat` over the measured window, divided by the calls; in the JSON also split
//!    into user and kernel time; of it, the store's writer thread) and its RSS after the row.
//!    Every answer is checked (HTTP 200, `"isError":false`).
//! 5. The floor again at 32 clients, paced to echo's calls/s at 32 clients: the floor's CPU per
//!    call at the rate the MCP layer is measured at. At its own rate (about 4x echo's) each
//!    wakeup of its workers and each `epoll_wait` serves more calls, so its CPU per call is
//!    lower than at echo's.
//!
//! Prints a table and, with `--json PATH`, writes the figures as JSON; then issue 29's targets,
//! each a ratio within this run at 32 clients:
//! - the audit append: the store's writer CPU per echo call over the bare call's;
//! - the MCP layer: echo − floor − bare − writer, over the floor; and the same with the floor
//!   at echo's rate, over that floor;
//! - echo over (floor + bare + writer), and echo with the policy over (floor + bare with the
//!   policy + its writer); echo's again with the floor at echo's rate;
//! - echo's p99 at 32 clients, and its p50 at 1 client against the floor's p50 + 1.5x bare.
//!
//! The bare call's figure is its own thread's: the store's writer thread, which the server's
//! figure includes, is not in it. A gatehouse server whose writer thread is not found fails the
//! run: its share would otherwise read as 0.
//!
//! Run: `cargo bench -p gatehouse-tests --bench load -- [--seconds N] [--json PATH] [--only
//! SCENARIO,...]` (`--seconds` per row, default 3: a run takes about a minute; `--only` runs the
//! floor, the bare call and the named scenarios: `echo`, `echo+session`, `echo+policy`,
//! `echo+policy+session`, `write+idempotency`).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gatehouse_host::{Host, HostConfig};
use gatehouse_tests::artifacts::{BASELINE, ECHO, LEDGER};
use gatehouse_tests::flag;
use gatehouse_tests::load::{self, Call, Pace, Progress, Server, Until};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use wasmtime_wasi_http::io::TokioIo;

/// Set in the floor server process: the loopback port to serve on.
const FLOOR: &str = "GATEHOUSE_BENCH_LOAD_FLOOR";
/// The name of the SQLite store's writer thread: its CPU (the audit log's inserts, their
/// hashes and the WAL's writes and fsyncs) is reported on its own, part of the server's.
const STORE_THREAD: &str = "gatehouse-store";
/// The concurrency levels of every server.
const CLIENTS: [usize; 3] = [1, 8, CONCURRENT];
/// The concurrency at which the targets are read.
const CONCURRENT: usize = 32;
/// The row of the floor paced to echo's calls/s at [`CONCURRENT`] clients.
const PACED_FLOOR: &str = "floor at echo's rate";
/// The scenario whose clients' sessions hold [`SESSION_ACTIONS`] actions before it is measured.
const SESSIONS: &str = "echo+policy+session";
/// About how many actions each client's session holds before it is measured.
const SESSION_ACTIONS: u64 = 1_000;
/// Warm-up before each measured window: connections open, instance slots and caches warm.
const WARM_UP: Duration = Duration::from_millis(500);

fn main() {
    gatehouse_tests::cli::run_gatehouse_child();
    if let Ok(port) = std::env::var(FLOOR) {
        floor_server(port.parse().expect("the floor's port"));
        return;
    }
    let seconds: f64 = flag("--seconds").map_or(3.0, |s| s.parse().expect("--seconds N"));
    let window = Duration::from_secs_f64(seconds);
    let json_path = flag("--json");
    let only = flag("--only");
    let selected = |scenario: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|name| name == scenario))
    };
    let dir = tempfile::tempdir().expect("temp dir");

    let bare_us = bare_call_cpu_us(window, false);
    let bare_policy_us = bare_call_cpu_us(window, true);
    println!(
        "bare Host::call (echo, fresh instance) in process: {bare_us:.1} us CPU per call; \
         with the baseline policy {bare_policy_us:.1} us"
    );
    println!(
        "{:<22} {:>7} {:>9} {:>9} {:>9} {:>12} {:>9} {:>9}",
        "server", "clients", "calls/s", "p50 us", "p99 us", "cpu us/call", "store us", "rss MiB"
    );
    let mut rows = Vec::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let port = gatehouse_tests::free_port();
    let (floor, _) = Server::start(
        Command::new(std::env::current_exe().expect("this binary"))
            .env(FLOOR, port.to_string())
            .stdout(Stdio::null()),
        port,
    );
    rows.extend(measure(&floor, "floor", None, Call::Echo, window, &runtime));

    for (scenario, call, policy) in [
        ("echo", Call::Echo, false),
        ("echo+session", Call::EchoInSession, false),
        ("echo+policy", Call::Echo, true),
        (SESSIONS, Call::EchoInSession, true),
        ("write+idempotency", Call::Transfer, false),
    ]
    .into_iter()
    .filter(|(scenario, ..)| selected(scenario))
    {
        let port = gatehouse_tests::free_port();
        let (server, _) = Server::start(&mut serve(dir.path(), scenario, port, policy), port);
        if scenario == SESSIONS {
            fill_sessions(&server, &runtime);
        }
        let writer = Some(STORE_THREAD);
        rows.extend(measure(&server, scenario, writer, call, window, &runtime));
    }

    // A figure of `server`'s row at `clients`.
    let at = |rows: &[Value], server: &str, clients: usize, field: &str| {
        rows.iter()
            .find(|r| r["server"] == server && r["clients"] == clients)
            .and_then(|r| r[field].as_f64())
            .unwrap_or(f64::NAN)
    };
    // The floor again, its clients paced to echo's calls/s: its CPU per call at the rate the
    // MCP layer is measured at, where the floor's own rate spreads its per-wakeup costs over
    // more calls.
    let echo_rate = at(&rows, "echo", CONCURRENT, "calls_per_s");
    if echo_rate.is_finite() {
        let load = (CONCURRENT, Pace::CallsPerSecond(echo_rate));
        rows.push(measure_at(
            &floor,
            PACED_FLOOR,
            None,
            Call::Echo,
            load,
            window,
            &runtime,
        ));
    }
    drop(floor);
    let at = |server: &str, clients: usize, field: &str| at(&rows, server, clients, field);
    let cpu = |server: &str| at(server, CONCURRENT, "server_cpu_us_per_call");
    let writer = |server: &str| at(server, CONCURRENT, "store_writer_cpu_us_per_call");
    let mcp_layer_us = cpu("echo") - cpu("floor") - bare_us - writer("echo");
    let mcp_layer_paced_us = cpu("echo") - cpu(PACED_FLOOR) - bare_us - writer("echo");
    let targets = json!({
        "writer_over_bare": writer("echo") / bare_us,
        "mcp_layer_us": mcp_layer_us,
        "mcp_layer_over_floor": mcp_layer_us / cpu("floor"),
        "mcp_layer_at_echo_rate_us": mcp_layer_paced_us,
        "mcp_layer_at_echo_rate_over_floor": mcp_layer_paced_us / cpu(PACED_FLOOR),
        "echo_over_parts": cpu("echo") / (cpu("floor") + bare_us + writer("echo")),
        "echo_over_parts_at_echo_rate": cpu("echo")
            / (cpu(PACED_FLOOR) + bare_us + writer("echo")),
        "echo_policy_over_parts": cpu("echo+policy")
            / (cpu("floor") + bare_policy_us + writer("echo+policy")),
        "session_over_echo": cpu("echo+session") / cpu("echo"),
        "session_1000_minus_policy_cpu_us": cpu(SESSIONS) - cpu("echo+policy"),
        "session_1000_minus_policy_p50_1_client_us": at(SESSIONS, 1, "p50_us")
            - at("echo+policy", 1, "p50_us"),
        "session_1000_minus_policy_writer_us": writer(SESSIONS) - writer("echo+policy"),
        "echo_p99_us": at("echo", CONCURRENT, "p99_us"),
        "echo_p50_1_client_us": at("echo", 1, "p50_us"),
        "echo_p50_1_client_limit_us": at("floor", 1, "p50_us") + 1.5 * bare_us,
    });
    let target = |name: &str| targets[name].as_f64().unwrap_or(f64::NAN);
    println!("targets at {CONCURRENT} clients (issue 29):");
    println!(
        "  audit append: writer {:.1} us = {:.2}x bare [<= 0.35]",
        writer("echo"),
        target("writer_over_bare")
    );
    println!(
        "  MCP layer: {:.1} us = {:.2}x the floor [<= 1]",
        target("mcp_layer_us"),
        target("mcp_layer_over_floor")
    );
    println!(
        "    against the floor at echo's rate: {:.1} us = {:.2}x that floor",
        target("mcp_layer_at_echo_rate_us"),
        target("mcp_layer_at_echo_rate_over_floor")
    );
    println!(
        "  echo {:.2}x (floor + bare + writer) [<= 1.5]; with the policy {:.2}x [<= 1.5]",
        target("echo_over_parts"),
        target("echo_policy_over_parts")
    );
    println!(
        "    with the floor at echo's rate: echo {:.2}x",
        target("echo_over_parts_at_echo_rate")
    );
    println!(
        "  a session id's cost: echo+session {:.2}x echo",
        target("session_over_echo")
    );
    println!(
        "  a session of {SESSION_ACTIONS} actions (issue 58): +{:.1} us p50 at 1 client [<= 10], \
         +{:.1} us CPU, +{:.1} us store writer per call over echo+policy",
        target("session_1000_minus_policy_p50_1_client_us"),
        target("session_1000_minus_policy_cpu_us"),
        target("session_1000_minus_policy_writer_us"),
    );
    println!(
        "  echo p99 {:.0} us [< 5000]; p50 at 1 client {:.0} us [<= {:.0}: floor p50 + 1.5x bare]",
        target("echo_p99_us"),
        target("echo_p50_1_client_us"),
        target("echo_p50_1_client_limit_us")
    );
    if let Some(path) = json_path {
        let report = json!({
            "seconds_per_row": seconds,
            "cpus": std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
            "bare_host_call_cpu_us": bare_us,
            "bare_host_call_with_policy_cpu_us": bare_policy_us,
            "rows": rows,
            "targets_at_32_clients": targets,
        });
        std::fs::write(&path, serde_json::to_vec_pretty(&report).expect("json"))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        println!("wrote {path}");
    }
}

/// `Host::call` of the echo tool (with `policy`, behind the baseline policy) in a loop on this
/// thread for `window`: this thread's CPU time (ns, from `/proc/thread-self/schedstat`) per
/// call, in microseconds.
fn bare_call_cpu_us(window: Duration, policy: bool) -> f64 {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let host = Host::new(host_config(None, policy)).expect("host");
        host.install_adapter(&ECHO.signed()).expect("echo loads");
        if policy {
            host.install_policy(&BASELINE.signed())
                .expect("the baseline loads");
        }
        let run = |window: Duration| {
            let started = Instant::now();
            let before = thread_cpu_ns();
            let mut calls = 0u64;
            while started.elapsed() < window {
                let result = runtime.block_on(gatehouse_tests::echo(&host, "hi"));
                assert!(result.is_ok(), "{result:#?}");
                calls += 1;
            }
            (thread_cpu_ns() - before) as f64 / 1_000.0 / calls as f64
        };
        run(WARM_UP);
        run(window)
    })
    .join()
    .expect("the bare-call thread")
}

fn thread_cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat's first field")
}

/// The operator config of every gatehouse process (and the bare host): the test publisher
/// trusted, every tool visible, 64 concurrent calls, the state store at `store`.
fn host_config(store: Option<std::path::PathBuf>, policy: bool) -> HostConfig {
    let mut config = gatehouse_tests::config(&["gatehouse.*", "test.*"], &["gatehouse.*"]);
    config.sandbox.max_concurrent_calls = 64;
    if let Some(store) = store {
        config.store.path = Some(store);
    }
    if policy {
        config.pipeline.policies.push(gatehouse_tests::bind(
            "gatehouse.baseline",
            "*",
            0,
            json!({}),
        ));
    }
    config
}

/// `gatehouse serve` for one scenario: echo and the ledger, and with `policy` the baseline
/// policy bound to every call (for [`SESSIONS`], echo's results labelled `untrusted`); its
/// config, store and plugins in `dir`.
fn serve(dir: &std::path::Path, scenario: &str, port: u16, policy: bool) -> Command {
    let mut config = host_config(Some(dir.join(format!("{scenario}.db"))), policy);
    if scenario == SESSIONS {
        config
            .sessions
            .labels
            .push(gatehouse_host::config::LabelRule {
                tools: gatehouse_tests::glob("gatehouse.echo.*"),
                produces: vec!["untrusted".to_owned()],
                sends: Vec::new(),
            });
    }
    let mut plugins = vec![("--adapter", ECHO.signed()), ("--adapter", LEDGER.signed())];
    if policy {
        plugins.push(("--policy", BASELINE.signed()));
    }
    load::serve_command(dir, scenario, &config, port, "", &plugins)
}

/// Fills each client's session: [`CONCURRENT`] clients back to back until together they sent
/// [`SESSION_ACTIONS`] calls each.
fn fill_sessions(server: &Server, runtime: &tokio::runtime::Runtime) {
    let progress = Arc::new(Progress::default());
    let until = Until::Calls(SESSION_ACTIONS * CONCURRENT as u64);
    runtime.block_on(load::drive_paced(
        server.port,
        Call::EchoInSession,
        CONCURRENT,
        until,
        Pace::BackToBack,
        &progress,
    ));
    assert_eq!(
        progress.failed.load(Ordering::Relaxed),
        0,
        "{:#?}",
        progress.failures()
    );
}

/// One row per concurrency level, clients back to back (see [`measure_at`]).
fn measure(
    server: &Server,
    name: &str,
    writer: Option<&str>,
    call: Call,
    window: Duration,
    runtime: &tokio::runtime::Runtime,
) -> Vec<Value> {
    CLIENTS
        .iter()
        .map(|&clients| {
            let load = (clients, Pace::BackToBack);
            measure_at(server, name, writer, call, load, window, runtime)
        })
        .collect()
}

/// One row: `clients` at `pace` warm up, then are measured for `window`. Every call must
/// succeed. `writer` names the server's store writer thread, whose CPU is reported on its own.
fn measure_at(
    server: &Server,
    name: &str,
    writer: Option<&str>,
    call: Call,
    (clients, pace): (usize, Pace),
    window: Duration,
    runtime: &tokio::runtime::Runtime,
) -> Value {
    let progress = Arc::new(Progress::default());
    let drive = |time: Duration| {
        let until = Until::Elapsed(time);
        runtime.block_on(load::drive_paced(
            server.port,
            call,
            clients,
            until,
            pace,
            &progress,
        ))
    };
    drive(WARM_UP);
    let cpu_before = server.cpu_seconds();
    let writer_cpu = || writer.map_or(0.0, |name| server.thread_cpu_seconds(name));
    let store_before = writer_cpu();
    let (mut latencies, elapsed) = drive(window);
    let cpu_after = server.cpu_seconds();
    let store = writer_cpu() - store_before;
    assert_eq!(
        progress.failed.load(Ordering::Relaxed),
        0,
        "{name} at {clients} clients: {:#?}",
        progress.failures()
    );
    let (user, system) = (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1);
    let cpu = user + system;
    latencies.sort_unstable();
    let calls = latencies.len();
    let row = json!({
        "server": name,
        "clients": clients,
        "calls": calls,
        "calls_per_s": calls as f64 / elapsed.as_secs_f64(),
        "p50_us": load::quantile(&latencies, 0.50).as_secs_f64() * 1e6,
        "p99_us": load::quantile(&latencies, 0.99).as_secs_f64() * 1e6,
        "server_cpu_us_per_call": cpu * 1e6 / calls as f64,
        "server_user_us_per_call": user * 1e6 / calls as f64,
        "server_system_us_per_call": system * 1e6 / calls as f64,
        "store_writer_cpu_us_per_call": store * 1e6 / calls as f64,
        "rss_mib": server.rss_mib(),
    });
    println!(
        "{:<22} {:>7} {:>9.0} {:>9.0} {:>9.0} {:>12.1} {:>9.1} {:>9.1}",
        name,
        clients,
        row["calls_per_s"].as_f64().unwrap_or_default(),
        row["p50_us"].as_f64().unwrap_or_default(),
        row["p99_us"].as_f64().unwrap_or_default(),
        row["server_cpu_us_per_call"].as_f64().unwrap_or_default(),
        row["store_writer_cpu_us_per_call"]
            .as_f64()
            .unwrap_or_default(),
        row["rss_mib"].as_f64().unwrap_or_default(),
    );
    row
}

/// The floor: hyper HTTP/1.1 on loopback `port`, each request's body read and parsed as
/// JSON-RPC, answered with a canned echo `tools/call` result carrying the request's id.
fn floor_server(port: u16) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            stream.set_nodelay(true).expect("nodelay");
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    |request: hyper::Request<hyper::body::Incoming>| async move {
                        let body = request.into_body().collect().await?.to_bytes();
                        let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let answer = json!({
                            "jsonrpc": "2.0",
                            "id": call["id"],
                            "result": {
                                "content": [{ "type": "text", "text": "hi" }],
                                "structuredContent": { "message": "hi" },
                                "isError": false,
                            },
                        });
                        let response = hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(answer.to_string())))
                            .expect("a canned response builds");
                        Ok::<_, hyper::Error>(response)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}
