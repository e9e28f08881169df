//! The `[mcp]` table of `gatehouse serve`'s config: where it listens, which hosts and
//! origins it accepts, and who may call.
//!
//! ```toml
//! [mcp]
//! listen = "127.0.0.1:8787"
//!
//! public_url = "https://gatehouse.example.com"
//! authorization_servers = ["https://idp.example.com/"]
//!
//! [[mcp.api_key]]
//! tenant = "acme"
//! env = "ACME_AGENT_KEY"
//!
//! [mcp.jwt]
//! issuer = "https://idp.example.com/"
//! audience = "https://gatehouse.example.com/mcp"
//! algorithms = ["RS256"]
//! jwks_url = "https://idp.example.com/.well-known/jwks.json"
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use gatehouse_core::model::ApprovalMode;

use serde::{Deserialize, Serialize};

use super::aliases::ToolAliases;
use super::identity::ApiKeyConfig;
use super::jwt::JwtConfig;
use crate::listener::ListenerConfig;

/// The `[mcp]` table: where `gatehouse serve` listens and who may call. The defaults listen on
/// loopback only and admit nobody: every caller needs an `[[mcp.api_key]]` unless
/// `anonymous_tenant` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Address to listen on. Default: `127.0.0.1:8787`.
    #[serde(default = "defaults::listen")]
    pub listen: SocketAddr,
    /// The MCP endpoint's path. Default: `/mcp`.
    #[serde(default = "defaults::path")]
    pub path: String,
    /// `Host` header values accepted, as host names or `host:port` (protects loopback servers
    /// from DNS rebinding). Default: `localhost`, `127.0.0.1`, `::1`. List your public names
    /// when serving beyond loopback.
    #[serde(default = "defaults::allowed_hosts")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call, with scheme, e.g. `https://console.example.com:443`
    /// (`:*` allows any port). A request carrying any other `Origin` is refused with 403;
    /// requests without one pass. When `listen` is a loopback address, pages served from this
    /// machine (`http(s)://localhost`, `127.0.0.1` or `[::1]`, any port) are allowed too, so
    /// local web clients can connect; on any other address they must be listed here. Default:
    /// none.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Largest request body, in bytes. Default: 1 MiB.
    #[serde(default = "defaults::max_request_bytes")]
    pub max_request_bytes: usize,
    /// Time a client has to send a request's headers, in milliseconds; a connection that
    /// dawdles longer is closed (slow-header attacks). Default: 10000.
    #[serde(default = "defaults::header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// Time a client has to send a request's body once its headers are in, in milliseconds; a
    /// body not complete by then is answered 408 and nothing is called (slow-body attacks).
    /// Default: 10000.
    #[serde(default = "defaults::body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// Most connections served at once; one beyond it is closed at accept, unread, and the
    /// refusals are logged as one counted warning per 10 s. Read when the listener starts (a
    /// SIGHUP reload keeps the running cap; restart to change it). Default: 1024.
    #[serde(default = "defaults::max_connections")]
    pub max_connections: usize,
    /// On shutdown (SIGTERM, Ctrl-C), how long calls in flight may take to finish, in
    /// milliseconds; connections still open then are cut. Default: 10000.
    #[serde(default = "defaults::drain_timeout_ms")]
    pub drain_timeout_ms: u64,
    /// Tenant for requests without an `Authorization` header. Default: none, so they are
    /// refused. Meant for local use (the demo sets it).
    #[serde(default)]
    pub anonymous_tenant: Option<String>,
    /// Bearer API keys and the tenant each identifies. Default: none.
    #[serde(default, rename = "api_key")]
    pub api_keys: Vec<ApiKeyConfig>,
    /// `[mcp.jwt]`: bearer JWTs from an authorization server (see [`super::jwt`]). Default:
    /// none; only API keys identify callers.
    #[serde(default)]
    pub jwt: Option<JwtConfig>,
    /// The URL clients reach this gateway at, scheme and authority (and a path prefix if a
    /// proxy adds one), e.g. `https://gatehouse.example.com`: the endpoint's `resource` is this
    /// plus `path`, and the OAuth protected resource metadata (RFC 9728) is served under it.
    /// Default: `http://<listen>` (`http://localhost:<port>` when `listen` is an unspecified
    /// address such as `0.0.0.0`); set it when serving behind TLS or a proxy.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Authorization servers issuing tokens for this endpoint, listed in the protected resource
    /// metadata so MCP clients can find them. Default: none.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes listed in the protected resource metadata (`scopes_supported`). Default: none,
    /// and the field is left out.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// `[mcp.a2a]`: serve A2A too, on this listener: the agent card at
    /// `/.well-known/agent-card.json` and the JSON-RPC endpoint at its `path` (docs/a2a.md).
    /// Default: none, A2A is not served.
    #[serde(default)]
    pub a2a: Option<super::A2aConfig>,
    /// `[mcp.aliases]`: MCP tool names for gatehouse tools, e.g.
    /// `test_simple_text = "gatehouse.conformance.test_simple_text"` (see
    /// [`aliases`](super::aliases)). Default: none; tools are listed as
    /// `<adapter id>.<capability id>`.
    #[serde(default, skip_serializing_if = "ToolAliases::is_empty")]
    pub aliases: ToolAliases,
    /// The tool argument a model sends an idempotency key in ([`super::keys`]): listed in
    /// `tools/list` on every tool whose calls take a key (required where the key is), and
    /// taken out of the arguments before the adapter sees them. `false` turns it off; keys then
    /// come only in `_meta["gatehouse/idempotency_key"]`, which works either way. Default:
    /// `"idempotency_key"`.
    #[serde(default)]
    pub idempotency_key_argument: KeyArgumentName,
    /// How long a request that resumes a pending approval waits for the decision, in
    /// milliseconds: a 2026-07-28 retry with its `requestState`, or a 2025-11-25 call held on an
    /// event stream ([`super::approvals`]). Past it the request answers that the approval is
    /// still pending, and the client asks again. Keep it under your clients' request timeout
    /// (60 s in the TypeScript SDK). Default: 25000.
    #[serde(default = "defaults::approval_hold_ms")]
    pub approval_hold_ms: u64,
    /// How long a 2026-07-28 call whose adapter asked its caller something (elicitation,
    /// sampling, roots) is held in this gateway for the client's retry with the answers, in
    /// milliseconds. Past it the call's asks fail (the adapter gets an error and finishes) and
    /// its `requestState` no longer resumes anything. A retry must reach the gateway that holds
    /// the call. Default: 300000 (five minutes: time for a person to fill in a form).
    #[serde(default = "defaults::input_wait_ms")]
    pub input_wait_ms: u64,
    /// How long a 2026-07-28 call of a tool that may run as a task (its manifest's
    /// `task_support` is `optional` or `required`), from a client that declared the tasks
    /// extension, keeps its request waiting before it goes on as a task, in milliseconds: a
    /// call that ends sooner answers at once. Default: 500.
    #[serde(default = "defaults::task_after_ms")]
    pub task_after_ms: u64,
    /// The file of the key that signs `requestState`s: at least 32 bytes, as 64 or more hex
    /// digits or raw. Created (random, mode 0600) if it does not exist. Gateways sharing a store
    /// must share it, or a retry that reaches another gateway is refused. Default: none, and
    /// then a key made at start, which a restart forgets (`gatehouse serve` sets
    /// `request-state.key` beside the SQLite store instead).
    #[serde(default)]
    pub request_state_key_file: Option<PathBuf>,
    /// Approval modes at which a paused call may be approved by the calling user itself,
    /// accepting a consent form (a form-mode elicitation showing the tool, its arguments as
    /// approvers see them, and the mode), for clients that can show one; recorded as that
    /// user's consent in the approval and the audit log. `destructive` is refused here.
    /// Default: none (only approvers decide).
    #[serde(default)]
    pub consent_modes: Vec<ApprovalMode>,
}

/// `[mcp] idempotency_key_argument`: an argument name of 1 to 64 characters of `A-Z a-z 0-9 _
/// -`, or `false` for none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyArgumentName(pub Option<String>);

impl Default for KeyArgumentName {
    fn default() -> Self {
        Self(Some(super::keys::DEFAULT_KEY_ARGUMENT.to_owned()))
    }
}

impl Serialize for KeyArgumentName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(name) => serializer.serialize_str(name),
            None => serializer.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for KeyArgumentName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Switch(bool),
        }
        let expected = "an argument name of 1 to 64 characters of A-Z a-z 0-9 _ -, or false to \
                        turn the key argument off";
        match Raw::deserialize(deserializer)
            .map_err(|_| serde::de::Error::custom(format!("expected {expected}")))?
        {
            Raw::Switch(false) => Ok(Self(None)),
            Raw::Switch(true) => Err(serde::de::Error::custom(format!(
                "`true` names no argument: expected {expected}"
            ))),
            Raw::Name(name)
                if !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                Ok(Self(Some(name)))
            }
            Raw::Name(name) => Err(serde::de::Error::custom(format!(
                "`{name}` is not a usable argument name: expected {expected}"
            ))),
        }
    }
}

impl McpConfig {
    /// What the endpoint's listener allows its clients (`max_connections`, the header and
    /// body timeouts, `max_request_bytes`, `drain_timeout_ms`).
    pub fn listener(&self) -> ListenerConfig {
        ListenerConfig {
            name: "mcp",
            max_connections: self.max_connections,
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            max_body_bytes: self.max_request_bytes,
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
        }
    }
}

mod defaults {
    use std::net::SocketAddr;

    pub fn listen() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8787))
    }
    pub fn path() -> String {
        "/mcp".to_owned()
    }
    pub fn allowed_hosts() -> Vec<String> {
        vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ]
    }
    pub fn max_request_bytes() -> usize {
        1024 * 1024
    }
    pub fn header_timeout_ms() -> u64 {
        10_000
    }
    /// Ample for a 1 MiB body (`max_request_bytes`) on any working link.
    pub fn body_timeout_ms() -> u64 {
        10_000
    }
    /// Well under a default `ulimit -n` of 4096 (each connection is a file descriptor), far
    /// above what agents on one gateway hold open.
    pub fn max_connections() -> usize {
        1024
    }
    /// Twice the default sandbox timeout (5 s), and within the 30 s a service manager such as
    /// Kubernetes waits before SIGKILL.
    pub fn drain_timeout_ms() -> u64 {
        10_000
    }
    /// Under the TypeScript SDK's 60 s request timeout with room for the call itself; ten
    /// rounds of it (the SDKs' limit) wait about four minutes in all.
    pub fn approval_hold_ms() -> u64 {
        25_000
    }
    /// Time for a person to read and fill in a form.
    pub fn input_wait_ms() -> u64 {
        300_000
    }
    /// Past what a person waiting on a tool notices, well under what a task is for.
    pub fn task_after_ms() -> u64 {
        500
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            listen: defaults::listen(),
            path: defaults::path(),
            allowed_hosts: defaults::allowed_hosts(),
            allowed_origins: Vec::new(),
            max_request_bytes: defaults::max_request_bytes(),
            header_timeout_ms: defaults::header_timeout_ms(),
            body_timeout_ms: defaults::body_timeout_ms(),
            max_connections: defaults::max_connections(),
            drain_timeout_ms: defaults::drain_timeout_ms(),
            anonymous_tenant: None,
            api_keys: Vec::new(),
            jwt: None,
            public_url: None,
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            a2a: None,
            aliases: ToolAliases::default(),
            idempotency_key_argument: KeyArgumentName::default(),
            approval_hold_ms: defaults::approval_hold_ms(),
            input_wait_ms: defaults::input_wait_ms(),
            task_after_ms: defaults::task_after_ms(),
            request_state_key_file: None,
            consent_modes: Vec::new(),
        }
    }
}
