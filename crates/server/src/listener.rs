//! How both endpoints (the MCP server and the admin API) listen: one accept loop ([`serve`]), one
//! HTTP/1.1 connection per client, and the same limits on hostile clients beyond hyper's own, set
//! by each endpoint's [`ListenerConfig`]:
//! - at most `max_connections` open at once ([`ConnectionCap`]): one beyond it is closed at accept,
//!   before any byte is read, and the refusals are logged as one counted warning per 10 s;
//! - a request's headers within `header_timeout_ms` (hyper closes the connection otherwise);
//! - a request's body within `body_timeout_ms` and `max_body_bytes`
//!   ([`ListenerConfig::read_body`]);
//! - on shutdown, the listener closes, idle connections close, and requests in flight finish for at
//!   most `drain_timeout`; connections still open then are cut.
//!
//! Without them a client that opens sockets and never sends, or sends a body one byte a minute,
//! holds a task and a file descriptor each for as long as it likes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_core::throttle::{self, Throttle};
use http::{Request, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a listener allows its clients, from its endpoint's config table (`[mcp]` or
/// `[admin]`, each under the keys it documents, with defaults of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// The listener's name in log lines and access lines: `mcp` or `admin`.
    pub name: &'static str,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body once its headers are in.
    pub body_timeout: Duration,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// On shutdown, how long requests in flight may take to finish.
    pub drain_timeout: Duration,
}

impl ListenerConfig {
    /// Reads a whole request body within this listener's size and time limits (the time
    /// counted from the end of the headers, which hyper bounds separately).
    pub async fn read_body(&self, body: Incoming) -> Result<Bytes, BodyError> {
        let limited = Limited::new(body, self.max_body_bytes).collect();
        match tokio::time::timeout(self.body_timeout, limited).await {
            Err(_) => Err(BodyError::TimedOut(self.body_timeout)),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(error)) if error.is::<LengthLimitError>() => {
                Err(BodyError::TooLarge(self.max_body_bytes))
            }
            Ok(Err(error)) => Err(BodyError::Unreadable(error.to_string())),
        }
    }
}

/// Why a request body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Longer than the size limit (the number of bytes).
    #[error("the request body exceeds {0} bytes")]
    TooLarge(usize),
    /// Not complete within the time limit.
    #[error("the request body did not arrive within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The connection failed while reading it.
    #[error("cannot read the request body: {0}")]
    Unreadable(String),
}

/// The `Host` header values a listener answers (`[mcp] allowed_hosts`, `[admin]
/// allowed_hosts`): what keeps a page on another site from reaching a loopback listener through
/// DNS rebinding. A listed name without a port allows any port; an empty list allows any host.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    /// Host names (lowercase, IPv6 without brackets), each with the port it requires, if any.
    hosts: Vec<(String, Option<u16>)>,
    /// The list was empty: any host.
    any: bool,
}

impl AllowedHosts {
    /// The list as configured; an entry that is neither a host nor `host:port` matches
    /// nothing.
    pub fn new(allowed: &[String]) -> Self {
        let hosts = allowed
            .iter()
            .map(|allowed| allowed.trim())
            .filter(|allowed| !allowed.is_empty())
            .map(|allowed| match http::uri::Authority::try_from(allowed) {
                Ok(authority) => (normalize(authority.host()), authority.port_u16()),
                Err(_) => (normalize(allowed), None),
            })
            .collect();
        Self {
            hosts,
            any: allowed.is_empty(),
        }
    }

    /// Whether the request has one `Host`, a valid authority, that the list allows.
    pub fn allows(&self, headers: &http::HeaderMap) -> bool {
        let mut values = headers.get_all(http::header::HOST).iter();
        let (Some(host), None) = (values.next(), values.next()) else {
            return false;
        };
        let Some(authority) = host
            .to_str()
            .ok()
            .and_then(|host| http::uri::Authority::try_from(host).ok())
        else {
            return false;
        };
        if self.any {
            return true;
        }
        let (name, port) = (normalize(authority.host()), authority.port_u16());
        self.hosts
            .iter()
            .any(|(allowed, required)| *allowed == name && required.is_none_or(|p| port == Some(p)))
    }
}

/// A host name as compared: lowercase, an IPv6 address without its brackets.
fn normalize(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

/// An endpoint [`serve`] answers requests with. Cheap to clone: each connection holds one.
pub trait Endpoint: Clone + Send + Sync + 'static {
    /// The body of its responses.
    type Body: http_body::Body<Data = Bytes, Error = std::convert::Infallible> + Send + 'static;

    /// Its listener's limits as they are now. The connection cap is read once, when serving
    /// starts; the header timeout for each new connection; the drain timeout at shutdown (an
    /// endpoint replaced while it serves, such as the MCP server on SIGHUP, may change them).
    fn listener(&self) -> ListenerConfig;

    /// Answers one request from `peer`.
    fn handle(
        &self,
        request: Request<Incoming>,
        peer: std::net::SocketAddr,
    ) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// Serves `endpoint` on `listener` until `shutdown` completes, then drains: the listener
/// closes (new connections are refused), idle connections close, and requests in flight
/// finish, for at most the drain timeout; connections still open then are cut. Returns how
/// many were cut (0: every request finished).
pub async fn serve<E: Endpoint>(
    listener: TcpListener,
    endpoint: E,
    shutdown: impl Future<Output = ()>,
) -> usize {
    tokio::pin!(shutdown);
    let config = endpoint.listener();
    let cap = ConnectionCap::new(config.name, config.max_connections);
    let (drain, draining) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
            // Reaps finished connections, so the set holds only open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // E.g. out of file descriptors: keep serving the connections we have and try
                // again shortly, rather than stopping the gateway.
                tracing::warn!(listener = config.name, %error, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = cap.admit() else {
            drop(stream);
            continue;
        };
        // A response is written whole; Nagle's algorithm would only hold its last segment back
        // for the client's delayed ACK.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        let endpoint = endpoint.clone();
        let header_timeout = endpoint.listener().header_timeout;
        let mut draining = draining.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let endpoint = endpoint.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(endpoint.handle(request, peer).await)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = async { let _ = draining.wait_for(|draining| *draining).await; } => {
                    // Finishes the request in flight, if any, then closes.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = ended {
                tracing::debug!(listener = config.name, %peer, %error, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = drain.send(true);
    let timeout = endpoint.listener().drain_timeout;
    let drained = tokio::time::timeout(timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    match drained {
        Ok(()) => 0,
        Err(_) => {
            let cut = connections.len();
            connections.shutdown().await;
            cut
        }
    }
}

/// A cap on the connections a listener serves at once. A connection beyond it is closed at
/// accept, before any byte is read; refusals are counted and logged at most once per 10 s.
#[derive(Debug)]
struct ConnectionCap {
    listener: &'static str,
    max: usize,
    slots: Arc<Semaphore>,
    /// A flood of refusals must not become a flood of log lines.
    refused: Throttle,
}

impl ConnectionCap {
    /// A cap of `max` open connections on the listener named `listener` (for the logs).
    fn new(listener: &'static str, max: usize) -> Self {
        Self {
            listener,
            max,
            slots: Arc::new(Semaphore::new(max)),
            refused: Throttle::new(throttle::INTERVAL),
        }
    }

    /// Admits one connection: the permit is its slot, freed when dropped (hold it for the
    /// connection's life). `None` when all slots are taken: drop the stream, which closes it.
    fn admit(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Some(permit);
        }
        if let Some(refused) = self.refused.hit() {
            tracing::warn!(
                listener = self.listener,
                max_connections = self.max,
                refused,
                "connections refused: the listener is at max_connections (raise it, or find who holds them open)"
            );
        }
        None
    }
}
