//! A real MCP server on loopback, built with rmcp's server, for the `gatehouse import mcp`
//! tests: the upstream an imported `mcp-upstream` adapter forwards to.
//!
//! [`McpUpstream::start`] serves protocol 2026-07-28 (stateless, JSON responses) and, to
//! clients that `initialize`, 2025-11-25 without sessions; [`McpUpstream::start_legacy`]
//! serves only 2025-11-25, with sessions and SSE responses, as servers written before
//! 2026-07-28 do; [`McpUpstream::start_tls`] serves the first over https. Tools:
//! 1. `get_forecast` (readOnlyHint): `{ city }` -> text and structured `{ city, sky }`;
//! 2. `add_note` (no hints): `{ text }` -> text `noted: <text>`;
//! 3. `fail_always`: an `isError` result saying `no such city`;
//! 4. `Delete Everything` (destructiveHint): text `deleted`;
//! 5. `whoami`: structured `{ authorization }`, the header the call arrived with.
//!
//! Resources, a template and a prompt, for imports of what a server offers besides tools:
//! the resource `notes://today` (text), the template `notes://day/{date}` (text naming the
//! date), the prompt `Review Code` (argument `code`, required: one user message quoting it),
//! and completions of the template's `date` (two dates, by prefix). Each read and fill-in
//! counts as a call of `read <uri>` and `prompt <name>`.
//!
//! [`McpUpstream::start_asking`] adds `ask_name`, which asks its client a question (see
//! `Handler::ask_name`) and records the answer ([`McpUpstream::answers`]), and `wait`, which
//! waits `{ seconds }` unless its request is cancelled first. Every `notifications/cancelled`
//! the server receives is recorded ([`McpUpstream::cancellations`]).
//!
//! It counts the calls of each tool ([`McpUpstream::calls`]), records the headers of every
//! HTTP request ([`McpUpstream::requests`]), and can change `get_forecast`'s input schema
//! ([`McpUpstream::change_forecast_schema`]) to show drift.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    DiscoverRequestMethod, DiscoverResult, ErrorData, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use wasmtime_wasi_http::io::TokioIo;

use crate::upstream::TestCa;

/// What the server shares with its handle.
#[derive(Debug, Default)]
struct State {
    /// Whether it offers `ask_name` ([`McpUpstream::start_asking`]).
    asking: bool,
    /// What `ask_name` got back for its question: the client's answer, or the error.
    answers: Mutex<Vec<Value>>,
    /// The `notifications/cancelled` received: `{ requestId, reason }`.
    cancellations: Mutex<Vec<Value>>,
    calls: Mutex<BTreeMap<String, usize>>,
    requests: Mutex<Vec<HeaderMap>>,
    schema_changed: AtomicBool,
    prompt_changed: AtomicBool,
}

/// The rmcp handler: the tools above.
#[derive(Clone)]
struct Handler {
    state: Arc<State>,
    legacy: bool,
}

impl Handler {
    fn tools(&self) -> Vec<Tool> {
        let city = if self.state.schema_changed.load(Ordering::SeqCst) {
            json!({ "type": "object", "properties": { "city": { "type": "string" }, "days": { "type": "integer" } }, "required": ["city"] })
        } else {
            json!({ "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] })
        };
        let tools = json!([
            { "name": "get_forecast", "title": "Forecast", "description": "The forecast for a city.",
              "inputSchema": city,
              "outputSchema": { "type": "object", "properties": { "city": { "type": "string" }, "sky": { "type": "string" } }, "required": ["city", "sky"] },
              "annotations": { "readOnlyHint": true } },
            { "name": "add_note", "description": "Adds a note.",
              "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] } },
            { "name": "fail_always", "description": "Always fails.", "inputSchema": { "type": "object" },
              "annotations": { "readOnlyHint": true } },
            { "name": "Delete Everything", "description": "Deletes everything.", "inputSchema": { "type": "object" },
              "annotations": { "destructiveHint": true, "readOnlyHint": false } },
            { "name": "whoami", "description": "The authorization the call arrived with.", "inputSchema": { "type": "object" },
              "annotations": { "readOnlyHint": true } },
        ]);
        let mut tools: Vec<Tool> = serde_json::from_value(tools).expect("tool definitions");
        if self.state.asking {
            let asking = json!([
                { "name": "ask_name", "description": "Asks the user's name, then greets them.",
                  "inputSchema": { "type": "object" }, "annotations": { "readOnlyHint": true } },
                { "name": "wait", "description": "Waits, unless cancelled.",
                  "inputSchema": { "type": "object", "properties": { "seconds": { "type": "number" } } },
                  "annotations": { "readOnlyHint": true } },
            ]);
            tools.extend(serde_json::from_value::<Vec<Tool>>(asking).expect("tool definitions"));
        }
        tools
    }

    /// `ask_name`: the question it asks, the progress and the log line it reports first.
    /// 2025-11-25 (with sessions): progress, a log line, then `elicitation/create` on the
    /// call's event stream, and the answer in its result. 2026-07-28: an
    /// `InputRequiredResult` asking the same, whose retry (with `requestState` `asked-once`)
    /// has the answer.
    async fn ask_name(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        self.count("ask_name".to_owned());
        let question = json!({
            "mode": "form",
            "message": "Your name?",
            "requestedSchema": { "type": "object", "properties": { "approve": { "type": "boolean" } } },
        });
        let answer = if self.legacy {
            let meta = serde_json::to_value(&request.meta).unwrap_or_default();
            let token = (context.meta.get_progress_token())
                .map(|token| serde_json::to_value(token).unwrap_or_default())
                .or_else(|| meta.get("progressToken").cloned());
            if let Some(token) = token {
                let progress = json!({ "progressToken": token, "progress": 1, "total": 2, "message": "asking" });
                let _sent = context
                    .peer
                    .notify_progress(serde_json::from_value(progress).expect("progress"))
                    .await;
            }
            let line =
                json!({ "level": "info", "logger": "upstream", "data": "asking for a name" });
            #[allow(deprecated, reason = "2025-11-25 still has log lines")]
            let _sent = context
                .peer
                .notify_logging_message(serde_json::from_value(line).expect("a log line"))
                .await;
            match context
                .peer
                .create_elicitation(serde_json::from_value(question).expect("a question"))
                .await
            {
                Ok(answer) => serde_json::to_value(answer).unwrap_or_default(),
                Err(error) => json!({ "error": error.to_string() }),
            }
        } else {
            let Some(responses) = &request.input_responses else {
                let asked = json!({
                    "resultType": "input_required",
                    "inputRequests": { "name": { "method": "elicitation/create", "params": question } },
                    "requestState": "asked-once",
                });
                return CallToolResponse::InputRequired(
                    serde_json::from_value(asked).expect("an input request"),
                );
            };
            if request.request_state.as_deref() != Some("asked-once") {
                json!({ "error": "the retry did not carry the requestState" })
            } else {
                serde_json::to_value(responses).unwrap_or_default()["name"].clone()
            }
        };
        self.state.answers.lock().unwrap().push(answer.clone());
        let result = json!({
            "content": [{ "type": "text", "text": format!("answered: {}", answer["content"]) }],
            "isError": answer.get("error").is_some(),
        });
        CallToolResponse::Complete(serde_json::from_value(result).expect("a tool result"))
    }

    fn count(&self, what: String) {
        *self.state.calls.lock().unwrap().entry(what).or_default() += 1;
    }
}

impl ServerHandler for Handler {
    #[allow(deprecated, reason = "2025-11-25 servers still offer log lines")]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("e2e-upstream", "1.0.0"))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.legacy {
            std::borrow::Cow::Owned(vec![ProtocolVersion::V_2025_11_25])
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    async fn on_cancelled(
        &self,
        notification: rmcp::model::CancelledNotificationParam,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        let heard = json!({ "requestId": notification.request_id, "reason": notification.reason });
        self.state.cancellations.lock().unwrap().push(heard);
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        if self.legacy {
            return Err(ErrorData::method_not_found::<DiscoverRequestMethod>());
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    #[allow(deprecated, reason = "2025-11-25 servers still take a log level")]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(serde_json::from_value(json!({ "resources": [
            { "uri": "notes://today", "name": "Today's notes", "mimeType": "text/plain",
              "description": "What was noted today." },
        ] }))
        .expect("a resource list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(serde_json::from_value(json!({ "resourceTemplates": [
            { "uriTemplate": "notes://day/{date}", "name": "Notes of a day", "mimeType": "text/plain" },
        ] }))
        .expect("a template list"))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        self.count(format!("read {uri}"));
        let text = match uri.strip_prefix("notes://day/") {
            Some(date) => format!("notes of {date}: call ann@example.com"),
            None if uri == "notes://today" => "today: buy milk".to_owned(),
            None => return Err(ErrorData::resource_not_found(format!("no {uri}"), None)),
        };
        Ok(ReadResourceResponse::Complete(
            serde_json::from_value(json!({ "contents": [
                { "uri": uri, "mimeType": "text/plain", "text": text },
            ] }))
            .expect("a read result"),
        ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(serde_json::from_value(json!({ "prompts": [
            { "name": "Review Code", "description": if self.state.prompt_changed.load(Ordering::SeqCst) { "Asks for a harsh review." } else { "Asks for a review." },
              "arguments": [{ "name": "code", "description": "The code", "required": true }] },
        ] }))
        .expect("a prompt list"))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.count(format!("prompt {}", request.name));
        let code = (request.arguments.as_ref())
            .and_then(|args| args.get("code"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(GetPromptResponse::Complete(
            serde_json::from_value(json!({
                "description": "A review",
                "messages": [{ "role": "user", "content": { "type": "text", "text": format!("Please review: {code}") } }],
            }))
            .expect("a prompt"),
        ))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let typed = request.argument.value.clone();
        let values: Vec<&str> = ["2026-11-27", "2026-11-28"]
            .into_iter()
            .filter(|date| date.starts_with(&typed))
            .collect();
        Ok(
            serde_json::from_value(json!({ "completion": { "values": values, "hasMore": false } }))
                .expect("a completion"),
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if name == "ask_name" {
            return Ok(self.ask_name(&request, &context).await);
        }
        *self
            .state
            .calls
            .lock()
            .unwrap()
            .entry(name.clone())
            .or_default() += 1;
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match name.as_str() {
            "get_forecast" => json!({
                "content": [{ "type": "text", "text": format!("sunny in {}", args["city"].as_str().unwrap_or("?")) }],
                "structuredContent": { "city": args["city"], "sky": "sunny" },
            }),
            "add_note" => {
                json!({ "content": [{ "type": "text", "text": format!("noted: {}", args["text"].as_str().unwrap_or("")) }] })
            }
            "fail_always" => {
                json!({ "content": [{ "type": "text", "text": "no such city" }], "isError": true })
            }
            "Delete Everything" => json!({ "content": [{ "type": "text", "text": "deleted" }] }),
            "wait" if self.state.asking => {
                let seconds = args["seconds"].as_f64().unwrap_or(1.0);
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)) => {}
                    () = context.ct.cancelled() => {
                        return Err(ErrorData::internal_error("cancelled", None));
                    }
                }
                json!({ "content": [{ "type": "text", "text": format!("waited {seconds} s") }] })
            }
            "whoami" => {
                let authorization = context
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.headers.get("authorization"))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                json!({
                    "content": [{ "type": "text", "text": "checked" }],
                    "structuredContent": { "authorization": authorization },
                })
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool `{other}`"),
                    None,
                ));
            }
        };
        let result: CallToolResult = serde_json::from_value(result).expect("a tool result");
        Ok(CallToolResponse::Complete(result))
    }
}

/// A running MCP server; it serves until the runtime that started it shuts down.
#[derive(Clone)]
pub struct McpUpstream {
    /// Its MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub url: String,
    state: Arc<State>,
}

impl McpUpstream {
    /// Serves 2026-07-28 and older versions, statelessly, with JSON responses.
    pub async fn start() -> Self {
        Self::serve(false, false, None).await
    }

    /// Serves only 2025-11-25, with sessions and SSE responses.
    pub async fn start_legacy() -> Self {
        Self::serve(true, false, None).await
    }

    /// [`McpUpstream::start_legacy`] (`legacy`) or [`McpUpstream::start`], offering
    /// `ask_name` and `wait` too.
    pub async fn start_asking(legacy: bool) -> Self {
        Self::serve(legacy, true, None).await
    }

    /// [`McpUpstream::start`] over https, at `https://localhost:<port>/mcp`, with a certificate
    /// `ca` issued for `localhost`.
    pub async fn start_tls(ca: &TestCa) -> Self {
        let tls = TlsAcceptor::from(ca.server_config(&["localhost"]));
        Self::serve(false, false, Some(tls)).await
    }

    async fn serve(legacy: bool, asking: bool, tls: Option<TlsAcceptor>) -> Self {
        let state = Arc::new(State {
            asking,
            ..State::default()
        });
        let handler = Handler {
            state: state.clone(),
            legacy,
        };
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(legacy)
            .with_json_response(!legacy)
            .with_sse_keep_alive(None);
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local address").port();
        let url = match tls {
            Some(_) => format!("https://localhost:{port}/mcp"),
            None => format!("http://127.0.0.1:{port}/mcp"),
        };
        let recorder = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                let recorder = recorder.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let serve = service_fn(move |request: hyper::Request<Incoming>| {
                        recorder
                            .requests
                            .lock()
                            .unwrap()
                            .push(request.headers().clone());
                        let service = service.clone();
                        async move { Ok::<_, Infallible>(service.handle(request).await) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(stream), serve).await;
                        }
                        // A failed handshake (an untrusting client) just ends the connection.
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                let _ = http.serve_connection(TokioIo::new(stream), serve).await;
                            }
                        }
                    }
                });
            }
        });
        Self { url, state }
    }

    /// How many times `tool` was called.
    pub fn calls(&self, tool: &str) -> usize {
        self.state
            .calls
            .lock()
            .unwrap()
            .get(tool)
            .copied()
            .unwrap_or(0)
    }

    /// The headers of every HTTP request so far, oldest first.
    pub fn requests(&self) -> Vec<HeaderMap> {
        self.state.requests.lock().unwrap().clone()
    }

    /// What `ask_name` got back for its questions, in order: the client's answers, or
    /// `{ "error": ... }`.
    pub fn answers(&self) -> Vec<Value> {
        self.state.answers.lock().unwrap().clone()
    }

    /// The `notifications/cancelled` the server received, in order: `{ requestId, reason }`.
    pub fn cancellations(&self) -> Vec<Value> {
        self.state.cancellations.lock().unwrap().clone()
    }

    /// From now on the prompt `Review Code` says another description: its definition changes.
    pub fn change_prompt(&self) {
        self.state.prompt_changed.store(true, Ordering::SeqCst);
    }

    /// From now on `get_forecast` takes a `days` argument too: its definition changes.
    pub fn change_forecast_schema(&self) {
        self.state.schema_changed.store(true, Ordering::SeqCst);
    }
}
