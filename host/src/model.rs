//! The shared vocabulary of the specs: capability classes, approval modes, principals.
//!
//! These are the host's own types (serde, snake_case as in spec 000); the WIT bindings have
//! twins of them, and the conversions between the two live here so every other module speaks
//! one language.

use serde::{Deserialize, Serialize};

use crate::bindings::types as wit;

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
