//! The gate, driven directly (no guest) against a real hyper server on loopback.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use wasmtime_wasi_http::io::TokioIo;

use super::*;

mod pool;
pub(crate) mod proxy;

/// What the upstream saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A loopback HTTP/1.1 server recording every request. `/big` answers 64 KiB, `/slow` waits
/// a second, everything else answers `{"ok":true}`.
pub(crate) struct Upstream {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let record = Arc::clone(&record);
                        async move {
                            let (parts, body) = request.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            let path = parts.uri.path().to_owned();
                            record.lock().unwrap().push(Seen {
                                method: parts.method.to_string(),
                                path: parts.uri.to_string(),
                                headers: parts.headers,
                                body,
                            });
                            if path == "/slow/drip" {
                                // Its head at once, its body in two parts 600 ms apart.
                                let parts = futures_util::stream::unfold(0, |part| async move {
                                    match part {
                                        0 => Some((Bytes::from_static(b"first "), 1)),
                                        1 => {
                                            tokio::time::sleep(Duration::from_millis(600)).await;
                                            Some((Bytes::from_static(b"second"), 2))
                                        }
                                        _ => None,
                                    }
                                });
                                let frames = futures_util::StreamExt::map(parts, |part| {
                                    Ok::<_, Infallible>(hyper::body::Frame::data(part))
                                });
                                return Ok(Response::new(
                                    http_body_util::StreamBody::new(frames).boxed(),
                                ));
                            }
                            let body = match path.as_str() {
                                "/big" => Bytes::from(vec![b'x'; 64 * 1024]),
                                "/slow" => {
                                    tokio::time::sleep(Duration::from_secs(1)).await;
                                    Bytes::from_static(b"late")
                                }
                                _ => Bytes::from_static(b"{\"ok\":true}"),
                            };
                            Ok::<_, Infallible>(Response::new(Full::new(body).boxed()))
                        }
                    });
                    let _closed = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { port, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

const TOKEN: &str = "s3cret-unit-token";

/// A file holding [`TOKEN`], shared by the tests of this process.
fn token_file() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        dir
    });
    // Leaked on purpose: the directory lives as long as the test process.
    Box::leak(dir.path().join("token").into_boxed_path())
}

fn requested() -> Vec<EgressRequest> {
    vec![EgressRequest {
        url: "http://*:*".parse().unwrap(),
        methods: ["GET", "POST", "DELETE"].map(|m| m.parse().unwrap()).into(),
        credentials: vec!["api_token".to_owned()],
    }]
}

fn config(upstream: &Upstream, allow_loopback: bool) -> EgressConfig {
    let text = format!(
        r#"
        [[grant]]
        adapter = "t"
        url = "http://127.0.0.1:{port}/api"
        methods = ["GET", "POST"]
        allow_private = {allow}
        headers = ["x-custom"]
        credentials = {{ api_token = {{ file = {token:?}, scheme = "Bearer" }} }}
        [[grant]]
        adapter = "t"
        url = "http://localhost:{port}/"
        methods = ["GET"]
        allow_private = {allow}
        [[grant]]
        adapter = "t"
        url = "http://[::ffff:127.0.0.1]:{port}/"
        methods = ["GET"]
        allow_private = {allow}
        [[grant]]
        adapter = "t"
        url = "http://127.0.0.1:{port}/big"
        methods = ["GET"]
        allow_private = {allow}
        [[grant]]
        adapter = "t"
        url = "http://127.0.0.1:{port}/slow"
        methods = ["GET"]
        allow_private = {allow}
        "#,
        allow = if allow_loopback {
            r#"["127.0.0.0/8", "::1/128"]"#
        } else {
            "[]"
        },
        port = upstream.port,
        token = token_file().display().to_string(),
    );
    toml::from_str(&text).unwrap()
}

fn gate(config: &EgressConfig, mode: ApprovalMode, key: Option<&str>) -> EgressGate {
    let grants = Grants::for_adapter(config, &TlsClient::default(), "t", &requested()).unwrap();
    EgressGate::new(
        Arc::new(grants),
        CallInfo::new(
            mode,
            "4bf92f3577b34da6a3ce929d0e0e4736",
            key.map(str::to_owned),
        ),
    )
}

fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &'static [u8],
) -> Request<WasiBody> {
    let mut builder = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder
        .body(
            Full::new(Bytes::from_static(body))
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .unwrap()
}

impl EgressGate {
    async fn send_plain(
        &self,
        request: Request<WasiBody>,
    ) -> Result<Response<WasiBody>, HttpError> {
        self.send(request, None).await
    }
}

async fn denied(gate: &EgressGate, request: Request<WasiBody>) -> EgressAttempt {
    let result = gate.send(request, None).await;
    assert!(
        matches!(result, Err(HttpError::HttpRequestDenied)),
        "expected a denial, got {:?}",
        result.map(|r| r.status())
    );
    gate.take_attempts().pop().unwrap()
}

#[tokio::test]
async fn allowed_request_carries_credential_trace_and_idempotency_key() {
    let upstream = Upstream::start().await;
    let gate = gate(
        &config(&upstream, true),
        ApprovalMode::Network,
        Some("key-123"),
    );
    let response = gate
        .send_plain(request(
            "POST",
            &upstream.url("/api/items?x=1"),
            &[
                ("authorization", "Bearer guest-forged"),
                ("cookie", "session=guest"),
                ("proxy-authorization", "Basic Z3Vlc3Q="),
                ("idempotency-key", "guest-key"),
                ("x-custom", "kept"),
                ("content-type", "application/json"),
                ("x-http-method-override", "DELETE"),
                ("x-original-url", "/admin"),
                ("x-forwarded-for", "10.0.0.1"),
                ("forwarded", "for=10.0.0.1"),
                ("x-real-ip", "10.0.0.1"),
            ],
            b"{\"name\":\"a\"}",
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"{\"ok\":true}");

    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    let seen = &seen[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/api/items?x=1");
    assert_eq!(&seen.body[..], b"{\"name\":\"a\"}");
    assert_eq!(seen.headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(seen.headers.get_all("authorization").iter().count(), 1);
    assert!(seen.headers.get("cookie").is_none());
    assert!(seen.headers.get("proxy-authorization").is_none());
    assert_eq!(seen.headers["idempotency-key"], "key-123");
    assert_eq!(seen.headers["x-custom"], "kept");
    assert_eq!(seen.headers["content-type"], "application/json");
    for dropped in [
        "x-http-method-override",
        "x-original-url",
        "x-forwarded-for",
        "forwarded",
        "x-real-ip",
    ] {
        assert!(
            seen.headers.get(dropped).is_none(),
            "{dropped} reached the upstream"
        );
    }
    let traceparent = seen.headers["traceparent"].to_str().unwrap();
    assert!(
        traceparent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-")
            && traceparent.ends_with("-01"),
        "{traceparent}"
    );
    assert_eq!(seen.headers["content-length"], "12");

    let attempts = gate.take_attempts();
    assert_eq!(
        attempts,
        vec![EgressAttempt {
            method: "POST".to_owned(),
            destination: format!("http://127.0.0.1:{}/api/items", upstream.port),
            address: Some(SocketAddr::from(([127, 0, 0, 1], upstream.port))),
            allowed: true,
            code: "ok".to_owned(),
            reason: String::new(),
            status: Some(200),
            request_bytes: 12,
            response_bytes: 11,
            credentials: Vec::new(),
        }]
    );
    let recorded = format!("{attempts:?} {}", serde_json::to_string(&attempts).unwrap());
    assert!(!recorded.contains(TOKEN));
    assert!(
        !format!("{gate:?}").contains(TOKEN),
        "the gate's Debug output leaks the token"
    );
}

#[tokio::test]
async fn safe_methods_get_no_idempotency_key() {
    let upstream = Upstream::start().await;
    let gate = gate(
        &config(&upstream, true),
        ApprovalMode::Network,
        Some("key-123"),
    );
    gate.send_plain(request(
        "GET",
        &upstream.url("/api/x"),
        &[("idempotency-key", "guest")],
        b"",
    ))
    .await
    .unwrap();
    let seen = upstream.seen();
    assert!(seen[0].headers.get("idempotency-key").is_none());
    assert!(seen[0].headers.get("content-length").is_none());
}

/// A grant's `read_methods` let read-only calls use a method HTTP does not call safe there,
/// and nowhere else; the grant may name only methods it grants.
#[tokio::test]
async fn read_methods_open_a_write_method_to_read_only_calls_at_one_destination() {
    let upstream = Upstream::start().await;
    let mut config = config(&upstream, true);
    config.grants[0].read_methods = ["POST".parse().unwrap()].into();
    let gate = gate(&config, ApprovalMode::ReadOnly, None);
    gate.send_plain(request("POST", &upstream.url("/api/mcp"), &[], b"{}"))
        .await
        .unwrap();
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(upstream.seen()[0].method, "POST");
    // Another grant's destination keeps the rule.
    config.grants[4].methods.insert("POST".parse().unwrap());
    let gate = self::gate(&config, ApprovalMode::ReadOnly, None);
    let attempt = denied(&gate, request("POST", &upstream.url("/slow"), &[], b"{}")).await;
    assert_eq!(attempt.code, "approval_mode");
    assert_eq!(upstream.seen().len(), 1);

    config.grants[1].read_methods = ["DELETE".parse().unwrap()].into();
    let err = Grants::for_adapter(&config, &TlsClient::default(), "t", &requested()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "egress grant `http://localhost:{}/` for `t` lists read method `DELETE`, which is not \
             one of its `methods`; add it to `methods` or remove it from `read_methods`",
            upstream.port
        )
    );
}

#[tokio::test]
async fn denials_name_their_reason_and_send_nothing() {
    let upstream = Upstream::start().await;
    let config = config(&upstream, true);
    let port = upstream.port;
    let cases: [(ApprovalMode, &str, String, &str); 8] = [
        (
            ApprovalMode::Network,
            "GET",
            format!("http://127.0.0.1:{port}/other"),
            "no_matching_grant",
        ),
        (
            ApprovalMode::Network,
            "GET",
            format!("http://127.0.0.1:{port}/apix"),
            "no_matching_grant",
        ),
        (
            ApprovalMode::Network,
            "GET",
            format!("http://127.0.0.1:{}/api", port.wrapping_add(1)),
            "no_matching_grant",
        ),
        (
            ApprovalMode::Network,
            "GET",
            format!("https://127.0.0.1:{port}/api"),
            "no_matching_grant",
        ),
        (
            ApprovalMode::Network,
            "DELETE",
            format!("http://127.0.0.1:{port}/api/1"),
            "method_not_granted",
        ),
        (
            ApprovalMode::ReadOnly,
            "POST",
            format!("http://127.0.0.1:{port}/api/1"),
            "approval_mode",
        ),
        (
            ApprovalMode::LocalWrite,
            "POST",
            format!("http://127.0.0.1:{port}/api/1"),
            "approval_mode",
        ),
        (
            ApprovalMode::Network,
            "GET",
            format!("http://user:pw@127.0.0.1:{port}/api"),
            "invalid_url",
        ),
    ];
    for (mode, method, url, code) in cases {
        let gate = gate(&config, mode, None);
        let attempt = denied(&gate, request(method, &url, &[], b"")).await;
        assert_eq!(attempt.code, code, "{method} {url}: {attempt:?}");
        assert!(!attempt.allowed);
        assert!(!attempt.reason.is_empty());
        assert_eq!(attempt.status, None);
    }
    assert!(
        upstream.seen().is_empty(),
        "a denied request reached the upstream"
    );
}

#[tokio::test]
async fn loopback_is_refused_without_the_allowance_by_ip_name_and_mapped_ipv6() {
    let upstream = Upstream::start().await;
    let config = config(&upstream, false);
    let port = upstream.port;
    for url in [
        format!("http://127.0.0.1:{port}/api"),
        format!("http://localhost:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
    ] {
        let gate = gate(&config, ApprovalMode::ReadOnly, None);
        let attempt = denied(&gate, request("GET", &url, &[], b"")).await;
        assert_eq!(attempt.code, "address_not_allowed", "{url}: {attempt:?}");
        assert!(attempt.reason.contains("loopback"), "{}", attempt.reason);
        assert!(
            attempt.reason.contains("allow_private"),
            "{}",
            attempt.reason
        );
    }
    assert!(upstream.seen().is_empty());
}

#[tokio::test]
async fn localhost_works_once_loopback_is_allowed() {
    let upstream = Upstream::start().await;
    let gate = gate(&config(&upstream, true), ApprovalMode::ReadOnly, None);
    let response = gate
        .send_plain(request(
            "GET",
            &format!("http://localhost:{}/hello", upstream.port),
            &[],
            b"",
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = upstream.seen();
    assert_eq!(
        seen[0].headers["host"],
        format!("localhost:{}", upstream.port)
    );
    // No credential is bound to this grant, so none is sent.
    assert!(seen[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn request_count_budget_cuts_off_a_loop() {
    let upstream = Upstream::start().await;
    let mut config = config(&upstream, true);
    config.max_requests = 3;
    let gate = gate(&config, ApprovalMode::ReadOnly, None);
    for _ in 0..3 {
        gate.send_plain(request("GET", &upstream.url("/api"), &[], b""))
            .await
            .unwrap();
    }
    let attempt = denied(&gate, request("GET", &upstream.url("/api"), &[], b"")).await;
    assert_eq!(attempt.code, "request_budget");
    assert_eq!(upstream.seen().len(), 3);
}

#[tokio::test]
async fn request_byte_budget_refuses_large_bodies() {
    let upstream = Upstream::start().await;
    let mut config = config(&upstream, true);
    config.max_request_bytes = 8;
    let gate = gate(&config, ApprovalMode::Network, None);
    let attempt = denied(
        &gate,
        request("POST", &upstream.url("/api"), &[], b"123456789"),
    )
    .await;
    assert_eq!(attempt.code, "request_bytes_budget");
    assert!(upstream.seen().is_empty());
}

#[tokio::test]
async fn response_byte_budget_cuts_the_body() {
    let upstream = Upstream::start().await;
    let mut config = config(&upstream, true);
    config.max_response_bytes = 1024;
    let gate = gate(&config, ApprovalMode::ReadOnly, None);
    let response = gate
        .send_plain(request("GET", &upstream.url("/big"), &[], b""))
        .await
        .unwrap();
    let error = response.into_body().collect().await.err();
    assert!(
        matches!(error, Some(HttpError::HttpResponseBodySize(Some(1024)))),
        "{error:?}"
    );
    let attempt = gate.take_attempts().pop().unwrap();
    assert_eq!(attempt.code, "response_bytes_budget");
    assert_eq!(attempt.status, Some(200));
}

#[tokio::test]
async fn time_budget_stops_a_slow_upstream() {
    let upstream = Upstream::start().await;
    let mut config = config(&upstream, true);
    config.max_total_ms = 200;
    let gate = gate(&config, ApprovalMode::ReadOnly, None);
    let started = Instant::now();
    let result = gate
        .send_plain(request("GET", &upstream.url("/slow"), &[], b""))
        .await;
    assert!(
        matches!(result, Err(HttpError::ConnectionReadTimeout)),
        "{:?}",
        result.map(|r| r.status())
    );
    assert!(started.elapsed() < Duration::from_millis(900));
    assert_eq!(gate.take_attempts().pop().unwrap().code, "time_budget");
    let attempt = denied(&gate, request("GET", &upstream.url("/api"), &[], b"")).await;
    assert_eq!(attempt.code, "time_budget");
}

/// The time budget does not run while the call waits for its caller's answer: an upstream
/// whose response goes on after the caller answered (an MCP server that asked its client
/// something) is not cut off for the time the caller took; without that wait, it is.
#[tokio::test]
async fn the_time_budget_pauses_while_the_call_waits_for_its_caller() {
    let upstream = Upstream::start().await;
    let mut config = config(&upstream, true);
    config.max_total_ms = 300;
    for waits in [false, true] {
        let gate = gate(&config, ApprovalMode::ReadOnly, None);
        let response = gate
            .send_plain(request("GET", &upstream.url("/slow/drip"), &[], b""))
            .await
            .unwrap();
        let paused = gate.paused();
        if waits {
            paused.start();
        }
        let body = response.into_body().collect().await;
        paused.stop();
        if waits {
            assert_eq!(body.unwrap().to_bytes(), "first second");
            assert_eq!(gate.take_attempts().pop().unwrap().code, "ok");
        } else {
            assert!(
                matches!(body, Err(HttpError::HttpResponseTimeout)),
                "{:?}",
                body.map(http_body_util::Collected::to_bytes)
            );
            assert_eq!(gate.take_attempts().pop().unwrap().code, "time_budget");
        }
    }
}

/// A call its caller cancelled stops waiting on its upstream at once, for the response's head
/// and for its body, and closes the connection (which a 2026-07-28 MCP server takes as the
/// cancellation); each attempt is recorded as `cancelled`.
#[tokio::test]
async fn a_cancelled_call_stops_waiting_on_its_upstream() {
    let upstream = Upstream::start().await;
    let config = config(&upstream, true);
    for path in ["/slow", "/slow/drip"] {
        let (canceller, cancel) = crate::relay::cancellation();
        let gate = gate(&config, ApprovalMode::ReadOnly, None).cancelled_by(Some(cancel));
        let started = Instant::now();
        let cancelling = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            canceller.cancel();
        };
        let sending = async {
            let response = gate
                .send_plain(request("GET", &upstream.url(path), &[], b""))
                .await?;
            response.into_body().collect().await.map(|_| ())
        };
        let (sent, ()) = tokio::join!(sending, cancelling);
        assert!(
            matches!(&sent, Err(HttpError::InternalError(Some(why))) if why == CANCELLED),
            "{path}: {sent:?}"
        );
        assert!(started.elapsed() < Duration::from_millis(550), "{path}");
        assert_eq!(
            gate.take_attempts().pop().unwrap().code,
            "cancelled",
            "{path}"
        );
    }
}

/// After its caller cancelled the call, the adapter may still tell its upstream: the first
/// request begun then is sent and answered, its body read whole (the cancellation it came
/// after does not cut it), within [`FAREWELL`]; a second one, or one begun later, is refused
/// `cancelled`, and the upstream sees nothing of it.
#[tokio::test]
async fn after_a_cancellation_the_adapter_has_a_moment_to_tell_its_upstream() {
    let upstream = Upstream::start().await;
    let config = config(&upstream, true);
    let (canceller, cancel) = crate::relay::cancellation();
    let gate = gate(&config, ApprovalMode::ReadOnly, None).cancelled_by(Some(cancel));
    canceller.cancel();
    let cancelled = Instant::now();
    let response = gate
        .send_plain(request("GET", &upstream.url("/slow/drip"), &[], b""))
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"first second");
    assert_eq!(gate.take_attempts().pop().unwrap().code, "ok");

    let seen = upstream.seen().len();
    let refused = |attempt: EgressAttempt| (attempt.code, attempt.reason);
    let cancelled_attempt = ("cancelled".to_owned(), CANCELLED.to_owned());
    let second = denied(&gate, request("GET", &upstream.url("/api"), &[], b"")).await;
    assert_eq!(refused(second), cancelled_attempt);
    tokio::time::sleep_until((cancelled + FAREWELL).into()).await;
    let late = denied(&gate, request("GET", &upstream.url("/api"), &[], b"")).await;
    assert_eq!(refused(late), cancelled_attempt);
    assert_eq!(upstream.seen().len(), seen);
}

#[tokio::test]
async fn metadata_and_private_addresses_are_refused_even_with_loopback_allowed() {
    let config: EgressConfig = toml::from_str(
        r#"
        [[grant]]
        adapter = "t"
        url = "http://*:*"
        methods = ["GET"]
        allow_private = ["127.0.0.0/8"]
        "#,
    )
    .unwrap();
    for (url, class) in [
        ("http://169.254.169.254/latest/meta-data", "cloud metadata"),
        ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
        ("http://10.0.0.1/", "private"),
        ("http://[fd00::1]/", "unique-local"),
        ("http://[::1]:9/", "loopback"),
        ("http://0.0.0.0:9/", "unspecified"),
        ("http://100.64.0.1/", "shared (CGNAT)"),
    ] {
        let gate = gate(&config, ApprovalMode::ReadOnly, None);
        let attempt = denied(&gate, request("GET", url, &[], b"")).await;
        assert_eq!(attempt.code, "address_not_allowed", "{url}");
        assert!(attempt.reason.contains(class), "{url}: {}", attempt.reason);
    }
}

#[test]
fn grants_must_be_requested_by_the_manifest() {
    let grant = |url: &str, methods: &str, creds: &str| {
        toml::from_str::<EgressConfig>(&format!(
            "[[grant]]\nadapter = \"t\"\nurl = \"{url}\"\nmethods = {methods}\n{creds}"
        ))
        .unwrap()
    };
    let requested = vec![EgressRequest {
        url: "https://api.example.com/v1/".parse().unwrap(),
        methods: ["GET".parse().unwrap()].into(),
        credentials: vec!["api_token".into()],
    }];
    let err = |config: EgressConfig| {
        Grants::for_adapter(&config, &TlsClient::default(), "t", &requested)
            .unwrap_err()
            .to_string()
    };
    let e = err(grant("https://api.example.com/", r#"["GET"]"#, ""));
    assert!(e.contains("was not requested by its manifest"), "{e}");
    assert!(e.contains("https://api.example.com/v1/"), "{e}");
    let e = err(grant("https://api.example.com/v1/x", r#"["POST"]"#, ""));
    assert!(e.contains("grants method `POST`"), "{e}");
    let e = err(grant(
        "https://api.example.com/v1/",
        r#"["GET"]"#,
        "credentials = { other = { env = \"X\" } }",
    ));
    assert!(e.contains("credential slot `other`"), "{e}");
    let e = err(grant(
        "https://api.example.com/v1/",
        r#"["GET"]"#,
        "credentials = { api_token = { env = \"GATEHOUSE_SURELY_UNSET_VAR\" } }",
    ));
    assert!(e.contains("`GATEHOUSE_SURELY_UNSET_VAR` is not set"), "{e}");
    let e = err(grant(
        "https://api.example.com/v1/",
        r#"["GET"]"#,
        "credentials = { api_token = { env = \"A\", file = \"/b\" } }",
    ));
    assert!(e.contains("exactly one of `env` and `file`"), "{e}");
    // A malformed destination is refused when the config is read, naming the expected form.
    let e = toml::from_str::<EgressConfig>(
        "[[grant]]\nadapter = \"t\"\nurl = \"api.example.com\"\nmethods = [\"GET\"]",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("scheme://host[:port][/path-prefix]"), "{e}");

    // A narrower grant, and grants for other adapters, are fine.
    let mut ok = grant("https://api.example.com/v1/orders", r#"["GET"]"#, "");
    ok.grants.push(GrantConfig {
        adapter: "other".to_owned(),
        url: "https://elsewhere.example".parse().unwrap(),
        methods: ["DELETE".parse().unwrap()].into(),
        credentials: Default::default(),
        allow_private: Vec::new(),
        headers: Default::default(),
        read_methods: Default::default(),
        delegate: false,
    });
    let grants = Grants::for_adapter(&ok, &TlsClient::default(), "t", &requested).unwrap();
    assert_eq!(grants.rules.len(), 1);
    assert_eq!(
        grants.rules[0].url.to_string(),
        "https://api.example.com:443/v1/orders"
    );
}

#[test]
fn credentials_from_env_get_their_scheme() {
    // PATH is set in every test environment; reading it proves the env source without
    // mutating the process environment.
    let path = std::env::var("PATH").unwrap();
    let config: EgressConfig = toml::from_str(
        "[[grant]]\nadapter = \"t\"\nurl = \"http://*:*\"\nmethods = [\"GET\"]\ncredentials = { api_token = { env = \"PATH\", scheme = \"Token\" } }",
    )
    .unwrap();
    let grants = Grants::for_adapter(&config, &TlsClient::default(), "t", &requested()).unwrap();
    let credential = &grants.rules[0].credentials[0];
    assert_eq!(credential.header, "authorization");
    let CredentialSource::Fixed { value, .. } = &credential.source else {
        panic!("{credential:?}")
    };
    assert_eq!(value.to_str().unwrap(), format!("Token {}", path.trim()));
    assert_eq!(credential.secret(), Some(path.trim().as_bytes()));
}

#[test]
fn credentials_from_files_are_trimmed_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "  file-secret\n").unwrap();
    let config: EgressConfig = toml::from_str(&format!(
        "[[grant]]\nadapter = \"t\"\nurl = \"http://*:*\"\nmethods = [\"GET\"]\ncredentials = {{ api_token = {{ file = {:?}, header = \"x-api-key\" }} }}",
        path.display().to_string()
    ))
    .unwrap();
    let grants = Grants::for_adapter(&config, &TlsClient::default(), "t", &requested()).unwrap();
    let credential = &grants.rules[0].credentials[0];
    assert_eq!(credential.header, "x-api-key");
    let CredentialSource::Fixed { value, .. } = &credential.source else {
        panic!("{credential:?}")
    };
    assert_eq!(value, "file-secret");
    assert!(value.is_sensitive());
    assert!(!format!("{grants:?}").contains("file-secret"));
}

#[tokio::test]
async fn the_guests_first_byte_timeout_shortens_the_wait() {
    let upstream = Upstream::start().await;
    let gate = gate(&config(&upstream, true), ApprovalMode::ReadOnly, None);
    let options = RequestOptions {
        first_byte_timeout: Some(Duration::from_millis(100)),
        ..RequestOptions::default()
    };
    let started = Instant::now();
    let result = gate
        .send(
            request("GET", &upstream.url("/slow"), &[], b""),
            Some(options),
        )
        .await;
    assert!(matches!(result, Err(HttpError::ConnectionReadTimeout)));
    assert!(started.elapsed() < Duration::from_millis(900));
    let attempt = gate.take_attempts().pop().unwrap();
    assert_eq!(attempt.code, "upstream_timeout");
    assert!(attempt.allowed);
}

#[test]
fn a_grant_cannot_pass_headers_the_host_owns() {
    for header in [
        "authorization",
        "Cookie",
        "host",
        "traceparent",
        "idempotency-key",
        "proxy-foo",
        "x-api-key",
        "bad header",
    ] {
        let config: EgressConfig = toml::from_str(&format!(
            "[[grant]]\nadapter = \"t\"\nurl = \"http://*:*\"\nmethods = [\"GET\"]\nheaders = [{header:?}]\ncredentials = {{ api_token = {{ file = {:?}, header = \"x-api-key\" }} }}",
            token_file().display().to_string()
        ))
        .unwrap();
        let err =
            Grants::for_adapter(&config, &TlsClient::default(), "t", &requested()).unwrap_err();
        assert!(matches!(err, GrantError::Header { .. }), "{header}: {err}");
    }
}
