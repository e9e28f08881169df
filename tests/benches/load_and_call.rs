//! Echo adapter costs: cold load (verify + compile), warm load (verify + compiled artifact from
//! the cache), and one governed call through `Host::call` (every gate, no policy bound, a fresh
//! instance, the envelope).
//!
//! Run: `cargo bench -p gatehouse-tests --bench load_and_call`

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_host::Host;
use gatehouse_tests::artifacts::ECHO;
use gatehouse_tests::config;

fn host(cache_dir: Option<&std::path::Path>) -> Host {
    let mut config = config(&["gatehouse.*"], &[]);
    config.sandbox.max_concurrent_calls = 64;
    if let Some(dir) = cache_dir {
        config.cache.enabled = true;
        config.cache.dir = Some(dir.to_owned());
    }
    Host::new(config).expect("host builds")
}

fn load(c: &mut Criterion) {
    let signed = ECHO.signed();
    let mut group = c.benchmark_group("echo_load");
    group.sample_size(20);

    let cold = host(None);
    group.bench_function("cold_verify_compile", |b| {
        b.iter(|| cold.load_adapter(&signed).expect("loads"));
    });

    let dir = tempfile::tempdir().expect("temp dir");
    let warm = host(Some(dir.path()));
    warm.load_adapter(&signed).expect("fills the cache");
    group.bench_function("warm_verify_from_cache", |b| {
        b.iter(|| warm.load_adapter(&signed).expect("loads"));
    });
    group.finish();
}

fn call(c: &mut Criterion) {
    let host = host(None);
    host.install_adapter(&ECHO.signed()).expect("loads");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    c.bench_function("echo_call_fresh_instance", |b| {
        b.iter(|| {
            let result = runtime.block_on(gatehouse_tests::echo(&host, "hi"));
            assert!(result.is_ok());
        });
    });
}

criterion_group!(benches, load, call);
criterion_main!(benches);
