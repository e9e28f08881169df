//! The HTTP side of `gatehouse serve`: the accept loop, one hyper HTTP/1.1 connection per
//! client, and per request the endpoint path check, the protected resource metadata, identity
//! (gate 1), then rmcp.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use gatehouse_core::model::ApprovalMode;
use gatehouse_host::Host;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::approvals::{self, Approvals};
use super::caller::Caller;
use super::config::McpConfig;
use super::direct::{Direct, DirectCall};
use super::handler::Gateway;
use super::identity::{ApiKeyError, ApiKeys, Identity};
use super::jwt::{JwtConfigError, JwtVerifier};
use super::keys::KeyArgument;
use super::legacy::{Legacy, Route};
use super::result::response;
use crate::access_log::{self, Exchange, Note};
use crate::listener::{self, BodyError, Endpoint, ListenerConfig};

/// Browser origins a loopback listener accepts without configuration: pages served from this
/// machine, on any port. A remote page cannot carry them, so DNS rebinding stays refused (the
/// `Host` check is separate). Not applied on any other listener.
const LOOPBACK_ORIGINS: &[&str] = &[
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// The well-known path of the OAuth protected resource metadata (RFC 9728, section 3).
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Why the `[mcp]` table cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ServerConfigError {
    /// An `[[mcp.api_key]]` entry.
    #[error(transparent)]
    ApiKey(#[from] ApiKeyError),
    /// `[mcp.jwt]`.
    #[error(transparent)]
    Jwt(#[from] JwtConfigError),
    /// `[mcp] request_state_key_file`.
    #[error("{0}")]
    StateKey(String),
    /// `[mcp] consent_modes` lists `destructive`.
    #[error(
        "`[mcp] consent_modes` lists `destructive`: a caller can never consent to a destructive call; an approver decides those"
    )]
    DestructiveConsent,
    /// `[mcp] public_url`.
    #[error(
        "`[mcp] public_url` `{0}` must be an absolute `http(s)://host[:port][/prefix]` URL without query or fragment"
    )]
    PublicUrl(String),
}

/// The MCP endpoint for a host: identity, then rmcp, then the pipeline. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    path: Arc<str>,
    /// The paths the protected resource metadata is served at.
    metadata_paths: [Arc<str>; 2],
    metadata: Arc<Value>,
    /// `WWW-Authenticate` of a 401 without and with a refused token.
    challenges: [http::HeaderValue; 2],
    listener: ListenerConfig,
    identity: Arc<Identity>,
    /// The common `tools/call`, answered without rmcp's per-request service ([`super::direct`]).
    direct: Arc<Direct>,
    /// What 2025-11-25 clients need beyond rmcp ([`super::legacy`]).
    legacy: Arc<Legacy>,
    gateway: Gateway,
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
    /// Load phase: reads the API keys and the `[mcp.jwt]` keys (a file or secret; a
    /// `jwks_url` is fetched by [`refresh_keys`](Self::refresh_keys)) and builds the endpoint.
    /// Whether loopback browser origins are accepted by default follows `config.listen` (see
    /// [`McpConfig`]); serve it on a listener bound to that address.
    pub fn new(host: Arc<Host>, config: &McpConfig) -> Result<Self, ServerConfigError> {
        let keys = ApiKeys::load(&config.api_keys, config.anonymous_tenant.as_deref())?;
        let jwt = config
            .jwt
            .as_ref()
            .map(|jwt| JwtVerifier::load(jwt, host.tls()))
            .transpose()?;
        let (resource, metadata_url, metadata_paths) = resource_urls(config)?;
        let mut metadata = json!({
            "resource": resource,
            "authorization_servers": config.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !config.scopes_supported.is_empty() {
            metadata["scopes_supported"] = json!(config.scopes_supported);
        }
        let challenge = |error: &str| {
            http::HeaderValue::try_from(format!(
                "Bearer resource_metadata=\"{metadata_url}\"{error}"
            ))
            .map_err(|_| ServerConfigError::PublicUrl(metadata_url.clone()))
        };
        let challenges = [challenge("")?, challenge(", error=\"invalid_token\"")?];
        let mut origins = config.allowed_origins.clone();
        if config.listen.ip().is_loopback() {
            origins.extend(LOOPBACK_ORIGINS.iter().map(|&origin| origin.to_owned()));
        }
        let direct = Direct::new(&config.allowed_hosts);
        let rmcp_config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_allowed_hosts(config.allowed_hosts.clone())
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(config.max_request_bytes);
        let key_argument = KeyArgument::new(config.idempotency_key_argument.0.as_deref());
        if config.consent_modes.contains(&ApprovalMode::Destructive) {
            return Err(ServerConfigError::DestructiveConsent);
        }
        let state_key = approvals::state_key(config.request_state_key_file.as_deref())
            .map_err(ServerConfigError::StateKey)?;
        let approvals = Approvals::new(
            &state_key,
            Duration::from_millis(config.approval_hold_ms),
            config.consent_modes.clone(),
        )
        .map_err(|e| ServerConfigError::StateKey(format!("the request state key: {e}")))?;
        let gateway = Gateway::new(host, config.aliases.clone(), key_argument, approvals);
        let factory = gateway.clone();
        let service = StreamableHttpService::new(
            move || Ok(factory.clone()),
            Arc::new(NeverSessionManager::default()),
            rmcp_config,
        );
        Ok(Self {
            path: Arc::from(config.path.as_str()),
            listener: config.listener(),
            metadata_paths,
            metadata: Arc::new(metadata),
            challenges,
            identity: Arc::new(Identity::new(keys, jwt)),
            direct: Arc::new(direct),
            legacy: Arc::new(Legacy::default()),
            gateway,
            service,
        })
    }

    /// Start phase: fetches the `[mcp.jwt] jwks_url` keys, so a gateway whose identity
    /// provider is unreachable fails its start rather than its first caller. Nothing to do
    /// without `jwks_url`.
    pub async fn refresh_keys(&self) -> Result<(), JwtConfigError> {
        match self.identity.jwt() {
            Some(jwt) => jwt.refresh().await,
            None => Ok(()),
        }
    }

    /// Answers one HTTP request (steps 1-5 of the module docs), and writes its access line
    /// ([`crate::access_log`]).
    pub async fn handle(
        &self,
        request: Request<Incoming>,
    ) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
        let started = std::time::Instant::now();
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        let note = Note::default();
        note.traceparent(request.headers());
        let response = self.answer(request, &note).await;
        let exchange = Exchange {
            listener: "mcp",
            method: &method,
            path: &path,
            status: response.status(),
            bytes: http_body::Body::size_hint(response.body()).exact(),
            started,
        };
        access_log::finish(self.gateway.host(), &note, &exchange);
        response
    }

    async fn answer(
        &self,
        request: Request<Incoming>,
        note: &Note,
    ) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
        if self
            .metadata_paths
            .iter()
            .any(|path| request.uri().path() == &**path)
        {
            if request.method() != http::Method::GET {
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    &json!({ "error": "method_not_allowed", "message": "the protected resource metadata is read with GET" }),
                );
                response
                    .headers_mut()
                    .insert(http::header::ALLOW, http::HeaderValue::from_static("GET"));
                return response;
            }
            return plain(StatusCode::OK, &self.metadata);
        }
        if request.uri().path() != &*self.path {
            return plain(
                StatusCode::NOT_FOUND,
                &json!({ "error": "not_found", "message": format!("the MCP endpoint is {}", self.path) }),
            );
        }
        let caller = match self.identity.identify(request.headers()).await {
            Ok(caller) => caller,
            Err(error) => {
                note.refused(&error.to_string());
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    &json!({ "error": "IDENTITY_INVALID", "message": error.to_string() }),
                );
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    self.challenges[usize::from(error.token_presented())].clone(),
                );
                return response;
            }
        };
        note.caller(Some(&caller.tenant), &caller.principal.id);
        // The body is read here, within the size and time limits, so that a body rmcp cannot
        // parse can be answered as JSON-RPC (below), and nothing is called before it is whole.
        let (mut parts, body) = request.into_parts();
        let body = match self.listener.read_body(body).await {
            Ok(body) => body,
            Err(error) => {
                let (status, code) = match &error {
                    BodyError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
                    BodyError::TimedOut(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
                    BodyError::Unreadable(_) => (StatusCode::BAD_REQUEST, "bad_request"),
                };
                tracing::debug!(%error, "mcp request body refused");
                return plain(
                    status,
                    &json!({ "error": code, "message": error.to_string() }),
                );
            }
        };
        let declares_json = is_json(&parts.headers);
        // JSON is UTF-8 (RFC 8259), and serde_json skips a key or value that nothing reads
        // without checking its bytes: unchecked, a `tools/call` carrying invalid UTF-8 in a
        // field nobody reads would run, on the direct path and through rmcp alike.
        if declares_json && std::str::from_utf8(&body).is_err() {
            return unreadable_message(&body);
        }
        if declares_json && let Some(call) = self.direct.call(&parts.method, &parts.headers, &body)
        {
            return self
                .call_directly(caller, call, parts.headers, note.clone())
                .await;
        }
        let mut patch = None;
        if declares_json && self.direct.checks(&parts.method, &parts.headers) {
            match self.legacy.route(&self.gateway, &caller, &body).await {
                Route::Answered(response) => return response,
                Route::Patch(which) => patch = Some(which),
                Route::Pass => {}
            }
        }
        parts.extensions.insert(caller);
        parts.extensions.insert(note.clone());
        let request = Request::from_parts(parts, Full::new(body.clone()));
        let response = self.service.handle(request).await;
        // rmcp has checked Host, Origin, Accept and the content type, and answers a JSON body
        // it cannot read as a JSON-RPC message with 415 and plain text. JSON-RPC says: a parse
        // error (-32700) for what is not JSON, an invalid request (-32600) for JSON that is not
        // a JSON-RPC message. A wrong content type keeps its 415.
        if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE && declares_json {
            return unreadable_message(&body);
        }
        match patch {
            Some(which) if response.status() == StatusCode::OK => {
                Legacy::patch(which, response).await
            }
            _ => response,
        }
    }

    /// Answers a `tools/call` the direct path took, as rmcp's stateless JSON path would. The
    /// call runs on a task of its own, as rmcp's handler does, so a client that hangs up does
    /// not cut a governed call short.
    async fn call_directly(
        &self,
        caller: Caller,
        call: DirectCall,
        headers: http::HeaderMap,
        note: Note,
    ) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
        let gateway = self.gateway.clone();
        let legacy = Arc::clone(&self.legacy);
        let answered = tokio::spawn(async move {
            let DirectCall {
                id,
                params,
                meta,
                task,
            } = call;
            let tool = params.name.to_string();
            let called = gateway
                .call(
                    caller.clone(),
                    params,
                    &meta,
                    Some(&headers),
                    Some(&note),
                    None,
                )
                .await;
            if let Ok(result) = &called {
                // A task asked for, or a paused call held for its approval (2025-11-25).
                if let Some(task) = task {
                    let response =
                        Legacy::task_call(&gateway, &caller, &id, &tool, result, task.ttl).await;
                    return Ok(Answer::Streamed(response));
                }
                if let Some(url) = legacy.holds(&gateway, &caller, result) {
                    let response =
                        legacy.hold(gateway, &caller, id, &tool, result.clone(), url, note);
                    return Ok(Answer::Streamed(response));
                }
            }
            // Only requests below 2026-07-28 come here: the answer is the one rmcp sends those.
            match called.and_then(|result| response(&id, &result)) {
                Ok(body) => Ok(Answer::Json(body)),
                Err(error) => serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(id)))
                    .map(Answer::Json),
            }
        })
        .await;
        match answered {
            Ok(Ok(Answer::Streamed(response))) => response,
            Ok(Ok(Answer::Json(body))) => {
                let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                response
            }
            Ok(Err(error)) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({ "error": "internal_error", "message": format!("the response does not serialize: {error}") }),
            ),
            Err(error) => {
                tracing::error!(%error, "mcp call task failed");
                plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &json!({ "error": "internal_error", "message": "the call failed inside the gateway" }),
                )
            }
        }
    }

    /// Serves on `listener` until `shutdown` completes, then drains (see [`Serving::serve`]).
    /// Returns the number of connections cut at the drain timeout (0: every call finished).
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> usize {
        Serving::new(self).serve(listener, shutdown).await
    }
}

/// How the direct path answers a call: JSON in one piece, or a response of its own (a task, or a
/// held approval's event stream).
enum Answer {
    Json(Vec<u8>),
    Streamed(Response<BoxBody<Bytes, std::convert::Infallible>>),
}

/// An endpoint that can be replaced while it serves (`gatehouse serve` on SIGHUP): each
/// request is answered by the server current when it arrives, and a request in flight finishes
/// on the one it started with. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Serving(Arc<RwLock<McpServer>>);

impl Serving {
    /// Serves `server` until replaced.
    pub fn new(server: McpServer) -> Self {
        Self(Arc::new(RwLock::new(server)))
    }

    /// Answers every request from now on with `server`.
    pub fn replace(&self, server: McpServer) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = server;
    }

    fn current(&self) -> McpServer {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Serves on `listener` until `shutdown` completes, then drains ([`listener::serve`]):
    /// requests in flight finish for at most `[mcp] drain_timeout_ms`. Returns how many
    /// connections were cut then. At most `[mcp] max_connections` (as configured when this
    /// starts) are served at once; more are closed at accept. The MCP task runner
    /// ([`super::tasks::run`]) runs beside it, on the host serving now, and stops with it; so
    /// do the host's stdio servers, after the drain.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> usize {
        let serving = self.clone();
        let runner = tokio::spawn(super::tasks::run(move || {
            serving.current().gateway.shared_host()
        }));
        let cut = listener::serve(listener, self.clone(), shutdown).await;
        runner.abort();
        // No call is left to serve: the stdio servers stop now, not when the process ends.
        self.current()
            .gateway
            .shared_host()
            .stdio()
            .shutdown()
            .await;
        cut
    }
}

impl Endpoint for Serving {
    type Body = BoxBody<Bytes, std::convert::Infallible>;

    fn listener(&self) -> ListenerConfig {
        self.current().listener
    }

    async fn handle(&self, request: Request<Incoming>, _peer: SocketAddr) -> Response<Self::Body> {
        self.current().handle(request).await
    }
}

/// The endpoint's `resource` URL, its metadata URL (RFC 9728 section 3.1: the well-known path
/// inserted between the authority and the resource's path) and the two paths the metadata is
/// served at (bare, and with the resource's path appended).
fn resource_urls(config: &McpConfig) -> Result<(String, String, [Arc<str>; 2]), ServerConfigError> {
    let base = match &config.public_url {
        Some(url) => url.clone(),
        None if config.listen.ip().is_unspecified() => {
            format!("http://localhost:{}", config.listen.port())
        }
        None => format!("http://{}", config.listen),
    };
    let invalid = || ServerConfigError::PublicUrl(base.clone());
    let url = url::Url::parse(&base).map_err(|_| invalid())?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host().is_none()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(invalid());
    }
    let origin = url.origin().ascii_serialization();
    let resource_path = format!("{}{}", url.path().trim_end_matches('/'), config.path);
    let suffixed: Arc<str> = Arc::from(format!("{METADATA_PATH}{resource_path}"));
    Ok((
        format!("{origin}{resource_path}"),
        format!("{origin}{suffixed}"),
        [Arc::from(METADATA_PATH), suffixed],
    ))
}

/// Whether the request says its body is `application/json`.
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The JSON-RPC error for a body that is not a JSON-RPC message, with HTTP 400 (Streamable
/// HTTP: a refused input gets an error status, its body may be a JSON-RPC error without id).
fn unreadable_message(body: &[u8]) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
    let error = match serde_json::from_slice::<Value>(body) {
        Err(error) => {
            json!({ "code": -32700, "message": format!("Parse error: the body is not JSON: {error}") })
        }
        Ok(_) => json!({
            "code": -32600,
            "message": "Invalid Request: the body is JSON but not a JSON-RPC 2.0 request, notification or response MCP knows",
        }),
    };
    plain(
        StatusCode::BAD_REQUEST,
        &json!({ "jsonrpc": "2.0", "id": null, "error": error }),
    )
}

fn plain(status: StatusCode, body: &Value) -> Response<BoxBody<Bytes, std::convert::Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
