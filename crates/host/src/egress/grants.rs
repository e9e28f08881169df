//! The grants one adapter ends up with.
//!
//! 1. **Config** ([`EgressConfig`], see [`super::config`]): allowed special-purpose address
//!    ranges, per-call budgets, and `[[egress.grant]]` entries naming an adapter, a destination
//!    pattern, methods and credential bindings, all typed when the config is read.
//! 2. **Load** ([`Grants::for_adapter`], once per adapter): every grant for the adapter is
//!    intersected with the manifest's egress requests into a [`Rule`]. A
//!    grant the manifest did not request (destination, method or credential slot) is an
//!    **error**, not silently ignored: it means the operator reviewed a different manifest.
//!    Credentials are read here, from an environment variable or a file, so a missing secret
//!    fails the load instead of a call.
//! 3. **Call**: the gate matches each request against the rules in config order; the first
//!    rule whose destination and methods match is used, with its credentials.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderName, HeaderValue};

use super::addr::AddressPolicy;
use super::call::InFlight;
use super::config::{CredentialConfig, EgressConfig};
use super::rules::{EgressRequest, MethodName, TUNNEL_METHODS, UrlPattern};
use super::tls::TlsClient;
use crate::stdio::StdioServer;

/// Why an adapter's grants cannot be built. Each names the grant and the fix.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
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
    /// A method in the grant's `read_methods` is not one of its `methods`.
    #[error(
        "egress grant `{url}` for `{adapter}` lists read method `{method}`, which is not one of \
         its `methods`; add it to `methods` or remove it from `read_methods`"
    )]
    ReadMethod {
        /// The adapter.
        adapter: String,
        /// The grant's URL.
        url: String,
        /// The method.
        method: String,
    },
    /// A header in the grant's `headers` is not a header name, or one the host owns.
    #[error("egress grant `{url}` for `{adapter}`, header `{header}`: {problem}")]
    Header {
        /// The adapter.
        adapter: String,
        /// The grant's URL.
        url: String,
        /// The header as written.
        header: String,
        /// What is wrong and the fix.
        problem: &'static str,
    },
}

/// A credential bound to a slot, ready to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The slot name, e.g. `api_token`.
    pub slot: String,
    /// The header it is sent in.
    pub header: HeaderName,
    /// Whose secret it is.
    pub source: CredentialSource,
}

/// Whose secret a credential sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// The operator's, read at load.
    Fixed {
        /// The value, marked sensitive (HTTP tooling and `Debug` never print it).
        value: HeaderValue,
        /// Where the secret starts in `value` (after the scheme and its space, if any).
        secret_at: usize,
    },
    /// The caller's own access token for this `[[oauth.provider]]`, which each call brings
    /// ([`super::CallInfo::user_tokens`]); a call that brings none sends none.
    Caller {
        /// The provider.
        provider: String,
        /// Written before the token with one space (`Bearer` unless the grant says).
        scheme: String,
    },
}

impl Credential {
    /// The operator's secret itself, without the scheme written before it: what an adapter's
    /// ask to its caller may not carry ([`crate::caller`]); none for a caller's own token
    /// (which the call's caller gate holds instead).
    pub fn secret(&self) -> Option<&[u8]> {
        match &self.source {
            CredentialSource::Fixed { value, secret_at } => Some(&value.as_bytes()[*secret_at..]),
            CredentialSource::Caller { .. } => None,
        }
    }

    /// The `[[oauth.provider]]` whose caller's token this sends, if it is one.
    pub fn provider(&self) -> Option<&str> {
        match &self.source {
            CredentialSource::Fixed { .. } => None,
            CredentialSource::Caller { provider, .. } => Some(provider),
        }
    }
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
    /// Which special-purpose addresses requests this rule matches may connect to.
    pub addresses: AddressPolicy,
    /// Guest headers passed upstream beyond [`STANDARD_HEADERS`].
    pub headers: Vec<HeaderName>,
    /// Non-safe methods that read here: `read_only` and `local_write` calls may use them.
    pub read_methods: BTreeSet<MethodName>,
    /// Whether requests here carry the call's delegation ([`crate::delegation`]).
    pub delegate: bool,
}

impl Rule {
    /// Whether the rule allows every method a tunnel can carry ([`TUNNEL_METHODS`]).
    pub fn allows_every_method(&self) -> bool {
        TUNNEL_METHODS
            .iter()
            .all(|m| self.methods.iter().any(|granted| granted.0.as_str() == *m))
    }
}

/// Guest request headers every rule passes upstream: content negotiation and conditional
/// requests, nothing that changes what an upstream does or who it thinks is asking.
pub const STANDARD_HEADERS: &[HeaderName] = &[
    http::header::ACCEPT,
    http::header::ACCEPT_LANGUAGE,
    http::header::CACHE_CONTROL,
    http::header::CONTENT_TYPE,
    http::header::IF_MATCH,
    http::header::IF_NONE_MATCH,
    http::header::IF_MODIFIED_SINCE,
    http::header::IF_UNMODIFIED_SINCE,
    http::header::USER_AGENT,
];

/// Headers the host sets or that frame the message: no grant may pass the guest's.
const HOST_OWNED_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "traceparent",
    "tracestate",
    "idempotency-key",
    crate::delegation::HEADER,
];

/// Everything one adapter may do on the network. Built at load, shared by its calls.
#[derive(Debug, Clone)]
pub struct Grants {
    /// Unique per built [`Grants`] (and kept by clones of it): the identity kept-alive upstream
    /// connections are keyed by, with the rule, so no connection is shared between adapters or
    /// between loads of one adapter, whose credentials may differ.
    id: u64,
    /// Granted destinations, in config order.
    pub rules: Vec<Rule>,
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
    /// The adapter's own stdio MCP server, the one `stdio://<adapter id>` reaches: set at
    /// load when its manifest has a `[stdio]` table and the operator granted it.
    pub stdio: Option<StdioServer>,
    /// The calls its stdio server is serving now, whose ledgers its egress proxy charges.
    pub(super) serving: Arc<InFlight>,
}

impl Default for Grants {
    /// No rules: every request is denied.
    fn default() -> Self {
        Self {
            id: next_id(),
            rules: Vec::new(),
            max_requests: 0,
            max_request_bytes: 0,
            max_response_bytes: 0,
            max_total: Duration::ZERO,
            tls: TlsClient::default(),
            stdio: None,
            serving: Arc::default(),
        }
    }
}

/// A fresh [`Grants::id`].
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Grants {
    /// No rules: every request is denied.
    pub fn none() -> Self {
        Self::default()
    }

    /// The identity of these grants, for keying kept-alive connections.
    pub(super) fn id(&self) -> u64 {
        self.id
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
        let rules = config
            .grants
            .iter()
            .filter(|grant| grant.adapter == adapter)
            .map(|grant| {
                let url = grant.url.as_written();
                let covering: Vec<&EgressRequest> = requested
                    .iter()
                    .filter(|r| r.url.covers(&grant.url))
                    .collect();
                if covering.is_empty() {
                    return Err(GrantError::NotRequested {
                        adapter: adapter.to_owned(),
                        url: url.to_owned(),
                        requested: requested_list(requested),
                    });
                }
                let exceeds = |what, name: String| GrantError::Exceeds {
                    adapter: adapter.to_owned(),
                    url: url.to_owned(),
                    what,
                    name,
                };
                if let Some(method) = grant
                    .methods
                    .iter()
                    .find(|m| !covering.iter().any(|r| r.methods.contains(*m)))
                {
                    return Err(exceeds("method", method.to_string()));
                }
                if let Some(slot) = grant
                    .credentials
                    .keys()
                    .find(|s| !covering.iter().any(|r| r.credentials.contains(*s)))
                {
                    return Err(exceeds("credential slot", slot.clone()));
                }
                let credentials = grant
                    .credentials
                    .iter()
                    .map(|(slot, binding)| {
                        load_credential(slot, binding).map_err(|problem| GrantError::Credential {
                            adapter: adapter.to_owned(),
                            url: url.to_owned(),
                            slot: slot.clone(),
                            problem,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let headers = grant
                    .headers
                    .iter()
                    .map(|text| {
                        extra_header(text, &credentials).map_err(|problem| GrantError::Header {
                            adapter: adapter.to_owned(),
                            url: url.to_owned(),
                            header: text.clone(),
                            problem,
                        })
                    })
                    .collect::<Result<_, _>>()?;
                if let Some(method) = grant.read_methods.difference(&grant.methods).next() {
                    return Err(GrantError::ReadMethod {
                        adapter: adapter.to_owned(),
                        url: url.to_owned(),
                        method: method.to_string(),
                    });
                }
                Ok(Rule {
                    url: grant.url.clone(),
                    methods: grant.methods.clone(),
                    credentials,
                    addresses: AddressPolicy::new(grant.allow_private.clone()),
                    headers,
                    read_methods: grant.read_methods.clone(),
                    delegate: grant.delegate,
                })
            })
            .collect::<Result<Vec<_>, GrantError>>()?;
        Ok(Self {
            id: next_id(),
            rules,
            max_requests: config.max_requests,
            max_request_bytes: config.max_request_bytes,
            max_response_bytes: config.max_response_bytes,
            max_total: Duration::from_millis(config.max_total_ms),
            tls: tls.clone(),
            stdio: None,
            serving: Arc::default(),
        })
    }
}

/// A header a grant lets the guest send: a valid name the host does not own.
fn extra_header(text: &str, credentials: &[Credential]) -> Result<HeaderName, &'static str> {
    let name = HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| "not a header name; write a lowercase token such as `x-api-version`")?;
    if HOST_OWNED_HEADERS.contains(&name.as_str())
        || name.as_str().starts_with("proxy-")
        || credentials.iter().any(|c| c.header == name)
    {
        return Err("the host sets this header itself; remove it from `headers`");
    }
    Ok(name)
}

fn requested_list(requested: &[EgressRequest]) -> String {
    if requested.is_empty() {
        return "nothing".to_owned();
    }
    requested
        .iter()
        .map(|r| {
            let methods: Vec<String> = r.methods.iter().map(ToString::to_string).collect();
            format!("{} {methods:?}", r.url.as_written())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a credential. Errors name the variable or file, never the value.
fn load_credential(slot: &str, binding: &CredentialConfig) -> Result<Credential, String> {
    let header = HeaderName::from_bytes(binding.header.as_bytes())
        .map_err(|_| format!("`{}` is not a valid header name", binding.header))?;
    if let Some(provider) = &binding.oauth {
        if binding.env.is_some() || binding.file.is_some() {
            return Err(
                "set one of `env`, `file` and `oauth`: an `oauth` credential is each caller's own token"
                    .to_owned(),
            );
        }
        return Ok(Credential {
            slot: slot.to_owned(),
            header,
            source: CredentialSource::Caller {
                provider: provider.clone(),
                scheme: binding
                    .scheme
                    .clone()
                    .unwrap_or_else(|| "Bearer".to_owned()),
            },
        });
    }
    let secret = gatehouse_core::secret::read(binding.env.as_deref(), binding.file.as_deref())?;
    let (text, secret_at) = match &binding.scheme {
        Some(scheme) => (format!("{scheme} {}", secret.expose()), scheme.len() + 1),
        None => (secret.expose().to_owned(), 0),
    };
    let mut value = HeaderValue::from_str(&text)
        .map_err(|_| "the secret contains characters not allowed in a header value".to_owned())?;
    value.set_sensitive(true);
    Ok(Credential {
        slot: slot.to_owned(),
        header,
        source: CredentialSource::Fixed { value, secret_at },
    })
}
