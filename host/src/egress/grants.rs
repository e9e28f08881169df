//! The operator's `[egress]` config, and the grants one adapter ends up with.
//!
//! 1. **Config** ([`EgressConfig`]): allowed special-purpose address ranges, per-call budgets,
//!    and `[[egress.grant]]` entries naming an adapter, a destination pattern, methods and
//!    credential bindings.
//! 2. **Load** ([`Grants::for_adapter`], once per adapter): every grant for the adapter is
//!    parsed into a typed [`Rule`] and intersected with the manifest's egress requests. A
//!    grant the manifest did not request (destination, method or credential slot) is an
//!    **error**, not silently ignored: it means the operator reviewed a different manifest.
//!    Credentials are read here, from an environment variable or a file, so a missing secret
//!    fails the load instead of a call.
//! 3. **Call**: the gate matches each request against the rules in config order; the first
//!    rule whose destination and methods match is used, with its credentials.
//!
//! ```toml
//! [egress]
//! allow_private = ["127.0.0.0/8"]      # default: none
//! extra_root_certificates = ["/etc/gatehouse/internal-ca.pem"]   # default: none
//! max_requests = 16                    # per call
//!
//! [[egress.grant]]
//! adapter = "gatehouse.rest"
//! url = "http://127.0.0.1:8080/api/"
//! methods = ["GET", "POST"]
//! credentials = { api_token = { env = "REST_TOKEN", header = "authorization", scheme = "Bearer" } }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::addr::AddressPolicy;
use super::rules::{self, MethodName, PatternError, UrlPattern};
use super::transport::TlsClient;
use crate::plugin::manifest::EgressRequest;

/// The `[egress]` table of the operator config. The defaults deny: no grants, no private
/// addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// Special-purpose address ranges (loopback, private, link-local, metadata...) adapters
    /// may connect to, as CIDR, e.g. `["127.0.0.0/8", "10.20.0.0/16"]`. Default: none, so
    /// resolved addresses must be public.
    #[serde(default)]
    pub allow_private: Vec<IpNet>,
    /// Outbound requests allowed per call. Default: 16.
    #[serde(default = "defaults::max_requests")]
    pub max_requests: u32,
    /// Request body bytes allowed per call, over all requests. Default: 1 MiB.
    #[serde(default = "defaults::max_request_bytes")]
    pub max_request_bytes: u64,
    /// Response body bytes allowed per call, over all requests. Default: 8 MiB.
    #[serde(default = "defaults::max_response_bytes")]
    pub max_response_bytes: u64,
    /// Wall-clock time for all egress of one call, from the call's start, in milliseconds.
    /// Default: 4000 (under the sandbox's default 5000 ms call deadline, so an adapter gets a
    /// typed error in time to report it).
    #[serde(default = "defaults::max_total_ms")]
    pub max_total_ms: u64,
    /// Whether `https` upstreams may present certificates issued by the system's root CAs
    /// (the platform trust store; `SSL_CERT_FILE`/`SSL_CERT_DIR` override it). Default: true.
    #[serde(default = "defaults::system_root_certificates")]
    pub system_root_certificates: bool,
    /// PEM files of further root CAs to trust for `https` upstreams, e.g. a private CA.
    /// Default: none. A file that is missing or holds no certificate fails the host's start.
    #[serde(default)]
    pub extra_root_certificates: Vec<PathBuf>,
    /// What each adapter may reach. Default: nothing.
    #[serde(default, rename = "grant")]
    pub grants: Vec<GrantConfig>,
}

mod defaults {
    pub fn max_requests() -> u32 {
        16
    }
    pub fn max_request_bytes() -> u64 {
        1024 * 1024
    }
    pub fn max_response_bytes() -> u64 {
        8 * 1024 * 1024
    }
    pub fn max_total_ms() -> u64 {
        4_000
    }
    pub fn system_root_certificates() -> bool {
        true
    }
}

impl Default for EgressConfig {
    fn default() -> Self {
        Self {
            allow_private: Vec::new(),
            max_requests: defaults::max_requests(),
            max_request_bytes: defaults::max_request_bytes(),
            max_response_bytes: defaults::max_response_bytes(),
            max_total_ms: defaults::max_total_ms(),
            system_root_certificates: defaults::system_root_certificates(),
            extra_root_certificates: Vec::new(),
            grants: Vec::new(),
        }
    }
}

/// One `[[egress.grant]]`: a destination an adapter may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantConfig {
    /// The adapter id, exactly, e.g. `gatehouse.rest`.
    pub adapter: String,
    /// `scheme://host[:port][/path-prefix]`; must lie within a URL the manifest requested.
    pub url: String,
    /// Methods allowed there; each must be one the manifest requested for that URL.
    pub methods: Vec<String>,
    /// Credential bindings by slot name; each slot must be one the manifest requested.
    #[serde(default)]
    pub credentials: BTreeMap<String, CredentialConfig>,
}

/// Where a credential comes from and how it is sent. Exactly one of `env` and `file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialConfig {
    /// Environment variable of the host process holding the secret.
    #[serde(default)]
    pub env: Option<String>,
    /// File holding the secret (surrounding whitespace is trimmed).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Header to send it in. Default: `authorization`.
    #[serde(default = "default_header")]
    pub header: String,
    /// Prefix written before the secret with one space, e.g. `Bearer`. Default: none.
    #[serde(default)]
    pub scheme: Option<String>,
}

fn default_header() -> String {
    "authorization".to_owned()
}

/// Why an adapter's grants cannot be built. Each names the grant and the fix.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// A pattern or method in the config or manifest does not parse.
    #[error("egress grant #{index} for `{adapter}`: {source}")]
    Pattern {
        /// The adapter.
        adapter: String,
        /// Position among the adapter's grants (0-based); for manifest requests, the request.
        index: usize,
        /// The parse error.
        source: PatternError,
    },
    /// The grant's URL is not within any URL the manifest requested.
    #[error(
        "egress grant `{url}` for `{adapter}` was not requested by its manifest (it requests: \
         {requested}); remove the grant or narrow it to a requested URL"
    )]
    NotRequested {
        /// The adapter.
        adapter: String,
        /// The grant's URL.
        url: String,
        /// What the manifest requests.
        requested: String,
    },
    /// A method or credential slot of the grant was not requested for its URL.
    #[error(
        "egress grant `{url}` for `{adapter}` grants {what} `{name}`, which its manifest does \
         not request there; remove it from the grant"
    )]
    Exceeds {
        /// The adapter.
        adapter: String,
        /// The grant's URL.
        url: String,
        /// `method` or `credential slot`.
        what: &'static str,
        /// The method or slot.
        name: String,
    },
    /// A credential binding is unusable.
    #[error("egress grant `{url}` for `{adapter}`, credential `{slot}`: {problem}")]
    Credential {
        /// The adapter.
        adapter: String,
        /// The grant's URL.
        url: String,
        /// The slot.
        slot: String,
        /// What is wrong and the fix (never the secret itself).
        problem: String,
    },
}

/// A secret header value. Its `Debug` output is redacted, and the value is marked sensitive
/// so HTTP tooling does not print it either.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(HeaderValue);

impl Secret {
    /// The header value to send.
    pub fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A credential bound to a slot, ready to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The slot name, e.g. `api_token`.
    pub slot: String,
    /// The header it is sent in.
    pub header: HeaderName,
    /// The value.
    pub value: Secret,
}

/// One granted destination: the intersection of a manifest request and an operator grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Where.
    pub url: UrlPattern,
    /// Which methods.
    pub methods: BTreeSet<MethodName>,
    /// Credentials injected on requests this rule matches.
    pub credentials: Vec<Credential>,
}

/// Everything one adapter may do on the network. Built at load, shared by its calls.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Granted destinations, in config order.
    pub rules: Vec<Rule>,
    /// Which special-purpose addresses may be connected to.
    pub addresses: AddressPolicy,
    /// Requests per call.
    pub max_requests: u32,
    /// Request body bytes per call.
    pub max_request_bytes: u64,
    /// Response body bytes per call.
    pub max_response_bytes: u64,
    /// Time for all egress of a call.
    pub max_total: Duration,
    /// The host's TLS client, for `https` rules.
    pub tls: TlsClient,
}

impl Grants {
    /// No rules: every request is denied.
    pub fn none() -> Self {
        Self::default()
    }

    /// Load phase: intersects the operator's grants for `adapter` with what its manifest
    /// requested, and reads the bound credentials. `tls` is the host's TLS client (built once
    /// from the same config with [`TlsClient::from_config`]).
    pub fn for_adapter(
        config: &EgressConfig,
        tls: &TlsClient,
        adapter: &str,
        requested: &[EgressRequest],
    ) -> Result<Self, GrantError> {
        let requests = requested
            .iter()
            .enumerate()
            .map(|(index, request)| {
                let pattern = |source| GrantError::Pattern {
                    adapter: adapter.to_owned(),
                    index,
                    source,
                };
                Ok((
                    UrlPattern::parse(&request.url).map_err(pattern)?,
                    rules::parse_methods(&request.methods).map_err(pattern)?,
                    request.credentials.iter().cloned().collect::<BTreeSet<_>>(),
                ))
            })
            .collect::<Result<Vec<_>, GrantError>>()?;
        let rules = config
            .grants
            .iter()
            .filter(|grant| grant.adapter == adapter)
            .enumerate()
            .map(|(index, grant)| {
                let pattern = |source| GrantError::Pattern {
                    adapter: adapter.to_owned(),
                    index,
                    source,
                };
                let url = UrlPattern::parse(&grant.url).map_err(pattern)?;
                let methods = rules::parse_methods(&grant.methods).map_err(pattern)?;
                let covering: Vec<_> = requests.iter().filter(|(r, ..)| r.covers(&url)).collect();
                if covering.is_empty() {
                    return Err(GrantError::NotRequested {
                        adapter: adapter.to_owned(),
                        url: grant.url.clone(),
                        requested: requested_list(requested),
                    });
                }
                let exceeds = |what, name: String| GrantError::Exceeds {
                    adapter: adapter.to_owned(),
                    url: grant.url.clone(),
                    what,
                    name,
                };
                if let Some(method) = methods
                    .iter()
                    .find(|m| !covering.iter().any(|(_, ms, _)| ms.contains(*m)))
                {
                    return Err(exceeds("method", method.0.to_string()));
                }
                if let Some(slot) = grant
                    .credentials
                    .keys()
                    .find(|s| !covering.iter().any(|(_, _, slots)| slots.contains(*s)))
                {
                    return Err(exceeds("credential slot", slot.clone()));
                }
                let credentials = grant
                    .credentials
                    .iter()
                    .map(|(slot, binding)| {
                        load_credential(slot, binding).map_err(|problem| GrantError::Credential {
                            adapter: adapter.to_owned(),
                            url: grant.url.clone(),
                            slot: slot.clone(),
                            problem,
                        })
                    })
                    .collect::<Result<_, _>>()?;
                Ok(Rule {
                    url,
                    methods,
                    credentials,
                })
            })
            .collect::<Result<Vec<_>, GrantError>>()?;
        Ok(Self {
            rules,
            addresses: AddressPolicy::new(config.allow_private.clone()),
            max_requests: config.max_requests,
            max_request_bytes: config.max_request_bytes,
            max_response_bytes: config.max_response_bytes,
            max_total: Duration::from_millis(config.max_total_ms),
            tls: tls.clone(),
        })
    }

    /// Every header some rule injects a credential in: the gate strips these from whatever
    /// the guest sent.
    pub fn credential_headers(&self) -> impl Iterator<Item = &HeaderName> {
        self.rules
            .iter()
            .flat_map(|rule| rule.credentials.iter().map(|c| &c.header))
    }
}

fn requested_list(requested: &[EgressRequest]) -> String {
    if requested.is_empty() {
        return "nothing".to_owned();
    }
    requested
        .iter()
        .map(|r| format!("{} {:?}", r.url, r.methods))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a credential. Errors name the variable or file, never the value.
fn load_credential(slot: &str, binding: &CredentialConfig) -> Result<Credential, String> {
    let secret = crate::config::read_secret(binding.env.as_deref(), binding.file.as_deref())?;
    let header = HeaderName::from_bytes(binding.header.as_bytes())
        .map_err(|_| format!("`{}` is not a valid header name", binding.header))?;
    let text = match &binding.scheme {
        Some(scheme) => format!("{scheme} {secret}"),
        None => secret,
    };
    let mut value = HeaderValue::from_str(&text)
        .map_err(|_| "the secret contains characters not allowed in a header value".to_owned())?;
    value.set_sensitive(true);
    Ok(Credential {
        slot: slot.to_owned(),
        header,
        value: Secret(value),
    })
}
