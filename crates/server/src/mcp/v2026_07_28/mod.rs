//! Protocol 2026-07-28: self-contained requests, no handshake, no session.
//!
//! Every request carries its own `_meta` (`io.modelcontextprotocol/protocolVersion` and
//! `.../clientCapabilities`, optionally `.../clientInfo`) and the SEP-2243 headers
//! (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`: [`headers`]). In order:
//! 1. the headers agree with the body, else -32020 (HTTP 400);
//! 2. `_meta` has the required keys, else -32602 (HTTP 400);
//! 3. the version is one gatehouse serves, else -32022 with `data.supported` and
//!    `data.requested` (HTTP 400);
//! 4. the method: `server/discover`; `tools/list`, `resources/list`,
//!    `resources/templates/list`, `prompts/list` and `resources/read` (with `resultType`,
//!    `ttlMs: 0` and `cacheScope: "private"`: a listing, and a read, is the caller's tenant's);
//!    `prompts/get` (its adapter's asks as `InputRequiredResult` rounds) and
//!    `completion/complete` ([`super::content`]); `tools/call` (-32021 before anything runs
//!    when the request's client capabilities lack one its tool's manifest names in
//!    `client_capabilities`, or the tasks extension for a `required` tool) through the shared
//!    call path, a paused call answered as [`super::approvals`] says (an
//!    `InputRequiredResult` with the gateway's signed `requestState`, or a task), a call of a
//!    tool that runs as a task going on as one past `[mcp] task_after_ms` ([`held`]); the
//!    tasks extension's `tasks/get`, `tasks/update` and `tasks/cancel`, for a client that
//!    declared it (-32021 otherwise); `subscriptions/listen`, an event stream
//!    ([`super::watch`]). Methods this version removed (`ping`, `logging/setLevel`,
//!    `resources/subscribe`, ...) and unknown ones are -32601 (HTTP 404).

pub mod headers;
pub mod held;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_core::envelope::{OutcomeCode, ToolResultEnvelope};
use gatehouse_core::model::ApprovalMode;
use gatehouse_host::plugin::manifest::TaskSupport;
use gatehouse_host::relay::Relay;
use gatehouse_store::{Task, TaskStatus};
use http::{HeaderMap, Response};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, ClientCapabilities, CreateTaskResult, DiscoverResult, GetTaskResult,
    InputResponses, JsonObject, ProtocolVersion, RequestId, RequestMetaObject, ResultType,
    ServerResult, SubscriptionFilter,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use self::held::{Held, Running, Step};
use super::approvals::{self, APPROVAL_INPUT, Approvals, CONSENT_INPUT, ClientCan, Resumes, Sent};
use super::call::{Gateway, How, mcp_span, meta_str};
use super::caller::Caller;
use super::content;
use super::message::{Call, Params, Request};
use super::meta::{IDEMPOTENCY_KEY_META, RESULT_META};
use super::relay::{self, CallRelay, Wants};
use super::reply::{self, Answer, Body, Era, Failure};
use super::result::to_mcp;
use super::tasks::{self, TaskError, task_error};
use super::watch::{Filter, Uris, Watchers};
use crate::access_log::Note;

/// `_meta` key of the lowest level of log lines a 2026-07-28 request wants.
const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// The protocol versions gatehouse serves, in `server/discover` and a -32022's `data`.
pub fn supported() -> Vec<ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS.to_vec()
}

/// What this version keeps in the gateway: the calls held for their callers' answers or run
/// as tasks, and the open streams.
#[derive(Clone, Copy)]
pub struct With<'a> {
    /// The calls held here.
    pub held: &'a Arc<Held>,
    /// The streams open here.
    pub watchers: &'a Arc<Watchers>,
}

/// Answers one 2026-07-28 request of `caller` (see the module docs).
pub async fn answer(
    gateway: &Gateway,
    with: With<'_>,
    caller: Caller,
    request: Request,
    headers: &HeaderMap,
    note: &Note,
) -> Response<Body> {
    let With { held, watchers } = with;
    let id = request.id.clone();
    let meta = match checked(gateway, &caller, &request, headers) {
        Ok(meta) => meta,
        Err(failure) => return reply::answer(&Era::Stateless, &id, Err(failure)),
    };
    if request.method == "subscriptions/listen" {
        return match listen(gateway, watchers, caller, &request) {
            Ok(stream) => stream,
            Err(error) => reply::answer(&Era::Stateless, &id, Err(error.into())),
        };
    }
    if let Params::Call(call) = request.params {
        let asked = Asked {
            gateway: gateway.clone(),
            held: Arc::clone(held),
            caller,
            id,
            call: *call,
            meta,
            traceparent: super::call::traceparent(headers),
            note: note.clone(),
        };
        return call_tool(asked).await;
    }
    let answer = dispatch(gateway, held, caller, request, meta).await;
    reply::answer(&Era::Stateless, &id, answer)
}

/// Steps 1-3 of the module docs: the request's `_meta`, once its headers and keys check.
fn checked(
    gateway: &Gateway,
    caller: &Caller,
    request: &Request,
    headers: &HeaderMap,
) -> Result<RequestMetaObject, Failure> {
    headers::check(headers, request, |name| gateway.input_schema(caller, name))
        .map_err(|reason| Failure::from(ErrorData::header_mismatch(reason, None)))?;
    let meta = request
        .meta()
        .ok_or_else(|| Failure::meta("request _meta must be an object"))?;
    let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
    if !missing.is_empty() {
        return Err(Failure::meta(format!(
            "request _meta is missing or has malformed required fields: {}",
            missing.join(", ")
        )));
    }
    let supported = supported();
    match meta.protocol_version() {
        Some(version) if supported.contains(&version) => Ok(meta),
        Some(version) => Err(ErrorData::unsupported_protocol_version(version, &supported).into()),
        None => Err(Failure::meta("request _meta has no protocolVersion")),
    }
}

async fn dispatch(
    gateway: &Gateway,
    held: &Arc<Held>,
    caller: Caller,
    request: Request,
    meta: RequestMetaObject,
) -> Answer {
    let can = ClientCan::from_capabilities(meta.get(approvals::CLIENT_CAPABILITIES_META));
    let Request { method, params, .. } = request;
    match (method.as_str(), params) {
        ("server/discover", _) => {
            let discover = DiscoverResult::from_server_info(supported(), gateway.info());
            to_value(&discover)
        }
        ("tools/list", _) => {
            let mut list = gateway.tool_list(&caller, None)?;
            cacheable(&mut list);
            Ok(list)
        }
        ("resources/list" | "resources/templates/list" | "prompts/list", _) => {
            let mut list = match method.as_str() {
                "resources/list" => gateway.resource_list(&caller),
                "resources/templates/list" => gateway.template_list(&caller),
                _ => gateway.prompt_list(&caller),
            };
            cacheable(&mut list);
            Ok(list)
        }
        ("resources/read", Params::Other(params)) => {
            let mut contents = gateway.read_resource(&caller, &params).await?;
            cacheable(&mut contents);
            Ok(contents)
        }
        ("prompts/get", Params::Other(params)) => {
            let mut prompt = get_prompt(gateway, held, caller, can, &params).await?;
            if prompt.get("resultType").is_none() {
                prompt["resultType"] = json!(ResultType::COMPLETE);
            }
            Ok(prompt)
        }
        ("completion/complete", Params::Other(params)) => {
            let mut completion = gateway.complete(&caller, &params).await?;
            completion["resultType"] = json!(ResultType::COMPLETE);
            Ok(completion)
        }
        ("tasks/get" | "tasks/update" | "tasks/cancel", Params::Other(params)) => {
            if !can.tasks {
                return Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                )
                .into());
            }
            let task_id = params
                .get("taskId")
                .and_then(Value::as_str)
                .ok_or_else(|| ErrorData::invalid_params("params.taskId must be a string", None))?;
            let host = gateway.shared_host();
            match method.as_str() {
                "tasks/get" => {
                    let task = tasks::owned(&host, &caller, task_id)
                        .await
                        .map_err(task_error)?;
                    let waits_for = held.waits_for(&caller, task_id);
                    to_value(&detailed(&task, waits_for)?)
                }
                "tasks/update" => {
                    tasks::owned(&host, &caller, task_id)
                        .await
                        .map_err(task_error)?;
                    // The ack says the answers arrived; the next tasks/get what the task does.
                    held.answer(&caller, task_id, input_responses(&params)?);
                    Ok(json!({ "resultType": ResultType::COMPLETE }))
                }
                _ => {
                    let cancelled = tasks::cancel(&host, &caller, task_id).await;
                    held.cancel(task_id);
                    match cancelled {
                        // The extension's cancel is an acknowledgement, whatever the task's
                        // state.
                        Ok(_) | Err(TaskError::Ended { .. }) => {
                            Ok(json!({ "resultType": ResultType::COMPLETE }))
                        }
                        Err(error) => Err(task_error(error).into()),
                    }
                }
            }
        }
        _ => Err(Failure::no_method(&method)),
    }
}

/// `subscriptions/listen`: an event stream of what `params.notifications` asks and the
/// gateway offers ([`crate::mcp::watch`]): list changes, and updates of the resources named
/// that the caller may read (the others are left out of the acknowledgement, which comes
/// first). Each notification carries the request's id as its `subscriptionId`.
fn listen(
    gateway: &Gateway,
    watchers: &Arc<Watchers>,
    caller: Caller,
    request: &Request,
) -> Result<Response<Body>, ErrorData> {
    let Params::Other(params) = &request.params else {
        return Err(ErrorData::invalid_params(
            "params.notifications must be an object",
            None,
        ));
    };
    let asked: SubscriptionFilter = params
        .get("notifications")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| {
            ErrorData::invalid_params(format!("params.notifications does not read: {e}"), None)
        })?
        .ok_or_else(|| ErrorData::invalid_params("params.notifications is missing", None))?;
    let uris: BTreeSet<String> = (asked.resource_subscriptions.iter().flatten())
        .filter(|uri| gateway.host().resource_at(&caller.tenant, uri).is_some())
        .cloned()
        .collect();
    let mut accepted = asked.supported_by(&gateway.info().capabilities);
    accepted.resource_subscriptions = (!uris.is_empty()).then(|| uris.iter().cloned().collect());
    let filter = Filter {
        tools: accepted.tools_list_changed == Some(true),
        resources: accepted.resources_list_changed == Some(true),
        prompts: accepted.prompts_list_changed == Some(true),
    };
    let subscription = serde_json::to_value(&request.id).unwrap_or_default();
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": accepted,
            "_meta": { "io.modelcontextprotocol/subscriptionId": subscription },
        },
    });
    Ok(watchers.stream(
        gateway.clone(),
        caller,
        filter,
        Uris::Fixed(uris),
        Some(ack),
        Some(subscription),
        None,
    ))
}

/// `prompts/get`, whose adapter may ask its caller something as a tool's may: the request
/// then ends with an `InputRequiredResult`, and the retry with the answers and the
/// `requestState` (sealed to the prompt, as `prompts/get:<name>`, and its arguments) resumes the
/// same call, held here ([`held`]). Progress and log lines have no stream to ride here.
async fn get_prompt(
    gateway: &Gateway,
    held: &Arc<Held>,
    caller: Caller,
    can: ClientCan,
    params: &JsonObject,
) -> Answer {
    let (asked, call) = gateway.prompt_call(&caller, params)?;
    let mut responses = input_responses(params)?;
    let bound = format!("prompts/get:{asked}");
    let args = call.args.as_object().cloned().unwrap_or_default();
    let sent = Sent {
        tool: &bound,
        args: &args,
        key: None,
    };
    let (held_id, mut running) = match params.get("requestState").and_then(Value::as_str) {
        Some(state) => match gateway.approvals().open(state, &caller, &sent) {
            Ok(Resumes::Held { held: id, round }) => {
                let (id, running) = held.resume(&caller, &id, round)?;
                (Some(id), running)
            }
            Ok(Resumes::Approval { .. }) => {
                return Err(ErrorData::invalid_params(
                    "this requestState resumes an approval, which a prompt never waits for",
                    None,
                )
                .into());
            }
            Err(refusal) => return Err(ErrorData::invalid_params(refusal.to_string(), None).into()),
        },
        None => {
            let wants = Wants {
                can: can.asks(),
                progress_token: None,
                log_level: None,
            };
            let (relay, events) = relay::channel(wants);
            let canceller = Arc::clone(&relay);
            let gateway = gateway.clone();
            let run = tokio::spawn(async move {
                let span = mcp_span(&call.capability_id, None);
                Ok(gateway
                    .run(call, span, None, Some(relay as Arc<dyn Relay>))
                    .await)
            });
            let running = Running::new(run, events).cancelled_through(canceller);
            (None, Box::new(running))
        }
    };
    // A client that closes the stream of this request while it waits cancels the call.
    let hang_up = HangUp::default();
    let _armed = OnHangUp(hang_up.clone());
    hang_up.waits_on(running.canceller());
    let answer = async {
        loop {
            running = match running.step(&mut responses).await {
                Step::Notify(_, running) | Step::Late(running) => running,
                Step::Input(running) => {
                    let wait = held.wait();
                    let (state, requests) =
                        held.hold(gateway.approvals(), &caller, &sent, held_id, running, wait)?;
                    return Ok(json!({
                        "resultType": "input_required",
                        "inputRequests": requests,
                        "requestState": state,
                    }));
                }
                Step::Done(joined) => {
                    return match *joined {
                        Ok(Ok(result)) => content::prompt(&asked, result),
                        Ok(Err(error)) => Err(error.into()),
                        Err(error) => {
                            tracing::error!(%error, "a prompts/get failed inside the gateway");
                            Err(ErrorData::internal_error(
                                "the call failed inside the gateway",
                                None,
                            )
                            .into())
                        }
                    };
                }
            };
        }
    }
    .await;
    hang_up.done();
    answer
}

/// The call a request waits on, and what cancels it when the request's client hangs up:
/// on 2026-07-28 closing a request's stream is the cancellation (a client that gives up on a
/// call sends nothing else). A request's own future holds it armed ([`OnHangUp`]); hyper drops
/// that future when the connection closes.
#[derive(Clone, Default)]
struct HangUp(Arc<std::sync::Mutex<Option<Arc<CallRelay>>>>);

impl HangUp {
    /// The request now waits on the call `relay` cancels.
    fn waits_on(&self, relay: Option<Arc<CallRelay>>) {
        *self.lock() = relay;
    }

    /// It waits on none any more: its answer is made.
    fn done(&self) {
        *self.lock() = None;
    }

    /// The client hung up: the call the request waits on, if any, is cancelled.
    fn hung_up(&self) {
        if let Some(relay) = self.lock().take() {
            tracing::info!("the client closed its request's stream: its call is cancelled");
            relay.cancel_call();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<CallRelay>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Cancels the call its [`HangUp`] waits on, when dropped while it waits on one.
struct OnHangUp(HangUp);

impl Drop for OnHangUp {
    fn drop(&mut self) {
        self.0.hung_up();
    }
}

/// A request's `params.inputResponses` (none: empty).
fn input_responses(params: &JsonObject) -> Result<InputResponses, ErrorData> {
    params.get("inputResponses").map_or_else(
        || Ok(InputResponses::new()),
        |answers| {
            serde_json::from_value(answers.clone()).map_err(|_| {
                ErrorData::invalid_params(
                    "params.inputResponses must be an object of answers by key",
                    None,
                )
            })
        },
    )
}

/// A `tools/call` and what it needs, moved onto the task that runs it.
struct Asked {
    gateway: Gateway,
    held: Arc<Held>,
    caller: Caller,
    id: RequestId,
    call: Call,
    meta: RequestMetaObject,
    /// The request's `traceparent` header.
    traceparent: Option<String>,
    note: Note,
}

/// A `tools/call`, on a task of its own (a client that hangs up does not cut a governed call
/// short): a retry's `requestState` verified (the approval it waits for, or the call it
/// resumes: [`held`]), the call run (or run on), and its answer: the result; a paused result
/// as the client can take it; an `InputRequiredResult` while the adapter waits for answers;
/// all of it on an event stream once the call told its caller something.
async fn call_tool(asked: Asked) -> Response<Body> {
    let id = asked.id.clone();
    // The call runs on a task of its own; a client that closes this request's stream while it
    // waits on the call cancels it.
    let hang_up = HangUp::default();
    let _armed = OnHangUp(hang_up.clone());
    let waiting = hang_up.clone();
    let answered = tokio::spawn(async move {
        let Asked {
            gateway,
            held,
            caller,
            id,
            call,
            meta,
            traceparent,
            note,
        } = asked;
        let Call {
            params: mut request,
            meta: _,
            task: _,
        } = call;
        let can = ClientCan::from_capabilities(meta.get(approvals::CLIENT_CAPABILITIES_META));
        if let Some(required) = gateway.lacking(&caller, &request.name, can) {
            let error = ErrorData::missing_required_client_capability(required);
            return reply::answer(&Era::Stateless, &id, Err(error.into()));
        }
        // Only a client that takes tasks needs to know whether the tool runs as one.
        let support = if can.tasks {
            gateway.task_support(&caller, &request.name)
        } else {
            None
        };
        let state = request.request_state.take();
        let mut responses = request.input_responses.take().unwrap_or_default();
        let tool = request.name.to_string();
        let args = request.arguments.clone().unwrap_or_default();
        let key = match meta_str(&meta, IDEMPOTENCY_KEY_META) {
            Ok(key) => key.map(str::to_owned),
            Err(error) => return reply::answer(&Era::Stateless, &id, Err(error.into())),
        };
        let sent = Sent {
            tool: &tool,
            args: &args,
            key: key.as_deref(),
        };
        let resumes = match &state {
            None => None,
            Some(state) => match gateway.approvals().open(state, &caller, &sent) {
                Ok(resumes) => Some(resumes),
                Err(refusal) => {
                    let error = ErrorData::invalid_params(refusal.to_string(), None);
                    return reply::answer(&Era::Stateless, &id, Err(error.into()));
                }
            },
        };
        let (held_id, mut running) = match resumes {
            Some(Resumes::Held {
                held: held_id,
                round,
            }) => match held.resume(&caller, &held_id, round) {
                Ok((held_id, running)) => (Some(held_id), running),
                Err(error) => return reply::answer(&Era::Stateless, &id, Err(error.into())),
            },
            approval => {
                let approval = match approval {
                    Some(Resumes::Approval { approval }) => {
                        if let Err(error) =
                            wait_for_approval(&gateway, &caller, &approval, &responses).await
                        {
                            return reply::answer(&Era::Stateless, &id, Err(error.into()));
                        }
                        Some(approval)
                    }
                    _ => None,
                };
                let wants = Wants {
                    can: can.asks(),
                    progress_token: meta.get("progressToken").cloned(),
                    log_level: meta
                        .get(LOG_LEVEL_META)
                        .and_then(Value::as_str)
                        .and_then(relay::level),
                };
                let (relay, events) = relay::channel(wants);
                let canceller = Arc::clone(&relay);
                let run = tokio::spawn({
                    let (gateway, caller, traceparent, note, meta) = (
                        gateway.clone(),
                        caller.clone(),
                        traceparent.clone(),
                        note.clone(),
                        meta.clone(),
                    );
                    async move {
                        let how = How {
                            traceparent: traceparent.as_deref(),
                            note: Some(&note),
                            resume: approval.as_deref(),
                            relay: Some(relay as Arc<dyn Relay>),
                        };
                        gateway.call(caller, request, &meta, how).await
                    }
                });
                let running = Running::new(run, events).cancelled_through(canceller);
                (None, Box::new(running))
            }
        };
        // A client that takes tasks, calling a tool that runs as one, waits for this round
        // until `[mcp] task_after_ms`; then the call goes on as a task (`Step::Late`).
        let runs_as_task = matches!(support, Some(TaskSupport::Optional | TaskSupport::Required));
        running.until(if can.tasks && runs_as_task {
            held.task_deadline()
        } else {
            None
        });
        let mut round = Round {
            gateway,
            held,
            caller,
            can,
            held_id,
            wait: Duration::ZERO,
        };
        round.wait = round.held.wait();
        waiting.waits_on(running.canceller());
        let step = running.step(&mut responses).await;
        waiting.done();
        match step {
            Step::Notify(message, running) => {
                let (sender, response) = reply::events();
                let owned = Owned {
                    tool,
                    args,
                    key,
                    responses,
                };
                tokio::spawn(async move {
                    let _ = sender.send(reply::event(&message)).await;
                    let answer = round.on_stream(running, owned, &sender).await;
                    let last = match answer {
                        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
                        Err(failure) => {
                            json!({ "jsonrpc": "2.0", "id": id, "error": failure.error })
                        }
                    };
                    let _ = sender.send(reply::event(&last)).await;
                });
                response
            }
            step => {
                let answer = round.end(step, &sent, &responses).await;
                reply::answer(&Era::Stateless, &id, answer)
            }
        }
    })
    .await;
    answered.unwrap_or_else(|error| {
        tracing::error!(%error, "mcp call task failed");
        let error = ErrorData::internal_error("the call failed inside the gateway", None);
        reply::answer(&Era::Stateless, &id, Err(error.into()))
    })
}

/// A call's request as sent, owned (for a round that goes on on an event stream).
struct Owned {
    tool: String,
    args: JsonObject,
    key: Option<String>,
    responses: InputResponses,
}

/// What a round of a call needs besides the call.
struct Round {
    gateway: Gateway,
    held: Arc<Held>,
    caller: Caller,
    can: ClientCan,
    /// The id the call is held under, once it was.
    held_id: Option<String>,
    wait: Duration,
}

impl Round {
    /// The rest of a round on an event stream: each notification sent as it comes, then the
    /// request's answer.
    async fn on_stream(
        self,
        mut running: Box<Running>,
        owned: Owned,
        sender: &mpsc::Sender<bytes::Bytes>,
    ) -> Answer {
        let Owned {
            tool,
            args,
            key,
            mut responses,
        } = owned;
        let sent = Sent {
            tool: &tool,
            args: &args,
            key: key.as_deref(),
        };
        loop {
            let hang_up = HangUp::default();
            hang_up.waits_on(running.canceller());
            let step = {
                let step = running.step(&mut responses);
                tokio::pin!(step);
                tokio::select! {
                    step = &mut step => step,
                    () = sender.closed() => {
                        // The client closed the stream: the call is cancelled, and ends soon.
                        hang_up.hung_up();
                        step.await
                    }
                }
            };
            match step {
                Step::Notify(message, next) => {
                    let _ = sender.send(reply::event(&message)).await;
                    running = next;
                }
                step => return self.end(step, &sent, &responses).await,
            }
        }
    }

    /// The request's answer once the round ended: the call's result, or its asks.
    async fn end(self, step: Step, sent: &Sent<'_>, responses: &InputResponses) -> Answer {
        let step = match step {
            Step::Done(joined) => Ok(*joined),
            Step::Input(running) => Err(running),
            Step::Late(running) => return self.go_on_as_task(sent.tool, running).await,
            Step::Notify(..) => unreachable!("a notification does not end a round"),
        };
        match step {
            Ok(Ok(Ok(result))) => {
                let connect = self
                    .can
                    .url
                    .then(|| super::connect::input_required(&result))
                    .flatten();
                // Waiting for a connection, as for an approval: a task for a client that
                // takes tasks, else the user asked to open the link.
                let as_task = result.outcome == OutcomeCode::ConnectionRequired
                    && self.can.tasks
                    && self.gateway.task_support(&self.caller, sent.tool)
                        != Some(TaskSupport::Forbidden);
                let response = if as_task {
                    let task =
                        tasks::create(self.gateway.host(), &self.caller, sent.tool, &result, None)
                            .await
                            .map_err(task_error)?;
                    CallToolResponse::Task(created(&task)?)
                } else if let Some(connect) = connect {
                    CallToolResponse::InputRequired(connect)
                } else if result.outcome == OutcomeCode::ApprovalRequired {
                    paused(
                        &self.gateway,
                        &self.caller,
                        sent,
                        &result,
                        self.can,
                        responses,
                    )
                    .await?
                } else {
                    CallToolResponse::Complete(to_mcp(&result)?)
                };
                let mut value = to_value(&ServerResult::from(response))?;
                if value.get("resultType").is_none() {
                    value["resultType"] = json!(ResultType::COMPLETE);
                }
                Ok(value)
            }
            Ok(Ok(Err(error))) => Err(error.into()),
            Ok(Err(error)) => {
                tracing::error!(%error, "mcp call task failed");
                Err(ErrorData::internal_error("the call failed inside the gateway", None).into())
            }
            Err(running) => {
                let (state, requests) = self.held.hold(
                    self.gateway.approvals(),
                    &self.caller,
                    sent,
                    self.held_id,
                    running,
                    self.wait,
                )?;
                Ok(json!({
                    "resultType": "input_required",
                    "inputRequests": requests,
                    "requestState": state,
                }))
            }
        }
    }

    /// The call goes on as a task, in this gateway: its row made, then run on
    /// ([`Held::run_as_task`]); the request's answer is the new task.
    async fn go_on_as_task(self, tool: &str, running: Box<Running>) -> Answer {
        let task = tasks::running(self.gateway.host(), &self.caller, tool, None)
            .await
            .map_err(task_error)?;
        let answer = to_value(&created(&task)?)?;
        self.held
            .run_as_task(self.gateway, self.caller, task.id, running);
        Ok(answer)
    }
}

/// A retry resuming approval `approval`: the calling user's consent applied (if it sent one),
/// then a wait for the decision, up to the hold time.
async fn wait_for_approval(
    gateway: &Gateway,
    caller: &Caller,
    approval: &str,
    responses: &InputResponses,
) -> Result<(), ErrorData> {
    if let Some(allow) = responses
        .get(CONSENT_INPUT)
        .and_then(approvals::consent_answer)
    {
        gateway.consent(caller, approval, allow).await?;
    }
    gateway.held(approval).await;
    let until = tokio::time::Instant::now() + gateway.approvals().hold();
    if let Err(error) = gateway.host().await_decision(approval, until).await {
        tracing::warn!(%error, approval = %approval, "cannot read the approval a retry waits on");
    }
    Ok(())
}

/// A call paused for approval, as the client can take it: a task, a consent form, the
/// approval's console page (with the state to resume with), or the paused result.
async fn paused(
    gateway: &Gateway,
    caller: &Caller,
    sent: &Sent<'_>,
    result: &ToolResultEnvelope,
    can: ClientCan,
    answered: &InputResponses,
) -> Result<CallToolResponse, ErrorData> {
    let paused = || to_mcp(result).map(CallToolResponse::Complete);
    let Some(approval_id) = &result.approval_id else {
        return paused();
    };
    let (host, tool) = (gateway.host(), sent.tool);
    if can.tasks && gateway.task_support(caller, tool) != Some(TaskSupport::Forbidden) {
        let task = tasks::create(host, caller, tool, result, None)
            .await
            .map_err(task_error)?;
        return Ok(CallToolResponse::Task(created(&task)?));
    }
    let approval = match host.approval(approval_id).await {
        Ok(Some(approval)) => approval,
        Ok(None) | Err(_) => return paused(),
    };
    let state = gateway
        .approvals()
        .seal(caller, sent, &approval, gatehouse_store::now_ms());
    if can.form
        && gateway.approvals().consent_applies(result)
        && !answered.contains_key(CONSENT_INPUT)
    {
        let mode = result
            .approval_mode_effective
            .unwrap_or(ApprovalMode::Delegated);
        let args = approval.call.get("args").cloned().unwrap_or(Value::Null);
        let inputs = approvals::consent_request(tool, &host.approver_view(tool, &args), mode);
        return Ok(CallToolResponse::InputRequired(Approvals::input_required(
            Some(inputs),
            state,
        )));
    }
    if can.url
        && let Some(url) = host.approval_url(approval_id)
    {
        let inputs = (!answered.contains_key(APPROVAL_INPUT))
            .then(|| approvals::url_request(&url, tool, approval_id));
        return Ok(CallToolResponse::InputRequired(Approvals::input_required(
            inputs, state,
        )));
    }
    paused()
}

/// A listing's caching hints: never cached beyond the request, and never shared, since what a
/// caller may see is its tenant's (SEP-2549).
fn cacheable(result: &mut Value) {
    result["resultType"] = json!(ResultType::COMPLETE);
    result["ttlMs"] = json!(0);
    result["cacheScope"] = json!("private");
}

fn to_value(value: &impl serde::Serialize) -> Answer {
    serde_json::to_value(value).map_err(|e| {
        ErrorData::internal_error(format!("the answer does not serialize: {e}"), None).into()
    })
}

/// A new task as the tasks extension answers a `tools/call`.
fn created(task: &Task) -> Result<CreateTaskResult, ErrorData> {
    let mut wire = tasks::wire(task, true);
    wire["resultType"] = json!("task");
    serde_json::from_value(wire)
        .map_err(|e| ErrorData::internal_error(format!("a task does not serialize: {e}"), None))
}

/// A task as the extension's `tasks/get` answers: its status and, once it ended, its result
/// (`completed`) or error (`failed`). `waits_for` is what it waits for if it runs in this
/// gateway: known here only, and ahead of the store (answers it just took leave it running).
fn detailed(task: &Task, waits_for: Option<JsonObject>) -> Result<GetTaskResult, ErrorData> {
    let mut wire = tasks::wire(task, true);
    wire["resultType"] = json!("complete");
    if task.status == TaskStatus::InputRequired {
        match waits_for {
            Some(pending) if !pending.is_empty() => wire["inputRequests"] = Value::Object(pending),
            // Answered here, or not waiting here (another gateway runs it, or it stopped).
            _ => wire["status"] = json!(TaskStatus::Working.as_str()),
        }
    }
    if let Some(result) = tasks::result_of(task) {
        match task.status {
            TaskStatus::Completed => {
                let mut mcp = serde_json::to_value(to_mcp(&result)?).unwrap_or_default();
                mcp["resultType"] = json!("complete");
                wire["result"] = mcp;
            }
            TaskStatus::Failed => {
                let message = result.error.as_ref().map_or_else(
                    || "the task failed".to_owned(),
                    |e| format!("{}: {}", e.code, e.message),
                );
                wire["error"] = json!({
                    "code": -32000,
                    "message": message,
                    "data": { RESULT_META: result },
                });
            }
            _ => {}
        }
    } else if task.status == TaskStatus::Failed {
        wire["error"] = json!({
            "code": -32000,
            "message": task.status_message.clone().unwrap_or_else(|| "the task failed".to_owned()),
        });
    }
    serde_json::from_value(wire)
        .map_err(|e| ErrorData::internal_error(format!("a task does not serialize: {e}"), None))
}
