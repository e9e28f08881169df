//! Each user's own upstream accounts (issue 60): a [`Connection`] is one principal's tokens for
//! one OAuth provider in one tenant, and an [`Authorization`] is a flow under way, from the
//! moment a call found no connection to the provider's redirect back to the gateway.
//!
//! The store keeps both as the host hands them over: the tokens and the flow's PKCE verifier
//! arrive sealed by the host's vault (`gatehouse_host::oauth::vault`), an envelope the store
//! cannot open, whose associated data binds it to the row's tenant, principal, provider and
//! resource. A flow's `state` is never stored: its SHA-256 is the row's key, so a copy of the
//! table names no flow anyone could finish.

/// Whose connection: a principal's, in a tenant, to a provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnectionKey {
    /// The tenant.
    pub tenant: String,
    /// The principal (the caller's user or agent, as identified at gate 1).
    pub principal: String,
    /// The `[[oauth.provider]]` id.
    pub provider: String,
}

/// A principal's tokens for a provider, sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// Whose.
    pub key: ConnectionKey,
    /// The resource indicator (RFC 8707) the tokens were issued for; empty if none.
    pub resource: String,
    /// The vault's envelope of the tokens (base64), opened only with the vault key and only
    /// for this row's tenant, principal, provider and resource.
    pub sealed: String,
    /// The first 16 hex digits of the access token's SHA-256: what the audit record names.
    pub token_hash: String,
    /// The scopes the provider granted (space-separated).
    pub scope: String,
    /// When the access token expires (ms since the epoch); none if the provider did not say.
    pub expires_at_ms: Option<u64>,
    /// When the user connected.
    pub created_at_ms: u64,
    /// When the tokens were last written (connected or refreshed).
    pub updated_at_ms: u64,
}

/// Which connections to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionFilter {
    /// Only this tenant's.
    pub tenant: Option<String>,
    /// Only this principal's.
    pub principal: Option<String>,
    /// Only connections to this provider.
    pub provider: Option<String>,
}

/// An authorization flow under way: started when a call found no connection, ended by the
/// provider's redirect to the gateway's callback (taken once) or by its expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The hex SHA-256 of the flow's `state`; the state itself is not stored.
    pub state_hash: String,
    /// Whose connection it makes.
    pub key: ConnectionKey,
    /// The resource indicator asked for; empty if none.
    pub resource: String,
    /// The PKCE verifier, sealed by the vault for this flow's tenant, principal and provider.
    pub sealed_verifier: String,
    /// The tool of the call that is waiting for it.
    pub tool: String,
    /// The hex SHA-256 of the nonce the start page gave the browser that opened it (in a
    /// cookie); none until it is opened. The callback is taken only with that cookie.
    pub browser_hash: Option<String>,
    /// When it started.
    pub created_at_ms: u64,
    /// When it can no longer be opened or finished.
    pub expires_at_ms: u64,
    /// The call waiting for it: its `ToolCallEnvelope`, JSON (what a task waiting for the
    /// connection runs once it is made).
    pub call: String,
}
