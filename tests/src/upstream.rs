//! A real HTTP/1.1 upstream on loopback for egress tests and benchmarks: records what it
//! sees, and answers by path.
//!
//! 1. `/redirect/metadata` answers 302 to `http://169.254.169.254/latest/meta-data/`;
//! 2. `/redirect/local` answers 302 to `/api/ok` on itself;
//! 3. every other path answers `{"ok":true,"method":..,"path":..}`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use wasmtime_wasi_http::io::TokioIo;

/// What the upstream saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers as received.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

/// A running upstream. It serves until the runtime that started it shuts down.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The loopback port it listens on.
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    /// Binds `127.0.0.1:0` and serves on the current tokio runtime.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let port = listener.local_addr().expect("bound").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(Arc::clone(&record), request));
                    let _closed = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { port, seen }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("not poisoned").clone()
    }
}

async fn answer(
    record: Arc<Mutex<Vec<Seen>>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    record.lock().expect("not poisoned").push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.to_string(),
        headers: parts.headers,
        body,
    });
    let redirect = |to: &str| {
        Response::builder()
            .status(StatusCode::FOUND)
            .header("location", to)
            .body(Full::new(Bytes::new()))
            .expect("valid response")
    };
    Ok(match path.as_str() {
        "/redirect/metadata" => redirect("http://169.254.169.254/latest/meta-data/"),
        "/redirect/local" => redirect("/api/ok"),
        _ => Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                serde_json::json!({ "ok": true, "method": parts.method.as_str(), "path": path })
                    .to_string(),
            )))
            .expect("valid response"),
    })
}
