//! The shared vocabulary of the specs, used by every layer: capability classes, approval
//! modes and principals (this file), policy verdicts and obligations ([`decision`]), content
//! blocks and error bodies ([`content`]), tenant and tool selectors ([`select`]), data labels
//! ([`label`]), and what a call's records cite ([`record`]).
//!
//! These are gatehouse's own types (serde, snake_case as in spec 000). The WIT bindings have
//! twins of many of them; every conversion between the two lives in one module of
//! `gatehouse-host` (`bindings::convert`), so every other module speaks one language.

mod content;
mod decision;
pub mod label;
mod record;
mod select;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use content::{ContentBlock, ErrorBody, ErrorKind, ResourceContents};
pub use decision::{IdentifierPattern, Obligation, PiiKind, Reason, SecretKind, Verdict};
pub use record::{
    ActionRecord, AskOutcome, AskRecord, CallerRecord, DecisionRecord, EgressAttempt, Finding,
    ModuleDecision, POLICY_DEFAULT, POLICY_FAILED, POLICY_MODULE_MISSING, PluginRef, PriorAction,
    ShadowDecision, Told,
};
pub use select::{Glob, GlobError, Tenants};

/// What a governed call asks of an adapter: MCP's `tools/call`, `resources/read` or
/// `prompts/get`. A resource read and a prompt fill-in pass every gate a tool call passes, as
/// calls of read-only capabilities (`gatehouse_host::plugin::content`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Run a tool.
    #[default]
    CallTool,
    /// Read a resource: the arguments hold its `uri`.
    ReadResource,
    /// Fill in a prompt with its arguments.
    GetPrompt,
}

impl Operation {
    /// Whether it is the default, a tool call.
    pub fn is_call_tool(&self) -> bool {
        *self == Self::CallTool
    }
}

/// The kind of operation a capability performs (spec 000, "Capability classification").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapabilityClass {
    /// Inspect external state without mutation.
    Observe,
    /// Read from a governed memory or knowledge store.
    Recall,
    /// Computational helper producing structured output, no I/O.
    ThinkSupport,
    /// Produce an external side effect.
    Act,
    /// Validate a claim against external truth without mutation.
    Verify,
}

impl std::fmt::Display for CapabilityClass {
    /// The wire name, e.g. `think_support`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Observe => "observe",
            Self::Recall => "recall",
            Self::ThinkSupport => "think_support",
            Self::Act => "act",
            Self::Verify => "verify",
        })
    }
}

/// Risk tier of a call, lowest first (spec 000). Ordered: `ReadOnly < ... < Destructive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Lookups, search, retrieval.
    ReadOnly,
    /// Tenant-scoped notes, drafts, memory writes.
    LocalWrite,
    /// Outbound webhooks, third-party reads.
    Network,
    /// Acting on behalf of a user against an external system.
    Delegated,
    /// Irreversible side effects.
    Destructive,
}

impl std::fmt::Display for ApprovalMode {
    /// The wire name, e.g. `local_write`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ReadOnly => "read_only",
            Self::LocalWrite => "local_write",
            Self::Network => "network",
            Self::Delegated => "delegated",
            Self::Destructive => "destructive",
        })
    }
}

/// Who a principal in the chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A human user.
    User,
    /// An AI agent acting for a user.
    Agent,
    /// A service account.
    Service,
}

/// One link of the principal chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Principal {
    /// Who this is.
    pub kind: PrincipalKind,
    /// Identifier, e.g. `usr_771` or `agent:support@1.2.0`.
    pub id: String,
    /// Tenant the principal acts in.
    #[serde(rename = "tenant_id")]
    pub tenant: String,
}

/// What gate 1 admitted about the caller beyond its id: from a verified JWT, the claims the
/// operator names (`[mcp.jwt] roles_claim`, `groups_claim`); from an API key, the `roles` and
/// `groups` of its entry. Policies see them (the WIT `action.claims`); the caller never sets
/// them itself: they come from its credential only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// Roles, e.g. `refund-approver`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// Groups, e.g. `support-eu`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

impl Claims {
    /// No roles and no groups.
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.groups.is_empty()
    }
}

/// An empty JSON object, the default of argument and config fields.
pub fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}
