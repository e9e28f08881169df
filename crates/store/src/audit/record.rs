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
//! - **Format 3**: as format 2, `{"v":3,...}`, and these too are left out where the rule gives
//!   back exactly the value:
//!   - `call`: a principal's `tenant_id` is the call's `tenant_id` (so the action's
//!     `principals`, restored from the call, get it too);
//!   - `action`: `adapter_id` is the result's `adapter.id`; `approval_mode_requested` is
//!     its `approval_mode_max`; `prior_actions`, `data_classification` and `risk_signals` are
//!     empty; and, since contract 0.4.0 added them (so an earlier record had neither),
//!     `claims` is the call's `claims` (none: no roles and no groups) and `skills` is empty;
//!   - `result`: `evidence_refs` is empty; the `policy_decision`'s `approval_mode_effective`
//!     is the result's, and its `modules` are none.
//!
//!   They are what a read-only call's record repeated from call to call: about a fifth of an
//!   echo call's record.
//!
//! The chain hashes the record as stored, whatever its format, so a log that holds every
//! format verifies as one chain. Readers (`audit show|export`, the admin API, `replay`) get
//! the full form from [`full`], for any format. Format 2 never left out what format 3 adds, so
//! one reader restores both.

use serde_json::{Map, Value};

use crate::records::AuditEvent;

/// The format a lean record is written in, declared in its `v` field.
pub const LEAN: u64 = 3;
/// The lean formats [`full`] reads: 2 and [`LEAN`].
const LEAN_FORMATS: [u64; 2] = [2, LEAN];
/// The call envelope's version a lean record leaves out.
pub const CALL_ENVELOPE: &str = "gatehouse.tool_call.v1";
/// The result envelope's version a lean record leaves out.
pub const RESULT_ENVELOPE: &str = "gatehouse.tool_result.v1";

/// The record of `event` in its full form; `None` if it is not JSON. Records of other kinds
/// than calls are returned as stored.
pub fn full(event: &AuditEvent) -> Option<Value> {
    let mut record: Value = serde_json::from_str(&event.record).ok()?;
    let Some(parts) = record.as_object_mut() else {
        return Some(record);
    };
    let format = parts.get("v").and_then(Value::as_u64);
    if event.kind != "call" || !format.is_some_and(|v| LEAN_FORMATS.contains(&v)) {
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
        let tenant = stored.get("tenant_id").cloned().unwrap_or(Value::Null);
        if let Some(Value::Array(chain)) = stored.get_mut("principal_chain") {
            for principal in chain.iter_mut().filter_map(Value::as_object_mut) {
                restore(principal, "tenant_id", || tenant.clone());
            }
        }
        call.clone_from(stored);
    }
    let from_call = |field: &str| call.get(field).cloned().unwrap_or(Value::Null);
    let from_result = |pointer: &str| {
        parts
            .get("result")
            .and_then(|result| result.pointer(pointer))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let (adapter_id, mode_effective) = (
        from_result("/adapter/id"),
        from_result("/approval_mode_effective"),
    );
    if let Some(Value::Object(action)) = parts.get_mut("action") {
        restore(action, "tool_call_id", || from_call("tool_call_id"));
        restore(action, "tenant", || from_call("tenant_id"));
        restore(action, "args", || from_call("args").to_string().into());
        restore(action, "principals", || from_call("principal_chain"));
        restore(action, "adapter_id", || adapter_id);
        let max = action
            .get("approval_mode_max")
            .cloned()
            .unwrap_or(Value::Null);
        restore(action, "approval_mode_requested", || max);
        let claims = call.get("claims").cloned();
        restore(action, "claims", || {
            claims.unwrap_or_else(|| Value::Object(Map::new()))
        });
        for list in [
            "prior_actions",
            "data_classification",
            "skills",
            "risk_signals",
        ] {
            restore(action, list, || Value::Array(Vec::new()));
        }
    }
    if let Some(Value::Object(result)) = parts.get_mut("result") {
        restore(result, "envelope_version", || RESULT_ENVELOPE.into());
        restore(result, "tool_call_id", || id.clone());
        restore(result, "trace_id", || from_call("trace_id"));
        restore(result, "capability_id", || tool.clone());
        restore(result, "outcome", || column(&event.outcome));
        restore(result, "evidence_refs", || Value::Array(Vec::new()));
        if let Some(Value::Object(decision)) = result.get_mut("policy_decision") {
            restore(decision, "approval_mode_effective", || mode_effective);
            restore(decision, "modules", || Value::Array(Vec::new()));
        }
    }
    Some(record)
}

/// Puts `field` back into `part` unless the record kept it.
fn restore(part: &mut Map<String, Value>, field: &str, value: impl FnOnce() -> Value) {
    if !part.contains_key(field) {
        part.insert(field.to_owned(), value());
    }
}
