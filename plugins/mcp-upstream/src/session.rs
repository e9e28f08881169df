//! One request of the upstream in the mapping's protocol version (a `tools/call`,
//! `resources/read`, `prompts/get` or `completion/complete`): 2026-07-28 needs one request;
//! 2025-11-25 a session (`initialize`, `notifications/initialized`, then the request). A
//! 2025-11-25 tool the upstream runs only as a task (the mapping's `task`) is called as one,
//! and its result waited for in the same call (`tasks/result`, which the upstream answers
//! once the task ends; what it asks meanwhile comes on that request's stream). A call
//! cancelled meanwhile cancels the task (`tasks/cancel`, the one request the egress gate
//! still lets out after a cancellation).
//! A session is not ended with a DELETE: the grant needs only POST, and the upstream expires
//! the session as it would a client that went away. A request the adapter gives up (its call
//! cancelled by the caller, say) is cancelled with `notifications/cancelled` in 2025-11-25;
//! in 2026-07-28, closing its stream says it ([`crate::rpc::Exchange::cancel_by_notification`]).

use gatehouse_sdk::ToolError;
use gatehouse_sdk::serde_json::{Value, json};

use crate::mapping::{Mapping, SESSION, STATELESS};
use crate::relay::{self, Relay};
use crate::rpc::Exchange;

/// Rounds of a 2026-07-28 `InputRequiredResult` one call answers at most.
const MAX_ROUNDS: usize = 8;
/// The progress token the upstream's progress notifications carry.
const PROGRESS_TOKEN: &str = "gatehouse";
/// How long an upstream task's result is asked to be kept, in ms: past any call's time budget.
const TASK_TTL_MS: u64 = 600_000;
/// The JSON-RPC ids of what a call sends: its `initialize` (2025-11-25), its request,
/// `logging/setLevel` (2025-11-25), and a task's `tasks/result` and `tasks/cancel`.
const INITIALIZE: u64 = 0;
const REQUEST: u64 = 1;
const SET_LEVEL: u64 = 2;
const TASK_RESULT: u64 = 3;
const CANCEL_TASK: u64 = 4;

/// How this client names itself to the upstream.
fn client_info() -> Value {
    json!({ "name": "gatehouse-mcp-upstream", "version": env!("CARGO_PKG_VERSION") })
}

/// Calls the mapping's tool with `arguments`: the upstream's `tools/call` result. What the
/// upstream tells and asks its client meanwhile reaches the caller ([`relay`]): its event
/// stream's notifications and requests, and (2026-07-28) each `InputRequiredResult`'s
/// requests, answered in a retry with the upstream's `requestState`.
pub fn call_tool(mapping: &Mapping, arguments: &Value) -> Result<Value, ToolError> {
    let mut relay = Relay::default();
    let mut params = json!({
        "name": mapping.tool,
        "arguments": arguments,
        "_meta": { "progressToken": PROGRESS_TOKEN },
    });
    if mapping.protocol == SESSION && mapping.task == "required" {
        return call_as_task(mapping, params, &mut relay);
    }
    for _ in 0..MAX_ROUNDS {
        let result = request_relayed(
            mapping,
            "tools/call",
            Some(&mapping.tool),
            params.clone(),
            &mut relay,
        )?;
        if result["resultType"] != "input_required" {
            return Ok(result);
        }
        let requests = result["inputRequests"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        params["inputResponses"] = Relay::answers(&requests)?;
        match result.get("requestState") {
            Some(state) => params["requestState"] = state.clone(),
            None => _ = params.as_object_mut().map(|p| p.remove("requestState")),
        }
    }
    Err(ToolError::upstream(
        "UPSTREAM_TOO_MANY_ROUNDS",
        format!(
            "the upstream tool `{}` asked for input more than {MAX_ROUNDS} times",
            mapping.tool
        ),
    ))
}

/// Sends `method` with `params` to the mapping's upstream: its result. `name` is what the
/// 2026-07-28 `Mcp-Name` header carries for it (a tool's or prompt's name, a URI).
pub fn request(
    mapping: &Mapping,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> Result<Value, ToolError> {
    request_relayed(mapping, method, name, params, &mut Relay::default())
}

/// [`request`], what the upstream says on the way passed to `relay`.
fn request_relayed(
    mapping: &Mapping,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    relay: &mut Relay,
) -> Result<Value, ToolError> {
    let mut meanwhile = |exchange: &Exchange, message: Value| relay.relay(exchange, &message);
    if mapping.protocol == STATELESS {
        let mut headers = vec![
            ("mcp-protocol-version", STATELESS.to_owned()),
            ("mcp-method", method.to_owned()),
        ];
        if let Some(name) = name {
            headers.push(("mcp-name", header_value(name)));
        }
        let exchange = Exchange {
            url: &mapping.url,
            headers,
            cancel_by_notification: false,
        };
        let meta = params["_meta"].as_object_mut().map(std::mem::take);
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": relay::capabilities(),
            "io.modelcontextprotocol/clientInfo": client_info(),
            // The caller's own level filters what reaches it: the upstream sends everything.
            "io.modelcontextprotocol/logLevel": "debug",
        });
        for (key, value) in meta.into_iter().flatten() {
            params["_meta"][key] = value;
        }
        return exchange
            .request_relayed(REQUEST, method, &params, &mut meanwhile)
            .map(|reply| reply.result);
    }
    session(mapping)?
        .request_relayed(REQUEST, method, &params, &mut meanwhile)
        .map(|reply| reply.result)
}

/// Calls the mapping's tool (2025-11-25) as a task, `params` its `tools/call` params, and waits
/// for the task's result: what the upstream says meanwhile, on either request's stream, goes to
/// `relay`. An upstream that answers at once, though it said its tool runs as a task, is taken
/// at its answer.
fn call_as_task(
    mapping: &Mapping,
    mut params: Value,
    relay: &mut Relay,
) -> Result<Value, ToolError> {
    let mut meanwhile = |exchange: &Exchange, message: Value| relay.relay(exchange, &message);
    let exchange = session(mapping)?;
    params["task"] = json!({ "ttl": TASK_TTL_MS });
    let created = exchange
        .request_relayed(REQUEST, "tools/call", &params, &mut meanwhile)?
        .result;
    let Some(task) = created["task"]["taskId"].as_str() else {
        return Ok(created);
    };
    let result = exchange.request_relayed(
        TASK_RESULT,
        "tasks/result",
        &json!({ "taskId": task }),
        &mut meanwhile,
    );
    if result.is_err() {
        // Given up (the call cancelled or cut short), or failed: the task is cancelled, best
        // effort (one that already ended refuses it).
        let _cancelled = exchange.request(CANCEL_TASK, "tasks/cancel", &json!({ "taskId": task }));
    }
    result.map(|reply| reply.result)
}

/// A 2025-11-25 session with the mapping's upstream: `initialize` answered,
/// `notifications/initialized` sent, and the upstream asked for all its log lines.
fn session(mapping: &Mapping) -> Result<Exchange<'_>, ToolError> {
    let mut exchange = Exchange {
        url: &mapping.url,
        headers: Vec::new(),
        cancel_by_notification: true,
    };
    let initialized = exchange.request(
        INITIALIZE,
        "initialize",
        &json!({
            "protocolVersion": SESSION,
            "capabilities": relay::capabilities(),
            "clientInfo": client_info(),
        }),
    )?;
    let version = initialized.result["protocolVersion"]
        .as_str()
        .unwrap_or(SESSION)
        .to_owned();
    exchange.headers.push(("mcp-protocol-version", version));
    // A stateless server assigns no session.
    if let Some(session) = initialized.session {
        exchange.headers.push(("mcp-session-id", session));
    }
    exchange.notify("notifications/initialized")?;
    // Its log lines, all of them: the caller's own level filters what reaches it. A server
    // that offers logging but refuses the level still runs the call, without log lines.
    if initialized.result["capabilities"].get("logging").is_some() {
        let _unlogged =
            exchange.request(SET_LEVEL, "logging/setLevel", &json!({ "level": "debug" }));
    }
    Ok(exchange)
}

/// A header value for `text` as SEP-2243 sends it: as is when it is visible ASCII without
/// surrounding spaces, else `=?base64?...?=`.
fn header_value(text: &str) -> String {
    use base64::Engine as _;
    // A value that reads as already encoded is encoded too, so it reaches the server as sent.
    let looks_encoded = text.starts_with("=?base64?") && text.ends_with("?=");
    let plain = text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !text.starts_with([' ', '\t'])
        && !text.ends_with([' ', '\t'])
        && !looks_encoded;
    if plain {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_value("get_forecast"), "get_forecast");
        assert_eq!(header_value("météo"), "=?base64?bcOpdMOpbw==?=");
        assert_eq!(header_value(" padded"), "=?base64?IHBhZGRlZA==?=");
    }
}
