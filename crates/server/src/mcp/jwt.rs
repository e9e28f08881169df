//! Bearer JWTs at gate 1: tokens an authorization server issued, verified by `jsonwebtoken`.
//!
//! `[mcp.jwt]` names the issuer and audience a token must carry, the algorithms accepted (an
//! explicit allow list of `RS256`, `ES256`, `EdDSA`, `HS256`) and where the keys come from:
//! a JWKS file, a JWKS URL, or an HS256 secret. For each token:
//! 1. the header is read; its `alg` must be in the allow list (`alg: none` never is);
//! 2. the key is chosen by the header's `kid` (without `kid`: the only key of the alg's type;
//!    a key without a `kid`, such as the HS256 secret, serves any `kid`);
//!    a key whose type does not match the alg, or whose JWK `alg` differs, is never used, so an
//!    RS256 public key can never serve as an HS256 secret (algorithm confusion);
//! 3. `jsonwebtoken` checks the signature, `iss`, `aud`, `exp` (required) and `nbf`, allowing
//!    `leeway_secs` of clock skew;
//! 4. the tenant is the `tenant_claim` claim (or the fixed `tenant` when the token has none),
//!    the principal the `principal_claim` claim (default `sub`), and the caller's roles and
//!    groups, which policies see, the `roles_claim` and `groups_claim` claims (default `roles`
//!    and `groups`: a string or an array of strings; absent, none; any other type refuses
//!    the token, rather than run a call with roles silently dropped).
//!
//! A JWKS URL is fetched when the server starts ([`JwtVerifier::refresh`]), again when the set
//! is older than `refresh_secs`, and when a token names a `kid` the set lacks (at most once per
//! [`MIN_REFETCH`]), through a checked client: `https` only (plain `http` to a loopback host
//! for local identity providers), bounded in time ([`FETCH_TIMEOUT`]) and size
//! ([`MAX_JWKS_BYTES`]), redirects never followed.
//!
//! ```toml
//! [mcp.jwt]
//! issuer = "https://idp.example.com/"
//! audience = "https://gatehouse.example.com/mcp"
//! algorithms = ["RS256"]
//! jwks_url = "https://idp.example.com/.well-known/jwks.json"
//! ```

use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gatehouse_core::model::Claims;
use gatehouse_host::TlsClient;
use http_body_util::{BodyExt, Empty, Limited};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::caller::{Caller, caller};

/// Longest a JWKS fetch may take, connect to last byte: an identity provider slower than this
/// is treated as down rather than holding callers.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest JWKS accepted: real sets hold a handful of keys (a few KiB); this bounds memory.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Fewest seconds between two fetches caused by unknown `kid`s, so tokens with made-up `kid`s
/// cannot make the gateway hammer the identity provider.
pub const MIN_REFETCH: Duration = Duration::from_secs(1);

/// The `[mcp.jwt]` table. Exactly one key source: `jwks_file`, `jwks_url`, or (HS256)
/// `secret_env`/`secret_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The `iss` every token must carry (required).
    pub issuer: String,
    /// The `aud` every token must carry, usually this endpoint's URL (required).
    pub audience: String,
    /// Algorithms accepted, from `RS256`, `ES256`, `EdDSA`, `HS256` (required, not empty).
    /// A token with any other `alg` is refused.
    pub algorithms: Vec<String>,
    /// A JWKS file (`{"keys": [...]}`), read at start.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// A JWKS URL, fetched at start and refreshed (see the module docs). `https`, or `http`
    /// to a loopback host.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Environment variable holding the HS256 secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// File holding the HS256 secret (surrounding whitespace trimmed).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds. Default: 60.
    #[serde(default = "defaults::leeway_secs")]
    pub leeway_secs: u64,
    /// Age after which a `jwks_url` set is fetched again, in seconds. Default: 300.
    #[serde(default = "defaults::refresh_secs")]
    pub refresh_secs: u64,
    /// The claim naming the tenant. Default: `tenant`.
    #[serde(default = "defaults::tenant_claim")]
    pub tenant_claim: String,
    /// The claim naming the principal. Default: `sub`.
    #[serde(default = "defaults::principal_claim")]
    pub principal_claim: String,
    /// Tenant for tokens without the tenant claim. Default: none, so such tokens are refused.
    #[serde(default)]
    pub tenant: Option<String>,
    /// The claim naming the caller's roles, which policies see (`action.claims.roles`; in
    /// Cedar rules, `principal.roles`). Default: `roles`.
    #[serde(default = "defaults::roles_claim")]
    pub roles_claim: String,
    /// The claim naming the caller's groups (`action.claims.groups`; `principal.groups`).
    /// Default: `groups`.
    #[serde(default = "defaults::groups_claim")]
    pub groups_claim: String,
}

mod defaults {
    pub fn leeway_secs() -> u64 {
        60
    }
    /// Five minutes: a rotated key is picked up on first use anyway (unknown `kid`).
    pub fn refresh_secs() -> u64 {
        300
    }
    pub fn tenant_claim() -> String {
        "tenant".to_owned()
    }
    pub fn principal_claim() -> String {
        "sub".to_owned()
    }
    pub fn roles_claim() -> String {
        "roles".to_owned()
    }
    pub fn groups_claim() -> String {
        "groups".to_owned()
    }
}

/// Why `[mcp.jwt]` cannot be used, or its keys cannot be fetched.
#[derive(Debug, thiserror::Error)]
#[error("`[mcp.jwt]`: {0}")]
pub struct JwtConfigError(String);

/// Why a token was refused. Sent to the caller with HTTP 401 (never contains the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// The header is not a JWT header this gateway reads.
    #[error("the bearer token is not a well-formed JWT")]
    Malformed,
    /// `alg` is not in `[mcp.jwt] algorithms`.
    #[error("the token's algorithm `{0}` is not accepted")]
    Algorithm(String),
    /// No key matches the token's `kid` (and alg).
    #[error("no key of this gateway matches the token (kid `{}`)", .0.as_deref().unwrap_or("none"))]
    UnknownKey(Option<String>),
    /// Signature, issuer, audience or time checks failed.
    #[error("the token is not valid: {0}")]
    Invalid(String),
    /// A claim the gateway needs is missing or not a string.
    #[error("the token has no string claim `{0}`")]
    MissingClaim(String),
    /// The roles or groups claim is neither a string nor an array of strings.
    #[error("the token's claim `{0}` must be a string or an array of strings")]
    ClaimType(String),
}

/// One usable key: its `kid`, the one alg it may verify, and the key.
struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

impl Key {
    /// Whether this key may verify a token with `header`: the same alg, and the token's `kid`
    /// if both name one.
    fn fits(&self, header: &jsonwebtoken::Header) -> bool {
        self.alg == header.alg
            && (self.kid.is_none() || header.kid.is_none() || self.kid == header.kid)
    }
}

struct KeySet {
    keys: Vec<Key>,
    fetched: Option<Instant>,
}

/// The verifier built from `[mcp.jwt]`. Shared by every request.
pub struct JwtVerifier {
    algorithms: Vec<Algorithm>,
    validation: Validation,
    tenant_claim: String,
    principal_claim: String,
    roles_claim: String,
    groups_claim: String,
    tenant: Option<String>,
    keys: RwLock<KeySet>,
    url: Option<(url::Url, TlsClient, Duration)>,
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// Load phase: checks the table, reads a JWKS file or secret. A `jwks_url` is checked
    /// here and fetched by [`refresh`](Self::refresh) (or on first use).
    pub fn load(config: &JwtConfig, tls: &TlsClient) -> Result<Self, JwtConfigError> {
        let err = JwtConfigError;
        if config.algorithms.is_empty() {
            return Err(err(
                "`algorithms` is empty; list those your issuer signs with, e.g. [\"RS256\"]"
                    .to_owned(),
            ));
        }
        let algorithms = config
            .algorithms
            .iter()
            .map(|name| {
                parse_alg(name).ok_or_else(|| {
                    err(format!(
                        "algorithm `{name}` is not supported; use RS256, ES256, EdDSA or HS256"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let secret = config.secret_env.is_some() || config.secret_file.is_some();
        let sources = [
            config.jwks_file.is_some(),
            config.jwks_url.is_some(),
            secret,
        ];
        if sources.iter().filter(|s| **s).count() != 1 {
            return Err(err(
                "set exactly one key source: `jwks_file`, `jwks_url`, or `secret_env`/`secret_file` (HS256)".to_owned(),
            ));
        }
        if secret != algorithms.contains(&Algorithm::HS256) || (secret && algorithms.len() > 1) {
            return Err(err(
                "HS256 needs a secret and a secret serves only HS256: with `secret_env`/`secret_file` set `algorithms = [\"HS256\"]`; with JWKS keys leave HS256 out".to_owned(),
            ));
        }
        let mut keys = Vec::new();
        if secret {
            let value = gatehouse_core::secret::read(
                config.secret_env.as_deref(),
                config.secret_file.as_deref(),
            )
            .map_err(|m| err(format!("the HS256 secret: {m}")))?;
            keys.push(Key {
                kid: None,
                alg: Algorithm::HS256,
                key: DecodingKey::from_secret(value.expose().as_bytes()),
            });
        }
        if let Some(path) = &config.jwks_file {
            let text = std::fs::read(path)
                .map_err(|e| err(format!("cannot read `jwks_file` `{}`: {e}", path.display())))?;
            keys = parse_jwks(&text, &algorithms)
                .map_err(|m| err(format!("`jwks_file` `{}`: {m}", path.display())))?;
        }
        let url = match &config.jwks_url {
            None => None,
            Some(raw) => Some((
                crate::outbound::checked_url(raw)
                    .map_err(|problem| err(format!("`jwks_url` {problem}")))?,
                tls.clone(),
                Duration::from_secs(config.refresh_secs),
            )),
        };
        let mut validation = Validation::new(algorithms[0]);
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = config.leeway_secs;
        Ok(Self {
            algorithms,
            validation,
            tenant_claim: config.tenant_claim.clone(),
            principal_claim: config.principal_claim.clone(),
            roles_claim: config.roles_claim.clone(),
            groups_claim: config.groups_claim.clone(),
            tenant: config.tenant.clone(),
            keys: RwLock::new(KeySet {
                keys,
                fetched: None,
            }),
            url,
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// Fetches the `jwks_url` set now (the server's start; no-op for a file or secret). An
    /// error leaves the previous set in place.
    pub async fn refresh(&self) -> Result<(), JwtConfigError> {
        let Some((url, tls, _)) = &self.url else {
            return Ok(());
        };
        let _fetching = self.fetching.lock().await;
        let body = tokio::time::timeout(FETCH_TIMEOUT, fetch(url, tls))
            .await
            .map_err(|_| format!("no answer within {} s", FETCH_TIMEOUT.as_secs()))
            .and_then(|fetched| fetched)
            .map_err(|m| JwtConfigError(format!("cannot fetch `jwks_url` {url}: {m}")))?;
        let keys = parse_jwks(&body, &self.algorithms)
            .map_err(|m| JwtConfigError(format!("`jwks_url` {url}: {m}")))?;
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = KeySet {
            keys,
            fetched: Some(Instant::now()),
        };
        Ok(())
    }

    /// Gate 1 for a bearer that is a JWT: the caller it names, or why not.
    pub async fn verify(&self, token: &str) -> Result<Caller, JwtError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
        if !self.algorithms.contains(&header.alg) {
            return Err(JwtError::Algorithm(format!("{:?}", header.alg)));
        }
        if let Some((_, _, max_age)) = &self.url {
            let (stale, known, recent) = {
                let set = self.keys.read().unwrap_or_else(PoisonError::into_inner);
                let age = set.fetched.map(|at| at.elapsed());
                (
                    age.is_none_or(|age| age > *max_age),
                    set.keys.iter().any(|k| k.fits(&header)),
                    age.is_some_and(|age| age < MIN_REFETCH),
                )
            };
            if (stale || (!known && !recent))
                && let Err(error) = self.refresh().await
            {
                tracing::warn!(%error, "keeping the previous JWKS");
            }
        }
        let set = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        let mut candidates = set.keys.iter().filter(|k| k.fits(&header));
        let key = match (candidates.next(), candidates.next()) {
            (Some(key), None) => key,
            // Several keys of this alg and no `kid` to choose: refuse rather than guess.
            _ => return Err(JwtError::UnknownKey(header.kid)),
        };
        let mut validation = self.validation.clone();
        validation.algorithms = vec![header.alg];
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| JwtError::Invalid(reason(&e)))?
            .claims;
        let string = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
        let tenant = string(&self.tenant_claim)
            .or_else(|| self.tenant.clone())
            .ok_or_else(|| JwtError::MissingClaim(self.tenant_claim.clone()))?;
        let principal = string(&self.principal_claim)
            .ok_or_else(|| JwtError::MissingClaim(self.principal_claim.clone()))?;
        let mut caller = caller(&tenant, principal);
        caller.claims = Claims {
            roles: strings(&claims, &self.roles_claim)?,
            groups: strings(&claims, &self.groups_claim)?,
        };
        Ok(caller)
    }
}

/// The strings of claim `name`: none if absent, one if a string, each of an array of strings.
fn strings(claims: &Map<String, Value>, name: &str) -> Result<Vec<String>, JwtError> {
    match claims.get(name) {
        None => Ok(Vec::new()),
        Some(Value::String(one)) => Ok(vec![one.clone()]),
        Some(Value::Array(items)) => (items.iter())
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| JwtError::ClaimType(name.to_owned())),
        Some(_) => Err(JwtError::ClaimType(name.to_owned())),
    }
}

/// What failed, for the caller.
fn reason(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    // `ErrorKind` is non-exhaustive: kinds not named here keep the crate's own wording.
    match error.kind() {
        ErrorKind::InvalidSignature => "the signature does not verify".to_owned(),
        ErrorKind::ExpiredSignature => "the token has expired (`exp`)".to_owned(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (`nbf`)".to_owned(),
        ErrorKind::InvalidIssuer => {
            "the issuer (`iss`) is not the one this gateway trusts".to_owned()
        }
        ErrorKind::InvalidAudience => "the audience (`aud`) is not this gateway".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the `{claim}` claim is missing"),
        _ => error.to_string(),
    }
}

/// Whether `token` has a JWT's shape (three base64url parts, the first a JSON object with
/// `alg`). Such a bearer is verified as a JWT when `[mcp.jwt]` is set.
pub fn looks_like_jwt(token: &str) -> bool {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Map<String, Value>>(&bytes).ok())
        .is_some_and(|header| header.contains_key("alg"))
}

fn parse_alg(name: &str) -> Option<Algorithm> {
    match name {
        "RS256" => Some(Algorithm::RS256),
        "ES256" => Some(Algorithm::ES256),
        "EdDSA" => Some(Algorithm::EdDSA),
        "HS256" => Some(Algorithm::HS256),
        _ => None,
    }
}

/// The usable keys of a JWKS: each public key with the one allowed alg it can verify. Keys of
/// other types (and symmetric `oct` keys: a secret never comes from a JWKS) are skipped.
fn parse_jwks(bytes: &[u8], allowed: &[Algorithm]) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a JWKS (`{{\"keys\": [...]}}`): {e}"))?;
    let keys: Vec<Key> = set
        .keys
        .iter()
        .filter_map(|jwk| key(jwk, allowed))
        .collect();
    if keys.is_empty() {
        return Err(format!("no key usable with the algorithms {allowed:?}"));
    }
    Ok(keys)
}

fn key(jwk: &Jwk, allowed: &[Algorithm]) -> Option<Key> {
    use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve};
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    // A JWK that names its alg may verify only that alg.
    if let Some(named) = &jwk.common.key_algorithm
        && format!("{named:?}") != format!("{alg:?}")
    {
        return None;
    }
    if !allowed.contains(&alg) {
        return None;
    }
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key: DecodingKey::from_jwk(jwk).ok()?,
    })
}

/// One GET, no redirects, body within [`MAX_JWKS_BYTES`]. The caller bounds the time.
async fn fetch(url: &url::Url, tls: &TlsClient) -> Result<Bytes, String> {
    let tcp = crate::outbound::connect(url).await?;
    let request = http::Request::get(&url[url::Position::BeforePath..])
        .header(http::header::HOST, url.authority())
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = crate::outbound::send(url, tcp, tls, request).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(if status.is_redirection() {
            format!("answered {status}; redirects are not followed, configure the final URL")
        } else {
            format!("answered {status}")
        });
    }
    Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .map_err(|e| format!("cannot read the body (at most {MAX_JWKS_BYTES} bytes): {e}"))
}

#[cfg(test)]
pub(super) mod tests;
