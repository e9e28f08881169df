//! Egress gate overhead: one GET to a loopback hyper upstream, sent
//! 1. directly with hyper (new TCP connection, HTTP/1.1 handshake, request, body read);
//! 2. through `EgressGate::send` (rule match, approval check, address check, header rewrite,
//!    credential injection, traceparent, recording, metering), on a kept-alive connection
//!    from the gate's pool;
//! 3. through a real guest (`gatehouse.rest` `get`: fresh instance + SDK client + gate);
//! 4. directly with hyper over TLS (a new connection and handshake per request), to an upstream
//!    whose certificate a throwaway CA issued;
//! 5. through the gate over TLS to that upstream with the pool off
//!    (`max_idle_connections_per_destination = 0`: a new connection and a resumed TLS handshake
//!    per request, what the gate did before it kept connections), and with the pool on (the
//!    connection kept between calls);
//! 6. directly with hyper over TLS on one kept-alive connection reused by every request: the
//!    floor the pooled case of 5. is measured against (issue 13: within 1.3x).
//!
//! Run: `cargo bench -p gatehouse-tests --bench egress`

use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_host::config::EgressConfig;
use gatehouse_host::internals::{CallInfo, EgressGate, Grants, TlsClient};
use gatehouse_host::model::ApprovalMode;
use gatehouse_host::plugin::manifest::{AdapterManifest, Manifest};
use gatehouse_host::{Host, ToolCallEnvelope};
use gatehouse_tests::artifacts::REST;
use gatehouse_tests::upstream::{TestCa, Upstream};
use http_body_util::{BodyExt, Empty, Full};
use hyper::Request;
use serde_json::json;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use wasmtime_wasi_http::io::TokioIo;

fn egress(port: u16, tls_port: u16, ca: &TestCa, token: &std::path::Path) -> EgressConfig {
    let credentials = json!({ "api_token": { "file": token, "scheme": "Bearer" } });
    serde_json::from_value(json!({
        "max_requests": 1_000_000,
        "system_root_certificates": false,
        "extra_root_certificates": [ca.pem_file()],
        "grant": [
            {
                "adapter": "gatehouse.rest",
                "url": format!("http://127.0.0.1:{port}/api/"),
                "methods": ["GET"],
                "credentials": credentials,
                "allow_private": ["127.0.0.0/8"],
            },
            {
                "adapter": "gatehouse.rest",
                "url": format!("https://127.0.0.1:{tls_port}/api/"),
                "methods": ["GET"],
                "credentials": credentials,
                "allow_private": ["127.0.0.0/8"],
            },
        ],
    }))
    .expect("valid egress config")
}

/// One GET with hyper over `stream`, body read to the end.
async fn get<S>(stream: S, port: u16)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let request = Request::get("/api/items/1")
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    response.into_body().collect().await.expect("body");
}

/// One GET to `url` through a fresh gate (one per call, as the host does).
async fn gate_get(grants: &Arc<Grants>, url: &str) {
    let gate = EgressGate::new(
        Arc::clone(grants),
        CallInfo::new(
            ApprovalMode::ReadOnly,
            "4bf92f3577b34da6a3ce929d0e0e4736",
            None,
        ),
    );
    let request = Request::get(url)
        .body(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .expect("request");
    let response = gate.send(request, None).await.expect("allowed");
    response.into_body().collect().await.expect("body");
}

/// A rustls client trusting only `ca`, for the direct TLS case.
fn direct_tls_client(ca: &TestCa) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca.pem_file()).expect("CA file") {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
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
    let ca = TestCa::new();
    let upstream_tls = runtime.block_on(Upstream::start_tls(&ca, &["127.0.0.1"]));
    let dir = tempfile::tempdir().expect("temp dir");
    let token = dir.path().join("token");
    std::fs::write(&token, "bench-token").expect("write token");
    let config = egress(upstream.port, upstream_tls.port, &ca, &token);
    let tls = TlsClient::from_config(&config).expect("CA loads");
    let grants = Arc::new(
        Grants::for_adapter(&config, &tls, "gatehouse.rest", &rest_manifest().egress)
            .expect("grants"),
    );
    let url = upstream.url("/api/items/1");
    let url_tls = upstream_tls.url("/api/items/1");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], upstream.port));
    let addr_tls = std::net::SocketAddr::from(([127, 0, 0, 1], upstream_tls.port));
    let direct_tls = direct_tls_client(&ca);
    // The same grants on a host whose pool keeps nothing: a new connection and TLS handshake
    // per request (resumed, as the TLS configuration is shared), as the gate did before it
    // kept connections.
    let no_pool = EgressConfig {
        max_idle_connections_per_destination: 0,
        ..config.clone()
    };
    let grants_no_pool = Arc::new(
        Grants::for_adapter(
            &no_pool,
            &TlsClient::from_config(&no_pool).expect("CA loads"),
            "gatehouse.rest",
            &rest_manifest().egress,
        )
        .expect("grants"),
    );

    let mut group = c.benchmark_group("egress_get");
    group.bench_function("direct_hyper", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
                get(stream, addr.port()).await;
            });
        });
    });
    group.bench_function("through_gate", |b| {
        b.iter(|| runtime.block_on(gate_get(&grants, &url)));
    });
    group.bench_function("direct_hyper_tls", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let stream = tokio::net::TcpStream::connect(addr_tls)
                    .await
                    .expect("connect");
                let name = ServerName::IpAddress(addr_tls.ip().into());
                let stream = direct_tls.connect(name, stream).await.expect("TLS");
                get(stream, addr_tls.port()).await;
            });
        });
    });
    group.bench_function("through_gate_tls_no_pool", |b| {
        b.iter(|| runtime.block_on(gate_get(&grants_no_pool, &url_tls)));
    });
    group.bench_function("through_gate_tls", |b| {
        b.iter(|| runtime.block_on(gate_get(&grants, &url_tls)));
    });
    let mut kept = runtime.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr_tls)
            .await
            .expect("connect");
        let name = ServerName::IpAddress(addr_tls.ip().into());
        let stream = direct_tls.connect(name, stream).await.expect("TLS");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        sender
    });
    group.bench_function("direct_hyper_tls_kept_alive", |b| {
        b.iter(|| {
            runtime.block_on(async {
                kept.ready().await.expect("connection stays open");
                let request = Request::get("/api/items/1")
                    .header("host", format!("127.0.0.1:{}", addr_tls.port()))
                    .body(Empty::<Bytes>::new())
                    .expect("request");
                let response = kept.send_request(request).await.expect("response");
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
