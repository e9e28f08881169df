//! Every conversion between gatehouse's vocabulary (`gatehouse_core::model`) and the WIT bindings'
//! twins of it, in one place. Host types go in (call context, action), guest types come out
//! (content, tool errors, decisions, log levels).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use gatehouse_core::envelope::Protocol;
use gatehouse_core::model::label::FlowFacts;
use gatehouse_core::model::{
    ActionRecord, ApprovalMode, CapabilityClass, Claims, ContentBlock, ErrorBody, ErrorKind,
    IdentifierPattern, Obligation, PiiKind, Principal, PrincipalKind, PriorAction, Reason,
    ResourceContents, SecretKind, Verdict,
};

use super::LogLevel;
use super::types as wit;

impl From<CapabilityClass> for wit::CapabilityClass {
    fn from(class: CapabilityClass) -> Self {
        match class {
            CapabilityClass::Observe => Self::Observe,
            CapabilityClass::Recall => Self::Recall,
            CapabilityClass::ThinkSupport => Self::ThinkSupport,
            CapabilityClass::Act => Self::Act,
            CapabilityClass::Verify => Self::Verify,
        }
    }
}

impl From<ApprovalMode> for wit::ApprovalMode {
    fn from(mode: ApprovalMode) -> Self {
        match mode {
            ApprovalMode::ReadOnly => Self::ReadOnly,
            ApprovalMode::LocalWrite => Self::LocalWrite,
            ApprovalMode::Network => Self::Network,
            ApprovalMode::Delegated => Self::Delegated,
            ApprovalMode::Destructive => Self::Destructive,
        }
    }
}

impl From<wit::ApprovalMode> for ApprovalMode {
    fn from(mode: wit::ApprovalMode) -> Self {
        match mode {
            wit::ApprovalMode::ReadOnly => Self::ReadOnly,
            wit::ApprovalMode::LocalWrite => Self::LocalWrite,
            wit::ApprovalMode::Network => Self::Network,
            wit::ApprovalMode::Delegated => Self::Delegated,
            wit::ApprovalMode::Destructive => Self::Destructive,
        }
    }
}

impl From<&Principal> for wit::Principal {
    fn from(p: &Principal) -> Self {
        Self {
            kind: match p.kind {
                PrincipalKind::User => wit::PrincipalKind::User,
                PrincipalKind::Agent => wit::PrincipalKind::Agent,
                PrincipalKind::Service => wit::PrincipalKind::Service,
            },
            id: p.id.clone(),
            tenant: p.tenant.clone(),
        }
    }
}

impl From<wit::ToolError> for ErrorBody {
    /// An adapter's structured error, as the caller sees it.
    fn from(error: wit::ToolError) -> Self {
        Self {
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
}

impl From<wit::Content> for ContentBlock {
    /// An adapter's content block in MCP's shape (binary data base64-encoded).
    fn from(block: wit::Content) -> Self {
        match block {
            wit::Content::Text(text) => Self::Text { text },
            wit::Content::Image(blob) => Self::Image {
                data: BASE64.encode(&blob.data),
                mime_type: blob.mime_type,
            },
            wit::Content::Audio(blob) => Self::Audio {
                data: BASE64.encode(&blob.data),
                mime_type: blob.mime_type,
            },
            wit::Content::Resource(r) => Self::Resource {
                resource: ResourceContents {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    text: r.text,
                    blob: r.data.map(|d| BASE64.encode(d)),
                },
            },
        }
    }
}

impl From<wit::Verdict> for Verdict {
    fn from(verdict: wit::Verdict) -> Self {
        match verdict {
            wit::Verdict::Allow => Self::Allow,
            wit::Verdict::Deny => Self::Deny,
            wit::Verdict::RequireApproval => Self::RequireApproval,
            wit::Verdict::Abstain => Self::Abstain,
        }
    }
}

impl From<wit::Reason> for Reason {
    fn from(reason: wit::Reason) -> Self {
        Self {
            code: reason.code,
            message: reason.message,
        }
    }
}

impl From<wit::Obligation> for Obligation {
    fn from(obligation: wit::Obligation) -> Self {
        match obligation {
            wit::Obligation::RedactPointer(pointer) => Self::RedactPointer(pointer),
            wit::Obligation::MaskPii(kinds) => {
                Self::MaskPii(kinds.into_iter().map(PiiKind::from).collect())
            }
            wit::Obligation::MaskSecrets(scan) => Self::MaskSecrets {
                kinds: scan.kinds.into_iter().map(SecretKind::from).collect(),
                fields: scan.fields,
            },
            wit::Obligation::MaskIdentifiers(identifiers) => Self::MaskIdentifiers(
                identifiers
                    .into_iter()
                    .map(|i| IdentifierPattern {
                        name: i.name,
                        pattern: i.pattern,
                    })
                    .collect(),
            ),
        }
    }
}

impl From<wit::SecretKind> for SecretKind {
    fn from(kind: wit::SecretKind) -> Self {
        match kind {
            wit::SecretKind::PrivateKey => Self::PrivateKey,
            wit::SecretKind::CloudAccessKey => Self::CloudAccessKey,
            wit::SecretKind::BearerToken => Self::BearerToken,
            wit::SecretKind::Jwt => Self::Jwt,
            wit::SecretKind::HighEntropy => Self::HighEntropy,
        }
    }
}

impl From<wit::PiiKind> for PiiKind {
    fn from(kind: wit::PiiKind) -> Self {
        match kind {
            wit::PiiKind::Email => Self::Email,
            wit::PiiKind::Phone => Self::Phone,
        }
    }
}

/// A 0.4.0 or 0.5.0 plugin's log level: their `log` interface is the current one's, at their
/// version.
macro_rules! log_level {
    ($($old:ident)::+) => {
        impl From<$($old)::+> for LogLevel {
            fn from(level: $($old)::+) -> Self {
                use $($old)::+ as Old;
                match level {
                    Old::Trace => Self::Trace,
                    Old::Debug => Self::Debug,
                    Old::Info => Self::Info,
                    Old::Warn => Self::Warn,
                    Old::Error => Self::Error,
                }
            }
        }
    };
}
log_level!(super::policy_0_4::gatehouse::plugin::log::Level);
log_level!(super::adapter_0_5::gatehouse::plugin::log::Level);

impl From<LogLevel> for &'static str {
    /// The level's name, as plugin log lines record it.
    fn from(level: LogLevel) -> Self {
        match level {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

impl From<&wit::Action> for ActionRecord {
    fn from(action: &wit::Action) -> Self {
        Self {
            tool_call_id: action.tool_call_id.clone(),
            adapter_id: action.adapter_id.clone(),
            capability_id: action.capability_id.clone(),
            capability_class: action.capability_class.into(),
            approval_mode_max: action.approval_mode_max.into(),
            approval_mode_requested: action.approval_mode_requested.into(),
            args: action.args.clone(),
            principals: action.principals.iter().map(Principal::from).collect(),
            tenant: action.tenant.clone(),
            claims: Claims {
                roles: action.claims.roles.clone(),
                groups: action.claims.groups.clone(),
            },
            now_unix_ms: action.context.now_unix_ms,
            prior_actions: (action.context.prior_actions.iter())
                .map(|prior| PriorAction {
                    tool: prior.tool.clone(),
                    tool_call_id: prior.tool_call_id.clone(),
                    at_ms: prior.at_unix_ms,
                    labels: prior.labels.clone(),
                })
                .collect(),
            data_classification: action.context.data_classification.clone(),
            skills: action.context.skills.clone(),
            protocol: action.context.protocol.clone(),
            delegated_by: action.context.delegated_by.clone(),
            risk_signals: action
                .risk_signals
                .iter()
                .map(|s| (s.name.clone(), s.score))
                .collect(),
            // The labels' sources are the host's (the pipeline sets them); what the tool sends
            // is the action's.
            flows: FlowFacts {
                labels: Vec::new(),
                sends: action.context.sends.clone(),
            },
        }
    }
}

/// The action as a module sees it: of what the flow rules saw (`flows`), what the tool sends;
/// the labels' sources are the host's alone (each prior action carries the labels it brought).
impl From<ActionRecord> for wit::Action {
    fn from(action: ActionRecord) -> Self {
        Self {
            tool_call_id: action.tool_call_id,
            adapter_id: action.adapter_id,
            capability_id: action.capability_id,
            capability_class: action.capability_class.into(),
            approval_mode_max: action.approval_mode_max.into(),
            approval_mode_requested: action.approval_mode_requested.into(),
            args: action.args,
            principals: action.principals.iter().map(Into::into).collect(),
            tenant: action.tenant,
            claims: (&action.claims).into(),
            context: wit::ActionContext {
                now_unix_ms: action.now_unix_ms,
                prior_actions: action.prior_actions.into_iter().map(Into::into).collect(),
                data_classification: action.data_classification,
                skills: action.skills,
                sends: action.flows.sends,
                // A record from before 0.8.0 names none: its call came directly or by MCP,
                // which its module could not tell apart.
                protocol: if action.protocol.is_empty() {
                    Protocol::name(None).to_owned()
                } else {
                    action.protocol
                },
                delegated_by: action.delegated_by,
            },
            risk_signals: action
                .risk_signals
                .into_iter()
                .map(|(name, score)| wit::RiskSignal { name, score })
                .collect(),
        }
    }
}

impl From<PriorAction> for wit::PriorAction {
    fn from(prior: PriorAction) -> Self {
        Self {
            tool: prior.tool,
            tool_call_id: prior.tool_call_id,
            at_unix_ms: prior.at_ms,
            labels: prior.labels,
        }
    }
}

impl From<&Claims> for wit::Claims {
    fn from(claims: &Claims) -> Self {
        Self {
            roles: claims.roles.clone(),
            groups: claims.groups.clone(),
        }
    }
}

impl From<wit::CapabilityClass> for CapabilityClass {
    fn from(class: wit::CapabilityClass) -> Self {
        match class {
            wit::CapabilityClass::Observe => Self::Observe,
            wit::CapabilityClass::Recall => Self::Recall,
            wit::CapabilityClass::ThinkSupport => Self::ThinkSupport,
            wit::CapabilityClass::Act => Self::Act,
            wit::CapabilityClass::Verify => Self::Verify,
        }
    }
}

impl From<&wit::Principal> for Principal {
    fn from(p: &wit::Principal) -> Self {
        Self {
            kind: match p.kind {
                wit::PrincipalKind::User => PrincipalKind::User,
                wit::PrincipalKind::Agent => PrincipalKind::Agent,
                wit::PrincipalKind::Service => PrincipalKind::Service,
            },
            id: p.id.clone(),
            tenant: p.tenant.clone(),
        }
    }
}

/// The conversions between one version's `caller` interface (`wit`, in scope where it is
/// expanded) and the [`crate::relay`] vocabulary: the current one's, 0.7.0's, 0.6.0's and
/// 0.5.0's are the same interface at four versions.
macro_rules! caller_values {
    () => {
        impl From<CallerCan> for wit::CallerCan {
            fn from(can: CallerCan) -> Self {
                Self {
                    elicit_form: can.elicit_form,
                    elicit_url: can.elicit_url,
                    sample: can.sample,
                    roots: can.roots,
                }
            }
        }

        impl From<wit::LogLevel> for LogLevel {
            fn from(level: wit::LogLevel) -> Self {
                match level {
                    wit::LogLevel::Debug => Self::Debug,
                    wit::LogLevel::Info => Self::Info,
                    wit::LogLevel::Notice => Self::Notice,
                    wit::LogLevel::Warning => Self::Warning,
                    wit::LogLevel::Error => Self::Error,
                    wit::LogLevel::Critical => Self::Critical,
                    wit::LogLevel::Alert => Self::Alert,
                    wit::LogLevel::Emergency => Self::Emergency,
                }
            }
        }

        impl From<wit::AskKind> for AskKind {
            fn from(kind: wit::AskKind) -> Self {
                match kind {
                    wit::AskKind::Elicitation => Self::Elicitation,
                    wit::AskKind::Sampling => Self::Sampling,
                    wit::AskKind::Roots => Self::Roots,
                }
            }
        }

        impl From<AskError> for wit::AskError {
            fn from(error: AskError) -> Self {
                let message = error.to_string();
                match error {
                    AskError::Unavailable(_) => Self::Unavailable(message),
                    AskError::NotSupported(_) => Self::NotSupported(message),
                    AskError::Refused(_) => Self::Refused(message),
                    AskError::Failed(_) => Self::Failed(message),
                    AskError::Timeout(seconds) => Self::Timeout(seconds),
                }
            }
        }
    };
}

mod caller {
    //! The `caller` interface's values and the [`crate::relay`] vocabulary.

    use super::super::caller as wit;
    use crate::relay::{AskError, AskKind, CallerCan, LogLevel};

    caller_values!();
}

mod caller_0_5 {
    //! Contract 0.5.0's `caller` interface's values and the [`crate::relay`] vocabulary.

    use super::super::adapter_0_5::gatehouse::plugin::caller as wit;
    use crate::relay::{AskError, AskKind, CallerCan, LogLevel};

    caller_values!();
}

mod caller_0_6 {
    //! Contract 0.6.0's `caller` interface's values and the [`crate::relay`] vocabulary.

    use super::super::adapter_0_6::gatehouse::plugin::caller as wit;
    use crate::relay::{AskError, AskKind, CallerCan, LogLevel};

    caller_values!();
}

mod caller_0_7 {
    //! Contract 0.7.0's `caller` interface's values and the [`crate::relay`] vocabulary.

    use super::super::adapter_0_7::gatehouse::plugin::caller as wit;
    use crate::relay::{AskError, AskKind, CallerCan, LogLevel};

    caller_values!();
}
