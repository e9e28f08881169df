//! MCP overhead: one echo tools/call
//! 1. through `Host::call` directly (every gate, fresh instance, the envelope);
//! 2. as an MCP request to `McpServer` on loopback: HTTP/1.1 on a kept-alive connection,
//!    API-key identity, rmcp's Host/Origin checks and JSON-RPC, the same call, the result
//!    mapped to MCP with the envelope in `_meta`.
//!
//! Run: `cargo bench -p gatehouse-tests --bench mcp`

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_host::Host;
use gatehouse_tests::artifacts::ECHO;
use gatehouse_tests::mcp::KeptAlive;
use serde_json::json;

const KEY: &str = "bench-key";

fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut config = gatehouse_tests::config(&["gatehouse.*"], &[]);
    config.sandbox.max_concurrent_calls = 64;
    let host = Arc::new(Host::new(config).expect("host"));
    host.install_adapter(&ECHO.signed()).expect("loads");

    let (mcp, _key_dir) = gatehouse_tests::mcp::with_api_key(KEY);
    let connection = runtime.block_on(async {
        KeptAlive::open(gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await).await
    });
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": { "name": "gatehouse.echo.echo", "arguments": { "message": "hi" } },
    })
    .to_string();

    let mut group = c.benchmark_group("echo_call");
    group.bench_function("host_call", |b| {
        b.iter(|| {
            let result = runtime.block_on(gatehouse_tests::echo(&host, "hi"));
            assert!(result.is_ok());
        });
    });
    group.bench_function("mcp_tools_call", |b| {
        b.iter(|| {
            runtime.block_on(connection.tools_call(KEY, &body));
        });
    });
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
