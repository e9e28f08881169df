//! Step 8 of the gate: a kept-alive connection to a checked address from the pool, or a new
//! one with TLS for `https` (with the host's [`TlsClient`]), one HTTP/1.1 exchange, and the
//! response body metered against the call's budgets. The server name checked against the certificate is the destination's host, also
//! when it is an address literal, never the address the name resolved to.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::{self, pki_types::ServerName};
use wasmtime_wasi_http::Error as HttpError;
use wasmtime_wasi_http::io::TokioIo;

use super::call::{Denial, Ledger};
use super::pool::{PoolKey, Reuse, Sender};
use super::rules::{DestHost, Destination, Scheme};
use super::tls::TlsClient;

/// How an allowed request failed before a response arrived: the code recorded on the attempt,
/// the reason, and the error the guest gets.
pub(super) struct Failure {
    pub code: &'static str,
    pub reason: String,
    pub error: HttpError,
}

impl Failure {
    fn upstream(error: HttpError) -> Self {
        Self {
            code: "upstream_error",
            reason: error.to_string(),
            error,
        }
    }
}

/// Sends `request` on a kept-alive connection to one of the checked addresses if the pool has
/// one for this grant, otherwise connects to the first checked address that accepts, performs
/// the TLS handshake for `https` (the destination's host is the server name), and exchanges
/// one HTTP/1.1 request. Either way the connection goes back to the pool for the next request.
///
/// A pooled connection can turn out dead only when used (the upstream closed it just then).
/// If hyper says the request was never written, it goes out on a new connection. If it may
/// have been written, only an idempotent request (RFC 9110: GET, HEAD, OPTIONS, TRACE, PUT,
/// DELETE) is sent again, once, on a new connection; any other request fails with the error,
/// because the upstream may have acted on it, and a replay must be the adapter's decision.
pub(super) async fn exchange(
    addrs: &[SocketAddr],
    dest: &Destination,
    tls: &TlsClient,
    identity: (u64, usize),
    mut request: Request<Full<Bytes>>,
) -> Result<(SocketAddr, Response<hyper::body::Incoming>, Reuse), Failure> {
    let tls_name = match dest.scheme {
        Scheme::Http => None,
        Scheme::Https => Some(server_name(dest)?),
    };
    let tls_text = tls_name.as_ref().map(|name| name.to_str().into_owned());
    let key = |addr: SocketAddr| PoolKey {
        addr,
        tls_name: tls_text.clone(),
        grants: identity.0,
        rule: identity.1,
    };
    let mut pooled = None;
    for addr in addrs {
        if let Some(sender) = tls.pool().checkout(&key(*addr)).await {
            pooled = Some((*addr, sender));
            break;
        }
    }
    let reuse = |addr: SocketAddr, sender: Sender| Reuse {
        pool: tls.pool().clone(),
        key: key(addr),
        sender,
    };
    if let Some((addr, mut sender)) = pooled {
        let replay = is_idempotent(request.method()).then(|| copy(&request));
        match sender.try_send_request(request).await {
            Ok(response) => return Ok((addr, response, reuse(addr, sender))),
            Err(mut error) => match (error.take_message(), replay) {
                (Some(unsent), _) | (None, Some(unsent)) => {
                    tracing::debug!(error = %error.into_error(), %addr, "kept-alive egress connection failed; sending on a new one");
                    request = unsent;
                }
                (None, None) => {
                    return Err(Failure::upstream(HttpError::from(error.into_error())));
                }
            },
        }
    }
    let mut last = None;
    let mut connected = None;
    for addr in addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(stream) => {
                connected = Some((*addr, stream));
                break;
            }
            Err(error) => last = Some(error),
        }
    }
    let Some((addr, stream)) = connected else {
        return Err(Failure::upstream(HttpError::Connect(last.unwrap_or_else(
            || std::io::Error::new(std::io::ErrorKind::NotFound, "no address to connect to"),
        ))));
    };
    let exchanged = match tls_name {
        None => http1(stream, request).await,
        Some(name) => {
            let stream = tls
                .connector()
                .connect(name, stream)
                .await
                .map_err(|e| tls_failure(&e))?;
            http1(stream, request).await
        }
    };
    let (sender, response) = exchanged.map_err(Failure::upstream)?;
    Ok((addr, response, reuse(addr, sender)))
}

/// The name the certificate must carry: the destination's host, also an address literal.
fn server_name(dest: &Destination) -> Result<ServerName<'static>, Failure> {
    match &dest.host {
        DestHost::Ip(ip) => Ok(ServerName::IpAddress((*ip).into())),
        DestHost::Name(name) => ServerName::try_from(name.clone()).map_err(|e| Failure {
            code: "tls_error",
            reason: format!("`{name}` cannot be checked against a certificate: {e}"),
            error: HttpError::TlsProtocolError,
        }),
    }
}

/// Methods RFC 9110 (section 9.2.2) defines as idempotent: sending one twice has the effect of
/// sending it once.
fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// A copy of a request about to be sent, for one replay of an idempotent request.
fn copy(request: &Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let mut copy = Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.headers_mut() = request.headers().clone();
    copy
}

/// A new HTTP/1.1 connection over `stream` and one request on it; returns the connection's
/// sender for reuse.
async fn http1<S>(
    stream: S,
    request: Request<Full<Bytes>>,
) -> Result<(Sender, Response<hyper::body::Incoming>), HttpError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection task ends when the connection closes: on an error, when the upstream
    // closes it, or when the sender is dropped (the pool closing it or never keeping it).
    tokio::spawn(async move {
        if let Err(error) = conn.await {
            tracing::debug!(%error, "egress connection closed with an error");
        }
    });
    let response = sender.send_request(request).await?;
    Ok((sender, response))
}

/// A failed handshake, classified for the guest: certificate problems, alerts from the server,
/// and everything else as a protocol error.
fn tls_failure(error: &std::io::Error) -> Failure {
    let rustls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let guest = match rustls_error {
        Some(
            rustls::Error::InvalidCertificate(_)
            | rustls::Error::NoCertificatesPresented
            | rustls::Error::InvalidCertRevocationList(_),
        ) => HttpError::TlsCertificateError,
        Some(rustls::Error::AlertReceived(alert)) => HttpError::TlsAlertReceived {
            alert_id: Some(u8::from(*alert)),
            alert_message: Some(format!("{alert:?}")),
        },
        _ => HttpError::TlsProtocolError,
    };
    Failure {
        code: "tls_error",
        reason: format!("TLS handshake failed: {error}"),
        error: guest,
    }
}

/// The response body, metered against the call's response-byte and time budgets. Read to its
/// end, it hands its connection to the pool.
pub(super) struct MeteredBody {
    pub incoming: hyper::body::Incoming,
    pub ledger: Arc<Ledger>,
    pub index: Option<usize>,
    pub sleep: Pin<Box<tokio::time::Sleep>>,
    pub reuse: Option<Reuse>,
    /// Ends when the caller cancelled the call: the body ends with an error, its connection
    /// closed.
    pub cancelled: Option<Cancelled>,
}

/// A call's cancellation, awaited ([`crate::relay::Cancel::cancelled`]).
pub(super) type Cancelled = Pin<Box<dyn Future<Output = ()> + Send>>;

impl MeteredBody {
    /// Keeps the connection if the body is already at its end (e.g. `content-length: 0`).
    pub fn new(
        incoming: hyper::body::Incoming,
        ledger: Arc<Ledger>,
        index: Option<usize>,
        sleep: Pin<Box<tokio::time::Sleep>>,
        reuse: Reuse,
    ) -> Self {
        let mut body = Self {
            incoming,
            ledger,
            index,
            sleep,
            reuse: Some(reuse),
            cancelled: None,
        };
        if body.incoming.is_end_stream() {
            body.finished();
        }
        body
    }

    /// The body, ending early once `cancelled` does.
    pub fn cancelled_by(mut self, cancelled: Option<Cancelled>) -> Self {
        self.cancelled = cancelled;
        self
    }

    fn finished(&mut self) {
        if let Some(reuse) = self.reuse.take() {
            reuse.keep();
        }
    }
}

impl Body for MeteredBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                if let Err(over) = this.ledger.meter(this.index, len) {
                    this.reuse = None;
                    return Poll::Ready(Some(Err(over)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.reuse = None;
                Poll::Ready(Some(Err(HttpError::from(error))))
            }
            Poll::Ready(None) => {
                this.finished();
                Poll::Ready(None)
            }
            Poll::Pending => loop {
                if let Some(cancelled) = this.cancelled.as_mut()
                    && cancelled.as_mut().poll(cx).is_ready()
                {
                    this.reuse = None;
                    this.ledger
                        .update(this.index, |a| Denial::Cancelled.mark(a));
                    return Poll::Ready(Some(Err(super::cancelled_error())));
                }
                if this.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // The call waited for its caller meanwhile: its budget ends later.
                let deadline = this.ledger.deadline();
                if Instant::now() < deadline {
                    this.sleep.as_mut().reset(deadline.into());
                    continue;
                }
                this.reuse = None;
                let denial = this.ledger.out_of_time();
                this.ledger.update(this.index, |a| denial.mark(a));
                return Poll::Ready(Some(Err(HttpError::HttpResponseTimeout)));
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
