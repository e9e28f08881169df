//! Step 8 of the gate: the connection to a checked address, TLS for `https`, one HTTP/1.1
//! exchange, and the response body metered against the call's budgets.
//!
//! TLS is rustls (ring provider, TLS 1.2 and 1.3) with one client configuration per host
//! ([`TlsClient`]): the system's root certificates, unless `[egress] system_root_certificates =
//! false`, plus the PEM files in `[egress] extra_root_certificates` (a private CA). The server
//! name checked against the certificate is the destination's host, also when it is an address
//! literal, never the address the name resolved to.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use wasmtime_wasi_http::Error as HttpError;
use wasmtime_wasi_http::io::TokioIo;

use super::grants::EgressConfig;
use super::rules::{DestHost, Destination, Scheme};
use super::{Denial, Shared, millis};

/// Why the TLS client configuration could not be built. Each names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A root certificate file cannot be read or is not PEM.
    #[error("`[egress] extra_root_certificates`: cannot read `{path}`: {detail}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A root certificate file holds no certificate.
    #[error(
        "`[egress] extra_root_certificates`: `{path}` holds no certificate (expected PEM \
         `-----BEGIN CERTIFICATE-----` blocks)"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A certificate does not parse as a trust anchor.
    #[error(
        "`[egress] extra_root_certificates`: certificate #{index} in `{path}` is not a usable \
         root certificate: {detail}"
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Position in the file (0-based).
        index: usize,
        /// The parser's message.
        detail: String,
    },
    /// rustls refused the configuration.
    #[error("cannot build the TLS client configuration: {0}")]
    Config(String),
}

/// The TLS client every `https` request of a host uses. Built once ([`TlsClient::from_config`])
/// and shared by every adapter's [`Grants`](super::Grants); cheap to clone.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    roots: usize,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl Default for TlsClient {
    /// Trusts no certificate: every `https` request fails its handshake.
    fn default() -> Self {
        static EMPTY: OnceLock<TlsClient> = OnceLock::new();
        EMPTY
            .get_or_init(|| {
                Self::with_roots(RootCertStore::empty())
                    .expect("the default protocol versions are supported by the ring provider")
            })
            .clone()
    }
}

impl TlsClient {
    /// Load phase (once per host): the system's roots (unless disabled) plus the operator's
    /// extra roots. System certificates that fail to load are logged and skipped; extra ones
    /// are errors, because the operator named them.
    pub fn from_config(config: &EgressConfig) -> Result<Self, TlsConfigError> {
        let mut roots = RootCertStore::empty();
        if config.system_root_certificates {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::warn!(%error, "skipping system root certificates that did not load");
            }
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            if ignored > 0 {
                tracing::debug!(ignored, "skipped unparsable system root certificates");
            }
            if added == 0 {
                tracing::warn!(
                    "no system root certificates found: https upstreams will fail certificate \
                     verification unless `[egress] extra_root_certificates` lists their CA"
                );
            }
        }
        for path in &config.extra_root_certificates {
            add_pem_roots(&mut roots, path)?;
        }
        Self::with_roots(roots)
    }

    fn with_roots(roots: RootCertStore) -> Result<Self, TlsConfigError> {
        let count = roots.len();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsConfigError::Config(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // The gate speaks HTTP/1.1 only; say so, so a server cannot pick h2.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            roots: count,
        })
    }
}

fn add_pem_roots(roots: &mut RootCertStore, path: &Path) -> Result<(), TlsConfigError> {
    let read = |detail: String| TlsConfigError::Read {
        path: path.to_owned(),
        detail,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| read(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsConfigError::Empty {
            path: path.to_owned(),
        });
    }
    for (index, cert) in certs.into_iter().enumerate() {
        roots.add(cert).map_err(|e| TlsConfigError::Invalid {
            path: path.to_owned(),
            index,
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

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
                .connector
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
    pub shared: Arc<Shared>,
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
                let limit = this.shared.grants.max_response_bytes;
                let over = {
                    let mut spent = this.shared.spent();
                    spent.response_bytes += len;
                    spent.response_bytes > limit
                };
                if over {
                    this.shared.update(this.index, |a| {
                        a.code = "response_bytes_budget".to_owned();
                        a.reason = format!("the response exceeded the call's response budget of {limit} bytes (`[egress] max_response_bytes`)");
                    });
                    return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(limit)))));
                }
                this.shared.update(this.index, |a| a.response_bytes += len);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(HttpError::from(error)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let limit_ms = millis(this.shared.grants.max_total);
                    this.shared.update(this.index, |a| {
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
