//! The `[oauth]` table: the authorization servers users connect their own accounts at, and the
//! vault their tokens are kept in.
//!
//! ```toml
//! [oauth]
//! vault_key_file = "/var/lib/gatehouse/vault.key"   # made if missing
//! public_url = "https://gateway.example"           # where browsers reach the gateway
//!
//! [[oauth.provider]]
//! id = "github"
//! issuer = "https://github.com"
//! authorization_endpoint = "https://github.com/login/oauth/authorize"  # no discovery there
//! token_endpoint = "https://github.com/login/oauth/access_token"
//! client_id = "Iv1.0123456789abcdef"
//! client_secret_env = "GITHUB_CLIENT_SECRET"
//! scopes = ["repo"]
//! ```
//!
//! A grant then sends each caller's own token: `[[egress.grant]] credentials = { token = {
//! oauth = "github" } }`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[oauth]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The vault key's file (at least 32 bytes, or 64 hex digits); made, mode 0600, if it does
    /// not exist. Default: `vault.key` beside the store's file. Losing it loses every
    /// connection (users connect again); anyone holding it and the database can read them.
    #[serde(default)]
    pub vault_key_file: Option<PathBuf>,
    /// The gateway's address as users' browsers reach it (scheme, host, port): the start and
    /// callback pages are under it (`/oauth/start`, `/oauth/callback`, to register at each
    /// provider as the redirect URI). Default: the MCP endpoint's (`[mcp] public_url`, else
    /// its listen address).
    #[serde(default)]
    pub public_url: Option<String>,
    /// How long a user has to finish connecting, from the paused call, in seconds. Default:
    /// 600.
    #[serde(default = "defaults::flow_seconds")]
    pub flow_seconds: u64,
    /// A token that expires within this many seconds is refreshed before a call uses it.
    /// Default: 60.
    #[serde(default = "defaults::refresh_before_seconds")]
    pub refresh_before_seconds: u64,
    /// The providers, by id.
    #[serde(default, rename = "provider")]
    pub providers: Vec<ProviderConfig>,
}

/// One `[[oauth.provider]]`: an authorization server and the gateway's registration there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// What grants name (`oauth = "github"`).
    pub id: String,
    /// The authorization server's issuer. Its metadata (RFC 8414, else OpenID Connect
    /// discovery) is read from it the first time a user connects, unless both endpoints below
    /// are given. `https`, or `http` to a loopback host.
    pub issuer: String,
    /// The authorization endpoint, where discovery is not offered (GitHub).
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// The token endpoint, where discovery is not offered.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// The revocation endpoint (RFC 7009), where discovery is not offered; none: revoking a
    /// connection forgets the tokens without telling the provider.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The gateway's client id there.
    pub client_id: String,
    /// The environment variable holding its client secret.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The file holding its client secret (whitespace trimmed).
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// How the secret is sent: `basic` (HTTP Basic, RFC 6749's default) or `post` (in the
    /// form). Default: `basic`.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// The scopes asked for.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The resource indicator (RFC 8707): the upstream the tokens are for, so they are
    /// audience-bound to it. Default: none.
    #[serde(default)]
    pub resource: Option<String>,
    /// Tokens come from token exchange (RFC 8693, on-behalf-of) of the caller's own bearer JWT
    /// (the one `[mcp.jwt]` verified) at the token endpoint, with no user interaction, instead
    /// of each user's authorization flow: for an organisation whose identity provider issues
    /// the callers' tokens. Only `token_endpoint` is needed. Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exchange: bool,
    /// The `subject_token_type` a token exchange names. Default:
    /// `urn:ietf:params:oauth:token-type:jwt`.
    #[serde(default = "defaults::subject_token_type")]
    pub subject_token_type: String,
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// HTTP Basic (`client_secret_basic`).
    #[default]
    Basic,
    /// In the request body (`client_secret_post`).
    Post,
}

mod defaults {
    pub fn flow_seconds() -> u64 {
        600
    }
    pub fn refresh_before_seconds() -> u64 {
        60
    }
    pub fn subject_token_type() -> String {
        "urn:ietf:params:oauth:token-type:jwt".to_owned()
    }
}
