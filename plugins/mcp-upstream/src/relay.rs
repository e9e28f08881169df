//! What the upstream tells and asks its client while a call runs, passed on to the caller
//! through the gateway's `caller` interface (contract 0.5.0), so an imported server keeps its
//! progress, its log lines and its questions, under the same gate as any adapter's (the
//! manifest's `[caller]` table, the operator's `[[caller.grant]]`):
//! - `notifications/progress` and `notifications/message` become `caller::progress` and
//!   `caller::notify`; other notifications are dropped;
//! - a request (`elicitation/create`, `sampling/createMessage`, `roots/list`) becomes an ask,
//!   and its answer (or the JSON-RPC error saying why there is none) is posted back to the
//!   upstream; `ping` is answered `{}`; any other request gets -32601;
//! - a 2026-07-28 `InputRequiredResult` becomes one round of asks ([`answers`]), whose answers
//!   go back as `inputResponses` with the upstream's `requestState`.
//!
//! What the client declared it can be asked ([`capabilities`]) is what the upstream is told it
//! may ask.

use gatehouse_sdk::ToolError;
use gatehouse_sdk::caller::{self, AskError, AskKind, LogLevel, Request};
use gatehouse_sdk::serde_json::{Map, Value, json};

use crate::rpc::Exchange;

/// JSON-RPC's "method not found", which a client answers a request it does not support with.
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "internal error".
const INTERNAL_ERROR: i64 = -32603;

/// The client capabilities the upstream is told of: what the caller declared it can be asked.
pub fn capabilities() -> Value {
    let can = caller::can();
    let mut capabilities = Map::new();
    let mut elicitation = Map::new();
    if can.elicit_form {
        elicitation.insert("form".to_owned(), json!({}));
    }
    if can.elicit_url {
        elicitation.insert("url".to_owned(), json!({}));
    }
    if !elicitation.is_empty() {
        capabilities.insert("elicitation".to_owned(), Value::Object(elicitation));
    }
    if can.sample {
        capabilities.insert("sampling".to_owned(), json!({}));
    }
    if can.roots {
        capabilities.insert("roots".to_owned(), json!({}));
    }
    Value::Object(capabilities)
}

/// One call's relay: numbers the asks it passes on.
#[derive(Default)]
pub struct Relay {
    asked: usize,
}

impl Relay {
    /// Passes `message`, which the upstream sent on the call's event stream, on to the caller;
    /// a request's answer goes back to the upstream through `exchange`.
    pub fn relay(&mut self, exchange: &Exchange, message: &Value) -> Result<(), ToolError> {
        let params = &message["params"];
        match (message.get("id"), message["method"].as_str()) {
            (None, Some("notifications/progress")) => caller::progress(
                params["progress"].as_f64().unwrap_or_default(),
                params["total"].as_f64(),
                params["message"].as_str(),
            ),
            (None, Some("notifications/message")) => caller::notify(
                level(params["level"].as_str()),
                params["logger"].as_str(),
                &params["data"],
            ),
            (Some(id), Some(method)) => {
                let answer = self.ask(method, params.clone());
                exchange.respond(id, answer)?;
            }
            // Other notifications, and responses that are not this call's answer.
            _ => {}
        }
        Ok(())
    }

    /// Asks the caller what the upstream's request `method` asks: the answer, or the JSON-RPC
    /// error for the upstream.
    fn ask(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        if method == "ping" {
            return Ok(json!({}));
        }
        let Some(kind) = kind(method) else {
            return Err(error(
                METHOD_NOT_FOUND,
                &format!("the client does not answer `{method}`"),
            ));
        };
        self.asked += 1;
        let request = Request::new(format!("upstream-{}", self.asked), kind, params);
        caller::ask(request).map_err(|why| rpc_error(method, &why))
    }

    /// One round of a 2026-07-28 `InputRequiredResult`'s `inputRequests` (key -> `{method,
    /// params}`), asked together: its `inputResponses`. A request that cannot be answered
    /// fails the call, saying why.
    pub fn answers(requests: &Map<String, Value>) -> Result<Value, ToolError> {
        let mut asks = Vec::new();
        for (key, request) in requests {
            let method = request["method"].as_str().unwrap_or_default();
            let kind = kind(method).ok_or_else(|| {
                ToolError::upstream(
                    "UPSTREAM_INPUT_UNSUPPORTED",
                    format!("the upstream asked for `{method}`, which a client cannot answer"),
                )
            })?;
            asks.push(Request::new(key.clone(), kind, request["params"].clone()));
        }
        let keys: Vec<String> = asks.iter().map(|ask| ask.key.clone()).collect();
        let mut responses = Map::new();
        for (key, answer) in keys.into_iter().zip(caller::ask_all(asks)) {
            responses.insert(key, answer?);
        }
        Ok(Value::Object(responses))
    }
}

/// The ask kind of an MCP request the server makes of its client.
fn kind(method: &str) -> Option<AskKind> {
    match method {
        "elicitation/create" => Some(AskKind::Elicitation),
        "sampling/createMessage" => Some(AskKind::Sampling),
        "roots/list" => Some(AskKind::Roots),
        _ => None,
    }
}

/// An MCP log level by name; an unknown one is `info`.
fn level(name: Option<&str>) -> LogLevel {
    match name {
        Some("debug") => LogLevel::Debug,
        Some("notice") => LogLevel::Notice,
        Some("warning") => LogLevel::Warning,
        Some("error") => LogLevel::Error,
        Some("critical") => LogLevel::Critical,
        Some("alert") => LogLevel::Alert,
        Some("emergency") => LogLevel::Emergency,
        _ => LogLevel::Info,
    }
}

/// The JSON-RPC error the upstream gets when its request has no answer: -32601 when the
/// client cannot be asked it (undeclared, or nobody to ask), -32603 otherwise, the reason in
/// the message.
fn rpc_error(method: &str, why: &AskError) -> Value {
    let code = match why {
        AskError::NotSupported(_) | AskError::Unavailable(_) => METHOD_NOT_FOUND,
        AskError::Refused(_) | AskError::Failed(_) | AskError::Timeout(_) => INTERNAL_ERROR,
    };
    error(code, &format!("`{method}` has no answer: {why}"))
}

fn error(code: i64, message: &str) -> Value {
    json!({ "code": code, "message": message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_nobody_can_answer_gets_the_protocols_error() {
        // Natively nobody can be asked: the upstream is told so, never left waiting.
        let mut relay = Relay::default();
        let refused = relay.ask("elicitation/create", json!({ "message": "name?" }));
        assert_eq!(refused.unwrap_err()["code"], METHOD_NOT_FOUND);
        assert_eq!(relay.ask("ping", json!({})), Ok(json!({})));
        let unknown = relay.ask("tools/call", json!({})).unwrap_err();
        assert_eq!(unknown["code"], METHOD_NOT_FOUND);
        assert_eq!(capabilities(), json!({}));
    }
}
