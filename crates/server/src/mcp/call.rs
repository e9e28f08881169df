//! The one call path every protocol version shares: who the caller is, a `tools/call`'s name,
//! arguments and `_meta` in, the governed pipeline ([`Host::call_for_caller`]) run, the
//! caller's view of its [`ToolResultEnvelope`] out. Each version's folder maps that result to
//! its own wire shapes; nothing here knows a protocol version.
//!
//! Also shared: resources, prompts and completion ([`super::content`]), the tool listing
//! ([`Gateway::tools`]), a decided approval's call run again
//! ([`Gateway::resume`]), the record of a request held for a decision ([`Gateway::held`]),
//! and a calling user's consent ([`Gateway::consent`]).

use std::sync::Arc;

use gatehouse_core::envelope::{OutcomeCode, Protocol, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::ApprovalMode;
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::{Capability, TaskSupport};
use gatehouse_host::relay::{AskKind, Relay};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, RequestMetaObject,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use serde_json::{Value, json};
use tracing::Instrument;

use super::aliases::ToolAliases;
use super::approvals::{Approvals, ClientCan};
use super::caller::Caller;
use super::keys::{self, KeyArgument};
use super::meta::{APPROVAL_ID_META, APPROVAL_MODE_META, IDEMPOTENCY_KEY_META};
use crate::access_log::Note;

/// What a `tools/call` brings besides its params ([`Gateway::call`]).
#[derive(Default)]
pub struct How<'a> {
    /// The HTTP request's `traceparent` header ([`traceparent`]), which a `_meta` one
    /// overrides.
    pub traceparent: Option<&'a str>,
    /// The request's access line, which gets the call.
    pub note: Option<&'a Note>,
    /// The approval a verified `requestState` resumes.
    pub resume: Option<&'a str>,
    /// Where what the adapter tells and asks its caller goes; none: dropped.
    pub relay: Option<Arc<dyn Relay>>,
}

/// The HTTP request's `traceparent` header (W3C trace context), if it is text: what a call
/// moved onto a task of its own keeps of the request's headers ([`How::traceparent`]).
pub fn traceparent(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?;
    Some(value.to_owned())
}

/// The call path: the host, the `[mcp.aliases]`, the key argument and how approvals reach
/// clients. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    host: Arc<Host>,
    aliases: Arc<ToolAliases>,
    keys: KeyArgument,
    approvals: Arc<Approvals>,
}

impl Gateway {
    /// The call path over `host`.
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

    /// The `[mcp.aliases]`.
    pub(crate) fn aliases(&self) -> &ToolAliases {
        &self.aliases
    }

    /// The host the calls run on, shared.
    pub(crate) fn shared_host(&self) -> Arc<Host> {
        Arc::clone(&self.host)
    }

    /// `tools/call` for `caller`, in every protocol version: `meta` is the request's `_meta`;
    /// `how` says what else the request brings ([`How`]). The result is the caller's view of
    /// the envelope, which each version maps to its wire.
    pub async fn call(
        &self,
        caller: Caller,
        request: CallToolRequestParams,
        meta: &RequestMetaObject,
        how: How<'_>,
    ) -> Result<ToolResultEnvelope, ErrorData> {
        let How {
            traceparent,
            note,
            resume,
            relay,
        } = how;
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
        let mut call = caller.envelope(Protocol::Mcp, name, Value::Object(args));
        // W3C trace context: the call joins the caller's trace, from `_meta` (SEP-414) or else
        // the HTTP request's header.
        let traceparent = meta.get_traceparent().or(traceparent);
        if let Some(traceparent) = traceparent {
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
        let span = mcp_span(&request.name, traceparent);
        let result = self.run(call, span, note, relay).await;
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
        relay: Option<Arc<dyn Relay>>,
    ) -> ToolResultEnvelope {
        let mut result = match relay {
            Some(relay) => self.host.call_relayed(call, relay).instrument(span).await,
            None => self.host.call_for_caller(call).instrument(span).await,
        };
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
        Ok(Some(self.run(call, span, note, None).await))
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
    pub(super) async fn consent(
        &self,
        caller: &Caller,
        id: &str,
        allow: bool,
    ) -> Result<(), ErrorData> {
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

    /// `tools/list`: the tools `caller`'s tenant may call, as MCP tools (hidden and missing
    /// tools look the same: both are absent), under their `[mcp.aliases]` names, each with
    /// `execution.taskSupport` as its manifest declares it, else `default`.
    pub fn tool_list(
        &self,
        caller: &Caller,
        default: Option<TaskSupport>,
    ) -> Result<Value, ErrorData> {
        let tools = self
            .host
            .tool_catalog(&caller.tenant)
            .into_iter()
            .map(|(name, capability)| {
                let support = capability.task_support.or(default);
                let mut tool = serde_json::to_value(tool(
                    self.aliases.listed_name(name),
                    capability,
                    &self.keys,
                )?)
                .map_err(|e| {
                    ErrorData::internal_error(format!("a tool does not serialize: {e}"), None)
                })?;
                if let Some(support) = support {
                    tool["execution"] = json!({ "taskSupport": support.as_str() });
                }
                Ok(tool)
            })
            .collect::<Result<Vec<Value>, ErrorData>>()?;
        Ok(json!({ "tools": tools }))
    }

    /// What `read` makes of tool `name` as `caller` calls it (an alias included), if it may.
    fn with_tool<R>(
        &self,
        caller: &Caller,
        name: &str,
        read: impl FnOnce(&Capability) -> R,
    ) -> Option<R> {
        let name = self.aliases.tool(name).unwrap_or(name);
        self.host.with_tool(&caller.tenant, name, read)
    }

    /// The input schema of tool `name` as `caller` calls it (an alias included), if it may.
    pub fn input_schema(&self, caller: &Caller, name: &str) -> Option<Value> {
        self.with_tool(caller, name, |capability| capability.input_schema.clone())
    }

    /// How tool `name` runs as a task (its manifest's `task_support`), if `caller` may call
    /// it and it says.
    pub fn task_support(&self, caller: &Caller, name: &str) -> Option<TaskSupport> {
        self.with_tool(caller, name, |capability| capability.task_support)?
    }

    /// The client capabilities tool `name` cannot do without (its manifest's
    /// `client_capabilities`, and the tasks extension where its `task_support` is `required`)
    /// that `can` lacks, as MCP's `ClientCapabilities`; `None` when it lacks none (or there is
    /// no such tool: the call path says so).
    pub fn lacking(
        &self,
        caller: &Caller,
        name: &str,
        can: ClientCan,
    ) -> Option<ClientCapabilities> {
        let lacking = self.with_tool(caller, name, |capability| {
            let mut lacking: serde_json::Map<String, Value> = (capability.client_capabilities)
                .iter()
                .filter_map(|kind| match kind {
                    AskKind::Elicitation if !(can.form || can.url) => Some("elicitation"),
                    AskKind::Sampling if !can.sampling => Some("sampling"),
                    AskKind::Roots if !can.roots => Some("roots"),
                    _ => None,
                })
                .map(|name| (name.to_owned(), Value::Object(serde_json::Map::new())))
                .collect();
            if capability.task_support == Some(TaskSupport::Required) && !can.tasks {
                lacking.insert(
                    "extensions".to_owned(),
                    json!({ rmcp::model::TASKS_EXTENSION_ID: {} }),
                );
            }
            lacking
        })?;
        if lacking.is_empty() {
            return None;
        }
        serde_json::from_value(Value::Object(lacking)).ok()
    }

    /// What the server tells a client at `initialize` (2025-11-25) and `server/discover`
    /// (2026-07-28): its capabilities, name and instructions.
    #[expect(
        deprecated,
        reason = "SEP-2577 deprecates logging with no change on the wire; 2025-11-25 clients still set a level, and adapters still write lines for their callers"
    )]
    pub fn info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_completions()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("gatehouse", env!("CARGO_PKG_VERSION")))
        .with_instructions(self.instructions())
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

/// `_meta[key]`, which must be a string if present.
pub(super) fn meta_str<'a>(
    meta: &'a RequestMetaObject,
    key: &str,
) -> Result<Option<&'a str>, ErrorData> {
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
