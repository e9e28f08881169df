//! The operator's policy config: bindings (which module applies to which tenants and tools,
//! in which order, with which config) and the verdict when no policy has an opinion.
//!
//! ```toml
//! [pipeline]
//! policy_default = "deny"
//!
//! [[pipeline.policy]]
//! module = "gatehouse.baseline"
//! tenants = ["*"]
//! tools = ["*"]
//! order = 10
//! config = { approval_thresholds = { amount = 1000 } }
//! ```

use gatehouse_core::model::{Glob, Tenants};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The verdict when no policy has an opinion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDefault {
    /// Deny (the default: fail closed).
    #[default]
    Deny,
    /// Allow. Choose this only when the bound policies are written as deny lists.
    Allow,
}

/// One `[[pipeline.policy]]` binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBinding {
    /// The policy module's id, e.g. `gatehouse.baseline`.
    pub module: String,
    /// Tenants it applies to (`*` = all). Default: `["*"]`: a binding restricts, so the wide
    /// default is the safe one.
    #[serde(default = "Tenants::all")]
    pub tenants: Tenants,
    /// Tool-name globs it applies to. Default: `["*"]`.
    #[serde(default = "any_tool")]
    pub tools: Vec<Glob>,
    /// Evaluation order, lowest first; ties keep file order. Default: 0.
    #[serde(default)]
    pub order: i32,
    /// The module's JSON config, checked against its `config_schema`. Default: `{}`.
    #[serde(default = "gatehouse_core::model::empty_object")]
    pub config: Value,
    /// `enforce` (the default), or `shadow`: the module runs on every call the binding
    /// covers and changes nothing; what it would have decided is recorded beside the real
    /// decision (`policy_decision.shadow` in the audit entry) and counted
    /// (`gatehouse_policy_shadow_decisions_total`). An operator promotes it to enforcing
    /// through the admin API, `gatehouse admin policy promote` or the console: an audited act.
    #[serde(default, skip_serializing_if = "BindingMode::is_enforce")]
    pub mode: BindingMode,
}

/// Whether a binding's verdicts count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingMode {
    /// Its verdicts decide (the default).
    #[default]
    Enforce,
    /// Its verdicts are recorded and counted, and decide nothing.
    Shadow,
}

impl BindingMode {
    fn is_enforce(&self) -> bool {
        *self == Self::Enforce
    }
}

fn any_tool() -> Vec<Glob> {
    vec![Glob::new("*").expect("`*` is a valid glob")]
}
