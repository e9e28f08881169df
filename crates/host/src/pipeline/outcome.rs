//! How a call that stops early ends: the one table from every gate's refusal and every
//! failure to a status, an outcome code and an error body for the caller.
//!
//! [`Stop`] gathers every way a call can end without delivering a tool's output; [`end`]
//! classifies it with one exhaustive match, so a new error variant cannot ship unclassified.
//!
//! `retryable` is true only where the same call, sent again unchanged, can succeed: a wait
//! ends (a deadline, a busy gateway, a spent rate budget, a key still in flight, a store that
//! comes back) or an approver decides. A refusal that the same request meets again (a
//! policy, a schema, a budget the input itself exhausts, a crash) is not retryable.
//!
//! | outcome code                 | status   | from                                             | retryable |
//! |------------------------------|----------|--------------------------------------------------|-----------|
//! | `UNKNOWN_CAPABILITY`         | rejected | unknown or hidden tool                           | no        |
//! | `INVALID_ARGUMENTS`          | rejected | schema, constraint, meta-tool, unknown approval  | no        |
//! | `POLICY_BLOCKED`             | rejected | a policy denied, or mode above the maximum       | no        |
//! | `IDEMPOTENCY_KEY_REQUIRED`   | rejected | write-class call without a key                   | no        |
//! | `IDEMPOTENCY_KEY_INVALID`    | rejected | malformed key                                    | no        |
//! | `ROLLBACK_REQUIRED`          | rejected | destructive call without a rollback              | no        |
//! | `RATE_LIMITED`               | rejected | the tenant's budget is spent (until it refills)  | yes       |
//! | `STORE_UNAVAILABLE`          | failed   | the store failed or is unreachable; nothing ran  | yes       |
//! | `STORE_UNAVAILABLE`          | failed   | the call ran but its record did not commit ([`unrecorded`]) | no |
//! | `APPROVAL_REQUIRED`          | paused   | pending approval (retry once it is approved)     | yes       |
//! | `CONNECTION_REQUIRED`        | paused   | the caller's account is not connected (retry once it is) | yes |
//! | `CONNECTION_UNAVAILABLE`     | failed   | the caller's token could not be got; nothing ran | yes       |
//! | `APPROVAL_REJECTED`          | rejected | an approver rejected it                          | no        |
//! | `APPROVAL_EXPIRED`           | rejected | the approval expired (propose again, new key)    | no        |
//! | `APPROVAL_EXPIRED`           | rejected | the approval ran, and its result is no longer kept | no      |
//! | `APPROVAL_MISMATCH`          | rejected | approval of another request, principal or key    | no        |
//! | `IDEMPOTENCY_CONFLICT`       | rejected | key used for another request                     | no        |
//! | `IDEMPOTENCY_IN_FLIGHT`      | failed   | the key's call is still running                  | yes       |
//! | `IDEMPOTENCY_INDETERMINATE`  | failed   | the key's call never recorded an outcome         | no        |
//! | `TOOL_TIMEOUT`               | failed   | wall-clock deadline                              | yes       |
//! | `TOOL_TIMEOUT`               | failed   | out of fuel (the same input burns it again)      | no        |
//! | `TOOL_MEMORY_LIMIT`          | failed   | memory limit                                     | no        |
//! | `TOOL_OUTPUT_TOO_LARGE`      | failed   | output over the limit                            | no        |
//! | `TOOL_TRAPPED`               | failed   | the tool crashed                                 | no        |
//! | `GATEWAY_BUSY`               | failed   | no instance slot, or the tenant's share is taken | yes       |
//! | `INTERNAL_ERROR`             | failed   | the host failed running the tool, or a bad schema | no       |
//! | `VERIFICATION_FAILED`        | failed   | output schema or an obligation failed            | no        |
//! | `EVIDENCE_MISSING`           | failed   | declared evidence missing                        | no        |
//! | `TOOL_ERROR`                 | failed   | the adapter's own error, `retryable` as it says  | adapter's |
//!
//! The adapter's own errors keep the adapter's flag; the SDKs set it by the same rule
//! (`gatehouse_sdk::http`'s table: `EGRESS_DENIED` and a 4xx other than 408, 425 and 429 are
//! not retryable; a timeout, a 5xx and an unreachable upstream are).

use gatehouse_core::envelope::{OutcomeCode, Status, ToolResultEnvelope};
use gatehouse_core::model::{ErrorBody, ErrorKind};
use gatehouse_store::{IdempotencyKey, StoreError};

use crate::pipeline::invariants::InvariantError;
use crate::pipeline::normalize::NormalizeError;
use crate::pipeline::obligations::ObligationError;
use crate::pipeline::rate::RateError;
use crate::pipeline::validate::ValidateError;
use crate::pipeline::verify::VerifyError;
use crate::sandbox::{SandboxError, escape};

/// Policy denials, warned about at most once per interval (see [`gatehouse_core::throttle`]).
static POLICY_DENIALS: gatehouse_core::throttle::Throttle =
    gatehouse_core::throttle::Throttle::new(gatehouse_core::throttle::INTERVAL);

/// Why a call ended before delivering a tool's output.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    /// Gate 2: unknown or hidden tool, or a malformed meta-tool call.
    #[error(transparent)]
    Normalize(#[from] NormalizeError),
    /// Gate 3: the arguments break the schema or a constraint.
    #[error(transparent)]
    Validate(#[from] ValidateError),
    /// Gate 4: a host invariant.
    #[error(transparent)]
    Invariant(#[from] InvariantError),
    /// Gate 4: a rate budget is spent, or could not be read.
    #[error(transparent)]
    Rate(#[from] RateError),
    /// Gate 5: the policies denied the call (their reasons, `code: message`).
    #[error("{}", denial(.0))]
    PolicyDenied(Vec<String>),
    /// Gate 6: the call needs an approver first; its approval is pending.
    #[error("`{tool}` needs approval before it runs ({why}); approval `{approval_id}` is pending")]
    ApprovalRequired {
        /// The tool.
        tool: String,
        /// The policy reasons or the capability's approval gate.
        why: String,
        /// The pending approval.
        approval_id: String,
        /// Whether the call has an idempotency key (it resumes with it; else with the id).
        keyed: bool,
    },
    /// Connect: the call sends its caller's token for `provider`, and they have no usable
    /// connection; a flow is begun at `url`.
    #[error(
        "`{tool}` acts as you at `{provider}`, and your account there is not connected; open the link the gateway gives (`connect_url`) to connect it"
    )]
    ConnectionRequired {
        /// The tool.
        tool: String,
        /// The `[[oauth.provider]]`.
        provider: String,
        /// Where the user connects.
        url: String,
        /// Whether the call has an idempotency key (the retry names it).
        keyed: bool,
    },
    /// Connect: the account broker could not answer.
    #[error("the caller's account could not be used: {0}")]
    Connect(crate::accounts::AccountError),
    /// Gate 6: an approver rejected the call.
    #[error("approval `{id}` was rejected by `{by}`: {reason}")]
    ApprovalRejected {
        /// The approval.
        id: String,
        /// Who rejected it.
        by: String,
        /// Why.
        reason: String,
    },
    /// Gate 6: the approval expired before it was decided or used.
    #[error("approval `{id}` expired")]
    ApprovalExpired {
        /// The approval.
        id: String,
    },
    /// Gate 6: the call names an approval that does not exist.
    #[error("there is no approval `{id}`")]
    UnknownApproval {
        /// The id the call named.
        id: String,
    },
    /// Gate 6: the approval belongs to another proposal: another request, principal chain or
    /// idempotency key.
    #[error("approval `{id}` {mismatch}; it does not cover this call, and nothing ran")]
    ApprovalMismatch {
        /// The approval.
        id: String,
        /// What differs.
        mismatch: Mismatch,
    },
    /// Gates 6 and 7: the approval already ran its call, and the result its key kept is gone
    /// (past the capability's dedupe window): it is never run again.
    #[error(
        "approval `{id}` already ran its call (call `{by_call}`), and that result is no longer kept; nothing ran again"
    )]
    ApprovalSpent {
        /// The approval.
        id: String,
        /// The call that ran it.
        by_call: String,
    },
    /// Gate 7: the key was used for a different request.
    #[error("idempotency key `{key}` was used by call `{holder}` for a different request")]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The call that holds it.
        holder: String,
    },
    /// Gate 7: the call holding the key did not finish within this call's deadline.
    #[error("call `{holder}` with idempotency key `{key}` is still running")]
    IdempotencyInFlight {
        /// The key.
        key: String,
        /// The call that holds it.
        holder: String,
    },
    /// Gate 7: the call holding the key never recorded an outcome.
    #[error(
        "call `{holder}` with idempotency key `{key}` started but never recorded an outcome, so whether its effect happened is unknown"
    )]
    IdempotencyIndeterminate {
        /// The key.
        key: String,
        /// The call that held it.
        holder: String,
    },
    /// Gates 5-7 and 10: the state store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Gate 2: the state store is unreachable, so nothing that must be recorded may start.
    #[error("the state store is unreachable; nothing ran")]
    StoreDown,
    /// Gate 8: the sandbox stopped the tool (budget, trap, no slot, host failure).
    #[error("the tool {0}")]
    Sandbox(#[from] SandboxError),
    /// Gate 8: the adapter returned its own structured error.
    #[error("{}", .0.message)]
    Tool(ErrorBody),
    /// Gate 9: the output failed verification.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// Gate 9: a policy obligation could not be applied; the result is withheld.
    #[error(transparent)]
    Obligation(#[from] ObligationError),
}

/// What of a call differs from the proposal an approval holds ([`Stop::ApprovalMismatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// Another tenant, tool, arguments or requested mode.
    #[error("was proposed for a different request (tool, arguments or mode)")]
    Request,
    /// Another principal chain: an approval is its proposer's.
    #[error("was proposed by another principal chain")]
    Principal,
    /// Another idempotency key: an approval runs once, under the key it was proposed with.
    #[error("was proposed with another idempotency key (or none)")]
    Key,
}

impl Mismatch {
    /// What the caller can do about it.
    fn remediation(self) -> &'static str {
        match self {
            Self::Request => {
                "retry with exactly the arguments that were approved, or propose this request with a new idempotency key"
            }
            Self::Principal | Self::Key => {
                "an approval runs only the call it was proposed for: the same caller, arguments and idempotency key; to run another call, call without the approval id to propose it"
            }
        }
    }
}

impl Stop {
    /// Whether the call surely did not reach the tool: a claimed key is released, not
    /// completed, so a repeat may run.
    pub fn ran_nothing(&self) -> bool {
        matches!(
            self,
            Self::Sandbox(SandboxError::Busy { .. } | SandboxError::TenantBusy { .. })
                | Self::ApprovalSpent { .. }
        )
    }
}

/// What the operator can do about a call no policy allowed under the default deny: the
/// result's remediation (the log's message names the same keys).
const DEFAULT_DENY_FIX: &str = "nothing ran. The gateway's operator can allow this tool in the \
     gateway's config (gatehouse.toml): bind a policy module to it (`[[pipeline.policy]]`, e.g. \
     `module = \"gatehouse.baseline\"`), bind Cedar rules that permit it (`gatehouse policy \
     pack`), or set `[pipeline] policy_default = \"allow\"`";

fn denial(reasons: &[String]) -> String {
    if reasons.is_empty() {
        "no policy allowed this call and the operator default is deny; to allow it, bind a \
         policy to the tool (`[[pipeline.policy]]`) or set `[pipeline] policy_default`"
            .to_owned()
    } else {
        format!("policy denied the call: {}", reasons.join("; "))
    }
}

/// Ends `result` with `stop`: status, outcome code and error body from the table below.
pub fn end(result: &mut ToolResultEnvelope, stop: &Stop) {
    use ErrorKind as K;
    use OutcomeCode as O;
    use Status::{Failed, Paused, Rejected};
    let message = stop.to_string();
    let (status, outcome, kind, retryable, remediation) = match stop {
        Stop::Normalize(NormalizeError::Unknown { .. }) => (
            Rejected,
            O::UnknownCapability,
            K::Validation,
            false,
            Some("call one of the tools listed by tools/list"),
        ),
        Stop::Normalize(NormalizeError::MetaTarget { .. } | NormalizeError::MetaArgs { .. }) => {
            (Rejected, O::InvalidArguments, K::Validation, false, None)
        }
        Stop::Validate(ValidateError::Schema { .. } | ValidateError::Constraint { .. }) => (
            Rejected,
            O::InvalidArguments,
            K::Validation,
            false,
            Some("fix the named argument and call again; see the tool's input schema"),
        ),
        Stop::Validate(ValidateError::BadSchema { .. } | ValidateError::BadPattern { .. }) => {
            (Failed, O::InternalError, K::Internal, false, None)
        }
        Stop::PolicyDenied(reasons) if reasons.is_empty() => (
            Rejected,
            O::PolicyBlocked,
            K::Policy,
            false,
            Some(DEFAULT_DENY_FIX),
        ),
        Stop::Invariant(
            InvariantError::ModeAboveMaximum { .. } | InvariantError::AboveDelegator { .. },
        )
        | Stop::PolicyDenied(_) => (Rejected, O::PolicyBlocked, K::Policy, false, None),
        Stop::Invariant(InvariantError::IdempotencyKeyRequired { .. }) => (
            Rejected,
            O::IdempotencyKeyRequired,
            K::Validation,
            false,
            Some("send a unique idempotency_key with the call and reuse it on retries"),
        ),
        Stop::Invariant(InvariantError::IdempotencyKeyInvalid { .. }) => (
            Rejected,
            O::IdempotencyKeyInvalid,
            K::Validation,
            false,
            Some("send an idempotency_key of 1 to 255 printable ASCII characters, e.g. a UUID"),
        ),
        Stop::Invariant(InvariantError::RollbackRequired { .. }) => (
            Rejected,
            O::RollbackRequired,
            K::Policy,
            false,
            Some(
                "ask the adapter's publisher to declare an approval_gate or a rollback capability",
            ),
        ),
        Stop::Rate(RateError::Limited(_)) => (
            Rejected,
            O::RateLimited,
            K::Limit,
            true,
            Some("nothing ran; retry after the time the message gives"),
        ),
        Stop::Rate(RateError::Unavailable(_)) => (
            Failed,
            O::StoreUnavailable,
            K::Unavailable,
            true,
            Some("nothing ran; retry shortly"),
        ),
        Stop::ApprovalRequired { keyed: true, .. } => (
            Paused,
            O::ApprovalRequired,
            K::Policy,
            true,
            Some(
                "once an approver approves it, call again with the same arguments and the same idempotency key; it runs then, once",
            ),
        ),
        Stop::ApprovalRequired { keyed: false, .. } => (
            Paused,
            O::ApprovalRequired,
            K::Policy,
            true,
            Some(
                "once an approver approves it, call again with the same arguments and the approval id (`approval_id`; over MCP `_meta[\"gatehouse/approval_id\"]`); it runs then, once",
            ),
        ),
        Stop::ConnectionRequired { keyed: true, .. } => (
            Paused,
            O::ConnectionRequired,
            K::Policy,
            true,
            Some(
                "once you have connected your account at the link, call again with the same arguments and the same idempotency key; it runs then, once",
            ),
        ),
        Stop::ConnectionRequired { keyed: false, .. } => (
            Paused,
            O::ConnectionRequired,
            K::Policy,
            true,
            Some(
                "once you have connected your account at the link, call again with the same arguments",
            ),
        ),
        Stop::Connect(crate::accounts::AccountError::UnknownProvider(_)) => (
            Failed,
            O::ConnectionUnavailable,
            K::Internal,
            false,
            Some(
                "the gateway's operator must configure the provider its grant names (`[[oauth.provider]]`)",
            ),
        ),
        Stop::Connect(crate::accounts::AccountError::Refused(_)) => (
            Rejected,
            O::IdentityInvalid,
            K::Policy,
            false,
            Some(
                "nothing ran; call with a bearer token from the organisation's identity provider, which the tool's provider accepts",
            ),
        ),
        Stop::Connect(crate::accounts::AccountError::Unavailable(_)) => (
            Failed,
            O::ConnectionUnavailable,
            K::Unavailable,
            true,
            Some("nothing ran; retry shortly"),
        ),
        Stop::ApprovalRejected { .. } => (Rejected, O::ApprovalRejected, K::Policy, false, None),
        Stop::ApprovalExpired { .. } => (
            Rejected,
            O::ApprovalExpired,
            K::Policy,
            false,
            Some("call again with a new idempotency key to propose the call again"),
        ),
        Stop::UnknownApproval { .. } => (
            Rejected,
            O::InvalidArguments,
            K::Validation,
            false,
            Some("use the approval id a paused result gave you, or call without one to propose"),
        ),
        Stop::ApprovalMismatch { mismatch, .. } => (
            Rejected,
            O::ApprovalMismatch,
            K::Conflict,
            false,
            Some(mismatch.remediation()),
        ),
        Stop::ApprovalSpent { .. } => (
            Rejected,
            O::ApprovalExpired,
            K::Policy,
            false,
            Some("call again with a new idempotency key to propose the call again"),
        ),
        Stop::IdempotencyConflict { .. } => (
            Rejected,
            O::IdempotencyConflict,
            K::Conflict,
            false,
            Some(
                "use a new idempotency key for a different request; reuse a key only to retry the same request",
            ),
        ),
        Stop::IdempotencyInFlight { .. } => (
            Failed,
            O::IdempotencyInFlight,
            K::Unavailable,
            true,
            Some("retry with the same key to get its result once it finishes"),
        ),
        Stop::IdempotencyIndeterminate { .. } => (
            Failed,
            O::IdempotencyIndeterminate,
            K::Conflict,
            false,
            Some(
                "an operator must check whether the effect happened and resolve the key (`gatehouse idempotency resolve`); do not retry with a new key unless they say so",
            ),
        ),
        Stop::Store(_) | Stop::StoreDown => (
            Failed,
            O::StoreUnavailable,
            K::Unavailable,
            true,
            Some("nothing ran; retry shortly"),
        ),
        Stop::Sandbox(SandboxError::OutOfFuel { .. }) => (
            Failed,
            O::ToolTimeout,
            K::Timeout,
            false,
            Some(
                "the tool used its whole compute budget; ask the operator to raise [sandbox].fuel if this input is legitimate",
            ),
        ),
        Stop::Sandbox(SandboxError::Deadline { .. }) => (
            Failed,
            O::ToolTimeout,
            K::Timeout,
            true,
            Some(
                "the tool did not answer in time; retry later or ask the operator to raise [sandbox].timeout_ms",
            ),
        ),
        Stop::Sandbox(SandboxError::MemoryLimit(_)) => (
            Failed,
            O::ToolMemoryLimit,
            K::Limit,
            false,
            Some(
                "the tool needed more memory than allowed; use a smaller input or ask the operator to raise [sandbox].memory_mib",
            ),
        ),
        Stop::Sandbox(SandboxError::OutputTooLarge { .. }) => (
            Failed,
            O::ToolOutputTooLarge,
            K::Limit,
            false,
            Some(
                "ask for less data (paging, filters) or ask the operator to raise [sandbox].max_output_kib",
            ),
        ),
        Stop::Sandbox(SandboxError::Trap { .. }) => (
            Failed,
            O::ToolTrapped,
            K::Internal,
            false,
            Some("the tool crashed; report it to the adapter's publisher"),
        ),
        Stop::Sandbox(SandboxError::Busy { .. } | SandboxError::TenantBusy { .. }) => (
            Failed,
            O::GatewayBusy,
            K::Unavailable,
            true,
            Some(
                "the gateway is running as many tools as it may at once; retry shortly, or ask the operator to raise [sandbox].max_concurrent_calls",
            ),
        ),
        // Not transient as far as the host can tell: the same call fails the same way.
        Stop::Sandbox(SandboxError::Host(_)) => (
            Failed,
            O::InternalError,
            K::Internal,
            false,
            Some("the gateway failed while running the tool; see its logs"),
        ),
        Stop::Tool(error) => {
            // The adapter's own error reaches the caller as it was given.
            result.status = Failed;
            result.outcome = O::ToolError;
            result.error = Some(error.clone());
            return;
        }
        Stop::Verify(VerifyError::NotJson(_) | VerifyError::Schema { .. }) => {
            (Failed, O::VerificationFailed, K::Internal, false, None)
        }
        Stop::Verify(VerifyError::EvidenceMissing { .. }) => {
            (Failed, O::EvidenceMissing, K::Internal, false, None)
        }
        Stop::Obligation(ObligationError::NoStructured { .. } | ObligationError::Blob { .. }) => {
            (Failed, O::VerificationFailed, K::Policy, false, None)
        }
    };
    match stop {
        Stop::Sandbox(error) => tracing::warn!(%error, "tool call failed in the sandbox"),
        Stop::Store(error) => {
            tracing::error!(%error, "the state store failed; the call did not run");
        }
        Stop::StoreDown => tracing::warn!("the state store is unreachable; call refused"),
        // Every denial at INFO; at most one per 10 s at WARN, with the count since the last.
        Stop::PolicyDenied(_) => match POLICY_DENIALS.hit() {
            Some(denied) => {
                tracing::warn!(outcome = %outcome, denied, "call denied by policy: {}", escape(&message));
            }
            None => {
                tracing::info!(outcome = %outcome, "call denied by policy: {}", escape(&message));
            }
        },
        // Policy reasons and verifier messages carry plugin text: escaped for the log.
        _ => tracing::info!(outcome = %outcome, "call refused: {}", escape(&message)),
    }
    let mut error = ErrorBody::new(kind, outcome.as_str(), message, retryable);
    error.remediation = remediation.map(str::to_owned);
    result.status = status;
    result.outcome = outcome;
    result.error = Some(error);
}

/// Gives the caller of a call paused for a connection the link where its user connects: in
/// `connect_url` and at the end of the message. Called after the call is recorded: the link is
/// a capability until it is used, and no record or log line holds it.
pub fn name_connect_url(result: &mut ToolResultEnvelope, url: &str) {
    result.connect_url = Some(url.to_owned());
    if let Some(error) = &mut result.error {
        error.message.push_str(": ");
        error.message.push_str(url);
    }
}

/// Adds where an approver decides to a paused result's remediation.
pub fn name_approval_url(result: &mut ToolResultEnvelope, url: &str) {
    if let Some(error) = &mut result.error {
        let remediation = error.remediation.get_or_insert_with(String::new);
        if !remediation.is_empty() {
            remediation.push_str("; ");
        }
        remediation.push_str("an approver decides at ");
        remediation.push_str(url);
    }
}

/// Ends a call whose durable record failed to commit: its effect may have happened, but a
/// result that is not recorded is not delivered. Not retryable under its key: a repeat finds
/// the key `indeterminate` after its lease, for an operator to resolve.
pub fn unrecorded(
    result: &mut ToolResultEnvelope,
    error: &StoreError,
    key: Option<&IdempotencyKey>,
) {
    tracing::error!(%error, key = key.map(|k| k.key.as_str()), "the call ran but could not be recorded; its result is withheld");
    let message = match key {
        Some(key) => format!(
            "the call ran, but the state store failed before its record was committed, so its result is withheld; whether its effect happened is for an operator to check (idempotency key `{}`)",
            key.key
        ),
        None => "the call ran, but the state store failed before its record was committed, so its result is withheld".to_owned(),
    };
    let mut body = ErrorBody::new(
        ErrorKind::Unavailable,
        OutcomeCode::StoreUnavailable.as_str(),
        message,
        false,
    );
    body.remediation = Some(
        "do not retry under a new key: an operator resolves the key (`gatehouse idempotency resolve`) once the store is back".to_owned(),
    );
    result.status = Status::Failed;
    result.outcome = OutcomeCode::StoreUnavailable;
    result.content.clear();
    result.structured_content = None;
    result.evidence_refs.clear();
    result.error = Some(body);
}
