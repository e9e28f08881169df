//! The egress proxy of a stdio server: its only way out to the network.
//!
//! A stdio server is a native process, not a WebAssembly guest, so it cannot be handed the
//! gate as a host call. Its sandbox has a network namespace of its own with nothing in it but
//! a loopback, and when its adapter's grant names destinations, the gateway puts one
//! listening socket on that loopback ([`crate::stdio::netns`]) and serves this proxy on it.
//! The server's environment names it (`HTTP_PROXY`, `HTTPS_PROXY`...). Everything else is
//! unreachable: there is no route, no resolver and no other address.
//!
//! Each process of the server has a proxy of its own (the gateway gives it the process's
//! number), and a request is judged against every call that process is serving now (the
//! `stdio://` transport registers each call, with the process it went to, while it waits
//! for the answer; see `InFlight` for why every call, and not a proxy endpoint per call):
//! - none: refused (`no_call`), since nothing caused it;
//! - calls of more than one tenant: refused (`several_tenants`), and recorded on none,
//!   since no call may be charged with another tenant's traffic (`isolate = "tenant"` in the
//!   server's `[[stdio.server]]` entry gives each tenant processes of its own);
//! - calls of one tenant: the request is allowed only if each of them allows it (the
//!   strictest approval mode, every call's budgets, the earliest deadline), and is charged to
//!   and recorded on each.
//!
//! Then:
//! - **Plain HTTP** (`GET http://host/path`, the proxy's absolute form) is the gate's own
//!   request: it goes through `send` with every check of an adapter's request (the grant's
//!   scheme, host, port, path and method, the approval mode, the address classes of the
//!   resolved address, the budgets), the grant's credentials injected, the headers on the
//!   allow list, and the response metered.
//! - **`CONNECT host:port`** (how clients reach `https` through a proxy) opens a tunnel the
//!   gate cannot see into: any method and path can go inside. So it needs a grant of the
//!   whole host, `https://host[:port]/`, that allows every method of
//!   [`super::TUNNEL_METHODS`] (a grant of a narrower path, of fewer methods or a plain-`http`
//!   one does not open a tunnel), and calls whose approval mode allows writes (`network` or
//!   above); only the scheme, host and port are checked, with the resolved address's class;
//!   no credentials are injected, and the method and path inside are the server's. The
//!   tunnel's bytes count against the calls' request and response budgets, and it is closed
//!   when one of the calls ends or the egress time is spent.
//! - A refusal is an HTTP 403 whose body is the gate's reason, with the denial's code in
//!   `x-gatehouse-denial`; an upstream failure is a 502 with the reason. Both are recorded on
//!   the call, as every attempt is.

use std::convert::Infallible;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

use super::call::{Denial, Ledger, millis};
use super::grants::Grants;
use super::rules::{Destination, DestinationError};
use super::{DENIALS, FetchError, charge, resolve, send};
use gatehouse_core::model::ApprovalMode;

/// The header that carries a refusal's code.
const DENIAL_HEADER: &str = "x-gatehouse-denial";

/// The egress proxy of the stdio server of the adapter with `grants`, for its
/// [`crate::stdio::StdioServer::set_network`]. It holds the grants weakly: the grants hold the
/// server, which holds this.
pub fn network(grants: &Arc<Grants>) -> crate::stdio::Network {
    let grants = Arc::downgrade(grants);
    crate::stdio::Network(Arc::new(move |listener, process| {
        serve(grants.clone(), process, listener)
    }))
}

/// Serves the proxy of process `process` on `listener` until the returned handle is aborted
/// (which also ends the connections it serves).
fn serve(
    grants: Weak<Grants>,
    process: u64,
    listener: std::net::TcpListener,
) -> std::io::Result<tokio::task::AbortHandle> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let grants = grants.clone();
                        connections.spawn(async move {
                            let service = hyper::service::service_fn(move |request| {
                                handle(grants.clone(), process, request)
                            });
                            let served = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .with_upgrades()
                                .await;
                            if let Err(error) = served {
                                tracing::debug!(%error, "egress proxy connection ended with an error");
                            }
                        });
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the egress proxy of a stdio server stopped accepting");
                        return;
                    }
                },
                Some(_) = connections.join_next() => {}
            }
        }
    });
    Ok(task.abort_handle())
}

/// One request from process `process` of the server.
async fn handle(
    grants: Weak<Grants>,
    process: u64,
    request: Request<Incoming>,
) -> Result<Response<WasiBody>, Infallible> {
    let Some(grants) = grants.upgrade() else {
        return Ok(answer(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            "the adapter was unloaded",
        ));
    };
    let method = request.method().clone();
    let (calls, calls_ended) = grants.serving.of(process);
    let refusal = match calls.first() {
        None => Some((
            "no_call",
            "the server is serving no call, so no call can be charged with this request; a \
             stdio server reaches the network only while it serves one",
        )),
        Some(oldest) if calls.iter().any(|c| c.call.tenant != oldest.call.tenant) => Some((
            "several_tenants",
            "the server's process is serving calls of more than one tenant, so no one call \
             can be charged with this request; set `isolate = \"tenant\"` in its \
             [[stdio.server]] entry to give each tenant processes of its own",
        )),
        Some(_) => None,
    };
    if let Some((code, reason)) = refusal {
        log_refusal(&method, &request.uri().to_string(), code, reason);
        return Ok(answer(StatusCode::FORBIDDEN, Some(code), reason));
    }
    let ledger = Arc::new(Ledger::joint(Arc::clone(&grants), calls));
    if method == Method::CONNECT {
        return Ok(connect(ledger, calls_ended, request).await);
    }
    let request = request.map(|body| body.map_err(HttpError::from).boxed_unsync());
    match send(Arc::clone(&ledger), request, None).await {
        Ok(response) => Ok(response),
        Err(error) => {
            // The record stays on the call: read, not taken.
            let last = ledger.spent().attempts.last().cloned();
            let failure = FetchError::of(last, error.to_string());
            let status = if matches!(error, HttpError::HttpRequestDenied) {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::BAD_GATEWAY
            };
            Ok(answer(status, Some(&failure.code), &failure.reason))
        }
    }
}

/// A `CONNECT`: checked, resolved, connected, answered 200, then tunnelled until either side
/// closes, one of the calls ends or the egress time is spent.
async fn connect(
    ledger: Arc<Ledger>,
    calls_ended: Vec<tokio::sync::watch::Receiver<()>>,
    mut request: Request<Incoming>,
) -> Response<WasiBody> {
    let authority = request
        .uri()
        .authority()
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut attempt = super::call::attempt(Method::CONNECT.to_string(), authority.clone());
    let checked = async {
        let dest = match Destination::parse(&format!("https://{authority}/")) {
            Ok(dest) if !authority.is_empty() && request.uri().path_and_query().is_none() => dest,
            Ok(_) | Err(DestinationError::Invalid | DestinationError::AmbiguousPath(_)) => {
                return Err(Denial::InvalidUrl);
            }
        };
        attempt.destination = dest.without_query();
        charge(&ledger, &ledger.begun())?;
        // `dest`'s path is `/`, which only a grant of the whole host covers; a tunnel carries
        // any method, so the grant must allow every one.
        let whole_host = ledger
            .grants
            .rules
            .iter()
            .find(|rule| rule.url.matches(&dest) && rule.allows_every_method());
        let Some(rule) = whole_host else {
            return Err(Denial::TunnelNotGranted {
                destination: dest.without_query(),
            });
        };
        if ledger.call.approval_mode < ApprovalMode::Network {
            return Err(Denial::TunnelApprovalMode {
                mode: ledger.call.approval_mode.to_string(),
            });
        }
        resolve(&dest, &rule.addresses, ledger.deadline()).await
    }
    .await;
    let addrs = match checked {
        Ok(addrs) => addrs,
        Err(denial) => {
            let reason = denial.to_string();
            super::refuse(&ledger, attempt, &denial);
            return answer(StatusCode::FORBIDDEN, Some(denial.code()), &reason);
        }
    };
    let connected = tokio::time::timeout_at(ledger.deadline().into(), async {
        let mut last = None;
        for addr in &addrs {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(stream) => return Ok((*addr, stream)),
                Err(error) => last = Some(error),
            }
        }
        Err(last.map_or_else(|| "no address to connect to".to_owned(), |e| e.to_string()))
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "no connection within the call's egress time budget of {} ms",
            millis(ledger.grants.max_total)
        ))
    });
    let (addr, upstream) = match connected {
        Ok(connected) => connected,
        Err(reason) => {
            attempt.allowed = true;
            attempt.code = "upstream_error".to_owned();
            attempt.reason = reason.clone();
            ledger.record(attempt);
            return answer(StatusCode::BAD_GATEWAY, Some("upstream_error"), &reason);
        }
    };
    attempt.allowed = true;
    attempt.address = Some(addr);
    attempt.status = Some(200);
    attempt.code = "ok".to_owned();
    tracing::info!(method = "CONNECT", destination = %attempt.destination, "egress tunnel opened");
    let index = ledger.record(attempt);
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let client = match upgrade.await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(error) => {
                tracing::debug!(%error, "the stdio server left before its tunnel opened");
                return;
            }
        };
        tunnel(&ledger, index, calls_ended, client, upstream).await;
    });
    answer(StatusCode::OK, None, "")
}

/// Copies both ways between the server and the upstream, each byte charged to the calls,
/// until both sides close, a budget is spent, one of the calls ends or the egress time runs
/// out.
async fn tunnel(
    ledger: &Ledger,
    index: Option<usize>,
    calls_ended: Vec<tokio::sync::watch::Receiver<()>>,
    client: impl AsyncRead + AsyncWrite,
    upstream: tokio::net::TcpStream,
) {
    let mut call_ended = tokio::task::JoinSet::new();
    for mut ended in calls_ended {
        call_ended.spawn(async move { while ended.changed().await.is_ok() {} });
    }
    let (mut from_client, mut to_client) = tokio::io::split(client);
    let (mut from_upstream, mut to_upstream) = upstream.into_split();
    let out = pump(&mut from_client, &mut to_upstream, |n| {
        ledger.spend_request(n).map_err(|d| d.to_string())
    });
    let back = pump(&mut from_upstream, &mut to_client, |n| {
        ledger.spend_response(n)
    });
    let why = tokio::select! {
        result = async { tokio::try_join!(out, back) } => result.err(),
        _ = tokio::time::sleep_until(ledger.deadline().into()) => Some(format!(
            "the call's egress time budget of {} ms is spent (`[egress] max_total_ms`)",
            millis(ledger.grants.max_total)
        )),
        _ = call_ended.join_next() => Some("a call it was opened for ended".to_owned()),
    };
    if let Some(reason) = why {
        tracing::info!(%reason, "egress tunnel closed");
        ledger.update(index, |attempt| {
            if attempt.reason.is_empty() {
                attempt.reason = format!("tunnel closed: {reason}");
            }
        });
    }
}

/// Copies `from` to `to` until `from` ends (then closes `to`'s writing side), each chunk first
/// passed to `spend`, which ends the copy with its reason. Returns the bytes copied.
async fn pump(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    spend: impl Fn(u64) -> Result<(), String>,
) -> Result<u64, String> {
    let mut buf = vec![0u8; 16 << 10];
    let mut total = 0u64;
    loop {
        let read = from.read(&mut buf).await.map_err(|e| e.to_string())?;
        if read == 0 {
            let _ = to.shutdown().await;
            return Ok(total);
        }
        spend(read as u64)?;
        to.write_all(&buf[..read])
            .await
            .map_err(|e| e.to_string())?;
        total += read as u64;
    }
}

/// A response of the proxy itself: `reason` as text, and a refusal's `code` in
/// [`DENIAL_HEADER`].
fn answer(status: StatusCode, code: Option<&str>, reason: &str) -> Response<WasiBody> {
    let mut response = Response::new(
        http_body_util::Full::new(Bytes::from(reason.to_owned()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    if !reason.is_empty() {
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
    }
    if let Some(code) = code.and_then(|c| HeaderValue::from_str(c).ok()) {
        response.headers_mut().insert(DENIAL_HEADER, code);
    }
    response
}

/// Logs a refusal that no call can record.
fn log_refusal(method: &Method, destination: &str, code: &str, reason: &str) {
    match DENIALS.hit() {
        Some(denied) => {
            tracing::warn!(%method, %destination, code, reason, denied, "stdio server egress denied");
        }
        None => tracing::info!(%method, %destination, code, reason, "stdio server egress denied"),
    }
}
