//! The governed call: [`Host::call`] runs every gate in order. This file is the only place
//! that knows the order; each gate lives in its own module and is called from here.
//!
//! 1. identify — done by the caller (MCP server or embedding gateway) before the envelope
//!    exists; the envelope carries the resulting tenant and principal chain;
//! 2. **normalize** ([`normalize`]) — meta-tool resolution, registry lookup; a tool the tenant
//!    may not see is reported exactly like a missing one (`UNKNOWN_CAPABILITY`);
//! 3. **validate** ([`validate`]) — input JSON Schema 2020-12, then `arg_constraints`
//!    (`INVALID_ARGUMENTS`, naming the field);
//! 4. **host invariants** ([`invariants`]) — approval-mode ceiling (`POLICY_BLOCKED`),
//!    idempotency key on write-class calls (`IDEMPOTENCY_KEY_REQUIRED`), high-risk write rule
//!    (`ROLLBACK_REQUIRED`);
//! 5. **policy** ([`crate::policy`]) — the bound modules, composed; deny is `POLICY_BLOCKED`;
//! 6. **approve** — a require-approval decision, or an effective mode of network or above on
//!    a capability with an approval gate, returns `paused` / `APPROVAL_REQUIRED`. (Pending
//!    approvals are stored by the state module, a later issue; it plugs in here.)
//! 7. deduplicate — plugs in here with the state module (idempotency records);
//! 8. **invoke** — skills resolved ([`crate::skills`]), the adapter run in a fresh sandbox;
//! 9. **verify** ([`verify`]) — output schema (`VERIFICATION_FAILED`), evidence keys
//!    (`EVIDENCE_MISSING`), then policy obligations ([`obligations`]);
//! 10. record — the result carries the decision record; the audit log (state module)
//!     plugs in here.
//!
//! Gates before 8 have no side effects: a refusal there is `rejected` (or `paused`).

pub mod config;
pub mod invariants;
pub mod normalize;
pub mod obligations;
pub mod validate;
pub mod verify;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use crate::bindings::types as wit;
use crate::egress::{CallInfo, EgressGate};
use crate::envelope::{
    self, ErrorBody, ErrorKind, OutcomeCode, RESULT_ENVELOPE_VERSION, Status, ToolResultEnvelope,
    Usage,
};
use crate::host::{Host, random_hex};
use crate::model::{ApprovalMode, Principal, PrincipalKind};
use crate::pipeline::invariants::InvariantError;
use crate::pipeline::normalize::{InstalledAdapter, NormalizeError, Registry, Target};
use crate::pipeline::validate::{Schemas, ValidateError};
use crate::pipeline::verify::VerifyError;
use crate::plugin::LoadedAdapter;
use crate::policy::{self, PolicyStore, Verdict};
use crate::skills::Skills;

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
    /// Tool name as called: `<adapter id>.<capability id>`, or a meta-tool's name.
    pub capability_id: String,
    /// Arguments (a JSON object).
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The approval mode the caller asks for; default: the capability's declared maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode_requested: Option<ApprovalMode>,
    /// Idempotency key; required on write-class calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

fn call_version() -> String {
    CALL_ENVELOPE_VERSION.to_owned()
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

impl ToolCallEnvelope {
    /// A call of `tool` for `tenant` with fresh ids, no principals and no idempotency key.
    pub fn new(tenant: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        Self {
            envelope_version: call_version(),
            tool_call_id: format!("call_{}", random_hex(8)),
            trace_id: random_hex(16),
            session_id: None,
            tenant_id: tenant.into(),
            principal_chain: Vec::new(),
            capability_id: tool.into(),
            args,
            approval_mode_requested: None,
            idempotency_key: None,
        }
    }

    /// With an idempotency key.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Asking for an approval mode.
    pub fn with_mode(mut self, mode: ApprovalMode) -> Self {
        self.approval_mode_requested = Some(mode);
        self
    }

    /// With one more principal at the end of the chain.
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal_chain.push(principal);
        self
    }
}

/// Why the pipeline could not be built from the config.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A tool grant or meta-tool is invalid.
    #[error(transparent)]
    Registry(#[from] NormalizeError),
    /// A policy binding is invalid.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// A skill is invalid or looks like a secret.
    #[error(transparent)]
    Skills(#[from] crate::skills::SkillError),
    /// An adapter's schema does not compile.
    #[error("adapter `{adapter}`: {source}")]
    Schema {
        /// The adapter id.
        adapter: String,
        /// What is wrong.
        source: ValidateError,
    },
}

/// The pipeline's state: registry, policies, skills.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub(crate) registry: Registry,
    pub(crate) policies: PolicyStore,
    pub(crate) skills: Skills,
}

impl Pipeline {
    pub(crate) fn new(config: &config::PipelineConfig) -> Result<Self, PipelineError> {
        Ok(Self {
            registry: Registry::new(&config.tools, config.meta_tools.clone())?,
            policies: PolicyStore::new(&config.policies, config.policy_default)?,
            skills: Skills::new(&config.skills, config.skill_limits.clone())?,
        })
    }

    pub(crate) fn install_adapter(&self, adapter: LoadedAdapter) -> Result<(), PipelineError> {
        let mut schemas = HashMap::new();
        for capability in &adapter.manifest.capabilities {
            let compiled =
                Schemas::compile(capability).map_err(|source| PipelineError::Schema {
                    adapter: adapter.manifest.id.clone(),
                    source,
                })?;
            schemas.insert(capability.id.clone(), compiled);
        }
        self.registry.install(InstalledAdapter { adapter, schemas });
        Ok(())
    }
}

/// A refusal: how the call ends, and why.
struct Refusal {
    status: Status,
    outcome: OutcomeCode,
    error: ErrorBody,
}

fn refusal(status: Status, outcome: OutcomeCode, kind: ErrorKind, message: String) -> Refusal {
    Refusal {
        status,
        outcome,
        error: ErrorBody::new(kind, outcome, message, false),
    }
}

impl Host {
    /// Runs one governed call through every gate, in order. Never fails: every refusal or
    /// failure is a result envelope with a status and an outcome code.
    pub async fn call(&self, call: ToolCallEnvelope) -> ToolResultEnvelope {
        let span = tracing::info_span!("tool_call", tool_call_id = %call.tool_call_id, tool = %call.capability_id);
        self.run_gates(call).instrument(span).await
    }

    async fn run_gates(&self, call: ToolCallEnvelope) -> ToolResultEnvelope {
        let now_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut result = ToolResultEnvelope {
            envelope_version: RESULT_ENVELOPE_VERSION,
            tool_call_id: call.tool_call_id.clone(),
            trace_id: call.trace_id.clone(),
            adapter: None,
            capability_id: call.capability_id.clone(),
            resolved_from: None,
            approval_mode_effective: None,
            status: Status::Ok,
            outcome: OutcomeCode::Ok,
            content: Vec::new(),
            structured_content: None,
            evidence_refs: Vec::new(),
            error: None,
            policy_decision: None,
            egress: Vec::new(),
            usage: None,
        };
        let pipeline = self.pipeline();

        // 2. Normalize.
        let target =
            match pipeline
                .registry
                .resolve(&call.tenant_id, &call.capability_id, &call.args)
            {
                Ok(target) => target,
                Err(e) => return refuse(result, normalize_refusal(&e)),
            };
        result.capability_id.clone_from(&target.tool);
        result.resolved_from.clone_from(&target.via_meta_tool);
        result.adapter = Some(target.adapter.adapter.plugin.clone());

        // 3. Validate.
        if let Err(e) = validate::check(target.schemas(), &target.constraints, &target.args) {
            return refuse(result, validate_refusal(&e));
        }

        // 4. Host invariants.
        let mode = match invariants::check(
            &target.tool,
            target.capability(),
            call.approval_mode_requested,
            call.idempotency_key.as_deref(),
        ) {
            Ok(mode) => mode,
            Err(e) => return refuse(result, invariant_refusal(&e)),
        };
        result.approval_mode_effective = Some(mode);

        // 5. Policy.
        let action = action(&call, &target, mode, now_unix_ms);
        let set = pipeline.policies.snapshot();
        let decision =
            policy::evaluate(&set, self.sandbox(), self.limits(), &target.tool, action).await;
        drop(set);
        let mode = decision.approval_mode_effective;
        result.approval_mode_effective = Some(mode);
        let verdict = decision.verdict;
        let reasons: Vec<String> = decision
            .modules
            .iter()
            .flat_map(|m| {
                m.reasons
                    .iter()
                    .map(|r| format!("{}: {}", r.code, r.message))
            })
            .collect();
        let obligations = decision.obligations.clone();
        result.policy_decision = Some(decision);
        match verdict {
            Verdict::Allow => {}
            // The composition never yields abstain; treat it like deny (fail closed).
            Verdict::Deny | Verdict::Abstain => {
                let message = if reasons.is_empty() {
                    "no policy allowed this call and the operator default is deny".to_owned()
                } else {
                    format!("policy denied the call: {}", reasons.join("; "))
                };
                return refuse(
                    result,
                    refusal(
                        Status::Rejected,
                        OutcomeCode::PolicyBlocked,
                        ErrorKind::Policy,
                        message,
                    ),
                );
            }
            // 6. Approve (requested by policy).
            Verdict::RequireApproval => {
                return refuse(result, approval_refusal(&target.tool, &reasons.join("; ")));
            }
        }

        // 6. Approve (required by the capability's approval gate at network or above).
        if let Some(gate) = &target.capability().approval_gate
            && mode >= ApprovalMode::Network
        {
            return refuse(
                result,
                approval_refusal(&target.tool, &format!("approval gate {gate}")),
            );
        }

        // 7. Deduplicate: plugs in here with the state module.

        // 8. Invoke.
        let users: Vec<&str> = call
            .principal_chain
            .iter()
            .filter(|p| p.kind == PrincipalKind::User)
            .map(|p| p.id.as_str())
            .collect();
        let skills = pipeline
            .skills
            .resolve(&call.tenant_id, &target.tool, &users);
        let ctx = wit::CallContext {
            tool_call_id: call.tool_call_id.clone(),
            trace_id: call.trace_id.clone(),
            tenant: call.tenant_id.clone(),
            principals: call.principal_chain.iter().map(Into::into).collect(),
            approval_mode: mode.into(),
            idempotency_key: call.idempotency_key.clone(),
            skill_context: skills.text,
        };
        let egress = EgressGate::new(
            target.adapter.adapter.egress.clone(),
            CallInfo::new(mode, &call.trace_id, call.idempotency_key.clone()),
        );
        let report = self
            .sandbox()
            .run_adapter(
                &target.adapter.adapter.pre,
                self.limits(),
                egress,
                &ctx,
                &target.capability().id,
                &target.args.to_string(),
            )
            .await;
        for line in &report.logs {
            tracing::info!(target: "gatehouse::plugin", level = line.level, "{}", line.message);
        }
        result.egress = report.egress;
        result.usage = Some(Usage {
            fuel_consumed: report.fuel_consumed,
            duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
        });
        let output = match report.outcome {
            Ok(Ok(output)) => output,
            Ok(Err(tool_error)) => {
                result.status = Status::Failed;
                result.outcome = OutcomeCode::ToolError;
                result.error = Some(envelope::tool_error(tool_error));
                return result;
            }
            Err(failure) => {
                tracing::warn!(error = %failure, "tool call failed in the sandbox");
                let (outcome, error) = envelope::sandbox_failure(&failure);
                result.status = Status::Failed;
                result.outcome = outcome;
                result.error = Some(error);
                return result;
            }
        };

        // 9. Verify, then apply obligations.
        let structured = match verify::parse(output.structured.as_deref()).and_then(|s| {
            verify::check(target.capability(), target.schemas(), s.as_ref()).map(|()| s)
        }) {
            Ok(structured) => structured,
            Err(e) => return refuse(result, verify_refusal(&e)),
        };
        let mut content = envelope::content_blocks(output.content);
        let mut structured = structured;
        obligations::apply(&obligations, &mut content, &mut structured);
        result.content = content;
        result.structured_content = structured;
        result.evidence_refs = output.evidence_refs;
        // 10. Record: the audit log plugs in here with the state module.
        result
    }
}

fn action(call: &ToolCallEnvelope, target: &Target, mode: ApprovalMode, now: u64) -> wit::Action {
    let capability = target.capability();
    wit::Action {
        tool_call_id: call.tool_call_id.clone(),
        adapter_id: target.adapter.adapter.manifest.id.clone(),
        capability_id: capability.id.clone(),
        capability_class: capability.capability_class.into(),
        approval_mode_max: capability.approval_mode.into(),
        approval_mode_requested: mode.into(),
        args: target.args.to_string(),
        principals: call.principal_chain.iter().map(Into::into).collect(),
        tenant: call.tenant_id.clone(),
        context: wit::ActionContext {
            now_unix_ms: now,
            prior_actions: Vec::new(),
            data_classification: Vec::new(),
        },
        risk_signals: Vec::new(),
    }
}

fn refuse(mut result: ToolResultEnvelope, refusal: Refusal) -> ToolResultEnvelope {
    tracing::info!(outcome = ?refusal.outcome, "call refused: {}", refusal.error.message);
    result.status = refusal.status;
    result.outcome = refusal.outcome;
    result.error = Some(refusal.error);
    result
}

fn approval_refusal(tool: &str, why: &str) -> Refusal {
    let mut r = refusal(
        Status::Paused,
        OutcomeCode::ApprovalRequired,
        ErrorKind::Policy,
        format!("`{tool}` needs approval before it runs ({why})"),
    );
    r.error.retryable = true;
    r.error.remediation = Some("wait for an approver to approve the call, then retry".to_owned());
    r
}

fn normalize_refusal(e: &NormalizeError) -> Refusal {
    match e {
        NormalizeError::Unknown { .. } => {
            let mut r = refusal(
                Status::Rejected,
                OutcomeCode::UnknownCapability,
                ErrorKind::Validation,
                e.to_string(),
            );
            r.error.remediation = Some("call one of the tools listed by tools/list".to_owned());
            r
        }
        NormalizeError::MetaTarget { .. } | NormalizeError::MetaArgs { .. } => refusal(
            Status::Rejected,
            OutcomeCode::InvalidArguments,
            ErrorKind::Validation,
            e.to_string(),
        ),
        NormalizeError::Grant { .. } => refusal(
            Status::Failed,
            OutcomeCode::InternalError,
            ErrorKind::Internal,
            e.to_string(),
        ),
    }
}

fn validate_refusal(e: &ValidateError) -> Refusal {
    match e {
        ValidateError::Schema { .. } | ValidateError::Constraint { .. } => {
            let mut r = refusal(
                Status::Rejected,
                OutcomeCode::InvalidArguments,
                ErrorKind::Validation,
                e.to_string(),
            );
            r.error.remediation = Some(
                "fix the named argument and call again; see the tool's input schema".to_owned(),
            );
            r
        }
        ValidateError::BadSchema { .. } | ValidateError::BadPattern { .. } => refusal(
            Status::Failed,
            OutcomeCode::InternalError,
            ErrorKind::Internal,
            e.to_string(),
        ),
    }
}

fn invariant_refusal(e: &InvariantError) -> Refusal {
    match e {
        InvariantError::ModeAboveMaximum { .. } => refusal(
            Status::Rejected,
            OutcomeCode::PolicyBlocked,
            ErrorKind::Policy,
            e.to_string(),
        ),
        InvariantError::IdempotencyKeyRequired { .. } => {
            let mut r = refusal(
                Status::Rejected,
                OutcomeCode::IdempotencyKeyRequired,
                ErrorKind::Validation,
                e.to_string(),
            );
            r.error.remediation = Some(
                "send a unique idempotency_key with the call and reuse it on retries".to_owned(),
            );
            r
        }
        InvariantError::RollbackRequired { .. } => {
            let mut r = refusal(
                Status::Rejected,
                OutcomeCode::RollbackRequired,
                ErrorKind::Policy,
                e.to_string(),
            );
            r.error.remediation = Some(
                "ask the adapter's publisher to declare an approval_gate or a rollback capability"
                    .to_owned(),
            );
            r
        }
    }
}

fn verify_refusal(e: &VerifyError) -> Refusal {
    match e {
        VerifyError::NotJson(_) | VerifyError::Schema { .. } => refusal(
            Status::Failed,
            OutcomeCode::VerificationFailed,
            ErrorKind::Internal,
            e.to_string(),
        ),
        VerifyError::EvidenceMissing { .. } => refusal(
            Status::Failed,
            OutcomeCode::EvidenceMissing,
            ErrorKind::Internal,
            e.to_string(),
        ),
    }
}
