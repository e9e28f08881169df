//! The egress gate: the one path out of an adapter.
//!
//! Adapters reach the outside world only through `wasi:http/outgoing-handler`, which the host
//! implements with [`EgressGate`] (wasmtime-wasi-http's `WasiHttpHooks::send_request`, built
//! without its permissive default sender, so no other path exists). Every request goes through
//! one function, `send`, which in order:
//! 1. parses the URL (WHATWG rules: dot segments resolved, host case-folded and punycoded) and
//!    refuses userinfo;
//! 2. charges the call's request-count and time budgets (the time budget does not run while
//!    the call waits for its caller's answer: [`Paused`]);
//! 3. matches the adapter's granted rules (scheme, host, port, path prefix, then method);
//! 4. checks the method against the call's effective approval mode: `read_only` and
//!    `local_write` calls may only use GET, HEAD and OPTIONS, and the methods the matched
//!    grant names as `read_methods` (an MCP endpoint's POST);
//! 5. resolves the host once and refuses the request if *any* resolved address is in a
//!    special-purpose block (every entry of the IANA IPv4 and IPv6 special-purpose registries,
//!    multicast, cloud metadata; IPv4-mapped IPv6 judged as IPv4) unless the matched grant's
//!    `allow_private` lists it, then connects to a checked address, trying them in resolver
//!    order (no second lookup, so no DNS rebinding);
//! 6. reads the request body against the call's request-byte budget;
//! 7. passes only the guest headers on an allow list ([`STANDARD_HEADERS`] plus the grant's
//!    `headers`; no grant may list a header the host owns), injects the rule's credentials, and adds
//!    `traceparent` (the call's trace id) and, on non-safe methods, `Idempotency-Key` (the
//!    call's key, when it has one);
//! 8. takes a kept-alive connection to one of the checked addresses for this grant from the
//!    host's pool (`pool`: keyed by checked address, scheme, TLS server name and grant, so
//!    never shared across credentials), or connects to the checked address and performs the
//!    TLS handshake for `https` (system roots plus `[egress] extra_root_certificates`; the
//!    certificate must name the destination's host; a known server's session is resumed),
//!    sends over HTTP/1.1 and meters the response body against the response-byte and time
//!    budgets; the connection goes back to the pool when its response is read.
//!
//! When the call's caller cancels the call, what a request waits on (its response head or body)
//! ends at once, recorded `cancelled`. The call's time budget then ends [`FAREWELL`] after the
//! cancellation at the latest: the first request begun meanwhile is sent, so that an adapter
//! can tell its upstream it gave up; any other, or one begun later, is refused (`cancelled`).
//!
//! Redirects are **not followed** by the host: a 3xx response is returned to the guest as is.
//! A client that follows it sends a new request, which passes all of the above again (the SDK
//! client does this).
//!
//! Every attempt is recorded on the call as an [`EgressAttempt`] (method, destination without
//! query, address, status, bytes, allowed or the denial code and reason), never with header
//! values. A denial reaches the guest as `HTTP-request-denied`.
//!
//! A request to `stdio://<adapter id>` is the adapter's own stdio MCP server (an import of a
//! stdio server): after step 2 it is answered by a supervised process (`stdio`), under the
//! same budgets and record, and goes nowhere else. That process's own requests to the network
//! come back through `proxy`, its egress proxy, and are judged against every call the process
//! is serving (and charged to and recorded on each; refused when they are of more than one
//! tenant): plain `http` through `send` with every check above, `CONNECT` for `https` only on
//! a grant of the whole host with every method ([`TUNNEL_METHODS`]), in calls whose approval
//! mode allows writes, checked on its scheme, host, port and address.
//!
//! The gateway's own requests for an adapter (`[import] drift_check` asks an imported MCP
//! server for its tools) take the same path: [`EgressGate::fetch`] hands a request to `send`
//! under that adapter's grants, as one of its `read_only` calls would, and reads the response
//! within the same budgets. No other client in the gateway reaches a plugin's upstream.
//!
//! Phases: the host builds one [`TlsClient`] from `[egress]` (link); each adapter gets its
//! [`Grants`] when it is loaded ([`Grants::for_adapter`], load); each call gets a fresh
//! [`EgressGate`] over those grants with the call's facts ([`CallInfo`]: effective approval
//! mode, trace id, idempotency key) and budgets (prepare); the guest's requests go through
//! `send` (invoke). Tests drive `send` directly against loopback servers (`tests.rs`); the
//! project's benchmarks reach it through the `internals` feature.

mod addr;
mod call;
mod config;
mod grants;
mod pool;
#[cfg(test)]
mod props;
mod proxy;
pub use proxy::network;
mod rules;
mod stdio;
#[cfg(test)]
pub(crate) mod tests;
mod tls;
pub use tls::install_default_provider;
mod transport;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use tracing::Instrument;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// Egress denials, warned about at most once per interval (an adapter probing in a loop must
/// not flood the log).
static DENIALS: gatehouse_core::throttle::Throttle =
    gatehouse_core::throttle::Throttle::new(gatehouse_core::throttle::INTERVAL);

pub use addr::AddressPolicy;
use call::{Begun, Ledger, MAX_RECORDED_URL};
pub use call::{CallInfo, Denial, Paused};
pub use config::{CredentialConfig, EgressConfig, GrantConfig};
use gatehouse_core::model::ApprovalMode;
pub use gatehouse_core::model::EgressAttempt;
pub use grants::{CredentialSource, GrantError, Grants, Rule, STANDARD_HEADERS};
pub use rules::{
    DestHost, Destination, DestinationError, EgressRequest, MethodName, PatternError,
    TUNNEL_METHODS, UrlPattern, is_safe,
};
pub use tls::{TlsClient, TlsConfigError};
use transport::MeteredBody;

use crate::relay::Cancel;

/// Why a request ended when its call's caller cancelled the call.
pub(crate) const CANCELLED: &str = "the caller cancelled the call";

/// How long after its caller cancelled a call the gate still lets one more request of the
/// adapter out: enough to tell its upstream (a 2025-11-25 MCP server's
/// `notifications/cancelled`), too little to go on working. What it waited on when the call
/// was cancelled ends at once; the first request begun after the cancellation runs within this
/// moment and the call's time budget; any other, or one begun later, is refused (`cancelled`).
pub const FAREWELL: Duration = Duration::from_secs(3);

/// What the guest gets for a request its caller's cancellation ended.
fn cancelled_error() -> HttpError {
    HttpError::InternalError(Some(CANCELLED.to_owned()))
}

/// The per-call egress gate: the adapter's grants, the call's facts, and what the call spent.
#[derive(Debug, Clone)]
pub struct EgressGate {
    ledger: Arc<Ledger>,
}

impl EgressGate {
    /// Prepare phase (per call): a gate for one call of an adapter with `grants`. The time
    /// budget starts now.
    pub fn new(grants: Arc<Grants>, call: CallInfo) -> Self {
        Self {
            ledger: Arc::new(Ledger::new(grants, call)),
        }
    }

    /// The gate, stopping what it waits on once `cancel` says the caller cancelled the call
    /// (see [`Cancel`]), and every request [`FAREWELL`] after that.
    #[must_use]
    pub fn cancelled_by(mut self, cancel: Option<Cancel>) -> Self {
        Arc::get_mut(&mut self.ledger)
            .expect("a new gate is not shared")
            .cancel = cancel;
        self
    }

    /// The call's clock of waits for its caller, which the sandbox runs around an ask: the
    /// gate's time budget does not count them.
    pub fn paused(&self) -> Arc<Paused> {
        Arc::clone(&self.ledger.paused)
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
        std::mem::take(&mut self.ledger.spent().attempts)
    }

    /// Sends a request the host makes for the adapter (not its guest) through every check of
    /// `send`, with this gate's grants, call facts and budgets, and reads the whole response
    /// within them. A refusal or failure is the recorded attempt's code and reason.
    pub async fn fetch(&self, request: Request<Bytes>) -> Result<Response<Bytes>, FetchError> {
        let request = request.map(|body| {
            http_body_util::Full::new(body)
                .map_err(|never| match never {})
                .boxed_unsync()
        });
        let failed =
            |gate: &Self, fallback: String| FetchError::of(gate.take_attempts().pop(), fallback);
        let response = match send(Arc::clone(&self.ledger), request, None).await {
            Ok(response) => response,
            Err(error) => return Err(failed(self, error.to_string())),
        };
        let (parts, body) = response.into_parts();
        match body.collect().await {
            Ok(body) => Ok(Response::from_parts(parts, body.to_bytes())),
            Err(error) => Err(failed(self, error.to_string())),
        }
    }

    /// Sends one request through every check (the function the WASI hook calls; reachable
    /// here so tests and benchmarks can drive the checks without a guest). Denials are `HttpRequestDenied`. `options`
    /// are the guest's request options: a `first_byte_timeout` shortens the wait for the
    /// response head, never beyond the call's time budget.
    #[cfg(any(test, feature = "internals"))]
    pub async fn send(
        &self,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<Response<WasiBody>, HttpError> {
        send(Arc::clone(&self.ledger), request, options).await
    }
}

/// Why a request the host made for an adapter ([`EgressGate::fetch`]) has no response: the
/// gate refused it or the upstream failed, as the call record would say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({code})")]
pub struct FetchError {
    /// The attempt's code, e.g. `no_matching_grant`, `address_not_allowed`.
    pub code: String,
    /// Why, in words.
    pub reason: String,
}

impl FetchError {
    /// Why a request failed, as `attempt` (its record, if kept) says: its code and reason, else
    /// `upstream_failed` and `fallback` (the error the request ended with).
    fn of(attempt: Option<EgressAttempt>, fallback: String) -> Self {
        Self {
            code: attempt
                .as_ref()
                .filter(|a| !a.code.is_empty() && a.code != "ok")
                .map_or_else(|| "upstream_failed".to_owned(), |a| a.code.clone()),
            reason: attempt
                .filter(|a| !a.reason.is_empty())
                .map_or(fallback, |a| a.reason),
        }
    }
}

/// The one function that performs egress. See the module docs for the order of checks.
async fn send(
    ledger: Arc<Ledger>,
    request: Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<Response<WasiBody>, HttpError> {
    let (parts, body) = request.into_parts();
    let method = parts.method.clone();
    let raw_uri = parts.uri.to_string();
    let mut attempt = call::attempt(
        method.to_string(),
        raw_uri[..raw_uri.floor_char_boundary(MAX_RECORDED_URL)].to_owned(),
    );
    let begun = ledger.begun();
    if stdio::is_stdio(&raw_uri) {
        if let Err(denial) = charge(&ledger, &begun) {
            return Err(refuse(&ledger, attempt, &denial));
        }
        return stdio::send(ledger, &method, &raw_uri, body, attempt).await;
    }
    let checked = match check(&ledger, &begun, &method, &raw_uri, body).await {
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
                    ledger.record(attempt);
                    return Err(error);
                }
            };
            return Err(refuse(&ledger, attempt, &denial));
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
    *outgoing.headers_mut() = outgoing_headers(&ledger, &parts.headers, &checked, &method);
    attempt.credentials = caller_credentials(&ledger, &checked);

    // The guest may ask for a shorter wait for the response head; never a longer one.
    let deadline = ledger.deadline();
    let head_deadline = options
        .and_then(|o| o.first_byte_timeout)
        .map_or(deadline, |wait| deadline.min(Instant::now() + wait));
    let exchange = transport::exchange(
        &checked.addrs,
        &checked.dest,
        &ledger.grants.tls,
        (ledger.grants.id(), checked.rule),
        outgoing,
    );
    let cut_by = match begun {
        Begun::Before(cut_by) => cut_by,
        Begun::AfterCancellation => None,
    };
    let waited = tokio::select! {
        waited = tokio::time::timeout_at(head_deadline.into(), exchange) => waited,
        () = crate::relay::until_cancelled(cut_by.clone()) => {
            Denial::Cancelled.mark(&mut attempt);
            ledger.record(attempt);
            return Err(cancelled_error());
        }
    };
    let (response, reuse) = match waited {
        Ok(Ok((addr, response, reuse))) => {
            attempt.address = Some(addr);
            (response, reuse)
        }
        Ok(Err(failure)) => {
            attempt.code = failure.code.to_owned();
            attempt.reason = failure.reason;
            tracing::info!(method = %method, destination = %attempt.destination, code = %attempt.code, reason = %attempt.reason, "egress failed upstream");
            ledger.record(attempt);
            return Err(failure.error);
        }
        Err(_elapsed) if head_deadline < deadline => {
            attempt.code = "upstream_timeout".to_owned();
            attempt.reason = "no response within the timeout the adapter set".to_owned();
            ledger.record(attempt);
            return Err(HttpError::ConnectionReadTimeout);
        }
        Err(_elapsed) => {
            ledger.out_of_time().mark(&mut attempt);
            ledger.record(attempt);
            return Err(HttpError::ConnectionReadTimeout);
        }
    };
    attempt.code = "ok".to_owned();
    attempt.status = Some(response.status().as_u16());
    tracing::info!(method = %method, destination = %attempt.destination, status = response.status().as_u16(), "egress sent");
    let index = ledger.record(attempt);
    let sleep = Box::pin(tokio::time::sleep_until(ledger.deadline().into()));
    let cancelled = cut_by.map(|cancel| Box::pin(cancel.cancelled()) as transport::Cancelled);
    Ok(response.map(|incoming| {
        MeteredBody::new(incoming, ledger, index, sleep, reuse)
            .cancelled_by(cancelled)
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

/// Records `attempt` as refused for `denial`, and logs it: every denial at INFO, at most one
/// per 10 s at WARN, with the count since the last. What the guest sees.
fn refuse(ledger: &Ledger, mut attempt: EgressAttempt, denial: &Denial) -> HttpError {
    let (method, destination) = (&attempt.method, &attempt.destination);
    match DENIALS.hit() {
        Some(denied) => {
            tracing::warn!(%method, %destination, code = denial.code(), reason = %denial, denied, "egress denied");
        }
        None => {
            tracing::info!(%method, %destination, code = denial.code(), reason = %denial, "egress denied");
        }
    }
    attempt.allowed = false;
    denial.mark(&mut attempt);
    ledger.record(attempt);
    HttpError::HttpRequestDenied
}

/// Step 2: counts the request against the call's budget (each call's, for a stdio server's
/// request judged against several), and refuses it when the count or the time is spent, or
/// when it is not the one request a cancelled call may still send (`begun`).
fn charge(ledger: &Ledger, begun: &Begun) -> Result<(), Denial> {
    if matches!(begun, Begun::AfterCancellation) && ledger.farewell_spent() {
        return Err(Denial::Cancelled);
    }
    let grants = &ledger.grants;
    for payer in ledger.payers() {
        let mut spent = payer.spent();
        if spent.requests >= grants.max_requests {
            return Err(Denial::RequestBudget {
                limit: grants.max_requests,
            });
        }
        spent.requests += 1;
    }
    if Instant::now() >= ledger.deadline() {
        return Err(ledger.out_of_time());
    }
    Ok(())
}

/// Steps 1-6. On denial, also returns the normalized destination if it got that far.
async fn check(
    ledger: &Ledger,
    begun: &Begun,
    method: &Method,
    raw_uri: &str,
    body: WasiBody,
) -> Result<Checked, (Stop, Option<String>)> {
    let dest = Destination::parse(raw_uri).map_err(|e| {
        let denial = match e {
            DestinationError::Invalid => Denial::InvalidUrl,
            DestinationError::AmbiguousPath(what) => Denial::AmbiguousPath { what },
        };
        (Stop::Denied(denial), None)
    })?;
    let shown = dest.without_query();
    let deny = |denial| (Stop::Denied(denial), Some(shown.clone()));
    let grants = &ledger.grants;
    charge(ledger, begun).map_err(deny)?;
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
    if !is_safe(method)
        && ledger.call.approval_mode < ApprovalMode::Network
        && !grants.rules[rule].read_methods.contains(&wanted)
    {
        return Err(deny(Denial::ApprovalMode {
            method: method.to_string(),
            mode: ledger.call.approval_mode.to_string(),
        }));
    }
    let addrs = resolve(&dest, &grants.rules[rule].addresses, ledger.deadline())
        .await
        .map_err(deny)?;
    let body =
        match tokio::time::timeout_at(ledger.deadline().into(), read_body(ledger, body)).await {
            Ok(read) => read.map_err(|stop| (stop, Some(shown.clone())))?,
            Err(_elapsed) => return Err(deny(ledger.out_of_time())),
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
async fn read_body(ledger: &Ledger, mut body: WasiBody) -> Result<Bytes, Stop> {
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        // The guest's body stream failed (e.g. it was dropped unfinished): nothing is sent.
        let frame = frame.map_err(Stop::Failed)?;
        if let Ok(data) = frame.into_data() {
            ledger
                .spend_request(data.len() as u64)
                .map_err(Stop::Denied)?;
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// What the audit record says of the caller's own tokens a request carries: whose, at which
/// provider, the token's hash.
fn caller_credentials(ledger: &Ledger, checked: &Checked) -> Vec<String> {
    let rule = &ledger.grants.rules[checked.rule];
    (rule.credentials.iter())
        .filter_map(|credential| ledger.call.user_token(credential.provider()?))
        .map(|token| {
            format!(
                "{}@{}#{}",
                token.principal, token.provider, token.token_hash
            )
        })
        .collect()
}

/// Step 7: the headers sent upstream.
fn outgoing_headers(
    ledger: &Ledger,
    guest: &http::HeaderMap,
    checked: &Checked,
    method: &Method,
) -> http::HeaderMap {
    let rule = &ledger.grants.rules[checked.rule];
    let mut headers = http::HeaderMap::new();
    for (name, value) in guest {
        if STANDARD_HEADERS.contains(name) || rule.headers.contains(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(&checked.dest.authority()) {
        headers.insert(header::HOST, host);
    }
    for credential in &rule.credentials {
        let value = match &credential.source {
            CredentialSource::Fixed { value, .. } => Some(value.clone()),
            CredentialSource::Caller { provider, scheme } => {
                ledger.call.user_token_header(provider, scheme)
            }
        };
        if let Some(value) = value {
            headers.insert(credential.header.clone(), value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(&crate::telemetry::traceparent(&ledger.call.trace_id))
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    if rule.delegate
        && let Some(token) = &ledger.call.delegation
        && let Ok(value) = HeaderValue::from_str(token)
    {
        headers.insert(HeaderName::from_static(crate::delegation::HEADER), value);
    }
    if !is_safe(method)
        && let Some(key) = &ledger.call.idempotency_key
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
        let ledger = Arc::clone(&self.ledger);
        // Called while the guest runs, so in the call's `adapter` span; the request may be
        // driven from another task, hence the explicit parent.
        let span = tracing::info_span!(
            parent: &tracing::Span::current(),
            "egress",
            method = %request.method(),
            destination = %request.uri().host().unwrap_or_default(),
        );
        Box::new(async move {
            let response = send(ledger, request, options).instrument(span).await?;
            let done: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send> =
                Box::new(async { Ok(()) });
            Ok((response, done))
        })
    }

    /// `http`, `https`, and `stdio` for an adapter's own stdio server (`stdio`).
    fn is_supported_scheme(&mut self, scheme: &http::uri::Scheme) -> bool {
        *scheme == http::uri::Scheme::HTTP
            || *scheme == http::uri::Scheme::HTTPS
            || scheme.as_str().eq_ignore_ascii_case(crate::stdio::SCHEME)
    }
}
