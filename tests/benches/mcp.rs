//! MCP overhead: one echo tools/call
//! 1. through `Host::call` directly (every gate, fresh instance, the envelope);
//! 2. as an MCP request to `McpServer` on loopback: HTTP/1.1 on a kept-alive connection,
//!    API-key identity, rmcp's Host/Origin checks and JSON-RPC, the same call, the result
//!    mapped to MCP with the envelope in `_meta`.
//!
//! Run: `cargo bench -p gatehouse-tests --bench mcp`

use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_host::Host;
use gatehouse_server::mcp::McpServer;
use gatehouse_tests::artifacts::ECHO;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use wasmtime_wasi_http::io::TokioIo;

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
    let server = McpServer::new(Arc::clone(&host), &mcp).expect("server");
    let (port, mut sender) = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("bound").port();
        tokio::spawn(server.serve(listener, std::future::pending()));
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        (port, sender)
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
            runtime.block_on(async {
                let request = hyper::Request::post("/mcp")
                    .header("host", format!("127.0.0.1:{port}"))
                    .header("authorization", format!("Bearer {KEY}"))
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2025-11-25")
                    .body(Full::new(Bytes::from(body.clone())))
                    .expect("request");
                sender.ready().await.expect("the connection is kept alive");
                let response = sender.send_request(request).await.expect("response");
                assert_eq!(response.status(), 200);
                let answer = response.into_body().collect().await.expect("body");
                let answer: serde_json::Value =
                    serde_json::from_slice(&answer.to_bytes()).expect("a JSON-RPC response");
                assert_eq!(answer["result"]["isError"], false, "{answer}");
            });
        });
    });
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
