//! Gate 6, approve (propose -> approve -> execute): a call that needs approval is stored as a
//! proposal and ends `paused` with its approval id; it runs only when its caller calls again
//! (same idempotency key, or the approval id for a call without one) after an approver
//! approved it, at the approved effective mode, once (gate 7 sees to that).
//!
//! The same call repeated while its approval is pending gets the same approval, never a
//! second one. A rejected approval refuses the call; an expired one too (the caller proposes
//! again, with a new key).
//!
//! An approval belongs to one proposal: its tenant, tool and request (the arguments and the
//! requested mode, by hash), its principal chain, and its idempotency key. A call that finds
//! it (by key or by id) with anything else of its own is refused, `APPROVAL_MISMATCH`, and
//! nothing runs: another principal who learned the id, or the proposer with a fresh key, gets
//! no second run. The approved call then runs under the approval's own key ([`key_of`]), so
//! gate 7 lets it run once, whichever path calls; an approval that already ran only replays
//! its result (the pipeline refuses a run once the key's record is gone).

use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::ApprovalMode;
use gatehouse_store::{
    Approval, ApprovalLookup, ApprovalStatus, IdempotencyKey, Store, StoreConfig, Waiting,
    approval_id,
};

use crate::pipeline::outcome::{Mismatch, Stop};

/// What gate 6 needs to know about the call.
pub struct Proposal<'a> {
    /// The call.
    pub call: &'a ToolCallEnvelope,
    /// The tool, after meta-tool resolution.
    pub tool: &'a str,
    /// The effective mode the call would run at.
    pub mode: ApprovalMode,
    /// Why it needs approval.
    pub why: Vec<String>,
    /// The request's hash.
    pub request_hash: &'a str,
    /// Now, unix ms.
    pub now_ms: u64,
}

/// Gate 6 for a call that needs approval: the approval it may run under, or why it stops.
/// Records the approval id on `result` either way.
pub async fn approve(
    store: &dyn Store,
    config: &StoreConfig,
    proposal: &Proposal<'_>,
    result: &mut ToolResultEnvelope,
) -> Result<Approval, Stop> {
    let call = proposal.call;
    let lookup = match (&call.approval_id, &call.idempotency_key) {
        (Some(id), _) => Some(ApprovalLookup::Id(id.clone())),
        (None, Some(key)) => Some(ApprovalLookup::Key(IdempotencyKey {
            tenant: call.tenant_id.clone(),
            tool: proposal.tool.to_owned(),
            key: key.clone(),
        })),
        (None, None) => None,
    };
    let found = match lookup {
        Some(lookup) => store.approval(lookup).await?,
        None => None,
    };
    let approval = match (found, &call.approval_id) {
        (Some(approval), _) => approval,
        (None, Some(id)) => return Err(Stop::UnknownApproval { id: id.clone() }),
        (None, None) => {
            let ttl_ms = config.approval_ttl_seconds.saturating_mul(1000);
            store
                .propose(Approval {
                    id: approval_id(),
                    tenant: call.tenant_id.clone(),
                    tool: proposal.tool.to_owned(),
                    idempotency_key: call.idempotency_key.clone(),
                    request_hash: proposal.request_hash.to_owned(),
                    call: serde_json::to_value(call).unwrap_or_default(),
                    principals: call.principal_chain.iter().map(|p| p.id.clone()).collect(),
                    mode: proposal.mode.to_string(),
                    reasons: proposal.why.clone(),
                    status: ApprovalStatus::Pending,
                    created_at_ms: proposal.now_ms,
                    expires_at_ms: proposal.now_ms.saturating_add(ttl_ms),
                    decided_by: None,
                    decided_reason: None,
                    decided_at_ms: None,
                    executed_by_call: None,
                    decided_as: None,
                    waiting: Waiting::Retry,
                })
                .await?
        }
    };
    result.approval_id = Some(approval.id.clone());
    if let Some(mismatch) = mismatch(&approval, proposal) {
        return Err(Stop::ApprovalMismatch {
            id: approval.id,
            mismatch,
        });
    }
    if approval.expired(proposal.now_ms) {
        return Err(Stop::ApprovalExpired { id: approval.id });
    }
    match approval.status {
        ApprovalStatus::Pending => Err(Stop::ApprovalRequired {
            tool: proposal.tool.to_owned(),
            why: approval.reasons.join("; "),
            approval_id: approval.id,
            keyed: call.idempotency_key.is_some(),
        }),
        ApprovalStatus::Rejected => Err(Stop::ApprovalRejected {
            id: approval.id,
            by: approval.decided_by.unwrap_or_default(),
            reason: approval.decided_reason.unwrap_or_default(),
        }),
        ApprovalStatus::Approved | ApprovalStatus::Executed => Ok(approval),
    }
}

/// What of a call differs from the proposal its approval holds, if anything.
fn mismatch(approval: &Approval, proposal: &Proposal<'_>) -> Option<Mismatch> {
    let call = proposal.call;
    if approval.tenant != call.tenant_id
        || approval.tool != proposal.tool
        || approval.request_hash != proposal.request_hash
    {
        return Some(Mismatch::Request);
    }
    if !approval
        .principals
        .iter()
        .map(String::as_str)
        .eq(call.principal_chain.iter().map(|p| p.id.as_str()))
    {
        return Some(Mismatch::Principal);
    }
    // A call that names the approval without a key runs under the approval's (the same
    // proposal, the same chain); one with a key of its own must have the approval's.
    match &call.idempotency_key {
        Some(key) if approval.idempotency_key.as_ref() != Some(key) => Some(Mismatch::Key),
        _ => None,
    }
}

/// The idempotency key an approved call runs under: the key it was proposed with, or, for a
/// call proposed without one, a key of the approval's own. Every run of the approval claims
/// it, so one runs.
pub fn key_of(approval: &Approval) -> String {
    approval
        .idempotency_key
        .clone()
        .unwrap_or_else(|| format!("approval:{}", approval.id))
}

/// The mode an approved call runs at: the one it was approved at.
pub fn approved_mode(approval: &Approval, fallback: ApprovalMode) -> ApprovalMode {
    serde_json::from_value(serde_json::Value::String(approval.mode.clone())).unwrap_or(fallback)
}
