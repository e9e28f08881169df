//! Gate 4, host invariants: rules no plugin can relax.
//!
//! 1. the requested approval mode may not exceed the capability's declared maximum;
//! 2. write-class calls (`act`, or mode >= `local_write`) carry an idempotency key;
//! 3. high-risk write rule: a `destructive` call needs a declared approval gate or rollback.

use crate::model::{ApprovalMode, CapabilityClass};
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
    /// A destructive call with neither an approval gate nor a rollback.
    #[error(
        "`{tool}` is destructive and declares neither an approval_gate nor a rollback capability"
    )]
    RollbackRequired {
        /// The tool.
        tool: String,
    },
}

/// Whether a call is read-only: a capability of any class but `act`, run at `read_only` (the mode the
/// caller asked for, else the capability's maximum). Only such calls may be served while the
/// store is down (`[store] read_only_without_store`).
pub fn read_only(capability: &Capability, requested: Option<ApprovalMode>) -> bool {
    capability.capability_class != CapabilityClass::Act
        && requested.unwrap_or(capability.approval_mode) == ApprovalMode::ReadOnly
}

/// Gate 4: returns the mode the call enters the policy gate with.
pub fn check(
    tool: &str,
    capability: &Capability,
    requested: Option<ApprovalMode>,
    idempotency_key: Option<&str>,
) -> Result<ApprovalMode, InvariantError> {
    let maximum = capability.approval_mode;
    let mode = requested.unwrap_or(maximum);
    if mode > maximum {
        return Err(InvariantError::ModeAboveMaximum {
            tool: tool.to_owned(),
            requested: mode,
            maximum,
        });
    }
    let write_class =
        capability.capability_class == CapabilityClass::Act || mode >= ApprovalMode::LocalWrite;
    let required = write_class || capability.idempotency.as_ref().is_some_and(|i| i.required);
    if required && idempotency_key.is_none_or(str::is_empty) {
        return Err(InvariantError::IdempotencyKeyRequired {
            tool: tool.to_owned(),
        });
    }
    if mode == ApprovalMode::Destructive
        && capability.approval_gate.is_none()
        && capability.rollback.is_none()
    {
        return Err(InvariantError::RollbackRequired {
            tool: tool.to_owned(),
        });
    }
    Ok(mode)
}
