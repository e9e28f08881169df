//! The HTTP side of `gatehouse serve`: the accept loop, one hyper HTTP/1.1 connection per
//! client, and per request the endpoint path check, the protected resource metadata, identity
//! (gate 1), then the front door ([`super::router`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use gatehouse_core::keys::PublicKey;
use gatehouse_core::model::ApprovalMode;
use gatehouse_host::Host;
use gatehouse_host::delegation::{self, DelegationError};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::a2a::{self, A2a};
use super::approvals::{self, Approvals};
use super::call::Gateway;
use super::caller::Caller;
use super::config::McpConfig;
use super::identity::{ApiKeyError, ApiKeys, Identity};
use super::jwks;
use super::jwt::{JwtConfigError, JwtVerifier};
use super::keys::KeyArgument;
use super::reply::{self, Body};
use super::router::{Router, is_json};
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
    /// `[mcp.a2a] key`.
    #[error("`[mcp.a2a] key`: {0}")]
    A2aKey(String),
    /// The keys the gateway publishes ([`jwks`]).
    #[error("the keys the gateway publishes at /.well-known/jwks.json: {0}")]
    KeyIds(String),
}

/// The MCP endpoint for a host: identity, then the front door, then the pipeline. Cheap to
/// clone.
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
    router: Arc<Router>,
    gateway: Gateway,
    /// A2A on the same listener, if `[mcp.a2a]` is set.
    a2a: Option<Arc<A2a>>,
    /// The pages that connect users' own accounts, if `[oauth]` is set.
    oauth: Option<Arc<crate::oauth::Broker>>,
    /// The gateway's public keys ([`jwks`]), if it signs anything.
    jwks: Option<Arc<Value>>,
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
        let base = public_base(config)?;
        let (resource, metadata_url, metadata_paths) = resource_urls(&base, &config.path);
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
        let router = Router::new(
            &config.allowed_hosts,
            &origins,
            Duration::from_millis(config.input_wait_ms),
            Duration::from_millis(config.task_after_ms),
        );
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
        let a2a = (config.a2a.clone())
            .map(|a2a| A2a::new(a2a, &base).map(Arc::new))
            .transpose()
            .map_err(ServerConfigError::A2aKey)?;
        let signers: Vec<(&str, PublicKey)> = [
            ("[receipts] key", host.receipt_key()),
            (
                "[mcp.a2a] key",
                a2a.as_ref().and_then(|a2a| a2a.public_key()),
            ),
        ]
        .into_iter()
        .filter_map(|(role, key)| Some((role, key?)))
        .collect();
        let jwks = jwks::key_set(&signers)
            .map_err(ServerConfigError::KeyIds)?
            .map(Arc::new);
        let gateway = Gateway::new(host, config.aliases.clone(), key_argument, approvals);
        Ok(Self {
            path: Arc::from(config.path.as_str()),
            listener: config.listener(),
            metadata_paths,
            metadata: Arc::new(metadata),
            challenges,
            identity: Arc::new(Identity::new(keys, jwt)),
            router: Arc::new(router),
            gateway,
            a2a,
            oauth: None,
            jwks,
        })
    }

    /// The identity gate of this endpoint (its API keys and `[mcp.jwt]`): who may sign in to
    /// the console as a user ([`crate::admin::AdminServer::with_oauth`]).
    pub fn identity(&self) -> Arc<Identity> {
        Arc::clone(&self.identity)
    }

    /// Serves the pages of `broker`'s flows (`/oauth/start`, `/oauth/callback`) on this
    /// listener; the host the server was built over must use the same broker
    /// ([`gatehouse_host::Host::set_accounts`]).
    #[must_use]
    pub fn with_oauth(mut self, broker: Arc<crate::oauth::Broker>) -> Self {
        self.oauth = Some(broker);
        self
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
    pub async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
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

    async fn answer(&self, request: Request<Incoming>, note: &Note) -> Response<Body> {
        if self
            .metadata_paths
            .iter()
            .any(|path| request.uri().path() == &**path)
        {
            if request.method() != http::Method::GET {
                return reply::method_not_allowed(
                    "GET",
                    "the protected resource metadata is read with GET",
                );
            }
            return reply::json(StatusCode::OK, &self.metadata);
        }
        if request.uri().path() == jwks::PATH {
            return self.key_set(request.method());
        }
        if let Some(oauth) = &self.oauth
            && matches!(
                request.uri().path(),
                crate::oauth::START_PATH | crate::oauth::CALLBACK_PATH
            )
        {
            return oauth_page(oauth, &request).await;
        }
        if let Some(a2a) = &self.a2a {
            let path = request.uri().path();
            if path == a2a::CARD_PATH || path == a2a.path() {
                return self.answer_a2a(a2a, request, note).await;
            }
        }
        if request.uri().path() != &*self.path {
            return reply::json(
                StatusCode::NOT_FOUND,
                &json!({ "error": "not_found", "message": format!("the MCP endpoint is {}", self.path) }),
            );
        }
        let caller = match self.identify(request.headers(), note).await {
            Ok(caller) => caller,
            Err(refusal) => return refusal,
        };
        note.caller(Some(&caller.tenant), &caller.principal.id);
        let (parts, body) = request.into_parts();
        if let Err(refusal) = self.router.check(&parts.method, &parts.headers) {
            return refusal;
        }
        if parts.method == http::Method::GET {
            let connected = self.oauth.as_ref().map(|broker| broker.connections_made());
            return self
                .router
                .listen(&self.gateway, caller, &parts.headers, connected);
        }
        let body = match self.body(body).await {
            Ok(body) => body,
            Err(refusal) => return refusal,
        };
        self.router
            .route(&self.gateway, caller, &parts.headers, &body, note)
            .await
    }

    /// Gate 1 for a request with `headers`: its caller (acting on a call's behalf, if it
    /// presents a delegation), or the 401 (403 for a delegation that does not verify) that
    /// refuses it.
    async fn identify(
        &self,
        headers: &http::HeaderMap,
        note: &Note,
    ) -> Result<Caller, Response<Body>> {
        match self.identity.identify(headers).await {
            Ok(mut caller) => {
                note.caller(Some(&caller.tenant), &caller.principal.id);
                // A caller identified by its organisation's JWT: kept for token exchange.
                if let Some(oauth) = &self.oauth
                    && let Some(jwt) = self.identity.jwt_of(headers)
                {
                    oauth.saw_subject(&caller.tenant, &caller.principal.id, jwt);
                }
                // A peer calling back on a call's behalf: the delegation it was given must
                // verify, for its own tenant, or nothing runs.
                if let Some(token) = headers.get(delegation::HEADER) {
                    let opened = (token.to_str().ok())
                        .ok_or(DelegationError::Invalid)
                        .and_then(|token| {
                            self.gateway.host().open_delegation(token, &caller.tenant)
                        });
                    match opened {
                        Ok(delegation) => caller.delegation = Some(delegation),
                        Err(error) => {
                            note.refused(&error.to_string());
                            return Err(reply::json(
                                StatusCode::FORBIDDEN,
                                &json!({ "error": "DELEGATION_INVALID", "message": error.to_string() }),
                            ));
                        }
                    }
                }
                Ok(caller)
            }
            Err(error) => {
                note.refused(&error.to_string());
                let mut response = reply::json(
                    StatusCode::UNAUTHORIZED,
                    &json!({ "error": "IDENTITY_INVALID", "message": error.to_string() }),
                );
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    self.challenges[usize::from(error.token_presented())].clone(),
                );
                Err(response)
            }
        }
    }

    /// The body, read within the size and time limits: nothing is called before it is whole.
    async fn body(&self, body: Incoming) -> Result<bytes::Bytes, Response<Body>> {
        self.listener.read_body(body).await.map_err(|error| {
            let (status, code) = match &error {
                BodyError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
                BodyError::TimedOut(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
                BodyError::Unreadable(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            };
            tracing::debug!(%error, "request body refused");
            reply::plain(status, code, error.to_string())
        })
    }

    /// `GET` of the gateway's key set ([`jwks`]): 404 when it signs nothing.
    fn key_set(&self, method: &http::Method) -> Response<Body> {
        if method != http::Method::GET {
            return reply::method_not_allowed("GET", format!("{} is read with GET", jwks::PATH));
        }
        match &self.jwks {
            Some(set) => reply::json(StatusCode::OK, set),
            None => reply::json(
                StatusCode::NOT_FOUND,
                &json!({ "error": "not_found", "message": "this gateway publishes no keys: it signs neither receipts ([receipts] key) nor its A2A card ([mcp.a2a] key)" }),
            ),
        }
    }

    /// A request to A2A's card or endpoint ([`a2a`]): identified as an MCP request is, and
    /// held to the same `Host` and `Origin` checks. The card of a caller without credentials,
    /// where no anonymous tenant is set, lists no skill.
    async fn answer_a2a(
        &self,
        a2a: &A2a,
        request: Request<Incoming>,
        note: &Note,
    ) -> Response<Body> {
        let (parts, body) = request.into_parts();
        if let Err(refusal) = self.router.admits(&parts.headers) {
            return refusal;
        }
        let card = parts.uri.path() == a2a::CARD_PATH;
        let allowed = if card {
            http::Method::GET
        } else {
            http::Method::POST
        };
        if parts.method != allowed {
            return reply::method_not_allowed(
                if card { "GET" } else { "POST" },
                format!("{} takes {allowed}", parts.uri.path()),
            );
        }
        let identified = self.identify(&parts.headers, note).await;
        if card {
            let presented = parts.headers.contains_key(http::header::AUTHORIZATION);
            return match identified {
                Ok(caller) => reply::json(StatusCode::OK, &a2a.card(&self.gateway, Some(&caller))),
                Err(_) if !presented => reply::json(StatusCode::OK, &a2a.card(&self.gateway, None)),
                Err(refusal) => refusal,
            };
        }
        let caller = match identified {
            Ok(caller) => caller,
            Err(refusal) => return refusal,
        };
        if !is_json(&parts.headers) {
            return reply::plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the body must be application/json",
            );
        }
        let body = match self.body(body).await {
            Ok(body) => body,
            Err(refusal) => return refusal,
        };
        a2a.answer(&self.gateway, caller, &parts.headers, &body, note)
            .await
    }

    /// Serves on `listener` until `shutdown` completes, then drains (see [`Serving::serve`]).
    /// Returns the number of connections cut at the drain timeout (0: every call finished).
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> usize {
        Serving::new(self).serve(listener, shutdown).await
    }
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
        let old = std::mem::replace(
            &mut *self.0.write().unwrap_or_else(PoisonError::into_inner),
            server,
        );
        old.router.retire();
    }

    fn current(&self) -> McpServer {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Serves on `listener` until `shutdown` completes, then drains ([`listener::serve`]):
    /// open event streams end, and requests in flight finish for at most
    /// `[mcp] drain_timeout_ms`. Returns how many connections were cut then. At most
    /// `[mcp] max_connections` (as configured when this starts) are served at once; more are
    /// closed at accept. The MCP task runner ([`super::tasks::run`]) runs beside it, on the
    /// host serving now, and stops with it; so do the host's stdio servers, after the drain.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> usize {
        let serving = self.clone();
        let runner = tokio::spawn(super::tasks::run(move || {
            serving.current().gateway.shared_host()
        }));
        // Open event streams end with the shutdown, not at the drain's timeout.
        let retiring = self.clone();
        let shutdown = async move {
            shutdown.await;
            retiring.current().router.retire();
        };
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
    type Body = Body;

    fn listener(&self) -> ListenerConfig {
        self.current().listener
    }

    async fn handle(&self, request: Request<Incoming>, _peer: SocketAddr) -> Response<Self::Body> {
        self.current().handle(request).await
    }
}

/// The URL clients reach the listener at: `[mcp] public_url`, else `http://<listen>`
/// (`http://localhost:<port>` for an unspecified address), checked to be an absolute
/// `http(s)` URL without query or fragment; without a trailing `/`.
/// A page of a flow that connects a user's account ([`crate::oauth`]): GET only; never cached,
/// and no referrer (the callback's URL carries the provider's code).
async fn oauth_page(broker: &crate::oauth::Broker, request: &Request<Incoming>) -> Response<Body> {
    use crate::oauth::Page;
    use http_body_util::BodyExt as _;
    if request.method() != http::Method::GET {
        return reply::method_not_allowed("GET", "this page is opened with GET");
    }
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let param = |name: &str| {
        (query.iter())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let page = if request.uri().path() == crate::oauth::START_PATH {
        match param("state") {
            Some(state) => broker.start(state).await,
            None => Page::Done {
                ok: false,
                message: "This link names no connection under way.".to_owned(),
            },
        }
    } else {
        let cookie = (request.headers().get_all(http::header::COOKIE).iter())
            .filter_map(|value| value.to_str().ok())
            .collect::<Vec<_>>()
            .join("; ");
        broker
            .callback(param("state"), param("code"), param("error"), Some(&cookie))
            .await
    };
    let mut response = match page {
        Page::Redirect { location, cookie } => {
            let mut response = Response::new(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed(),
            );
            *response.status_mut() = StatusCode::SEE_OTHER;
            let headers = response.headers_mut();
            if let (Ok(location), Ok(cookie)) = (
                http::HeaderValue::try_from(location),
                http::HeaderValue::try_from(cookie),
            ) {
                headers.insert(http::header::LOCATION, location);
                headers.insert(http::header::SET_COOKIE, cookie);
            }
            response
        }
        Page::Done { ok, message } => {
            let status = if ok {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            };
            let mut response =
                reply::bytes(status, bytes::Bytes::from(crate::oauth::html(ok, &message)));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/html; charset=utf-8"),
            );
            response
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        http::header::REFERRER_POLICY,
        http::HeaderValue::from_static("no-referrer"),
    );
    response
}

/// The origin (scheme, host, port) browsers reach the MCP endpoint at: `[mcp] public_url`'s,
/// else the listen address's.
pub fn public_origin(config: &McpConfig) -> Result<String, ServerConfigError> {
    let base = public_base(config)?;
    let url = url::Url::parse(&base).map_err(|_| ServerConfigError::PublicUrl(base.clone()))?;
    Ok(url.origin().ascii_serialization())
}

fn public_base(config: &McpConfig) -> Result<String, ServerConfigError> {
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
    Ok(format!("{origin}{}", url.path().trim_end_matches('/')))
}

/// The endpoint's `resource` URL (`base` and its `path`), its metadata URL (RFC 9728 section
/// 3.1: the well-known path inserted between the authority and the resource's path) and the
/// two paths the metadata is served at (bare, and with the resource's path appended).
fn resource_urls(base: &str, path: &str) -> (String, String, [Arc<str>; 2]) {
    let url = url::Url::parse(base).expect("checked by public_base");
    let origin = url.origin().ascii_serialization();
    let resource_path = format!("{}{path}", url.path().trim_end_matches('/'));
    let suffixed: Arc<str> = Arc::from(format!("{METADATA_PATH}{resource_path}"));
    (
        format!("{origin}{resource_path}"),
        format!("{origin}{suffixed}"),
        [Arc::from(METADATA_PATH), suffixed],
    )
}
