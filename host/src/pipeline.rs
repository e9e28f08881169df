//! The governed call: [`Pipeline::run`] runs every gate in order. It is the only place that
//! knows the order; each gate lives in its own module and is called from there.
//!
//! 1. identify — done by the caller (MCP server or embedding gateway) before the envelope
//!    exists; the envelope carries the resulting tenant and principal chain;
//! 2. **normalize** ([`normalize`]) — meta-tool resolution, registry lookup ([`registry`]); a
//!    tool the tenant may not see is reported exactly like a missing one
//!    (`UNKNOWN_CAPABILITY`);
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
//! 8. **invoke** ([`invoke`]) — skills resolved ([`crate::skills`]), the adapter run in a
//!    fresh sandbox;
//! 9. **verify** ([`verify`]) — output schema (`VERIFICATION_FAILED`), evidence keys
//!    (`EVIDENCE_MISSING`), then policy obligations ([`obligations`]);
//! 10. record — the result carries the decision record; the audit log (state module)
//!     plugs in here.
//!
//! Gates before 8 have no side effects: a refusal there is `rejected` (or `paused`). How each
//! refusal or failure ends the call is one table, [`outcome`].

pub mod config;
pub mod invariants;
pub mod invoke;
pub mod normalize;
pub mod obligations;
pub mod outcome;
pub mod registry;
pub mod validate;
pub mod verify;

use std::time::{SystemTime, UNIX_EPOCH};

use tracing::Instrument;

use crate::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use crate::model::{ApprovalMode, ContentBlock, Verdict};
use crate::pipeline::config::{MetaTool, PipelineConfig};
use crate::pipeline::outcome::Stop;
use crate::pipeline::registry::{InstalledAdapter, Registry, ToolGrantError};
use crate::pipeline::validate::ValidateError;
use crate::plugin::LoadedAdapter;
use crate::policy::{self, PolicyStore};
use crate::sandbox::Sandbox;
use crate::skills::Skills;

/// Why the pipeline could not be built from the config, or an adapter not installed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A tool grant is invalid.
    #[error(transparent)]
    ToolGrant(#[from] ToolGrantError),
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

/// The pipeline's state: the tools, the policies, the skills and the meta-tools.
#[derive(Debug)]
pub struct Pipeline {
    pub(crate) registry: Registry,
    pub(crate) policies: PolicyStore,
    pub(crate) skills: Skills,
    meta_tools: Vec<MetaTool>,
}

impl Pipeline {
    /// Builds the pipeline from the operator's `[pipeline]` config; no adapter is installed.
    pub fn new(config: &PipelineConfig) -> Result<Self, PipelineError> {
        Ok(Self {
            registry: Registry::new(&config.tools)?,
            policies: PolicyStore::new(&config.policies, config.policy_default),
            skills: Skills::new(&config.skills, config.skill_limits.clone())?,
            meta_tools: config.meta_tools.clone(),
        })
    }

    /// Compiles an adapter's schemas and serves it (replacing the same id atomically).
    pub fn install_adapter(&self, adapter: LoadedAdapter) -> Result<(), PipelineError> {
        let id = adapter.manifest().id.clone();
        let installed = InstalledAdapter::new(adapter).map_err(|source| PipelineError::Schema {
            adapter: id,
            source,
        })?;
        self.registry.install(installed);
        Ok(())
    }

    /// Runs one governed call through every gate, in order. Never fails: every refusal or
    /// failure is a result envelope with a status and an outcome code.
    pub async fn run(&self, sandbox: &Sandbox, call: ToolCallEnvelope) -> ToolResultEnvelope {
        let span = tracing::info_span!("tool_call", tool_call_id = %call.tool_call_id, tool = %call.capability_id);
        let now_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut result = ToolResultEnvelope::begin(&call);
        let gates = async {
            // 2. Normalize.
            let target = normalize::resolve(
                &self.registry,
                &self.meta_tools,
                &call.tenant_id,
                &call.capability_id,
                &call.args,
            )?;
            let (tool, capability) = (&target.tool, target.tool.capability());
            result.capability_id.clone_from(&tool.name);
            result.resolved_from.clone_from(&target.via_meta_tool);
            result.adapter = Some(tool.adapter().plugin().clone());

            // 3. Validate.
            validate::check(tool.schemas(), &tool.constraints, &target.args)?;

            // 4. Host invariants.
            let mode = invariants::check(
                &tool.name,
                capability,
                call.approval_mode_requested,
                call.idempotency_key.as_deref(),
            )?;
            result.approval_mode_effective = Some(mode);

            // 5. Policy.
            let action = target.action(&call, mode, now_unix_ms);
            let set = self.policies.snapshot();
            let decision = policy::evaluate(&set, sandbox, &tool.name, action).await;
            drop(set);
            let mode = decision.approval_mode_effective;
            result.approval_mode_effective = Some(mode);
            let reasons = decision.reasons();
            let (verdict, obligations) = (decision.verdict, decision.obligations.clone());
            result.policy_decision = Some(decision);
            match verdict {
                Verdict::Allow => {}
                // The composition never yields abstain; treat it like deny (fail closed).
                Verdict::Deny | Verdict::Abstain => return Err(Stop::PolicyDenied(reasons)),
                // 6. Approve (requested by policy).
                Verdict::RequireApproval => {
                    return Err(Stop::ApprovalRequired {
                        tool: tool.name.clone(),
                        why: reasons.join("; "),
                    });
                }
            }

            // 6. Approve (required by the capability's approval gate at network or above).
            if let Some(gate) = &capability.approval_gate
                && mode >= ApprovalMode::Network
            {
                return Err(Stop::ApprovalRequired {
                    tool: tool.name.clone(),
                    why: format!("approval gate {gate}"),
                });
            }

            // 7. Deduplicate: plugs in here with the state module.

            // 8. Invoke.
            let output =
                invoke::invoke(sandbox, &self.skills, &call, &target, mode, &mut result).await?;

            // 9. Verify, then apply obligations.
            let mut structured = verify::parse(output.structured.as_deref())?;
            verify::check(capability, tool.schemas(), structured.as_ref())?;
            let mut content: Vec<ContentBlock> =
                output.content.into_iter().map(ContentBlock::from).collect();
            obligations::apply(&obligations, &mut content, &mut structured);
            result.content = content;
            result.structured_content = structured;
            result.evidence_refs = output.evidence_refs;
            // 10. Record: the audit log plugs in here with the state module.
            Ok::<(), Stop>(())
        };
        if let Err(stop) = gates.instrument(span.clone()).await {
            span.in_scope(|| outcome::end(&mut result, &stop));
        }
        result
    }
}
