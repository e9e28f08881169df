//! The HTTP side of the admin API: the accept loop, one hyper HTTP/1.1 connection per client,
//! and per request the route, the token and its role, then the handler in [`super::api`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioTimer;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use wasmtime_wasi_http::io::TokioIo;

use super::api;
use super::auth::{AuthError, Operator, TokenError, Tokens};
use super::config::{AdminConfig, Role};
use super::console::Console;
use crate::access_log::{self, Exchange, Note};
use crate::host::Host;
use crate::listener::{BodyError, ConnectionCap, read_body};

/// A response of the admin API.
pub type Reply = Response<Full<Bytes>>;

/// A refused or failed request: its status, a stable code and a message saying what to do.
/// Sent as `{"error": code, "message": message}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code: `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`,
    /// `bad_request`, `refused`, `conflict`, `payload_too_large`, `unavailable`, `internal`.
    pub code: &'static str,
    /// What went wrong and the fix.
    pub message: String,
}

impl ApiError {
    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: not possible in the record's current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 503: the store is unavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// Any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn reply(&self) -> Reply {
        let mut reply = json_reply(
            self.status,
            &json!({ "error": self.code, "message": self.message }),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            reply.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
        }
        reply
    }
}

/// A JSON response.
pub fn json_reply(status: StatusCode, body: &Value) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body.to_string())));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    reply
}

/// The admin API for a host. Cheap to clone.
#[derive(Clone)]
pub struct AdminServer {
    host: Arc<Host>,
    tokens: Arc<Tokens>,
    console: Option<Arc<Console>>,
    max_body_bytes: usize,
    header_timeout: Duration,
    body_timeout: Duration,
    max_connections: usize,
    /// Where `POST /v1/plugins` with an `oci://` source pulls from (`[oci]`).
    #[cfg(feature = "oci")]
    registries: Option<Arc<crate::oci::Registries>>,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl AdminServer {
    /// Load phase: reads the tokens.
    pub fn new(host: Arc<Host>, config: &AdminConfig) -> Result<Self, TokenError> {
        Ok(Self {
            host,
            tokens: Arc::new(Tokens::load(&config.tokens)?),
            console: Console::new(config).map(Arc::new),
            max_body_bytes: config.max_body_bytes,
            header_timeout: Duration::from_millis(config.header_timeout_ms),
            body_timeout: Duration::from_millis(config.body_timeout_ms),
            max_connections: config.max_connections,
            #[cfg(feature = "oci")]
            registries: None,
        })
    }

    /// Lets `POST /v1/plugins` take `{"source": "oci://..."}` and pull from these registries.
    #[cfg(feature = "oci")]
    pub fn with_registries(mut self, registries: crate::oci::Registries) -> Self {
        self.registries = Some(Arc::new(registries));
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

    /// Answers one HTTP request, and writes its access line ([`crate::access_log`]).
    pub async fn handle(&self, request: Request<Incoming>) -> Reply {
        let started = std::time::Instant::now();
        let (parts, body) = request.into_parts();
        let note = Note::default();
        note.traceparent(&parts.headers);
        let reply = match self.route(&parts, body, &note).await {
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

    /// Routes one request; notes the identified operator for the access line.
    async fn route(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
        note: &Note,
    ) -> Result<Reply, ApiError> {
        let path: Vec<&str> = parts
            .uri
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let query = Query::parse(parts.uri.query())?;
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
                    return console.route(
                        method,
                        rest,
                        parts.uri.path().ends_with('/'),
                        &parts.headers,
                        &self.tokens,
                        &body,
                    );
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
                query.none()?;
                api::show_approval(host, id).await
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
        read_body(body, self.max_body_bytes, self.body_timeout)
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

    /// Serves on `listener` until `shutdown` completes; connections in flight are dropped. At
    /// most `[admin] max_connections` are served at once; more are closed at accept.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let cap = ConnectionCap::new("admin", self.max_connections);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut shutdown => return,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // E.g. out of file descriptors: keep the connections we have, retry soon.
                    tracing::warn!(%error, "admin: cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Some(slot) = cap.admit() else {
                drop(stream);
                continue;
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
                    tracing::debug!(%peer, %error, "admin connection ended with an error");
                }
                drop(slot);
            });
        }
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

/// A request's query parameters. Every handler takes the ones it knows out; any left over is
/// a 400, so a misspelt filter never silently matches everything.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        for (i, (key, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(ApiError::bad_request(format!(
                    "query parameter `{key}` is given twice"
                )));
            }
        }
        Ok(Self(pairs))
    }

    /// Takes parameter `name` out.
    pub fn take(&mut self, name: &str) -> Option<String> {
        let index = self.0.iter().position(|(k, _)| k == name)?;
        Some(self.0.remove(index).1)
    }

    /// Takes parameter `name` out as a number.
    pub fn take_number<T: std::str::FromStr>(&mut self, name: &str) -> Result<Option<T>, ApiError> {
        self.take(name)
            .map(|v| {
                v.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "query parameter `{name}` = `{v}` is not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    /// Refuses any parameter not taken.
    pub fn none(&self) -> Result<(), ApiError> {
        match self.0.first() {
            None => Ok(()),
            Some((key, _)) => Err(ApiError::bad_request(format!(
                "unknown query parameter `{key}` (see docs/admin-openapi.yaml)"
            ))),
        }
    }
}
