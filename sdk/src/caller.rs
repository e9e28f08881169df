//! What an adapter tells and asks its caller while a call runs (contract 0.5.0): progress, log
//! lines for the caller, and questions the caller answers (elicitation: a form or a URL for the
//! user; sampling: a completion by the caller's model; roots).
//!
//! Each use must be declared in the adapter's `manifest.toml`, and an ask granted by the
//! operator (`[[caller.grant]]`), within the asks per call, sampling tokens and time per ask it
//! allows:
//!
//! ```toml
//! [caller]
//! progress = true                     # progress()
//! log = true                          # notify()
//! ask = ["elicitation", "sampling"]   # ask() and ask_all(), of these kinds
//! ```
//!
//! An undeclared progress report or log line is dropped; an undeclared, ungranted or
//! over-budget ask is [`AskError::Refused`] and nothing reaches the caller. A call whose
//! caller cannot be asked (a command-line call) gets [`AskError::Unavailable`]; one whose
//! client did not declare it can answer that kind, [`AskError::NotSupported`]. While an ask
//! waits for its answer the call's time budget does not run. Every ask and its answer are in
//! the call's audit record, a form's sensitive fields (`"format": "password"`,
//! `"writeOnly": true`, or a name such as `password` or `api_key`) as hashes; an ask never
//! carries one of the gateway's credentials.
//!
//! ```no_run
//! use gatehouse_sdk::caller::{self, Request};
//! use gatehouse_sdk::serde_json::json;
//!
//! # fn run() -> gatehouse_sdk::Result<()> {
//! caller::progress(0.0, Some(2.0), Some("looking up"));
//! let answer = caller::ask(Request::form(
//!     "confirm",
//!     "Delete the order?",
//!     json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } }),
//! ))?;
//! let accepted = answer["action"] == "accept" && answer["content"]["ok"] == true;
//! caller::progress(2.0, Some(2.0), None);
//! # Ok(()) }
//! ```
//!
//! Natively (unit tests) nobody can be asked: [`can`] is all false, progress and log lines go
//! to stderr, and every ask is [`AskError::Unavailable`].

use serde_json::{Value, json};

use crate::error::{ErrorKind, ToolError};

/// What the caller declared it can be asked (all false when nobody can be asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Can {
    /// Form elicitation (`requestedSchema`).
    pub elicit_form: bool,
    /// URL elicitation (`"mode": "url"`).
    pub elicit_url: bool,
    /// Sampling.
    pub sample: bool,
    /// Roots.
    pub roots: bool,
}

/// The severity of a log line for the caller (MCP's levels, after syslog's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Debug-level messages.
    Debug,
    /// Informational messages.
    Info,
    /// Normal but significant conditions.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// What an ask asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskKind {
    /// `elicitation/create`: a form, or a URL to open, for the user.
    Elicitation,
    /// `sampling/createMessage`: a completion by the caller's model.
    Sampling,
    /// `roots/list`: the caller's roots.
    Roots,
}

/// One question for the caller: its key (its name within the call: 1-64 of
/// `[A-Za-z0-9_.-]`, each used once per call), its kind, and the MCP request's params.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Its name within the call.
    pub key: String,
    /// What it asks.
    pub kind: AskKind,
    /// The MCP request's params: `elicitation/create`'s, `sampling/createMessage`'s, or `{}`.
    pub params: Value,
}

impl Request {
    /// A request of `kind` with `params` as MCP states them.
    pub fn new(key: impl Into<String>, kind: AskKind, params: Value) -> Self {
        Self {
            key: key.into(),
            kind,
            params,
        }
    }

    /// A form for the user: `message`, and `schema`, the object schema of the fields asked
    /// (`requestedSchema`). The answer is `{"action": "accept" | "decline" | "cancel",
    /// "content": {...}}`.
    pub fn form(key: impl Into<String>, message: &str, schema: Value) -> Self {
        let mut params = json!({ "message": message });
        params["requestedSchema"] = schema;
        Self::new(key, AskKind::Elicitation, params)
    }

    /// A URL for the user to open (`"mode": "url"`), under `elicitation_id`.
    pub fn url(key: impl Into<String>, message: &str, url: &str, elicitation_id: &str) -> Self {
        Self::new(
            key,
            AskKind::Elicitation,
            json!({ "mode": "url", "message": message, "url": url, "elicitationId": elicitation_id }),
        )
    }

    /// A completion of `prompt` by the caller's model, of at most `max_tokens` (within the
    /// operator's `max_sampling_tokens`). The answer is `{"role", "content", "model", ...}`.
    pub fn sample(key: impl Into<String>, prompt: &str, max_tokens: u32) -> Self {
        Self::new(
            key,
            AskKind::Sampling,
            json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
                "maxTokens": max_tokens,
            }),
        )
    }

    /// The caller's roots. The answer is `{"roots": [{"uri", "name"}, ...]}`.
    pub fn roots(key: impl Into<String>) -> Self {
        Self::new(key, AskKind::Roots, json!({}))
    }
}

/// Why an ask has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskError {
    /// Nobody can be asked during this call.
    Unavailable(String),
    /// The caller did not declare it can answer this kind of request; nothing was sent.
    NotSupported(String),
    /// The gateway refused before asking (manifest, operator grant, budget, malformed, a
    /// credential); nothing was sent.
    Refused(String),
    /// The caller answered with an error, hung up, or answered too much.
    Failed(String),
    /// No answer within the operator's timeout, in seconds.
    Timeout(u64),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(why)
            | Self::NotSupported(why)
            | Self::Refused(why)
            | Self::Failed(why) => f.write_str(why),
            Self::Timeout(seconds) => write!(f, "the caller did not answer within {seconds} s"),
        }
    }
}

impl std::error::Error for AskError {}

/// `?` on an ask: a tool error with code `CALLER_UNAVAILABLE`, `CALLER_NOT_SUPPORTED`,
/// `ASK_REFUSED`, `ASK_FAILED` or `ASK_TIMEOUT`, the reason its message.
impl From<AskError> for ToolError {
    fn from(error: AskError) -> Self {
        let (kind, code, remediation) = match &error {
            AskError::Unavailable(_) => (
                ErrorKind::Unavailable,
                "CALLER_UNAVAILABLE",
                "call the tool from a client that can answer it",
            ),
            AskError::NotSupported(_) => (
                ErrorKind::Unavailable,
                "CALLER_NOT_SUPPORTED",
                "call the tool from a client that declares this capability",
            ),
            AskError::Refused(_) => (
                ErrorKind::Internal,
                "ASK_REFUSED",
                "ask the operator to grant it in [[caller.grant]]",
            ),
            AskError::Failed(_) => (ErrorKind::Upstream, "ASK_FAILED", "try again"),
            AskError::Timeout(_) => (
                ErrorKind::Unavailable,
                "ASK_TIMEOUT",
                "call again and answer in time",
            ),
        };
        ToolError::new(kind, code, error.to_string()).with_remediation(remediation)
    }
}

/// What the caller declared it can be asked.
pub fn can() -> Can {
    host::can()
}

/// Reports progress: `progress` of `total` (if known), with a `message`. Reaches the caller
/// when its request asked for progress.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    host::progress(progress, total, message);
}

/// A log line for the caller, `data` any JSON (a string for plain text), under `logger`.
pub fn notify(level: LogLevel, logger: Option<&str>, data: &Value) {
    host::notify(level, logger, &data.to_string());
}

/// Asks the caller and waits for the answer (the MCP result, as JSON).
pub fn ask(request: Request) -> Result<Value, AskError> {
    ask_all(vec![request])
        .pop()
        .unwrap_or_else(|| Err(AskError::Failed("no answer came back".to_owned())))
}

/// Asks several questions at once, and waits for every answer, in order: the caller gets them
/// together. Each counts as one ask against the operator's `max_asks`.
pub fn ask_all(requests: Vec<Request>) -> Vec<Result<Value, AskError>> {
    host::ask_all(requests)
}

#[cfg(target_arch = "wasm32")]
mod host {
    use super::{AskError, AskKind, Can, LogLevel, Request};
    use crate::adapter::bindings::gatehouse::plugin::caller as wit;

    /// An answer's JSON text parsed; the host sends JSON, so this fails only on a broken host.
    fn parse(answer: &str) -> Result<serde_json::Value, AskError> {
        serde_json::from_str(answer)
            .map_err(|e| AskError::Failed(format!("the answer is not JSON: {e}")))
    }

    pub fn can() -> Can {
        let can = wit::can();
        Can {
            elicit_form: can.elicit_form,
            elicit_url: can.elicit_url,
            sample: can.sample,
            roots: can.roots,
        }
    }

    pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
        wit::progress(progress, total, message);
    }

    pub fn notify(level: LogLevel, logger: Option<&str>, data: &str) {
        let level = match level {
            LogLevel::Debug => wit::LogLevel::Debug,
            LogLevel::Info => wit::LogLevel::Info,
            LogLevel::Notice => wit::LogLevel::Notice,
            LogLevel::Warning => wit::LogLevel::Warning,
            LogLevel::Error => wit::LogLevel::Error,
            LogLevel::Critical => wit::LogLevel::Critical,
            LogLevel::Alert => wit::LogLevel::Alert,
            LogLevel::Emergency => wit::LogLevel::Emergency,
        };
        wit::notify(level, logger, data);
    }

    pub fn ask_all(requests: Vec<Request>) -> Vec<Result<serde_json::Value, AskError>> {
        let requests: Vec<wit::InputRequest> = (requests.into_iter())
            .map(|request| wit::InputRequest {
                key: request.key,
                kind: match request.kind {
                    AskKind::Elicitation => wit::AskKind::Elicitation,
                    AskKind::Sampling => wit::AskKind::Sampling,
                    AskKind::Roots => wit::AskKind::Roots,
                },
                params: request.params.to_string(),
            })
            .collect();
        (wit::ask_all(&requests).into_iter())
            .map(|answer| match answer {
                Ok(text) => parse(&text),
                Err(wit::AskError::Unavailable(why)) => Err(AskError::Unavailable(why)),
                Err(wit::AskError::NotSupported(why)) => Err(AskError::NotSupported(why)),
                Err(wit::AskError::Refused(why)) => Err(AskError::Refused(why)),
                Err(wit::AskError::Failed(why)) => Err(AskError::Failed(why)),
                Err(wit::AskError::Timeout(seconds)) => Err(AskError::Timeout(seconds)),
            })
            .collect()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod host {
    use super::{AskError, Can, LogLevel, Request};

    pub fn can() -> Can {
        Can::default()
    }

    pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
        eprintln!(
            "[caller progress] {progress}/{total:?} {}",
            message.unwrap_or("")
        );
    }

    pub fn notify(level: LogLevel, logger: Option<&str>, data: &str) {
        eprintln!(
            "[caller {level:?}] {}{data}",
            logger.map(|l| format!("{l}: ")).unwrap_or_default()
        );
    }

    pub fn ask_all(requests: Vec<Request>) -> Vec<Result<serde_json::Value, AskError>> {
        (requests.into_iter())
            .map(|_| {
                Err(AskError::Unavailable(
                    "nobody can be asked outside the gateway".to_owned(),
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natively_nobody_can_be_asked_and_the_error_converts() {
        assert_eq!(can(), Can::default());
        progress(1.0, None, Some("step"));
        notify(LogLevel::Info, Some("t"), &json!("line"));
        let error = ask(Request::roots("r")).unwrap_err();
        assert!(matches!(error, AskError::Unavailable(_)));
        let tool: ToolError = AskError::Refused("not granted".to_owned()).into();
        assert_eq!(
            (tool.code.as_str(), tool.message.as_str()),
            ("ASK_REFUSED", "not granted")
        );
        let sample = Request::sample("s", "hi", 50);
        assert_eq!(sample.params["maxTokens"], 50);
        assert_eq!(sample.params["messages"][0]["content"]["text"], "hi");
    }
}
