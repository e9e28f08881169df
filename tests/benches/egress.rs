//! Egress gate overhead: one GET to a loopback hyper upstream, sent
//! 1. directly with hyper (new TCP connection, HTTP/1.1 handshake, request, body read);
//! 2. through `EgressGate::send` (rule match, approval check, address check, header rewrite,
//!    credential injection, traceparent, recording, metering; same connection work);
//! 3. through a real guest (`gatehouse.rest` `get`: fresh instance + SDK client + gate).
//!
//! Run: `cargo bench -p gatehouse-tests --bench egress`

use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_host::egress::{CallInfo, EgressConfig, EgressGate, Grants};
use gatehouse_host::model::ApprovalMode;
use gatehouse_host::plugin::manifest::{AdapterManifest, Manifest};
use gatehouse_host::{Host, ToolCallEnvelope};
use gatehouse_tests::artifacts::REST;
use gatehouse_tests::upstream::Upstream;
use http_body_util::{BodyExt, Empty, Full};
use hyper::Request;
use serde_json::json;
use wasmtime_wasi_http::io::TokioIo;

fn egress(port: u16, token: &std::path::Path) -> EgressConfig {
    serde_json::from_value(json!({
        "allow_private": ["127.0.0.0/8"],
        "max_requests": 1_000_000,
        "grant": [{
            "adapter": "gatehouse.rest",
            "url": format!("http://127.0.0.1:{port}/api/"),
            "methods": ["GET"],
            "credentials": { "api_token": { "file": token, "scheme": "Bearer" } },
        }],
    }))
    .expect("valid egress config")
}

fn rest_manifest() -> AdapterManifest {
    match REST.manifest() {
        Manifest::Adapter(manifest) => manifest,
        Manifest::Policy(_) => unreachable!("rest is an adapter"),
    }
}

fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let upstream = runtime.block_on(Upstream::start());
    let dir = tempfile::tempdir().expect("temp dir");
    let token = dir.path().join("token");
    std::fs::write(&token, "bench-token").expect("write token");
    let config = egress(upstream.port, &token);
    let grants = Arc::new(
        Grants::for_adapter(&config, "gatehouse.rest", &rest_manifest().egress).expect("grants"),
    );
    let url = upstream.url("/api/items/1");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], upstream.port));

    let mut group = c.benchmark_group("egress_get");
    group.bench_function("direct_hyper", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .expect("handshake");
                tokio::spawn(conn);
                let request = Request::get("/api/items/1")
                    .header("host", format!("127.0.0.1:{}", addr.port()))
                    .body(Empty::<Bytes>::new())
                    .expect("request");
                let response = sender.send_request(request).await.expect("response");
                response.into_body().collect().await.expect("body");
            });
        });
    });
    group.bench_function("through_gate", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let gate = EgressGate::new(
                    Arc::clone(&grants),
                    CallInfo::new(
                        ApprovalMode::ReadOnly,
                        "4bf92f3577b34da6a3ce929d0e0e4736",
                        None,
                    ),
                );
                let request = Request::get(url.as_str())
                    .body(
                        Full::new(Bytes::new())
                            .map_err(|never| match never {})
                            .boxed_unsync(),
                    )
                    .expect("request");
                let response = gate.send(request, None).await.expect("allowed");
                response.into_body().collect().await.expect("body");
            });
        });
    });

    let mut host_config = gatehouse_tests::config(&["gatehouse.*"], &[]);
    host_config.sandbox.max_concurrent_calls = 64;
    host_config.egress = config.clone();
    let host = Host::new(host_config).expect("host");
    host.install_adapter(&REST.signed()).expect("loads");
    group.bench_function("guest_rest_get", |b| {
        b.iter(|| {
            let envelope = runtime.block_on(host.call(ToolCallEnvelope::new(
                "default",
                "gatehouse.rest.get",
                json!({ "url": url }),
            )));
            assert!(envelope.is_ok(), "{envelope:?}");
        });
    });
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
