//! MCP over Streamable HTTP: how agents reach the tools (`gatehouse serve`).
//!
//! One endpoint (`[mcp] path`, default `/mcp`), served by hyper with the official Rust MCP SDK
//! (rmcp) speaking the protocol. Each HTTP request, in order:
//! 1. anything but the endpoint path is 404;
//! 2. **identify** (gate 1, [`identity`]): a bearer API key, or the anonymous tenant if the
//!    operator set one; otherwise 401 and nothing else happens;
//! 3. rmcp checks `Host` (DNS-rebinding protection; `[mcp] allowed_hosts`), `Origin` (a browser
//!    origin must be listed in `[mcp] allowed_origins`; requests without one pass) and the body
//!    size (`[mcp] max_request_bytes`), then parses JSON-RPC (malformed input gets a JSON-RPC
//!    error, never a call);
//! 4. `tools/list` answers the tools the caller's tenant may see (hidden and missing tools look
//!    the same); `tools/call` builds a `ToolCallEnvelope` for the caller and runs
//!    [`Host::call`], the governed pipeline.
//!
//! A call's result maps to MCP as: content blocks and `structuredContent` as the adapter
//! returned them (after verification and obligations); `isError` unless the outcome is `OK`,
//! with the error's message (and remediation) as text content; and the whole
//! `ToolResultEnvelope` (outcome code, policy decision, egress record, usage) under
//! `_meta["gatehouse/result"]`. An unknown or hidden tool is the JSON-RPC invalid-params error,
//! as the MCP specification asks. A caller passes an idempotency key (required on write-class
//! tools) and an approval mode in the request's `_meta` as `gatehouse/idempotency_key` and
//! `gatehouse/approval_mode`.
//!
//! Sessions: stateless. Every request stands alone (the 2026-07-28 protocol has no sessions;
//! older clients get plain JSON responses without a session id).

pub mod identity;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::TokioTimer;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use wasmtime_wasi_http::io::TokioIo;

pub use identity::{ApiKeyConfig, ApiKeyError, ApiKeys, Caller, IdentityError};

use crate::envelope::{OutcomeCode, Status, ToolResultEnvelope};
use crate::host::{Host, is_trace_id};
use crate::model::ApprovalMode;
use crate::pipeline::ToolCallEnvelope;

/// `_meta` key of the full [`ToolResultEnvelope`] on every `tools/call` result.
pub const RESULT_META: &str = "gatehouse/result";
/// `_meta` key a caller sets to pass the call's idempotency key.
pub const IDEMPOTENCY_KEY_META: &str = "gatehouse/idempotency_key";
/// `_meta` key a caller sets to ask for an approval mode (never above the tool's maximum).
pub const APPROVAL_MODE_META: &str = "gatehouse/approval_mode";

/// The `[mcp]` table: where `gatehouse serve` listens and who may call. The defaults listen on
/// loopback only and admit nobody: every caller needs an `[[mcp.api_key]]` unless
/// `anonymous_tenant` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Address to listen on. Default: `127.0.0.1:8787`.
    #[serde(default = "defaults::listen")]
    pub listen: SocketAddr,
    /// The MCP endpoint's path. Default: `/mcp`.
    #[serde(default = "defaults::path")]
    pub path: String,
    /// `Host` header values accepted, as host names or `host:port` (protects loopback servers
    /// from DNS rebinding). Default: `localhost`, `127.0.0.1`, `::1`. List your public names
    /// when serving beyond loopback.
    #[serde(default = "defaults::allowed_hosts")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call, with scheme, e.g. `https://console.example.com:443`.
    /// A request carrying any other `Origin` is refused; requests without one pass. Default:
    /// none.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Largest request body, in bytes. Default: 1 MiB.
    #[serde(default = "defaults::max_request_bytes")]
    pub max_request_bytes: usize,
    /// Time a client has to send a request's headers, in milliseconds; a connection that
    /// dawdles longer is closed (slow-header attacks). Default: 10000.
    #[serde(default = "defaults::header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// Tenant for requests without an `Authorization` header. Default: none, so they are
    /// refused. Meant for local use (the demo sets it).
    #[serde(default)]
    pub anonymous_tenant: Option<String>,
    /// Bearer API keys and the tenant each identifies. Default: none.
    #[serde(default, rename = "api_key")]
    pub api_keys: Vec<ApiKeyConfig>,
}

mod defaults {
    use std::net::SocketAddr;

    pub fn listen() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8787))
    }
    pub fn path() -> String {
        "/mcp".to_owned()
    }
    pub fn allowed_hosts() -> Vec<String> {
        vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ]
    }
    pub fn max_request_bytes() -> usize {
        1024 * 1024
    }
    pub fn header_timeout_ms() -> u64 {
        10_000
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            listen: defaults::listen(),
            path: defaults::path(),
            allowed_hosts: defaults::allowed_hosts(),
            allowed_origins: Vec::new(),
            max_request_bytes: defaults::max_request_bytes(),
            header_timeout_ms: defaults::header_timeout_ms(),
            anonymous_tenant: None,
            api_keys: Vec::new(),
        }
    }
}

/// The MCP endpoint for a host: identity, then rmcp, then the pipeline. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    path: Arc<str>,
    header_timeout: Duration,
    keys: Arc<ApiKeys>,
    service: StreamableHttpService<Gateway, NeverSessionManager>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Load phase: reads the API keys and builds the endpoint.
    pub fn new(host: Arc<Host>, config: &McpConfig) -> Result<Self, ApiKeyError> {
        let keys = ApiKeys::load(&config.api_keys, config.anonymous_tenant.as_deref())?;
        let rmcp_config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_allowed_hosts(config.allowed_hosts.clone())
            .with_allowed_origins(config.allowed_origins.clone())
            .enforce_origin_validation()
            .with_max_request_body_bytes(config.max_request_bytes);
        let gateway = Gateway { host };
        let service = StreamableHttpService::new(
            move || Ok(gateway.clone()),
            Arc::new(NeverSessionManager::default()),
            rmcp_config,
        );
        Ok(Self {
            path: Arc::from(config.path.as_str()),
            header_timeout: Duration::from_millis(config.header_timeout_ms),
            keys: Arc::new(keys),
            service,
        })
    }

    /// Answers one HTTP request (steps 1-4 of the module docs).
    pub async fn handle(
        &self,
        mut request: Request<Incoming>,
    ) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
        if request.uri().path() != &*self.path {
            return plain(
                StatusCode::NOT_FOUND,
                &json!({ "error": "not_found", "message": format!("the MCP endpoint is {}", self.path) }),
            );
        }
        match self.keys.identify(request.headers()) {
            Ok(caller) => {
                request.extensions_mut().insert(caller);
            }
            Err(error) => {
                tracing::info!(%error, "mcp request refused: identity");
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    &json!({ "error": "IDENTITY_INVALID", "message": error.to_string() }),
                );
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer"),
                );
                return response;
            }
        }
        let mut service = self.service.clone();
        match tower_service::Service::call(&mut service, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// Serves on `listener` until `shutdown` completes; connections in flight are dropped.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut shutdown => return,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // E.g. out of file descriptors: keep serving the connections we have and
                    // try again shortly, rather than stopping the gateway.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let server = self.clone();
            let header_timeout = self.header_timeout;
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let server = server.clone();
                    async move { Ok::<_, std::convert::Infallible>(server.handle(request).await) }
                });
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%peer, %error, "mcp connection ended with an error");
                }
            });
        }
    }
}

fn plain(status: StatusCode, body: &Value) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
    let mut response =
        Response::new(http_body_util::Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The MCP server handler: one per request (stateless), all sharing the host.
#[derive(Clone)]
struct Gateway {
    host: Arc<Host>,
}

impl Gateway {
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
            .map(|(name, capability)| {
                let mut tool = json!({
                    "name": name,
                    "description": capability.description,
                    "inputSchema": capability.input_schema,
                });
                if let Some(title) = &capability.title {
                    tool["title"] = json!(title);
                }
                if let Some(schema) = &capability.output_schema {
                    tool["outputSchema"] = schema.clone();
                }
                if let Some(hints) = &capability.annotations {
                    // Manifests spell the hints in snake_case; MCP in camelCase.
                    tool["annotations"] = json!({
                        "readOnlyHint": hints.read_only_hint,
                        "destructiveHint": hints.destructive_hint,
                        "idempotentHint": hints.idempotent_hint,
                        "openWorldHint": hints.open_world_hint,
                    });
                }
                serde_json::from_value::<Tool>(tool).map_err(|e| {
                    ErrorData::internal_error(
                        format!("tool `{name}` does not map to MCP: {e}"),
                        None,
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = Self::caller(&context)?;
        let args = Value::Object(request.arguments.unwrap_or_default());
        let mut call = ToolCallEnvelope::new(&caller.tenant, request.name.as_ref(), args)
            .with_principal(caller.principal);
        // rmcp moves the request's `_meta` into the context.
        let meta = request.meta.as_ref().unwrap_or(&context.meta);
        // W3C trace context (SEP-414): the call joins the caller's trace.
        if let Some(trace_id) = meta.get_traceparent().and_then(trace_id_of) {
            call.trace_id = trace_id;
        }
        if let Some(key) = meta.get(IDEMPOTENCY_KEY_META) {
            let key = key.as_str().ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("_meta[\"{IDEMPOTENCY_KEY_META}\"] must be a string"),
                    None,
                )
            })?;
            call = call.with_idempotency_key(key);
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
        let result = self.host.call(call).await;
        if result.outcome == OutcomeCode::UnknownCapability {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
        Ok(CallToolResponse::Complete(to_mcp(&result)?))
    }
}

/// A result envelope as an MCP tool result (see the module docs).
fn to_mcp(result: &ToolResultEnvelope) -> Result<CallToolResult, ErrorData> {
    let failed = result.status != Status::Ok;
    let mut content = serde_json::to_value(&result.content).unwrap_or_else(|_| json!([]));
    if let (true, Some(error), Some(blocks)) = (failed, &result.error, content.as_array_mut()) {
        let mut text = format!("{}: {}", error.code, error.message);
        if let Some(remediation) = &error.remediation {
            text.push_str(&format!(" ({remediation})"));
        }
        blocks.push(json!({ "type": "text", "text": text }));
    }
    let mut mcp = json!({
        "content": content,
        "isError": failed,
        "_meta": { RESULT_META: result },
    });
    if let Some(structured) = &result.structured_content {
        mcp["structuredContent"] = structured.clone();
    }
    serde_json::from_value(mcp).map_err(|e| {
        ErrorData::internal_error(format!("the result does not map to MCP: {e}"), None)
    })
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), if valid.
fn trace_id_of(traceparent: &str) -> Option<String> {
    let trace = traceparent.split('-').nth(1)?;
    is_trace_id(trace).then(|| trace.to_owned())
}
