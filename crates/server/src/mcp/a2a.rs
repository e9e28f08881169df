//! A2A on the same listener: gatehouse as an A2A agent (protocol 1.0, the JSON-RPC binding),
//! for peer agents that speak A2A rather than MCP (issue 59).
//!
//! A2A is typed coordination between agents; a gatehouse tool is a skill of the agent, and
//! a call of one is a task. Nothing here is a second call path: a message runs the governed
//! pipeline through [`Gateway::run`], exactly as an MCP `tools/call` does, and its task is an
//! MCP task ([`super::tasks`]), kept in the store, seen only by the principal and tenant that
//! made it, and run on by the task runner once its approval is decided.
//!
//! - **The agent card** (`GET /.well-known/agent-card.json`): the caller is identified as for
//!   MCP, and its tenant's tools are the card's skills (id: the tool's name; tags: its class
//!   and approval mode). The one interface is `[mcp.a2a] path` on this listener, at the
//!   endpoint's public URL. With `[mcp.a2a] key`, the card is signed ([`sign`]).
//! - **`SendMessage`**: the message names the skill and its arguments in one data part,
//!   `{"tool": NAME, "arguments": {...}}` (a model's free text is not a call: a deterministic
//!   gate does not guess). The message's `messageId` is the call's idempotency key, so a
//!   retried message is one effect; its `contextId` (made when absent) is the call's session,
//!   so rules over a session see an A2A context as one. The answer is a task:
//!   - `TASK_STATE_COMPLETED`, the tool's result as an artifact (text parts, and its
//!     structured content as a data part);
//!   - `TASK_STATE_AUTH_REQUIRED` when the call waits for an approval (A2A's in-task
//!     authorization, §7.6), its status message naming where an approver decides; the task
//!     runner runs it once approved, and the task then reads `COMPLETED`;
//!   - `TASK_STATE_REJECTED` for a call refused (by a policy, an approver, a gate, an expired
//!     approval) and `TASK_STATE_FAILED` for one that failed (the tool's error), the error's
//!     message and remediation as the status message.
//!
//!   Every task that ended carries the gateway's record of its call under
//!   `metadata["gatehouse/result"]`; one waiting names its approval under
//!   `metadata["gatehouse/approval_id"]`.
//! - **`GetTask`, `ListTasks`, `CancelTask`**: the caller's own tasks only; another's is
//!   `TaskNotFoundError`, as one that does not exist. `ListTasks` narrows them to a context, a
//!   state and a time before it pages them. Cancelling withdraws a pending approval.
//! - **Push notifications** ([`push`]): webhooks for a task, registered with
//!   `CreateTaskPushNotificationConfig` or with the message, each sent the task when its state
//!   changes. A webhook's addresses pass the egress gate's address checks: public only, unless
//!   `[mcp.a2a] push_allow_private` lists a range.
//! - **Backpressure**: a tenant has at most `[mcp.a2a] max_open_tasks` tasks open; a message
//!   beyond it is refused (-32000) and nothing runs.
//! - **Streaming**: `SendStreamingMessage` answers the message's task as an event stream (one
//!   event: the call ran, or waits for an approval, which interrupts a stream);
//!   `SubscribeToTask` follows a task that has not ended, an event for each change of its
//!   state, until it ends or [`FOLLOW`] passes.
//! - **`GetExtendedAgentCard`**: the card as the identified caller sees it (the public card of
//!   a caller without credentials lists no skill).
//! - Not offered: a message continuing a task (each call is a task of its own), -32004.
//!
//! Every request names the protocol version in `A2A-Version: 1.0` (without it a request is
//! 0.3's, which is not served).

use std::path::PathBuf;
use std::sync::Arc;

use gatehouse_core::agent_card;
use gatehouse_core::envelope::{OutcomeCode, Protocol, Status, ToolResultEnvelope};
use gatehouse_core::keys::SigningKey;
use gatehouse_core::model::ContentBlock;
use gatehouse_store::{Task, TaskFilter, TaskStatus};
use http::{HeaderMap, Response, StatusCode};
use ipnet::IpNet;
use push::Webhooks;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::call::{Gateway, traceparent};
use super::caller::Caller;
use super::reply::{self, Body};
use super::tasks::{self, TaskError, rfc3339};
use crate::access_log::Note;

mod push;

/// Where the agent card is served (A2A 1.0, §8.2).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The protocol version served.
pub const PROTOCOL_VERSION: &str = "1.0";
/// The header naming it.
pub const VERSION_HEADER: &str = "a2a-version";
/// The key under which a task's metadata carries the gateway's record of its call.
pub const RESULT_METADATA: &str = "gatehouse/result";
/// The longest `messageId` and `contextId` taken, in bytes.
pub const MAX_ID_LEN: usize = 256;
/// The key under which a task waiting for an approval names it.
pub const APPROVAL_METADATA: &str = "gatehouse/approval_id";

/// `[mcp.a2a]`: serve A2A on the MCP listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aConfig {
    /// The JSON-RPC endpoint's path. Default: `/a2a`.
    #[serde(default = "default_path")]
    pub path: String,
    /// The agent card's name. Default: `gatehouse`.
    #[serde(default = "default_name")]
    pub name: String,
    /// The agent card's description. Default: a sentence saying what the agent is.
    #[serde(default = "default_description")]
    pub description: String,
    /// Tasks a tenant may have open at once (waiting for an approval, or running): a message
    /// beyond it is refused, and nothing runs. Default: 100.
    #[serde(default = "default_max_open_tasks")]
    pub max_open_tasks: usize,
    /// Special-purpose address ranges a push notification's webhook may reach (loopback,
    /// private, link-local...), as an egress grant's `allow_private`. Default: none, so webhooks
    /// go to public addresses only.
    #[serde(default)]
    pub push_allow_private: Vec<IpNet>,
    /// A key from `gatehouse keygen` that signs the agent card (a JWS over its RFC 8785 form,
    /// A2A 1.0 §8.4): peers verify the card with its public half. Default: none, the card is
    /// unsigned.
    #[serde(default)]
    pub key: Option<PathBuf>,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            path: default_path(),
            name: default_name(),
            description: default_description(),
            max_open_tasks: default_max_open_tasks(),
            push_allow_private: Vec::new(),
            key: None,
        }
    }
}

fn default_max_open_tasks() -> usize {
    100
}

fn default_path() -> String {
    "/a2a".to_owned()
}

fn default_name() -> String {
    "gatehouse".to_owned()
}

fn default_description() -> String {
    "Governed tools: each skill is a tool, run through gatehouse's policy, approval, \
     idempotency and audit gates. Send a message with one data part {\"tool\": SKILL, \
     \"arguments\": {...}}."
        .to_owned()
}

/// The A2A front of one endpoint: its config and the URL peers reach it at.
#[derive(Debug)]
pub struct A2a {
    config: A2aConfig,
    /// The JSON-RPC interface's URL: the endpoint's public URL and `path`.
    url: String,
    /// Push notifications' webhooks, and their sender.
    webhooks: Arc<Webhooks>,
    /// The key signing the card, if any.
    key: Option<SigningKey>,
    /// The URL of the gateway's key set ([`super::jwks`]), named by the card's signature.
    jku: String,
}

/// A JSON-RPC error of the A2A binding: its code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The code (JSON-RPC's, or A2A's -32001 to -32009).
    pub code: i64,
    /// What went wrong, and the fix.
    pub message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(-32600, message)
    }

    fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }

    fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, message)
    }
}

impl From<TaskError> for RpcError {
    fn from(error: TaskError) -> Self {
        match error {
            TaskError::Unknown(_) => Self::new(-32001, error.to_string()),
            TaskError::Ended { .. } => Self::new(-32002, error.to_string()),
            TaskError::Store(_) => Self::internal(error.to_string()),
        }
    }
}

impl A2a {
    /// The A2A front of an endpoint reached at `base` (its public URL, scheme and authority):
    /// refused if its signing key cannot be read.
    pub fn new(config: A2aConfig, base: &str) -> Result<Self, String> {
        let url = format!("{}{}", base.trim_end_matches('/'), config.path);
        let jku = format!("{}{}", base.trim_end_matches('/'), super::jwks::PATH);
        let webhooks = Arc::new(Webhooks::new(config.push_allow_private.clone()));
        let key = (config.key.as_deref())
            .map(SigningKey::from_file)
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            config,
            url,
            webhooks,
            key,
            jku,
        })
    }

    /// The public half of the key the card is signed with, if it is signed.
    pub fn public_key(&self) -> Option<gatehouse_core::keys::PublicKey> {
        self.key.as_ref().map(SigningKey::public_key)
    }

    /// The JSON-RPC endpoint's path.
    pub fn path(&self) -> &str {
        &self.config.path
    }

    /// The agent card `caller` sees: its tenant's tools as skills (none for a caller not
    /// identified).
    pub fn card(&self, gateway: &Gateway, caller: Option<&Caller>) -> Value {
        let tools = caller.map_or_else(Vec::new, |caller| {
            gateway.host().tool_catalog(&caller.tenant)
        });
        let skills: Vec<Value> = tools
            .into_iter()
            .map(|(name, capability)| {
                let name = gateway.aliases().listed_name(name);
                json!({
                    "id": name,
                    "name": capability.title.clone().unwrap_or_else(|| name.clone()),
                    "description": capability.description,
                    "tags": [
                        capability.capability_class.to_string(),
                        capability.approval_mode.to_string(),
                    ],
                    "examples": [json!({ "tool": name, "arguments": {} }).to_string()],
                    "inputModes": ["application/json"],
                    "outputModes": ["application/json", "text/plain"],
                })
            })
            .collect();
        let mut card = json!({
            "name": self.config.name,
            "description": self.config.description,
            "version": env!("CARGO_PKG_VERSION"),
            "supportedInterfaces": [{
                "url": self.url,
                "protocolBinding": "JSONRPC",
                "protocolVersion": PROTOCOL_VERSION,
            }],
            "capabilities": {
                "streaming": true,
                "pushNotifications": true,
                "extendedAgentCard": true,
            },
            "defaultInputModes": ["application/json"],
            "defaultOutputModes": ["application/json", "text/plain"],
            "skills": skills,
        });
        if let Some(key) = &self.key {
            card["signatures"] = json!([agent_card::sign(&card, key, Some(&self.jku))]);
        }
        card
    }

    /// Answers one JSON-RPC request `body` of `caller`: the JSON-RPC response (a request it
    /// cannot read is answered with its error and `id` null).
    pub async fn answer(
        &self,
        gateway: &Gateway,
        caller: Caller,
        headers: &HeaderMap,
        body: &[u8],
        note: &Note,
    ) -> Response<Body> {
        let request: Value = match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(error) => {
                let error = RpcError::new(-32700, format!("the body is not JSON: {error}"));
                return reply::json(StatusCode::OK, &failure(&Value::Null, &error));
            }
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        match self
            .dispatch(gateway, caller, headers, &request, note)
            .await
        {
            Ok(Reply::Result(result)) => reply::json(
                StatusCode::OK,
                &json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            ),
            Ok(Reply::Stream { task, follow }) => stream(gateway.shared_host(), id, *task, follow),
            Err(error) => reply::json(StatusCode::OK, &failure(&id, &error)),
        }
    }

    async fn dispatch(
        &self,
        gateway: &Gateway,
        caller: Caller,
        headers: &HeaderMap,
        request: &Value,
        note: &Note,
    ) -> Result<Reply, RpcError> {
        if request.get("jsonrpc") != Some(&json!("2.0")) || !request.is_object() {
            return Err(RpcError::invalid_request(
                "the body must be one JSON-RPC 2.0 request object",
            ));
        }
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_request("the request names no method"))?;
        version(headers)?;
        let params = match request.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(_) => return Err(RpcError::invalid_params("`params` must be an object")),
        };
        let host = gateway.host();
        let result = match method {
            "SendMessage" => {
                let task = self.send(gateway, caller, headers, &params, note).await?;
                json!({ "task": wire(&task) })
            }
            "SendStreamingMessage" => {
                let task = self.send(gateway, caller, headers, &params, note).await?;
                return Ok(Reply::Stream {
                    task: Box::new(task),
                    follow: false,
                });
            }
            "SubscribeToTask" => {
                let task = tasks::owned(host, &caller, task_id(&params, "id")?).await?;
                if task.status.is_terminal() {
                    return Err(RpcError::new(
                        -32004,
                        format!(
                            "task `{}` has ended ({}): there is nothing to follow; read it with \
                             GetTask",
                            task.id,
                            wire(&task)["status"]["state"]
                        ),
                    ));
                }
                return Ok(Reply::Stream {
                    task: Box::new(task),
                    follow: true,
                });
            }
            "GetTask" => wire(&tasks::owned(host, &caller, task_id(&params, "id")?).await?),
            "ListTasks" => list(gateway, &caller, &params).await?,
            "CancelTask" => wire(&tasks::cancel(host, &caller, task_id(&params, "id")?).await?),
            "CreateTaskPushNotificationConfig" => {
                let task = tasks::owned(host, &caller, task_id(&params, "taskId")?).await?;
                let hook = self.webhooks.check(&params).await?;
                let wire = self.webhooks.add(&task.id, hook)?;
                self.webhooks.start(gateway.shared_host());
                wire
            }
            "GetTaskPushNotificationConfig" => {
                let task = tasks::owned(host, &caller, task_id(&params, "taskId")?).await?;
                self.webhooks.get(&task.id, task_id(&params, "id")?)?
            }
            "ListTaskPushNotificationConfigs" => {
                let task = tasks::owned(host, &caller, task_id(&params, "taskId")?).await?;
                self.webhooks.list(&task.id)
            }
            "DeleteTaskPushNotificationConfig" => {
                let task = tasks::owned(host, &caller, task_id(&params, "taskId")?).await?;
                self.webhooks.delete(&task.id, task_id(&params, "id")?)?;
                json!({})
            }
            // The card the caller sees, identified: the public card of a caller without
            // credentials lists no skill.
            "GetExtendedAgentCard" => self.card(gateway, Some(&caller)),
            other => {
                return Err(RpcError::new(
                    -32601,
                    format!("there is no method `{other}` in A2A {PROTOCOL_VERSION}"),
                ));
            }
        };
        Ok(Reply::Result(result))
    }

    /// `SendMessage`: the call the message names, run as a task of `caller`'s.
    async fn send(
        &self,
        gateway: &Gateway,
        caller: Caller,
        headers: &HeaderMap,
        params: &Map<String, Value>,
        note: &Note,
    ) -> Result<Task, RpcError> {
        let message = params
            .get("message")
            .and_then(Value::as_object)
            .ok_or_else(|| RpcError::invalid_params("`message` must be a Message object"))?;
        let text = |key: &str| {
            message
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let message_id = text("messageId")
            .ok_or_else(|| RpcError::invalid_params("the message has no `messageId`"))?;
        // Both become keys the store keeps (the idempotency key, the session).
        for key in ["messageId", "contextId"] {
            if let Some(id) = text(key)
                && (id.len() > MAX_ID_LEN || id.chars().any(char::is_control))
            {
                return Err(RpcError::invalid_params(format!(
                    "the message's `{key}` must be at most {MAX_ID_LEN} bytes, without control \
                     characters"
                )));
            }
        }
        if message.get("role").and_then(Value::as_str) != Some("ROLE_USER") {
            return Err(RpcError::invalid_params(
                "the message's `role` must be ROLE_USER: an agent's message is not a request",
            ));
        }
        if let Some(task) = text("taskId") {
            return Err(RpcError::new(
                -32004,
                format!(
                    "task `{task}` takes no further message: each call is a task of its own, and \
                     one waiting for approval goes on when an approver decides; send a new \
                     message without `taskId`"
                ),
            ));
        }
        let (tool, arguments) = skill_call(message)?;
        // A webhook the message registers is checked before anything runs.
        let hook = match params
            .get("configuration")
            .and_then(|c| c.get("taskPushNotificationConfig"))
        {
            Some(Value::Object(config)) => Some(self.webhooks.check(config).await?),
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "`configuration.taskPushNotificationConfig` must be an object",
                ));
            }
            None => None,
        };
        self.room(gateway, &caller).await?;
        let context = text("contextId")
            .map(str::to_owned)
            .unwrap_or_else(|| format!("ctx_{}", gatehouse_core::ids::tool_call_id()));
        let caller = caller.in_session(Some(context.clone()));
        let name = gateway.aliases().tool(&tool).unwrap_or(&tool).to_owned();
        let mut call = caller
            .envelope(Protocol::A2a, &name, arguments)
            .with_idempotency_key(format!("a2a:{message_id}"));
        let traceparent = traceparent(headers);
        if let Some(traceparent) = &traceparent {
            call = call.with_traceparent(traceparent);
        }
        // The call's span names its A2A ids beside the tool (the task's once it has one), and
        // joins the peer's trace; the audit record keeps the context (the session) and the
        // message (the idempotency key).
        let span = tracing::info_span!(
            "a2a_call",
            tool = %name,
            a2a.context_id = %context,
            a2a.message_id = %message_id,
            a2a.task_id = tracing::field::Empty,
        );
        if let Some(traceparent) = &traceparent {
            gatehouse_host::telemetry::continue_remote(&span, traceparent);
        }
        let result = gateway.run(call, span.clone(), Some(note), None).await;
        if result.outcome == OutcomeCode::UnknownCapability {
            return Err(RpcError::invalid_params(format!(
                "there is no skill `{tool}` for this caller: the agent card lists the ones it \
                 may use"
            )));
        }
        let task = tasks::create(gateway.host(), &caller, &tool, &result, None).await?;
        span.record("a2a.task_id", task.id.as_str());
        if let Some(hook) = hook {
            self.webhooks.add(&task.id, hook)?;
            self.webhooks.start(gateway.shared_host());
        }
        Ok(task)
    }

    /// Whether `caller`'s tenant may open one more task: fewer than `max_open_tasks` of its
    /// tasks (A2A's and MCP's, one store) are waiting or running.
    async fn room(&self, gateway: &Gateway, caller: &Caller) -> Result<(), RpcError> {
        let max = self.config.max_open_tasks;
        let open = gateway
            .host()
            .store()
            .tasks(TaskFilter {
                tenant: Some(caller.tenant.clone()),
                statuses: vec![TaskStatus::Working, TaskStatus::InputRequired],
                limit: max,
                ..TaskFilter::default()
            })
            .await
            .map_err(|e| RpcError::internal(format!("the task store is unavailable: {e}")))?
            .len();
        if open >= max {
            return Err(RpcError::new(
                -32000,
                format!(
                    "tenant `{}` has {open} open tasks, the most `[mcp.a2a] max_open_tasks` \
                     allows: nothing ran; send it again once some have ended (an approver \
                     decides them), or cancel one",
                    caller.tenant
                ),
            ));
        }
        Ok(())
    }
}

/// What a request is answered with: one JSON-RPC result, or an event stream of a task.
enum Reply {
    /// The result.
    Result(Value),
    /// The task, as a stream's first event; with `follow`, each change of its state after it,
    /// until it ends.
    Stream { task: Box<Task>, follow: bool },
}

/// How long a `SubscribeToTask` stream follows a task before it closes (the peer subscribes
/// again): an approval may take a day, a held connection should not.
pub const FOLLOW: std::time::Duration = std::time::Duration::from_secs(300);
/// How often a followed task is read.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The event stream answering request `id`: `task` as A2A's `StreamResponse`, then, with
/// `follow`, the task again each time its state changes, until it ends or [`FOLLOW`] passes.
/// A streamed message's task comes alone: it has run, or it waits for an approval (an
/// interrupted state, which ends a stream).
fn stream(host: Arc<gatehouse_host::Host>, id: Value, task: Task, follow: bool) -> Response<Body> {
    let (sender, response) = reply::events();
    tokio::spawn(async move {
        let event = |task: &Value| {
            reply::event(&json!({ "jsonrpc": "2.0", "id": id, "result": { "task": task } }))
        };
        let mut last = wire(&task);
        if sender.send(event(&last)).await.is_err() || !follow {
            return;
        }
        let until = tokio::time::Instant::now() + FOLLOW;
        let mut ended = task.status.is_terminal();
        while !ended && tokio::time::Instant::now() < until {
            tokio::time::sleep(FOLLOW_POLL).await;
            let Ok(Some(now)) = host.store().task(task.id.clone()).await else {
                return;
            };
            ended = now.status.is_terminal();
            let now = wire(&now);
            if now["status"]["state"] != last["status"]["state"] {
                if sender.send(event(&now)).await.is_err() {
                    return;
                }
                last = now;
            }
        }
    });
    response
}

/// The one data part of `message` naming a call: its tool and arguments.
fn skill_call(message: &Map<String, Value>) -> Result<(String, Value), RpcError> {
    let shape = "name the skill in one data part: {\"data\": {\"tool\": SKILL, \"arguments\": \
                 {...}}}, the skill one of the agent card's";
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| RpcError::invalid_params(format!("the message has no `parts`: {shape}")))?;
    let mut calls = parts.iter().filter_map(|part| part.get("data"));
    let (Some(data), None) = (calls.next(), calls.next()) else {
        return Err(RpcError::invalid_params(format!(
            "the message must have exactly one data part: {shape}"
        )));
    };
    let tool = data.get("tool").and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("the data part names no `tool`: {shape}"))
    })?;
    let arguments = match data.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "the data part's `arguments` must be an object",
            ));
        }
    };
    Ok((tool.to_owned(), arguments))
}

/// `A2A-Version` must name 1.0 (a patch is ignored); a request without it is 0.3's.
fn version(headers: &HeaderMap) -> Result<(), RpcError> {
    let named = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    let served = named.is_some_and(|v| {
        let mut parts = v.trim().split('.');
        (parts.next(), parts.next()) == (Some("1"), Some("0"))
    });
    if served {
        return Ok(());
    }
    Err(RpcError::new(
        -32009,
        format!(
            "A2A {} is not served: send `A2A-Version: {PROTOCOL_VERSION}`",
            named.unwrap_or("0.3 (no A2A-Version header)")
        ),
    ))
}

/// The task id under `key` in `params`.
fn task_id<'a>(params: &'a Map<String, Value>, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("`{key}` must name a task")))
}

/// The task states of A2A 1.0 a `ListTasks` may ask for (all but `UNSPECIFIED`, which asks
/// for none in particular).
const STATES: [&str; 8] = [
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
];
/// A page's size when the request names none, and the most a request may name (A2A 1.0).
const PAGE: (u64, u64) = (50, 100);

/// What a `ListTasks` asks for: which of the caller's tasks, and which page of them.
#[derive(Debug, Default, PartialEq)]
struct ListQuery<'a> {
    /// Only the tasks of this context.
    context: Option<&'a str>,
    /// Only the tasks in this state (one of [`STATES`]).
    state: Option<&'static str>,
    /// Only the tasks whose status changed at this time (unix ms) or after.
    since_ms: Option<u64>,
    /// At most this many tasks.
    size: u64,
    /// After this task: the last of the page before.
    token: Option<&'a str>,
    /// With each task's artifacts (A2A leaves them out unless asked).
    artifacts: bool,
}

/// `params` read as a `ListTasks` request; a field of the wrong shape is an error naming it.
fn list_query(params: &Map<String, Value>) -> Result<ListQuery<'_>, RpcError> {
    let text = |key: &str| -> Result<Option<&str>, RpcError> {
        match params.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.as_str()).filter(|text| !text.is_empty())),
            Some(_) => Err(RpcError::invalid_params(format!(
                "`{key}` must be a string"
            ))),
        }
    };
    let state =
        match text("status")? {
            None | Some("TASK_STATE_UNSPECIFIED") => None,
            Some(state) => Some(*STATES.iter().find(|known| **known == state).ok_or_else(
                || {
                    RpcError::invalid_params(format!(
                        "`status` `{state}` is not a task state; one of {}",
                        STATES.join(", ")
                    ))
                },
            )?),
        };
    let since_ms = match text("statusTimestampAfter")? {
        None => None,
        Some(at) => {
            let at = chrono::DateTime::parse_from_rfc3339(at).map_err(|e| {
                RpcError::invalid_params(format!(
                    "`statusTimestampAfter` `{at}` is not an RFC 3339 time, such as \
                     2026-11-30T09:00:00Z: {e}"
                ))
            })?;
            Some(u64::try_from(at.timestamp_millis()).unwrap_or(0))
        }
    };
    let size = match params.get("pageSize") {
        None | Some(Value::Null) => PAGE.0,
        Some(size) => size
            .as_u64()
            .filter(|size| (1..=PAGE.1).contains(size))
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "`pageSize` must be a whole number from 1 to {}, not {size}",
                    PAGE.1
                ))
            })?,
    };
    let artifacts = match params.get("includeArtifacts") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(artifacts)) => *artifacts,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "`includeArtifacts` must be true or false",
            ));
        }
    };
    Ok(ListQuery {
        context: text("contextId")?,
        state,
        since_ms,
        size,
        token: text("pageToken")?,
        artifacts,
    })
}

/// The stored statuses of a task that A2A calls `state` ([`state`] tells them apart); none
/// means any.
fn stored(state: Option<&str>) -> &'static [TaskStatus] {
    match state {
        Some("TASK_STATE_WORKING" | "TASK_STATE_AUTH_REQUIRED") => &[TaskStatus::Working],
        Some("TASK_STATE_INPUT_REQUIRED") => &[TaskStatus::InputRequired],
        Some("TASK_STATE_COMPLETED" | "TASK_STATE_REJECTED") => &[TaskStatus::Completed],
        Some("TASK_STATE_FAILED") => &[TaskStatus::Completed, TaskStatus::Failed],
        Some("TASK_STATE_CANCELED") => &[TaskStatus::Cancelled],
        _ => &[],
    }
}

/// `ListTasks`: the caller's tasks, newest first, narrowed to a context, a state and a time
/// when asked, then a page of them. The narrowing comes first, so each page is full but the
/// last, and `totalSize` counts every task that matches. A page token is the id of the
/// page's last task; the next page starts after it, wherever the tasks between have gone.
/// Tasks keep no message history: `historyLength` changes nothing.
async fn list(
    gateway: &Gateway,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let query = list_query(params)?;
    let after = match query.token {
        Some(token) => {
            let task = tasks::owned(gateway.host(), caller, token)
                .await
                .map_err(|error| match error {
                    TaskError::Unknown(_) => RpcError::invalid_params(format!(
                        "`pageToken` `{token}` is not a page of your tasks: give the \
                         `nextPageToken` of an earlier answer, or none for the first page"
                    )),
                    other => other.into(),
                })?;
            Some((task.created_at_ms, task.id))
        }
        None => None,
    };
    let matching: Vec<Task> = tasks::all(gateway.host(), caller, stored(query.state))
        .await?
        .into_iter()
        .filter(|task| {
            query
                .context
                .is_none_or(|context| task.call["session_id"] == context)
                && query
                    .state
                    .is_none_or(|wanted| state(task, tasks::result_of(task).as_ref()) == wanted)
                && query
                    .since_ms
                    .is_none_or(|since| task.updated_at_ms >= since)
        })
        .collect();
    let start = after.map_or(0, |(at, id)| {
        (matching.iter())
            .position(|task| (task.created_at_ms, task.id.as_str()) < (at, id.as_str()))
            .unwrap_or(matching.len())
    });
    let size = usize::try_from(query.size).unwrap_or(usize::MAX);
    let page = &matching[start..matching.len().min(start.saturating_add(size))];
    let next = match page.last() {
        Some(last) if start + page.len() < matching.len() => last.id.as_str(),
        _ => "",
    };
    let tasks: Vec<Value> = page
        .iter()
        .map(|task| {
            let mut wire = wire(task);
            if !query.artifacts
                && let Some(task) = wire.as_object_mut()
            {
                task.remove("artifacts");
            }
            wire
        })
        .collect();
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": next,
        "pageSize": query.size,
        "totalSize": matching.len(),
    }))
}

/// A task as A2A has it.
pub fn wire(task: &Task) -> Value {
    let result = tasks::result_of(task);
    let state = state(task, result.as_ref());
    // The context is the call's session: kept in the stored call.
    let context = task.call["session_id"].as_str().unwrap_or_default();
    let mut status = json!({ "state": state, "timestamp": rfc3339(task.updated_at_ms) });
    let said = match (state, result.as_ref().and_then(|r| r.error.as_ref())) {
        ("TASK_STATE_COMPLETED", _) => None,
        (_, Some(error)) => Some(match &error.remediation {
            Some(fix) => format!("{} ({fix})", error.message),
            None => error.message.clone(),
        }),
        _ => task.status_message.clone(),
    };
    if let Some(said) = said {
        status["message"] = json!({
            "messageId": format!("{}-status", task.id),
            "role": "ROLE_AGENT",
            "taskId": task.id,
            "contextId": context,
            "parts": [{ "text": said }],
        });
    }
    let mut wire = json!({ "id": task.id, "contextId": context, "status": status });
    if let Some(result) = &result {
        if result.status == Status::Ok {
            wire["artifacts"] = json!([artifact(result)]);
        }
        wire["metadata"] = json!({ RESULT_METADATA: result });
    } else if let Some(approval) = &task.approval_id {
        wire["metadata"] = json!({ APPROVAL_METADATA: approval });
    }
    wire
}

/// The A2A state of `task`, whose call ended with `result` if it did.
fn state(task: &Task, result: Option<&ToolResultEnvelope>) -> &'static str {
    match (task.status, result.map(|r| r.status)) {
        (TaskStatus::Working, _) if task.approval_id.is_some() || tasks::awaits(task).is_some() => {
            "TASK_STATE_AUTH_REQUIRED"
        }
        (TaskStatus::Working, _) => "TASK_STATE_WORKING",
        (TaskStatus::InputRequired, _) => "TASK_STATE_INPUT_REQUIRED",
        (TaskStatus::Cancelled, _) => "TASK_STATE_CANCELED",
        (TaskStatus::Completed, Some(Status::Ok)) => "TASK_STATE_COMPLETED",
        (TaskStatus::Completed, Some(Status::Rejected)) => "TASK_STATE_REJECTED",
        (TaskStatus::Completed | TaskStatus::Failed, _) => "TASK_STATE_FAILED",
    }
}

/// A call's result as an artifact: its text blocks as text parts, its structured content as
/// a data part, any other block as a data part holding it.
fn artifact(result: &ToolResultEnvelope) -> Value {
    let mut parts: Vec<Value> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => json!({ "text": text }),
            other => json!({ "data": other }),
        })
        .collect();
    if let Some(structured) = &result.structured_content {
        parts.push(json!({ "data": structured }));
    }
    json!({
        "artifactId": format!("{}-result", result.tool_call_id),
        "name": "result",
        "parts": parts,
    })
}

/// A JSON-RPC error response to request `id`.
fn failure(id: &Value, error: &RpcError) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": error.code, "message": error.message },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(version) = version {
            headers.insert(VERSION_HEADER, version.parse().unwrap());
        }
        headers
    }

    #[test]
    fn only_version_1_0_is_served() {
        assert!(version(&headers(Some("1.0"))).is_ok());
        assert!(version(&headers(Some("1.0.1"))).is_ok());
        for refused in [None, Some("0.3"), Some("2.0"), Some("1")] {
            let error = version(&headers(refused)).unwrap_err();
            assert_eq!(error.code, -32009, "{refused:?}");
            assert!(
                error.message.contains("send `A2A-Version: 1.0`"),
                "{}",
                error.message
            );
        }
    }

    #[test]
    fn a_list_request_is_read_with_a2as_defaults_and_a_bad_field_is_named() {
        let query = |params: Value| -> Result<ListQuery<'static>, RpcError> {
            let params: &'static Map<String, Value> =
                Box::leak(Box::new(params.as_object().unwrap().clone()));
            list_query(params)
        };
        let defaults = query(json!({})).unwrap();
        assert_eq!(
            defaults,
            ListQuery {
                size: 50,
                ..ListQuery::default()
            }
        );
        let asked = query(json!({
            "contextId": "ctx_1", "status": "TASK_STATE_AUTH_REQUIRED", "pageSize": 100,
            "pageToken": "task_9", "includeArtifacts": true, "historyLength": 3,
            "statusTimestampAfter": "2026-11-30T10:00:00.5+01:00",
        }))
        .unwrap();
        assert_eq!(
            asked,
            ListQuery {
                context: Some("ctx_1"),
                state: Some("TASK_STATE_AUTH_REQUIRED"),
                since_ms: Some(1_796_029_200_500),
                size: 100,
                token: Some("task_9"),
                artifacts: true,
            }
        );
        // proto3's JSON writes an unset field as its default: no filter.
        let unset = query(json!({ "status": "TASK_STATE_UNSPECIFIED", "contextId": "",
                                  "pageToken": "" }))
        .unwrap();
        assert_eq!(unset, defaults);
        for (bad, named) in [
            (json!({ "pageSize": 0 }), "`pageSize`"),
            (json!({ "pageSize": 101 }), "`pageSize`"),
            (json!({ "pageSize": "ten" }), "`pageSize`"),
            (
                json!({ "status": "done" }),
                "`status` `done` is not a task state",
            ),
            (json!({ "statusTimestampAfter": "yesterday" }), "RFC 3339"),
            (json!({ "includeArtifacts": "yes" }), "`includeArtifacts`"),
            (json!({ "contextId": 7 }), "`contextId` must be a string"),
        ] {
            let error = query(bad.clone()).unwrap_err();
            assert_eq!(error.code, -32602, "{bad}");
            assert!(error.message.contains(named), "{bad}: {}", error.message);
        }
    }

    #[test]
    fn each_a2a_state_is_looked_for_among_the_stored_statuses_it_comes_from() {
        let result = |status: &str| {
            json!({
                "envelope_version": "1", "tool_call_id": "c", "trace_id": "t",
                "capability_id": "x.y", "status": status, "outcome": "OK",
                "content": [], "evidence_refs": [],
            })
        };
        // Every task there can be: each stored status, waiting on an approval or not, with
        // each way its call can have ended; its A2A state is one `stored` looks among.
        for status in [
            TaskStatus::Working,
            TaskStatus::InputRequired,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            for approval_id in [None, Some("apr_1".to_owned())] {
                for ended in [None, Some("ok"), Some("rejected"), Some("failed")] {
                    let task = Task {
                        id: "task_1".to_owned(),
                        tenant: "t".to_owned(),
                        principal: "p".to_owned(),
                        tool: "x.y".to_owned(),
                        approval_id: approval_id.clone(),
                        call: json!({}),
                        status,
                        status_message: None,
                        result: ended.map(result),
                        created_at_ms: 1,
                        updated_at_ms: 1,
                        expires_at_ms: 2,
                    };
                    let state = state(&task, tasks::result_of(&task).as_ref());
                    assert!(STATES.contains(&state), "{state}");
                    let stored = stored(Some(state));
                    assert!(
                        stored.is_empty() || stored.contains(&status),
                        "a {status:?} task is {state}, looked for among {stored:?}"
                    );
                }
            }
        }
        assert!(stored(None).is_empty());
    }

    #[test]
    fn a_message_names_one_skill_in_one_data_part() {
        let message = |parts: Value| -> Map<String, Value> {
            json!({ "parts": parts }).as_object().unwrap().clone()
        };
        let (tool, arguments) = skill_call(&message(json!([
            { "text": "please echo" },
            { "data": { "tool": "gatehouse.echo.echo", "arguments": { "message": "hi" } } },
        ])))
        .unwrap();
        assert_eq!(tool, "gatehouse.echo.echo");
        assert_eq!(arguments, json!({ "message": "hi" }));
        for bad in [
            json!([{ "text": "echo hi" }]),
            json!([{ "data": { "tool": "a" } }, { "data": { "tool": "b" } }]),
            json!([{ "data": { "arguments": {} } }]),
            json!([{ "data": { "tool": "a", "arguments": [1] } }]),
        ] {
            let error = skill_call(&message(bad.clone())).unwrap_err();
            assert_eq!(error.code, -32602, "{bad}");
        }
    }
}
