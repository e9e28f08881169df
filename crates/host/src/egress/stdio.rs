//! The `stdio://` transport: how an imported stdio MCP server's adapter reaches its server.
//!
//! The adapter is the signed `mcp-upstream` component, unchanged: it POSTs JSON-RPC messages to
//! `stdio://<its own id>` as it would to a Streamable HTTP endpoint. The gate answers such a
//! request itself, from the adapter's supervised server ([`crate::stdio`]), so the one path out
//! of an adapter stays this gate, with its request, byte and time budgets and its record:
//! 1. the call's request-count and time budgets are charged, as for any request;
//! 2. the destination must be the adapter's own server (`stdio://<adapter id>`, no path), which
//!    exists only when the operator's `[[stdio.server]]` entry granted it at load; the method
//!    must be POST;
//! 3. the body (one JSON-RPC message) is read against the request-byte budget;
//! 4. the host holds the server's MCP session, so `initialize` is answered with what the
//!    server answered when it started, and notifications (`notifications/initialized`) are
//!    taken and dropped (202); every other request is sent to a process of the server for the
//!    call's tenant ([`crate::stdio::StdioServer::process`], one of that tenant's own under
//!    `isolate = "tenant"`) under a JSON-RPC id of the host's, within the call's time budget,
//!    and its answer comes back with the guest's id, metered against the response-byte
//!    budget; while it waits, the call is registered as one that process is serving, so a
//!    request the process sends through its egress proxy ([`super::proxy`]) is judged against
//!    it (and the other calls the process serves) and charged to it;
//! 5. what the server says about the request before it answers (its progress, log lines and
//!    requests of its client: [`crate::stdio::Listener`]) makes the answer an event stream,
//!    as a Streamable HTTP server's would be: each message an event as it comes, the answer
//!    last, every byte metered; the adapter answers a request of the server's by POSTing its
//!    JSON-RPC response, which goes to the process that asked if this call was asked it
//!    (202; else 400 with the reason);
//! 6. a server that crashed, hung, is busy or restarting answers HTTP 503 with the reason
//!    (the adapter's `UPSTREAM_FAILED`, retryable); one that cannot run at all (no sandbox,
//!    package changed, shut down) is a denial with code `stdio_refused`.
//!
//! The effective approval mode is not checked against the method here: every MCP message is a
//! POST, and what a tool may do was decided by the pipeline for its capability, before the
//! adapter ran.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

use gatehouse_core::model::EgressAttempt;

use super::call::{Denial, Ledger};
use super::{Stop, read_body, refuse};
use crate::stdio::{Listener, SCHEME, StdioError, TOLD_QUEUE};

/// Whether `raw_uri` names a stdio server (`stdio:` scheme, any case).
pub(super) fn is_stdio(raw_uri: &str) -> bool {
    raw_uri
        .get(..SCHEME.len() + 1)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("stdio:"))
}

/// Step 2-6 for a request to `stdio://…` (the budgets of step 1 are charged by the caller).
pub(super) async fn send(
    ledger: Arc<Ledger>,
    method: &Method,
    raw_uri: &str,
    body: WasiBody,
    mut attempt: EgressAttempt,
) -> Result<Response<WasiBody>, HttpError> {
    let deny = |attempt: EgressAttempt, denial: Denial| Err(refuse(&ledger, attempt, &denial));
    let server = match (target(raw_uri), &ledger.grants.stdio) {
        (Some(id), Some(server)) if id == server.adapter() => server.clone(),
        _ => {
            let destination = attempt.destination.clone();
            return deny(attempt, Denial::NoMatchingGrant { destination });
        }
    };
    attempt.destination = format!("{SCHEME}://{}", server.adapter());
    if method != Method::POST {
        let destination = attempt.destination.clone();
        return deny(
            attempt,
            Denial::MethodNotGranted {
                method: method.to_string(),
                destination,
                granted: "POST".to_owned(),
            },
        );
    }
    let body =
        match tokio::time::timeout_at(ledger.deadline().into(), read_body(&ledger, body)).await {
            Ok(Ok(body)) => body,
            Ok(Err(Stop::Denied(denial))) => return deny(attempt, denial),
            Ok(Err(Stop::Failed(error))) => {
                attempt.code = "request_body_error".to_owned();
                attempt.reason = error.to_string();
                ledger.record(attempt);
                return Err(error);
            }
            Err(_elapsed) => return deny(attempt, ledger.out_of_time()),
        };
    attempt.allowed = true;
    attempt.request_bytes = body.len() as u64;
    let message = serde_json::from_slice::<Value>(&body).ok();
    let answer = match message {
        Some(message) if message.get("method").is_some_and(Value::is_string) => {
            exchange(&server, &ledger, message).await
        }
        // The adapter's answer to a request of the server's.
        Some(message) if message.get("id").is_some() && message.get("method").is_none() => {
            let call = call_of(&ledger);
            Ok(match server.respond(call, &message).await {
                Ok(()) => Answer::Accepted,
                Err(reason) => Answer::Refused(reason),
            })
        }
        _ => Ok(Answer::Json(json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32600, "message": "not a JSON-RPC message" },
        }))),
    };
    let (status, body) = match answer {
        Ok(Answer::Json(message)) => (StatusCode::OK, Bytes::from(message.to_string())),
        Ok(Answer::Accepted) => (StatusCode::ACCEPTED, Bytes::new()),
        Ok(Answer::Refused(reason)) => (StatusCode::BAD_REQUEST, Bytes::from(reason)),
        Ok(Answer::Events(events)) => return Ok(streamed(&ledger, attempt, events)),
        Err(error) if error.retryable() => (
            StatusCode::SERVICE_UNAVAILABLE,
            Bytes::from(error.to_string()),
        ),
        Err(error) => {
            let reason = error.to_string();
            return deny(attempt, Denial::StdioRefused { reason });
        }
    };
    attempt.status = Some(status.as_u16());
    attempt.response_bytes = body.len() as u64;
    if let Err(reason) = ledger.spend_response(body.len() as u64) {
        attempt.code = "response_bytes_budget".to_owned();
        attempt.reason = reason;
        ledger.record(attempt);
        let limit = ledger.grants.max_response_bytes;
        return Err(HttpError::HttpResponseBodySize(Some(limit)));
    }
    attempt.code = "ok".to_owned();
    tracing::info!(method = %method, destination = %attempt.destination, status = status.as_u16(), "egress sent");
    ledger.record(attempt);
    let content_type = if status == StatusCode::OK {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(
            http_body_util::Full::new(body)
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .map_err(|e| HttpError::InternalError(Some(e.to_string())))
}

/// What the transport answers a message of the adapter's with.
enum Answer {
    /// The JSON-RPC answer, in one piece.
    Json(Value),
    /// What the server said before its answer, and the rest as it comes: an event stream.
    Events(mpsc::Receiver<Value>),
    /// A notification, or an answer to the server's request, taken (202).
    Accepted,
    /// An answer to a request of the server's that none awaits from this call (400).
    Refused(String),
}

/// Who the call of `ledger` is, while its request is in flight: only it may answer what the
/// server asked it.
fn call_of(ledger: &Arc<Ledger>) -> usize {
    Arc::as_ptr(ledger) as usize
}

/// The answer as an event stream: `events` (what the server said, its answer last), each as
/// an SSE event, metered against the call's response-byte budget; the attempt is recorded at
/// once and its bytes counted as they go.
fn streamed(
    ledger: &Arc<Ledger>,
    mut attempt: EgressAttempt,
    events: mpsc::Receiver<Value>,
) -> Response<WasiBody> {
    attempt.status = Some(StatusCode::OK.as_u16());
    attempt.code = "ok".to_owned();
    tracing::info!(method = %attempt.method, destination = %attempt.destination, status = 200, "egress sent (event stream)");
    let index = ledger.record(attempt);
    let ledger = Arc::clone(ledger);
    let frames = futures_util::stream::unfold(Some(events), move |events| {
        let ledger = Arc::clone(&ledger);
        async move {
            let mut events = events?;
            let message = events.recv().await?;
            let event = Bytes::from(format!("event: message\ndata: {message}\n\n"));
            match ledger.meter(index, event.len() as u64) {
                Ok(()) => Some((Ok(http_body::Frame::data(event)), Some(events))),
                Err(over) => Some((Err(over), None)),
            }
        }
    });
    let mut response = Response::new(http_body_util::StreamBody::new(frames).boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// The server a `stdio://ID` destination names: the id, lower-cased; `None` for anything else
/// (a path, a port, userinfo, a query).
fn target(raw_uri: &str) -> Option<String> {
    let rest = raw_uri.get(SCHEME.len() + 1..)?.strip_prefix("//")?;
    let id = rest.strip_suffix('/').unwrap_or(rest);
    let valid = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    valid.then(|| id.to_ascii_lowercase())
}

/// One JSON-RPC message from the adapter in the call of `ledger`, answered: a notification is
/// taken; a request's answer comes whole, or, when the server says something about it first,
/// as events, the answer last.
async fn exchange(
    server: &crate::stdio::StdioServer,
    ledger: &Arc<Ledger>,
    mut message: Value,
) -> Result<Answer, StdioError> {
    let Some(id) = message.get("id").cloned() else {
        return Ok(Answer::Accepted);
    };
    let process = server
        .process(&ledger.call.tenant, ledger.deadline())
        .await?;
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    if method == "initialize" {
        let result = process.initialized();
        return Ok(Answer::Json(
            json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        ));
    }
    let (to, mut told) = mpsc::channel(TOLD_QUEUE);
    let listener = Listener {
        to,
        call: call_of(ledger),
        cancel: ledger.cancel.clone(),
    };
    let params = message.get_mut("params").map(Value::take);
    let ledger = Arc::clone(ledger);
    let own_id = id.clone();
    let server = server.clone();
    let mut answered = Box::pin(async move {
        // While the process works on the call, what it sends through its egress proxy is
        // judged against and charged to the call (`super::proxy`).
        let _serving = ledger.grants.serving.serve(process.number(), &ledger);
        let deadline = || ledger.deadline();
        let mut answer = process
            .request(&method, params, &deadline, Some(listener))
            .await?;
        if method == "tools/call" {
            server.explain(&mut answer);
        }
        answer["id"] = id;
        Ok::<_, StdioError>(answer)
    });
    let first = tokio::select! {
        biased;
        answer = &mut answered => return answered_with(answer, &own_id).map(Answer::Json),
        // (Closed, once the request is answered: then the branch above ends it.)
        Some(first) = told.recv() => first,
    };
    // The server said something first: the rest streams, the answer (or the error that ends
    // the request) last.
    let (events, stream) = mpsc::channel(TOLD_QUEUE);
    let _ = events.try_send(first);
    tokio::spawn(async move {
        let last = loop {
            tokio::select! {
                biased;
                Some(message) = told.recv() => {
                    if events.send(message).await.is_err() {
                        return;
                    }
                }
                answer = &mut answered => break answer,
            }
        };
        // What came before the answer, in order.
        while let Ok(message) = told.try_recv() {
            let _ = events.send(message).await;
        }
        let last = answered_with(last, &own_id).unwrap_or_else(|error| {
            json!({
                "jsonrpc": "2.0",
                "id": own_id,
                "error": { "code": -32603, "message": error.to_string() },
            })
        });
        let _ = events.send(last).await;
    });
    Ok(Answer::Events(stream))
}

/// A request's answer, a cancelled one as the JSON-RPC error that says so (the adapter's
/// request ends at once; the server was told).
fn answered_with(answer: Result<Value, StdioError>, id: &Value) -> Result<Value, StdioError> {
    match answer {
        Err(cancelled @ StdioError::Cancelled { .. }) => Ok(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": REQUEST_CANCELLED, "message": cancelled.to_string() },
        })),
        answer => answer,
    }
}

/// The JSON-RPC error code of a cancelled request (as LSP numbers it; MCP names none).
const REQUEST_CANCELLED: i64 = -32800;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_id_names_a_server() {
        assert!(is_stdio("stdio://acme.fs") && is_stdio("STDIO://acme.fs"));
        assert!(!is_stdio("https://acme.fs") && !is_stdio("std"));
        assert_eq!(target("stdio://Acme.FS").as_deref(), Some("acme.fs"));
        assert_eq!(target("stdio://acme.fs/").as_deref(), Some("acme.fs"));
        for other in [
            "stdio://acme.fs/tools",
            "stdio://acme.fs:80",
            "stdio://u@acme.fs",
            "stdio://acme.fs?x=1",
            "stdio:acme.fs",
            "stdio://",
        ] {
            assert_eq!(target(other), None, "{other}");
        }
    }
}
