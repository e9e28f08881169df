//! Who is calling the admin API: `Authorization: Bearer <token>` looked up among the
//! `[[admin.token]]` entries (read once at start and kept as digests: [`crate::bearer`]),
//! giving the token's principal and roles.

use http::HeaderMap;

use super::config::{AdminTokenConfig, Role};
use crate::bearer::{Source, TokenSet, bearer};

/// An identified operator: the token's principal and roles; or a user signed in to the console
/// with their own credential (`tenant` set, no roles), who may see and revoke their own
/// connections only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// The principal the token acts as.
    pub principal: String,
    /// What it may do.
    pub roles: Vec<Role>,
    /// A user's tenant, when the console session is a user's (their MCP credential); none
    /// for an `[[admin.token]]`.
    pub tenant: Option<String>,
}

/// Why a `[[admin.token]]` entry cannot be used. Never contains the token.
#[derive(Debug, thiserror::Error)]
#[error("`[[admin.token]]` #{} (principal `{principal}`): {problem}", .index + 1)]
pub struct TokenError {
    /// Position of the entry (0-based; the message counts from 1, as people do).
    pub index: usize,
    /// Its principal.
    pub principal: String,
    /// What is wrong and the fix.
    pub problem: String,
}

/// Why a request was not identified (HTTP 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("the admin API needs a token: send `Authorization: Bearer <token>`")]
    Missing,
    /// Not `Bearer <token>`.
    #[error("the Authorization header must be `Bearer <token>`")]
    Malformed,
    /// No configured token matches.
    #[error("the token is not valid for this admin API")]
    Unknown,
}

/// The operator tokens, loaded once.
#[derive(Debug, Default)]
pub struct Tokens {
    tokens: TokenSet<Operator>,
}

impl Tokens {
    /// Load phase: reads every token. A missing variable or file, an empty token, no roles,
    /// or a token configured twice fails the start, naming the entry.
    pub fn load(entries: &[AdminTokenConfig]) -> Result<Self, TokenError> {
        let problem = |index: usize, problem: String| TokenError {
            index,
            principal: entries[index].principal.clone(),
            problem,
        };
        for (index, entry) in entries.iter().enumerate() {
            if entry.principal.trim().is_empty() {
                return Err(problem(
                    index,
                    "`principal` is empty: name who acts with this token".to_owned(),
                ));
            }
            if entry.roles.is_empty() {
                return Err(problem(
                    index,
                    "`roles` is empty: give it one or more of approver, operator, auditor"
                        .to_owned(),
                ));
            }
        }
        let tokens = TokenSet::load(
            entries.iter().map(|entry| {
                let source = Source {
                    env: entry.env.as_deref(),
                    file: entry.file.as_deref(),
                };
                let operator = Operator {
                    principal: entry.principal.clone(),
                    roles: entry.roles.clone(),
                    tenant: None,
                };
                (source, operator)
            }),
            "give each operator their own",
        )
        .map_err(|error| problem(error.index, error.problem))?;
        Ok(Self { tokens })
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Identifies one request.
    pub fn identify(&self, headers: &HeaderMap) -> Result<Operator, AuthError> {
        let token = bearer(headers)
            .map_err(|()| AuthError::Malformed)?
            .ok_or(AuthError::Missing)?;
        self.tokens.find(token).cloned().ok_or(AuthError::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(principal: &str, roles: Vec<Role>, file: &std::path::Path) -> AdminTokenConfig {
        AdminTokenConfig {
            principal: principal.to_owned(),
            roles,
            env: None,
            file: Some(file.to_owned()),
        }
    }

    fn bearer(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn a_token_identifies_its_principal_and_roles_and_nothing_else_passes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ana");
        std::fs::write(&file, "tok-ana\n").unwrap();
        let tokens = Tokens::load(&[entry("usr_ana", vec![Role::Approver], &file)]).unwrap();
        assert_eq!(
            tokens.identify(&bearer("Bearer tok-ana")),
            Ok(Operator {
                principal: "usr_ana".to_owned(),
                roles: vec![Role::Approver],
                tenant: None,
            })
        );
        assert_eq!(tokens.identify(&HeaderMap::new()), Err(AuthError::Missing));
        assert_eq!(
            tokens.identify(&bearer("tok-ana")),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            tokens.identify(&bearer("Bearer ")),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            tokens.identify(&bearer("Bearer tok-bob")),
            Err(AuthError::Unknown)
        );
    }

    #[test]
    fn bad_entries_fail_the_load_naming_the_entry_never_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "same-token").unwrap();
        let err = Tokens::load(&[entry("a", vec![], &file)]).unwrap_err();
        assert!(err.to_string().contains("`roles` is empty"), "{err}");
        let err = Tokens::load(&[
            entry("a", vec![Role::Auditor], &file),
            entry("b", vec![Role::Operator], &file),
        ])
        .unwrap_err();
        assert_eq!(err.index, 1);
        assert!(err.to_string().contains("configured twice"), "{err}");
        assert!(!err.to_string().contains("same-token"), "{err}");
        let err =
            Tokens::load(&[entry("a", vec![Role::Auditor], &dir.path().join("nope"))]).unwrap_err();
        assert!(err.to_string().contains("cannot read"), "{err}");
    }
}
