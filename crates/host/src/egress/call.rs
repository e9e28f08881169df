//! What the gate knows and keeps about one call: the call's facts ([`CallInfo`]), what it may
//! still spend and has spent ([`Ledger`]), and the record of every attempt ([`EgressAttempt`],
//! with the [`Denial`] that stopped it, if any).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gatehouse_core::model::ApprovalMode;
use gatehouse_core::model::EgressAttempt;

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
    /// A stdio server's `CONNECT` names a host no grant gives whole: a tunnel carries any
    /// path and method, so it needs a grant of `https://host[:port]/`.
    #[error(
        "no egress grant for this adapter gives all of {destination}, which a tunnel (CONNECT) \
         reaches: grant the whole host in `[[egress.grant]]`, or have the server send plain \
         http through the proxy"
    )]
    TunnelNotGranted {
        /// The destination, `https://host:port/`.
        destination: String,
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
    /// Stable machine-readable code, as recorded on the call.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl => "invalid_url",
            Self::AmbiguousPath { .. } => "ambiguous_path",
            Self::RequestBudget { .. } => "request_budget",
            Self::TimeBudget { .. } => "time_budget",
            Self::NoMatchingGrant { .. } => "no_matching_grant",
            Self::MethodNotGranted { .. } => "method_not_granted",
            Self::ApprovalMode { .. } => "approval_mode",
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

#[derive(Debug)]
pub(super) struct Ledger {
    pub(super) grants: Arc<Grants>,
    pub(super) call: CallInfo,
    pub(super) deadline: Instant,
    pub(super) spent: Mutex<Spent>,
}

#[derive(Debug, Default)]
pub(super) struct Spent {
    pub(super) requests: u32,
    pub(super) request_bytes: u64,
    pub(super) response_bytes: u64,
    pub(super) attempts: Vec<EgressAttempt>,
    pub(super) dropped: usize,
}

impl Ledger {
    pub(super) fn spent(&self) -> MutexGuard<'_, Spent> {
        // A panic while holding this lock cannot leave the counters half-updated in a way that
        // loosens a budget, so a poisoned lock is still usable.
        self.spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an attempt; returns its index if it was kept.
    pub(super) fn record(&self, attempt: EgressAttempt) -> Option<usize> {
        let mut spent = self.spent();
        if spent.attempts.len() < MAX_RECORDED_ATTEMPTS {
            spent.attempts.push(attempt);
            Some(spent.attempts.len() - 1)
        } else {
            spent.dropped += 1;
            None
        }
    }

    /// Counts `len` request bytes against the call's budget: `Err` once they exceed it.
    pub(super) fn spend_request(&self, len: u64) -> Result<(), Denial> {
        let limit = self.grants.max_request_bytes;
        let mut spent = self.spent();
        spent.request_bytes += len;
        if spent.request_bytes > limit {
            return Err(Denial::RequestBytes { limit });
        }
        Ok(())
    }

    /// Counts `len` response bytes against the call's budget: `Err` with the reason once
    /// they exceed it.
    pub(super) fn spend_response(&self, len: u64) -> Result<(), String> {
        let limit = self.grants.max_response_bytes;
        let mut spent = self.spent();
        spent.response_bytes += len;
        if spent.response_bytes > limit {
            return Err(format!(
                "the response exceeded the call's response budget of {limit} bytes (`[egress] max_response_bytes`)"
            ));
        }
        Ok(())
    }

    pub(super) fn update(&self, index: Option<usize>, f: impl FnOnce(&mut EgressAttempt)) {
        if let Some(i) = index
            && let Some(attempt) = self.spent().attempts.get_mut(i)
        {
            f(attempt);
        }
    }
}

/// The calls an adapter's stdio server is serving right now (registered by the `stdio://`
/// transport while it waits for the server's answer), so a request the server sends through
/// its egress proxy is charged to, and recorded on, a call that caused it.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// Each call, with the sender whose drop tells its tunnels the call ended.
    calls: Mutex<Vec<(Arc<Ledger>, tokio::sync::watch::Sender<()>)>>,
}

/// Keeps a call registered in [`InFlight`] until dropped.
pub(super) struct Serving<'a> {
    in_flight: &'a InFlight,
    ledger: Arc<Ledger>,
}

impl InFlight {
    fn calls(&self) -> MutexGuard<'_, Vec<(Arc<Ledger>, tokio::sync::watch::Sender<()>)>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `ledger`'s call as served until the guard is dropped.
    pub(super) fn serve(&self, ledger: &Arc<Ledger>) -> Serving<'_> {
        self.calls()
            .push((Arc::clone(ledger), tokio::sync::watch::Sender::new(())));
        Serving {
            in_flight: self,
            ledger: Arc::clone(ledger),
        }
    }

    /// The call a request the server sends with a method that `writes` is charged to: the
    /// oldest one in flight whose effective approval mode allows writes (when it writes),
    /// else the oldest one (whose check then refuses a write), with a receiver that sees the
    /// call end. `None` when no call is in flight: the server is not serving anyone, so
    /// nothing it sends is caused by a call.
    pub(super) fn charged(
        &self,
        writes: bool,
    ) -> Option<(Arc<Ledger>, tokio::sync::watch::Receiver<()>)> {
        let calls = self.calls();
        calls
            .iter()
            .find(|(l, _)| !writes || l.call.approval_mode >= ApprovalMode::Network)
            .or_else(|| calls.first())
            .map(|(ledger, ended)| (Arc::clone(ledger), ended.subscribe()))
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        let mut calls = self.in_flight.calls();
        if let Some(i) = calls.iter().position(|(l, _)| Arc::ptr_eq(l, &self.ledger)) {
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
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
