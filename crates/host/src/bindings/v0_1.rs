//! The released contract `gatehouse:plugin@0.1.0`, adapted to the current one: what the host
//! hands a 0.1.0 plugin (its call context, its action) is the current value less what 0.1.0
//! did not have, and what it returns (output, error, decision, log level) is the same value
//! in the current types. 0.1.0 differs from 0.2.0 in one field: `call-context.upstream`,
//! which a 0.1.0 adapter never sees (it was written before generic adapters existed).

use super::LogLevel;
use super::adapter_0_1::gatehouse::plugin::log::Level as OldLevel;
use super::adapter_0_1::gatehouse::plugin::types as old;
use super::types as wit;

/// The call context a 0.1.0 adapter takes: the current one without `upstream`.
pub(crate) fn call_context(ctx: &wit::CallContext) -> old::CallContext {
    old::CallContext {
        tool_call_id: ctx.tool_call_id.clone(),
        trace_id: ctx.trace_id.clone(),
        tenant: ctx.tenant.clone(),
        principals: ctx.principals.iter().map(principal).collect(),
        approval_mode: approval_mode(ctx.approval_mode),
        idempotency_key: ctx.idempotency_key.clone(),
        skill_context: ctx.skill_context.clone(),
    }
}

/// The action a 0.1.0 policy evaluates: the same fields.
pub(crate) fn action(action: &wit::Action) -> old::Action {
    old::Action {
        tool_call_id: action.tool_call_id.clone(),
        adapter_id: action.adapter_id.clone(),
        capability_id: action.capability_id.clone(),
        capability_class: match action.capability_class {
            wit::CapabilityClass::Observe => old::CapabilityClass::Observe,
            wit::CapabilityClass::Recall => old::CapabilityClass::Recall,
            wit::CapabilityClass::ThinkSupport => old::CapabilityClass::ThinkSupport,
            wit::CapabilityClass::Act => old::CapabilityClass::Act,
            wit::CapabilityClass::Verify => old::CapabilityClass::Verify,
        },
        approval_mode_max: approval_mode(action.approval_mode_max),
        approval_mode_requested: approval_mode(action.approval_mode_requested),
        args: action.args.clone(),
        principals: action.principals.iter().map(principal).collect(),
        tenant: action.tenant.clone(),
        context: old::ActionContext {
            now_unix_ms: action.context.now_unix_ms,
            prior_actions: action.context.prior_actions.clone(),
            data_classification: action.context.data_classification.clone(),
        },
        risk_signals: (action.risk_signals.iter())
            .map(|s| old::RiskSignal {
                name: s.name.clone(),
                score: s.score,
            })
            .collect(),
    }
}

fn principal(p: &wit::Principal) -> old::Principal {
    old::Principal {
        kind: match p.kind {
            wit::PrincipalKind::User => old::PrincipalKind::User,
            wit::PrincipalKind::Agent => old::PrincipalKind::Agent,
            wit::PrincipalKind::Service => old::PrincipalKind::Service,
        },
        id: p.id.clone(),
        tenant: p.tenant.clone(),
    }
}

fn approval_mode(mode: wit::ApprovalMode) -> old::ApprovalMode {
    match mode {
        wit::ApprovalMode::ReadOnly => old::ApprovalMode::ReadOnly,
        wit::ApprovalMode::LocalWrite => old::ApprovalMode::LocalWrite,
        wit::ApprovalMode::Network => old::ApprovalMode::Network,
        wit::ApprovalMode::Delegated => old::ApprovalMode::Delegated,
        wit::ApprovalMode::Destructive => old::ApprovalMode::Destructive,
    }
}

fn approval_mode_back(mode: old::ApprovalMode) -> wit::ApprovalMode {
    match mode {
        old::ApprovalMode::ReadOnly => wit::ApprovalMode::ReadOnly,
        old::ApprovalMode::LocalWrite => wit::ApprovalMode::LocalWrite,
        old::ApprovalMode::Network => wit::ApprovalMode::Network,
        old::ApprovalMode::Delegated => wit::ApprovalMode::Delegated,
        old::ApprovalMode::Destructive => wit::ApprovalMode::Destructive,
    }
}

impl From<old::ToolOutput> for wit::ToolOutput {
    fn from(output: old::ToolOutput) -> Self {
        Self {
            content: output.content.into_iter().map(content).collect(),
            structured: output.structured,
            evidence_refs: output.evidence_refs,
        }
    }
}

fn content(content: old::Content) -> wit::Content {
    let blob = |b: old::Blob| wit::Blob {
        data: b.data,
        mime_type: b.mime_type,
    };
    match content {
        old::Content::Text(text) => wit::Content::Text(text),
        old::Content::Image(b) => wit::Content::Image(blob(b)),
        old::Content::Audio(b) => wit::Content::Audio(blob(b)),
        old::Content::Resource(r) => wit::Content::Resource(wit::EmbeddedResource {
            uri: r.uri,
            mime_type: r.mime_type,
            text: r.text,
            data: r.data,
        }),
    }
}

impl From<old::ToolError> for wit::ToolError {
    fn from(error: old::ToolError) -> Self {
        Self {
            kind: match error.kind {
                old::ErrorKind::Validation => wit::ErrorKind::Validation,
                old::ErrorKind::NotFound => wit::ErrorKind::NotFound,
                old::ErrorKind::Conflict => wit::ErrorKind::Conflict,
                old::ErrorKind::Upstream => wit::ErrorKind::Upstream,
                old::ErrorKind::Unavailable => wit::ErrorKind::Unavailable,
                old::ErrorKind::Internal => wit::ErrorKind::Internal,
            },
            code: error.code,
            message: error.message,
            retryable: error.retryable,
            remediation: error.remediation,
        }
    }
}

impl From<old::Decision> for wit::Decision {
    fn from(decision: old::Decision) -> Self {
        Self {
            verdict: match decision.verdict {
                old::Verdict::Allow => wit::Verdict::Allow,
                old::Verdict::Deny => wit::Verdict::Deny,
                old::Verdict::RequireApproval => wit::Verdict::RequireApproval,
                old::Verdict::Abstain => wit::Verdict::Abstain,
            },
            effective_mode: decision.effective_mode.map(approval_mode_back),
            reasons: (decision.reasons.into_iter())
                .map(|r| wit::Reason {
                    code: r.code,
                    message: r.message,
                })
                .collect(),
            evidence_refs: decision.evidence_refs,
            obligations: (decision.obligations.into_iter())
                .map(|o| match o {
                    old::Obligation::RedactPointer(pointer) => {
                        wit::Obligation::RedactPointer(pointer)
                    }
                    old::Obligation::MaskPii(kinds) => wit::Obligation::MaskPii(
                        (kinds.into_iter())
                            .map(|k| match k {
                                old::PiiKind::Email => wit::PiiKind::Email,
                                old::PiiKind::Phone => wit::PiiKind::Phone,
                            })
                            .collect(),
                    ),
                })
                .collect(),
        }
    }
}

impl From<OldLevel> for LogLevel {
    fn from(level: OldLevel) -> Self {
        match level {
            OldLevel::Trace => Self::Trace,
            OldLevel::Debug => Self::Debug,
            OldLevel::Info => Self::Info,
            OldLevel::Warn => Self::Warn,
            OldLevel::Error => Self::Error,
        }
    }
}
