//! The two envelopes of a governed call, as plain data: the [`ToolCallEnvelope`] a caller
//! submits and the [`ToolResultEnvelope`] it gets back, with its [`Status`] and
//! [`OutcomeCode`].
//!
//! Field names follow spec 000 (`tool_call_id`, `trace_id`, `evidence_refs`, ...); content
//! blocks use MCP's shape so a result can be delivered as `content` + `structuredContent`
//! unchanged. Every failure of a call is a result with a status and an outcome code, never a
//! panic or a protocol error. Which failure gets which code is decided in one table, the
//! pipeline's `outcome` module.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids;
use crate::model::{ApprovalMode, Claims, ContentBlock, ErrorBody, Operation, Principal};

pub use crate::model::{
    AskOutcome, AskRecord, CallerRecord, DecisionRecord, EgressAttempt, ModuleDecision,
    POLICY_DEFAULT, POLICY_FAILED, POLICY_MODULE_MISSING, PluginRef, Told,
};

/// Version tag of the call envelope format.
pub const CALL_ENVELOPE_VERSION: &str = "gatehouse.tool_call.v1";

/// One tool call as the pipeline receives it (spec 000 `ToolCallEnvelope`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallEnvelope {
    /// Always [`CALL_ENVELOPE_VERSION`].
    #[serde(default = "call_version")]
    pub envelope_version: String,
    /// Unique id of the call.
    pub tool_call_id: String,
    /// W3C trace id (32 hex digits).
    pub trace_id: String,
    /// Session the call belongs to, if the caller tracks one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Tenant the call runs for (established by the caller's identify step).
    pub tenant_id: String,
    /// Principal chain, user first.
    #[serde(default)]
    pub principal_chain: Vec<Principal>,
    /// The calling principal's claims, as its identify step admitted them (roles, groups).
    #[serde(default, skip_serializing_if = "Claims::is_empty")]
    pub claims: Claims,
    /// Tool name as called: `<adapter id>.<capability id>`, or a meta-tool's name; for a
    /// resource read or a prompt, `<adapter id>.<its id>`.
    pub capability_id: String,
    /// What the call does: a tool call (the default), a resource read or a prompt fill-in.
    #[serde(default, skip_serializing_if = "Operation::is_call_tool")]
    pub operation: Operation,
    /// Arguments (a JSON object).
    #[serde(default = "crate::model::empty_object")]
    pub args: Value,
    /// The approval mode the caller asks for; default: the capability's declared maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode_requested: Option<ApprovalMode>,
    /// Idempotency key; required on write-class calls. A repeat with the same key replays the
    /// first call's result instead of running again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The approval this call resumes: a call without an idempotency key that was paused for
    /// approval is retried with the approval id it got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// The call this one was made on behalf of, when a peer the gateway called (an A2A agent,
    /// say) calls back with the delegation the gateway gave it: the principal chain then starts
    /// with that call's, and this call may not run above that call's effective mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_by: Option<DelegatedBy>,
    /// How the call reached the gateway; none: directly (a host embedding gatehouse,
    /// `gatehouse call`). Policies see it as `action.context.protocol`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
}

/// How a call reached the gateway ([`ToolCallEnvelope::protocol`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// MCP: a `tools/call`, a resource read or a prompt.
    Mcp,
    /// A2A: a `SendMessage`.
    A2a,
}

impl Protocol {
    /// What a policy sees of a call that came by `protocol`: `mcp`, `a2a`, or `direct` for
    /// none.
    pub fn name(protocol: Option<Self>) -> &'static str {
        match protocol {
            Some(Self::Mcp) => "mcp",
            Some(Self::A2a) => "a2a",
            None => "direct",
        }
    }
}

/// The call a delegated call was made on behalf of ([`ToolCallEnvelope::delegated_by`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegatedBy {
    /// Its id.
    pub tool_call_id: String,
    /// Its effective approval mode: the most the delegated call may run at.
    pub approval_mode: ApprovalMode,
}

fn call_version() -> String {
    CALL_ENVELOPE_VERSION.to_owned()
}

impl ToolCallEnvelope {
    /// A call of `tool` for `tenant` with fresh ids, no principals and no idempotency key.
    pub fn new(tenant: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        Self {
            envelope_version: call_version(),
            tool_call_id: ids::tool_call_id(),
            trace_id: ids::trace_id(),
            session_id: None,
            tenant_id: tenant.into(),
            principal_chain: Vec::new(),
            claims: Claims::default(),
            capability_id: tool.into(),
            operation: Operation::CallTool,
            args,
            approval_mode_requested: None,
            idempotency_key: None,
            approval_id: None,
            delegated_by: None,
            protocol: None,
        }
    }

    /// Doing `operation` (a resource read or a prompt fill-in) rather than a tool call.
    pub fn with_operation(mut self, operation: Operation) -> Self {
        self.operation = operation;
        self
    }

    /// With an idempotency key.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Come by `protocol`.
    pub fn by(mut self, protocol: Protocol) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// Asking for an approval mode.
    pub fn with_mode(mut self, mode: ApprovalMode) -> Self {
        self.approval_mode_requested = Some(mode);
        self
    }

    /// Joining the caller's W3C trace: the trace id of `traceparent` when it is a valid one;
    /// otherwise the call keeps its own fresh trace.
    pub fn with_traceparent(mut self, traceparent: &str) -> Self {
        if let Some(trace_id) = ids::trace_id_of(traceparent) {
            self.trace_id = trace_id.to_owned();
        }
        self
    }

    /// Resuming the approval `id` (a call without an idempotency key that was paused).
    pub fn with_approval(mut self, id: impl Into<String>) -> Self {
        self.approval_id = Some(id.into());
        self
    }

    /// With one more principal at the end of the chain.
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal_chain.push(principal);
        self
    }

    /// With the calling principal's claims, as its identify step admitted them.
    pub fn with_claims(mut self, claims: Claims) -> Self {
        self.claims = claims;
        self
    }
}

/// Version tag of the envelope format.
pub const RESULT_ENVELOPE_VERSION: &str = "gatehouse.tool_result.v1";

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and returned a result.
    Ok,
    /// The call failed; `error` says why.
    Failed,
    /// Waiting for an approver, or for the caller to connect an account.
    Paused,
    /// Refused before anything ran.
    Rejected,
}

/// Machine-readable outcome of a call (docs/architecture.md, section 9).
///
/// The first seven are the specs' codes. The rest are gatehouse's own, for failures the specs
/// do not name: they say exactly which budget or rule stopped the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OutcomeCode {
    /// The call succeeded.
    Ok,
    /// The caller's identity could not be established.
    IdentityInvalid,
    /// A policy denied the call.
    PolicyBlocked,
    /// The call needs approval first.
    ApprovalRequired,
    /// A destructive call lacks a declared rollback.
    RollbackRequired,
    /// The output failed verification against its schema.
    VerificationFailed,
    /// Declared evidence is missing from the output.
    EvidenceMissing,
    /// The tool ran out of fuel or time.
    ToolTimeout,
    /// The adapter returned its own structured error (`error.code` is the adapter's code).
    ToolError,
    /// The capability does not exist (or is not visible to the caller).
    UnknownCapability,
    /// The tool exceeded its memory limit.
    ToolMemoryLimit,
    /// The tool trapped (panic, stack overflow, invalid memory access...).
    ToolTrapped,
    /// The tool's output exceeded the size limit.
    ToolOutputTooLarge,
    /// The arguments break the input schema or an operator constraint (model-correctable).
    InvalidArguments,
    /// A write-class call came without an idempotency key (model-correctable).
    IdempotencyKeyRequired,
    /// The idempotency key is not 1 to 255 printable ASCII characters (model-correctable).
    IdempotencyKeyInvalid,
    /// The tenant's rate budget for this tool is spent; nothing ran. Retryable after the
    /// time the message gives.
    RateLimited,
    /// Every instance slot stayed busy for the call's whole deadline; the tool did not run.
    GatewayBusy,
    /// The idempotency key was used before for a different request; nothing ran.
    IdempotencyConflict,
    /// A call with the same key is still running and did not finish within this call's
    /// deadline; retry to get its result.
    IdempotencyInFlight,
    /// A call with the same key started and never recorded an outcome (the gateway stopped
    /// mid-call): whether its effect happened is unknown. An operator must resolve the key;
    /// nothing runs again by itself.
    IdempotencyIndeterminate,
    /// An approver rejected the call.
    ApprovalRejected,
    /// The call's approval expired before it was decided or used (or it ran, and its result
    /// is no longer kept); propose it again.
    ApprovalExpired,
    /// The call named an approval (by id, idempotency key or request state) that was proposed
    /// for another request, principal chain or idempotency key; nothing ran.
    ApprovalMismatch,
    /// The state store could not record the call, so nothing ran; retry.
    StoreUnavailable,
    /// The call sends its caller's own token to a provider they have not connected (or must
    /// connect again): nothing ran; once they connect at the URL the result names, the same
    /// call (same idempotency key) runs.
    ConnectionRequired,
    /// The gateway could not get the caller's token (its provider or store did not answer);
    /// nothing ran; retry.
    ConnectionUnavailable,
    /// The host failed; not the caller's or the tool's fault.
    InternalError,
}

impl OutcomeCode {
    /// The wire name, e.g. `TOOL_TIMEOUT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::IdentityInvalid => "IDENTITY_INVALID",
            Self::PolicyBlocked => "POLICY_BLOCKED",
            Self::ApprovalRequired => "APPROVAL_REQUIRED",
            Self::RollbackRequired => "ROLLBACK_REQUIRED",
            Self::VerificationFailed => "VERIFICATION_FAILED",
            Self::EvidenceMissing => "EVIDENCE_MISSING",
            Self::ToolTimeout => "TOOL_TIMEOUT",
            Self::ToolError => "TOOL_ERROR",
            Self::UnknownCapability => "UNKNOWN_CAPABILITY",
            Self::ToolMemoryLimit => "TOOL_MEMORY_LIMIT",
            Self::ToolTrapped => "TOOL_TRAPPED",
            Self::ToolOutputTooLarge => "TOOL_OUTPUT_TOO_LARGE",
            Self::InvalidArguments => "INVALID_ARGUMENTS",
            Self::IdempotencyKeyRequired => "IDEMPOTENCY_KEY_REQUIRED",
            Self::IdempotencyKeyInvalid => "IDEMPOTENCY_KEY_INVALID",
            Self::RateLimited => "RATE_LIMITED",
            Self::GatewayBusy => "GATEWAY_BUSY",
            Self::IdempotencyConflict => "IDEMPOTENCY_CONFLICT",
            Self::IdempotencyInFlight => "IDEMPOTENCY_IN_FLIGHT",
            Self::IdempotencyIndeterminate => "IDEMPOTENCY_INDETERMINATE",
            Self::ApprovalRejected => "APPROVAL_REJECTED",
            Self::ApprovalExpired => "APPROVAL_EXPIRED",
            Self::ApprovalMismatch => "APPROVAL_MISMATCH",
            Self::StoreUnavailable => "STORE_UNAVAILABLE",
            Self::ConnectionRequired => "CONNECTION_REQUIRED",
            Self::ConnectionUnavailable => "CONNECTION_UNAVAILABLE",
            Self::InternalError => "INTERNAL_ERROR",
        }
    }
}

impl std::fmt::Display for OutcomeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Resources one call used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Fuel consumed.
    pub fuel_consumed: u64,
    /// Wall-clock milliseconds in the sandbox.
    pub duration_ms: u64,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultEnvelope {
    /// Always [`RESULT_ENVELOPE_VERSION`].
    pub envelope_version: String,
    /// The call's id.
    pub tool_call_id: String,
    /// W3C trace id.
    pub trace_id: String,
    /// The adapter that ran (absent if none was reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter: Option<PluginRef>,
    /// The tool called: `<adapter id>.<capability id>`, after meta-tool resolution.
    pub capability_id: String,
    /// The meta-tool the call came through, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_from: Option<String>,
    /// The approval mode the call ran at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_mode_effective: Option<ApprovalMode>,
    /// The approval the call waits for (`paused`) or ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Where the caller's user connects the account the call needs (`CONNECTION_REQUIRED`):
    /// the gateway's start page for this principal and provider. Given to the caller only:
    /// the audit record never holds it (the link is a capability until it is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_url: Option<String>,
    /// Set when this result is a replay: nothing ran; this is the result the call with this id
    /// delivered under the same idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// How it ended.
    pub status: Status,
    /// Outcome code.
    pub outcome: OutcomeCode,
    /// Content blocks for the model.
    pub content: Vec<ContentBlock>,
    /// Structured result, checked JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Evidence the result rests on.
    pub evidence_refs: Vec<String>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// The policy gate's decision record (absent if the call ended before it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_decision: Option<DecisionRecord>,
    /// Outbound requests attempted (the call's mutation refs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<EgressAttempt>,
    /// What the adapter told and asked its caller (contract 0.5.0): each ask with its
    /// answer, progress and log lines counted. Absent when it did neither. The operator's
    /// record only: the caller's view leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<CallerRecord>,
    /// Budgets this call used; absent when no adapter ran for it: a call stopped before gate
    /// 8, and a replay (`replay_of`), whose fuel was spent, and is counted, once, by the
    /// call it replays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The gateway's signed receipt for the call (`[receipts]`): what it decided and did, and
    /// where its audit entry is. None when receipts are off, or the entry could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::receipt::Receipt>,
}

impl ToolResultEnvelope {
    /// The result of `call` before any gate ran: `ok` with nothing in it yet.
    pub fn begin(call: &ToolCallEnvelope) -> Self {
        Self {
            envelope_version: RESULT_ENVELOPE_VERSION.to_owned(),
            tool_call_id: call.tool_call_id.clone(),
            trace_id: call.trace_id.clone(),
            adapter: None,
            capability_id: call.capability_id.clone(),
            resolved_from: None,
            approval_mode_effective: None,
            approval_id: None,
            connect_url: None,
            replay_of: None,
            status: Status::Ok,
            outcome: OutcomeCode::Ok,
            content: Vec::new(),
            structured_content: None,
            evidence_refs: Vec::new(),
            error: None,
            policy_decision: None,
            egress: Vec::new(),
            caller: None,
            usage: None,
            receipt: None,
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{ErrorKind, Obligation, PiiKind, Reason, Verdict};

    #[test]
    fn a_full_result_round_trips_through_json() {
        let call = ToolCallEnvelope::new("acme", "a.b", json!({ "x": 1 }));
        let mut result = ToolResultEnvelope::begin(&call);
        result.status = Status::Failed;
        result.outcome = OutcomeCode::ToolError;
        result.content = vec![ContentBlock::Text { text: "t".into() }];
        result.structured_content = Some(json!({ "k": [1, 2] }));
        result.error = Some(ErrorBody::new(ErrorKind::Upstream, "X", "m", true));
        result.approval_id = Some("apr_1".into());
        result.policy_decision = Some(DecisionRecord {
            decision_id: "pol_1".into(),
            verdict: Verdict::Allow,
            approval_mode_effective: ApprovalMode::Network,
            default_applied: false,
            modules: vec![ModuleDecision {
                module: None,
                module_id: "m".into(),
                verdict: Verdict::Abstain,
                effective_mode: None,
                mode_raise_ignored: false,
                reasons: vec![Reason {
                    code: "C".into(),
                    message: "why".into(),
                }],
                evidence_refs: Vec::new(),
                fuel_consumed: 7,
            }],
            obligations: vec![Obligation::MaskPii(vec![PiiKind::Email])],
            shadow: Vec::new(),
            masked: Vec::new(),
        });
        result.egress = vec![EgressAttempt {
            method: "GET".into(),
            destination: "http://h:80/".into(),
            address: None,
            allowed: true,
            code: "ok".into(),
            reason: String::new(),
            status: Some(200),
            request_bytes: 0,
            response_bytes: 3,
            credentials: Vec::new(),
        }];
        let text = serde_json::to_string(&result).unwrap();
        assert_eq!(
            serde_json::from_str::<ToolResultEnvelope>(&text).unwrap(),
            result
        );
    }

    #[test]
    fn outcome_codes_serialize_as_their_wire_names() {
        for code in [
            OutcomeCode::Ok,
            OutcomeCode::IdempotencyInFlight,
            OutcomeCode::StoreUnavailable,
            OutcomeCode::ToolOutputTooLarge,
            OutcomeCode::ConnectionRequired,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
    }
}
