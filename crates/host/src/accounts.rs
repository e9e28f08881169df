//! Each user's own upstream accounts (issue 60): what the pipeline asks of the gateway's
//! account broker, for grants whose credential is the caller's own token
//! (`credentials = { token = { oauth = "github" } }`).
//!
//! Before a call's adapter runs (between gates 6 and 7: `pipeline::connect`), the pipeline asks
//! the broker for the caller's token for every provider such a grant names. The broker keeps
//! the tokens (sealed, in the store), refreshes one about to expire, and answers `None` when
//! the caller has no usable connection: then the call pauses, `CONNECTION_REQUIRED`, with the
//! URL where the user connects ([`Accounts::begin`]), and nothing ran; the retry runs it once.
//! The token goes into the call's egress gate alone ([`crate::egress`]'s `CallInfo`), which
//! injects it on requests the grant matches: the adapter, the agent, the log and the audit
//! record never see it (the record names the connection and the token's hash).
//!
//! The broker is the front end's ([`crate::Host::set_accounts`]): `gatehouse serve`'s runs the
//! OAuth flows (`gatehouse_server::oauth`). A host without one pauses nobody: a call that
//! needs a caller's token fails, saying that no broker is configured.

use std::future::Future;
use std::pin::Pin;

pub use gatehouse_store::ConnectionKey;

/// A broker's answer in flight.
pub type AccountFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, AccountError>> + Send + 'a>>;

/// The gateway's account broker: the callers' tokens, and where they connect.
pub trait Accounts: Send + Sync + std::fmt::Debug {
    /// The caller's access token for the provider `whose` names, fresh (refreshed first if it
    /// is about to expire); `None` if the caller has no usable connection (never connected,
    /// revoked, or its refresh was refused).
    fn token<'a>(&'a self, whose: &'a ConnectionKey) -> AccountFuture<'a, Option<UserToken>>;

    /// Starts a flow that connects the caller's account at the provider `whose` names, for
    /// the call `pending`: the URL the user opens (the gateway's own start page).
    fn begin<'a>(
        &'a self,
        whose: &'a ConnectionKey,
        pending: &'a PendingCall,
    ) -> AccountFuture<'a, String>;
}

/// The call a flow is started for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    /// The tool as resolved.
    pub tool: String,
    /// The call itself (its `ToolCallEnvelope`, JSON): what a task waiting for the connection
    /// runs once it is made.
    pub call: String,
}

/// A caller's access token for one provider, as the egress gate injects it.
#[derive(Clone, PartialEq, Eq)]
pub struct UserToken {
    /// The `[[oauth.provider]]`.
    pub provider: String,
    /// Whose it is.
    pub principal: String,
    /// The first 16 hex digits of the token's SHA-256: what records may name.
    pub token_hash: String,
    token: String,
}

impl UserToken {
    /// The token of `whose` principal at `whose` provider.
    pub fn new(whose: &ConnectionKey, token: impl Into<String>) -> Self {
        let token = token.into();
        Self {
            provider: whose.provider.clone(),
            principal: whose.principal.clone(),
            token_hash: token_hash(&token),
            token,
        }
    }

    /// The token itself: for the request that carries it, nothing else.
    pub fn expose(&self) -> &str {
        &self.token
    }
}

impl std::fmt::Debug for UserToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserToken")
            .field("provider", &self.provider)
            .field("principal", &self.principal)
            .field("token_hash", &self.token_hash)
            .finish_non_exhaustive()
    }
}

/// The first 16 hex digits of `token`'s SHA-256.
pub fn token_hash(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(token.as_bytes())[..8])
}

/// Why a broker could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// A grant names a provider the broker does not know.
    #[error("no `[[oauth.provider]]` `{0}` is configured")]
    UnknownProvider(String),
    /// The provider or the store could not be reached, or answered what the broker cannot
    /// use; retryable.
    #[error("{0}")]
    Unavailable(String),
    /// The caller cannot have a token this way (a token exchange needs a caller identified by
    /// a JWT, and the provider refused the one it had); not retryable as it is.
    #[error("{0}")]
    Refused(String),
}
