//! Gate 4, host invariants: rules no plugin can relax.
//!
//! 1. the requested approval mode may not exceed the capability's declared maximum;
//! 2. an idempotency key, when the call has one, is 1 to 255 printable ASCII characters;
//!    write-class calls (`act`, or a declared maximum >= `local_write`) carry an idempotency
//!    key;
//! 3. high-risk write rule ([`high_risk`], checked after the policy gate): a call whose risk
//!    mode is `destructive` needs a declared approval gate or rollback;
//! 4. a delegated call ([`within_delegation`], after the policy gate) runs at most at the
//!    effective mode of the call it was made on behalf of.
//!
//! Rules keyed to risk use the capability's declared maximum, lowered only by a policy: the
//! mode a caller asks for never lowers them, it only narrows what the call may do once it
//! runs ([`run_mode`]: the mode the adapter and its egress see).

use gatehouse_core::envelope::DelegatedBy;
use gatehouse_core::model::{ApprovalMode, CapabilityClass};

use crate::plugin::manifest::Capability;

/// Which invariant a call broke.
#[derive(Debug, thiserror::Error)]
pub enum InvariantError {
    /// The call asked for a mode above the capability's maximum.
    #[error(
        "the call asks for approval mode `{requested}` but `{tool}` is declared with a maximum of `{maximum}`; ask for `{maximum}` or lower"
    )]
    ModeAboveMaximum {
        /// The tool.
        tool: String,
        /// What the call asked for.
        requested: ApprovalMode,
        /// The declared maximum.
        maximum: ApprovalMode,
    },
    /// A write-class call without an idempotency key.
    #[error("`{tool}` changes state, so the call needs an idempotency_key")]
    IdempotencyKeyRequired {
        /// The tool.
        tool: String,
    },
    /// The idempotency key is empty, too long, or holds characters other than printable ASCII.
    #[error(
        "the idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters \
         (no spaces or control characters); this one {problem}"
    )]
    IdempotencyKeyInvalid {
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A delegated call would run above the mode of the call it was made on behalf of.
    #[error(
        "`{tool}` would run at `{mode}`, but this call was made on behalf of call {by_call}, \
         which runs at `{delegator}`: a delegated call cannot run above it; ask for `{delegator}` \
         or lower, or call without the delegation, as yourself"
    )]
    AboveDelegator {
        /// The tool.
        tool: String,
        /// The mode it would run at.
        mode: ApprovalMode,
        /// The delegating call's effective mode.
        delegator: ApprovalMode,
        /// The delegating call's id.
        by_call: String,
    },
    /// A destructive call with neither an approval gate nor a rollback.
    #[error(
        "`{tool}` is destructive and declares neither an approval_gate nor a rollback capability"
    )]
    RollbackRequired {
        /// The tool.
        tool: String,
    },
}

/// Rule 4: a call made on behalf of another (`delegated_by`) that would run at `mode` (its run
/// mode, after the policy gate) above that call's effective mode is refused: a peer the
/// gateway called cannot do more through the gateway than the call that reached it.
pub fn within_delegation(
    tool: &str,
    mode: ApprovalMode,
    delegated_by: Option<&DelegatedBy>,
) -> Result<(), InvariantError> {
    match delegated_by {
        Some(by) if mode > by.approval_mode => Err(InvariantError::AboveDelegator {
            tool: tool.to_owned(),
            mode,
            delegator: by.approval_mode,
            by_call: by.tool_call_id.clone(),
        }),
        _ => Ok(()),
    }
}

/// Whether a call is read-only: a capability of any class but `act`, run at `read_only` (the mode the
/// caller asked for, else the capability's maximum). Only such calls may be served while the
/// store is down (`[store] read_only_without_store`).
pub fn read_only(capability: &Capability, requested: Option<ApprovalMode>) -> bool {
    capability.capability_class != CapabilityClass::Act
        && requested.unwrap_or(capability.approval_mode) == ApprovalMode::ReadOnly
}

/// Longest idempotency key accepted: as long as the longest the common HTTP APIs take (255),
/// so the key always fits the `Idempotency-Key` header the egress gate sends upstream.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// Gate 4: returns the mode the call enters the policy gate with: the declared maximum, whatever
/// the caller asked for (a caller's request never lowers a rule keyed to risk).
pub fn check(
    tool: &str,
    capability: &Capability,
    requested: Option<ApprovalMode>,
    idempotency_key: Option<&str>,
) -> Result<ApprovalMode, InvariantError> {
    let maximum = capability.approval_mode;
    if let Some(key) = idempotency_key {
        check_key(key)?;
    }
    if let Some(requested) = requested
        && requested > maximum
    {
        return Err(InvariantError::ModeAboveMaximum {
            tool: tool.to_owned(),
            requested,
            maximum,
        });
    }
    if capability.requires_idempotency_key() && idempotency_key.is_none() {
        return Err(InvariantError::IdempotencyKeyRequired {
            tool: tool.to_owned(),
        });
    }
    Ok(maximum)
}

/// An idempotency key travels to upstreams as a header value and to the audit log: printable
/// ASCII (`!` to `~`), 1 to [`MAX_IDEMPOTENCY_KEY`] characters.
fn check_key(key: &str) -> Result<(), InvariantError> {
    let problem = if key.is_empty() {
        "is empty"
    } else if key.len() > MAX_IDEMPOTENCY_KEY {
        "is longer"
    } else if !key.bytes().all(|b| b.is_ascii_graphic()) {
        "holds whitespace, control or non-ASCII characters"
    } else {
        return Ok(());
    };
    Err(InvariantError::IdempotencyKeyInvalid { problem })
}

/// The high-risk write rule, on the call's risk mode: the declared maximum as the policy gate
/// left it (only a policy lowers it).
pub fn high_risk(
    tool: &str,
    capability: &Capability,
    risk: ApprovalMode,
) -> Result<(), InvariantError> {
    if risk == ApprovalMode::Destructive
        && capability.approval_gate.is_none()
        && capability.rollback.is_none()
    {
        return Err(InvariantError::RollbackRequired {
            tool: tool.to_owned(),
        });
    }
    Ok(())
}

/// The mode the call runs at: its risk mode, narrowed to what the caller asked for.
pub fn run_mode(risk: ApprovalMode, requested: Option<ApprovalMode>) -> ApprovalMode {
    requested.map_or(risk, |requested| requested.min(risk))
}
