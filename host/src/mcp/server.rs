//! The HTTP side of `gatehouse serve`: the accept loop, one hyper HTTP/1.1 connection per
//! client, and per request the endpoint path check, identity (gate 1), then rmcp.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::TokioTimer;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use wasmtime_wasi_http::io::TokioIo;

use super::config::McpConfig;
use super::handler::Gateway;
use super::identity::{ApiKeyError, ApiKeys};
use crate::host::Host;

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
        let gateway = Gateway::new(host);
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
