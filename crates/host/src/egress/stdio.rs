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
//! 5. a server that crashed, hung, is busy or restarting answers HTTP 503 with the reason
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
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

use gatehouse_core::model::EgressAttempt;

use super::call::{Denial, Ledger, millis};
use super::{Stop, read_body, refuse};
use crate::stdio::{SCHEME, StdioError};

/// Whether `raw_uri` names a stdio server (`stdio:` scheme, any case).
pub(super) fn is_stdio(raw_uri: &str) -> bool {
    raw_uri
        .get(..SCHEME.len() + 1)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("stdio:"))
}

/// Step 2-5 for a request to `stdio://…` (the budgets of step 1 are charged by the caller).
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
    let body = match tokio::time::timeout_at(ledger.deadline.into(), read_body(&ledger, body)).await
    {
        Ok(Ok(body)) => body,
        Ok(Err(Stop::Denied(denial))) => return deny(attempt, denial),
        Ok(Err(Stop::Failed(error))) => {
            attempt.code = "request_body_error".to_owned();
            attempt.reason = error.to_string();
            ledger.record(attempt);
            return Err(error);
        }
        Err(_elapsed) => {
            let limit_ms = millis(ledger.grants.max_total);
            return deny(attempt, Denial::TimeBudget { limit_ms });
        }
    };
    attempt.allowed = true;
    attempt.request_bytes = body.len() as u64;
    let answer = match serde_json::from_slice::<Value>(&body) {
        Ok(message) if message.get("method").is_some_and(Value::is_string) => {
            exchange(&server, &ledger, message).await
        }
        _ => Ok(Some(json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32600, "message": "not a JSON-RPC request" },
        }))),
    };
    let (status, body) = match answer {
        Ok(Some(message)) => (StatusCode::OK, Bytes::from(message.to_string())),
        Ok(None) => (StatusCode::ACCEPTED, Bytes::new()),
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

/// One JSON-RPC message from the adapter in the call of `ledger`, answered: `None` for a
/// notification.
async fn exchange(
    server: &crate::stdio::StdioServer,
    ledger: &Arc<Ledger>,
    mut message: Value,
) -> Result<Option<Value>, StdioError> {
    let Some(id) = message.get("id").cloned() else {
        return Ok(None);
    };
    let deadline = ledger.deadline;
    let process = server.process(&ledger.call.tenant, deadline).await?;
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    let mut answer = if method == "initialize" {
        json!({ "jsonrpc": "2.0", "result": process.initialized() })
    } else {
        // While the process works on the call, what it sends through its egress proxy is
        // judged against and charged to the call (`super::proxy`).
        let _serving = ledger.grants.serving.serve(process.number(), ledger);
        process
            .request(
                &method,
                message.get_mut("params").map(Value::take),
                deadline,
            )
            .await?
    };
    answer["id"] = id;
    Ok(Some(answer))
}

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
