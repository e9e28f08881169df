//! Protocol 2025-11-25, and the versions before it that share its initialize handshake
//! (2025-06-18, 2025-03-26, 2024-11-05): requests that rely on what `initialize` negotiated.
//!
//! The gateway keeps no session state: each request stands alone, and what a caller declared
//! at `initialize` is remembered per caller in this process ([`session`]). The
//! `Mcp-Session-Id` it names at `initialize` is kept nowhere; it only scopes a client's
//! `notifications/cancelled` to its own calls ([`session`], item 6). The methods:
//! - `initialize`: the negotiated version (the client's, if it has a handshake, else
//!   2025-11-25), the server's capabilities (tools, and tasks in both this version's shape,
//!   `capabilities.tasks`, and the 2026-07-28 extension's), its name and instructions; a fresh
//!   `Mcp-Session-Id` header;
//! - `ping`: `{}`;
//! - `logging/setLevel`: the level of the log lines the caller's calls tell it from now on
//!   ([`session`]; none before it sets one);
//! - `tools/list`: the caller's tools, each with its `execution.taskSupport` (`optional`
//!   unless its manifest says otherwise);
//! - `resources/list`, `resources/templates/list`, `resources/read`, `prompts/list`,
//!   `prompts/get` and `completion/complete` ([`super::content`]);
//! - `resources/subscribe`, `resources/unsubscribe` ([`session`]), and a `GET` of the endpoint:
//!   the caller's event stream of list changes and of updates of what it subscribed to
//!   ([`listen`], [`super::watch`]);
//! - `tools/call` through the shared call path; with `params.task`, a task (a
//!   `CreateTaskResult`; a `required` tool without it, a `forbidden` one with it: -32601); a call paused for approval held on an event stream for a caller that
//!   declared URL elicitation ([`session`]); a call whose adapter tells or asks its caller
//!   something (progress, log lines, elicitation, sampling, roots: [`super::relay`]) answered
//!   on an event stream, its asks as requests the client answers in POSTs of their own; else
//!   the result as JSON in one piece, written in one pass ([`super::result::response`]);
//! - `tasks/get`, `tasks/result` (which waits, up to the hold time, for a working task),
//!   `tasks/list` and `tasks/cancel`, of the caller's own tasks;
//! - anything else: -32601.
//!
//! Every JSON-RPC error is HTTP 200: these clients read one only from a 2xx answer.

pub mod session;

use std::sync::Arc;

use bytes::Bytes;
use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_host::plugin::manifest::TaskSupport;
use gatehouse_host::relay::{AskError, Relay};
use http::{HeaderMap, Response, StatusCode};
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, ProtocolVersion, RequestId};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use self::session::Session;
use super::approvals::ClientCan;
use super::call::{Gateway, How};
use super::caller::Caller;
use super::message::{Call, Params, Request};
use super::relay::{self, Event, Wants};
use super::reply::{self, Answer, Body, Era};
use super::result::{response, to_mcp};
use super::tasks::{self, task_error};
use super::watch::{Filter, Uris, Watchers};
use crate::access_log::Note;

/// The header that names a client's session (item 6 of [`session`]).
const SESSION_ID: &str = "mcp-session-id";

/// The session id a request carries, if it is text.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_ID)?.to_str().ok()
}

/// The `_meta` key that ties a task's result to its task (2025-11-25).
const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

/// Answers one request of `caller` at `version` (see the module docs).
pub async fn answer(
    gateway: &Gateway,
    session: &Arc<Session>,
    version: ProtocolVersion,
    caller: Caller,
    request: Request,
    headers: &HeaderMap,
    note: &Note,
) -> Response<Body> {
    let era = Era::Handshake(version);
    let Request { id, method, params } = request;
    let answer = match (method.as_str(), params) {
        ("tools/call", Params::Call(call)) => {
            return call_tool(gateway, session, caller, id, *call, headers, note).await;
        }
        ("initialize", Params::Other(params)) => {
            session.remember(
                &caller,
                ClientCan::from_capabilities(params.get("capabilities")),
            );
            let initialized = initialize(gateway, &params);
            let named = initialized.is_ok();
            let mut response = reply::answer(&era, &id, initialized);
            if named {
                let name = gatehouse_core::ids::random_hex(16);
                if let Ok(name) = http::HeaderValue::from_str(&name) {
                    response.headers_mut().insert(SESSION_ID, name);
                }
            }
            return response;
        }
        ("ping", _) => Ok(json!({})),
        ("logging/setLevel", Params::Other(params)) => {
            match params.get("level").and_then(Value::as_str).and_then(relay::level) {
                Some(level) => {
                    session.set_level(&caller, level);
                    Ok(json!({}))
                }
                None => Err(ErrorData::invalid_params(
                    "params.level must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    None,
                )
                .into()),
            }
        }
        ("tools/list", _) => tools(gateway, &caller),
        ("resources/list", _) => Ok(gateway.resource_list(&caller)),
        ("resources/templates/list", _) => Ok(gateway.template_list(&caller)),
        ("prompts/list", _) => Ok(gateway.prompt_list(&caller)),
        ("resources/read", Params::Other(params)) => gateway.read_resource(&caller, &params).await,
        ("resources/subscribe" | "resources/unsubscribe", Params::Other(params)) => {
            subscription(gateway, session, &caller, &method, &params)
        }
        ("prompts/get", Params::Other(params)) => gateway.get_prompt(&caller, &params).await,
        ("completion/complete", Params::Other(params)) => gateway.complete(&caller, &params).await,
        ("tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel", Params::Other(params)) => {
            task_request(gateway, &caller, &method, &params).await
        }
        _ => Err(reply::Failure::no_method(&method)),
    };
    reply::answer(&era, &id, answer)
}

/// `resources/subscribe` of a resource `caller` may read (else -32602 with `data.uri`, as
/// `resources/read` has it), and `resources/unsubscribe`: its event streams say when one it
/// subscribed to changes ([`listen`]).
fn subscription(
    gateway: &Gateway,
    session: &Session,
    caller: &Caller,
    method: &str,
    params: &serde_json::Map<String, Value>,
) -> Answer {
    let uri = (params.get("uri").and_then(Value::as_str))
        .ok_or_else(|| ErrorData::invalid_params("params.uri must be a string", None))?;
    if method == "resources/unsubscribe" {
        session.unsubscribe(caller, uri);
        return Ok(json!({}));
    }
    if gateway.host().resource_at(&caller.tenant, uri).is_none() {
        return Err(ErrorData::invalid_params(
            format!("resource not found: {uri}"),
            Some(json!({ "uri": uri })),
        )
        .into());
    }
    if !session.subscribe(caller, uri) {
        return Err(ErrorData::invalid_params(
            format!(
                "this caller is subscribed to {} resources, the most it may be; unsubscribe from one first",
                session::MOST_SUBSCRIBED
            ),
            None,
        )
        .into());
    }
    Ok(json!({}))
}

/// A `GET` of the endpoint: `caller`'s event stream of list changes and of the resources it
/// subscribed to, as it subscribes and unsubscribes ([`crate::mcp::watch`]).
pub fn listen(
    gateway: &Gateway,
    session: &Arc<Session>,
    watchers: &Arc<Watchers>,
    caller: Caller,
    connected: Option<tokio::sync::broadcast::Receiver<crate::oauth::Connected>>,
) -> Response<Body> {
    let filter = Filter {
        tools: true,
        resources: true,
        prompts: true,
    };
    let (session, subscriber) = (Arc::clone(session), caller.clone());
    let uris = Uris::Subscribed(Box::new(move || session.subscribed(&subscriber)));
    watchers.stream(gateway.clone(), caller, filter, uris, None, None, connected)
}

/// `initialize`: the negotiated version, capabilities, name and instructions.
fn initialize(gateway: &Gateway, params: &serde_json::Map<String, Value>) -> Answer {
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|known| known.as_str() == requested && known.has_initialize())
        .cloned()
        .unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE);
    let mut info = gateway.info();
    info.protocol_version = version;
    let mut result = serde_json::to_value(info).map_err(|e| {
        ErrorData::internal_error(format!("the server's info does not serialize: {e}"), None)
    })?;
    result["capabilities"]["tasks"] = json!({
        "list": {},
        "cancel": {},
        "requests": { "tools": { "call": {} } },
    });
    Ok(result)
}

/// `tools/list`: a tool may run as a task (`params.task`) unless its manifest says
/// `forbidden`.
fn tools(gateway: &Gateway, caller: &Caller) -> Answer {
    Ok(gateway.tool_list(caller, Some(TaskSupport::Optional))?)
}

/// `tools/call`, run on a task of its own, so that a client that hangs up does not cut a
/// governed call short. Answered as JSON in one piece, unless the adapter tells or asks its
/// caller something while it runs: then an event stream, which carries that, and the result
/// last ([`stream`]).
async fn call_tool(
    gateway: &Gateway,
    session: &Arc<Session>,
    caller: Caller,
    id: RequestId,
    call: Call,
    headers: &HeaderMap,
    note: &Note,
) -> Response<Body> {
    let (gateway, session, traceparent, client_session, note) = (
        gateway.clone(),
        Arc::clone(session),
        super::call::traceparent(headers),
        session_id(headers).map(str::to_owned),
        note.clone(),
    );
    let answered = tokio::spawn(async move {
        let Call { params, meta, task } = call;
        let tool = params.name.to_string();
        if let Err(error) = task_support_allows(&gateway, &caller, &tool, task.is_some()) {
            return reply::answer(&era_2025(), &id, Err(error.into()));
        }
        // A task runs unattended: nobody is there to be told or asked. A call that wants
        // nothing told, from a client that can be asked nothing, runs here, in one piece, on
        // no task of its own (the common call, kept as cheap as it was); with a relay only if
        // its client can cancel it (it holds a session id): the relay, which then never has
        // anything to tell, is how a `notifications/cancelled` reaches the call.
        let (can, log_level) = session.wants(&caller);
        let wants = Wants {
            can: can.asks(),
            progress_token: meta.get("progressToken").cloned(),
            log_level,
        };
        let told = !wants.nothing();
        let (relay, events, cancellable) = match task {
            None if told || client_session.is_some() => {
                let (relay, events) = relay::channel(wants);
                let cancellable = (client_session.as_deref())
                    .map(|name| session.cancellable(&caller, name, &id, &relay));
                (Some(relay as Arc<dyn Relay>), Some(events), cancellable)
            }
            _ => (None, None, None),
        };
        let mut events = match events {
            Some(events) if told => events,
            _ => {
                let how = How {
                    traceparent: traceparent.as_deref(),
                    note: Some(&note),
                    resume: None,
                    relay,
                };
                let called = gateway.call(caller.clone(), params, &meta, how).await;
                drop(cancellable);
                return answered(&gateway, &session, caller, id, &tool, task, called, note).await;
            }
        };
        let mut run = tokio::spawn({
            let (gateway, caller, traceparent, note) = (
                gateway.clone(),
                caller.clone(),
                traceparent.clone(),
                note.clone(),
            );
            async move {
                let _cancellable = cancellable;
                let how = How {
                    traceparent: traceparent.as_deref(),
                    note: Some(&note),
                    resume: None,
                    relay,
                };
                gateway.call(caller, params, &meta, how).await
            }
        });
        // Events first: a call that told its caller something and ended at once still
        // streams what it told (the relay is dropped, and the channel closed, only after).
        let first = tokio::select! {
            biased;
            Some(event) = events.recv() => Ok(event),
            joined = &mut run => Err(joined),
        };
        let joined = match first {
            Ok(event) => {
                let (sender, response) = reply::events();
                tokio::spawn(stream(Streaming {
                    sender,
                    first: event,
                    events,
                    run,
                    session,
                    gateway,
                    caller,
                    id,
                    tool,
                    note,
                }));
                return response;
            }
            Err(joined) => joined,
        };
        match joined {
            Ok(called) => answered(&gateway, &session, caller, id, &tool, task, called, note).await,
            Err(error) => failed_inside(&error),
        }
    })
    .await;
    answered.unwrap_or_else(|error| failed_inside(&error))
}

/// The answer to a `tools/call` whose call ended (`called`) without telling its caller
/// anything: a task, if one was asked for; a paused call held for its approval; else the
/// result as JSON in one piece.
#[expect(
    clippy::too_many_arguments,
    reason = "what the request brought, handed on once"
)]
async fn answered(
    gateway: &Gateway,
    session: &Arc<Session>,
    caller: Caller,
    id: RequestId,
    tool: &str,
    task: Option<super::message::TaskMetadata>,
    called: Result<ToolResultEnvelope, ErrorData>,
    note: Note,
) -> Response<Body> {
    let result = match called {
        Ok(result) => result,
        Err(error) => return reply::answer(&era_2025(), &id, Err(error.into())),
    };
    if let Some(task) = task {
        let created = tasks::create(gateway.host(), &caller, tool, &result, task.ttl)
            .await
            .map(|task| json!({ "task": tasks::wire(&task, false) }))
            .map_err(|error| task_error(error).into());
        return reply::answer(&era_2025(), &id, created);
    }
    if session.remembered(&caller).url
        && let Some(error) = super::connect::url_elicitation_error(&result)
    {
        return reply::answer(&era_2025(), &id, Err(error.into()));
    }
    if let Some(url) = session.holds(gateway, &caller, &result) {
        return session.hold(gateway.clone(), &caller, id, tool, result, url, note);
    }
    match response(&id, &result) {
        Ok(body) => reply::bytes(StatusCode::OK, body.into()),
        Err(error) => reply::answer(&era_2025(), &id, Err(error.into())),
    }
}

/// Whether a call of `tool`, as a task or not, is what its manifest's `task_support` allows:
/// this version has a `required` tool called without `params.task`, and a `forbidden` one
/// with it, refused as method not found (-32601), before anything runs.
fn task_support_allows(
    gateway: &Gateway,
    caller: &Caller,
    tool: &str,
    as_task: bool,
) -> Result<(), ErrorData> {
    match (gateway.task_support(caller, tool), as_task) {
        (Some(TaskSupport::Required), false) => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("tool `{tool}` runs only as a task: call it with `params.task`"),
            None,
        )),
        (Some(TaskSupport::Forbidden), true) => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("tool `{tool}` does not run as a task: call it without `params.task`"),
            None,
        )),
        _ => Ok(()),
    }
}

/// A call whose task failed inside the gateway (a panic): the internal error, and the log.
fn failed_inside(error: &tokio::task::JoinError) -> Response<Body> {
    tracing::error!(%error, "mcp call task failed");
    reply::plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        "the call failed inside the gateway",
    )
}

/// A call streaming to its caller: what [`stream`] needs.
struct Streaming {
    sender: mpsc::Sender<Bytes>,
    first: Event,
    events: mpsc::Receiver<Event>,
    run: tokio::task::JoinHandle<Result<ToolResultEnvelope, ErrorData>>,
    session: Arc<Session>,
    gateway: Gateway,
    caller: Caller,
    id: RequestId,
    tool: String,
    note: Note,
}

/// The event stream of a call that tells or asks its caller something: each notification as
/// an event; each ask as a request with an id of the gateway's, whose answer the client posts
/// ([`Session::answered`]); the result last (or, paused for approval, the hold on the same
/// stream). A client that hangs up loses the rest; the call runs on, and its asks fail.
async fn stream(streaming: Streaming) {
    let Streaming {
        sender,
        first,
        mut events,
        mut run,
        session,
        gateway,
        caller,
        id,
        tool,
        note,
    } = streaming;
    let mut asked = Vec::new();
    let mut next = Some(first);
    let mut gone = false;
    let joined = loop {
        if let Some(event) = next.take() {
            match event {
                Event::Notify(message) => {
                    let _ = sender.send(reply::event(&message)).await;
                }
                Event::Ask(_, answer_to) if gone => {
                    let ended = "the client's request has ended".to_owned();
                    let _ = answer_to.send(Err(AskError::Failed(ended)));
                }
                Event::Ask(ask, answer_to) => {
                    let (own, answer) = session.expect(&caller, ask.kind.method());
                    asked.push(own.clone());
                    let request = json!({
                        "jsonrpc": "2.0",
                        "id": own,
                        "method": ask.kind.method(),
                        "params": ask.params,
                    });
                    let _ = sender.send(reply::event(&request)).await;
                    tokio::spawn(async move {
                        let answer = match answer.await {
                            Ok(answer) => relay::answered(answer),
                            Err(_) => Err(AskError::Failed(
                                "the client's request ended before it answered".to_owned(),
                            )),
                        };
                        let _ = answer_to.send(answer);
                    });
                }
            }
        }
        tokio::select! {
            biased;
            Some(event) = events.recv() => next = Some(event),
            joined = &mut run => break joined,
            () = sender.closed(), if !gone => {
                // Nobody reads any more: what is asked is never answered.
                for own in asked.drain(..) {
                    session.forget(&own);
                }
                events.close();
                gone = true;
            }
        }
    };
    for own in asked {
        session.forget(&own);
    }
    let last = match joined {
        Ok(Ok(result)) => {
            if let Some(url) = session.holds(&gateway, &caller, &result) {
                session
                    .hold_on(sender, gateway, caller, id, tool, result, url, note)
                    .await;
                return;
            }
            session::answer_of(&id, &result)
        }
        Ok(Err(error)) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        Err(error) => {
            tracing::error!(%error, "mcp call task failed");
            let error = ErrorData::internal_error("the call failed inside the gateway", None);
            json!({ "jsonrpc": "2.0", "id": id, "error": error })
        }
    };
    let _ = sender.send(reply::event(&last)).await;
}

/// The era of every answer here: errors are HTTP 200 whatever the version.
fn era_2025() -> Era {
    Era::Handshake(ProtocolVersion::V_2025_11_25)
}

/// `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`, of `caller`'s own tasks.
async fn task_request(
    gateway: &Gateway,
    caller: &Caller,
    method: &str,
    params: &serde_json::Map<String, Value>,
) -> Answer {
    let host = gateway.shared_host();
    if method == "tasks/list" {
        let cursor = params.get("cursor").and_then(Value::as_str);
        let (tasks, next) = tasks::list(&host, caller, cursor)
            .await
            .map_err(task_error)?;
        let mut page = json!({
            "tasks": tasks.iter().map(|t| tasks::wire(t, false)).collect::<Vec<_>>(),
        });
        if let Some(next) = next {
            page["nextCursor"] = json!(next);
        }
        return Ok(page);
    }
    let task_id = task_id(params)?;
    match method {
        "tasks/get" => Ok(tasks::owned(&host, caller, task_id)
            .await
            .map(|task| tasks::wire(&task, false))
            .map_err(task_error)?),
        "tasks/cancel" => Ok(tasks::cancel(&host, caller, task_id)
            .await
            .map(|task| tasks::wire(&task, false))
            .map_err(task_error)?),
        _ => task_result(gateway, caller, task_id).await,
    }
}

/// `tasks/result`: the task's result once it ended, waiting for it (up to the hold time)
/// while it works.
async fn task_result(gateway: &Gateway, caller: &Caller, task_id: &str) -> Answer {
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
                )
                .into());
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
            )
            .into());
        }
        tokio::time::sleep(tasks::POLL / 2).await;
    }
}

/// `params.taskId`.
pub(in crate::mcp) fn task_id(params: &serde_json::Map<String, Value>) -> Result<&str, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params("params.taskId must be a string", None))
}
