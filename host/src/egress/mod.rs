//! The egress gate: the one path out of an adapter.
//!
//! Adapters reach the outside world only through `wasi:http/outgoing-handler`, which the host
//! implements with [`EgressGate`] (wasmtime-wasi-http's `WasiHttpHooks::send_request`, built
//! without its permissive default sender, so no other path exists). Every request goes through
//! one function, `send`, which in order:
//! 1. parses the URL (WHATWG rules: dot segments resolved, host case-folded and punycoded) and
//!    refuses userinfo;
//! 2. charges the call's request-count and time budgets;
//! 3. matches the adapter's granted rules (scheme, host, port, path prefix, then method);
//! 4. checks the method against the call's effective approval mode: `read_only` and
//!    `local_write` calls may only use GET, HEAD and OPTIONS;
//! 5. resolves the host once and refuses the request if *any* resolved address is loopback,
//!    private, link-local, unique-local, CGNAT, multicast, unspecified, reserved or cloud
//!    metadata (IPv4-mapped IPv6 judged as IPv4) unless `[egress] allow_private` lists it,
//!    then connects to a checked address, trying them in resolver order (no second lookup, so
//!    no DNS rebinding);
//! 6. reads the request body against the call's request-byte budget;
//! 7. strips `Authorization`, `Cookie`, `Proxy-*`, `Idempotency-Key`, `traceparent` and every
//!    credential-slot header the guest set, injects the rule's credentials, and adds
//!    `traceparent` (the call's trace id) and, on non-safe methods, `Idempotency-Key` (the
//!    call's key, when it has one);
//! 8. connects to the checked address, performs the TLS handshake for `https` (system roots
//!    plus `[egress] extra_root_certificates`; the certificate must name the destination's
//!    host), sends over HTTP/1.1 and meters the response body against the response-byte and
//!    time budgets.
//!
//! Redirects are **not followed** by the host: a 3xx response is returned to the guest as is.
//! A client that follows it sends a new request, which passes all of the above again (the SDK
//! client does this).
//!
//! Every attempt is recorded on the call as an [`EgressAttempt`] (method, destination without
//! query, address, status, bytes, allowed or the denial code and reason), never with header
//! values. A denial reaches the guest as `HTTP-request-denied`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use gatehouse_host::egress::{CallInfo, EgressConfig, EgressGate, Grants, TlsClient};
//! use gatehouse_host::model::ApprovalMode;
//!
//! let config: EgressConfig = toml::from_str(r#"
//!     allow_private = ["127.0.0.0/8"]
//!     [[grant]]
//!     adapter = "gatehouse.rest"
//!     url = "http://127.0.0.1:8080/api/"
//!     methods = ["GET"]
//! "#).unwrap();
//! # let requested = Vec::new();
//! let tls = TlsClient::from_config(&config).unwrap(); // once per host
//! let grants = Arc::new(Grants::for_adapter(&config, &tls, "gatehouse.rest", &requested).unwrap());
//! let call = CallInfo::new(ApprovalMode::ReadOnly, "4bf92f3577b34da6a3ce929d0e0e4736", None);
//! let gate = EgressGate::new(grants, call);
//! ```

mod addr;
mod grants;
mod rules;
#[cfg(test)]
mod tests;
mod transport;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

pub use addr::{AddrClass, AddressPolicy, AddressRefused, canonical, classify};
pub use grants::{
    Credential, CredentialConfig, EgressConfig, GrantConfig, GrantError, Grants, Rule, Secret,
};
pub use rules::{
    DestHost, Destination, HostPattern, MethodName, PatternError, PortPattern, Scheme, UrlPattern,
    is_safe, parse_methods,
};
use transport::MeteredBody;
pub use transport::{TlsClient, TlsConfigError};

use crate::host::{is_trace_id, random_hex};
use crate::model::ApprovalMode;

/// Attempts beyond this many are not recorded individually (a looping adapter cannot grow the
/// call record without bound); the count of dropped records is kept instead.
const MAX_RECORDED_ATTEMPTS: usize = 64;
/// Longest destination text kept in a record of an unparsable URL.
const MAX_RECORDED_URL: usize = 256;

/// Why the gate refused a request. The guest sees only `HTTP-request-denied`; the call record
/// and the log keep this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    /// Not an absolute `http`/`https` URL with a host, or it carries userinfo.
    #[error("not an absolute http(s) URL without userinfo")]
    InvalidUrl,
    /// The call already made its allowed number of requests.
    #[error("the call's budget of {limit} requests is spent (`[egress] max_requests`)")]
    RequestBudget {
        /// The budget.
        limit: u32,
    },
    /// The call's egress time is spent.
    #[error("the call's egress time budget of {limit_ms} ms is spent (`[egress] max_total_ms`)")]
    TimeBudget {
        /// The budget.
        limit_ms: u64,
    },
    /// No granted rule covers the destination.
    #[error(
        "no egress grant for this adapter covers {destination}; the operator grants destinations in `[[egress.grant]]`"
    )]
    NoMatchingGrant {
        /// The destination, without query.
        destination: String,
    },
    /// A rule covers the destination, but not with this method.
    #[error("{method} is not granted for {destination} (granted: {granted})")]
    MethodNotGranted {
        /// The method.
        method: String,
        /// The destination.
        destination: String,
        /// Methods granted there.
        granted: String,
    },
    /// The method writes and the call's effective approval mode does not allow writes.
    #[error(
        "{method} can change upstream state; a `{mode}` call may only use GET, HEAD and OPTIONS"
    )]
    ApprovalMode {
        /// The method.
        method: String,
        /// The effective approval mode.
        mode: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {detail}")]
    Resolve {
        /// The host.
        host: String,
        /// The resolver's message.
        detail: String,
    },
    /// A resolved address is not allowed.
    #[error("{0}")]
    Address(AddressRefused),
    /// The request body exceeds what is left of the call's request-byte budget.
    #[error(
        "the request body exceeds the call's request budget of {limit} bytes (`[egress] max_request_bytes`)"
    )]
    RequestBytes {
        /// The budget.
        limit: u64,
    },
}

impl Denial {
    /// Stable machine-readable code, as recorded on the call.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl => "invalid_url",
            Self::RequestBudget { .. } => "request_budget",
            Self::TimeBudget { .. } => "time_budget",
            Self::NoMatchingGrant { .. } => "no_matching_grant",
            Self::MethodNotGranted { .. } => "method_not_granted",
            Self::ApprovalMode { .. } => "approval_mode",
            Self::Resolve { .. } => "resolve_failed",
            Self::Address(_) => "address_not_allowed",
            Self::RequestBytes { .. } => "request_bytes_budget",
        }
    }
}

/// One outbound request an adapter attempted during a call. Never holds header values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EgressAttempt {
    /// HTTP method.
    pub method: String,
    /// `scheme://host:port/path` (no query), or the raw URI, cut, when it did not parse.
    pub destination: String,
    /// The checked address connected to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// Whether the gate let it through.
    pub allowed: bool,
    /// `ok`; after a denial, its [`Denial::code`]; or how an allowed request failed:
    /// `upstream_error`, `upstream_timeout`, `tls_error`, `request_body_error`,
    /// `response_bytes_budget`, `time_budget`.
    pub code: String,
    /// Why it was denied or how it failed; empty when it went through.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Response status, if a response arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Request body bytes sent.
    pub request_bytes: u64,
    /// Response body bytes delivered to the guest.
    pub response_bytes: u64,
}

/// What the gate needs to know about the call in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallInfo {
    /// The call's effective approval mode.
    pub approval_mode: ApprovalMode,
    /// W3C trace id (32 lowercase hex digits); others are replaced by a fresh one.
    pub trace_id: String,
    /// Sent as `Idempotency-Key` on non-safe methods.
    pub idempotency_key: Option<String>,
}

impl CallInfo {
    /// Call facts for the gate.
    pub fn new(
        approval_mode: ApprovalMode,
        trace_id: impl Into<String>,
        idempotency_key: Option<String>,
    ) -> Self {
        Self {
            approval_mode,
            trace_id: trace_id.into(),
            idempotency_key,
        }
    }
}

/// The per-call egress gate: the adapter's grants, the call's facts, and what the call spent.
#[derive(Debug, Clone)]
pub struct EgressGate {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    grants: Arc<Grants>,
    call: CallInfo,
    deadline: Instant,
    strip: Vec<HeaderName>,
    spent: Mutex<Spent>,
}

#[derive(Debug, Default)]
struct Spent {
    requests: u32,
    request_bytes: u64,
    response_bytes: u64,
    attempts: Vec<EgressAttempt>,
    dropped: usize,
}

impl EgressGate {
    /// Prepare phase (per call): a gate for one call of an adapter with `grants`. The time
    /// budget starts now.
    pub fn new(grants: Arc<Grants>, call: CallInfo) -> Self {
        let mut strip: Vec<HeaderName> = vec![
            header::AUTHORIZATION,
            header::COOKIE,
            HeaderName::from_static("idempotency-key"),
            HeaderName::from_static("traceparent"),
            HeaderName::from_static("tracestate"),
        ];
        strip.extend(grants.credential_headers().cloned());
        Self {
            shared: Arc::new(Shared {
                deadline: Instant::now() + grants.max_total,
                grants,
                call,
                strip,
                spent: Mutex::new(Spent::default()),
            }),
        }
    }

    /// A gate that denies everything (for instances that have no egress, such as policies).
    pub fn deny_all() -> Self {
        Self::new(
            Arc::new(Grants::none()),
            CallInfo::new(ApprovalMode::ReadOnly, "", None),
        )
    }

    /// Takes the recorded attempts.
    pub fn take_attempts(&self) -> Vec<EgressAttempt> {
        std::mem::take(&mut self.shared.spent().attempts)
    }

    /// How many attempts were not recorded because of the per-call record cap.
    pub fn attempts_dropped(&self) -> usize {
        self.shared.spent().dropped
    }

    /// Sends one request through every check (the function the WASI hook calls; public so
    /// the checks can be tested without a guest). Denials are `HttpRequestDenied`. `options`
    /// are the guest's request options: a `first_byte_timeout` shortens the wait for the
    /// response head, never beyond the call's time budget.
    pub async fn send(
        &self,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<Response<WasiBody>, HttpError> {
        send(Arc::clone(&self.shared), request, options).await
    }
}

impl Shared {
    fn spent(&self) -> MutexGuard<'_, Spent> {
        // A panic while holding this lock cannot leave the counters half-updated in a way that
        // loosens a budget, so a poisoned lock is still usable.
        self.spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an attempt; returns its index if it was kept.
    fn record(&self, attempt: EgressAttempt) -> Option<usize> {
        let mut spent = self.spent();
        if spent.attempts.len() < MAX_RECORDED_ATTEMPTS {
            spent.attempts.push(attempt);
            Some(spent.attempts.len() - 1)
        } else {
            spent.dropped += 1;
            None
        }
    }

    fn update(&self, index: Option<usize>, f: impl FnOnce(&mut EgressAttempt)) {
        if let Some(i) = index
            && let Some(attempt) = self.spent().attempts.get_mut(i)
        {
            f(attempt);
        }
    }
}

/// The one function that performs egress. See the module docs for the order of checks.
async fn send(
    shared: Arc<Shared>,
    request: Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<Response<WasiBody>, HttpError> {
    let (parts, body) = request.into_parts();
    let method = parts.method.clone();
    let raw_uri = parts.uri.to_string();
    let mut attempt = EgressAttempt {
        method: method.to_string(),
        destination: cut(&raw_uri, MAX_RECORDED_URL),
        address: None,
        allowed: false,
        code: String::new(),
        reason: String::new(),
        status: None,
        request_bytes: 0,
        response_bytes: 0,
    };
    let checked = match check(&shared, &method, &raw_uri, body).await {
        Ok(checked) => checked,
        Err((stop, destination)) => {
            if let Some(destination) = destination {
                attempt.destination = destination;
            }
            let denial = match stop {
                Stop::Denied(denial) => denial,
                Stop::Failed(error) => {
                    attempt.code = "request_body_error".to_owned();
                    attempt.reason = error.to_string();
                    shared.record(attempt);
                    return Err(error);
                }
            };
            tracing::info!(method = %method, destination = %attempt.destination, code = denial.code(), reason = %denial, "egress denied");
            attempt.code = denial.code().to_owned();
            attempt.reason = denial.to_string();
            shared.record(attempt);
            return Err(HttpError::HttpRequestDenied);
        }
    };
    attempt.destination = checked.dest.without_query();
    attempt.address = checked.addrs.first().copied();
    attempt.allowed = true;
    attempt.request_bytes = checked.body.len() as u64;
    let mut outgoing = Request::builder()
        .method(method.clone())
        .uri(checked.dest.path_and_query())
        .body(http_body_util::Full::new(checked.body.clone()))
        .map_err(|e| HttpError::InternalError(Some(e.to_string())))?;
    *outgoing.headers_mut() = outgoing_headers(&shared, &parts.headers, &checked, &method);

    // The guest may ask for a shorter wait for the response head; never a longer one.
    let head_deadline = options
        .and_then(|o| o.first_byte_timeout)
        .map_or(shared.deadline, |wait| {
            shared.deadline.min(Instant::now() + wait)
        });
    let exchange = transport::exchange(&checked.addrs, &checked.dest, &shared.grants.tls, outgoing);
    let response = match tokio::time::timeout_at(head_deadline.into(), exchange).await {
        Ok(Ok((addr, response))) => {
            attempt.address = Some(addr);
            response
        }
        Ok(Err(failure)) => {
            attempt.code = failure.code.to_owned();
            attempt.reason = failure.reason;
            tracing::info!(method = %method, destination = %attempt.destination, code = %attempt.code, reason = %attempt.reason, "egress failed upstream");
            shared.record(attempt);
            return Err(failure.error);
        }
        Err(_elapsed) if head_deadline < shared.deadline => {
            attempt.code = "upstream_timeout".to_owned();
            attempt.reason = "no response within the timeout the adapter set".to_owned();
            shared.record(attempt);
            return Err(HttpError::ConnectionReadTimeout);
        }
        Err(_elapsed) => {
            let denial = Denial::TimeBudget {
                limit_ms: millis(shared.grants.max_total),
            };
            attempt.code = denial.code().to_owned();
            attempt.reason = denial.to_string();
            shared.record(attempt);
            return Err(HttpError::ConnectionReadTimeout);
        }
    };
    attempt.code = "ok".to_owned();
    attempt.status = Some(response.status().as_u16());
    tracing::info!(method = %method, destination = %attempt.destination, status = response.status().as_u16(), "egress sent");
    let index = shared.record(attempt);
    let sleep = Box::pin(tokio::time::sleep_until(shared.deadline.into()));
    Ok(response.map(|incoming| {
        MeteredBody {
            incoming,
            shared,
            index,
            sleep,
        }
        .boxed_unsync()
    }))
}

/// A request that passed every check.
struct Checked {
    dest: Destination,
    addrs: Vec<SocketAddr>,
    rule: usize,
    body: Bytes,
}

/// Why a request was not sent.
enum Stop {
    /// A check refused it.
    Denied(Denial),
    /// The guest's request body failed.
    Failed(HttpError),
}

/// Steps 1-6. On denial, also returns the normalized destination if it got that far.
async fn check(
    shared: &Shared,
    method: &Method,
    raw_uri: &str,
    body: WasiBody,
) -> Result<Checked, (Stop, Option<String>)> {
    let dest = Destination::parse(raw_uri).ok_or((Stop::Denied(Denial::InvalidUrl), None))?;
    let shown = dest.without_query();
    let deny = |denial| (Stop::Denied(denial), Some(shown.clone()));
    let grants = &shared.grants;
    {
        let mut spent = shared.spent();
        if spent.requests >= grants.max_requests {
            return Err(deny(Denial::RequestBudget {
                limit: grants.max_requests,
            }));
        }
        spent.requests += 1;
    }
    if Instant::now() >= shared.deadline {
        return Err(deny(Denial::TimeBudget {
            limit_ms: millis(grants.max_total),
        }));
    }
    let covering: Vec<(usize, &Rule)> = grants
        .rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule.url.matches(&dest))
        .collect();
    if covering.is_empty() {
        return Err(deny(Denial::NoMatchingGrant {
            destination: shown.clone(),
        }));
    }
    let wanted = MethodName(method.clone());
    let Some(&(rule, _)) = covering
        .iter()
        .find(|(_, rule)| rule.methods.contains(&wanted))
    else {
        let granted: std::collections::BTreeSet<&str> = covering
            .iter()
            .flat_map(|(_, rule)| rule.methods.iter().map(|m| m.0.as_str()))
            .collect();
        return Err(deny(Denial::MethodNotGranted {
            method: method.to_string(),
            destination: shown.clone(),
            granted: granted.into_iter().collect::<Vec<_>>().join(", "),
        }));
    };
    if !is_safe(method) && shared.call.approval_mode < ApprovalMode::Network {
        return Err(deny(Denial::ApprovalMode {
            method: method.to_string(),
            mode: mode_name(shared.call.approval_mode).to_owned(),
        }));
    }
    let addrs = resolve(&dest, &grants.addresses, shared.deadline)
        .await
        .map_err(deny)?;
    let body = match tokio::time::timeout_at(shared.deadline.into(), read_body(shared, body)).await
    {
        Ok(read) => read.map_err(|stop| (stop, Some(shown.clone())))?,
        Err(_elapsed) => {
            return Err(deny(Denial::TimeBudget {
                limit_ms: millis(grants.max_total),
            }));
        }
    };
    Ok(Checked {
        dest,
        addrs,
        rule,
        body,
    })
}

/// Step 5: one lookup; every address must pass. Returns at least one address.
async fn resolve(
    dest: &Destination,
    policy: &AddressPolicy,
    deadline: Instant,
) -> Result<Vec<SocketAddr>, Denial> {
    let addrs: Vec<SocketAddr> = match &dest.host {
        DestHost::Ip(ip) => vec![SocketAddr::new(*ip, dest.port)],
        DestHost::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), dest.port));
            match tokio::time::timeout_at(deadline.into(), lookup).await {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => {
                    return Err(Denial::Resolve {
                        host: name.clone(),
                        detail: e.to_string(),
                    });
                }
                Err(_elapsed) => {
                    return Err(Denial::Resolve {
                        host: name.clone(),
                        detail: "the lookup did not finish within the egress time budget"
                            .to_owned(),
                    });
                }
            }
        }
    };
    for addr in &addrs {
        policy.check(addr.ip()).map_err(Denial::Address)?;
    }
    if addrs.is_empty() {
        return Err(Denial::Resolve {
            host: dest.host.to_string(),
            detail: "no addresses".to_owned(),
        });
    }
    Ok(addrs)
}

/// Step 6: reads the whole body, charging the request-byte budget as it goes.
async fn read_body(shared: &Shared, mut body: WasiBody) -> Result<Bytes, Stop> {
    let limit = shared.grants.max_request_bytes;
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        // The guest's body stream failed (e.g. it was dropped unfinished): nothing is sent.
        let frame = frame.map_err(Stop::Failed)?;
        if let Ok(data) = frame.into_data() {
            let mut spent = shared.spent();
            spent.request_bytes += data.len() as u64;
            if spent.request_bytes > limit {
                return Err(Stop::Denied(Denial::RequestBytes { limit }));
            }
            drop(spent);
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// Step 7: the headers sent upstream.
fn outgoing_headers(
    shared: &Shared,
    guest: &http::HeaderMap,
    checked: &Checked,
    method: &Method,
) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in guest {
        let stripped = shared.strip.contains(name)
            || name.as_str().starts_with("proxy-")
            || *name == header::HOST
            || *name == header::CONTENT_LENGTH;
        if !stripped {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(&checked.dest.authority()) {
        headers.insert(header::HOST, host);
    }
    for credential in &shared.grants.rules[checked.rule].credentials {
        headers.insert(
            credential.header.clone(),
            credential.value.header_value().clone(),
        );
    }
    if let Ok(value) = HeaderValue::from_str(&traceparent(&shared.call.trace_id)) {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    if !is_safe(method)
        && let Some(key) = &shared.call.idempotency_key
        && let Ok(value) = HeaderValue::from_str(key)
    {
        headers.insert(HeaderName::from_static("idempotency-key"), value);
    }
    if !checked.body.is_empty() || !is_safe(method) {
        headers.insert(
            header::CONTENT_LENGTH,
            HeaderValue::from(checked.body.len()),
        );
    }
    headers
}

/// `00-<trace id>-<fresh span id>-01`.
fn traceparent(trace_id: &str) -> String {
    let trace = if is_trace_id(trace_id) {
        trace_id.to_owned()
    } else {
        random_hex(16)
    };
    format!("00-{trace}-{}-01", random_hex(8))
}

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for EgressGate {
    fn send_request(
        &mut self,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_done: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        let shared = Arc::clone(&self.shared);
        Box::new(async move {
            let response = send(shared, request, options).await?;
            let done: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send> =
                Box::new(async { Ok(()) });
            Ok((response, done))
        })
    }
}

fn mode_name(mode: ApprovalMode) -> &'static str {
    match mode {
        ApprovalMode::ReadOnly => "read_only",
        ApprovalMode::LocalWrite => "local_write",
        ApprovalMode::Network => "network",
        ApprovalMode::Delegated => "delegated",
        ApprovalMode::Destructive => "destructive",
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
