//! The rmcp server handler: `tools/list` and `tools/call` for the identified caller, through
//! the host's governed pipeline.

use std::sync::Arc;

use gatehouse_core::envelope::{OutcomeCode, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::ApprovalMode;
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::Capability;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, RequestMetaObject, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tracing::Instrument;

use super::aliases::ToolAliases;
use super::caller::Caller;
use super::meta::{APPROVAL_ID_META, APPROVAL_MODE_META, IDEMPOTENCY_KEY_META};
use super::result::to_mcp;
use crate::access_log::Note;

/// The MCP server handler: one per request (stateless), all sharing the host.
#[derive(Clone)]
pub struct Gateway {
    host: Arc<Host>,
    aliases: Arc<ToolAliases>,
}

impl Gateway {
    pub fn new(host: Arc<Host>, aliases: ToolAliases) -> Self {
        Self {
            host,
            aliases: Arc::new(aliases),
        }
    }

    /// `tools/call` for `caller`, whether rmcp's handler or the direct path ([`super::direct`])
    /// took the request: `meta` is the request's `_meta` (rmcp moves it out of the params),
    /// `headers` the HTTP request's; `note` gets the call for the request's access line. The
    /// result is the caller's view of the envelope, which each path maps to MCP.
    pub async fn call(
        &self,
        caller: Caller,
        request: CallToolRequestParams,
        meta: &RequestMetaObject,
        headers: Option<&http::HeaderMap>,
        note: Option<&Note>,
    ) -> Result<ToolResultEnvelope, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let name = self.aliases.tool(&request.name).unwrap_or(&request.name);
        let mut call =
            ToolCallEnvelope::new(&caller.tenant, name, args).with_principal(caller.principal);
        let meta = request.meta.as_ref().unwrap_or(meta);
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
        if let Some(key) = meta_str(meta, IDEMPOTENCY_KEY_META)? {
            call = call.with_idempotency_key(key);
        }
        if let Some(id) = meta_str(meta, APPROVAL_ID_META)? {
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
        let result = self.host.call_for_caller(call).instrument(span).await;
        if let Some(note) = note {
            note.call(&result);
        }
        if result.outcome == OutcomeCode::UnknownCapability {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
        Ok(result)
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

/// A capability as an MCP tool.
fn tool(name: String, capability: Capability) -> Result<Tool, ErrorData> {
    let schema = |value: Value, which: &str| match value {
        Value::Object(map) => Ok(Arc::new(map)),
        _ => Err(ErrorData::internal_error(
            format!("tool `{name}`: its {which} is not a JSON object, which MCP requires"),
            None,
        )),
    };
    let input: Arc<JsonObject> = schema(capability.input_schema, "input schema")?;
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("gatehouse", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools run in a policy-enforcing sandbox. Write tools need an idempotency key in \
                 _meta[\"gatehouse/idempotency_key\"]; every result carries the gateway's record \
                 in _meta[\"gatehouse/result\"].",
            )
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
            .map(|(name, capability)| tool(self.aliases.listed_name(name), capability))
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
        let result = self
            .call(caller, request, &context.meta, headers, note)
            .await?;
        Ok(CallToolResponse::Complete(to_mcp(&result)?))
    }
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
