//! Gate 1, identify: who is calling, from the HTTP request ([`Identity::identify`]).
//!
//! A caller presents `Authorization: Bearer <token>`. In order:
//! 1. the token is looked up among the operator's `[[mcp.api_key]]` entries (read once at
//!    start, from an environment variable or a file, and kept only as digests:
//!    [`crate::bearer`]); a match yields the key's tenant and principal;
//! 2. otherwise, if `[mcp.jwt]` is set and the token has a JWT's shape, it is verified as a JWT
//!    ([`super::jwt`]) and its claims name the tenant and principal; a JWT that fails is
//!    refused with the reason, never tried as anything else;
//! 3. otherwise the token is refused as unknown.
//!
//! A request without `Authorization` runs as `[mcp] anonymous_tenant` if the operator set one,
//! and is refused otherwise. A present but unknown, malformed or invalid token is always
//! refused, never downgraded to anonymous.

use std::path::PathBuf;

use gatehouse_core::model::Claims;
use http::HeaderMap;
use serde::{Deserialize, Serialize};

use super::caller::{Caller, caller};
use super::jwt::{JwtError, JwtVerifier, looks_like_jwt};
use crate::bearer::{Source, TokenSet, bearer};

/// One `[[mcp.api_key]]`: a bearer key and who it identifies. Exactly one of `env` and `file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The tenant calls with this key run for.
    pub tenant: String,
    /// The principal id recorded on the call, e.g. `agent:support-bot`. Default:
    /// `api-key:<tenant>`.
    #[serde(default)]
    pub principal: Option<String>,
    /// Environment variable of the gateway process holding the key.
    #[serde(default)]
    pub env: Option<String>,
    /// File holding the key (surrounding whitespace is trimmed).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Roles of this key's caller, which policies see (`action.claims.roles`; in Cedar rules,
    /// `principal.roles`). Default: none.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Groups of this key's caller (`action.claims.groups`; `principal.groups`). Default: none.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// Why a `[[mcp.api_key]]` entry cannot be used. Never contains the key.
#[derive(Debug, thiserror::Error)]
#[error("`[[mcp.api_key]]` #{} (tenant `{tenant}`): {problem}", .index + 1)]
pub struct ApiKeyError {
    /// Position of the entry (0-based; the message counts from 1, as people do).
    pub index: usize,
    /// Its tenant.
    pub tenant: String,
    /// What is wrong and the fix.
    pub problem: String,
}

/// Why a request was not identified. Sent to the caller with HTTP 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// No `Authorization` header and no anonymous tenant.
    #[error("this gateway needs an API key: send `Authorization: Bearer <key>`")]
    Missing,
    /// Not `Bearer <key>`.
    #[error("the Authorization header must be `Bearer <key>`")]
    Malformed,
    /// No configured key matches.
    #[error("the API key is not valid for this gateway")]
    Unknown,
    /// A JWT was presented and refused.
    #[error("{0}")]
    Jwt(JwtError),
}

impl IdentityError {
    /// Whether the request presented a token (refused), as opposed to none: RFC 6750 then
    /// asks for `error="invalid_token"` in `WWW-Authenticate`.
    pub fn token_presented(&self) -> bool {
        match self {
            Self::Missing => false,
            Self::Malformed | Self::Unknown | Self::Jwt(_) => true,
        }
    }
}

/// Gate 1: the API keys and, if `[mcp.jwt]` is set, the JWT verifier.
#[derive(Debug)]
pub struct Identity {
    keys: ApiKeys,
    jwt: Option<JwtVerifier>,
}

impl Identity {
    /// Both ways of identifying a caller, loaded.
    pub fn new(keys: ApiKeys, jwt: Option<JwtVerifier>) -> Self {
        Self { keys, jwt }
    }

    /// The JWT verifier, if `[mcp.jwt]` is set.
    pub fn jwt(&self) -> Option<&JwtVerifier> {
        self.jwt.as_ref()
    }

    /// The bearer token of `headers` if it is a JWT this endpoint verifies rather than an API
    /// key: after [`Identity::identify`] admitted the caller, the token that identified them.
    pub fn jwt_of<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        let token = bearer(headers).ok()??;
        (self.jwt.is_some() && looks_like_jwt(token) && self.keys.lookup(token).is_none())
            .then_some(token)
    }

    /// Gate 1 for one request (steps 1-3 of the module docs).
    pub async fn identify(&self, headers: &HeaderMap) -> Result<Caller, IdentityError> {
        let Some(token) = bearer(headers).map_err(|()| IdentityError::Malformed)? else {
            return self.keys.anonymous.clone().ok_or(IdentityError::Missing);
        };
        if let Some(caller) = self.keys.lookup(token) {
            return Ok(caller);
        }
        match &self.jwt {
            Some(jwt) if looks_like_jwt(token) => {
                jwt.verify(token).await.map_err(IdentityError::Jwt)
            }
            _ => Err(IdentityError::Unknown),
        }
    }
}

/// The operator's API keys, loaded once.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    keys: TokenSet<Caller>,
    anonymous: Option<Caller>,
}

impl ApiKeys {
    /// Load phase: reads every key. A missing variable or file, an empty key, or two entries
    /// with the same key fail the start, naming the entry.
    pub fn load(
        entries: &[ApiKeyConfig],
        anonymous_tenant: Option<&str>,
    ) -> Result<Self, ApiKeyError> {
        let keys = TokenSet::load(
            entries.iter().map(|entry| {
                let source = Source {
                    env: entry.env.as_deref(),
                    file: entry.file.as_deref(),
                };
                let principal = entry
                    .principal
                    .clone()
                    .unwrap_or_else(|| format!("api-key:{}", entry.tenant));
                let mut caller = caller(&entry.tenant, principal);
                caller.claims = Claims {
                    roles: entry.roles.clone(),
                    groups: entry.groups.clone(),
                };
                (source, caller)
            }),
            "give each caller its own key",
        )
        .map_err(|error| ApiKeyError {
            index: error.index,
            tenant: entries[error.index].tenant.clone(),
            problem: error.problem,
        })?;
        let anonymous = anonymous_tenant.map(|tenant| caller(tenant, "anonymous".to_owned()));
        Ok(Self { keys, anonymous })
    }

    /// The caller of a configured key.
    fn lookup(&self, key: &str) -> Option<Caller> {
        self.keys.find(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// API keys only, as a server without `[mcp.jwt]` identifies.
    struct Keys(Identity);

    impl Keys {
        fn identify(&self, headers: &HeaderMap) -> Result<Caller, IdentityError> {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(self.0.identify(headers))
        }
    }

    fn keys(anonymous: Option<&str>) -> (Keys, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("acme"), "key-acme\n").unwrap();
        std::fs::write(dir.path().join("globex"), "key-globex").unwrap();
        let entry = |tenant: &str, principal: Option<&str>| ApiKeyConfig {
            tenant: tenant.to_owned(),
            principal: principal.map(str::to_owned),
            env: None,
            file: Some(dir.path().join(tenant)),
            roles: principal
                .map(|_| vec!["support".to_owned()])
                .unwrap_or_default(),
            groups: principal.map(|_| vec!["eu".to_owned()]).unwrap_or_default(),
        };
        let keys = ApiKeys::load(
            &[entry("acme", Some("agent:support")), entry("globex", None)],
            anonymous,
        )
        .unwrap();
        (Keys(Identity::new(keys, None)), dir)
    }

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn a_known_key_yields_its_tenant_principal_and_claims() {
        let (keys, _dir) = keys(None);
        let acme = keys.identify(&headers(Some("Bearer key-acme"))).unwrap();
        assert_eq!(acme.tenant, "acme");
        assert_eq!(acme.principal.id, "agent:support");
        assert_eq!(
            acme.claims,
            Claims {
                roles: vec!["support".to_owned()],
                groups: vec!["eu".to_owned()],
            }
        );
        let globex = keys.identify(&headers(Some("Bearer key-globex"))).unwrap();
        assert_eq!(
            (globex.tenant.as_str(), globex.principal.id.as_str()),
            ("globex", "api-key:globex")
        );
        assert!(globex.claims.is_empty());
    }

    #[test]
    fn missing_malformed_and_unknown_keys_are_refused() {
        let (keys, _dir) = keys(None);
        assert_eq!(keys.identify(&headers(None)), Err(IdentityError::Missing));
        for malformed in [
            "key-acme",
            "Basic a2V5LWFjbWU=",
            "Bearer ",
            "bearer key-acme",
        ] {
            assert_eq!(
                keys.identify(&headers(Some(malformed))),
                Err(IdentityError::Malformed),
                "{malformed}"
            );
        }
        assert_eq!(
            keys.identify(&headers(Some("Bearer key-acme2"))),
            Err(IdentityError::Unknown)
        );
    }

    #[test]
    fn anonymous_applies_only_without_a_header() {
        let (keys, _dir) = keys(Some("public"));
        assert_eq!(keys.identify(&headers(None)).unwrap().tenant, "public");
        assert_eq!(
            keys.identify(&headers(Some("Bearer wrong"))),
            Err(IdentityError::Unknown)
        );
    }

    #[test]
    fn bad_entries_fail_the_load_naming_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k"), "k-7f3a9").unwrap();
        let entry = |env: Option<&str>, file: Option<PathBuf>| ApiKeyConfig {
            tenant: "acme".to_owned(),
            principal: None,
            env: env.map(str::to_owned),
            file,
            roles: Vec::new(),
            groups: Vec::new(),
        };
        let err = |entries: &[ApiKeyConfig]| ApiKeys::load(entries, None).unwrap_err().to_string();
        assert!(
            err(&[entry(None, None)])
                .contains("#1 (tenant `acme`): set exactly one of `env` and `file`")
        );
        assert!(
            err(&[entry(Some("GATEHOUSE_TEST_UNSET_KEY_VAR"), None)])
                .contains("`GATEHOUSE_TEST_UNSET_KEY_VAR` is not set")
        );
        let file = Some(dir.path().join("k"));
        let twice = err(&[entry(None, file.clone()), entry(None, file)]);
        assert!(
            twice.contains("#2 (tenant `acme`)") && twice.contains("configured twice"),
            "{twice}"
        );
        assert!(!twice.contains("k-7f3a9"));
    }

    #[test]
    fn a_jwt_is_verified_never_downgraded_and_api_keys_still_work() {
        use crate::mcp::jwt::tests::{claims, rsa_key, sign};
        use crate::mcp::jwt::{JwtConfig, JwtVerifier};
        let (Keys(api_only), dir) = keys(Some("public"));
        let (rsa, _) = rsa_key("r1");
        let jwks = dir.path().join("jwks.json");
        std::fs::write(
            &jwks,
            serde_json::json!({ "keys": [rsa.jwk.clone()] }).to_string(),
        )
        .unwrap();
        let config: JwtConfig = toml::from_str(&format!(
            "issuer = \"https://idp.test/\"\naudience = \"https://gatehouse.test/mcp\"\nalgorithms = [\"RS256\"]\njwks_file = {:?}",
            jwks.display().to_string()
        ))
        .unwrap();
        let verifier = JwtVerifier::load(&config, &gatehouse_host::TlsClient::default()).unwrap();
        let with_jwt = Keys(Identity::new(
            ApiKeys::load(
                &[ApiKeyConfig {
                    tenant: "acme".to_owned(),
                    principal: None,
                    env: None,
                    file: Some(dir.path().join("acme")),
                    roles: Vec::new(),
                    groups: Vec::new(),
                }],
                Some("public"),
            )
            .unwrap(),
            Some(verifier),
        ));
        let good = sign(&rsa, &claims("globex", "user:7"));
        let caller = with_jwt
            .identify(&headers(Some(&format!("Bearer {good}"))))
            .unwrap();
        assert_eq!(
            (
                caller.tenant.as_str(),
                caller.principal.id.as_str(),
                caller.principal.tenant.as_str()
            ),
            ("globex", "user:7", "globex")
        );
        let mut expired = claims("globex", "user:7");
        expired["exp"] = serde_json::json!(0);
        let refused =
            with_jwt.identify(&headers(Some(&format!("Bearer {}", sign(&rsa, &expired)))));
        assert_eq!(
            refused,
            Err(IdentityError::Jwt(JwtError::Invalid(
                "the token has expired (`exp`)".to_owned()
            )))
        );
        assert!(refused.unwrap_err().token_presented());
        assert_eq!(
            with_jwt
                .identify(&headers(Some("Bearer key-acme")))
                .unwrap()
                .tenant,
            "acme"
        );
        assert_eq!(with_jwt.identify(&headers(None)).unwrap().tenant, "public");
        // Without `[mcp.jwt]` a valid JWT is just an unknown API key.
        assert_eq!(
            Keys(api_only).identify(&headers(Some(&format!("Bearer {good}")))),
            Err(IdentityError::Unknown)
        );
        assert!(!IdentityError::Missing.token_presented());
    }
}
