//! Adapters in Rust, JavaScript (componentize-js) and Python (componentize-py), in one run:
//! component size, cold compile (verify + compile), warm load (verify + the compiled artifact
//! from the cache), per-call p50 and p99 through `Host::call` (every gate, a fresh instance
//! per call), and memory per instance: the smallest `memory_mib` budget with which the call
//! still succeeds (all of the instance's linear memories together).
//!
//! Two calls per language: one without I/O (Rust `echo`; the JavaScript and Python hostile
//! twins' `ambient`, which reads nothing and returns a small JSON), and one GET to a loopback
//! upstream through the egress gate (Rust `gatehouse.rest` `get`; the SDK examples'
//! `get_order`).
//!
//! Run: `cargo bench -p gatehouse-tests --bench languages [-- --calls N] [--only TEXT]`
//! (`--only` keeps the rows whose label contains TEXT, e.g. for a profile of one).

use std::time::{Duration, Instant};

use gatehouse_host::config::EgressConfig;
use gatehouse_host::{Host, HostConfig, Status, ToolCallEnvelope};
use gatehouse_tests::Artifact;
use gatehouse_tests::artifacts::{ECHO, JS_HOSTILE, JS_ORDERS, PY_HOSTILE, PY_ORDERS, REST};
use gatehouse_tests::upstream::Upstream;
use serde_json::{Value, json};

/// One measured call.
struct Case {
    label: &'static str,
    artifact: Artifact,
    capability: &'static str,
    args: fn(&Upstream) -> Value,
}

const CASES: &[Case] = &[
    Case {
        label: "rust echo",
        artifact: ECHO,
        capability: "echo",
        args: |_| json!({ "message": "hi" }),
    },
    Case {
        label: "js ambient",
        artifact: JS_HOSTILE,
        capability: "ambient",
        args: |_| json!({}),
    },
    Case {
        label: "py ambient",
        artifact: PY_HOSTILE,
        capability: "ambient",
        args: |_| json!({}),
    },
    Case {
        label: "rust rest.get",
        artifact: REST,
        capability: "get",
        args: |up| json!({ "url": up.url("/api/orders/1") }),
    },
    Case {
        label: "js get_order",
        artifact: JS_ORDERS,
        capability: "get_order",
        args: |up| json!({ "base_url": up.url("/api"), "order_id": "1" }),
    },
    Case {
        label: "py get_order",
        artifact: PY_ORDERS,
        capability: "get_order",
        args: |up| json!({ "base_url": up.url("/api"), "order_id": "1" }),
    },
];

fn config(upstream: &Upstream, cache: Option<&std::path::Path>) -> HostConfig {
    let mut config = gatehouse_tests::config(&["*"], &[]);
    config.sandbox.fuel = 1_000_000_000;
    config.sandbox.timeout_ms = 5_000;
    config.sandbox.memory_mib = 64;
    if let Some(dir) = cache {
        config.cache.enabled = true;
        config.cache.dir = Some(dir.to_owned());
    }
    let grant = |adapter: &str| {
        json!({
            "adapter": adapter,
            "url": format!("http://127.0.0.1:{}/api/", upstream.port),
            "methods": ["GET"],
            "allow_private": ["127.0.0.0/8"],
        })
    };
    config.egress = serde_json::from_value::<EgressConfig>(json!({
        "grant": [grant("gatehouse.rest"), grant("example.orders-js"), grant("example.orders-py")],
    }))
    .expect("the grants parse");
    config
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut calls, mut only) = (200usize, String::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--calls" => calls = args.next().and_then(|n| n.parse().ok()).expect("--calls N"),
            "--only" => only = args.next().expect("--only TEXT"),
            // cargo bench passes `--bench`.
            _ => {}
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let upstream = runtime.block_on(Upstream::start());
    let cache = tempfile::tempdir().expect("a cache directory");

    println!("| call | component | cold compile | warm load | p50 | p99 | memory per instance |");
    println!("|---|---|---|---|---|---|---|");
    for case in CASES.iter().filter(|c| c.label.contains(&only)) {
        let signed = case.artifact.signed();
        let size = case.artifact.bytes().len();

        // Cold: no cache; the best of two (compilation is parallel over both cores).
        let cold_host = Host::new(config(&upstream, None)).expect("a host");
        let cold = (0..2)
            .map(|_| {
                let started = Instant::now();
                cold_host.load_adapter(&signed).expect("loads");
                started.elapsed()
            })
            .min()
            .expect("two samples");

        // Warm: the artifact is in the cache; the median of 10.
        let host = Host::new(config(&upstream, Some(cache.path()))).expect("a host");
        host.load_adapter(&signed).expect("fills the cache");
        let mut warm: Vec<Duration> = (0..10)
            .map(|_| {
                let started = Instant::now();
                host.load_adapter(&signed).expect("loads");
                started.elapsed()
            })
            .collect();
        warm.sort();

        // Calls: a fresh instance each, after a warm-up.
        let adapter = host.install_adapter(&signed).expect("installs");
        let tool = format!("{}.{}", adapter.id, case.capability);
        let call = |host: &Host| {
            let envelope = ToolCallEnvelope::new("default", &tool, (case.args)(&upstream));
            runtime.block_on(host.call(envelope))
        };
        for _ in 0..20 {
            let result = call(&host);
            assert_eq!(result.status, Status::Ok, "{}: {result:#?}", case.label);
        }
        let mut times: Vec<Duration> = (0..calls)
            .map(|_| {
                let started = Instant::now();
                let result = call(&host);
                let elapsed = started.elapsed();
                assert_eq!(result.status, Status::Ok, "{}: {result:#?}", case.label);
                elapsed
            })
            .collect();
        times.sort();

        // Memory: the smallest budget, in MiB, with which the call succeeds (binary search).
        let fits = |mib: u32| {
            let mut config = config(&upstream, Some(cache.path()));
            config.sandbox.memory_mib = mib;
            let host = Host::new(config).expect("a host");
            host.install_adapter(&signed).expect("installs");
            call(&host).status == Status::Ok
        };
        let (mut low, mut high) = (0u32, 64u32);
        assert!(fits(high), "{} does not run in 64 MiB", case.label);
        while high - low > 1 {
            let mid = (low + high) / 2;
            if fits(mid) { high = mid } else { low = mid }
        }

        println!(
            "| {} | {:.1} MiB | {} | {} | {} | {} | {} MiB |",
            case.label,
            size as f64 / 1_048_576.0,
            ms(cold),
            ms(warm[warm.len() / 2]),
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            high,
        );
    }
}
