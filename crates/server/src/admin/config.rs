//! The `[admin]` table of `gatehouse serve`'s config: where the admin API listens and the
//! bearer tokens operators present, each with a principal and roles.
//!
//! ```toml
//! [admin]
//! listen = "127.0.0.1:8788"
//!
//! [[admin.token]]
//! principal = "usr_ops_ana"
//! roles = ["approver", "auditor"]
//! env = "ANA_ADMIN_TOKEN"        # or file = "/run/secrets/ana-admin"
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::listener::ListenerConfig;

/// How long requests in flight on the admin listener may take to finish when it is drained.
/// `gatehouse serve` does not drain it (the process's exit ends it); an embedder that serves
/// it with a shutdown future gets the MCP endpoint's default.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Lists, shows, approves and rejects approvals (as the token's principal).
    Approver,
    /// Lists plugins, uploads signed adapters and policy modules, rolls policies back, sets a
    /// binding's config.
    Operator,
    /// Reads and verifies the audit log; lists approvals and plugins.
    Auditor,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approver => "approver",
            Self::Operator => "operator",
            Self::Auditor => "auditor",
        }
    }
}

/// One `[[admin.token]]`: a bearer token, the principal it acts as, and its roles. Exactly one
/// of `env` and `file` holds the token; it is read once at start and never logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTokenConfig {
    /// Who acts with this token, e.g. `usr_ops_ana`: the approver recorded on decisions and
    /// the principal of plugin changes in the audit log.
    pub principal: String,
    /// What it may do. At least one.
    pub roles: Vec<Role>,
    /// Environment variable of the gateway process holding the token.
    #[serde(default)]
    pub env: Option<String>,
    /// File holding the token (surrounding whitespace is trimmed).
    #[serde(default)]
    pub file: Option<PathBuf>,
}

/// The `[admin]` table. The admin API runs only when the table is present (or, with
/// `serve --demo`, when `GATEHOUSE_ADMIN_TOKEN` is set); the defaults listen on loopback and
/// admit no token, so only `/healthz`, `/readyz` and `/metrics` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Address to listen on. Default: `127.0.0.1:8788`. The API speaks plain HTTP: beyond
    /// loopback, put a TLS-terminating proxy in front of it.
    #[serde(default = "defaults::listen")]
    pub listen: SocketAddr,
    /// Largest request body in bytes (an uploaded component, a JSON body). Default: 64 MiB.
    #[serde(default = "defaults::max_body_bytes")]
    pub max_body_bytes: usize,
    /// Time a client has to send a request's headers, in milliseconds. Default: 10000.
    #[serde(default = "defaults::header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// Time a client has to send a request's body once its headers are in, in milliseconds; a
    /// body not complete by then is answered 408 and nothing is done. Default: 60000.
    #[serde(default = "defaults::body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// Most connections served at once; one beyond it is closed at accept, unread, and the
    /// refusals are logged as one counted warning per 10 s. Default: 64.
    #[serde(default = "defaults::max_connections")]
    pub max_connections: usize,
    /// Whether the listener serves the web console at `/console` (sign-in with a token
    /// below). Default: true.
    #[serde(default = "defaults::console")]
    pub console: bool,
    /// The console's address as people reach it, e.g. `https://gatehouse.example.com/console`
    /// behind a TLS proxy: paused results name it, and an `https` one makes the session cookie
    /// `Secure`. Default: `http://<listen>/console`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_url: Option<String>,
    /// How long a console sign-in lasts, in seconds. Default: 28800 (8 hours).
    #[serde(default = "defaults::session_ttl_seconds")]
    pub session_ttl_seconds: u64,
    /// `Host` header values the listener answers, as host names or `host:port` (a page on
    /// another site reaching a loopback listener through DNS rebinding sends its own name);
    /// anything else gets 403. Default: `localhost`, `127.0.0.1`, `::1`. List the names people
    /// and scrapers use when serving beyond loopback.
    #[serde(default = "defaults::allowed_hosts")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins, with scheme, allowed besides the listener's own (the console's page):
    /// a request carrying any other `Origin` gets 403. Default: none.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Roles that may see a `sensitive` capability's arguments in clear
    /// (`GET /v1/approvals/{id}?reveal=true`, the console's "Reveal"), each reveal appended to
    /// the audit log. Everyone else sees them masked (their hashes). `auditor` is refused here:
    /// auditors never see a sensitive value. Default: none.
    #[serde(default)]
    pub reveal_sensitive: Vec<Role>,
    /// Bearer tokens and what each may do. Default: none.
    #[serde(default, rename = "token")]
    pub tokens: Vec<AdminTokenConfig>,
}

impl AdminConfig {
    /// What the admin listener allows its clients (`max_connections`, the header and body
    /// timeouts, `max_body_bytes`).
    pub fn listener(&self) -> ListenerConfig {
        ListenerConfig {
            name: "admin",
            max_connections: self.max_connections,
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            max_body_bytes: self.max_body_bytes,
            drain_timeout: DRAIN_TIMEOUT,
        }
    }

    /// The console's address as people reach it (`console_url`, else on `listen`).
    pub fn console_url(&self) -> String {
        match &self.console_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("http://{}/console", self.listen),
        }
    }
}

mod defaults {
    use std::net::SocketAddr;

    pub fn listen() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8788))
    }
    pub fn max_body_bytes() -> usize {
        64 * 1024 * 1024
    }
    pub fn header_timeout_ms() -> u64 {
        10_000
    }
    /// Uploads reach 64 MiB (`max_body_bytes`): a minute allows about 9 Mbit/s.
    pub fn body_timeout_ms() -> u64 {
        60_000
    }
    /// Operators and scrapers, not agents: a few at once.
    pub fn max_connections() -> usize {
        64
    }
    pub fn console() -> bool {
        true
    }
    pub fn session_ttl_seconds() -> u64 {
        8 * 3600
    }
    pub fn allowed_hosts() -> Vec<String> {
        vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ]
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: defaults::listen(),
            max_body_bytes: defaults::max_body_bytes(),
            header_timeout_ms: defaults::header_timeout_ms(),
            body_timeout_ms: defaults::body_timeout_ms(),
            max_connections: defaults::max_connections(),
            console: defaults::console(),
            console_url: None,
            session_ttl_seconds: defaults::session_ttl_seconds(),
            allowed_hosts: defaults::allowed_hosts(),
            allowed_origins: Vec::new(),
            reveal_sensitive: Vec::new(),
            tokens: Vec::new(),
        }
    }
}
