//! What protocol 2025-11-25 asks of gatehouse that rmcp's stateless server does not do, for
//! approvals and tasks ([`super::approvals`], [`super::tasks`]):
//!
//! 1. **what a caller declared**: a stateless server sees every request alone, and a 2025-11-25
//!    `tools/call` says nothing of the client. The capabilities of a caller's last `initialize`
//!    are remembered per caller (tenant and principal), in this process, at most
//!    [`REMEMBERED`] callers; a caller not remembered (another gateway saw its `initialize`, or
//!    this one restarted since) is taken to declare nothing, so it gets the paused result;
//! 2. **tasks**: the `initialize` answer lists `capabilities.tasks`, every tool in `tools/list`
//!    lists `execution.taskSupport: "optional"`, a `tools/call` with `params.task` answers a
//!    `CreateTaskResult`, and `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` are
//!    answered here;
//! 3. **a held approval**: a paused `tools/call` from a caller that declared URL elicitation is
//!    answered on an event stream: an `elicitation/create` of the approval's console page
//!    first, then, once an approver decides (within `[mcp] approval_hold_ms`),
//!    `notifications/elicitation/complete` and the call's result (run once), or, past the hold,
//!    the URL elicitation error (-32042) naming the page, for the client to call again later;
//! 4. **the client's answers** to those elicitations come as JSON-RPC responses in POSTs of
//!    their own, matched to the held request by id in this process (answered 202). A decline
//!    or an error ends the hold with the paused result; an answer that reaches another gateway
//!    changes nothing, and the hold ends with the decision or the hold time.
//!
//! Requests reach this module only through the same checks as the direct path
//! ([`super::direct::Direct::checks`]): no `Origin`, an allowed `Host`, a protocol below
//! 2026-07-28.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use gatehouse_core::envelope::{OutcomeCode, ToolResultEnvelope};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::ErrorData;
use rmcp::model::RequestId;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::approvals::{self, ClientCan};
use super::caller::Caller;
use super::handler::{Gateway, task_error};
use super::result::to_mcp;
use super::tasks;
use crate::access_log::Note;

/// The most callers whose `initialize` capabilities are remembered; past it the memory starts
/// over (a caller forgotten gets the paused result until it initializes again).
pub const REMEMBERED: usize = 10_000;

/// The prefix of the ids of gatehouse's own requests to clients (elicitations).
pub(super) const OWN_ID: &str = "gatehouse-elicitation-";

/// The `_meta` key that ties a task's result to its task (2025-11-25).
const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

/// A response body.
type Body = BoxBody<Bytes, Infallible>;

/// The 2025-11-25 state of one gateway process: remembered capabilities, held elicitations.
#[derive(Debug, Default)]
pub struct Legacy {
    remembered: Mutex<HashMap<(String, String), ClientCan>>,
    /// Held elicitations by their (random) request id: whose they are, and where the answer
    /// goes.
    elicitations: Mutex<HashMap<String, (Caller, oneshot::Sender<Value>)>>,
}

/// A JSON-RPC message as far as routing goes.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// What a body asks of this module, read without acting on it (and so fuzzed on its own:
/// `super::fuzz`).
#[derive(Debug)]
pub(super) enum Asked {
    /// The client's answer to our elicitation `id`: its `result`, or its `error` as
    /// `{"error": ...}`.
    Answer { id: String, answer: Value },
    /// A request with an id: one of ours to answer or patch, or not ([`Route::Pass`]).
    Request {
        id: RequestId,
        method: String,
        /// `params`, `null` when absent.
        params: Value,
    },
    /// Not for this module: not a JSON-RPC message this module reads, a notification, or a
    /// response to a request not ours.
    Pass,
}

impl Asked {
    pub(super) fn read(body: &[u8]) -> Self {
        let Ok(peek) = serde_json::from_slice::<Peek>(body) else {
            return Self::Pass;
        };
        let Some(method) = peek.method else {
            // A response: the answer to one of our elicitations, or not ours.
            return match (peek.id, peek.result.is_some() || peek.error.is_some()) {
                (Some(RequestId::String(id)), true) if id.starts_with(OWN_ID) => {
                    let answer = peek
                        .result
                        .or(peek.error.map(|error| json!({ "error": error })))
                        .unwrap_or(Value::Null);
                    Self::Answer {
                        id: id.to_string(),
                        answer,
                    }
                }
                _ => Self::Pass,
            };
        };
        match peek.id {
            Some(id) => Self::Request {
                id,
                method,
                params: peek.params.unwrap_or(Value::Null),
            },
            None => Self::Pass,
        }
    }
}

/// What this module does with a request the direct path did not take.
pub enum Route {
    /// Answered here.
    Answered(Response<Body>),
    /// An `initialize` or `tools/list`: rmcp answers it, and [`Legacy::patch`] adds what
    /// 2025-11-25 tasks need.
    Patch(Patched),
    /// Not for this module.
    Pass,
}

/// Which answer of rmcp's [`Legacy::patch`] completes.
#[derive(Debug, Clone, Copy)]
pub enum Patched {
    /// `capabilities.tasks`.
    Initialize,
    /// `execution.taskSupport` on every tool.
    ToolsList,
}

impl Legacy {
    /// What the caller declared at its last `initialize` seen here.
    pub fn remembered(&self, caller: &Caller) -> ClientCan {
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(caller.tenant.clone(), caller.principal.id.clone()))
            .copied()
            .unwrap_or_default()
    }

    fn remember(&self, caller: &Caller, can: ClientCan) {
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if remembered.len() >= REMEMBERED {
            remembered.clear();
        }
        remembered.insert((caller.tenant.clone(), caller.principal.id.clone()), can);
    }

    /// Routes a 2025-11-25 request the direct path did not take (`body` passed its checks).
    pub async fn route(&self, gateway: &Gateway, caller: &Caller, body: &[u8]) -> Route {
        let (id, method, params) = match Asked::read(body) {
            Asked::Answer { id, answer } => {
                self.answered(caller, &id, answer);
                return Route::Answered(accepted());
            }
            Asked::Request { id, method, params } => (id, method, params),
            Asked::Pass => return Route::Pass,
        };
        let host = gateway.shared_host();
        let answer = match method.as_str() {
            "initialize" => {
                self.remember(
                    caller,
                    ClientCan::from_capabilities(params.get("capabilities")),
                );
                return Route::Patch(Patched::Initialize);
            }
            "tools/list" => return Route::Patch(Patched::ToolsList),
            "tasks/get" => match task_id(&params) {
                Ok(task_id) => tasks::owned(&host, caller, task_id)
                    .await
                    .map(|task| tasks::wire(&task, false))
                    .map_err(task_error),
                Err(error) => Err(error),
            },
            "tasks/result" => match task_id(&params) {
                Ok(task_id) => self.task_result(gateway, caller, task_id).await,
                Err(error) => Err(error),
            },
            "tasks/list" => {
                let cursor = params.get("cursor").and_then(Value::as_str);
                tasks::list(&host, caller, cursor)
                    .await
                    .map(|(tasks, next)| {
                        let mut page = json!({
                            "tasks": tasks.iter().map(|t| tasks::wire(t, false)).collect::<Vec<_>>(),
                        });
                        if let Some(next) = next {
                            page["nextCursor"] = json!(next);
                        }
                        page
                    })
                    .map_err(task_error)
            }
            "tasks/cancel" => match task_id(&params) {
                Ok(task_id) => tasks::cancel(&host, caller, task_id)
                    .await
                    .map(|task| tasks::wire(&task, false))
                    .map_err(task_error),
                Err(error) => Err(error),
            },
            _ => return Route::Pass,
        };
        Route::Answered(json_response(&id, answer))
    }

    /// `tasks/result`: the task's result once it ended, waiting for it (up to the hold time)
    /// while it works.
    async fn task_result(
        &self,
        gateway: &Gateway,
        caller: &Caller,
        task_id: &str,
    ) -> Result<Value, ErrorData> {
        let host = gateway.shared_host();
        let until = tokio::time::Instant::now() + gateway.approvals().hold();
        loop {
            let task = tasks::owned(&host, caller, task_id)
                .await
                .map_err(task_error)?;
            if task.status.is_terminal() {
                let Some(result) = tasks::result_of(&task) else {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "task `{task_id}` ended {} without a result: {}",
                            task.status.as_str(),
                            task.status_message.unwrap_or_default()
                        ),
                        None,
                    ));
                };
                let mut mcp = serde_json::to_value(to_mcp(&result)?).unwrap_or_default();
                mcp["_meta"][RELATED_TASK_META] = json!({ "taskId": task.id });
                return Ok(mcp);
            }
            if tokio::time::Instant::now() >= until {
                return Err(ErrorData::internal_error(
                    format!(
                        "task `{task_id}` is still {}; ask for its result again",
                        task.status.as_str()
                    ),
                    None,
                ));
            }
            tokio::time::sleep(tasks::POLL / 2).await;
        }
    }

    /// Completes rmcp's answer to a 2025-11-25 `initialize` or `tools/list` (see the module
    /// docs); any other answer, or one that does not read as JSON, is returned as it was.
    pub async fn patch(which: Patched, response: Response<Body>) -> Response<Body> {
        let (parts, body) = response.into_parts();
        let is_json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        let Ok(collected) = body.collect().await;
        let bytes = collected.to_bytes();
        let patched = is_json
            .then(|| serde_json::from_slice::<Value>(&bytes).ok())
            .flatten()
            .and_then(|mut message| {
                let result = message.get_mut("result")?;
                match which {
                    Patched::Initialize => {
                        result.get_mut("capabilities")?["tasks"] = json!({
                            "list": {},
                            "cancel": {},
                            "requests": { "tools": { "call": {} } },
                        });
                    }
                    Patched::ToolsList => {
                        for tool in result.get_mut("tools")?.as_array_mut()? {
                            tool["execution"] = json!({ "taskSupport": "optional" });
                        }
                    }
                }
                serde_json::to_vec(&message).ok()
            });
        let mut response = Response::from_parts(
            parts,
            Full::new(Bytes::from(patched.unwrap_or_else(|| bytes.to_vec()))).boxed(),
        );
        response.headers_mut().remove(http::header::CONTENT_LENGTH);
        response
    }

    /// A task-augmented `tools/call` whose first run gave `result`: its task.
    pub async fn task_call(
        gateway: &Gateway,
        caller: &Caller,
        id: &RequestId,
        tool: &str,
        result: &ToolResultEnvelope,
        ttl_ms: Option<u64>,
    ) -> Response<Body> {
        let answer = tasks::create(&gateway.shared_host(), caller, tool, result, ttl_ms)
            .await
            .map(|task| json!({ "task": tasks::wire(&task, false) }))
            .map_err(task_error);
        json_response(id, answer)
    }

    /// Whether a paused call of `caller` is held on an event stream: it declared URL
    /// elicitation and the approval has a console page.
    pub fn holds(
        &self,
        gateway: &Gateway,
        caller: &Caller,
        result: &ToolResultEnvelope,
    ) -> Option<String> {
        if result.outcome != OutcomeCode::ApprovalRequired || !self.remembered(caller).url {
            return None;
        }
        let approval = result.approval_id.as_deref()?;
        gateway.shared_host().approval_url(approval)
    }

    /// The held answer to `caller`'s request `id`, a paused call of `tool` (see the module docs):
    /// an event stream that elicits `url`, waits for the decision, then runs the call once.
    #[expect(
        clippy::too_many_arguments,
        reason = "one held request's parts, each used once by the task it starts"
    )]
    pub fn hold(
        self: &Arc<Self>,
        gateway: Gateway,
        caller: &Caller,
        id: RequestId,
        tool: &str,
        paused: ToolResultEnvelope,
        url: String,
        note: Note,
    ) -> Response<Body> {
        let (sender, events) = tokio::sync::mpsc::channel::<Bytes>(4);
        let body = Events(events);
        let approval_id = paused.approval_id.clone().unwrap_or_default();
        // Random, so that nobody else can answer (or cancel) this hold by guessing its id; and
        // only its caller's answer counts.
        let own = format!("{OWN_ID}{}", gatehouse_core::ids::random_hex(16));
        let (answer_to, answer) = oneshot::channel();
        self.elicitations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(own.clone(), (caller.clone(), answer_to));
        let message = approvals::url_message(tool, &approval_id);
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let elicitation = json!({
                "jsonrpc": "2.0",
                "id": own,
                "method": "elicitation/create",
                "params": { "mode": "url", "elicitationId": approval_id, "url": url, "message": message },
            });
            let _ = sender.send(event(&elicitation)).await;
            gateway.held(&approval_id).await;
            let host = gateway.shared_host();
            let until = tokio::time::Instant::now() + gateway.approvals().hold();
            let declined = async {
                match answer.await {
                    Ok(answer)
                        if answer.get("action").and_then(Value::as_str) == Some("accept") =>
                    {
                        std::future::pending::<()>().await;
                    }
                    // Declined, cancelled, an error, or dropped: stop holding.
                    _ => {}
                }
            };
            let decided = tokio::select! {
                decided = host.await_decision(&approval_id, until) => decided.ok().flatten(),
                () = declined => None,
                // The client hung up: nobody waits here any more (its retry runs the call).
                () = sender.closed() => {
                    this.forget(&own);
                    return;
                }
            };
            this.elicitations
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&own);
            let last = match decided {
                Some(approval)
                    if approval.status != gatehouse_store::ApprovalStatus::Pending
                        || approval.expired(gatehouse_store::now_ms()) =>
                {
                    let complete = json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/elicitation/complete",
                        "params": { "elicitationId": approval_id },
                    });
                    let _ = sender.send(event(&complete)).await;
                    let result = match gateway.resume(&approval_id, Some(&note)).await {
                        Ok(Some(result)) => result,
                        _ => paused,
                    };
                    answer_of(&id, &result)
                }
                Some(_) => {
                    let data = json!({
                        "elicitations": [{ "mode": "url", "elicitationId": approval_id, "url": url, "message": message }],
                    });
                    json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "error": {
                            "code": -32042,
                            "message": format!("{message} Call again once it is approved."),
                            "data": data,
                        },
                    })
                }
                None => answer_of(&id, &paused),
            };
            let _ = sender.send(event(&last)).await;
        });
        let mut response = Response::new(body.boxed());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        response.headers_mut().insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-cache"),
        );
        response
    }

    fn forget(&self, id: &str) {
        self.elicitations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Delivers `caller`'s answer to the hold it belongs to; an answer to another caller's
    /// hold is dropped.
    fn answered(&self, caller: &Caller, id: &str, answer: Value) {
        let mut elicitations = self
            .elicitations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if elicitations
            .get(id)
            .is_some_and(|(owner, _)| owner == caller)
            && let Some((_, waiting)) = elicitations.remove(id)
        {
            let _ = waiting.send(answer);
        }
    }
}

/// A held answer's body: the events the hold sends, each one frame, until it drops its sender.
struct Events(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(context)
            .map(|event| event.map(|bytes| Ok(http_body::Frame::data(bytes))))
    }
}

/// One server-sent event holding a JSON-RPC message.
fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// The JSON-RPC response to `id` carrying `result` as a tool result.
fn answer_of(id: &RequestId, result: &ToolResultEnvelope) -> Value {
    match to_mcp(result) {
        Ok(mcp) => json!({ "jsonrpc": "2.0", "id": id, "result": mcp }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    }
}

/// `params.taskId`.
pub(super) fn task_id(params: &Value) -> Result<&str, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params("params.taskId must be a string", None))
}

/// A JSON-RPC response, HTTP 200 (an error too: 2025-11-25 clients read a JSON-RPC error only
/// from a 2xx answer).
fn json_response(id: &RequestId, answer: Result<Value, ErrorData>) -> Response<Body> {
    let message = match answer {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    };
    let mut response = Response::new(Full::new(Bytes::from(message.to_string())).boxed());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// 202 Accepted, empty: how Streamable HTTP acknowledges a response a client posted.
fn accepted() -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_per_caller_and_bounded() {
        let legacy = Legacy::default();
        let alice = super::super::caller::caller("acme", "alice".into());
        let bob = super::super::caller::caller("acme", "bob".into());
        let can = ClientCan {
            url: true,
            form: true,
            tasks: false,
        };
        legacy.remember(&alice, can);
        assert_eq!(legacy.remembered(&alice), can);
        assert_eq!(legacy.remembered(&bob), ClientCan::default());
        for n in 0..REMEMBERED {
            legacy.remember(&super::super::caller::caller("t", format!("p{n}")), can);
        }
        assert!(legacy.remembered.lock().unwrap().len() <= REMEMBERED);
    }

    #[test]
    fn only_its_callers_answer_reaches_a_hold() {
        let legacy = Legacy::default();
        let alice = super::super::caller::caller("acme", "alice".into());
        let bob = super::super::caller::caller("acme", "bob".into());
        let (to, mut answer) = oneshot::channel();
        let id = "gatehouse-elicitation-0f";
        legacy
            .elicitations
            .lock()
            .unwrap()
            .insert(id.to_owned(), (alice.clone(), to));
        legacy.answered(&bob, id, json!({ "action": "decline" }));
        assert!(answer.try_recv().is_err(), "bob's answer is dropped");
        legacy.answered(&alice, id, json!({ "action": "accept" }));
        assert_eq!(answer.try_recv().unwrap()["action"], "accept");
    }

    #[test]
    fn events_are_one_data_line() {
        let event = event(&json!({"a": "b\nc"}));
        let text = std::str::from_utf8(&event).unwrap();
        assert_eq!(text, "event: message\ndata: {\"a\":\"b\\nc\"}\n\n");
    }
}
