//! The operator's `[pipeline]` config: which tools each tenant sees, argument constraints,
//! meta-tools, policy bindings and the policy default.
//!
//! Every default denies: with no `[[pipeline.tool]]` grant no tenant sees any tool, and when
//! every bound policy abstains (or none is bound) the call is denied unless
//! `policy_default = "allow"`.
//!
//! ```toml
//! [pipeline]
//! policy_default = "deny"
//!
//! [[pipeline.tool]]                  # who sees which tools
//! tools = "acme.payments.*"          # glob over `<adapter id>.<capability id>`
//! tenants = ["acme"]
//! arg_constraints = { amount = { min = 1, max = 50000 }, currency = { enum = ["EUR"] } }
//!
//! [[pipeline.meta_tool]]             # a wrapper tool whose real target is in its arguments
//! name = "mcp_tool"
//! target_arg = "tool"
//! args_arg = "arguments"
//!
//! [[pipeline.policy]]                # a policy module bound to tenants and tools
//! module = "gatehouse.baseline"
//! tenants = ["*"]
//! tools = ["*"]
//! order = 10
//! config = { approval_threshold = 1000 }
//!
//! [[pipeline.rate_limit]]            # calls per window for a tenant (see `rate`)
//! tenants = ["acme"]
//! calls = 600
//! per_seconds = 60
//! ```

use std::collections::BTreeMap;

use gatehouse_core::model::{Glob, Tenants};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use crate::policy::{PolicyBinding, PolicyDefault};

/// The `[pipeline]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// What a call gets when every bound policy abstains or none is bound. Default: `deny`.
    #[serde(default)]
    pub policy_default: PolicyDefault,
    /// Tool grants: which tenants see which tools, and argument constraints. Default: none, so
    /// no tool is visible to anyone.
    #[serde(default, rename = "tool")]
    pub tools: Vec<ToolGrant>,
    /// Wrapper tools resolved to their real target before any policy runs. Default: none.
    #[serde(default, rename = "meta_tool")]
    pub meta_tools: Vec<MetaTool>,
    /// Policy modules bound to tenants and tools. Default: none.
    #[serde(default, rename = "policy")]
    pub policies: Vec<PolicyBinding>,
    /// Skills: operator-declared context text for adapters. Default: none.
    #[serde(default, rename = "skill")]
    pub skills: Vec<crate::skills::Skill>,
    /// Skill resolution limits. Default: see [`crate::skills::SkillLimits`].
    #[serde(default)]
    pub skill_limits: crate::skills::SkillLimits,
    /// Rate budgets per tenant (and tool), checked at gate 4. Default: none.
    #[serde(default, rename = "rate_limit")]
    pub rate_limits: Vec<crate::pipeline::rate::RateLimit>,
}

/// One `[[pipeline.tool]]` grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolGrant {
    /// Glob over tool names `<adapter id>.<capability id>`, e.g. `acme.orders.*`.
    pub tools: Glob,
    /// Tenants that see and may call these tools; `*` matches every tenant. Required.
    pub tenants: Tenants,
    /// Constraints on arguments, checked after the input schema: a plain name is a top-level
    /// argument, a JSON pointer (`/payment/amount`) a nested one. Default: none.
    #[serde(default)]
    pub arg_constraints: BTreeMap<String, ArgConstraint>,
}

/// An operator constraint on one argument (spec 000 `arg_constraints`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgConstraint {
    /// Smallest allowed number (integers compare exactly, beyond 2^53 too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Number>,
    /// Largest allowed number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Number>,
    /// The only allowed values.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<Value>>,
    /// Regular expression the whole string must match (anchored: `[a-z]+` refuses `ab1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Whether the argument must be present. Default: false.
    #[serde(default)]
    pub required: bool,
}

/// One `[[pipeline.meta_tool]]`: a wrapper tool whose real target is in its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaTool {
    /// The wrapper's tool name, e.g. `mcp_tool`.
    pub name: String,
    /// Argument holding the real tool name. Default: `tool`.
    #[serde(default = "default_target_arg")]
    pub target_arg: String,
    /// Argument holding the real arguments (an object). Default: `arguments`.
    #[serde(default = "default_args_arg")]
    pub args_arg: String,
}

fn default_target_arg() -> String {
    "tool".to_owned()
}

fn default_args_arg() -> String {
    "arguments".to_owned()
}
