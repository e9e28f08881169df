//! Each user's own upstream account (issue 60): the gateway's account broker, which keeps each
//! principal's tokens for the `[[oauth.provider]]`s, and the two pages of the authorization
//! code flow that connects one, on the MCP listener.
//!
//! 1. A call whose grant sends the caller's own token (`credentials = { token = { oauth =
//!    "github" } }`) and whose caller has no connection pauses, `CONNECTION_REQUIRED`
//!    (`gatehouse_host::accounts`): the broker begins a flow ([`Broker::begin`]): a random
//!    `state`, a PKCE verifier (sealed), bound to the principal, the tenant, the provider and
//!    the call, kept in the store under the state's hash; the call's result names the start
//!    page, `/oauth/start?state=...`.
//! 2. The user opens it ([`Broker::start`]): the flow is marked opened by this browser (a
//!    random nonce in a cookie, its hash in the store; a second browser cannot open it), and
//!    the browser is sent to the provider with the PKCE challenge, the state and the resource
//!    indicator (RFC 8707).
//! 3. The provider sends the browser back to `/oauth/callback` ([`Broker::callback`]): the
//!    flow is taken from the store (once: a replayed or forged state finds nothing, and nothing
//!    is stored), the cookie must be the opener's, the code is exchanged with the verifier,
//!    and the tokens are sealed ([`vault`]) and kept. The user's retry then runs the call.
//! 4. Each call that needs the token gets it fresh ([`Broker::token`]): refreshed first when
//!    it expires within `refresh_before_seconds`; a refused refresh forgets the connection, and
//!    the call pauses for a new flow. One refresh of a connection runs at a time, in a gateway
//!    (a lock) and across gateways sharing the store (the right to refresh, taken in the store
//!    for [`REFRESH_LEASE`]): providers rotate refresh tokens and take each once, and one spent
//!    twice revokes the user's grant. A gateway that finds the right held waits for the
//!    refreshed connection the other stores.
//!
//! The tokens never leave the broker but into a call's egress gate. Users' connections are
//! listed and revoked by operators through the admin API ([`Broker::connections`],
//! [`Broker::revoke`], which calls the provider's revocation endpoint where it has one).
//!
//! *The start link is a capability:* whoever opens it first connects *their* provider account
//! to the principal the flow names. It is given to that principal's call alone, expires after
//! `flow_seconds`, opens in one browser only, and its callback is taken only in that browser.
//! A gateway that signed users in could also tie it to their session there; this one has no
//! such session (docs/oauth.md).

pub mod config;
mod provider;
pub mod vault;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_host::TlsClient;
use gatehouse_host::accounts::{
    AccountError, AccountFuture, Accounts, ConnectionKey, PendingCall, UserToken, token_hash,
};
use gatehouse_host::state::{Authorization, Connection, ConnectionFilter, Store};
use oauth2::{
    AuthorizationCode, CsrfToken, PkceCodeChallenge, PkceCodeVerifier, RefreshToken,
    RequestTokenError, Scope, TokenResponse as _,
};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

pub use config::{ClientAuth, OAuthConfig, ProviderConfig};
use provider::{ExchangeError, Provider};
use vault::Vault;

/// The start page's path on the MCP listener.
pub const START_PATH: &str = "/oauth/start";
/// The callback's path on the MCP listener (the redirect URI to register at each provider).
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The cookie that ties a flow's callback to the browser that opened it.
const COOKIE: &str = "gatehouse_oauth";

/// What the vault keeps of a connection.
#[derive(Serialize, Deserialize)]
struct Tokens {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
}

/// How many principals' refresh locks and subject tokens a broker remembers before it forgets
/// the ones not in use (or expired).
const MAX_REMEMBERED: usize = 10_000;
/// How long a gateway holds the right to refresh a connection: past it (a gateway that died
/// refreshing), another takes it.
pub const REFRESH_LEASE: Duration = Duration::from_secs(30);
/// How often a gateway waiting for another's refresh reads the connection again.
const REFRESH_POLL: Duration = Duration::from_millis(100);

/// A caller's bearer JWT, kept for token exchange.
#[derive(Clone)]
struct Subject {
    token: String,
    expires_at_ms: u64,
}

/// A JWT's `exp` in ms (the token was verified before it got here; this only reads it).
fn jwt_expiry(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&payload).ok()?;
    claims["exp"].as_u64()?.checked_mul(1000)
}

/// Why `[oauth]` cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("`[oauth]`: {0}")]
pub struct OAuthConfigError(String);

/// The account broker.
pub struct Broker {
    providers: BTreeMap<String, Provider>,
    vault: Vault,
    store: Arc<dyn Store>,
    tls: TlsClient,
    /// The gateway's address as browsers reach it, without a trailing slash.
    public_url: String,
    flow: Duration,
    refresh_before: Duration,
    /// One lock per connection that is being refreshed.
    turns: Mutex<HashMap<ConnectionKey, Arc<tokio::sync::Mutex<()>>>>,
    /// The latest bearer JWT of each caller, for token exchange: by tenant and principal.
    subjects: Mutex<HashMap<(String, String), Subject>>,
    /// Each account connected here, for the streams that tell their clients.
    connected: tokio::sync::broadcast::Sender<Connected>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// A page the flow answers the browser with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// Go there (the provider's authorization endpoint), with a cookie to set.
    Redirect {
        /// Where.
        location: String,
        /// The `Set-Cookie` value.
        cookie: String,
    },
    /// The flow ended: connected, or why not (`ok` false), as text for the user.
    Done {
        /// Whether the account is connected.
        ok: bool,
        /// What to tell the user.
        message: String,
    },
}

/// A connection as operators see it: never its tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionView {
    /// The tenant.
    pub tenant: String,
    /// The principal.
    pub principal: String,
    /// The provider.
    pub provider: String,
    /// The resource indicator its tokens were issued for.
    pub resource: String,
    /// The scopes granted.
    pub scope: String,
    /// The first 16 hex digits of the access token's SHA-256.
    pub token_hash: String,
    /// When the access token expires (ms since the epoch).
    pub expires_at_ms: Option<u64>,
    /// When the user connected.
    pub created_at_ms: u64,
    /// When the tokens were last written.
    pub updated_at_ms: u64,
}

impl From<Connection> for ConnectionView {
    fn from(c: Connection) -> Self {
        Self {
            tenant: c.key.tenant,
            principal: c.key.principal,
            provider: c.key.provider,
            resource: c.resource,
            scope: c.scope,
            token_hash: c.token_hash,
            expires_at_ms: c.expires_at_ms,
            created_at_ms: c.created_at_ms,
            updated_at_ms: c.updated_at_ms,
        }
    }
}

/// A user's account connected through a flow of this gateway's: whose, and the id of the URL
/// elicitation that gave its link (`notifications/elicitation/complete` names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// The tenant.
    pub tenant: String,
    /// The principal.
    pub principal: String,
    /// [`elicitation_id`] of the flow's start link.
    pub elicitation_id: String,
}

/// The `elicitationId` of the URL elicitation of a start link: the link's hash (the link
/// itself names the flow, and is not repeated).
pub fn elicitation_id(start_url: &str) -> String {
    format!(
        "gatehouse-connect-{}",
        hex::encode(&sha2::Sha256::digest(start_url.as_bytes())[..12])
    )
}

/// The hash the store keeps of the flow a start link (`connect_url`) names.
pub fn state_hash_of(start_url: &str) -> Option<String> {
    let url = url::Url::parse(start_url).ok()?;
    let (_, state) = url.query_pairs().find(|(name, _)| name == "state")?;
    Some(sha256_hex(&state))
}

fn sha256_hex(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unavailable(what: impl std::fmt::Display) -> AccountError {
    AccountError::Unavailable(what.to_string())
}

impl Broker {
    /// Load phase: reads every provider's client secret and the vault key; `default_public`
    /// is the MCP endpoint's public origin, used unless `[oauth] public_url` names another;
    /// `default_key` is where the vault key lives unless `vault_key_file` says.
    pub fn new(
        config: &OAuthConfig,
        store: Arc<dyn Store>,
        tls: TlsClient,
        default_public: &str,
        default_key: &std::path::Path,
    ) -> Result<Self, OAuthConfigError> {
        let mut providers = BTreeMap::new();
        for provider in &config.providers {
            let loaded = Provider::load(provider).map_err(OAuthConfigError)?;
            if providers.insert(provider.id.clone(), loaded).is_some() {
                return Err(OAuthConfigError(format!(
                    "provider `{}` is configured twice",
                    provider.id
                )));
            }
        }
        let key_file = config.vault_key_file.as_deref().unwrap_or(default_key);
        let vault = Vault::from_file(key_file).map_err(OAuthConfigError)?;
        let public_url = config
            .public_url
            .as_deref()
            .unwrap_or(default_public)
            .trim_end_matches('/')
            .to_owned();
        url::Url::parse(&public_url)
            .map_err(|e| OAuthConfigError(format!("`public_url` `{public_url}`: {e}")))?;
        Ok(Self {
            providers,
            vault,
            store,
            tls,
            public_url,
            flow: Duration::from_secs(config.flow_seconds),
            refresh_before: Duration::from_secs(config.refresh_before_seconds),
            turns: Mutex::default(),
            subjects: Mutex::default(),
            connected: tokio::sync::broadcast::Sender::new(64),
        })
    }

    /// The accounts connected through this gateway from now on: what a 2025-11-25 client's
    /// stream tells it (`notifications/elicitation/complete`).
    pub fn connections_made(&self) -> tokio::sync::broadcast::Receiver<Connected> {
        self.connected.subscribe()
    }

    /// Whether a provider of this id is configured.
    pub fn has_provider(&self, id: &str) -> bool {
        self.providers.contains_key(id)
    }

    fn provider(&self, id: &str) -> Result<&Provider, AccountError> {
        self.providers
            .get(id)
            .ok_or_else(|| AccountError::UnknownProvider(id.to_owned()))
    }

    fn callback_url(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.public_url)
    }

    fn seal_tokens(&self, key: &ConnectionKey, resource: &str, tokens: &Tokens) -> String {
        let aad = vault::connection_aad(&key.tenant, &key.principal, &key.provider, resource);
        let json = serde_json::to_vec(tokens).expect("tokens serialize");
        self.vault.seal(&json, &aad)
    }

    fn open_tokens(&self, connection: &Connection) -> Option<Tokens> {
        let key = &connection.key;
        let aad = vault::connection_aad(
            &key.tenant,
            &key.principal,
            &key.provider,
            &connection.resource,
        );
        let opened = self.vault.open(&connection.sealed, &aad);
        match opened
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
        {
            Some(tokens) => Some(tokens),
            None => {
                tracing::warn!(
                    tenant = %key.tenant, principal = %key.principal, provider = %key.provider,
                    "a stored connection does not open for its row (another vault key, or copied from another row); it is not used"
                );
                None
            }
        }
    }

    /// The connection to keep for `response`, replacing `previous` (a refresh keeps its
    /// creation time, and its refresh token when the provider sent no new one).
    fn connection_of(
        &self,
        key: &ConnectionKey,
        resource: &str,
        response: &oauth2::basic::BasicTokenResponse,
        previous: Option<(&Connection, &Tokens)>,
    ) -> Connection {
        let now = gatehouse_host::state::now_ms();
        let tokens = Tokens {
            access_token: response.access_token().secret().clone(),
            refresh_token: response
                .refresh_token()
                .map(|t| t.secret().clone())
                .or_else(|| previous.and_then(|(_, t)| t.refresh_token.clone())),
        };
        let scope = response.scopes().map_or_else(
            || previous.map(|(c, _)| c.scope.clone()).unwrap_or_default(),
            |scopes| {
                scopes
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            },
        );
        Connection {
            key: key.clone(),
            resource: resource.to_owned(),
            sealed: self.seal_tokens(key, resource, &tokens),
            token_hash: token_hash(&tokens.access_token),
            scope,
            expires_at_ms: response
                .expires_in()
                .map(|d| now + u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            created_at_ms: previous.map_or(now, |(c, _)| c.created_at_ms),
            updated_at_ms: now,
        }
    }

    async fn fresh_token(&self, whose: &ConnectionKey) -> Result<Option<UserToken>, AccountError> {
        let provider = self.provider(&whose.provider)?;
        if let Some(connection) = self.stored(whose).await?
            && !self.due(&connection)
            && let Some(tokens) = self.open_tokens(&connection)
        {
            return Ok(Some(UserToken::new(whose, tokens.access_token)));
        }
        // One refresh (or exchange) per connection at a time in this gateway: most providers
        // rotate refresh tokens, and one used twice revokes the user's grant. The connection
        // is read again in turn: another call may have refreshed it meanwhile.
        let turn = self.turn(whose);
        let _turn = turn.lock().await;
        let stored = self.stored(whose).await?;
        let opened = (stored.as_ref()).and_then(|c| self.open_tokens(c).map(|t| (c, t)));
        if let Some((connection, tokens)) = &opened
            && !self.due(connection)
        {
            return Ok(Some(UserToken::new(whose, tokens.access_token.clone())));
        }
        if provider.config.exchange {
            return self.exchange_subject(provider, whose).await.map(Some);
        }
        let Some((connection, tokens)) = opened else {
            return Ok(None);
        };
        // Across gateways: the one that takes the right refreshes; the others wait for what it
        // stores (a new token), or for the right to lapse.
        let lease = u64::try_from(REFRESH_LEASE.as_millis()).unwrap_or(u64::MAX);
        loop {
            let now = gatehouse_host::state::now_ms();
            let until = now.saturating_add(lease);
            let held = (self.store)
                .lease_connection(whose.clone(), connection.token_hash.clone(), now, until)
                .await
                .map_err(unavailable)?;
            if held {
                let refreshed = self.refresh(provider, whose, connection, tokens).await;
                if refreshed.is_err() && gatehouse_host::state::now_ms() < until {
                    // The provider did not answer: the connection is as it was. Stored again,
                    // the right is given up, and the next call tries at once.
                    let _ = self.store.put_connection(connection.clone()).await;
                }
                return refreshed;
            }
            tokio::time::sleep(REFRESH_POLL).await;
            let Some(current) = self.stored(whose).await? else {
                // The other's refresh was refused: the user connects again.
                return Ok(None);
            };
            if current.token_hash != connection.token_hash {
                tracing::debug!(provider = %whose.provider, principal = %whose.principal, "another gateway refreshed the connection");
                return Ok(self
                    .open_tokens(&current)
                    .map(|tokens| UserToken::new(whose, tokens.access_token)));
            }
        }
    }

    /// Whether `connection`'s access token expires within `refresh_before_seconds`.
    fn due(&self, connection: &Connection) -> bool {
        let now = gatehouse_host::state::now_ms();
        let before = u64::try_from(self.refresh_before.as_millis()).unwrap_or(u64::MAX);
        connection
            .expires_at_ms
            .is_some_and(|at| at <= now.saturating_add(before))
    }

    /// The lock one connection's refresh takes ([`Broker::fresh_token`]).
    fn turn(&self, whose: &ConnectionKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if turns.len() > MAX_REMEMBERED {
            turns.retain(|_, turn| Arc::strong_count(turn) > 1);
        }
        Arc::clone(turns.entry(whose.clone()).or_default())
    }

    /// The connection refreshed with its refresh token; none (forgotten) if it has none or
    /// the provider refuses.
    async fn refresh(
        &self,
        provider: &Provider,
        whose: &ConnectionKey,
        connection: &Connection,
        tokens: Tokens,
    ) -> Result<Option<UserToken>, AccountError> {
        let Some(refresh) = tokens.refresh_token.clone() else {
            tracing::info!(provider = %whose.provider, principal = %whose.principal, "a connection's token expired and it has no refresh token; the user connects again");
            self.forget(whose).await?;
            return Ok(None);
        };
        let endpoints = provider.endpoints(&self.tls).await.map_err(unavailable)?;
        let client = provider
            .client(endpoints, &self.callback_url())
            .map_err(unavailable)?;
        let http = provider::http(&self.tls);
        let refresh = RefreshToken::new(refresh);
        let mut request = client.exchange_refresh_token(&refresh);
        if !connection.resource.is_empty() {
            request = request.add_extra_param("resource", connection.resource.clone());
        }
        match request.request_async(&http).await {
            Ok(response) => {
                let refreshed = self.connection_of(
                    whose,
                    &connection.resource,
                    &response,
                    Some((connection, &tokens)),
                );
                self.store
                    .put_connection(refreshed)
                    .await
                    .map_err(unavailable)?;
                tracing::info!(provider = %whose.provider, principal = %whose.principal, "a connection's token was refreshed");
                Ok(Some(UserToken::new(
                    whose,
                    response.access_token().secret().clone(),
                )))
            }
            Err(RequestTokenError::ServerResponse(refused)) => {
                tracing::info!(provider = %whose.provider, principal = %whose.principal, error = %refused.error(), "the provider refused a refresh; the user connects again");
                self.forget(whose).await?;
                Ok(None)
            }
            Err(error) => Err(unavailable(format!(
                "`{}` did not refresh the token: {error}",
                whose.provider
            ))),
        }
    }

    /// Keeps the bearer JWT that just identified `principal` of `tenant` (verified by
    /// `[mcp.jwt]`), for token exchange, until it expires; only where a provider exchanges.
    pub fn saw_subject(&self, tenant: &str, principal: &str, token: &str) {
        if !self.providers.values().any(|p| p.config.exchange) {
            return;
        }
        let Some(expires_at_ms) = jwt_expiry(token) else {
            return;
        };
        let mut subjects = self.subjects.lock().unwrap_or_else(PoisonError::into_inner);
        if subjects.len() > MAX_REMEMBERED {
            let now = gatehouse_host::state::now_ms();
            subjects.retain(|_, subject| subject.expires_at_ms > now);
        }
        subjects.insert(
            (tenant.to_owned(), principal.to_owned()),
            Subject {
                token: token.to_owned(),
                expires_at_ms,
            },
        );
    }

    /// The caller's token exchanged for one of `provider` (RFC 8693), kept like a connection
    /// until it expires (at the latest when the caller's own token does).
    async fn exchange_subject(
        &self,
        provider: &Provider,
        whose: &ConnectionKey,
    ) -> Result<UserToken, AccountError> {
        let now = gatehouse_host::state::now_ms();
        let subject = (self.subjects.lock().unwrap_or_else(PoisonError::into_inner))
            .get(&(whose.tenant.clone(), whose.principal.clone()))
            .filter(|subject| subject.expires_at_ms > now)
            .cloned()
            .ok_or_else(|| {
                AccountError::Refused(format!(
                    "tools that act as you at `{}` need you identified by a bearer token of your organisation's identity provider, and this call came without a live one",
                    whose.provider
                ))
            })?;
        let endpoints = provider.endpoints(&self.tls).await.map_err(unavailable)?;
        let exchanged = provider
            .exchange(&self.tls, &endpoints.token_endpoint, &subject.token)
            .await
            .map_err(|error| match error {
                ExchangeError::Refused(code) => AccountError::Refused(format!(
                    "`{}` refused to exchange your token ({code})",
                    whose.provider
                )),
                ExchangeError::Unavailable(why) => unavailable(format!(
                    "`{}` did not exchange the token: {why}",
                    whose.provider
                )),
            })?;
        let resource = provider.config.resource.clone().unwrap_or_default();
        let tokens = Tokens {
            access_token: exchanged.access_token,
            refresh_token: None,
        };
        let expires_at_ms = exchanged
            .expires_in
            .map_or(subject.expires_at_ms, |seconds| {
                now.saturating_add(seconds.saturating_mul(1000))
                    .min(subject.expires_at_ms)
            });
        let connection = Connection {
            key: whose.clone(),
            resource: resource.clone(),
            sealed: self.seal_tokens(whose, &resource, &tokens),
            token_hash: token_hash(&tokens.access_token),
            scope: exchanged.scope.unwrap_or_default(),
            expires_at_ms: Some(expires_at_ms),
            created_at_ms: now,
            updated_at_ms: now,
        };
        self.store
            .put_connection(connection)
            .await
            .map_err(unavailable)?;
        tracing::info!(provider = %whose.provider, principal = %whose.principal, "a caller's token was exchanged for the provider's");
        Ok(UserToken::new(whose, tokens.access_token))
    }

    async fn stored(&self, whose: &ConnectionKey) -> Result<Option<Connection>, AccountError> {
        self.store
            .connection(whose.clone())
            .await
            .map_err(unavailable)
    }

    async fn forget(&self, whose: &ConnectionKey) -> Result<(), AccountError> {
        self.store
            .delete_connection(whose.clone())
            .await
            .map(drop)
            .map_err(unavailable)
    }

    async fn begin_flow(
        &self,
        whose: &ConnectionKey,
        pending: &PendingCall,
    ) -> Result<String, AccountError> {
        let provider = self.provider(&whose.provider)?;
        let state = random_token();
        let state_hash = sha256_hex(&state);
        let verifier = PkceCodeVerifier::new(random_token());
        let aad = vault::flow_aad(
            &state_hash,
            &whose.tenant,
            &whose.principal,
            &whose.provider,
        );
        let now = gatehouse_host::state::now_ms();
        let flow = Authorization {
            state_hash,
            key: whose.clone(),
            resource: provider.config.resource.clone().unwrap_or_default(),
            sealed_verifier: self.vault.seal(verifier.secret().as_bytes(), &aad),
            tool: pending.tool.clone(),
            browser_hash: None,
            call: pending.call.clone(),
            created_at_ms: now,
            expires_at_ms: now + u64::try_from(self.flow.as_millis()).unwrap_or(u64::MAX),
        };
        self.store
            .begin_authorization(flow)
            .await
            .map_err(unavailable)?;
        Ok(format!("{}{START_PATH}?state={state}", self.public_url))
    }

    /// The start page: the flow of `state` opened by this browser, which is sent to the
    /// provider. An unknown, expired or already opened flow ends here, nothing changed.
    pub async fn start(&self, state: &str) -> Page {
        let refused = |message: &str| Page::Done {
            ok: false,
            message: message.to_owned(),
        };
        let nonce = random_token();
        let opened = self
            .store
            .open_authorization(
                sha256_hex(state),
                sha256_hex(&nonce),
                gatehouse_host::state::now_ms(),
            )
            .await;
        let flow = match opened {
            Ok(Some(flow)) => flow,
            Ok(None) => {
                return refused(
                    "This link is not valid: it expired, was opened already, or was never given. Call the tool again from your agent for a new one.",
                );
            }
            Err(error) => {
                tracing::warn!(%error, "an authorization flow could not be opened");
                return refused(
                    "The gateway could not start connecting your account; try again shortly.",
                );
            }
        };
        let Ok(provider) = self.provider(&flow.key.provider) else {
            return refused("This gateway no longer connects accounts at that provider.");
        };
        let endpoints = match provider.endpoints(&self.tls).await {
            Ok(endpoints) => endpoints,
            Err(error) => {
                tracing::warn!(provider = %flow.key.provider, %error, "the provider's metadata could not be read");
                return refused(
                    "The gateway could not reach the provider. This link is spent: call the tool again from your agent shortly for a new one.",
                );
            }
        };
        let Some(verifier) = self.verifier(&flow) else {
            return refused(
                "This link is not valid. Call the tool again from your agent for a new one.",
            );
        };
        let client = match provider.client(endpoints, &self.callback_url()) {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(provider = %flow.key.provider, %error, "the provider's endpoints are not usable");
                return refused(
                    "The gateway's settings for this provider are not usable; tell its operator.",
                );
            }
        };
        let challenge =
            PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier));
        let state = state.to_owned();
        let mut request = client
            .authorize_url(move || CsrfToken::new(state))
            .set_pkce_challenge(challenge)
            .add_scopes(provider.config.scopes.iter().cloned().map(Scope::new));
        if !flow.resource.is_empty() {
            request = request.add_extra_param("resource", flow.resource.clone());
        }
        let (location, _) = request.url();
        let secure = if self.public_url.starts_with("https:") {
            "; Secure"
        } else {
            ""
        };
        Page::Redirect {
            location: location.to_string(),
            cookie: format!(
                "{COOKIE}={nonce}; Path=/oauth; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
                self.flow.as_secs()
            ),
        }
    }

    /// The callback: the flow of `state` taken (once), checked against the opener's `cookie`
    /// (the `Cookie` header), and its `code` exchanged; the connection kept. `error` is the
    /// provider's refusal (the user declined, say).
    pub async fn callback(
        &self,
        state: Option<&str>,
        code: Option<&str>,
        error: Option<&str>,
        cookie: Option<&str>,
    ) -> Page {
        let refused = |message: String| Page::Done { ok: false, message };
        let Some(state) = state else {
            return refused("The provider sent no state back; nothing was connected.".into());
        };
        let flow = match self
            .store
            .take_authorization(sha256_hex(state), gatehouse_host::state::now_ms())
            .await
        {
            Ok(Some(flow)) => flow,
            Ok(None) => {
                tracing::warn!(
                    "an OAuth callback named no live flow (forged, replayed or expired state); nothing stored"
                );
                return refused(
                    "This sign-in does not belong to a connection under way (it expired or was used already); nothing was connected.".into(),
                );
            }
            Err(error) => {
                tracing::warn!(%error, "an authorization flow could not be taken");
                return refused(
                    "The gateway could not finish connecting your account; try again shortly."
                        .into(),
                );
            }
        };
        let nonce = cookie.and_then(|header| {
            header
                .split(';')
                .filter_map(|pair| pair.trim().split_once('='))
                .find(|(name, _)| *name == COOKIE)
                .map(|(_, value)| value.to_owned())
        });
        if nonce.map(|n| sha256_hex(&n)) != flow.browser_hash {
            tracing::warn!(provider = %flow.key.provider, principal = %flow.key.principal, "an OAuth callback came from another browser than the one that opened the flow; nothing stored");
            return refused(
                "This sign-in finished in another browser than the one that started it; nothing was connected. Call the tool again from your agent for a new link.".into(),
            );
        }
        if let Some(error) = error {
            return refused(format!(
                "The provider did not connect your account ({error}); nothing was connected."
            ));
        }
        let Some(code) = code else {
            return refused("The provider sent no code back; nothing was connected.".into());
        };
        match self.exchange(&flow, code).await {
            Ok(()) => {
                let link = format!("{}{START_PATH}?state={state}", self.public_url);
                let _ = self.connected.send(Connected {
                    tenant: flow.key.tenant.clone(),
                    principal: flow.key.principal.clone(),
                    elicitation_id: elicitation_id(&link),
                });
                Page::Done {
                    ok: true,
                    message: format!(
                        "Your {} account is connected. Go back to your agent: the call it was making runs when it calls again.",
                        flow.key.provider
                    ),
                }
            }
            Err(error) => {
                tracing::warn!(provider = %flow.key.provider, principal = %flow.key.principal, %error, "an authorization code could not be exchanged; nothing stored");
                refused(format!(
                    "The provider did not give the gateway a token ({error}); nothing was connected."
                ))
            }
        }
    }

    /// The PKCE verifier `flow` keeps sealed for itself, if it opens.
    fn verifier(&self, flow: &Authorization) -> Option<String> {
        let aad = vault::flow_aad(
            &flow.state_hash,
            &flow.key.tenant,
            &flow.key.principal,
            &flow.key.provider,
        );
        let opened = self.vault.open(&flow.sealed_verifier, &aad).ok()?;
        String::from_utf8(opened).ok()
    }

    async fn exchange(&self, flow: &Authorization, code: &str) -> Result<(), String> {
        let provider = self
            .provider(&flow.key.provider)
            .map_err(|e| e.to_string())?;
        let verifier = (self.verifier(flow)).ok_or("the flow's verifier does not open")?;
        let endpoints = provider.endpoints(&self.tls).await?;
        let client = provider.client(endpoints, &self.callback_url())?;
        let http = provider::http(&self.tls);
        let mut request = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier));
        if !flow.resource.is_empty() {
            request = request.add_extra_param("resource", flow.resource.clone());
        }
        let response = request.request_async(&http).await.map_err(|e| match e {
            RequestTokenError::ServerResponse(refused) => refused.to_string(),
            other => other.to_string(),
        })?;
        let connection = self.connection_of(&flow.key, &flow.resource, &response, None);
        self.store
            .put_connection(connection)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(provider = %flow.key.provider, principal = %flow.key.principal, tenant = %flow.key.tenant, tool = %flow.tool, "an account was connected");
        Ok(())
    }

    /// Connections, for operators (never their tokens).
    pub async fn connections(
        &self,
        filter: ConnectionFilter,
    ) -> Result<Vec<ConnectionView>, gatehouse_host::state::StoreError> {
        Ok(self
            .store
            .connections(filter)
            .await?
            .into_iter()
            .map(ConnectionView::from)
            .collect())
    }

    /// Revokes a connection: its refresh token (else its access token) revoked at the
    /// provider where it has a revocation endpoint (a failure there is logged, the tokens are
    /// forgotten anyway), then the row removed. False if there was none.
    pub async fn revoke(&self, whose: &ConnectionKey) -> Result<bool, AccountError> {
        let Some(connection) = self.stored(whose).await? else {
            return Ok(false);
        };
        if let (Ok(provider), Some(tokens)) = (
            self.provider(&whose.provider),
            self.open_tokens(&connection),
        ) && let Err(error) = self.revoke_at(provider, tokens).await
        {
            tracing::warn!(provider = %whose.provider, principal = %whose.principal, %error, "the provider did not revoke the token; the gateway forgets it anyway");
        }
        self.store
            .delete_connection(whose.clone())
            .await
            .map_err(unavailable)
    }

    async fn revoke_at(&self, provider: &Provider, tokens: Tokens) -> Result<(), String> {
        let endpoints = provider.endpoints(&self.tls).await?;
        let Some(endpoint) = &endpoints.revocation_endpoint else {
            return Ok(());
        };
        // The refresh token: revoking it revokes the grant (RFC 7009, section 2.1).
        let (token, hint) = match tokens.refresh_token {
            Some(refresh) => (refresh, "refresh_token"),
            None => (tokens.access_token, "access_token"),
        };
        provider.revoke(&self.tls, endpoint, &token, hint).await
    }
}

impl Accounts for Broker {
    fn token<'a>(&'a self, whose: &'a ConnectionKey) -> AccountFuture<'a, Option<UserToken>> {
        Box::pin(self.fresh_token(whose))
    }

    fn begin<'a>(
        &'a self,
        whose: &'a ConnectionKey,
        pending: &'a PendingCall,
    ) -> AccountFuture<'a, String> {
        Box::pin(self.begin_flow(whose, pending))
    }
}

/// A page's HTML: the message, escaped.
pub fn html(ok: bool, message: &str) -> String {
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let title = if ok { "Connected" } else { "Not connected" };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><h1 id=\"outcome\">{title}</h1><p id=\"message\">{escaped}</p></body></html>"
    )
}
