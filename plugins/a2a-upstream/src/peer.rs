//! One JSON-RPC request of the agent (A2A 1.0's JSON-RPC binding): its answer read whole, or
//! its event stream read as it arrives.

use std::cell::Cell;

use gatehouse_sdk::ToolError;
use gatehouse_sdk::http::{self, HttpError, Request, Response};
use gatehouse_sdk::serde_json::{self, Value, json};
use gatehouse_sdk::sse::{Events, is_event_stream};

/// The protocol version every request names (A2A 1.0 §3.6: without it, a request is 0.3's).
pub const VERSION: &str = "1.0";
/// Bytes of what the agent said that an error message quotes, at most.
pub const MAX_QUOTE: usize = 1024;

/// The agent at `url`.
pub struct Peer<'a> {
    /// Its JSON-RPC endpoint.
    pub url: &'a str,
    /// Whether a request was lost: its caller cancelled the call, or its connection broke.
    lost: Cell<bool>,
}

/// Whether to read on in an event stream.
pub enum Flow {
    /// Read the next event.
    More,
    /// The answer is whole: stop reading.
    Done,
}

impl<'a> Peer<'a> {
    /// The agent whose JSON-RPC endpoint is `url`.
    pub fn new(url: &'a str) -> Self {
        Self {
            url,
            lost: Cell::new(false),
        }
    }

    /// Whether a request was lost (the call was cancelled, or a connection broke), so the
    /// agent may still be working on what it asked.
    pub fn lost(&self) -> bool {
        self.lost.get()
    }

    /// Sends `method` with `params`: the JSON-RPC `result`. A JSON-RPC error is
    /// `A2A_RPC_ERROR`; HTTP 429 and 5xx `A2A_FAILED` (retryable); an answer that is not
    /// JSON-RPC `A2A_NOT_A2A`; the client's errors as the SDK maps them.
    pub fn call(&self, method: &str, params: &Value) -> Result<Value, ToolError> {
        let response = self.sent(self.request(method, params, "application/json")?.send())?;
        self.answer(method, &response)
    }

    /// Sends `method` with `params` and reads its event stream: each event's `result`, in
    /// order, goes to `each` until it says [`Flow::Done`] or the stream ends. An answer that
    /// is not a stream (an error, or an agent that answers whole) goes to `each` once.
    pub fn stream(
        &self,
        method: &str,
        params: &Value,
        each: &mut dyn FnMut(Value) -> Result<Flow, ToolError>,
    ) -> Result<(), ToolError> {
        let request = self.request(method, params, "text/event-stream")?;
        let mut streaming = self.sent(request.send_streaming())?;
        if streaming.status() >= 300 || !is_event_stream(streaming.header("content-type")) {
            let response = self.sent(streaming.into_response())?;
            each(self.answer(method, &response)?)?;
            return Ok(());
        }
        let mut events = Events::default();
        while let Some(chunk) = self.sent(streaming.next_chunk())? {
            for message in events.push(&chunk) {
                if let Flow::Done = each(self.result(method, message)?)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn request(&self, method: &str, params: &Value, accept: &str) -> Result<Request, HttpError> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        Request::post(self.url)
            .header("accept", accept)
            .header("a2a-version", VERSION)
            .no_redirects()
            .json(&body)
    }

    /// `result` as the call's, noting a lost request.
    fn sent<T>(&self, result: Result<T, HttpError>) -> Result<T, ToolError> {
        result.map_err(|error| {
            if matches!(error, HttpError::Transport(_)) {
                self.lost.set(true);
            }
            error.into()
        })
    }

    /// The `result` of `response`, read whole.
    fn answer(&self, method: &str, response: &Response) -> Result<Value, ToolError> {
        let status = response.status();
        if status == 429 || status >= 500 {
            let error = ToolError::upstream(
                "A2A_FAILED",
                format!(
                    "the A2A agent at {} answered `{method}` with HTTP {status}: {}",
                    self.url,
                    http::quote(&response.text(), MAX_QUOTE)
                ),
            )
            .retryable(true);
            return Err(match response.header("retry-after") {
                Some(after) => error.with_remediation(format!("retry after {after} (Retry-After)")),
                None => error,
            });
        }
        let message = serde_json::from_slice::<Value>(response.bytes())
            .ok()
            .filter(|m| m["jsonrpc"] == "2.0" && (status < 300 || m["error"].is_object()));
        match message {
            Some(message) => self.result(method, message),
            None => Err(ToolError::upstream(
                "A2A_NOT_A2A",
                format!(
                    "the server at {} did not answer `{method}` as an A2A agent (HTTP {status}, \
                     content-type {}): {}",
                    self.url,
                    response.header("content-type").unwrap_or("none"),
                    http::quote(&response.text(), MAX_QUOTE)
                ),
            )
            .with_remediation(
                "check that the manifest's upstream URL is the agent's JSON-RPC endpoint",
            )),
        }
    }

    /// The `result` of a JSON-RPC `message`, or its error.
    fn result(&self, method: &str, mut message: Value) -> Result<Value, ToolError> {
        if let Some(error) = message.get("error").filter(|e| e.is_object()) {
            return Err(ToolError::upstream(
                "A2A_RPC_ERROR",
                format!(
                    "the A2A agent at {} answered `{method}` with JSON-RPC error {}: {}",
                    self.url,
                    error["code"],
                    http::quote(
                        error["message"].as_str().unwrap_or("(no message)"),
                        MAX_QUOTE
                    )
                ),
            ));
        }
        match message.get_mut("result") {
            Some(result) if result.is_object() => Ok(result.take()),
            _ => Err(ToolError::upstream(
                "A2A_NOT_A2A",
                format!(
                    "the A2A agent at {} answered `{method}` with neither a result nor an error",
                    self.url
                ),
            )),
        }
    }
}
