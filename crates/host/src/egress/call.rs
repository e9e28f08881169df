//! What the gate knows and keeps about one call: the call's facts ([`CallInfo`]), what it may
//! still spend and has spent ([`Ledger`]), and the record of every attempt ([`EgressAttempt`],
//! with the [`Denial`] that stopped it, if any).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gatehouse_core::model::ApprovalMode;
use gatehouse_core::model::EgressAttempt;
use http::HeaderValue;

use super::FAREWELL;
use super::addr::AddressRefused;
use super::grants::Grants;

/// Attempts beyond this many are not recorded individually (a looping adapter cannot grow the
/// call record without bound); the count of dropped records is kept instead.
pub(super) const MAX_RECORDED_ATTEMPTS: usize = 64;
/// Longest destination text kept in a record of an unparsable URL.
pub(super) const MAX_RECORDED_URL: usize = 256;

/// Why the gate refused a request. The guest sees only `HTTP-request-denied`; the call record
/// and the log keep this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    /// Not an absolute `http`/`https` URL with a host, or it carries userinfo.
    #[error("not an absolute http(s) URL without userinfo")]
    InvalidUrl,
    /// The path holds something upstream servers decode or treat specially.
    #[error(
        "the request path holds {what}, which upstream servers may read differently from the \
         grant check; send the path without it"
    )]
    AmbiguousPath {
        /// What, in words.
        what: &'static str,
    },
    /// The call already made its allowed number of requests.
    #[error("the call's budget of {limit} requests is spent (`[egress] max_requests`)")]
    RequestBudget {
        /// The budget.
        limit: u32,
    },
    /// The caller cancelled the call, and the one request the adapter may still send to tell
    /// its upstream, within [`FAREWELL`] of it, is spent or too late.
    #[error("{}", super::CANCELLED)]
    Cancelled,
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
    /// A stdio server's `CONNECT` names a host no grant gives whole, with every method: a
    /// tunnel carries any path and method, unseen, so it needs a grant of
    /// `https://host[:port]/` with every method of [`super::TUNNEL_METHODS`].
    #[error(
        "no egress grant for this adapter gives all of {destination} with every method ({}), \
         which a tunnel (CONNECT) can carry unseen: grant the whole host with those methods in \
         `[[egress.grant]]`, or have the server send plain http through the proxy",
        super::TUNNEL_METHODS.join(", ")
    )]
    TunnelNotGranted {
        /// The destination, `https://host:port/`.
        destination: String,
    },
    /// A stdio server's `CONNECT` while it serves a call whose effective approval mode does
    /// not allow writes: a tunnel can carry any method, unseen.
    #[error(
        "a tunnel (CONNECT) can carry any method unseen, and a `{mode}` call may only use GET, \
         HEAD and OPTIONS: the server reaches https destinations only in calls whose approval \
         mode allows writes (`network` or above), or sends plain http through the proxy"
    )]
    TunnelApprovalMode {
        /// The strictest effective approval mode of the calls the server's process serves.
        mode: String,
    },
    /// The adapter's stdio server cannot run: no sandbox can be made, its package no longer
    /// matches the signed pin, or the gateway is shutting down.
    #[error("{reason}")]
    StdioRefused {
        /// Why, and what to do.
        reason: String,
    },
}

impl Denial {
    /// Records this as what ended `attempt`: its code and reason.
    pub(super) fn mark(&self, attempt: &mut EgressAttempt) {
        attempt.code = self.code().to_owned();
        attempt.reason = self.to_string();
    }

    /// Stable machine-readable code, as recorded on the call.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl => "invalid_url",
            Self::AmbiguousPath { .. } => "ambiguous_path",
            Self::RequestBudget { .. } => "request_budget",
            Self::TimeBudget { .. } => "time_budget",
            Self::Cancelled => "cancelled",
            Self::NoMatchingGrant { .. } => "no_matching_grant",
            Self::MethodNotGranted { .. } => "method_not_granted",
            Self::ApprovalMode { .. } | Self::TunnelApprovalMode { .. } => "approval_mode",
            Self::Resolve { .. } => "resolve_failed",
            Self::Address(_) => "address_not_allowed",
            Self::RequestBytes { .. } => "request_bytes_budget",
            Self::TunnelNotGranted { .. } => "tunnel_not_granted",
            Self::StdioRefused { .. } => "stdio_refused",
        }
    }
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
    /// The tenant the call is made for; empty for the gateway's own requests (such as
    /// `[import] drift_check`). A stdio server's egress proxy never charges one tenant's call
    /// with a request its process sent while serving another tenant's ([`InFlight`]).
    pub tenant: String,
    /// The call's sealed delegation, which requests of `delegate = true` grants carry
    /// ([`crate::delegation`]); none for a call whose adapter has no such grant.
    pub delegation: Option<String>,
    /// The caller's own access tokens, for the credentials of its grants that send them
    /// (`oauth = "..."`); fetched before the call by the pipeline ([`crate::accounts`]).
    pub user_tokens: Vec<crate::accounts::UserToken>,
}

impl CallInfo {
    /// Call facts for the gate, for no tenant (the gateway's own request); a tenant's call
    /// names it with [`CallInfo::for_tenant`].
    pub fn new(
        approval_mode: ApprovalMode,
        trace_id: impl Into<String>,
        idempotency_key: Option<String>,
    ) -> Self {
        Self {
            approval_mode,
            trace_id: trace_id.into(),
            idempotency_key,
            tenant: String::new(),
            delegation: None,
            user_tokens: Vec::new(),
        }
    }

    /// The same facts, for a call of `tenant`.
    #[must_use]
    pub fn for_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self
    }

    /// The same facts, with the call's sealed delegation.
    #[must_use]
    pub fn delegating(mut self, token: Option<String>) -> Self {
        self.delegation = token;
        self
    }

    /// The same facts, with the caller's own access tokens.
    #[must_use]
    pub fn with_user_tokens(mut self, tokens: Vec<crate::accounts::UserToken>) -> Self {
        self.user_tokens = tokens;
        self
    }

    /// The caller's token for `provider`, if the call brought one.
    pub fn user_token(&self, provider: &str) -> Option<&crate::accounts::UserToken> {
        self.user_tokens.iter().find(|t| t.provider == provider)
    }

    /// The header value of the caller's token for `provider`, after `scheme`, marked
    /// sensitive; none if the call brought none.
    pub fn user_token_header(&self, provider: &str, scheme: &str) -> Option<HeaderValue> {
        let token = self.user_token(provider)?;
        let mut value = HeaderValue::from_str(&format!("{scheme} {}", token.expose())).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

/// The time a call spent waiting for its caller's answers (an adapter's asks): its time
/// budgets run only while it is not waiting: the sandbox's (the epoch deadline and the host's
/// timeout around the call) and the egress gate's (an upstream that waits for the caller's
/// answer before it answers, as an MCP server does for its elicitation, is not cut off).
#[derive(Debug, Default)]
pub struct Paused(Mutex<PausedTime>);

#[derive(Debug, Default)]
struct PausedTime {
    /// Finished waits, summed.
    total: Duration,
    /// When the wait under way began.
    since: Option<Instant>,
}

impl Paused {
    /// A wait for the caller begins.
    pub(crate) fn start(&self) {
        self.lock().since = Some(Instant::now());
    }

    /// It ends.
    pub(crate) fn stop(&self) {
        let mut time = self.lock();
        if let Some(since) = time.since.take() {
            time.total += since.elapsed();
        }
    }

    /// The time waited so far, the wait under way included.
    pub fn waited(&self) -> Duration {
        let time = self.lock();
        time.total + time.since.map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// The time since `started` that counts against a budget: all of it but the waits.
    pub fn running_since(&self, started: Instant) -> Duration {
        started.elapsed().saturating_sub(self.waited())
    }

    fn lock(&self) -> MutexGuard<'_, PausedTime> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A request as its call's cancellation finds it when it begins ([`Ledger::begun`]).
pub(super) enum Begun {
    /// Begun before any cancellation: what cuts it short once the caller cancels the call
    /// (none for a ledger without a [`Cancel`](crate::relay::Cancel)).
    Before(Option<crate::relay::Cancel>),
    /// Begun after the caller cancelled the call, as an adapter telling its upstream does:
    /// the first such request is sent, within [`FAREWELL`], and not cut short.
    AfterCancellation,
}

#[derive(Debug)]
pub(super) struct Ledger {
    pub(super) grants: Arc<Grants>,
    pub(super) call: CallInfo,
    /// When its time budget started.
    started: Instant,
    /// Its call's waits for the caller, which its time budget does not count.
    pub(super) paused: Arc<Paused>,
    /// Whether the caller cancelled the call (a call's own ledger, when the front end can
    /// tell).
    pub(super) cancel: Option<crate::relay::Cancel>,
    pub(super) spent: Mutex<Spent>,
    /// For a request a stdio server sends through its egress proxy ([`Ledger::joint`]): the
    /// calls its process is serving, oldest first, each charged with the request and shown
    /// its record. Empty for a call's own ledger.
    pub(super) calls: Vec<Arc<Ledger>>,
}

#[derive(Debug, Default)]
pub(super) struct Spent {
    pub(super) requests: u32,
    pub(super) request_bytes: u64,
    pub(super) response_bytes: u64,
    pub(super) attempts: Vec<EgressAttempt>,
    pub(super) dropped: usize,
    /// Requests begun after the caller cancelled the call ([`FAREWELL`]).
    farewells: u32,
    /// A joint ledger's: for each of its attempts, where its copy is in each of `calls`'
    /// records.
    copies: Vec<Vec<Option<usize>>>,
}

impl Ledger {
    /// The ledger of one call of an adapter with `grants`; its time budget starts now.
    pub(super) fn new(grants: Arc<Grants>, call: CallInfo) -> Self {
        Self {
            started: Instant::now(),
            paused: Arc::default(),
            cancel: None,
            grants,
            call,
            spent: Mutex::new(Spent::default()),
            calls: Vec::new(),
        }
    }

    /// The ledger of one request a stdio server's process sends while serving `calls` (all of
    /// one tenant, oldest first, at least one): it is judged against every one of them, so
    /// it is allowed only if each allows it: the strictest call's approval mode, every call's
    /// budgets and the earliest deadline. It is charged to and recorded on each of them, and
    /// carries the oldest call's trace id, and an idempotency key only when there is one call
    /// (a key names the write of one call), and a delegation and the caller's own tokens
    /// likewise.
    pub(super) fn joint(grants: Arc<Grants>, calls: Vec<Arc<Ledger>>) -> Self {
        let oldest = &calls[0].call;
        let call = CallInfo {
            approval_mode: calls
                .iter()
                .map(|c| c.call.approval_mode)
                .min()
                .unwrap_or(ApprovalMode::ReadOnly),
            trace_id: oldest.trace_id.clone(),
            idempotency_key: oldest.idempotency_key.clone().filter(|_| calls.len() == 1),
            tenant: oldest.tenant.clone(),
            // Like a key, a delegation names one call, and so do a caller's own tokens.
            delegation: oldest.delegation.clone().filter(|_| calls.len() == 1),
            user_tokens: if calls.len() == 1 {
                oldest.user_tokens.clone()
            } else {
                Vec::new()
            },
        };
        Self {
            started: Instant::now(),
            paused: Arc::default(),
            cancel: None,
            grants,
            call,
            spent: Mutex::new(Spent::default()),
            calls,
        }
    }

    /// When its time budget runs out, as of now: the budget from its start, plus the time its
    /// call waited for the caller so far (a later wait moves it again), and at the latest
    /// [`FAREWELL`] after the caller cancelled the call; a joint ledger's is its calls'
    /// earliest.
    pub(super) fn deadline(&self) -> Instant {
        match self.calls.iter().map(|c| c.deadline()).min() {
            Some(earliest) => earliest,
            None => {
                let budget = self.budget_ends();
                self.farewell_ends().map_or(budget, |ends| budget.min(ends))
            }
        }
    }

    /// When its time budget runs out, as of now, whatever its caller did: the budget from its
    /// start, plus the time its call waited for the caller so far.
    fn budget_ends(&self) -> Instant {
        self.started + self.grants.max_total + self.paused.waited()
    }

    /// When the last moment after its caller cancelled the call ends, if it did.
    fn farewell_ends(&self) -> Option<Instant> {
        let at = self.cancel.as_ref()?.cancelled_at()?;
        Some(at + FAREWELL)
    }

    /// Why its time ran out ([`Ledger::deadline`]): its caller cancelled the call, or its time
    /// budget is spent.
    pub(super) fn out_of_time(&self) -> Denial {
        match self.farewell_ends() {
            Some(ends) if ends <= self.budget_ends() => Denial::Cancelled,
            _ => Denial::TimeBudget {
                limit_ms: millis(self.grants.max_total),
            },
        }
    }

    /// How a request begun now stands to its caller's cancellation of the call, read once.
    pub(super) fn begun(&self) -> Begun {
        match &self.cancel {
            Some(cancel) if cancel.is_cancelled() => Begun::AfterCancellation,
            cancel => Begun::Before(cancel.clone()),
        }
    }

    /// Counts a request begun after its caller cancelled the call: whether the one such
    /// request the call may still send ([`FAREWELL`]) is spent already.
    pub(super) fn farewell_spent(&self) -> bool {
        let mut spent = self.spent();
        spent.farewells += 1;
        spent.farewells > 1
    }

    pub(super) fn spent(&self) -> MutexGuard<'_, Spent> {
        // A panic while holding this lock cannot leave the counters half-updated in a way that
        // loosens a budget, so a poisoned lock is still usable.
        self.spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This ledger and the calls it charges besides ([`Ledger::joint`]): every budget a
    /// request is counted against.
    pub(super) fn payers(&self) -> impl Iterator<Item = &Ledger> {
        std::iter::once(self).chain(self.calls.iter().map(AsRef::as_ref))
    }

    /// Records an attempt (and its copy on each call of a joint ledger); returns its index if
    /// it was kept.
    pub(super) fn record(&self, attempt: EgressAttempt) -> Option<usize> {
        let copies: Vec<Option<usize>> = self
            .calls
            .iter()
            .map(|call| call.record(attempt.clone()))
            .collect();
        let mut spent = self.spent();
        if spent.attempts.len() < MAX_RECORDED_ATTEMPTS {
            spent.attempts.push(attempt);
            spent.copies.push(copies);
            Some(spent.attempts.len() - 1)
        } else {
            spent.dropped += 1;
            None
        }
    }

    /// Counts `len` request bytes against the budget of each payer: `Err` once they exceed
    /// one.
    pub(super) fn spend_request(&self, len: u64) -> Result<(), Denial> {
        self.payers().try_for_each(|payer| {
            let limit = payer.grants.max_request_bytes;
            let mut spent = payer.spent();
            spent.request_bytes += len;
            if spent.request_bytes > limit {
                return Err(Denial::RequestBytes { limit });
            }
            Ok(())
        })
    }

    /// Counts `len` response bytes against the budget of each payer: `Err` with the reason
    /// once they exceed one.
    pub(super) fn spend_response(&self, len: u64) -> Result<(), String> {
        self.payers().try_for_each(|payer| {
            let limit = payer.grants.max_response_bytes;
            let mut spent = payer.spent();
            spent.response_bytes += len;
            if spent.response_bytes > limit {
                return Err(format!(
                    "the response exceeded the call's response budget of {limit} bytes (`[egress] max_response_bytes`)"
                ));
            }
            Ok(())
        })
    }

    /// Changes the attempt recorded at `index` (and its copy on each call of a joint ledger).
    /// Charges `len` bytes of a response read as it streams to the response-byte budget and
    /// counts them on attempt `index`; past the budget, the attempt says so and the error is
    /// the guest's.
    pub(super) fn meter(
        &self,
        index: Option<usize>,
        len: u64,
    ) -> Result<(), wasmtime_wasi_http::Error> {
        if let Err(reason) = self.spend_response(len) {
            self.update(index, |a| {
                a.code = "response_bytes_budget".to_owned();
                a.reason = reason;
            });
            let limit = self.grants.max_response_bytes;
            return Err(wasmtime_wasi_http::Error::HttpResponseBodySize(Some(limit)));
        }
        self.update(index, |a| a.response_bytes += len);
        Ok(())
    }

    pub(super) fn update(&self, index: Option<usize>, f: impl FnOnce(&mut EgressAttempt)) {
        let Some(i) = index else {
            return;
        };
        let copied = {
            let mut spent = self.spent();
            let Some(attempt) = spent.attempts.get_mut(i) else {
                return;
            };
            f(attempt);
            if self.calls.is_empty() {
                return;
            }
            let attempt = attempt.clone();
            (attempt, spent.copies.get(i).cloned().unwrap_or_default())
        };
        let (attempt, copies) = copied;
        for (call, copy) in self.calls.iter().zip(copies) {
            let mut spent = call.spent();
            if let Some(recorded) = copy.and_then(|i| spent.attempts.get_mut(i)) {
                *recorded = attempt.clone();
            }
        }
    }
}

/// The calls an adapter's stdio server is serving right now, each with the process serving
/// it (registered by the `stdio://` transport while it waits for the server's answer), so a
/// request a process sends through its egress proxy is judged against, charged to and
/// recorded on the calls that process serves, and on no other.
///
/// Why every call, and not one: a request carries nothing that says which call caused it.
/// Charging one (the oldest that allows it, as before) let a `read_only` call's write go
/// out under another call's approval mode. Judged against every call the process serves, a
/// request passes only what each of them may do. Why not a proxy endpoint per call: the
/// server is one program with one `HTTP_PROXY`, and it cannot be told which of its
/// concurrent calls a request belongs to; per process is as fine as the gate can see.
/// Calls of different tenants on one process are never charged with each other's
/// requests: such a request is refused (`isolate = "tenant"` gives each tenant processes
/// of its own).
#[derive(Debug, Default)]
pub(super) struct InFlight {
    calls: Mutex<Vec<Served>>,
}

/// One call in flight on one process, with the sender whose drop tells its tunnels the call
/// ended.
#[derive(Debug)]
struct Served {
    process: u64,
    ledger: Arc<Ledger>,
    ended: tokio::sync::watch::Sender<()>,
}

/// Keeps a call registered in [`InFlight`] until dropped.
pub(super) struct Serving<'a> {
    in_flight: &'a InFlight,
    process: u64,
    ledger: Arc<Ledger>,
}

/// The calls a process is serving (oldest first), and receivers that see each of them end.
pub(super) type ServedCalls = (Vec<Arc<Ledger>>, Vec<tokio::sync::watch::Receiver<()>>);

impl InFlight {
    fn calls(&self) -> MutexGuard<'_, Vec<Served>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `ledger`'s call as served by process `process` until the guard is dropped.
    pub(super) fn serve(&self, process: u64, ledger: &Arc<Ledger>) -> Serving<'_> {
        self.calls().push(Served {
            process,
            ledger: Arc::clone(ledger),
            ended: tokio::sync::watch::Sender::new(()),
        });
        Serving {
            in_flight: self,
            process,
            ledger: Arc::clone(ledger),
        }
    }

    /// The calls process `process` is serving now, oldest first: empty when it serves none
    /// (then nothing it sends is caused by a call).
    pub(super) fn of(&self, process: u64) -> ServedCalls {
        self.calls()
            .iter()
            .filter(|served| served.process == process)
            .map(|served| (Arc::clone(&served.ledger), served.ended.subscribe()))
            .unzip()
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        let mut calls = self.in_flight.calls();
        if let Some(i) = calls
            .iter()
            .position(|s| s.process == self.process && Arc::ptr_eq(&s.ledger, &self.ledger))
        {
            calls.remove(i);
        }
    }
}

/// A request's record before anything is known of it: refused until said otherwise.
pub(super) fn attempt(method: String, destination: String) -> EgressAttempt {
    EgressAttempt {
        method,
        destination,
        address: None,
        allowed: false,
        code: String::new(),
        reason: String::new(),
        status: None,
        request_bytes: 0,
        response_bytes: 0,
        credentials: Vec::new(),
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
