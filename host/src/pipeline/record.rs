//! Gate 10, record: every call, whatever its status and outcome, leaves one audit entry — the
//! call, the normalized action the policies saw, and the result with its decision record
//! (module digests), approval id, egress attempts and outcome — appended to the hash-chained
//! log together with its key's result and its approval's execution, in one transaction. A
//! write-class call's record is durable before its result is delivered; a read-only call's is
//! queued.
//!
//! Arguments and results of a capability that declares `sensitive = true` are kept as
//! SHA-256 hashes in the audit entry, never in clear.

use serde_json::{Value, json};

use crate::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use crate::state::{AuditEvent, CallRecord, IdempotencyKey, redacted};

/// What gate 10 records about one call.
pub struct Facts<'a> {
    /// The call as received.
    pub call: &'a ToolCallEnvelope,
    /// The full result.
    pub result: &'a ToolResultEnvelope,
    /// The normalized action the policies evaluated (JSON), if the call got that far.
    pub action: Option<Value>,
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
    let record = if sensitive {
        let mut call_json = serde_json::to_value(call).unwrap_or(Value::Null);
        let mut result_json = serde_json::to_value(result).unwrap_or(Value::Null);
        hide(&mut call_json, "args");
        if let Some(action) = action.as_mut() {
            hide(action, "args");
        }
        hide(&mut result_json, "content");
        hide(&mut result_json, "structured_content");
        json!({ "call": call_json, "action": action, "result": result_json }).to_string()
    } else {
        // The entry's text is hashed as stored, so it only has to be deterministic, not
        // canonical: the three parts are written in a fixed order.
        let call = serde_json::to_string(call).unwrap_or_else(|_| "null".to_owned());
        // `serde_json::to_string`, not `Display`: the same text, without a formatter per write.
        let action = action.map_or_else(
            || "null".to_owned(),
            |a| serde_json::to_string(&a).unwrap_or_else(|_| "null".to_owned()),
        );
        let mut record = String::with_capacity(32 + call.len() + action.len() + delivered.len());
        for part in [
            r#"{"call":"#,
            &call,
            r#","action":"#,
            &action,
            r#","result":"#,
            &delivered,
            "}",
        ] {
            record.push_str(part);
        }
        record
    };
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

fn hide(object: &mut Value, field: &str) {
    if let Some(slot) = object.get_mut(field)
        && !slot.is_null()
    {
        *slot = redacted(slot);
    }
}
