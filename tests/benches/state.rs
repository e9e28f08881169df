//! Write-class calls with durable idempotency and audit: `test.ledger.transfer` (an
//! echo-sized `act` capability) through `Host::call`, every call with a fresh idempotency key,
//! so each one claims its key (a durable write) and records its result and audit entry (a
//! second durable write) before it returns. Concurrent callers share commits (group commit).
//!
//! Rows: the embedded SQLite store with 1 and 32 callers; then, when PostgreSQL's server
//! binaries are installed, a PostgreSQL server started for the run (in a temporary directory,
//! `fsync` on) with 32 callers in one gateway process, and 32 callers split over two gateway
//! processes (16 each, this binary started twice as a child) sharing the database. The two
//! PostgreSQL rows again with the database at a distance: a loopback proxy written for the
//! bench holds every byte 2 ms each way. Callers call as 8 tenants (caller `i` as `t{i % 8}`);
//! the two gateways split them, 4 tenants each, as a router that keeps a tenant on one gateway
//! would. Reports calls/s, p50 and p99 latency.
//!
//! After each set of gateways, the bench checks what they wrote: every audit chain verifies,
//! and each gateway's calls completed exactly one idempotency record each (no effect twice,
//! none lost). A failed check fails the bench.
//!
//! Run: `cargo bench -p gatehouse-tests --bench state` (`-- --seconds N` to measure longer;
//! `-- --only distance` for the rows at a distance alone; `-- --callers N` for N callers in the
//! PostgreSQL rows, 32 by default; `-- --writers N` for each gateway's write connections per
//! kind of write and `-- --chains N` for the audit chains, `[store] writers`' and `chains`'
//! defaults by default; `-- --gateways N` for N gateways instead of two (4 or 8: each takes
//! as many of the 8 tenants); `-- --per-gateway` to give each of them the callers one had,
//! instead of a share: what more gateways add when each brings load of its own).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gatehouse_host::config::StoreConfig;
use gatehouse_host::state::AuditQuery;
use gatehouse_host::state::postgres::WRITE_LOCK;
use gatehouse_host::{Host, HostConfig, ToolCallEnvelope};
use gatehouse_tests::artifacts::LEDGER;
use gatehouse_tests::postgres::{DelayProxy, Postgres};
use gatehouse_tests::{config, flag};
use serde_json::json;

/// Set in a child gateway process: `url callers seconds first_tenant tenants writers chains`.
const CHILD: &str = "GATEHOUSE_BENCH_STATE_CHILD";
/// Tenants the callers call as.
const TENANTS: usize = 8;
/// The database's distance in the last rows, each way.
const DISTANCE: Duration = Duration::from_millis(2);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(spec) = std::env::var(CHILD) {
        // A child gateway: measure, then print its process id and the latencies (µs), one line
        // of JSON.
        let parts: Vec<&str> = spec.split(' ').collect();
        let (url, callers, seconds, first, count) = (
            parts[0],
            parts[1].parse().expect("callers"),
            parts[2].parse().expect("seconds"),
            parts[3].parse::<usize>().expect("first tenant"),
            parts[4].parse::<usize>().expect("tenants"),
        );
        let store = Store {
            writers: parts[5].parse().expect("writers"),
            chains: parts[6].parse().expect("chains"),
            gateways: 1,
            per_gateway: false,
        };
        let tenants = first..first + count;
        let host = host(Some((url, &store)));
        runtime.block_on(run(&host, callers, &tenants, Duration::from_millis(500)));
        let (_, latencies, _) =
            runtime.block_on(run(&host, callers, &tenants, Duration::from_secs(seconds)));
        let micros: Vec<u64> = latencies.iter().map(|d| d.as_micros() as u64).collect();
        println!(
            "{}",
            json!({ "pid": std::process::id(), "latencies": micros })
        );
        return;
    }
    let seconds: u64 = flag("--seconds").and_then(|s| s.parse().ok()).unwrap_or(5);
    let only_distance = std::env::args().any(|a| a == "distance");
    let callers: usize = flag("--callers").and_then(|s| s.parse().ok()).unwrap_or(32);
    let store = Store {
        writers: flag("--writers")
            .and_then(|s| s.parse().ok())
            .unwrap_or(StoreConfig::default().writers),
        chains: flag("--chains")
            .and_then(|s| s.parse().ok())
            .unwrap_or(StoreConfig::default().chains),
        gateways: flag("--gateways")
            .and_then(|s| s.parse().ok())
            .filter(|n: &usize| *n >= 2 && TENANTS.is_multiple_of(*n))
            .unwrap_or(2),
        per_gateway: std::env::args().any(|a| a == "--per-gateway"),
    };
    println!(
        "write-class calls (test.ledger.transfer, fresh key each), {seconds} s per row; \
         PostgreSQL writers per kind of write: {}; audit chains: {}; {} gateways: {}",
        store.writers,
        store.chains,
        store.gateways,
        if store.per_gateway {
            "the callers each"
        } else {
            "half the callers each"
        }
    );
    println!(
        "{:<28} {:>8} {:>10} {:>10} {:>10}",
        "store", "callers", "calls/s", "p50", "p99"
    );
    if !only_distance {
        let sqlite = host(None);
        for callers in [1usize, 32] {
            runtime.block_on(run(
                &sqlite,
                callers,
                &(0..TENANTS),
                Duration::from_millis(500),
            ));
            let (calls, latencies, elapsed) = runtime.block_on(run(
                &sqlite,
                callers,
                &(0..TENANTS),
                Duration::from_secs(seconds),
            ));
            row("sqlite", callers, calls, elapsed, latencies);
        }
    }

    if !gatehouse_tests::postgres::installed() {
        println!("postgresql: not installed; its rows are skipped");
        return;
    }
    let pg = Postgres::start();
    if !only_distance {
        postgres_rows(
            &runtime,
            "postgres",
            &pg.url(),
            &pg.url(),
            callers,
            &store,
            seconds,
        );
    }
    let proxy = runtime.block_on(DelayProxy::start(pg.port, DISTANCE));
    postgres_rows(
        &runtime,
        "postgres +2 ms",
        &proxy.url(),
        &pg.url(),
        callers,
        &store,
        seconds,
    );
}

/// How the PostgreSQL rows' gateways are set up.
struct Store {
    /// `[store] writers`.
    writers: usize,
    /// `[store] chains`.
    chains: u32,
    /// How many gateways the second row runs (2, 4 or 8: each takes as many of the tenants).
    gateways: usize,
    /// Whether each of them gets the callers one had (else a share).
    per_gateway: bool,
}

/// One gateway with `callers`, then `store.gateways` with a share each (`store.per_gateway`:
/// with `callers` each), on the database at `url`, set up as `store` says; then checks what
/// they wrote.
/// The audit chains' locks are sampled during each row, over `direct` (the database without
/// the proxy).
fn postgres_rows(
    runtime: &tokio::runtime::Runtime,
    name: &str,
    url: &str,
    direct: &str,
    callers: usize,
    store: &Store,
    seconds: u64,
) {
    let one = host(Some((url, store)));
    let each = if store.per_gateway {
        callers
    } else {
        callers / store.gateways
    };
    let share = TENANTS / store.gateways;
    let tenants = 0..TENANTS;
    runtime.block_on(run(&one, callers, &tenants, Duration::from_millis(500)));
    let sampler = LockSampler::start(runtime, direct, store.chains);
    let (calls, latencies, elapsed) =
        runtime.block_on(run(&one, callers, &tenants, Duration::from_secs(seconds)));
    let lock = sampler.stop(runtime);
    row(
        &format!("{name}, 1 gateway"),
        callers,
        calls,
        elapsed,
        latencies,
    );
    println!("{:<28} {lock}", "");

    let children: Vec<_> = (0..TENANTS)
        .step_by(share)
        .map(|first| {
            Command::new(std::env::current_exe().expect("this binary"))
                .env(
                    CHILD,
                    format!(
                        "{url} {each} {seconds} {first} {share} {} {}",
                        store.writers, store.chains
                    ),
                )
                .stdout(Stdio::piped())
                .spawn()
                .expect("a child gateway starts")
        })
        .collect();
    // The children warm up for half a second, then measure.
    std::thread::sleep(Duration::from_millis(500));
    let sampler = LockSampler::start(runtime, direct, store.chains);
    let mut latencies = Vec::new();
    let mut pids = Vec::new();
    for child in children {
        let output = child.wait_with_output().expect("the child gateway ends");
        assert!(output.status.success(), "a child gateway failed");
        let report: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("the child's report");
        let micros: Vec<u64> =
            serde_json::from_value(report["latencies"].clone()).expect("its latencies");
        pids.push(report["pid"].as_u64().expect("its pid"));
        latencies.extend(micros.into_iter().map(Duration::from_micros));
    }
    let lock = sampler.stop(runtime);
    // The children measure the same window, at the same time (after the same warm-up).
    let calls = latencies.len();
    row(
        &format!("{name}, {} gateways", store.gateways),
        each * store.gateways,
        calls,
        Duration::from_secs(seconds),
        latencies,
    );
    println!("{:<28} {lock}", "");

    // What the two wrote: every chain intact; one completed key per call that answered.
    let report = runtime.block_on(one.verify_audit()).expect("the log reads");
    assert_eq!(report.first_break, None, "an audit chain broke");
    let keys = runtime
        .block_on(one.store().keys(false, u64::MAX))
        .expect("the keys read");
    let entries = runtime
        .block_on(one.store().audit(AuditQuery {
            kind: Some("call".to_owned()),
            ..AuditQuery::default()
        }))
        .expect("the log reads");
    for pid in pids {
        let prefix = format!("bench-{pid}-");
        let mine = keys
            .iter()
            .filter(|k| k.key.key.starts_with(&prefix))
            .count();
        let recorded = entries
            .iter()
            .filter(|e| e.event.outcome.as_deref() == Some("OK"))
            .filter(|e| e.event.record.contains(&prefix))
            .count();
        assert_eq!(
            mine, recorded,
            "gateway {pid}: {mine} keys, but {recorded} calls recorded OK under them"
        );
    }
    println!(
        "{:<28} audit chains intact ({} entries in {}); each call's key completed once",
        "",
        report.entries,
        report.heads.len()
    );
}

/// Samples the store's audit chains' locks ([`WRITE_LOCK`] onwards, one per chain) from a
/// session of its own, every millisecond while a row runs: how often a transaction held one,
/// and how often another waited for one.
struct LockSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<[u64; 3]>,
}

impl LockSampler {
    fn start(runtime: &tokio::runtime::Runtime, url: &str, chains: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let url = url.to_owned();
        let stopped = Arc::clone(&stop);
        let task = runtime.spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("the sampler connects");
            tokio::spawn(connection);
            let statement = client
                .prepare(
                    "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) \
                     FROM pg_locks WHERE locktype = 'advisory' \
                       AND classid = ($1::bigint >> 32)::oid \
                       AND objid >= ($1::bigint & 4294967295)::oid \
                       AND objid < (($1::bigint & 4294967295) + $2::bigint)::oid",
                )
                .await
                .expect("the sampler's query");
            let [mut samples, mut held, mut waited] = [0u64; 3];
            while !stopped.load(Ordering::Relaxed) {
                let row = client
                    .query_one(&statement, &[&WRITE_LOCK, &i64::from(chains)])
                    .await
                    .expect("a sample");
                let (holders, waiters): (i64, i64) = (row.get(0), row.get(1));
                samples += 1;
                held += u64::from(holders > 0);
                waited += u64::from(waiters > 0);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            [samples, held, waited]
        });
        Self { stop, task }
    }

    /// What the samples found, as one line.
    fn stop(self, runtime: &tokio::runtime::Runtime) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let [samples, held, waited] = runtime.block_on(self.task).expect("the sampler");
        let share = |n: u64| 100.0 * n as f64 / samples.max(1) as f64;
        format!(
            "audit locks: one held in {:.1}% of {samples} samples, one waited for in {:.1}%",
            share(held),
            share(waited)
        )
    }
}

fn host(database: Option<(&str, &Store)>) -> Arc<Host> {
    let mut config: HostConfig = config(&["test.*"], &[]);
    config.sandbox.max_concurrent_calls = 256;
    if let Some((url, store)) = database {
        config.store = StoreConfig {
            url: Some(url.to_owned()),
            writers: store.writers,
            chains: store.chains,
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
    tenants: &std::ops::Range<usize>,
    window: Duration,
) -> (usize, Vec<Duration>, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let host = Arc::clone(host);
            let tenant = format!("t{}", tenants.start + caller % tenants.len());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = 0u64;
                while started.elapsed() < window {
                    let call = ToolCallEnvelope::new(
                        &tenant,
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
