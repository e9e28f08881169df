//! The result of a governed call: `ToolResultEnvelope` and its outcome codes.
//!
//! Field names follow spec 000 (`tool_call_id`, `trace_id`, `evidence_refs`, ...); content
//! blocks use MCP's shape so a result can be delivered as `content` + `structuredContent`
//! unchanged. Every failure of a call is a result with `status: failed` and an outcome code,
//! never a panic or a protocol error.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde_json::Value;

use crate::bindings::types as wit;
use crate::egress::EgressAttempt;
use crate::model::ApprovalMode;
use crate::plugin::PluginRef;
use crate::policy::DecisionRecord;
use crate::sandbox::SandboxError;

/// Version tag of the envelope format.
pub const RESULT_ENVELOPE_VERSION: &str = "gatehouse.tool_result.v1";

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and returned a result.
    Ok,
    /// The call failed; `error` says why.
    Failed,
    /// Waiting for an approver.
    Paused,
    /// Refused before anything ran.
    Rejected,
}

/// Machine-readable outcome of a call (DESIGN.md section 9).
///
/// The first seven are the specs' codes. The rest are gatehouse's own, for failures the specs
/// do not name: they say exactly which budget or rule stopped the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    /// Every instance slot stayed busy for the call's whole deadline; the tool did not run.
    GatewayBusy,
    /// The host failed; not the caller's or the tool's fault.
    InternalError,
}

/// What kind of failure, for clients deciding what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Bad arguments; the model can correct them.
    Validation,
    /// Not found.
    NotFound,
    /// Conflicts with current state.
    Conflict,
    /// The external system failed.
    Upstream,
    /// Temporarily unavailable.
    Unavailable,
    /// Ran out of a time or fuel budget.
    Timeout,
    /// Exceeded a resource limit.
    Limit,
    /// Refused by policy or a host invariant.
    Policy,
    /// Internal failure.
    Internal,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    /// Kind of failure.
    pub kind: ErrorKind,
    /// Machine-readable code: the outcome code, or the adapter's own code for `TOOL_ERROR`.
    pub code: String,
    /// For people.
    pub message: String,
    /// Whether the same call may succeed if retried.
    pub retryable: bool,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

/// One MCP content block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64.
    Image {
        /// Base64 data.
        data: String,
        /// Media type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio, base64.
    Audio {
        /// Base64 data.
        data: String,
        /// Media type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// An embedded resource.
    Resource {
        /// Its contents.
        resource: ResourceContents,
    },
}

/// MCP resource contents: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceContents {
    /// The resource URI.
    pub uri: String,
    /// Media type.
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary contents, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// Resources one call used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Fuel consumed.
    pub fuel_consumed: u64,
    /// Wall-clock milliseconds in the sandbox.
    pub duration_ms: u64,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResultEnvelope {
    /// Always [`RESULT_ENVELOPE_VERSION`].
    pub envelope_version: &'static str,
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<EgressAttempt>,
    /// Budgets used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl ToolResultEnvelope {
    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

impl ErrorBody {
    /// An error body for a host outcome.
    pub fn new(
        kind: ErrorKind,
        outcome: OutcomeCode,
        message: impl Into<String>,
        retryable: bool,
    ) -> Self {
        Self {
            kind,
            code: code_of(outcome),
            message: message.into(),
            retryable,
            remediation: None,
        }
    }

    /// With a remediation hint.
    pub fn with_remediation(mut self, remediation: impl Into<String>) -> Self {
        self.remediation = Some(remediation.into());
        self
    }
}

/// The wire name of an outcome code, e.g. `TOOL_TIMEOUT`.
pub fn code_of(outcome: OutcomeCode) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .expect("outcome codes serialize as strings")
}

/// Classifies a sandbox failure: the one place a [`SandboxError`] becomes an outcome.
pub fn sandbox_failure(error: &SandboxError) -> (OutcomeCode, ErrorBody) {
    let (outcome, kind, retryable, remediation) = match error {
        SandboxError::OutOfFuel { .. } => (
            OutcomeCode::ToolTimeout,
            ErrorKind::Timeout,
            false,
            "the tool used its whole compute budget; ask the operator to raise [sandbox].fuel if this input is legitimate",
        ),
        SandboxError::Deadline { .. } => (
            OutcomeCode::ToolTimeout,
            ErrorKind::Timeout,
            true,
            "the tool did not answer in time; retry later or ask the operator to raise [sandbox].timeout_ms",
        ),
        SandboxError::MemoryLimit(_) => (
            OutcomeCode::ToolMemoryLimit,
            ErrorKind::Limit,
            false,
            "the tool needed more memory than allowed; use a smaller input or ask the operator to raise [sandbox].memory_mib",
        ),
        SandboxError::OutputTooLarge { .. } => (
            OutcomeCode::ToolOutputTooLarge,
            ErrorKind::Limit,
            false,
            "ask for less data (paging, filters) or ask the operator to raise [sandbox].max_output_kib",
        ),
        SandboxError::Trap { .. } => (
            OutcomeCode::ToolTrapped,
            ErrorKind::Internal,
            false,
            "the tool crashed; report it to the adapter's publisher",
        ),
        SandboxError::Busy { .. } => (
            OutcomeCode::GatewayBusy,
            ErrorKind::Unavailable,
            true,
            "the gateway is running as many tools as it may at once; retry shortly, or ask the operator to raise [sandbox].max_concurrent_calls",
        ),
        SandboxError::Host(_) => (
            OutcomeCode::InternalError,
            ErrorKind::Internal,
            true,
            "the gateway failed while running the tool; see its logs",
        ),
    };
    let body = ErrorBody::new(kind, outcome, format!("the tool {error}"), retryable)
        .with_remediation(remediation);
    (outcome, body)
}

/// Converts an adapter's structured error.
pub fn tool_error(error: wit::ToolError) -> ErrorBody {
    ErrorBody {
        kind: match error.kind {
            wit::ErrorKind::Validation => ErrorKind::Validation,
            wit::ErrorKind::NotFound => ErrorKind::NotFound,
            wit::ErrorKind::Conflict => ErrorKind::Conflict,
            wit::ErrorKind::Upstream => ErrorKind::Upstream,
            wit::ErrorKind::Unavailable => ErrorKind::Unavailable,
            wit::ErrorKind::Internal => ErrorKind::Internal,
        },
        code: error.code,
        message: error.message,
        retryable: error.retryable,
        remediation: error.remediation,
    }
}

/// Converts an adapter's content blocks to MCP's shape.
pub fn content_blocks(content: Vec<wit::Content>) -> Vec<ContentBlock> {
    content
        .into_iter()
        .map(|block| match block {
            wit::Content::Text(text) => ContentBlock::Text { text },
            wit::Content::Image(blob) => ContentBlock::Image {
                data: BASE64.encode(&blob.data),
                mime_type: blob.mime_type,
            },
            wit::Content::Audio(blob) => ContentBlock::Audio {
                data: BASE64.encode(&blob.data),
                mime_type: blob.mime_type,
            },
            wit::Content::Resource(r) => ContentBlock::Resource {
                resource: ResourceContents {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    text: r.text,
                    blob: r.data.map(|d| BASE64.encode(d)),
                },
            },
        })
        .collect()
}
