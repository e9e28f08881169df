//! What an adapter tells and asks the caller while its call runs (contract 0.5.0, the
//! `caller` interface), carried to whoever serves the call: the MCP server renders progress and
//! log lines as notifications on the call's stream, and asks (elicitation, sampling, roots) as
//! requests to the client (2025-11-25) or an `InputRequiredResult` (2026-07-28).
//!
//! A front end hands its [`Relay`] to [`Host::call_relayed`](crate::Host::call_relayed); a call
//! without one ([`Host::call`](crate::Host::call)) drops progress and log lines, and every ask
//! is [`AskError::Unavailable`]. The host checks each use against the adapter's manifest (what it
//! declares it may do) and the operator's grant (what it may do here, within which budgets)
//! before the relay sees it, and records each ask and its answer in the call's audit record.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The severity of a log line for the caller (MCP's, syslog's eight levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

/// What an adapter may ask of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskKind {
    /// `elicitation/create`: a form, or a URL to open, for the user.
    Elicitation,
    /// `sampling/createMessage`: a completion by the caller's model.
    Sampling,
    /// `roots/list`: the caller's roots.
    Roots,
}

impl AskKind {
    /// The MCP method of the request.
    pub fn method(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }
}

/// MCP's client capabilities of a client that can be asked `asks` (elicitation in both of
/// its modes), as `initialize` and `_meta` declare them.
pub fn client_capabilities(asks: &[AskKind]) -> Value {
    let mut capabilities = serde_json::Map::new();
    for ask in asks {
        let (name, value) = match ask {
            AskKind::Elicitation => ("elicitation", serde_json::json!({ "form": {}, "url": {} })),
            AskKind::Sampling => ("sampling", serde_json::json!({})),
            AskKind::Roots => ("roots", serde_json::json!({})),
        };
        capabilities.insert(name.to_owned(), value);
    }
    Value::Object(capabilities)
}

/// One ask: its name within the call (2026-07-28's `inputRequests` key), what it is, and its
/// params as MCP states them (`elicitation/create`'s, `sampling/createMessage`'s, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The name of the ask within its call, chosen by the adapter (`user_name`): an answer
    /// already sent under that name (a 2026-07-28 retry's `inputResponses`) answers it.
    pub key: String,
    /// What is asked.
    pub kind: AskKind,
    /// The request's params.
    pub params: Value,
}

/// What the client declared it can be asked, as the front end learned it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallerCan {
    /// Form-mode elicitation.
    pub elicit_form: bool,
    /// URL-mode elicitation.
    pub elicit_url: bool,
    /// Sampling.
    pub sample: bool,
    /// Roots.
    pub roots: bool,
}

/// Why an ask has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Nobody can be asked: the call has no relay (a library call, a task running unattended).
    #[error("nobody can be asked during this call: {0}")]
    Unavailable(String),
    /// The client did not declare it can answer this kind of request.
    #[error("the client did not declare that it can answer `{0}`")]
    NotSupported(&'static str),
    /// The adapter's manifest does not declare it, or the operator did not grant it, or a
    /// budget is spent: the host refused before asking.
    #[error("refused by the gateway: {0}")]
    Refused(String),
    /// The client answered with an error, or hung up.
    #[error("the client could not answer: {0}")]
    Failed(String),
    /// No answer within the time allowed.
    #[error("no answer within {0} s")]
    Timeout(u64),
}

/// An ask in flight.
pub type AskFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, AskError>> + Send + 'a>>;

/// Whether a call's caller cancelled it (a 2026-07-28 client that closed its request's stream,
/// a 2025-11-25 one that sent `notifications/cancelled`), as the front end learned it, and
/// when: cheap to clone, every clone sees it. The host stops waiting on the call's upstream: a
/// stdio server is sent `notifications/cancelled`, an HTTP upstream's response is closed
/// (which a 2026-07-28 server takes as the cancellation; an adapter of a 2025-11-25 server
/// tells it, in a request the egress gate still lets out for a moment, see
/// `crate::egress::FAREWELL`).
#[derive(Debug, Clone)]
pub struct Cancel(tokio::sync::watch::Receiver<Option<Instant>>);

/// Ends once `cancel` says the call is cancelled; never without one.
pub async fn until_cancelled(cancel: Option<Cancel>) {
    match cancel {
        Some(cancel) => cancel.cancelled().await,
        None => std::future::pending().await,
    }
}

/// What cancels a call ([`cancellation`]).
#[derive(Debug)]
pub struct Canceller(tokio::sync::watch::Sender<Option<Instant>>);

/// A call's [`Cancel`], and what sets it.
pub fn cancellation() -> (Canceller, Cancel) {
    let (set, seen) = tokio::sync::watch::channel(None);
    (Canceller(set), Cancel(seen))
}

impl Canceller {
    /// The caller cancelled the call (now, unless it already had).
    pub fn cancel(&self) {
        self.0
            .send_if_modified(|at| at.is_none() && at.replace(Instant::now()).is_none());
    }
}

impl Cancel {
    /// Whether the call is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// When the call was cancelled, if it was.
    pub fn cancelled_at(&self) -> Option<Instant> {
        *self.0.borrow()
    }

    /// Ends once the call is cancelled; never, if its [`Canceller`] is dropped first.
    pub async fn cancelled(mut self) {
        if self.0.wait_for(Option::is_some).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Where what an adapter tells and asks its caller goes: implemented by the front end serving
/// the call, once per call.
pub trait Relay: Send + Sync {
    /// What the client declared it can be asked.
    fn can(&self) -> CallerCan;

    /// Progress of the call (`notifications/progress`, when the request asked for it).
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>);

    /// A log line for the caller (`notifications/message`, at or above the level it set).
    fn log(&self, level: LogLevel, logger: Option<&str>, data: &Value);

    /// Asks the client, and waits for its answer (the result of its response, as JSON).
    fn ask(&self, ask: Ask) -> AskFuture<'_>;

    /// Whether the caller cancels the call, if the front end can tell.
    fn cancel(&self) -> Option<Cancel> {
        None
    }
}
