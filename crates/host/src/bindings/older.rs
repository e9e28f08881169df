//! What every released contract before the current one shares with it in the `policy`
//! world, adapted once for all of them: the action a policy evaluates goes to the old types,
//! its decision and log level come back in the current ones. An older version's module
//! invokes [`older_policy!`] with `old` (its `types`), `OldLevel` (its log level), `wit` (the
//! current types) and `LogLevel` in scope, saying what its version has beyond 0.1.0's:
//! - `masks(scan, identifiers)`: the obligations `mask-secrets` and `mask-identifiers` (0.3.0);
//! - `claims(claims, skills)`: `action.claims` and `action-context.skills` (0.4.0);
//! - `sends(sends)`: `action-context.sends` (0.7.0).
//!
//! The prior actions convert with [`FromPrior`]: to their tool names before 0.7.0, which made
//! them records (0.7.0's own impl is in `v0_7`). No older version has 0.8.0's
//! `action-context.protocol` or `delegated-by`.

use super::types as wit;

/// A prior action as an older contract's `action-context` has it.
pub(crate) trait FromPrior {
    /// `prior` in this version's type.
    fn from_prior(prior: &wit::PriorAction) -> Self;
}

/// Before 0.7.0, a prior action is its tool's name.
impl FromPrior for String {
    fn from_prior(prior: &wit::PriorAction) -> Self {
        prior.tool.clone()
    }
}

/// The `action`, `principal` and `approval_mode` conversions into an older contract's types,
/// and `Decision` and `Level` back from them. `masks(scan, identifiers)` converts the
/// obligations 0.3.0 added (the names bind their values), `claims(claims, skills)` and
/// `sends(sends)` pass the fields 0.4.0 and 0.7.0 added (the names are the fields').
macro_rules! older_policy {
    (
        $(masks($scan:ident, $identifiers:ident))?
        $(claims($claims:ident, $skills:ident))?
        $(sends($sends:ident))?
    ) => {
        /// The action an older policy evaluates: the fields its version has (what later
        /// versions added, such as 0.4.0's `claims` and `skills`, 0.7.0's `sends` or 0.8.0's
        /// `protocol`, is not passed), and the prior actions as its version has them.
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
                $($claims: old::Claims {
                    roles: action.claims.roles.clone(),
                    groups: action.claims.groups.clone(),
                },)?
                context: old::ActionContext {
                    now_unix_ms: action.context.now_unix_ms,
                    prior_actions: (action.context.prior_actions.iter())
                        .map(super::older::FromPrior::from_prior)
                        .collect(),
                    data_classification: action.context.data_classification.clone(),
                    $($skills: action.context.skills.clone(),)?
                    $($sends: action.context.sends.clone(),)?
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
                            $(old::Obligation::MaskSecrets($scan) => {
                                wit::Obligation::MaskSecrets(wit::SecretScan {
                                    kinds: ($scan.kinds.into_iter())
                                        .map(|kind| match kind {
                                            old::SecretKind::PrivateKey => {
                                                wit::SecretKind::PrivateKey
                                            }
                                            old::SecretKind::CloudAccessKey => {
                                                wit::SecretKind::CloudAccessKey
                                            }
                                            old::SecretKind::BearerToken => {
                                                wit::SecretKind::BearerToken
                                            }
                                            old::SecretKind::Jwt => wit::SecretKind::Jwt,
                                            old::SecretKind::HighEntropy => {
                                                wit::SecretKind::HighEntropy
                                            }
                                        })
                                        .collect(),
                                    fields: $scan.fields,
                                })
                            }
                            old::Obligation::MaskIdentifiers($identifiers) => {
                                wit::Obligation::MaskIdentifiers(
                                    ($identifiers.into_iter())
                                        .map(|i| wit::Identifier {
                                            name: i.name,
                                            pattern: i.pattern,
                                        })
                                        .collect(),
                                )
                            })?
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
    };
}

pub(crate) use older_policy;
