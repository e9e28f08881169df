//! Delegation: what a call's requests tell a peer the gateway calls on its behalf (an A2A
//! agent), so that when the peer calls back into the gateway for the same work, the gateway
//! knows on whose behalf, and holds the second call to the first one's mode.
//!
//! An egress grant with `delegate = true` (`gatehouse import a2a` writes one) sends, with
//! each request of a call, the header [`HEADER`]: a [`Delegation`] (the call's tenant,
//! principal chain, id and run mode, and an expiry: the call's egress time budget), sealed
//! with the gateway's key ([`Delegations`]: BLAKE3's keyed hash, under `[egress]
//! delegation_key_file`, the same file on every gateway of a deployment). The adapter never
//! sees it, and cannot send its own: the gate drops guest headers it is not granted, and this
//! one cannot be granted.
//!
//! A peer that calls back with it (over MCP or A2A, as whatever principal its own credential
//! admits) makes a delegated call: its principal chain is the delegating call's followed by
//! the peer's own, so policies and the audit log see the whole chain, and it may not run
//! above the delegating call's mode (gate 4, after the policy gate). A token that does not
//! verify (altered, forged, expired, sealed with another key) or that names another tenant
//! refuses the call: nothing runs.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_core::envelope::{DelegatedBy, ToolCallEnvelope};
use gatehouse_core::model::{ApprovalMode, Principal};
use serde::{Deserialize, Serialize};

/// The request header a delegation travels in.
pub const HEADER: &str = "gatehouse-delegation";
/// What the key hashes besides the token's body, so a key used elsewhere seals nothing here.
const DOMAIN: &[u8] = b"gatehouse-delegation/v1\n";

/// A call, as a peer it delegated work to presents it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delegation {
    /// The tenant the call runs for: a delegated call runs for it too.
    pub tenant: String,
    /// The call's principal chain, user first.
    pub chain: Vec<Principal>,
    /// The call's id.
    pub tool_call_id: String,
    /// The call's run mode: the most a delegated call may run at.
    pub approval_mode: ApprovalMode,
    /// When it stops being accepted (ms since the Unix epoch).
    pub expires_ms: u64,
}

impl Delegation {
    /// `call`, made on this delegation's behalf: its principal chain is the delegating
    /// call's, then its own; it records the delegating call and its mode, which gate 4 holds
    /// it to.
    pub fn delegate(self, mut call: ToolCallEnvelope) -> ToolCallEnvelope {
        let own = std::mem::take(&mut call.principal_chain);
        call.principal_chain = self.chain;
        call.principal_chain.extend(own);
        call.delegated_by = Some(DelegatedBy {
            tool_call_id: self.tool_call_id,
            approval_mode: self.approval_mode,
        });
        call
    }
}

/// Why a delegation is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelegationError {
    /// Altered, forged, not a token, or sealed by a gateway with another key.
    #[error(
        "the `{HEADER}` header does not verify: it was altered, or sealed by a gateway with \
         another key (every gateway of a deployment needs the same `[egress] \
         delegation_key_file`); nothing ran"
    )]
    Invalid,
    /// Past its expiry: the delegating call's time is over.
    #[error(
        "the `{HEADER}` header has expired with the call that gave it; call without it, as \
         yourself; nothing ran"
    )]
    Expired,
    /// For another tenant than the caller's.
    #[error(
        "the `{HEADER}` header delegates a call of tenant `{delegated}`, and the caller is of \
         tenant `{caller}`; nothing ran"
    )]
    OtherTenant {
        /// The delegation's tenant.
        delegated: String,
        /// The caller's.
        caller: String,
    },
}

/// The gateway's key for delegations.
#[derive(Clone)]
pub struct Delegations {
    key: [u8; 32],
}

impl std::fmt::Debug for Delegations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Delegations(<key>)")
    }
}

impl Delegations {
    /// With the key in `path` (made there if missing), or one made for this process alone.
    pub fn from_file(path: Option<&Path>) -> Result<Self, String> {
        let bytes = gatehouse_core::secret::key_file(path, "`[egress] delegation_key_file`")?;
        // The keyed hash takes 32 bytes: a longer key is hashed down to them.
        let key = *blake3::hash(&bytes).as_bytes();
        Ok(Self { key })
    }

    /// The token of `delegation`: its JSON and the keyed hash of it, each base64url.
    pub fn seal(&self, delegation: &Delegation) -> String {
        let body = B64.encode(serde_json::to_vec(delegation).expect("a delegation serializes"));
        let mac = self.mac(&body);
        format!("{body}.{}", B64.encode(mac.as_bytes()))
    }

    /// The delegation `token` seals, if it verifies, has not expired at `now_ms`, and is of
    /// `tenant`.
    pub fn open(
        &self,
        token: &str,
        tenant: &str,
        now_ms: u64,
    ) -> Result<Delegation, DelegationError> {
        let (body, mac) = token.split_once('.').ok_or(DelegationError::Invalid)?;
        let mac: [u8; 32] = (B64.decode(mac).ok())
            .and_then(|mac| mac.try_into().ok())
            .ok_or(DelegationError::Invalid)?;
        // `blake3::Hash`'s equality is constant-time.
        if self.mac(body) != blake3::Hash::from_bytes(mac) {
            return Err(DelegationError::Invalid);
        }
        let delegation: Delegation = (B64.decode(body).ok())
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or(DelegationError::Invalid)?;
        if delegation.expires_ms <= now_ms {
            return Err(DelegationError::Expired);
        }
        if delegation.tenant != tenant {
            return Err(DelegationError::OtherTenant {
                delegated: delegation.tenant,
                caller: tenant.to_owned(),
            });
        }
        Ok(delegation)
    }

    fn mac(&self, body: &str) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        hasher.update(DOMAIN);
        hasher.update(body.as_bytes());
        hasher.finalize()
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_core::model::PrincipalKind;

    use super::*;

    fn delegation() -> Delegation {
        Delegation {
            tenant: "acme".to_owned(),
            chain: vec![Principal {
                kind: PrincipalKind::Agent,
                id: "agent:bot".to_owned(),
                tenant: "acme".to_owned(),
            }],
            tool_call_id: "tc_1".to_owned(),
            approval_mode: ApprovalMode::ReadOnly,
            expires_ms: 2_000,
        }
    }

    #[test]
    fn a_sealed_delegation_opens_once_unaltered_in_time_and_for_its_tenant() {
        let keys = Delegations::from_file(None).unwrap();
        let token = keys.seal(&delegation());
        assert_eq!(keys.open(&token, "acme", 1_000), Ok(delegation()));
        assert_eq!(
            keys.open(&token, "acme", 2_000),
            Err(DelegationError::Expired)
        );
        assert!(matches!(
            keys.open(&token, "other", 1_000),
            Err(DelegationError::OtherTenant { .. })
        ));
        // Another gateway's key, an altered body, a body whose hash is cut: refused.
        let other = Delegations::from_file(None).unwrap();
        assert_eq!(
            other.open(&token, "acme", 1_000),
            Err(DelegationError::Invalid)
        );
        let mut raised = delegation();
        raised.approval_mode = ApprovalMode::Destructive;
        let (_, mac) = token.split_once('.').unwrap();
        let forged = format!("{}.{mac}", keys.seal(&raised).split_once('.').unwrap().0);
        assert_eq!(
            keys.open(&forged, "acme", 1_000),
            Err(DelegationError::Invalid)
        );
        for bad in ["", ".", "x.y", &token[..token.len() - 2]] {
            assert_eq!(
                keys.open(bad, "acme", 1_000),
                Err(DelegationError::Invalid),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_delegated_call_starts_from_the_delegating_calls_chain() {
        let call = ToolCallEnvelope::new("acme", "desk.echo", serde_json::json!({}))
            .with_principal(Principal {
                kind: PrincipalKind::Agent,
                id: "agent:room-desk".to_owned(),
                tenant: "acme".to_owned(),
            });
        let call = delegation().delegate(call);
        let chain: Vec<&str> = call.principal_chain.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(chain, ["agent:bot", "agent:room-desk"]);
        let by = call.delegated_by.unwrap();
        assert_eq!(
            (by.tool_call_id.as_str(), by.approval_mode),
            ("tc_1", ApprovalMode::ReadOnly)
        );
    }

    #[test]
    fn the_key_file_is_shared_by_the_gateways_that_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("delegation.key");
        let one = Delegations::from_file(Some(&path)).unwrap();
        let two = Delegations::from_file(Some(&path)).unwrap();
        let token = one.seal(&delegation());
        assert_eq!(two.open(&token, "acme", 1_000), Ok(delegation()));
    }
}
