//! One JSON-RPC exchange with the upstream over Streamable HTTP: the POST, and its answer read
//! from a JSON body or an SSE stream.

use gatehouse_sdk::ToolError;
use gatehouse_sdk::http::{HttpError, Request, Response};
use gatehouse_sdk::serde_json::{self, Value};
use gatehouse_sdk::sse::{Events, events, is_event_stream};

/// Bytes of what the upstream said that an error message quotes, at most.
pub const MAX_QUOTE: usize = 1024;
/// Why the gateway cancels a request it gave up (`notifications/cancelled`'s `reason`).
pub const GAVE_UP: &str = "the gateway gave the request up (its call was cancelled or cut short)";
/// What a client accepts from a Streamable HTTP server.
const ACCEPT: &str = "application/json, text/event-stream";

/// The upstream's answer to a request.
pub struct Reply {
    /// The JSON-RPC `result`.
    pub result: Value,
    /// The `mcp-session-id` response header, if the upstream sent one.
    pub session: Option<String>,
}

/// A request to the upstream at `url`, with the MCP headers of this exchange.
pub struct Exchange<'a> {
    /// The upstream endpoint.
    pub url: &'a str,
    /// Headers besides `accept` and `content-type` (protocol version, session, SEP-2243).
    pub headers: Vec<(&'static str, String)>,
    /// Whether a request given up is cancelled with `notifications/cancelled` (2025-11-25;
    /// at 2026-07-28 closing its stream says it): see [`Exchange::gave_up`].
    pub cancel_by_notification: bool,
}

impl Exchange<'_> {
    /// Sends the request `method` with `id` and `params`; returns its answer. A JSON-RPC
    /// error is `UPSTREAM_RPC_ERROR`; an answer that is not MCP `UPSTREAM_NOT_MCP`; HTTP 429
    /// and 5xx `UPSTREAM_FAILED` (retryable); the client's errors as the SDK maps them.
    pub fn request(&self, id: u64, method: &str, params: &Value) -> Result<Reply, ToolError> {
        self.request_relayed(id, method, params, &mut |_, _| Ok(()))
    }

    /// [`Exchange::request`], reading an event stream as it arrives: what the upstream says
    /// before its answer (its notifications, and its requests to the client, which it may wait
    /// on before it answers) goes to `meanwhile` at once, in order.
    pub fn request_relayed(
        &self,
        id: u64,
        method: &str,
        params: &Value,
        meanwhile: &mut dyn FnMut(&Self, Value) -> Result<(), ToolError>,
    ) -> Result<Reply, ToolError> {
        let body =
            serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let gave_up = |error| self.gave_up(id, method, error);
        let mut streaming = self.request_to(&body)?.send_streaming().map_err(gave_up)?;
        let status = streaming.status();
        if status >= 300 || !is_event_stream(streaming.header("content-type")) {
            let response = streaming.into_response().map_err(gave_up)?;
            return self.answer(id, method, &response);
        }
        let session = streaming.header("mcp-session-id").map(str::to_owned);
        let mut events = Events::default();
        while let Some(chunk) = streaming.next_chunk().map_err(gave_up)? {
            for mut message in events.push(&chunk) {
                if message.get("id") != Some(&Value::from(id)) || message.get("method").is_some() {
                    meanwhile(self, message)?;
                } else if message["error"].is_object() {
                    return Err(self.rpc_error(method, &message["error"]));
                } else if message.get("result").is_some() {
                    return Ok(Reply {
                        result: message["result"].take(),
                        session,
                    });
                }
            }
        }
        Err(ToolError::upstream(
            "UPSTREAM_NOT_MCP",
            format!(
                "the MCP server at {} ended its event stream for `{method}` without an answer",
                self.url
            ),
        ))
    }

    /// The error that ends request `id` (`method`) when its answer cannot be read. If the
    /// upstream may still be working on it, it is told first, as MCP asks of a client that
    /// gives a request up: when the connection broke or the gateway cut the wait (the caller
    /// cancelled the call, which leaves the adapter a moment to say so, or a byte budget ran
    /// out). Not after a timeout (the call's time is spent, so the gate would refuse the
    /// notice), a refusal (nothing was sent), for `initialize`, which is never cancelled, nor
    /// for `tasks/result`, whose task its caller cancels instead. The notice is best effort:
    /// its own failure changes nothing.
    fn gave_up(&self, id: u64, method: &str, error: HttpError) -> ToolError {
        let may_run = matches!(error, HttpError::Transport(_));
        let noticed = !matches!(method, "initialize" | "tasks/result");
        if self.cancel_by_notification && may_run && noticed {
            let notice = serde_json::json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": id, "reason": GAVE_UP },
            });
            let _told = self.post(&notice);
        }
        error.into()
    }

    /// Answers the upstream's request `id` (made on an event stream) with `outcome`: its
    /// `result`, or its JSON-RPC `error`. The upstream must accept it (any 2xx).
    pub fn respond(&self, id: &Value, outcome: Result<Value, Value>) -> Result<(), ToolError> {
        let mut body = serde_json::json!({ "jsonrpc": "2.0", "id": id });
        match outcome {
            Ok(result) => body["result"] = result,
            Err(error) => body["error"] = error,
        }
        let response = self.post(&body)?;
        match response.status() {
            200..=299 => Ok(()),
            429 | 500.. => Err(self.failed("a response", &response)),
            _ => Err(self.not_mcp("a response", &response)),
        }
    }

    /// The answer to request `id` in `response`, read whole (JSON, or an event stream).
    fn answer(&self, id: u64, method: &str, response: &Response) -> Result<Reply, ToolError> {
        let status = response.status();
        if status == 429 || status >= 500 {
            return Err(self.failed(method, response));
        }
        let message = if is_event_stream(response.header("content-type")) {
            events(&response.text())
                .into_iter()
                .find(|m| m.get("id") == Some(&Value::from(id)))
        } else {
            serde_json::from_slice::<Value>(response.bytes()).ok()
        };
        match message {
            Some(mut m) if m["jsonrpc"] == "2.0" && m.get("result").is_some() && status < 300 => {
                Ok(Reply {
                    result: m["result"].take(),
                    session: response.header("mcp-session-id").map(str::to_owned),
                })
            }
            Some(m) if m["jsonrpc"] == "2.0" && m["error"].is_object() => {
                Err(self.rpc_error(method, &m["error"]))
            }
            _ => Err(self.not_mcp(method, response)),
        }
    }

    /// Sends the notification `method`; the upstream must accept it (any 2xx).
    pub fn notify(&self, method: &str) -> Result<(), ToolError> {
        let body = serde_json::json!({ "jsonrpc": "2.0", "method": method });
        let response = self.post(&body)?;
        match response.status() {
            200..=299 => Ok(()),
            429 | 500.. => Err(self.failed(method, &response)),
            _ => Err(self.not_mcp(method, &response)),
        }
    }

    fn post(&self, body: &Value) -> Result<Response, ToolError> {
        Ok(self.request_to(body)?.send()?)
    }

    fn request_to(&self, body: &Value) -> Result<Request, ToolError> {
        let mut request = Request::post(self.url)
            .header("accept", ACCEPT)
            .no_redirects();
        for (name, value) in &self.headers {
            request = request.header(*name, value.as_bytes());
        }
        Ok(request.json(body)?)
    }

    fn failed(&self, method: &str, response: &Response) -> ToolError {
        let error = ToolError::upstream(
            "UPSTREAM_FAILED",
            format!(
                "the MCP server at {} answered `{method}` with HTTP {}: {}",
                self.url,
                response.status(),
                quote(&response.text())
            ),
        )
        .retryable(true);
        match response.header("retry-after") {
            Some(after) => error.with_remediation(format!("retry after {after} (Retry-After)")),
            None => error,
        }
    }

    fn rpc_error(&self, method: &str, error: &Value) -> ToolError {
        ToolError::upstream(
            "UPSTREAM_RPC_ERROR",
            format!(
                "the MCP server at {} answered `{method}` with JSON-RPC error {}: {}",
                self.url,
                error["code"],
                quote(error["message"].as_str().unwrap_or("(no message)"))
            ),
        )
    }

    fn not_mcp(&self, method: &str, response: &Response) -> ToolError {
        not_mcp(self.url, method, response)
    }
}

/// `UPSTREAM_NOT_MCP`: what answered `method` at `url` is not an MCP server.
pub fn not_mcp(url: &str, method: &str, response: &Response) -> ToolError {
    ToolError::upstream(
        "UPSTREAM_NOT_MCP",
        format!(
            "the server at {url} did not answer `{method}` as an MCP server (HTTP {}, content-type \
             {}): {}",
            response.status(),
            response.header("content-type").unwrap_or("none"),
            quote(&response.text())
        ),
    )
    .with_remediation("check that the manifest's upstream URL is the server's MCP endpoint")
}

/// At most [`MAX_QUOTE`] bytes of `text`, trimmed ([`gatehouse_sdk::http::quote`]).
pub fn quote(text: &str) -> String {
    gatehouse_sdk::http::quote(text, MAX_QUOTE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_bounded_at_a_character_boundary() {
        assert_eq!(quote("  short  "), "short");
        let long = "é".repeat(MAX_QUOTE);
        let quoted = quote(&long);
        assert_eq!(quoted.len(), MAX_QUOTE + "…".len());
        assert!(quoted.ends_with('…'));
    }
}
