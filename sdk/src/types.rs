//! Types shared by both worlds: approval modes, capability classes, principals.

use serde::{Deserialize, Serialize};

use crate::wit;

/// Risk tier of a call, lowest first.
///
/// The order is meaningful: `ReadOnly < LocalWrite < Network < Delegated < Destructive`, so
/// `mode <= ApprovalMode::ReadOnly` asks "is this call read-only?". The default is the lowest
/// tier, [`ApprovalMode::ReadOnly`]. Serialized in `snake_case` (`"read_only"`), the spelling
/// manifests and operator configs use.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// No side effects.
    #[default]
    ReadOnly,
    /// Side effects confined to local, tenant-scoped state.
    LocalWrite,
    /// Side effects over the network.
    Network,
    /// Acts on behalf of a principal in another system.
    Delegated,
    /// Irreversible side effects.
    Destructive,
}

impl ApprovalMode {
    /// The manifest spelling, e.g. `"local_write"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::ReadOnly => "read_only",
            ApprovalMode::LocalWrite => "local_write",
            ApprovalMode::Network => "network",
            ApprovalMode::Delegated => "delegated",
            ApprovalMode::Destructive => "destructive",
        }
    }
}

impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of operation a capability performs. Serialized in `snake_case`.
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

impl CapabilityClass {
    /// The manifest spelling, e.g. `"think_support"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CapabilityClass::Observe => "observe",
            CapabilityClass::Recall => "recall",
            CapabilityClass::ThinkSupport => "think_support",
            CapabilityClass::Act => "act",
            CapabilityClass::Verify => "verify",
        }
    }
}

impl std::fmt::Display for CapabilityClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of party a [`Principal`] is. Serialized in `snake_case`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A person.
    User,
    /// An AI agent acting for a user.
    Agent,
    /// A non-interactive service account.
    Service,
}

/// One link of the principal chain (user -> agent -> service).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// What kind of party this is.
    pub kind: PrincipalKind,
    /// Its id, unique within the tenant.
    pub id: String,
    /// The tenant it belongs to.
    pub tenant: String,
}

impl Principal {
    /// A principal of `kind` with `id` in `tenant`.
    pub fn new(kind: PrincipalKind, id: impl Into<String>, tenant: impl Into<String>) -> Self {
        Principal {
            kind,
            id: id.into(),
            tenant: tenant.into(),
        }
    }
}

// Conversions to and from the generated types. Every `match` is exhaustive (no `_ =>`), so a
// new WIT case cannot compile until it is mapped here.

impl From<wit::ApprovalMode> for ApprovalMode {
    fn from(mode: wit::ApprovalMode) -> Self {
        match mode {
            wit::ApprovalMode::ReadOnly => ApprovalMode::ReadOnly,
            wit::ApprovalMode::LocalWrite => ApprovalMode::LocalWrite,
            wit::ApprovalMode::Network => ApprovalMode::Network,
            wit::ApprovalMode::Delegated => ApprovalMode::Delegated,
            wit::ApprovalMode::Destructive => ApprovalMode::Destructive,
        }
    }
}

impl From<ApprovalMode> for wit::ApprovalMode {
    fn from(mode: ApprovalMode) -> Self {
        match mode {
            ApprovalMode::ReadOnly => wit::ApprovalMode::ReadOnly,
            ApprovalMode::LocalWrite => wit::ApprovalMode::LocalWrite,
            ApprovalMode::Network => wit::ApprovalMode::Network,
            ApprovalMode::Delegated => wit::ApprovalMode::Delegated,
            ApprovalMode::Destructive => wit::ApprovalMode::Destructive,
        }
    }
}

impl From<wit::CapabilityClass> for CapabilityClass {
    fn from(class: wit::CapabilityClass) -> Self {
        match class {
            wit::CapabilityClass::Observe => CapabilityClass::Observe,
            wit::CapabilityClass::Recall => CapabilityClass::Recall,
            wit::CapabilityClass::ThinkSupport => CapabilityClass::ThinkSupport,
            wit::CapabilityClass::Act => CapabilityClass::Act,
            wit::CapabilityClass::Verify => CapabilityClass::Verify,
        }
    }
}

impl From<CapabilityClass> for wit::CapabilityClass {
    fn from(class: CapabilityClass) -> Self {
        match class {
            CapabilityClass::Observe => wit::CapabilityClass::Observe,
            CapabilityClass::Recall => wit::CapabilityClass::Recall,
            CapabilityClass::ThinkSupport => wit::CapabilityClass::ThinkSupport,
            CapabilityClass::Act => wit::CapabilityClass::Act,
            CapabilityClass::Verify => wit::CapabilityClass::Verify,
        }
    }
}

impl From<wit::PrincipalKind> for PrincipalKind {
    fn from(kind: wit::PrincipalKind) -> Self {
        match kind {
            wit::PrincipalKind::User => PrincipalKind::User,
            wit::PrincipalKind::Agent => PrincipalKind::Agent,
            wit::PrincipalKind::Service => PrincipalKind::Service,
        }
    }
}

impl From<PrincipalKind> for wit::PrincipalKind {
    fn from(kind: PrincipalKind) -> Self {
        match kind {
            PrincipalKind::User => wit::PrincipalKind::User,
            PrincipalKind::Agent => wit::PrincipalKind::Agent,
            PrincipalKind::Service => wit::PrincipalKind::Service,
        }
    }
}

impl From<wit::Principal> for Principal {
    fn from(p: wit::Principal) -> Self {
        let wit::Principal { kind, id, tenant } = p;
        Principal {
            kind: kind.into(),
            id,
            tenant,
        }
    }
}

impl From<Principal> for wit::Principal {
    fn from(p: Principal) -> Self {
        let Principal { kind, id, tenant } = p;
        wit::Principal {
            kind: kind.into(),
            id,
            tenant,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_modes_are_ordered_by_risk() {
        use ApprovalMode::{Delegated, Destructive, LocalWrite, Network, ReadOnly};
        let ordered = [ReadOnly, LocalWrite, Network, Delegated, Destructive];
        for pair in ordered.windows(2) {
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(ordered.iter().max(), Some(&Destructive));
        assert_eq!(ApprovalMode::default(), ReadOnly);
    }

    #[test]
    fn approval_mode_round_trips_through_wit_and_serde() {
        for mode in [
            ApprovalMode::ReadOnly,
            ApprovalMode::LocalWrite,
            ApprovalMode::Network,
            ApprovalMode::Delegated,
            ApprovalMode::Destructive,
        ] {
            assert_eq!(ApprovalMode::from(wit::ApprovalMode::from(mode)), mode);
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
            assert_eq!(serde_json::from_str::<ApprovalMode>(&json).unwrap(), mode);
        }
    }

    #[test]
    fn capability_class_uses_manifest_spelling() {
        assert_eq!(
            serde_json::to_string(&CapabilityClass::ThinkSupport).unwrap(),
            "\"think_support\""
        );
        assert_eq!(CapabilityClass::Verify.to_string(), "verify");
    }
}
