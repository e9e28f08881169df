//! What both HTTP listeners (the MCP endpoint and the admin API) say about each request:
//!
//! 1. one access line per request, at INFO with target `gatehouse::access` (shown with
//!    `RUST_LOG=info`, or `RUST_LOG=warn,gatehouse::access=info` for these alone): fields
//!    `listener` (`mcp` or `admin`), `method`, `path`, `status`, `tenant`, `principal`, `tool`,
//!    `outcome`, `latency_ms`, `bytes` (the response body) and `trace_id`, each present when
//!    the request got that far (an unidentified request has no principal, a `tools/list` no
//!    outcome);
//! 2. every authentication failure (401) counted in `gatehouse_unauthorized_requests_total`
//!    by listener, and warned about at most once per 10 s per listener, with the count and the
//!    last reason (never the credential).
//!
//! A server fills a [`Note`] as the request goes (who called, which call ran) and hands it to
//! [`finish`] with the response.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_core::throttle::{self, Throttle};
use gatehouse_host::Host;

/// The access lines' log target.
pub(crate) const TARGET: &str = "gatehouse::access";

/// One warning per interval about 401s, per listener.
static UNAUTHORIZED: [(&str, Throttle); 2] = [
    ("mcp", Throttle::new(throttle::INTERVAL)),
    ("admin", Throttle::new(throttle::INTERVAL)),
];

/// What the access line of a request says beyond the request line and the response, filled
/// in as the request goes. Cheap to clone (shared), so it rides in the request's extensions to
/// the MCP handler.
#[derive(Debug, Clone, Default)]
pub(crate) struct Note(Arc<Mutex<Fields>>);

#[derive(Debug, Default)]
struct Fields {
    tenant: Option<String>,
    principal: Option<String>,
    tool: Option<String>,
    outcome: Option<&'static str>,
    trace_id: Option<String>,
    /// Why the request was not authenticated (a 401).
    refusal: Option<String>,
}

impl Note {
    fn with<T>(&self, f: impl FnOnce(&mut Fields) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The caller was identified.
    pub(crate) fn caller(&self, tenant: Option<&str>, principal: &str) {
        self.with(|fields| {
            fields.tenant = tenant.map(str::to_owned);
            fields.principal = Some(principal.to_owned());
        });
    }

    /// The request's trace, from its `traceparent` header, until a call names its own.
    pub(crate) fn traceparent(&self, headers: &http::HeaderMap) {
        let trace_id = headers
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .and_then(gatehouse_core::ids::trace_id_of)
            .map(str::to_owned);
        self.with(|fields| fields.trace_id = trace_id);
    }

    /// A governed call ran (or was refused by a gate) for this request.
    pub(crate) fn call(&self, result: &ToolResultEnvelope) {
        self.with(|fields| {
            fields.tool = Some(result.capability_id.clone());
            fields.outcome = Some(result.outcome.as_str());
            fields.trace_id = Some(result.trace_id.clone());
        });
    }

    /// The request was not authenticated, for `reason`.
    pub(crate) fn refused(&self, reason: &str) {
        self.with(|fields| fields.refusal = Some(reason.to_owned()));
    }
}

/// The request line and the response an access line reports.
pub(crate) struct Exchange<'a> {
    /// `mcp` or `admin`.
    pub listener: &'static str,
    /// The request's method.
    pub method: &'a http::Method,
    /// The request's path (without the query, which may carry filters worth nothing here).
    pub path: &'a str,
    /// The response's status.
    pub status: http::StatusCode,
    /// The response body's length, when known before it is sent.
    pub bytes: Option<u64>,
    /// When the request arrived.
    pub started: Instant,
}

/// Writes the access line of a finished request; counts and warns about a 401.
pub(crate) fn finish(host: &Host, note: &Note, exchange: &Exchange<'_>) {
    let fields = note.with(std::mem::take);
    if exchange.status == http::StatusCode::UNAUTHORIZED {
        host.count_unauthorized(exchange.listener);
        let throttle = UNAUTHORIZED
            .iter()
            .find(|(listener, _)| *listener == exchange.listener)
            .map(|(_, throttle)| throttle);
        if let Some(refused) = throttle.and_then(Throttle::hit) {
            tracing::warn!(
                listener = exchange.listener,
                refused,
                last_reason = fields.refusal.as_deref().unwrap_or("unauthorized"),
                "requests refused: authentication failed (401)"
            );
        }
    }
    let latency_ms = exchange.started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(
        target: TARGET,
        listener = exchange.listener,
        method = %exchange.method,
        path = exchange.path,
        status = exchange.status.as_u16(),
        tenant = fields.tenant.as_deref(),
        principal = fields.principal.as_deref(),
        tool = fields.tool.as_deref(),
        outcome = fields.outcome,
        latency_ms = (latency_ms * 1000.0).round() / 1000.0,
        bytes = exchange.bytes,
        trace_id = fields.trace_id.as_deref(),
        "request"
    );
}
