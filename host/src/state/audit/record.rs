//! The stored form of a call's audit record, and its full form.
//!
//! A call's record is JSON text with three parts: `call` (the `ToolCallEnvelope`), `action`
//! (the normalized action the policies saw, or null) and `result` (the `ToolResultEnvelope`).
//! The full form repeats the call's id, tenant and tool in all three parts, and the arguments
//! twice. The entry's columns already hold most of them, so the record is stored lean.
//!
//! - **Format 1** (entries written before the lean form): the three parts in full.
//! - **Format 2**: `{"v":2,"call":...,"action":...,"result":...}`. A field that the rules
//!   below restore is left out, but only where the rule gives back exactly the value it had:
//!   - `call`: `envelope_version` is `gatehouse.tool_call.v1`; `tool_call_id`, `tenant_id`
//!     and `capability_id` are the entry's `tool_call_id`, `tenant` and `tool`;
//!   - `action`: `tool_call_id` and `tenant` are the call's; `args` is the call's `args` as
//!     JSON text; `principals` is the call's `principal_chain`;
//!   - `result`: `envelope_version` is `gatehouse.tool_result.v1`; `tool_call_id`,
//!     `capability_id` and `outcome` are the entry's; `trace_id` is the call's.
//!
//! The chain hashes the record as stored, whatever its format, so a log that holds both
//! formats verifies as one chain. Readers (`audit show|export`, the admin API, `replay`) get
//! the full form from [`full`], for either format.

use serde_json::{Map, Value};

use super::AuditEvent;

/// The format a lean record declares in its `v` field.
pub const LEAN: u64 = 2;
/// The call envelope's version a format-2 record leaves out.
pub const CALL_ENVELOPE: &str = "gatehouse.tool_call.v1";
/// The result envelope's version a format-2 record leaves out.
pub const RESULT_ENVELOPE: &str = "gatehouse.tool_result.v1";

/// The record of `event` in its full form; `None` if it is not JSON. Records of other kinds
/// than calls are returned as stored.
pub fn full(event: &AuditEvent) -> Option<Value> {
    let mut record: Value = serde_json::from_str(&event.record).ok()?;
    let Some(parts) = record.as_object_mut() else {
        return Some(record);
    };
    if event.kind != "call" || parts.get("v").and_then(Value::as_u64) != Some(LEAN) {
        return Some(record);
    }
    parts.remove("v");
    let column = |value: &Option<String>| value.clone().map_or(Value::Null, Value::String);
    let (id, tool) = (column(&event.tool_call_id), column(&event.tool));
    let mut call = Map::new();
    if let Some(Value::Object(stored)) = parts.get_mut("call") {
        restore(stored, "envelope_version", || CALL_ENVELOPE.into());
        restore(stored, "tool_call_id", || id.clone());
        restore(stored, "tenant_id", || column(&event.tenant));
        restore(stored, "capability_id", || tool.clone());
        call.clone_from(stored);
    }
    let from_call = |field: &str| call.get(field).cloned().unwrap_or(Value::Null);
    if let Some(Value::Object(action)) = parts.get_mut("action") {
        restore(action, "tool_call_id", || from_call("tool_call_id"));
        restore(action, "tenant", || from_call("tenant_id"));
        restore(action, "args", || from_call("args").to_string().into());
        restore(action, "principals", || from_call("principal_chain"));
    }
    if let Some(Value::Object(result)) = parts.get_mut("result") {
        restore(result, "envelope_version", || RESULT_ENVELOPE.into());
        restore(result, "tool_call_id", || id.clone());
        restore(result, "trace_id", || from_call("trace_id"));
        restore(result, "capability_id", || tool.clone());
        restore(result, "outcome", || column(&event.outcome));
    }
    Some(record)
}

/// Puts `field` back into `part` unless the record kept it.
fn restore(part: &mut Map<String, Value>, field: &str, value: impl FnOnce() -> Value) {
    if !part.contains_key(field) {
        part.insert(field.to_owned(), value());
    }
}
