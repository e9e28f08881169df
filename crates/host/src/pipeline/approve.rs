//! Gate 6, approve (propose -> approve -> execute): a call that needs approval is stored as a
//! proposal and ends `paused` with its approval id; it runs only when its caller calls again
//! (same idempotency key, or the approval id for a call without one) after an approver
//! approved it, at the approved effective mode, once (gate 7 sees to that).
//!
//! The same call repeated while its approval is pending gets the same approval, never a
//! second one. A rejected approval refuses the call; an expired one too (the caller proposes
//! again, with a new key). An approval is bound to its request: a retry with other arguments
//! under the same key or approval id is a conflict.

use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::ApprovalMode;
use gatehouse_store::{
    Approval, ApprovalLookup, ApprovalStatus, IdempotencyKey, Store, StoreConfig, Waiting,
    approval_id,
};

use crate::pipeline::outcome::Stop;

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
    if approval.tenant != call.tenant_id
        || approval.tool != proposal.tool
        || approval.request_hash != proposal.request_hash
    {
        return Err(Stop::ApprovalMismatch { id: approval.id });
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

/// The mode an approved call runs at: the one it was approved at.
pub fn approved_mode(approval: &Approval, fallback: ApprovalMode) -> ApprovalMode {
    serde_json::from_value(serde_json::Value::String(approval.mode.clone())).unwrap_or(fallback)
}
