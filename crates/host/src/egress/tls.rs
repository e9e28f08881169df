//! TLS for `https` upstreams: rustls (ring provider, TLS 1.2 and 1.3) with one client
//! configuration per host ([`TlsClient`]): the system's root certificates, unless `[egress]
//! system_root_certificates = false`, plus the PEM files in `[egress] extra_root_certificates`
//! (a private CA). The configuration is built once and shared, so its in-memory session cache
//! (rustls' default) lets a new connection to a server seen before resume its TLS session
//! instead of a full handshake. The same [`TlsClient`] holds the host's pool of kept-alive
//! upstream connections (see `pool`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use super::config::EgressConfig;
use super::pool::Pool;

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

/// The host's upstream client: the TLS configuration every `https` request uses (with its
/// session cache) and the pool of kept-alive connections every request draws from. Built once
/// ([`TlsClient::from_config`]) and shared by every adapter's [`Grants`](super::Grants); cheap
/// to clone.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    roots: usize,
    pool: Pool,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("roots", &self.roots)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl Default for TlsClient {
    /// Trusts no certificate: every `https` request fails its handshake. The pool has the
    /// `[egress]` defaults.
    fn default() -> Self {
        static EMPTY: OnceLock<TlsClient> = OnceLock::new();
        EMPTY
            .get_or_init(|| {
                Self::with_roots(RootCertStore::empty(), Pool::new(&EgressConfig::default()))
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
        Self::with_roots(roots, Pool::new(config))
    }

    fn with_roots(roots: RootCertStore, pool: Pool) -> Result<Self, TlsConfigError> {
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
            pool,
        })
    }

    /// The connector every `https` request uses: the host's roots (system ones unless turned
    /// off, plus `[egress] extra_root_certificates`), TLS 1.2 and 1.3 with `ring`.
    pub fn connector(&self) -> &TlsConnector {
        &self.connector
    }

    /// The kept-alive connections.
    pub(super) fn pool(&self) -> &Pool {
        &self.pool
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

/// Makes `ring` the process's default rustls provider, unless one is installed already (by an
/// embedder, say). reqwest, which the OCI client, `gatehouse import` and the OTLP exporter use,
/// is built without a provider of its own (aws-lc-rs would be a second crypto library and a
/// much longer build), so it takes the process default: a reqwest client built in a process
/// without one panics. The library calls this before it builds one, and so does the command
/// line at start; an embedder who builds reqwest clients of its own calls it (or installs a
/// provider) first.
pub fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have won the race; either way a default is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
