//! Gate 10, record: every call, whatever its status and outcome, leaves one audit entry — the
//! call, the normalized action the policies saw, and the result with its decision record
//! (module digests), approval id, egress attempts and outcome — appended to the hash-chained
//! log together with its key's result and its approval's execution, in one transaction. A
//! write-class call's record is durable before its result is delivered; a read-only call's is
//! queued.
//!
//! Arguments and results of a capability that declares `sensitive = true` are kept as
//! SHA-256 hashes in the audit entry, never in clear.

use serde::Serialize;
use serde_json::Value;

use crate::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use crate::model::wit::ActionRecord;
use crate::state::{AuditEvent, CallRecord, IdempotencyKey, redacted};

/// What gate 10 records about one call.
pub struct Facts<'a> {
    /// The call as received.
    pub call: &'a ToolCallEnvelope,
    /// The full result.
    pub result: &'a ToolResultEnvelope,
    /// The normalized action the policies evaluated, if the call got that far.
    pub action: Option<ActionRecord>,
    /// Whether the capability declared its arguments and results sensitive.
    pub sensitive: bool,
    /// The key this call claimed.
    pub claimed: Option<IdempotencyKey>,
    /// Whether the call stopped before anything could run (the key is released, not
    /// completed, so a retry runs).
    pub nothing_ran: bool,
    /// The approval this call executed.
    pub executes: Option<String>,
    /// When the record is made, unix ms.
    pub at_ms: u64,
}

/// The call's record, ready for the store.
pub fn record(facts: Facts<'_>) -> CallRecord {
    let Facts {
        call,
        result,
        mut action,
        sensitive,
        claimed,
        nothing_ran,
        executes,
        at_ms,
    } = facts;
    // The result as delivered: what a repeat under the key replays, and (unless sensitive)
    // what the audit entry holds. Serialized once.
    let delivered = serde_json::to_string(result).unwrap_or_default();
    // The entry's text is hashed as stored, so it only has to be deterministic, not canonical:
    // the three parts are written in a fixed order.
    let (call_text, hidden_result) = if sensitive {
        let mut call_json = serde_json::to_value(call).unwrap_or(Value::Null);
        let mut result_json = serde_json::to_value(result).unwrap_or(Value::Null);
        hide(&mut call_json, "args");
        hide(&mut result_json, "content");
        hide(&mut result_json, "structured_content");
        if let Some(action) = action.as_mut() {
            // `args` is JSON text: kept as the hash of that text as a JSON string.
            let hash = redacted(&Value::String(std::mem::take(&mut action.args)));
            action.args = hash.as_str().unwrap_or_default().to_owned();
        }
        (text(&call_json), Some(text(&result_json)))
    } else {
        (text(call), None)
    };
    let result_text = hidden_result.as_deref().unwrap_or(&delivered);
    let action_text = action.as_ref().map_or_else(|| "null".to_owned(), text);
    let mut record =
        String::with_capacity(32 + call_text.len() + action_text.len() + result_text.len());
    for part in [
        r#"{"call":"#,
        &call_text,
        r#","action":"#,
        &action_text,
        r#","result":"#,
        result_text,
        "}",
    ] {
        record.push_str(part);
    }
    // Write-class calls carry a key; theirs, replays included, and any touching an approval,
    // are committed before the result is delivered.
    let durable = call.idempotency_key.is_some()
        || claimed.is_some()
        || executes.is_some()
        || result.approval_id.is_some();
    let (releases, completes) = match claimed {
        Some(key) if nothing_ran => (Some(key), None),
        // What a repeat under the key replays: the result as it was delivered.
        Some(key) => (None, Some((key, delivered))),
        None => (None, None),
    };
    let executes = executes.filter(|_| completes.is_some());
    CallRecord {
        audit: AuditEvent {
            kind: "call".to_owned(),
            tool_call_id: Some(call.tool_call_id.clone()),
            tenant: Some(call.tenant_id.clone()),
            principal: call.principal_chain.last().map(|p| p.id.clone()),
            tool: Some(result.capability_id.clone()),
            outcome: Some(result.outcome.as_str().to_owned()),
            record,
            at_ms,
        },
        completes,
        releases,
        executes,
        durable,
    }
}

/// `value` as JSON text (`serde_json::to_string`, not `Display`: the same text, without a
/// formatter per write).
fn text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

fn hide(object: &mut Value, field: &str) {
    if let Some(slot) = object.get_mut(field)
        && !slot.is_null()
    {
        *slot = redacted(slot);
    }
}
