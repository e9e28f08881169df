//! Plugins from OCI registries: signed components published and fetched as WebAssembly OCI
//! artifacts, pinned by digest.
//!
//! The layout is the CNCF one that `wkg`, `oras` and the wasm tooling read: an OCI image
//! manifest whose config has media type `application/vnd.wasm.config.v0+json` and whose one
//! layer is the component, `application/wasm`. (The older wasm-to-oci layer type,
//! `application/vnd.wasm.content.layer.v1+wasm`, is read too.)
//!
//! A registry is a transport, never a trust anchor: what this module returns is bytes, and the
//! host verifies them exactly as a file (signature, publisher scope, no downgrade). What it adds
//! is what a registry needs:
//! - **References**: `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`. A tag is resolved to the
//!   manifest's digest, and is accepted for loading only where `[[oci.registry]] allow_tags`
//!   says so ([`Tags`]).
//! - **Auth**: anonymous, or a user name and a password read from an environment variable or a
//!   file named in the config, never from the command line. A registry that answers with the
//!   distribution spec's bearer-token challenge gets the token flow (oci-client).
//! - **Transport**: https, with the system's roots plus an optional CA file. Plain http only for
//!   a loopback registry without a CA file, or where the config says `plain_http = true`.
//! - **Bounds**: a manifest is read up to [`MAX_MANIFEST_BYTES`] and must be a wasm artifact,
//!   and its layer at most `[oci] max_blob_mib`, checked against the declared size and again
//!   as the bytes arrive. Every push and pull, the registry's answers and the token flow
//!   included, ends within `[oci] deadline_seconds`, however slowly the registry sends: past
//!   it, the registry counts as unreachable ([`OciError::Unreachable`]; a tag then falls back
//!   to the cache as below).
//! - **A cache by digest** (`[oci] cache_dir`): a pinned reference already pulled is served
//!   from the cache without asking the registry, and a tag remembers the digest it last
//!   resolved to, so a restart with the registry down still serves what it had. Cached bytes are
//!   checked against their layer digest on every read.
//!
//! ```toml
//! [oci]
//! max_blob_mib = 64                # default
//! deadline_seconds = 120           # default: the longest one push or pull may take
//! watch_seconds = 0                # default: tags are resolved at start and on SIGHUP only
//! cache_dir = "/var/cache/gatehouse/oci"   # default: `oci` in the [cache] directory
//!
//! [[oci.registry]]
//! host = "registry.example.com"
//! username = "gatehouse"
//! password_env = "REGISTRY_PASSWORD"   # or password_file = "/run/secrets/registry"
//! ca_file = "/etc/gatehouse/registry-ca.pem"
//! allow_tags = true                    # default false: only @sha256: references load
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};
use std::time::Duration;

use oci_client::RegistryOperation;
use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The config's media type that marks a WebAssembly component artifact (CNCF layout).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type (CNCF layout).
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// How long connecting to a registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one read from a registry may wait (the whole operation: `deadline_seconds`).
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The layer media type of the older wasm-to-oci layout, read but never written.
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// The config media type of the older wasm-to-oci layout.
const LEGACY_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";

const USER_AGENT: &str = concat!("gatehouse/", env!("CARGO_PKG_VERSION"));

/// The largest manifest a pull reads: the 4 MiB the OCI distribution spec says registries
/// should accept at least, thousands of times a wasm artifact's manifest (one layer, about
/// 1 KB). A registry that sends more is refused as it sends ([`OciError::TooLarge`]), so a
/// pull never holds more of a manifest than this.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;

/// The `[oci]` table: where pulled components are cached, how large one may be, and each
/// registry's transport, credentials and tag rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OciConfig {
    /// The largest component a pull accepts, in MiB. Default: 64.
    #[serde(default = "default_max_blob_mib")]
    pub max_blob_mib: u64,
    /// The longest one push or pull may take, in seconds, from its first request to its last
    /// byte: a registry that answers slowly (a byte every few seconds passes any per-read
    /// timeout) is cut off there and counts as unreachable. Default: 120, a 64 MiB component
    /// at about 0.5 MiB/s.
    #[serde(default = "default_deadline_seconds")]
    pub deadline_seconds: u64,
    /// Where pulled components are kept by digest. Default: `oci` under the `[cache]`
    /// directory.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// How often `serve` resolves the tags it loaded from again, in seconds, and installs
    /// what a tag moved to (verified as at start; a refused one leaves the serving version).
    /// Default: 0, never (a tag is resolved at start and on SIGHUP only).
    #[serde(default)]
    pub watch_seconds: u64,
    /// Registries that need more than the defaults (https with the system's roots, anonymous,
    /// digests only).
    #[serde(default, rename = "registry")]
    pub registries: Vec<RegistryConfig>,
}

impl Default for OciConfig {
    fn default() -> Self {
        Self {
            max_blob_mib: default_max_blob_mib(),
            deadline_seconds: default_deadline_seconds(),
            cache_dir: None,
            watch_seconds: 0,
            registries: Vec::new(),
        }
    }
}

fn default_max_blob_mib() -> u64 {
    64
}

fn default_deadline_seconds() -> u64 {
    120
}

/// One `[[oci.registry]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// The registry as references name it: `registry.example.com`, `127.0.0.1:5000`.
    pub host: String,
    /// Speak plain http. Default: true for a loopback host without `ca_file`, else false.
    #[serde(default)]
    pub plain_http: Option<bool>,
    /// A PEM file of CA certificates trusted for this registry, besides the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The user name for basic auth (or for the token flow's credentials).
    #[serde(default)]
    pub username: Option<String>,
    /// The environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// The file holding the password (one line; a trailing newline is ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Whether `serve` and the admin API may load from a tag (resolved to a digest when it
    /// loads). Default: false, only `@sha256:` references.
    #[serde(default)]
    pub allow_tags: bool,
}

impl RegistryConfig {
    fn anonymous(host: &str) -> Self {
        Self {
            host: host.to_owned(),
            plain_http: None,
            ca_file: None,
            username: None,
            password_env: None,
            password_file: None,
            allow_tags: false,
        }
    }

    fn plain_http(&self) -> bool {
        self.plain_http
            .unwrap_or_else(|| self.ca_file.is_none() && is_loopback(&self.host))
    }

    fn auth(&self) -> Result<RegistryAuth, OciError> {
        let Some(username) = &self.username else {
            if self.password_env.is_some() || self.password_file.is_some() {
                return Err(self.invalid("a password needs `username`"));
            }
            return Ok(RegistryAuth::Anonymous);
        };
        let password = match (&self.password_env, &self.password_file) {
            (Some(var), None) => std::env::var(var).map_err(|_| {
                self.invalid(format!(
                    "`password_env`: the environment variable `{var}` is not set"
                ))
            })?,
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| {
                    self.invalid(format!(
                        "`password_file`: cannot read {}: {e}",
                        path.display()
                    ))
                })?
                .trim_end_matches(['\r', '\n'])
                .to_owned(),
            (None, None) => {
                return Err(self.invalid("`username` needs `password_env` or `password_file`"));
            }
            (Some(_), Some(_)) => {
                return Err(self.invalid("give `password_env` or `password_file`, not both"));
            }
        };
        Ok(RegistryAuth::Basic(username.clone(), password))
    }

    fn invalid(&self, message: impl fmt::Display) -> OciError {
        OciError::Config(format!("`[[oci.registry]]` `{}`: {message}", self.host))
    }
}

fn is_loopback(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]:5000`, `127.0.0.1:5000`, `localhost:5000`; a bare IPv6 address has more colons.
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A reference to a component in a registry: `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef(Reference);

impl OciRef {
    /// Whether `text` is meant as an OCI reference (starts with `oci://`).
    pub fn is_oci(text: &str) -> bool {
        text.starts_with("oci://")
    }

    /// The registry host (with its port, if any).
    pub fn registry(&self) -> &str {
        self.0.registry()
    }

    /// The repository, e.g. `acme/orders`.
    pub fn repository(&self) -> &str {
        self.0.repository()
    }

    /// The digest it is pinned to, if any.
    pub fn digest(&self) -> Option<&str> {
        self.0.digest()
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.0.tag()
    }

    /// The same repository pinned to `digest` (no tag).
    pub fn pinned(&self, digest: &str) -> Self {
        Self(Reference::with_digest(
            self.0.registry().to_owned(),
            self.0.repository().to_owned(),
            digest.to_owned(),
        ))
    }
}

impl FromStr for OciRef {
    type Err = OciError;

    fn from_str(text: &str) -> Result<Self, OciError> {
        let bad = |why: &str| OciError::Reference {
            reference: text.to_owned(),
            why: why.to_owned(),
        };
        let rest = text
            .strip_prefix("oci://")
            .ok_or_else(|| bad("expected oci://REGISTRY/REPOSITORY:TAG or ...@sha256:DIGEST"))?;
        // The registry is named, never implied: `oci://acme/tool` must not mean Docker Hub.
        let host = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !(host.contains('.') || host.contains(':') || host == "localhost")
        {
            return Err(bad(
                "name the registry host first, e.g. oci://registry.example.com/acme/orders:1.0",
            ));
        }
        let reference: Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
        if let Some(digest) = reference.digest()
            && !digest
                .strip_prefix("sha256:")
                .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(bad("a digest is sha256: and 64 hex digits"));
        }
        Ok(Self(reference))
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.0.registry(), self.0.repository())?;
        match (self.0.tag(), self.0.digest()) {
            (_, Some(digest)) => write!(f, "@{digest}"),
            (Some(tag), None) => write!(f, ":{tag}"),
            (None, None) => Ok(()),
        }
    }
}

/// Whether a pull may resolve a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tags {
    /// Any tag (`gatehouse pull`, which prints the digest to pin).
    Resolve,
    /// Only where the registry's `allow_tags` says so (what `serve` and the admin API load).
    AsConfigured,
}

/// Why a push or pull failed. Each names the reference and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// Not an `oci://` reference this module can use.
    #[error("`{reference}` is not a usable OCI reference: {why}")]
    Reference {
        /// The text given.
        reference: String,
        /// What is wrong with it.
        why: String,
    },
    /// The `[oci]` table cannot be used.
    #[error("{0}")]
    Config(String),
    /// A tag where the config allows only digests.
    #[error(
        "{reference}: a tag, and `[[oci.registry]]` for `{registry}` does not set `allow_tags = true`; \
         pin it by digest (`gatehouse pull {reference}` prints it)"
    )]
    TagNotAllowed {
        /// The reference.
        reference: String,
        /// Its registry.
        registry: String,
    },
    /// The registry has no such tag or manifest.
    #[error("{reference}: not found in the registry")]
    NotFound {
        /// The reference.
        reference: String,
    },
    /// The registry refused the credentials (or wants some).
    #[error(
        "{reference}: the registry refused access ({detail}); check `[[oci.registry]]` username and password"
    )]
    Unauthorized {
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// Bytes that do not hash to the digest they were asked for.
    #[error("{reference}: digest mismatch: {detail}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// Expected and actual.
        detail: String,
    },
    /// The registry's answer is not an OCI image manifest (an HTML page, say).
    #[error("{reference}: the registry did not answer with an OCI manifest: {detail}")]
    NotAManifest {
        /// The reference.
        reference: String,
        /// What arrived.
        detail: String,
    },
    /// A manifest, but not of a WebAssembly component.
    #[error("{reference}: not a WebAssembly component artifact: {detail}")]
    NotWasm {
        /// The reference.
        reference: String,
        /// What the manifest holds.
        detail: String,
    },
    /// The component is larger than `[oci] max_blob_mib`, or the manifest than
    /// [`MAX_MANIFEST_BYTES`].
    #[error("{reference}: the {what} is {size} bytes, over {bound} ({max} bytes)")]
    TooLarge {
        /// The reference.
        reference: String,
        /// `component` or `manifest`.
        what: &'static str,
        /// Its size, as declared or as far as it was read.
        size: u64,
        /// The bound.
        max: u64,
        /// Where the bound is set, e.g. `` `[oci] max_blob_mib` ``.
        bound: &'static str,
    },
    /// The registry cannot be reached, and the cache does not have the reference.
    #[error("{reference}: cannot reach the registry: {detail}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// The connection error.
        detail: String,
    },
    /// Anything else the registry answered.
    #[error("{reference}: {detail}")]
    Registry {
        /// The reference.
        reference: String,
        /// The error.
        detail: String,
    },
    /// The cache directory cannot be written.
    #[error("the OCI cache {path}: {source}")]
    Cache {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A component pulled from a registry (or from the cache).
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The signed component.
    pub bytes: Vec<u8>,
    /// The reference pinned to the manifest's digest: what the audit records cite.
    pub pinned: OciRef,
    /// Whether it came from the cache without the registry's say (a pinned reference already
    /// pulled, or a tag whose registry could not be reached).
    pub from_cache: bool,
}

/// What the cache keeps next to a component: its layer digest, checked on every read.
#[derive(Debug, Serialize, Deserialize)]
struct CacheEntry {
    layer: String,
}

/// The registries of one config: pushes and pulls with their transport, credentials, bounds
/// and cache.
#[derive(Debug, Clone)]
pub struct Registries {
    config: OciConfig,
    cache: PathBuf,
}

impl Registries {
    /// The registries `config` describes; `default_cache` is the `[cache]` directory, under
    /// which pulled components go unless `cache_dir` says otherwise.
    pub fn new(config: &OciConfig, default_cache: &Path) -> Self {
        Self {
            cache: config
                .cache_dir
                .clone()
                .unwrap_or_else(|| default_cache.join("oci")),
            config: config.clone(),
        }
    }

    fn registry(&self, host: &str) -> RegistryConfig {
        (self.config.registries.iter())
            .find(|r| r.host == host)
            .cloned()
            .unwrap_or_else(|| RegistryConfig::anonymous(host))
    }

    fn max_bytes(&self) -> u64 {
        self.config.max_blob_mib.saturating_mul(1024 * 1024)
    }

    /// `operation` (a whole push or pull of `reference`), cut off at `[oci] deadline_seconds`
    /// as [`OciError::Unreachable`].
    async fn within_deadline<T>(
        &self,
        reference: &OciRef,
        operation: impl Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        let seconds = self.config.deadline_seconds;
        tokio::time::timeout(Duration::from_secs(seconds), operation)
            .await
            .unwrap_or_else(|_elapsed| {
                Err(OciError::Unreachable {
                    reference: reference.to_string(),
                    detail: format!(
                        "no complete answer within {seconds} s (`[oci] deadline_seconds`)"
                    ),
                })
            })
    }

    /// An HTTP client for `registry` as oci-client builds its own: the same roots (the
    /// system's plus `ca_file`), timeouts and user agent.
    fn http(&self, registry: &RegistryConfig) -> Result<reqwest::Client, OciError> {
        let mut certificates = Vec::new();
        if let Some(path) = &registry.ca_file {
            let data = std::fs::read(path).map_err(|e| {
                registry.invalid(format!("`ca_file`: cannot read {}: {e}", path.display()))
            })?;
            certificates = reqwest::Certificate::from_pem_bundle(&data)
                .map_err(|e| registry.invalid(format!("`ca_file` {}: {e}", path.display())))?;
        }
        reqwest::Client::builder()
            .tls_certs_merge(certificates)
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| registry.invalid(format!("cannot build the registry client: {e}")))
    }

    /// GETs the manifest `reference` names with `client`'s credentials for it, reading at
    /// most [`MAX_MANIFEST_BYTES`]: its bytes, and the digest the registry says they have
    /// (`Docker-Content-Digest`, else their own).
    async fn manifest(
        &self,
        client: &Client,
        auth: &RegistryAuth,
        registry: &RegistryConfig,
        reference: &OciRef,
    ) -> Result<(Vec<u8>, String), OciError> {
        let token = (client.auth(&reference.0, auth, RegistryOperation::Pull))
            .await
            .map_err(|e| classify(reference, e))?;
        let scheme = if registry.plain_http() {
            "http"
        } else {
            "https"
        };
        let target = (reference.digest().or(reference.tag())).unwrap_or("latest");
        let url = format!(
            "{scheme}://{}/v2/{}/manifests/{target}",
            reference.registry(),
            reference.repository()
        );
        let mut request =
            (self.http(registry)?.get(&url)).header(http::header::ACCEPT, OCI_IMAGE_MEDIA_TYPE);
        request = match (token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, _) => request,
        };
        let failed = |e: reqwest::Error| {
            let detail = error_chain(&e);
            if e.is_connect() || e.is_timeout() {
                OciError::Unreachable {
                    reference: reference.to_string(),
                    detail,
                }
            } else {
                OciError::Registry {
                    reference: reference.to_string(),
                    detail,
                }
            }
        };
        let mut response = request.send().await.map_err(failed)?;
        let too_large = |size: u64| OciError::TooLarge {
            reference: reference.to_string(),
            what: "manifest",
            size,
            max: MAX_MANIFEST_BYTES,
            bound: "the most a manifest may have",
        };
        if let Some(declared) = response
            .content_length()
            .filter(|n| *n > MAX_MANIFEST_BYTES)
        {
            return Err(too_large(declared));
        }
        let status = response.status();
        let digest = (response.headers().get("docker-content-digest"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            let size = (body.len() + chunk.len()) as u64;
            if size > MAX_MANIFEST_BYTES {
                return Err(too_large(size));
            }
            body.extend_from_slice(&chunk);
        }
        match status.as_u16() {
            200..=299 => {}
            404 => {
                return Err(OciError::NotFound {
                    reference: reference.to_string(),
                });
            }
            401 | 403 => {
                return Err(OciError::Unauthorized {
                    reference: reference.to_string(),
                    detail: format!("HTTP {status}: {}", preview(&body)),
                });
            }
            _ => {
                return Err(OciError::Registry {
                    reference: reference.to_string(),
                    detail: format!("HTTP {status}: {}", preview(&body)),
                });
            }
        }
        let digest = digest.unwrap_or_else(|| sha256(&body));
        Ok((body, digest))
    }

    fn client(&self, registry: &RegistryConfig) -> Result<(Client, RegistryAuth), OciError> {
        crate::egress::install_default_provider();
        let mut extra_root_certificates = Vec::new();
        if let Some(path) = &registry.ca_file {
            let data = std::fs::read(path).map_err(|e| {
                registry.invalid(format!("`ca_file`: cannot read {}: {e}", path.display()))
            })?;
            extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        let config = ClientConfig {
            protocol: if registry.plain_http() {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates,
            // An index would choose among platforms; a component has one.
            platform_resolver: None,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: USER_AGENT,
            ..ClientConfig::default()
        };
        let client = Client::try_from(config)
            .map_err(|e| registry.invalid(format!("cannot build the registry client: {e}")))?;
        Ok((client, registry.auth()?))
    }

    /// Publishes `component` (a signed component) as a wasm artifact at `reference`, which
    /// names a tag. Returns the manifest's digest.
    pub async fn push(
        &self,
        reference: &OciRef,
        component: Vec<u8>,
        annotations: BTreeMap<String, String>,
    ) -> Result<String, OciError> {
        if reference.digest().is_some() || reference.tag().is_none() {
            return Err(OciError::Reference {
                reference: reference.to_string(),
                why: "a push names a tag, e.g. oci://registry.example.com/acme/orders:1.0".into(),
            });
        }
        self.within_deadline(reference, self.push_now(reference, component, annotations))
            .await
    }

    async fn push_now(
        &self,
        reference: &OciRef,
        component: Vec<u8>,
        annotations: BTreeMap<String, String>,
    ) -> Result<String, OciError> {
        let (client, auth) = self.client(&self.registry(reference.registry()))?;
        let failed = |e| classify(reference, e);
        let layers = vec![ImageLayer::new(
            component,
            WASM_LAYER_MEDIA_TYPE.into(),
            None,
        )];
        // The CNCF config: what the artifact is, and its layer's digest.
        let config = serde_json::json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layers[0].sha256_digest()],
        });
        let config = Config::new(
            serde_json::to_vec(&config).expect("the config serializes"),
            WASM_CONFIG_MEDIA_TYPE.into(),
            None,
        );
        let mut manifest = OciImageManifest::build(&layers, &config, Some(annotations));
        manifest.artifact_type = Some(WASM_CONFIG_MEDIA_TYPE.into());
        // The manifest is sent as these bytes, so its digest is theirs.
        let raw = serde_json::to_vec(&manifest).expect("the manifest serializes");
        let digest = sha256(&raw);
        client
            .store_auth_if_needed(reference.registry(), &auth)
            .await;
        let layer = &layers[0];
        (client.push_blob(&reference.0, layer.data.clone(), &manifest.layers[0].digest))
            .await
            .map_err(failed)?;
        (client.push_blob(&reference.0, config.data, &manifest.config.digest))
            .await
            .map_err(failed)?;
        let content_type = http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE);
        (client.push_manifest_raw(&reference.0, raw, content_type))
            .await
            .map_err(failed)?;
        Ok(digest)
    }

    /// Fetches the component `reference` names. A pinned reference already in the cache is
    /// not fetched again. A tag is resolved to its manifest's digest (if `tags` allows), and,
    /// when the registry cannot be reached, to the digest it last resolved to, from the cache.
    pub async fn pull(&self, reference: &OciRef, tags: Tags) -> Result<Pulled, OciError> {
        let registry = self.registry(reference.registry());
        if reference.digest().is_none() && tags == Tags::AsConfigured && !registry.allow_tags {
            return Err(OciError::TagNotAllowed {
                reference: reference.to_string(),
                registry: registry.host.clone(),
            });
        }
        if let Some(digest) = reference.digest()
            && let Some(bytes) = self.cached(digest)
        {
            return Ok(Pulled {
                bytes,
                pinned: reference.clone(),
                from_cache: true,
            });
        }
        let fetched = self
            .within_deadline(reference, async {
                let (client, auth) = self.client(&registry)?;
                self.fetch(&client, &auth, &registry, reference).await
            })
            .await;
        match fetched {
            Ok(pulled) => {
                if reference.digest().is_none() {
                    self.remember_tag(reference, pulled.pinned.digest().unwrap_or_default())?;
                }
                Ok(pulled)
            }
            Err(OciError::Unreachable {
                reference: r,
                detail,
            }) => {
                // A tag the cache resolved before, from its last resolution.
                let cached = (reference.digest().is_none())
                    .then(|| self.tag_digest(reference))
                    .flatten()
                    .and_then(|digest| Some((self.cached(&digest)?, digest)));
                match cached {
                    Some((bytes, digest)) => {
                        tracing::warn!(reference = %reference, %digest, error = %detail, "registry unreachable; serving the digest this tag last resolved to, from the cache");
                        Ok(Pulled {
                            bytes,
                            pinned: reference.pinned(&digest),
                            from_cache: true,
                        })
                    }
                    None => Err(OciError::Unreachable {
                        reference: r,
                        detail,
                    }),
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn fetch(
        &self,
        client: &Client,
        auth: &RegistryAuth,
        registry: &RegistryConfig,
        reference: &OciRef,
    ) -> Result<Pulled, OciError> {
        let image = &reference.0;
        // The raw manifest, read against its bound, so its digest is computed here from the
        // bytes that arrived.
        let (raw, digest) = self.manifest(client, auth, registry, reference).await?;
        let actual = sha256(&raw);
        if let Some(pinned) = reference.digest().filter(|pinned| *pinned != actual) {
            return Err(OciError::DigestMismatch {
                reference: reference.to_string(),
                detail: format!("the manifest hashes to {actual}, not {pinned}"),
            });
        }
        if digest != actual {
            return Err(OciError::DigestMismatch {
                reference: reference.to_string(),
                detail: format!("the registry says {digest}, the manifest hashes to {actual}"),
            });
        }
        let manifest: OciImageManifest =
            serde_json::from_slice(&raw).map_err(|e| OciError::NotAManifest {
                reference: reference.to_string(),
                detail: format!("{e} (starts with {:?})", preview(&raw)),
            })?;
        let not_wasm = |detail: String| OciError::NotWasm {
            reference: reference.to_string(),
            detail,
        };
        let config_type = manifest.config.media_type.as_str();
        if config_type != WASM_CONFIG_MEDIA_TYPE && config_type != LEGACY_CONFIG_MEDIA_TYPE {
            return Err(not_wasm(format!(
                "its config is `{config_type}`, expected `{WASM_CONFIG_MEDIA_TYPE}`"
            )));
        }
        let [layer] = manifest.layers.as_slice() else {
            return Err(not_wasm(format!(
                "{} layers, expected one component",
                manifest.layers.len()
            )));
        };
        if layer.media_type != WASM_LAYER_MEDIA_TYPE && layer.media_type != LEGACY_LAYER_MEDIA_TYPE
        {
            return Err(not_wasm(format!(
                "its layer is `{}`, expected `{WASM_LAYER_MEDIA_TYPE}`",
                layer.media_type
            )));
        }
        let max = self.max_bytes();
        let too_large = |size: u64| OciError::TooLarge {
            reference: reference.to_string(),
            what: "component",
            size,
            max,
            bound: "`[oci] max_blob_mib`",
        };
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if declared > max {
            return Err(too_large(declared));
        }
        // A tag that still names a component already pulled: its bytes are here.
        if let Some(bytes) = self.cached(&actual) {
            return Ok(Pulled {
                bytes,
                pinned: reference.pinned(&actual),
                from_cache: false,
            });
        }
        let mut out = Bounded {
            bytes: Vec::with_capacity(usize::try_from(declared).unwrap_or(0)),
            max,
        };
        // The client checks the bytes against the layer's digest.
        client
            .pull_blob(image, layer, &mut out)
            .await
            .map_err(|e| match e {
                OciDistributionError::IoError(io)
                    if io.kind() == std::io::ErrorKind::FileTooLarge =>
                {
                    too_large(max + 1)
                }
                e => classify(reference, e),
            })?;
        self.store(&actual, &layer.digest, &out.bytes)?;
        Ok(Pulled {
            bytes: out.bytes,
            pinned: reference.pinned(&actual),
            from_cache: false,
        })
    }

    /// Blocks on [`Registries::pull`]: on the caller's runtime if it is in one (a blocking
    /// task), else on a runtime of its own.
    pub fn pull_blocking(&self, reference: &OciRef, tags: Tags) -> Result<Pulled, OciError> {
        block_on(self.pull(reference, tags))
    }

    /// Blocks on [`Registries::push`], as [`Registries::pull_blocking`] does.
    pub fn push_blocking(
        &self,
        reference: &OciRef,
        component: Vec<u8>,
        annotations: BTreeMap<String, String>,
    ) -> Result<String, OciError> {
        block_on(self.push(reference, component, annotations))
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.cache.join("sha256").join(hex))
    }

    /// The cached component of manifest `digest`, if it is there and still hashes to its
    /// layer digest.
    fn cached(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(digest)?;
        let entry: CacheEntry =
            serde_json::from_slice(&std::fs::read(path.with_extension("json")).ok()?).ok()?;
        let bytes = std::fs::read(&path).ok()?;
        if sha256(&bytes) != entry.layer {
            tracing::warn!(path = %path.display(), "a cached component does not match its digest; fetching it again");
            return None;
        }
        Some(bytes)
    }

    fn store(&self, digest: &str, layer: &str, bytes: &[u8]) -> Result<(), OciError> {
        let Some(path) = self.blob_path(digest) else {
            return Ok(());
        };
        write_atomically(&path, bytes)?;
        let entry = serde_json::to_vec(&CacheEntry {
            layer: layer.to_owned(),
        })
        .expect("the entry serializes");
        write_atomically(&path.with_extension("json"), &entry)
    }

    fn tag_path(&self, reference: &OciRef) -> Option<PathBuf> {
        // Registry, repository and tag are restricted to names that are safe path parts
        // (the reference grammar has no `..` component and no leading `/`).
        Some(
            self.cache
                .join("tags")
                .join(reference.registry())
                .join(reference.0.repository())
                .join(reference.tag()?),
        )
    }

    fn remember_tag(&self, reference: &OciRef, digest: &str) -> Result<(), OciError> {
        match self.tag_path(reference) {
            Some(path) => write_atomically(&path, digest.as_bytes()),
            None => Ok(()),
        }
    }

    fn tag_digest(&self, reference: &OciRef) -> Option<String> {
        let text = std::fs::read_to_string(self.tag_path(reference)?).ok()?;
        Some(text.trim().to_owned())
    }
}

/// Runs `future` to completion from synchronous code.
fn block_on<F: Future>(future: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.block_on(future),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime starts")
            .block_on(future),
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let error = |source| OciError::Cache {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(error)?;
    crate::atomic_file::write(path, &[bytes]).map_err(error)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The start of a body that is not what was expected, for the error message.
fn preview(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).into_owned()
}

/// Sorts the client's errors into the ones an operator acts on differently.
fn classify(reference: &OciRef, error: OciDistributionError) -> OciError {
    let reference_text = reference.to_string();
    let has = |envelope: &oci_client::errors::OciEnvelope, wanted: &[OciErrorCode]| {
        (envelope.errors.iter()).any(|e| wanted.contains(&e.code))
    };
    match error {
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
            OciError::Unreachable {
                reference: reference_text,
                detail: error_chain(&e),
            }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => OciError::NotFound {
            reference: reference_text,
        },
        OciDistributionError::RegistryError { ref envelope, .. }
            if has(
                envelope,
                &[
                    OciErrorCode::ManifestUnknown,
                    OciErrorCode::NameUnknown,
                    OciErrorCode::NotFound,
                    OciErrorCode::BlobUnknown,
                ],
            ) =>
        {
            OciError::NotFound {
                reference: reference_text,
            }
        }
        OciDistributionError::RegistryError { ref envelope, .. }
            if has(
                envelope,
                &[OciErrorCode::Unauthorized, OciErrorCode::Denied],
            ) =>
        {
            OciError::Unauthorized {
                reference: reference_text,
                detail: envelope.to_string(),
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => OciError::NotFound {
            reference: reference_text,
        },
        e @ (OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::ServerError {
            code: 401 | 403, ..
        }) => OciError::Unauthorized {
            reference: reference_text,
            detail: e.to_string(),
        },
        OciDistributionError::DigestError(e) => OciError::DigestMismatch {
            reference: reference_text,
            detail: e.to_string(),
        },
        e @ (OciDistributionError::ManifestParsingError(_)
        | OciDistributionError::VersionedParsingError(_)
        | OciDistributionError::JsonError(_)
        | OciDistributionError::UnsupportedMediaTypeError(_)
        | OciDistributionError::ManifestEncodingError(_)) => OciError::NotAManifest {
            reference: reference_text,
            detail: e.to_string(),
        },
        OciDistributionError::RequestError(e) => OciError::Registry {
            reference: reference_text,
            detail: error_chain(&e),
        },
        e => OciError::Registry {
            reference: reference_text,
            detail: e.to_string(),
        },
    }
}

/// An error and its sources on one line (reqwest's top-level message alone says little).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// A buffer that refuses to grow past `max` bytes: a registry cannot make a pull hold more
/// than the bound, whatever size it declared.
struct Bounded {
    bytes: Vec<u8>,
    max: u64,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if (self.bytes.len() + buf.len()) as u64 > self.max {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "the component is over the size bound",
            )));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_registry_and_pin_by_sha256() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let pinned: OciRef = format!("oci://127.0.0.1:5000/acme/orders@{digest}")
            .parse()
            .unwrap();
        assert_eq!(pinned.registry(), "127.0.0.1:5000");
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        assert_eq!(
            pinned.to_string(),
            format!("oci://127.0.0.1:5000/acme/orders@{digest}")
        );
        let tagged: OciRef = "oci://registry.example.com/acme/orders:1.2"
            .parse()
            .unwrap();
        assert_eq!(tagged.tag(), Some("1.2"));
        assert_eq!(
            tagged.pinned(&digest).to_string(),
            format!("oci://registry.example.com/acme/orders@{digest}")
        );
        for bad in [
            "acme/orders:1.0",
            "oci://acme/orders:1.0",
            "oci://registry.example.com",
            "oci://registry.example.com/acme/orders@sha256:abc",
            "oci://registry.example.com/Acme/orders",
        ] {
            let error = bad.parse::<OciRef>().unwrap_err();
            assert!(
                matches!(error, OciError::Reference { .. }),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn plain_http_is_for_loopback_unless_the_config_says_so() {
        for (host, plain) in [
            ("127.0.0.1:5000", true),
            ("localhost:5000", true),
            ("[::1]:5000", true),
            ("registry.example.com", false),
            ("10.0.0.1:5000", false),
        ] {
            assert_eq!(
                RegistryConfig::anonymous(host).plain_http(),
                plain,
                "{host}"
            );
        }
        let mut tls = RegistryConfig::anonymous("127.0.0.1:5000");
        tls.ca_file = Some("ca.pem".into());
        assert!(!tls.plain_http());
        let mut said = RegistryConfig::anonymous("registry.internal:5000");
        said.plain_http = Some(true);
        assert!(said.plain_http());
    }

    #[test]
    fn credentials_come_from_the_environment_or_a_file_never_half_given() {
        let mut registry = RegistryConfig::anonymous("registry.example.com");
        assert!(matches!(registry.auth(), Ok(RegistryAuth::Anonymous)));
        registry.username = Some("ci".into());
        let error = registry.auth().unwrap_err().to_string();
        assert!(
            error.contains("`username` needs `password_env` or `password_file`"),
            "{error}"
        );
        registry.password_env = Some("GATEHOUSE_TEST_UNSET_PASSWORD".into());
        let error = registry.auth().unwrap_err().to_string();
        assert!(
            error.contains("`GATEHOUSE_TEST_UNSET_PASSWORD` is not set"),
            "{error}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\n").unwrap();
        registry.password_env = None;
        registry.password_file = Some(file);
        match registry.auth().unwrap() {
            RegistryAuth::Basic(user, password) => {
                assert_eq!((user.as_str(), password.as_str()), ("ci", "s3cret"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cached_component_that_no_longer_matches_its_digest_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let config = OciConfig {
            cache_dir: Some(dir.path().to_owned()),
            ..OciConfig::default()
        };
        let registries = Registries::new(&config, dir.path());
        let digest = format!("sha256:{}", "cd".repeat(32));
        registries
            .store(&digest, &sha256(b"component"), b"component")
            .unwrap();
        assert_eq!(
            registries.cached(&digest).as_deref(),
            Some(&b"component"[..])
        );
        std::fs::write(registries.blob_path(&digest).unwrap(), b"tampered").unwrap();
        assert_eq!(registries.cached(&digest), None);
    }
}
