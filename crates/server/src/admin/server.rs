//! The HTTP side of the admin API: the accept loop, one hyper HTTP/1.1 connection per client,
//! and per request the route, the token and its role, then the handler in [`super::api`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use gatehouse_host::Host;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::json;
use tokio::net::TcpListener;

use super::api;
use super::auth::{AuthError, Operator, TokenError, Tokens};
use super::config::{AdminConfig, Role};
use super::console::Console;
use super::reply::{ApiError, Query, Reply, json_reply};
use crate::access_log::{self, Exchange, Note};
use crate::listener::{self, AllowedHosts, BodyError, Endpoint, ListenerConfig};

/// Why the `[admin]` table cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum AdminConfigError {
    /// An `[[admin.token]]`.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// `[admin] reveal_sensitive` lists `auditor`.
    #[error(
        "`[admin] reveal_sensitive` lists `auditor`: auditors never see a sensitive value in clear; list approver or operator"
    )]
    RevealToAuditor,
}

/// The admin API for a host. Cheap to clone.
#[derive(Clone)]
pub struct AdminServer {
    host: Arc<Host>,
    tokens: Arc<Tokens>,
    console: Option<Arc<Console>>,
    listener: ListenerConfig,
    /// `[admin] allowed_hosts`.
    hosts: Arc<AllowedHosts>,
    /// `[admin] allowed_origins`.
    origins: Arc<[String]>,
    /// `[admin] reveal_sensitive`.
    reveal: Arc<[Role]>,
    /// Where `POST /v1/plugins` with an `oci://` source pulls from (`[oci]`).
    #[cfg(feature = "oci")]
    registries: Option<Arc<gatehouse_host::oci::Registries>>,
    /// Users' connections (`[oauth]`), if the gateway keeps them.
    oauth: Option<Arc<crate::oauth::Broker>>,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl AdminServer {
    /// Load phase: reads the tokens and checks the table.
    pub fn new(host: Arc<Host>, config: &AdminConfig) -> Result<Self, AdminConfigError> {
        if config.reveal_sensitive.contains(&Role::Auditor) {
            return Err(AdminConfigError::RevealToAuditor);
        }
        Ok(Self {
            host,
            tokens: Arc::new(Tokens::load(&config.tokens)?),
            console: Console::new(config).map(Arc::new),
            listener: config.listener(),
            hosts: Arc::new(AllowedHosts::new(&config.allowed_hosts)),
            origins: config.allowed_origins.clone().into(),
            reveal: config.reveal_sensitive.clone().into(),
            #[cfg(feature = "oci")]
            registries: None,
            oauth: None,
        })
    }

    /// Lets `POST /v1/plugins` take `{"source": "oci://..."}` and pull from these registries.
    #[cfg(feature = "oci")]
    pub fn with_registries(mut self, registries: gatehouse_host::oci::Registries) -> Self {
        self.registries = Some(Arc::new(registries));
        self
    }

    /// Lists and revokes the users' connections `broker` keeps (`/v1/connections`), and lets
    /// each user, signed in to the console with the credential `users` checks (the MCP
    /// endpoint's), list and revoke their own (`/v1/me/connections`).
    #[must_use]
    pub fn with_oauth(
        mut self,
        broker: Arc<crate::oauth::Broker>,
        users: Arc<crate::mcp::identity::Identity>,
    ) -> Self {
        self.oauth = Some(broker);
        if let Some(console) = self.console.as_mut().and_then(Arc::get_mut) {
            console.admit_users(users);
        }
        self
    }

    /// How many tokens are configured.
    pub fn tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Where people reach the web console, if it is on.
    pub fn console_url(&self) -> Option<&str> {
        self.console.as_deref().map(Console::url)
    }

    /// Answers one HTTP request from `peer`, and writes its access line
    /// ([`crate::access_log`]). A `Host` not in `[admin] allowed_hosts`, or an `Origin` other
    /// than the listener's own or one of `[admin] allowed_origins`, is 403 before anything else.
    pub async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> Reply {
        let started = std::time::Instant::now();
        let (parts, body) = request.into_parts();
        let note = Note::default();
        note.traceparent(&parts.headers);
        let checked = self.check_host_and_origin(&parts.headers);
        let reply = match checked.map(|()| self.route(&parts, body, &note, peer)) {
            Err(error) => Err(error),
            Ok(routed) => routed.await,
        };
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                if error.status.is_server_error() {
                    tracing::warn!(code = error.code, message = %error.message, "admin request failed");
                }
                note.refused(&error.message);
                error.reply()
            }
        };
        let exchange = Exchange {
            listener: "admin",
            method: &parts.method,
            path: parts.uri.path(),
            status: reply.status(),
            bytes: http_body::Body::size_hint(reply.body()).exact(),
            started,
        };
        access_log::finish(&self.host, &note, &exchange);
        reply
    }

    /// DNS rebinding and cross-site requests: the `Host` must be an allowed name, and an
    /// `Origin`, when sent, this listener's own (`http(s)://` the `Host`) or an allowed one.
    fn check_host_and_origin(&self, headers: &http::HeaderMap) -> Result<(), ApiError> {
        if !self.hosts.allows(headers) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                "this listener does not answer that Host; an operator lists the names it answers in `[admin] allowed_hosts`",
            ));
        }
        let Some(origin) = headers.get(http::header::ORIGIN) else {
            return Ok(());
        };
        let host = headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let origin = origin.to_str().unwrap_or_default();
        let own = [format!("http://{host}"), format!("https://{host}")];
        if own.iter().any(|own| own.eq_ignore_ascii_case(origin))
            || self
                .origins
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin))
        {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            "requests from another site's page are refused; an operator lists the browser origins allowed in `[admin] allowed_origins`",
        ))
    }

    /// Routes one request; notes the identified operator for the access line.
    async fn route(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
        note: &Note,
        peer: SocketAddr,
    ) -> Result<Reply, ApiError> {
        let path: Vec<&str> = parts
            .uri
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let mut query = Query::parse(parts.uri.query())?;
        let host = &*self.host;
        let method = &parts.method;
        match path.as_slice() {
            ["healthz"] => {
                allow(method, &Method::GET)?;
                return Ok(json_reply(StatusCode::OK, &json!({ "status": "ok" })));
            }
            ["readyz"] => {
                allow(method, &Method::GET)?;
                return api::ready(host).await;
            }
            ["metrics"] => {
                allow(method, &Method::GET)?;
                return api::metrics(host).await;
            }
            ["v1", ..] => {}
            ["console", rest @ ..] => {
                if let Some(console) = self.console.as_deref() {
                    let body = if method == Method::POST {
                        self.body(body).await?
                    } else {
                        Bytes::new()
                    };
                    query.none()?;
                    return console
                        .route(
                            method,
                            rest,
                            parts.uri.path().ends_with('/'),
                            &parts.headers,
                            &self.tokens,
                            &body,
                            peer.ip(),
                        )
                        .await;
                }
                return Err(ApiError::not_found(
                    "the console is off here (`[admin] console = false`)",
                ));
            }
            _ => {
                return Err(ApiError::not_found(format!(
                    "no such endpoint `{}`; the API is under /v1 (see docs/admin-openapi.yaml)",
                    parts.uri.path()
                )));
            }
        }
        // Everything under /v1 needs a token, checked before the path, so a caller without one
        // learns nothing about what exists: a bearer token, else the console's session cookie
        // (with its CSRF check).
        let operator = match (self.tokens.identify(&parts.headers), &self.console) {
            (Ok(operator), _) => operator,
            (Err(AuthError::Missing), Some(console)) if Console::has_cookie(&parts.headers) => {
                console.identify(method, &parts.headers)?
            }
            (Err(error), _) => return Err(unauthorized(error)),
        };
        note.caller(None, &operator.principal);
        match path.as_slice() {
            ["v1", "approvals"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Approver, Role::Auditor])?;
                api::list_approvals(host, query).await
            }
            ["v1", "approvals", id] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Approver, Role::Auditor])?;
                let reveal = query.take("reveal").is_some_and(|value| value == "true");
                query.none()?;
                if reveal && !self.reveal.iter().any(|role| operator.roles.contains(role)) {
                    return Err(ApiError::new(
                        StatusCode::FORBIDDEN,
                        "forbidden",
                        "your roles may not see sensitive arguments in clear; an operator allows roles in `[admin] reveal_sensitive`",
                    ));
                }
                api::show_approval(host, &operator, id, reveal).await
            }
            ["v1", "approvals", id, verb @ ("approve" | "reject")] => {
                allow(method, &Method::POST)?;
                require(&operator, &[Role::Approver])?;
                query.none()?;
                let body = self.body(body).await?;
                api::decide(host, &operator, id, *verb == "approve", &body).await
            }
            ["v1", "audit"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Auditor])?;
                api::query_audit(host, query).await
            }
            ["v1", "audit", "export"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Auditor])?;
                api::export_audit(host, query).await
            }
            ["v1", "audit", "verify"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Auditor])?;
                api::verify_audit(host, query).await
            }
            ["v1", "audit", "checkpoints"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Auditor])?;
                api::list_checkpoints(host, query).await
            }
            ["v1", "sessions"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Operator, Role::Auditor])?;
                api::list_sessions(host, query).await
            }
            ["v1", "sessions", "timeline"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Operator, Role::Auditor])?;
                api::session_timeline(host, query).await
            }
            ["v1", "sessions", "end"] => {
                allow(method, &Method::POST)?;
                require(&operator, &[Role::Operator])?;
                api::end_session(host, &operator, query).await
            }
            ["v1", "plugins"] if method == Method::GET => {
                require(&operator, &[Role::Operator, Role::Auditor])?;
                query.none()?;
                Ok(api::list_plugins(host))
            }
            ["v1", "plugins"] if method == Method::POST => {
                require(&operator, &[Role::Operator])?;
                query.none()?;
                let json = (parts.headers.get(http::header::CONTENT_TYPE))
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("application/json"));
                let body = self.body(body).await?;
                if json {
                    #[cfg(feature = "oci")]
                    return api::pull(&self.host, self.registries.as_deref(), &operator, &body)
                        .await;
                    #[cfg(not(feature = "oci"))]
                    return Err(ApiError::bad_request(
                        "this gateway was built without OCI support: send the component's bytes (application/wasm)",
                    ));
                }
                api::upload(&self.host, &operator, body, None).await
            }
            ["v1", "plugins"] => Err(method_not_allowed("GET, POST")),
            ["v1", "policies", id, "rollback"] => {
                allow(method, &Method::POST)?;
                require(&operator, &[Role::Operator])?;
                query.none()?;
                api::rollback(host, &operator, id).await
            }
            ["v1", "policies", id, "promote"] => {
                allow(method, &Method::POST)?;
                require(&operator, &[Role::Operator])?;
                query.none()?;
                api::promote(host, &operator, id).await
            }
            ["v1", "me", "connections"] => {
                allow(method, &Method::GET)?;
                let whose = signed_in_user(&operator)?;
                api::my_connections(self.oauth.as_deref(), whose).await
            }
            ["v1", "me", "connections", "revoke"] => {
                allow(method, &Method::POST)?;
                let whose = signed_in_user(&operator)?;
                api::revoke_my_connection(host, self.oauth.as_deref(), whose, query).await
            }
            ["v1", "connections"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Operator, Role::Auditor])?;
                api::list_connections(self.oauth.as_deref(), query).await
            }
            ["v1", "connections", "revoke"] => {
                allow(method, &Method::POST)?;
                require(&operator, &[Role::Operator])?;
                api::revoke_connection(host, self.oauth.as_deref(), &operator, query).await
            }
            ["v1", "skills", "resolve"] => {
                allow(method, &Method::GET)?;
                require(&operator, &[Role::Operator, Role::Auditor])?;
                api::resolve_skills(host, query)
            }
            ["v1", "policies", id, "config"] => {
                allow(method, &Method::PUT)?;
                require(&operator, &[Role::Operator])?;
                query.none()?;
                let body = self.body(body).await?;
                api::set_config(host, &operator, id, &body).await
            }
            _ => Err(ApiError::not_found(format!(
                "no such endpoint `{}` (see docs/admin-openapi.yaml)",
                parts.uri.path()
            ))),
        }
    }

    async fn body(&self, body: Incoming) -> Result<Bytes, ApiError> {
        self.listener
            .read_body(body)
            .await
            .map_err(|error| match error {
                BodyError::TooLarge(_) => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("{error} (`[admin] max_body_bytes`)"),
                ),
                BodyError::TimedOut(_) => ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    format!("{error} (`[admin] body_timeout_ms`)"),
                ),
                BodyError::Unreadable(_) => ApiError::bad_request(error.to_string()),
            })
    }

    /// Serves on `listener` until `shutdown` completes, then drains ([`listener::serve`]). At
    /// most `[admin] max_connections` are served at once; more are closed at accept.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        listener::serve(listener, self, shutdown).await;
    }
}

impl Endpoint for AdminServer {
    type Body = Full<Bytes>;

    fn listener(&self) -> ListenerConfig {
        self.listener.clone()
    }

    async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> Reply {
        AdminServer::handle(self, request, peer).await
    }
}

fn unauthorized(error: AuthError) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", error.to_string())
}

fn method_not_allowed(allowed: &str) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("this endpoint takes {allowed}"),
    )
}

fn allow(method: &Method, allowed: &Method) -> Result<(), ApiError> {
    if method == allowed {
        Ok(())
    } else {
        Err(method_not_allowed(allowed.as_str()))
    }
}

/// 403 unless the operator has one of `roles`.
fn require(operator: &Operator, roles: &[Role]) -> Result<(), ApiError> {
    if operator.roles.iter().any(|r| roles.contains(r)) {
        return Ok(());
    }
    let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "`{}` may not do this: it needs the role {} (its token has {})",
            operator.principal,
            names.join(" or "),
            operator
                .roles
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}

/// The tenant and principal of a user's console session: `/v1/me` is theirs alone.
fn signed_in_user(operator: &Operator) -> Result<(&str, &str), ApiError> {
    match &operator.tenant {
        Some(tenant) => Ok((tenant, &operator.principal)),
        None => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "`/v1/me` is a user's: sign in to the console with your own credential (the API key or token your agent uses)",
        )),
    }
}
