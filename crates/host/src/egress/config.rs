//! The operator's `[egress]` config: which destinations each adapter may reach, with which
//! methods, credentials, extra request headers and special-purpose addresses, the per-call
//! budgets, and the roots trusted for `https`. Destinations and methods are parsed when the config is
//! read ([`UrlPattern`], [`MethodName`]), so a malformed grant is a config error naming its
//! line.
//!
//! ```toml
//! [egress]
//! extra_root_certificates = ["/etc/gatehouse/internal-ca.pem"]   # default: none
//! max_requests = 16                    # per call
//! idle_connection_timeout_ms = 30000   # kept-alive upstream connections
//!
//! [[egress.grant]]
//! adapter = "gatehouse.rest"
//! url = "http://127.0.0.1:8080/api/"
//! methods = ["GET", "POST"]
//! credentials = { api_token = { env = "REST_TOKEN", header = "authorization", scheme = "Bearer" } }
//! allow_private = ["127.0.0.0/8"]      # default: none, for this grant only
//! headers = ["x-api-version"]          # default: only the standard content-negotiation headers
//! read_methods = ["POST"]              # default: none; read-only calls may use these here too
//! ```
//!
//! A stdio server's `https` request is a `CONNECT` tunnel the gate cannot see into: any method
//! and path can go inside, and no credential is injected. It opens only on a grant of the
//! whole host (`https://api.example.com/`) whose `methods` hold every one of
//! [`super::TUNNEL_METHODS`], in calls whose approval mode allows writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::rules::{MethodName, UrlPattern};

/// The `[egress]` table of the operator config. The defaults deny: no grants, no private
/// addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
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
    /// Idle kept-alive upstream connections kept per destination (checked address, scheme,
    /// TLS server name and grant, see the `egress::pool` docs); `0` turns reuse off, so every
    /// request opens a new connection. Default: 8 (enough for the requests of a few
    /// concurrent calls to one upstream without holding many sockets open).
    #[serde(default = "defaults::max_idle_connections_per_destination")]
    pub max_idle_connections_per_destination: usize,
    /// Idle kept-alive upstream connections kept in all, over every destination. Default: 256
    /// (well under a process's usual 1024 open files).
    #[serde(default = "defaults::max_idle_connections")]
    pub max_idle_connections: usize,
    /// How long an idle upstream connection is kept before it is closed, in milliseconds.
    /// Default: 30000 (under the usual server keep-alive timeouts, e.g. nginx's 75 s, so the
    /// host, not the upstream, usually closes it).
    #[serde(default = "defaults::idle_connection_timeout_ms")]
    pub idle_connection_timeout_ms: u64,
    /// The key that seals the delegation a `delegate = true` grant sends
    /// ([`crate::delegation`]): read from this file (made, random, if missing). Every gateway
    /// of a deployment names the same file, so a peer's call back may reach any of them.
    /// Default: a key made for this process alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_key_file: Option<PathBuf>,
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
    pub fn max_idle_connections_per_destination() -> usize {
        8
    }
    pub fn max_idle_connections() -> usize {
        256
    }
    pub fn idle_connection_timeout_ms() -> u64 {
        30_000
    }
}

impl Default for EgressConfig {
    fn default() -> Self {
        Self {
            max_requests: defaults::max_requests(),
            max_request_bytes: defaults::max_request_bytes(),
            max_response_bytes: defaults::max_response_bytes(),
            max_total_ms: defaults::max_total_ms(),
            system_root_certificates: defaults::system_root_certificates(),
            extra_root_certificates: Vec::new(),
            max_idle_connections_per_destination: defaults::max_idle_connections_per_destination(),
            max_idle_connections: defaults::max_idle_connections(),
            idle_connection_timeout_ms: defaults::idle_connection_timeout_ms(),
            delegation_key_file: None,
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
    pub url: UrlPattern,
    /// Methods allowed there; each must be one the manifest requested for that URL. A stdio
    /// server's tunnel (`CONNECT`) to the host opens only when the grant is of the whole host
    /// and these are every one of [`super::TUNNEL_METHODS`]: a tunnel can carry any.
    pub methods: BTreeSet<MethodName>,
    /// Credential bindings by slot name; each slot must be one the manifest requested.
    #[serde(default)]
    pub credentials: BTreeMap<String, CredentialConfig>,
    /// Special-purpose address ranges (loopback, private, link-local, metadata...) requests
    /// this grant matches may connect to, as CIDR, e.g. `["127.0.0.0/8", "10.20.0.0/16"]`.
    /// Default: none, so resolved addresses must be public. Per grant: a range opened for one
    /// adapter's destination is not opened for another grant whose DNS someone else controls.
    /// A bare address is that one address (`"10.20.0.5"` is `10.20.0.5/32`).
    #[serde(default, deserialize_with = "networks")]
    pub allow_private: Vec<IpNet>,
    /// Request headers the adapter may send there beyond the standard ones (`accept`,
    /// `accept-language`, `cache-control`, `content-type`, `if-match`, `if-none-match`,
    /// `if-modified-since`, `if-unmodified-since`, `user-agent`); every other header the
    /// guest sets is dropped. Default: none. Headers the host owns (credentials, `host`,
    /// framing and hop-by-hop headers, `traceparent`, `idempotency-key`, `gatehouse-delegation`)
    /// cannot be listed.
    #[serde(default)]
    pub headers: BTreeSet<String>,
    /// Methods that only read at this destination although HTTP does not call them safe, e.g.
    /// `["POST"]` for an MCP endpoint, where every request (a read-only tool's too) is a POST:
    /// calls at `read_only` and `local_write` may use them here, where the gate otherwise
    /// allows those calls only GET, HEAD and OPTIONS. Each must be one of `methods`. Grant it
    /// only to an adapter whose read-only capabilities' requests do not write (`gatehouse
    /// import mcp` writes it for `gatehouse.mcp-upstream`). Default: none.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub read_methods: BTreeSet<MethodName>,
    /// Whether requests here carry the call's delegation (the header `gatehouse-delegation`,
    /// [`crate::delegation`]): for a peer that may call back into the gateway on the call's
    /// behalf, such as an A2A agent (`gatehouse import a2a` sets it). It names the call's
    /// principals to the destination. Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delegate: bool,
}

/// Where a credential comes from and how it is sent. Exactly one of `env`, `file` and
/// `oauth`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialConfig {
    /// Environment variable of the host process holding the secret.
    #[serde(default)]
    pub env: Option<String>,
    /// File holding the secret (surrounding whitespace is trimmed).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// The `[[oauth.provider]]` whose token *of the caller* is sent: each user acts as
    /// themselves upstream, with the access token they connected ([`crate::accounts`]). A call
    /// whose caller has none pauses until they connect. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<String>,
    /// Header to send it in. Default: `authorization`.
    #[serde(default = "default_header")]
    pub header: String,
    /// Prefix written before the secret with one space, e.g. `Bearer`. Default: none; `Bearer`
    /// for an `oauth` credential.
    #[serde(default)]
    pub scheme: Option<String>,
}

/// `allow_private`: CIDR ranges, or bare addresses as a range of one (/32, /128).
fn networks<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<IpNet>, D::Error> {
    Vec::<String>::deserialize(deserializer)?
        .iter()
        .map(|text| {
            text.parse::<IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    <D::Error as serde::de::Error>::custom(format!(
                        "`{text}` is neither an IP address nor a CIDR range; write e.g. `10.20.0.5` or `10.20.0.0/16`"
                    ))
                })
        })
        .collect()
}

fn default_header() -> String {
    "authorization".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow_private(list: &str) -> Result<Vec<String>, String> {
        let text = format!(
            "[[grant]]\nadapter = \"t\"\nurl = \"http://h/\"\nmethods = [\"GET\"]\nallow_private = {list}\n"
        );
        toml::from_str::<EgressConfig>(&text)
            .map(|c| {
                c.grants[0]
                    .allow_private
                    .iter()
                    .map(IpNet::to_string)
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn accepts_cidr_ranges_and_bare_addresses_as_one_address() {
        assert_eq!(
            allow_private(r#"["10.20.0.0/16", "127.0.0.1", "::1", "fd00::/8"]"#).unwrap(),
            ["10.20.0.0/16", "127.0.0.1/32", "::1/128", "fd00::/8"]
        );
    }

    #[test]
    fn rejects_what_is_neither_saying_the_expected_form() {
        let err = allow_private(r#"["localhost"]"#).unwrap_err();
        assert!(
            err.contains(
                "`localhost` is neither an IP address nor a CIDR range; write e.g. `10.20.0.5` or `10.20.0.0/16`"
            ),
            "{err}"
        );
    }
}
