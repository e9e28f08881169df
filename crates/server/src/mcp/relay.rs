//! What an adapter tells and asks its caller during a `tools/call`, on its way to the client:
//! the MCP side of [`gatehouse_host::relay`], the same for every protocol version.
//!
//! The host calls a [`CallRelay`] from inside the call; it turns each use into an [`Event`] on a
//! channel that the request's version reads while the call runs:
//! - progress, only when the request carried a `progressToken` (`_meta.progressToken`), as
//!   `notifications/progress` with that token;
//! - a log line, only at or above the level the caller set (2025-11-25 `logging/setLevel`,
//!   2026-07-28 `_meta["io.modelcontextprotocol/logLevel"]`; none set: none sent), as
//!   `notifications/message`;
//! - an ask, with where its answer goes: 2025-11-25 sends it as a request on the call's event
//!   stream and routes the client's posted response back; 2026-07-28 answers it from the
//!   request's `inputResponses` or ends the request with an `InputRequiredResult`.
//!
//! Notifications are dropped, not queued without end, when the client reads slower than the
//! adapter writes ([`QUEUE`]); an ask waits for room.

use std::sync::Arc;

use gatehouse_host::relay::{
    Ask, AskError, AskFuture, CallerCan, Cancel, Canceller, LogLevel, Relay, cancellation,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// How many events wait for the client at most: past it, notifications are dropped.
const QUEUE: usize = 64;

/// What the call has for the client.
#[derive(Debug)]
pub enum Event {
    /// A JSON-RPC notification to send on the call's stream.
    Notify(Value),
    /// An ask, and where its answer goes.
    Ask(Ask, oneshot::Sender<Result<Value, AskError>>),
}

/// What the request said it wants told (and what its client can be asked).
#[derive(Debug, Clone, Default)]
pub struct Wants {
    /// What the client declared it can be asked.
    pub can: CallerCan,
    /// The request's `progressToken`, if it asked for progress.
    pub progress_token: Option<Value>,
    /// The lowest level of log lines it wants; `None`: none.
    pub log_level: Option<LogLevel>,
}

impl Wants {
    /// Whether it wants nothing: no progress, no log lines, and its client can be asked
    /// nothing. A call that wants nothing needs no relay (its adapter's asks are refused as
    /// unavailable, and what it tells is dropped, as a relay would).
    pub fn nothing(&self) -> bool {
        self.can == CallerCan::default()
            && self.progress_token.is_none()
            && self.log_level.is_none()
    }
}

/// One call's relay: what the host tells it becomes [`Event`]s; through it the front end
/// cancels the call ([`CallRelay::cancel_call`]).
#[derive(Debug)]
pub struct CallRelay {
    wants: Wants,
    events: mpsc::Sender<Event>,
    canceller: Canceller,
    cancel: Cancel,
}

/// A relay for one call, and the events it will carry.
pub fn channel(wants: Wants) -> (Arc<CallRelay>, mpsc::Receiver<Event>) {
    let (events, receiver) = mpsc::channel(QUEUE);
    let (canceller, cancel) = cancellation();
    let relay = CallRelay {
        wants,
        events,
        canceller,
        cancel,
    };
    (Arc::new(relay), receiver)
}

impl CallRelay {
    /// The caller cancelled the call (it closed the stream of the request that waited on it,
    /// or cancelled its task): the host stops waiting on the call's upstream and tells it.
    pub fn cancel_call(&self) {
        self.canceller.cancel();
    }

    fn notify(&self, method: &str, params: &Value) {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        if self.events.try_send(Event::Notify(message)).is_err() {
            tracing::debug!(%method, "a notification for the caller was dropped: its stream is full or gone");
        }
    }
}

impl Relay for CallRelay {
    fn can(&self) -> CallerCan {
        self.wants.can
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.wants.progress_token else {
            return;
        };
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        self.notify("notifications/progress", &params);
    }

    fn log(&self, level: LogLevel, logger: Option<&str>, data: &Value) {
        if self.wants.log_level.is_none_or(|lowest| level < lowest) {
            return;
        }
        let mut params = json!({ "level": level, "data": data });
        if let Some(logger) = logger {
            params["logger"] = json!(logger);
        }
        self.notify("notifications/message", &params);
    }

    fn cancel(&self) -> Option<Cancel> {
        Some(self.cancel.clone())
    }

    fn ask(&self, ask: Ask) -> AskFuture<'_> {
        Box::pin(async move {
            let (answer_to, answer) = oneshot::channel();
            if self.events.send(Event::Ask(ask, answer_to)).await.is_err() {
                return Err(AskError::Failed(
                    "the client's request has ended".to_owned(),
                ));
            }
            answer.await.unwrap_or_else(|_| {
                Err(AskError::Failed(
                    "the client's request has ended".to_owned(),
                ))
            })
        })
    }
}

/// A log level as MCP names it.
pub fn level(name: &str) -> Option<LogLevel> {
    serde_json::from_value(Value::String(name.to_owned())).ok()
}

/// The client's answer to an ask (a JSON-RPC response's `result`, or `{"error": ...}`) as the
/// adapter gets it.
pub fn answered(answer: Value) -> Result<Value, AskError> {
    match answer.get("error") {
        Some(error) if answer.as_object().is_some_and(|a| a.len() == 1) => {
            Err(AskError::Failed(error.to_string()))
        }
        _ => Ok(answer),
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_host::relay::AskKind;

    use super::*;

    #[test]
    fn progress_needs_a_token_and_logs_a_level() {
        let (relay, mut events) = channel(Wants::default());
        relay.progress(1.0, None, None);
        relay.log(LogLevel::Emergency, None, &json!("x"));
        assert!(
            events.try_recv().is_err(),
            "nothing asked for, nothing sent"
        );

        let (relay, mut events) = channel(Wants {
            progress_token: Some(json!("p-1")),
            log_level: Some(LogLevel::Warning),
            ..Wants::default()
        });
        relay.progress(50.0, Some(100.0), Some("half"));
        relay.log(LogLevel::Info, None, &json!("below"));
        relay.log(LogLevel::Error, Some("db"), &json!({ "n": 1 }));
        let Ok(Event::Notify(progress)) = events.try_recv() else {
            panic!("progress");
        };
        assert_eq!(
            progress,
            json!({ "jsonrpc": "2.0", "method": "notifications/progress",
                    "params": { "progressToken": "p-1", "progress": 50.0, "total": 100.0, "message": "half" } })
        );
        let Ok(Event::Notify(log)) = events.try_recv() else {
            panic!("the error line");
        };
        assert_eq!(
            log["params"],
            json!({ "level": "error", "logger": "db", "data": { "n": 1 } })
        );
        assert!(
            events.try_recv().is_err(),
            "the info line is below the level"
        );
    }

    #[tokio::test]
    async fn an_ask_waits_for_its_answer_and_fails_when_the_request_is_gone() {
        let (relay, mut events) = channel(Wants::default());
        let ask = Ask {
            key: "k".to_owned(),
            kind: AskKind::Roots,
            params: json!({}),
        };
        let asking = tokio::spawn({
            let relay = Arc::clone(&relay);
            let ask = ask.clone();
            async move { relay.ask(ask).await }
        });
        let Some(Event::Ask(got, answer)) = events.recv().await else {
            panic!("the ask");
        };
        assert_eq!(got, ask);
        answer.send(answered(json!({ "roots": [] }))).unwrap();
        assert_eq!(asking.await.unwrap(), Ok(json!({ "roots": [] })));
        drop(events);
        assert!(matches!(relay.ask(ask).await, Err(AskError::Failed(_))));
        assert_eq!(
            answered(json!({ "error": { "code": -1, "message": "no" } })),
            Err(AskError::Failed(r#"{"code":-1,"message":"no"}"#.to_owned()))
        );
        assert_eq!(level("warning"), Some(LogLevel::Warning));
        assert_eq!(level("loud"), None);
    }
}
