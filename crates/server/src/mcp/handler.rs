//! The rmcp server handler: `tools/list` and `tools/call` for the identified caller, through
//! the host's governed pipeline; on protocol 2026-07-28, a call paused for approval answered as
//! [`super::approvals`] says (an `InputRequiredResult`, or a task), and `tasks/get` and
//! `tasks/cancel` of the tasks extension ([`super::tasks`]).

use std::sync::Arc;

use gatehouse_core::envelope::{OutcomeCode, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::ApprovalMode;
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::Capability;
use gatehouse_store::{Task, TaskStatus};
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    GetTaskResult, Implementation, InputResponses, ListToolsResult, PaginatedRequestParams,
    RequestMetaObject, ServerCapabilities, ServerConfig, Tool, ToolAnnotations, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tracing::Instrument;

use super::aliases::ToolAliases;
use super::approvals::{self, APPROVAL_INPUT, Approvals, CONSENT_INPUT, ClientCan, Sent};
use super::caller::Caller;
use super::keys::{self, KeyArgument};
use super::meta::{APPROVAL_ID_META, APPROVAL_MODE_META, IDEMPOTENCY_KEY_META, RESULT_META};
use super::result::to_mcp;
use super::tasks::{self, TaskError};
use crate::access_log::Note;

/// `_meta` key of the client capabilities a 2026-07-28 request carries.
const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// The MCP server handler: one per request (stateless), all sharing the host.
#[derive(Clone)]
pub struct Gateway {
    host: Arc<Host>,
    aliases: Arc<ToolAliases>,
    keys: KeyArgument,
    approvals: Arc<Approvals>,
}

impl Gateway {
    pub fn new(
        host: Arc<Host>,
        aliases: ToolAliases,
        keys: KeyArgument,
        approvals: Approvals,
    ) -> Self {
        Self {
            host,
            aliases: Arc::new(aliases),
            keys,
            approvals: Arc::new(approvals),
        }
    }

    /// How paused calls reach clients.
    pub(crate) fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The host the calls run on, shared.
    pub(crate) fn shared_host(&self) -> Arc<Host> {
        Arc::clone(&self.host)
    }

    /// `tools/call` for `caller`, whether rmcp's handler or the direct path ([`super::direct`])
    /// took the request: `meta` is the request's `_meta` (rmcp moves it out of the params),
    /// `headers` the HTTP request's; `note` gets the call for the request's access line. The
    /// result is the caller's view of the envelope, which each path maps to MCP. `resume` is
    /// the approval a verified `requestState` resumes.
    pub async fn call(
        &self,
        caller: Caller,
        request: CallToolRequestParams,
        meta: &RequestMetaObject,
        headers: Option<&http::HeaderMap>,
        note: Option<&Note>,
        resume: Option<&str>,
    ) -> Result<ToolResultEnvelope, ErrorData> {
        let mut args = request.arguments.unwrap_or_default();
        let name = self.aliases.tool(&request.name).unwrap_or(&request.name);
        let meta = request.meta.as_ref().unwrap_or(meta);
        let key = self.keys.take(
            &self.host,
            &caller.tenant,
            name,
            &mut args,
            meta_str(meta, IDEMPOTENCY_KEY_META)?,
        );
        let mut call = ToolCallEnvelope::new(&caller.tenant, name, Value::Object(args))
            .with_principal(caller.principal)
            .with_claims(caller.claims);
        // W3C trace context: the call joins the caller's trace, from `_meta` (SEP-414) or else
        // the HTTP request's header.
        let traceparent = meta.get_traceparent().map(str::to_owned).or_else(|| {
            headers
                .and_then(|headers| headers.get("traceparent"))
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        });
        if let Some(traceparent) = &traceparent {
            call = call.with_traceparent(traceparent);
        }
        match key {
            Ok(Some(key)) => call = call.with_idempotency_key(key),
            Ok(None) => {}
            Err(refusal) => {
                tracing::info!(tool = %request.name, "call refused: {refusal}");
                let result = keys::refused(&call, &refusal);
                if let Some(note) = note {
                    note.call(&result);
                }
                return Ok(result);
            }
        }
        if let Some(id) = resume.or(meta_str(meta, APPROVAL_ID_META)?) {
            call = call.with_approval(id);
        }
        if let Some(mode) = meta.get(APPROVAL_MODE_META) {
            let mode: ApprovalMode = serde_json::from_value(mode.clone()).map_err(|_| {
                ErrorData::invalid_params(
                    format!(
                        "_meta[\"{APPROVAL_MODE_META}\"] must be one of read_only, local_write, network, delegated, destructive"
                    ),
                    None,
                )
            })?;
            call = call.with_mode(mode);
        }
        let span = mcp_span(&request.name, traceparent.as_deref());
        let result = self.run(call, span, note).await;
        if result.outcome == OutcomeCode::UnknownCapability {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
        Ok(result)
    }

    /// Runs a prepared call through the pipeline: the caller's view of its result, with the
    /// key argument named where the result asks for a key.
    pub async fn run(
        &self,
        call: ToolCallEnvelope,
        span: tracing::Span,
        note: Option<&Note>,
    ) -> ToolResultEnvelope {
        let mut result = self.host.call_for_caller(call).instrument(span).await;
        self.keys.name_in(&mut result);
        if let Some(note) = note {
            note.call(&result);
        }
        result
    }

    /// Runs again the call approval `id` holds (its envelope as proposed), now that it was
    /// decided: what a held request and a task do once the approver decided.
    pub async fn resume(
        &self,
        id: &str,
        note: Option<&Note>,
    ) -> Result<Option<ToolResultEnvelope>, gatehouse_store::StoreError> {
        let Some(approval) = self.host.approval(id).await? else {
            return Ok(None);
        };
        let Ok(mut call) = serde_json::from_value::<ToolCallEnvelope>(approval.call) else {
            return Ok(None);
        };
        call.tool_call_id = gatehouse_core::ids::tool_call_id();
        call.approval_id = Some(approval.id);
        let span = mcp_span(&call.capability_id, None);
        Ok(Some(self.run(call, span, note).await))
    }

    /// A 2026-07-28 `tools/call` (see the module docs): a retry's `requestState` verified and its
    /// approval waited for, the call run, and a paused result answered as the client can take.
    async fn call_2026(
        &self,
        caller: Caller,
        mut request: CallToolRequestParams,
        meta: &RequestMetaObject,
        headers: Option<&http::HeaderMap>,
        note: Option<&Note>,
    ) -> Result<CallToolResponse, ErrorData> {
        let meta = request.meta.take().unwrap_or_else(|| meta.clone());
        let can = ClientCan::from_capabilities(meta.get(CLIENT_CAPABILITIES_META));
        let state = request.request_state.take();
        let responses = request.input_responses.take().unwrap_or_default();
        let tool = request.name.to_string();
        let args = request.arguments.clone().unwrap_or_default();
        let key = meta_str(&meta, IDEMPOTENCY_KEY_META)?.map(str::to_owned);
        let sent = Sent {
            tool: &tool,
            args: &args,
            key: key.as_deref(),
        };
        let mut resume = None;
        if let Some(state) = &state {
            let approval = self
                .approvals
                .open(state, &caller, &sent)
                .map_err(|refusal| ErrorData::invalid_params(refusal.to_string(), None))?;
            if let Some(allow) = responses
                .get(CONSENT_INPUT)
                .and_then(approvals::consent_answer)
            {
                self.consent(&caller, &approval, allow).await?;
            }
            self.held(&approval).await;
            let until = tokio::time::Instant::now() + self.approvals.hold();
            if let Err(error) = self.host.await_decision(&approval, until).await {
                tracing::warn!(%error, approval = %approval, "cannot read the approval a retry waits on");
            }
            resume = Some(approval);
        }
        let result = self
            .call(
                caller.clone(),
                request,
                &meta,
                headers,
                note,
                resume.as_deref(),
            )
            .await?;
        if result.outcome != OutcomeCode::ApprovalRequired {
            return Ok(CallToolResponse::Complete(to_mcp(&result)?));
        }
        self.paused_2026(&caller, &sent, &result, can, &responses)
            .await
    }

    /// A 2026-07-28 call paused for approval, as the client can take it: a task, a consent
    /// form, the approval's console page (with the state to resume with), or the paused result.
    async fn paused_2026(
        &self,
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
        let tool = sent.tool;
        if can.tasks {
            let task = tasks::create(&self.host, caller, tool, result, None)
                .await
                .map_err(task_error)?;
            return Ok(CallToolResponse::Task(created(&task)?));
        }
        let approval = match self.host.approval(approval_id).await {
            Ok(Some(approval)) => approval,
            Ok(None) | Err(_) => return paused(),
        };
        let state = self
            .approvals
            .seal(caller, sent, &approval, gatehouse_store::now_ms());
        if can.form
            && self.approvals.consent_applies(result)
            && !answered.contains_key(CONSENT_INPUT)
        {
            let mode = result
                .approval_mode_effective
                .unwrap_or(ApprovalMode::Delegated);
            let args = approval.call.get("args").cloned().unwrap_or(Value::Null);
            let inputs =
                approvals::consent_request(tool, &self.host.approver_view(tool, &args), mode);
            return Ok(CallToolResponse::InputRequired(Approvals::input_required(
                Some(inputs),
                state,
            )));
        }
        if can.url
            && let Some(url) = self.host.approval_url(approval_id)
        {
            let inputs = (!answered.contains_key(APPROVAL_INPUT))
                .then(|| approvals::url_request(&url, tool, approval_id));
            return Ok(CallToolResponse::InputRequired(Approvals::input_required(
                inputs, state,
            )));
        }
        paused()
    }

    /// Records that a request now holds for approval `id`'s decision, until the hold time
    /// passes (what the console shows approvers).
    pub(crate) async fn held(&self, id: &str) {
        let until_ms = gatehouse_store::now_ms()
            + u64::try_from(self.approvals.hold().as_millis()).unwrap_or(u64::MAX);
        let waiting = gatehouse_store::Waiting::Held { until_ms };
        if let Err(error) = self.host.store().set_waiting(id.to_owned(), waiting).await {
            tracing::debug!(approval = %id, %error, "cannot record a held request");
        }
    }

    /// The calling user's answer to the consent form on approval `id`: refused unless the
    /// approval's mode is one the operator lets callers consent to.
    async fn consent(&self, caller: &Caller, id: &str, allow: bool) -> Result<(), ErrorData> {
        let approval = match self.host.approval(id).await {
            Ok(Some(approval)) => approval,
            Ok(None) => {
                return Err(ErrorData::invalid_params(
                    format!("there is no approval `{id}`"),
                    None,
                ));
            }
            Err(error) => return Err(ErrorData::internal_error(error.to_string(), None)),
        };
        let mode = serde_json::from_value::<ApprovalMode>(Value::String(approval.mode.clone()))
            .unwrap_or(ApprovalMode::Destructive);
        if !self.approvals.may_consent(mode) {
            return Err(ErrorData::invalid_params(
                format!(
                    "approval `{id}` is for a call at mode `{mode}`, which a caller cannot consent to; an approver decides it"
                ),
                None,
            ));
        }
        let reason = if allow {
            "the calling user consented"
        } else {
            "the calling user declined"
        };
        if let Err(error) = self
            .host
            .consent(id, allow, &caller.principal.id, reason)
            .await
        {
            tracing::info!(approval = %id, %error, "a caller's consent was refused");
        }
        Ok(())
    }

    /// What the server tells clients at `initialize` (and in `server/discover`).
    fn instructions(&self) -> String {
        format!(
            "Tools run in a policy-enforcing sandbox. Tools that change state take an \
             idempotency key in {}: make a fresh one for each effect you intend and reuse it on \
             every retry of that effect. A call that needs a person's approval pauses; call it \
             again with the same arguments and key once it is approved. Every result carries \
             the gateway's record in _meta[\"gatehouse/result\"].",
            self.keys.how_to_send()
        )
    }

    /// The host the calls run on.
    pub(crate) fn host(&self) -> &Host {
        &self.host
    }

    fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            // Unreachable through McpServer::handle, which identifies every request first.
            .ok_or_else(|| ErrorData::internal_error("the request was not identified", None))
    }
}

/// A capability as an MCP tool, with the key argument listed where its calls take one.
fn tool(name: String, capability: Capability, keys: &KeyArgument) -> Result<Tool, ErrorData> {
    let schema = |value: Value, which: &str| match value {
        Value::Object(map) => Ok(Arc::new(map)),
        _ => Err(ErrorData::internal_error(
            format!("tool `{name}`: its {which} is not a JSON object, which MCP requires"),
            None,
        )),
    };
    let listing = keys.listing(&capability);
    let mut input = schema(capability.input_schema, "input schema")?;
    if let Some(listing) = listing {
        listing.add_to(Arc::make_mut(&mut input));
    }
    let output = capability
        .output_schema
        .map(|output| schema(output, "output schema"))
        .transpose()?;
    let mut tool = Tool::new_with_raw(name, Some(capability.description.into()), input);
    if let Some(title) = capability.title {
        tool = tool.with_title(title);
    }
    if let Some(output) = output {
        tool = tool.with_raw_output_schema(output);
    }
    if let Some(hints) = capability.annotations {
        tool = tool.with_annotations(ToolAnnotations::from_raw(
            None,
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ));
    }
    Ok(tool)
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("gatehouse", env!("CARGO_PKG_VERSION")))
        .with_instructions(self.instructions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = Self::caller(&context)?;
        let tools = self
            .host
            .tool_catalog(&caller.tenant)
            .into_iter()
            .map(|(name, capability)| tool(self.aliases.listed_name(name), capability, &self.keys))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = Self::caller(&context)?;
        let parts = context.extensions.get::<http::request::Parts>();
        let headers = parts.map(|parts| &parts.headers);
        let note = parts.and_then(|parts| parts.extensions.get::<Note>());
        if context.meta.protocol_version().is_some()
            || request
                .meta
                .as_ref()
                .is_some_and(|meta| meta.protocol_version().is_some())
        {
            return self
                .call_2026(caller, request, &context.meta, headers, note)
                .await;
        }
        let result = self
            .call(caller, request, &context.meta, headers, note, None)
            .await?;
        Ok(CallToolResponse::Complete(to_mcp(&result)?))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let caller = Self::caller(&context)?;
        let task = tasks::owned(&self.host, &caller, &request.task_id)
            .await
            .map_err(task_error)?;
        detailed(&task)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = Self::caller(&context)?;
        tasks::owned(&self.host, &caller, &request.task_id)
            .await
            .map_err(task_error)?;
        Err(ErrorData::invalid_params(
            format!(
                "task `{}` asks for no input: it waits for an approver's decision",
                request.task_id
            ),
            None,
        ))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = Self::caller(&context)?;
        match tasks::cancel(&self.host, &caller, &request.task_id).await {
            // The extension's cancel is an acknowledgement, whatever the task's state.
            Ok(_) | Err(TaskError::Ended { .. }) => Ok(()),
            Err(error) => Err(task_error(error)),
        }
    }
}

/// A task error as the protocol's: an unknown (or another's) task is invalid params.
#[expect(
    clippy::needless_pass_by_value,
    reason = "a `map_err` function: it takes the error as `map_err` hands it over"
)]
pub(super) fn task_error(error: TaskError) -> ErrorData {
    match error {
        TaskError::Unknown(_) | TaskError::Ended { .. } => {
            ErrorData::invalid_params(error.to_string(), None)
        }
        TaskError::Store(_) => ErrorData::internal_error(error.to_string(), None),
    }
}

/// A new task as the tasks extension answers a `tools/call`.
fn created(task: &Task) -> Result<CreateTaskResult, ErrorData> {
    let mut wire = tasks::wire(task, true);
    wire["resultType"] = json!("task");
    serde_json::from_value(wire)
        .map_err(|e| ErrorData::internal_error(format!("a task does not serialize: {e}"), None))
}

/// A task as the extension's `tasks/get` answers: its status and, once it ended, its result
/// (`completed`) or error (`failed`).
fn detailed(task: &Task) -> Result<GetTaskResult, ErrorData> {
    let mut wire = tasks::wire(task, true);
    wire["resultType"] = json!("complete");
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

/// `_meta[key]`, which must be a string if present.
fn meta_str<'a>(meta: &'a RequestMetaObject, key: &str) -> Result<Option<&'a str>, ErrorData> {
    meta.get(key)
        .map(|value| {
            value.as_str().ok_or_else(|| {
                ErrorData::invalid_params(format!("_meta[\"{key}\"] must be a string"), None)
            })
        })
        .transpose()
}

/// The span of one MCP `tools/call` request (`mcp_call`; see `gatehouse_host::telemetry`),
/// continuing `traceparent` if the caller sent a valid one.
pub(super) fn mcp_span(tool: &str, traceparent: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!("mcp_call", tool = %tool);
    if let Some(traceparent) = traceparent {
        gatehouse_host::telemetry::continue_remote(&span, traceparent);
    }
    span
}
