//! Step 8 of the gate: the connection to a checked address, TLS for `https` (with the host's
//! [`TlsClient`]), one HTTP/1.1 exchange, and the response body metered against the call's
//! budgets. The server name checked against the certificate is the destination's host, also
//! when it is an address literal, never the address the name resolved to.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::{self, pki_types::ServerName};
use wasmtime_wasi_http::Error as HttpError;
use wasmtime_wasi_http::io::TokioIo;

use super::call::{Denial, Ledger, millis};
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

/// Connects to the first checked address that accepts, performs the TLS handshake for `https`
/// (the destination's host is the server name), and exchanges one HTTP/1.1 request.
pub(super) async fn exchange(
    addrs: &[SocketAddr],
    dest: &Destination,
    tls: &TlsClient,
    request: Request<http_body_util::Full<Bytes>>,
) -> Result<(SocketAddr, Response<hyper::body::Incoming>), Failure> {
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
    let response = match dest.scheme {
        Scheme::Http => http1(stream, request).await,
        Scheme::Https => {
            let name = match &dest.host {
                DestHost::Ip(ip) => ServerName::IpAddress((*ip).into()),
                DestHost::Name(name) => {
                    ServerName::try_from(name.clone()).map_err(|e| Failure {
                        code: "tls_error",
                        reason: format!("`{name}` cannot be checked against a certificate: {e}"),
                        error: HttpError::TlsProtocolError,
                    })?
                }
            };
            let stream = tls
                .connector()
                .connect(name, stream)
                .await
                .map_err(|e| tls_failure(&e))?;
            http1(stream, request).await
        }
    };
    Ok((addr, response.map_err(Failure::upstream)?))
}

/// One HTTP/1.1 request over `stream`.
async fn http1<S>(
    stream: S,
    request: Request<http_body_util::Full<Bytes>>,
) -> Result<Response<hyper::body::Incoming>, HttpError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection task ends when the response body is finished or dropped.
    tokio::spawn(async move {
        if let Err(error) = conn.await {
            tracing::debug!(%error, "egress connection closed with an error");
        }
    });
    Ok(sender.send_request(request).await?)
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

/// The response body, metered against the call's response-byte and time budgets.
pub(super) struct MeteredBody {
    pub incoming: hyper::body::Incoming,
    pub ledger: Arc<Ledger>,
    pub index: Option<usize>,
    pub sleep: Pin<Box<tokio::time::Sleep>>,
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
                let limit = this.ledger.grants.max_response_bytes;
                let over = {
                    let mut spent = this.ledger.spent();
                    spent.response_bytes += len;
                    spent.response_bytes > limit
                };
                if over {
                    this.ledger.update(this.index, |a| {
                        a.code = "response_bytes_budget".to_owned();
                        a.reason = format!("the response exceeded the call's response budget of {limit} bytes (`[egress] max_response_bytes`)");
                    });
                    return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(limit)))));
                }
                this.ledger.update(this.index, |a| a.response_bytes += len);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(HttpError::from(error)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let limit_ms = millis(this.ledger.grants.max_total);
                    this.ledger.update(this.index, |a| {
                        a.code = "time_budget".to_owned();
                        a.reason = Denial::TimeBudget { limit_ms }.to_string();
                    });
                    Poll::Ready(Some(Err(HttpError::HttpResponseTimeout)))
                }
                Poll::Pending => Poll::Pending,
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
