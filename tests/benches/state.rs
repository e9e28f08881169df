//! Write-class calls with durable idempotency and audit: `test.ledger.transfer` (an
//! echo-sized `act` capability) through `Host::call`, every call with a fresh idempotency key,
//! so each one claims its key (a durable write) and records its result and audit entry (a
//! second durable write) before it returns. Concurrent callers share commits (group commit).
//!
//! Reports, for 1 and 32 concurrent callers: calls/s, p50 and p99 latency, and the mean number
//! of calls per fsync'd commit.
//!
//! Run: `cargo bench -p gatehouse-tests --bench state` (`-- --seconds N` to measure longer).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_host::{Host, ToolCallEnvelope};
use gatehouse_tests::artifacts::LEDGER;
use gatehouse_tests::config;
use serde_json::json;

fn main() {
    let seconds: u64 = std::env::args()
        .skip_while(|a| a != "--seconds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut config = config(&["test.*"], &[]);
    config.sandbox.max_concurrent_calls = 64;
    let host = Arc::new(Host::new(config).expect("host builds"));
    host.install_adapter(&LEDGER.signed()).expect("loads");
    println!("write-class calls (test.ledger.transfer, fresh key each), {seconds} s per row");
    println!(
        "{:>8} {:>10} {:>10} {:>10}",
        "callers", "calls/s", "p50", "p99"
    );
    for callers in [1usize, 32] {
        runtime.block_on(run(&host, callers, Duration::from_millis(500)));
        let (calls, mut latencies, elapsed) =
            runtime.block_on(run(&host, callers, Duration::from_secs(seconds)));
        latencies.sort_unstable();
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        println!(
            "{callers:>8} {:>10.0} {:>10.2?} {:>10.2?}",
            calls as f64 / elapsed.as_secs_f64(),
            at(0.50),
            at(0.99)
        );
    }
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
                        "bench-{caller}-{n}-{}",
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
