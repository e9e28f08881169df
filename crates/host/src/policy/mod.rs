//! Policy modules: bindings, the chain, composition, and hot swap.
//!
//! Phases and how often they run:
//! 1. **bind** (once per config): each `[[pipeline.policy]]` binding names a module id, the
//!    tenants and tool globs it applies to, its order and its JSON config;
//! 2. **install** (once per module version, [`PolicyStore::install`]): the config of every
//!    binding naming the module is checked against the module's `config_schema`; only then is
//!    the serving set replaced, atomically. A module that fails verification, loading or the
//!    config check never replaces the serving one;
//! 3. **evaluate** (per call, [`evaluate`]): the call takes one snapshot of the serving set, so
//!    a call in flight finishes on the versions it started with; the bound modules run in
//!    order, each in a fresh sandboxed instance; a trap, fuel or deadline failure denies (fail
//!    closed). Deny overrides require-approval overrides allow; all-abstain falls to the
//!    operator default. A module may lower the effective approval mode, never raise it.
//!
//! A binding with `mode = "shadow"` runs after the enforcing chain, on the call as that chain
//! left it, and decides nothing: its answer is recorded as a [`ShadowDecision`] with the
//! verdict it would have composed to ([`PolicyStore::promote`] makes it enforcing).
//!
//! Every [`ModuleDecision`] names the module id, version and digest that made it. Swaps go
//! through the library API ([`crate::Host::install_policy`], `rollback_policy`,
//! `set_policy_config`) or a watched directory ([`crate::watch`]).

pub mod config;
pub mod flows;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::Value;
use tracing::Instrument;

use crate::bindings::types as wit;
use crate::plugin::{LoadedPolicy, PluginRef};
use crate::sandbox::Sandbox;
pub use config::{BindingMode, PolicyBinding, PolicyDefault};
use gatehouse_core::model::{
    ApprovalMode, DecisionRecord, ModuleDecision, Obligation, POLICY_FAILED, POLICY_MODULE_MISSING,
    Reason, ShadowDecision, Verdict,
};

/// Why a policy change was refused. The serving set is unchanged whenever one is returned.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A binding's config does not satisfy the module's config schema.
    #[error(
        "the config of [[pipeline.policy]] binding #{} for `{module}` does not match the module's config_schema: {message}; fix the binding's `config`",
        .binding + 1
    )]
    Config {
        /// Module id.
        module: String,
        /// Index of the binding in `[[pipeline.policy]]` (0-based; the message counts from 1).
        binding: usize,
        /// What the schema says is wrong.
        message: String,
    },
    /// The module's config schema is not a valid JSON Schema.
    #[error(
        "the config_schema of `{module}` is not a valid JSON Schema: {message}; ask its publisher for a fixed build"
    )]
    Schema {
        /// Module id.
        module: String,
        /// The compiler's message.
        message: String,
    },
    /// Rollback asked for a module with no previous version.
    #[error("`{module}` has no previous version to roll back to")]
    NoPrevious {
        /// Module id.
        module: String,
    },
    /// The module is not bound by any `[[pipeline.policy]]`.
    #[error("`{module}` is not bound by any [[pipeline.policy]]; bind it in the config first")]
    Unbound {
        /// Module id.
        module: String,
    },
    /// Promotion asked for a module with no binding in shadow mode.
    #[error(
        "no [[pipeline.policy]] binding of `{module}` is in shadow mode; there is nothing to promote"
    )]
    NotShadow {
        /// Module id.
        module: String,
    },
}

/// One binding, with its position in the config and its config as the JSON text a module
/// receives.
#[derive(Debug, Clone)]
struct Binding {
    index: usize,
    spec: PolicyBinding,
    config_json: String,
}

impl Binding {
    fn new(index: usize, spec: PolicyBinding) -> Self {
        let config_json = spec.config.to_string();
        Self {
            index,
            spec,
            config_json,
        }
    }

    fn applies(&self, tenant: &str, tool: &str) -> bool {
        self.spec.tenants.matches(tenant) && self.spec.tools.iter().any(|g| g.is_match(tool))
    }
}

/// The serving set: installed modules and the bindings, as one immutable snapshot.
#[derive(Debug)]
pub struct PolicySet {
    modules: BTreeMap<String, Arc<LoadedPolicy>>,
    bindings: Arc<Vec<Binding>>,
    default: PolicyDefault,
}

impl PolicySet {
    /// Whether any binding applies to a call of `tool` by `tenant` (else the policy gate
    /// decides by the operator default alone).
    pub fn applies(&self, tenant: &str, tool: &str) -> bool {
        self.bindings.iter().any(|b| b.applies(tenant, tool))
    }

    /// The installed version of `module`, if any.
    pub fn module(&self, module: &str) -> Option<&PluginRef> {
        self.modules.get(module).map(|m| m.plugin())
    }

    /// Every installed module, by id.
    pub fn modules(&self) -> impl Iterator<Item = &PluginRef> {
        self.modules.values().map(|m| m.plugin())
    }

    /// How many bindings of `module` are in shadow mode.
    pub fn shadow_bindings(&self, module: &str) -> usize {
        self.bindings
            .iter()
            .filter(|b| b.spec.module == module && b.spec.mode == BindingMode::Shadow)
            .count()
    }

    /// The config of every binding of `module`, in binding order.
    pub fn configs(&self, module: &str) -> Vec<&Value> {
        self.bindings
            .iter()
            .filter(|b| b.spec.module == module)
            .map(|b| &b.spec.config)
            .collect()
    }
}

/// Installed policy modules with atomic swap and rollback.
#[derive(Debug)]
pub struct PolicyStore {
    serving: RwLock<Arc<PolicySet>>,
    previous: Mutex<BTreeMap<String, Vec<Arc<LoadedPolicy>>>>,
}

impl PolicyStore {
    /// The bindings, ordered; no module is installed yet.
    pub fn new(bindings: &[PolicyBinding], default: PolicyDefault) -> Self {
        let mut compiled: Vec<Binding> = bindings
            .iter()
            .enumerate()
            .map(|(index, b)| Binding::new(index, b.clone()))
            .collect();
        // Stable sort: ties keep file order.
        compiled.sort_by_key(|b| b.spec.order);
        Self {
            serving: RwLock::new(Arc::new(PolicySet {
                modules: BTreeMap::new(),
                bindings: Arc::new(compiled),
                default,
            })),
            previous: Mutex::new(BTreeMap::new()),
        }
    }

    /// The serving set. A call holds this one snapshot for its whole policy gate.
    pub fn snapshot(&self) -> Arc<PolicySet> {
        Arc::clone(&self.serving.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Installs `module`, replacing the serving version of the same id atomically, after
    /// checking every binding's config against its config schema. The replaced version is
    /// kept for [`PolicyStore::rollback`].
    pub fn install(&self, module: LoadedPolicy) -> Result<PluginRef, PolicyError> {
        self.swap_in(Arc::new(module), true)
    }

    /// The versions [`PolicyStore::rollback`] can put back for `module`, the next one last.
    pub fn previous(&self, module: &str) -> Vec<PluginRef> {
        self.previous
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(module)
            .map(|versions| versions.iter().map(|m| m.plugin().clone()).collect())
            .unwrap_or_default()
    }

    /// Puts back the version that the last install of `module` replaced.
    pub fn rollback(&self, module: &str) -> Result<PluginRef, PolicyError> {
        let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(old) = previous.get_mut(module).and_then(Vec::pop) else {
            return Err(PolicyError::NoPrevious {
                module: module.to_owned(),
            });
        };
        drop(previous);
        self.swap_in(old, false)
    }

    /// Replaces the config of every binding of `module`, after checking it against the
    /// serving module's config schema (if one is installed). Atomic like an install.
    pub fn set_config(&self, module: &str, config: &Value) -> Result<(), PolicyError> {
        let mut serving = self.serving.write().unwrap_or_else(PoisonError::into_inner);
        if !serving.bindings.iter().any(|b| b.spec.module == module) {
            return Err(PolicyError::Unbound {
                module: module.to_owned(),
            });
        }
        let bindings: Vec<Binding> = serving
            .bindings
            .iter()
            .map(|b| {
                if b.spec.module != module {
                    return b.clone();
                }
                let mut spec = b.spec.clone();
                spec.config = config.clone();
                Binding::new(b.index, spec)
            })
            .collect();
        if let Some(installed) = serving.modules.get(module) {
            check_configs(installed, &bindings)?;
        }
        *serving = Arc::new(PolicySet {
            modules: serving.modules.clone(),
            bindings: Arc::new(bindings),
            default: serving.default,
        });
        Ok(())
    }

    /// Promotes every shadow binding of `module` to enforcing, atomically. Returns how many
    /// bindings it promoted.
    pub fn promote(&self, module: &str) -> Result<usize, PolicyError> {
        let mut serving = self.serving.write().unwrap_or_else(PoisonError::into_inner);
        if !serving.bindings.iter().any(|b| b.spec.module == module) {
            return Err(PolicyError::Unbound {
                module: module.to_owned(),
            });
        }
        let mut promoted = 0;
        let bindings: Vec<Binding> = serving
            .bindings
            .iter()
            .map(|b| {
                let mut b = b.clone();
                if b.spec.module == module && b.spec.mode == BindingMode::Shadow {
                    b.spec.mode = BindingMode::Enforce;
                    promoted += 1;
                }
                b
            })
            .collect();
        if promoted == 0 {
            return Err(PolicyError::NotShadow {
                module: module.to_owned(),
            });
        }
        *serving = Arc::new(PolicySet {
            modules: serving.modules.clone(),
            bindings: Arc::new(bindings),
            default: serving.default,
        });
        Ok(promoted)
    }

    fn swap_in(&self, module: Arc<LoadedPolicy>, keep_old: bool) -> Result<PluginRef, PolicyError> {
        let mut serving = self.serving.write().unwrap_or_else(PoisonError::into_inner);
        check_configs(&module, &serving.bindings)?;
        let id = module.manifest().id.clone();
        let plugin = module.plugin().clone();
        let mut modules = serving.modules.clone();
        let old = modules.insert(id.clone(), module);
        *serving = Arc::new(PolicySet {
            modules,
            bindings: Arc::clone(&serving.bindings),
            default: serving.default,
        });
        drop(serving);
        if keep_old && let Some(old) = old {
            self.previous
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(id)
                .or_default()
                .push(old);
        }
        Ok(plugin)
    }
}

fn check_configs(module: &LoadedPolicy, bindings: &[Binding]) -> Result<(), PolicyError> {
    let id = &module.manifest().id;
    let validator =
        jsonschema::draft202012::new(&module.manifest().config_schema).map_err(|e| {
            PolicyError::Schema {
                module: id.clone(),
                message: e.to_string(),
            }
        })?;
    for binding in bindings.iter().filter(|b| &b.spec.module == id) {
        if let Err(e) = validator.validate(&binding.spec.config) {
            return Err(PolicyError::Config {
                module: id.clone(),
                binding: binding.index,
                message: format!("at `{}`: {e}", key_path(&e)),
            });
        }
    }
    Ok(())
}

/// Where in a binding's config a schema error is, as the operator writes it in TOML:
/// `config`, `config.limits.max`, `config.tools[2]`; an unknown key is named itself
/// (`config.tresholds`), not the table that holds it.
fn key_path(error: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::paths::LocationSegment;
    let mut path = "config".to_owned();
    for segment in error.instance_path().segments() {
        match segment {
            LocationSegment::Property(key) => {
                path.push('.');
                path.push_str(&key);
            }
            LocationSegment::Index(index) => path.push_str(&format!("[{index}]")),
        }
    }
    if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
        error.kind()
        && let [key] = unexpected.as_slice()
    {
        path.push('.');
        path.push_str(key);
    }
    path
}

/// Runs the policy chain for `action` on `set` and composes the answers.
///
/// `action.approval_mode_requested` is the risk mode the call enters the gate with (the
/// declared maximum, never the caller's request); each module sees the mode as lowered by the
/// modules before it.
pub async fn evaluate(
    set: &PolicySet,
    sandbox: &Sandbox,
    tool: &str,
    mut action: wit::Action,
    facts: &flows::Facts,
) -> DecisionRecord {
    let mut mode = ApprovalMode::from(action.approval_mode_requested);
    let mut modules = Vec::new();
    let mut obligations = Vec::new();
    let (mut denied, mut approval, mut allowed) = (false, false, false);
    let applies = |b: &&Binding| b.applies(&action.tenant, tool);
    for binding in set
        .bindings
        .iter()
        .filter(applies)
        .filter(|b| b.spec.mode == BindingMode::Enforce)
    {
        action.approval_mode_requested = mode.into();
        let decision = bound(set, binding, sandbox, &action, facts, &mut mode).await;
        match decision.0.verdict {
            Verdict::Deny => denied = true,
            Verdict::RequireApproval => approval = true,
            Verdict::Allow => allowed = true,
            Verdict::Abstain => {}
        }
        obligations.extend(decision.1);
        modules.push(decision.0);
        if denied {
            // Deny overrides everything after it: stop here.
            break;
        }
    }
    let default_applied = !denied && !approval && !allowed;
    let compose = |denied: bool, approval: bool, allowed: bool| {
        if denied {
            Verdict::Deny
        } else if approval {
            Verdict::RequireApproval
        } else if allowed {
            Verdict::Allow
        } else {
            match set.default {
                PolicyDefault::Deny => Verdict::Deny,
                PolicyDefault::Allow => Verdict::Allow,
            }
        }
    };
    let verdict = compose(denied, approval, allowed);
    // Shadow bindings: each evaluated as the enforcing chain left the call, recorded with the
    // verdict it would have composed to; nothing of the call changes.
    let mut shadow = Vec::new();
    action.approval_mode_requested = mode.into();
    for binding in set
        .bindings
        .iter()
        .filter(applies)
        .filter(|b| b.spec.mode == BindingMode::Shadow)
    {
        let mut unchanged = mode;
        let (decision, _) = bound(set, binding, sandbox, &action, facts, &mut unchanged).await;
        let would_be = compose(
            denied || decision.verdict == Verdict::Deny,
            approval || decision.verdict == Verdict::RequireApproval,
            allowed || decision.verdict == Verdict::Allow,
        );
        shadow.push(ShadowDecision {
            decision,
            would_be,
            changes: would_be != verdict,
        });
    }
    DecisionRecord {
        decision_id: gatehouse_core::ids::decision_id(),
        verdict,
        approval_mode_effective: mode,
        default_applied,
        modules,
        obligations,
        shadow,
        masked: Vec::new(),
    }
}

/// `binding`'s module on `action` (a missing module denies), in a span that names it and
/// whether the binding is in shadow mode. `gatehouse.flows` is the host's own ([`flows`]).
async fn bound(
    set: &PolicySet,
    binding: &Binding,
    sandbox: &Sandbox,
    action: &wit::Action,
    facts: &flows::Facts,
    mode: &mut ApprovalMode,
) -> (ModuleDecision, Vec<Obligation>) {
    if binding.spec.module == flows::ID {
        let tool = format!("{}.{}", action.adapter_id, action.capability_id);
        return (
            flows::decide(&binding.spec.config, facts, &tool),
            Vec::new(),
        );
    }
    match set.modules.get(&binding.spec.module) {
        None => missing(&binding.spec.module),
        Some(module) => {
            let shadow = binding.spec.mode == BindingMode::Shadow;
            run_one(module, sandbox, action, &binding.config_json, mode)
                .instrument(tracing::info_span!("policy", module = %module.plugin().id, shadow))
                .await
        }
    }
}

fn missing(module: &str) -> (ModuleDecision, Vec<Obligation>) {
    let decision = ModuleDecision {
        module: None,
        module_id: module.to_owned(),
        verdict: Verdict::Deny,
        effective_mode: None,
        mode_raise_ignored: false,
        reasons: vec![Reason {
            code: POLICY_MODULE_MISSING.to_owned(),
            message: format!(
                "policy module `{module}` is bound but not installed; install it or remove the binding"
            ),
        }],
        evidence_refs: Vec::new(),
        fuel_consumed: 0,
    };
    (decision, Vec::new())
}

async fn run_one(
    module: &LoadedPolicy,
    sandbox: &Sandbox,
    action: &wit::Action,
    config: &str,
    mode: &mut ApprovalMode,
) -> (ModuleDecision, Vec<Obligation>) {
    let report = sandbox
        .run_policy(module.pre(), module.limits(), action, config)
        .await;
    let mut record = ModuleDecision {
        module: Some(module.plugin().clone()),
        module_id: module.manifest().id.clone(),
        verdict: Verdict::Deny,
        effective_mode: None,
        mode_raise_ignored: false,
        reasons: Vec::new(),
        evidence_refs: Vec::new(),
        fuel_consumed: report.fuel_consumed,
    };
    let decision = match report.outcome {
        Ok(decision) => decision,
        Err(failure) => {
            tracing::warn!(module = %module.plugin().id, error = %failure, "policy failed; denying");
            record.reasons.push(Reason {
                code: POLICY_FAILED.to_owned(),
                message: format!("policy module `{}` {failure}", module.plugin().id),
            });
            return (record, Vec::new());
        }
    };
    record.verdict = decision.verdict.into();
    if let Some(asked) = decision.effective_mode.map(ApprovalMode::from) {
        record.effective_mode = Some(asked);
        if asked <= *mode {
            *mode = asked;
        } else {
            record.mode_raise_ignored = true;
        }
    }
    record.reasons = decision.reasons.into_iter().map(Reason::from).collect();
    record.evidence_refs = decision.evidence_refs;
    let obligations: Vec<Obligation> = decision
        .obligations
        .into_iter()
        .map(Obligation::from)
        .collect();
    // An obligation the host cannot carry out is an error in the module: fail closed.
    if let Some(problem) = obligations.iter().find_map(Obligation::problem) {
        tracing::warn!(module = %module.plugin().id, %problem, "policy returned an invalid obligation; denying");
        record.verdict = Verdict::Deny;
        record.reasons = vec![Reason {
            code: POLICY_FAILED.to_owned(),
            message: format!(
                "policy module `{}` returned an invalid obligation: {problem}",
                module.plugin().id
            ),
        }];
        return (record, Vec::new());
    }
    (record, obligations)
}
