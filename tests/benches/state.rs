//! Write-class calls with durable idempotency and audit: `test.ledger.transfer` (an
//! echo-sized `act` capability) through `Host::call`, every call with a fresh idempotency key,
//! so each one claims its key (a durable write) and records its result and audit entry (a
//! second durable write) before it returns. Concurrent callers share commits (group commit).
//!
//! Rows: the embedded SQLite store with 1 and 32 callers; then, when PostgreSQL's server
//! binaries are installed, a PostgreSQL server started for the run (in a temporary directory,
//! `fsync` on) with 32 callers in one gateway process, and 32 callers split over two gateway
//! processes (16 each, this binary started twice as a child) sharing the database. Reports
//! calls/s, p50 and p99 latency.
//!
//! Run: `cargo bench -p gatehouse-tests --bench state` (`-- --seconds N` to measure longer).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_host::config::StoreConfig;
use gatehouse_host::{Host, HostConfig, ToolCallEnvelope};
use gatehouse_tests::artifacts::LEDGER;
use gatehouse_tests::config;
use serde_json::json;

/// Set in a child gateway process: `url callers seconds`.
const CHILD: &str = "GATEHOUSE_BENCH_STATE_CHILD";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(spec) = std::env::var(CHILD) {
        // A child gateway: measure, then print the latencies (µs), one line of JSON.
        let parts: Vec<&str> = spec.split(' ').collect();
        let (url, callers, seconds) = (
            parts[0],
            parts[1].parse().expect("callers"),
            parts[2].parse().expect("seconds"),
        );
        let host = host(Some(url));
        runtime.block_on(run(&host, callers, Duration::from_millis(500)));
        let (_, latencies, _) = runtime.block_on(run(&host, callers, Duration::from_secs(seconds)));
        let micros: Vec<u64> = latencies.iter().map(|d| d.as_micros() as u64).collect();
        println!("{}", json!(micros));
        return;
    }
    let seconds: u64 = std::env::args()
        .skip_while(|a| a != "--seconds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!("write-class calls (test.ledger.transfer, fresh key each), {seconds} s per row");
    println!(
        "{:<28} {:>8} {:>10} {:>10} {:>10}",
        "store", "callers", "calls/s", "p50", "p99"
    );
    let sqlite = host(None);
    for callers in [1usize, 32] {
        runtime.block_on(run(&sqlite, callers, Duration::from_millis(500)));
        let (calls, latencies, elapsed) =
            runtime.block_on(run(&sqlite, callers, Duration::from_secs(seconds)));
        row("sqlite", callers, calls, elapsed, latencies);
    }
    drop(sqlite);

    if !gatehouse_tests::postgres::installed() {
        println!("postgresql: not installed; its rows are skipped");
        return;
    }
    let pg = gatehouse_tests::postgres::Postgres::start();
    let url = pg.url();
    {
        let one = host(Some(&url));
        runtime.block_on(run(&one, 32, Duration::from_millis(500)));
        let (calls, latencies, elapsed) =
            runtime.block_on(run(&one, 32, Duration::from_secs(seconds)));
        row("postgres, 1 gateway", 32, calls, elapsed, latencies);
    }
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().expect("this binary"))
                .env(CHILD, format!("{url} 16 {seconds}"))
                .stdout(Stdio::piped())
                .spawn()
                .expect("a child gateway starts")
        })
        .collect();
    let mut latencies = Vec::new();
    for child in children {
        let output = child.wait_with_output().expect("the child gateway ends");
        assert!(output.status.success(), "a child gateway failed");
        let micros: Vec<u64> =
            serde_json::from_slice(&output.stdout).expect("the child's latencies");
        latencies.extend(micros.into_iter().map(Duration::from_micros));
    }
    // Both children measure the same window, at the same time (after the same warm-up).
    let calls = latencies.len();
    row(
        "postgres, 2 gateways",
        32,
        calls,
        Duration::from_secs(seconds),
        latencies,
    );
}

fn host(url: Option<&str>) -> Arc<Host> {
    let mut config: HostConfig = config(&["test.*"], &[]);
    config.sandbox.max_concurrent_calls = 64;
    if let Some(url) = url {
        config.store = StoreConfig {
            url: Some(url.to_owned()),
            ..StoreConfig::default()
        };
    }
    let host = Arc::new(Host::new(config).expect("host builds"));
    host.install_adapter(&LEDGER.signed()).expect("loads");
    host
}

fn row(store: &str, callers: usize, calls: usize, elapsed: Duration, mut latencies: Vec<Duration>) {
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{store:<28} {callers:>8} {:>10.0} {:>10.2?} {:>10.2?}",
        calls as f64 / elapsed.as_secs_f64(),
        at(0.50),
        at(0.99)
    );
}

/// `callers` tasks calling in a loop for `window`: (calls, latencies, elapsed).
async fn run(
    host: &Arc<Host>,
    callers: usize,
    window: Duration,
) -> (usize, Vec<Duration>, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let host = Arc::clone(host);
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = 0u64;
                while started.elapsed() < window {
                    let call = ToolCallEnvelope::new(
                        "default",
                        "test.ledger.transfer",
                        json!({ "amount": 1, "currency": "EUR" }),
                    )
                    .with_idempotency_key(format!(
                        "bench-{}-{caller}-{n}-{}",
                        std::process::id(),
                        gatehouse_tests::unique()
                    ));
                    let begun = Instant::now();
                    let result = host.call(call).await;
                    latencies.push(begun.elapsed());
                    assert!(result.is_ok(), "{result:#?}");
                    n += 1;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("caller task"));
    }
    (latencies.len(), latencies, started.elapsed())
}
