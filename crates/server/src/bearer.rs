//! Bearer tokens, as both endpoints take them: the MCP server's `[[mcp.api_key]]` entries and
//! the admin API's `[[admin.token]]` entries are each read once at start, from an environment
//! variable or a file (`gatehouse_core::secret`), and kept only as SHA-256 digests
//! ([`TokenSet::load`]); a request's `Authorization: Bearer <token>` ([`bearer`]) is found by
//! its digest ([`TokenSet::find`]), so the comparison's time says nothing about the tokens.

use std::path::Path;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

/// Tokens, each with what it stands for (a caller, an operator).
#[derive(Debug, Clone)]
pub struct TokenSet<T> {
    tokens: Vec<([u8; 32], T)>,
}

impl<T> Default for TokenSet<T> {
    fn default() -> Self {
        Self { tokens: Vec::new() }
    }
}

/// Why an entry's token cannot be used: its position and the problem, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// Position of the entry (0-based).
    pub index: usize,
    /// What is wrong and the fix.
    pub problem: String,
}

/// Where one entry's token is: exactly one of an environment variable and a file.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The gateway process's environment variable holding it.
    pub env: Option<&'a str>,
    /// The file holding it (surrounding whitespace is trimmed).
    pub file: Option<&'a Path>,
}

impl<T> TokenSet<T> {
    /// Load phase: reads each entry's token and keeps its digest with what `entries` gives it.
    /// A missing variable or file, an empty token, or the same token for two entries fails,
    /// naming the entry; `same_twice` says what to do about the last.
    pub fn load<'a>(
        entries: impl IntoIterator<Item = (Source<'a>, T)>,
        same_twice: &str,
    ) -> Result<Self, EntryError> {
        let mut tokens: Vec<([u8; 32], T)> = Vec::new();
        for (index, (source, value)) in entries.into_iter().enumerate() {
            let token = gatehouse_core::secret::read(source.env, source.file)
                .map_err(|problem| EntryError { index, problem })?;
            let digest = digest(token.expose());
            if tokens.iter().any(|(d, _)| *d == digest) {
                return Err(EntryError {
                    index,
                    problem: format!("the same token is configured twice; {same_twice}"),
                });
            }
            tokens.push((digest, value));
        }
        Ok(Self { tokens })
    }

    /// What `token` stands for, if it is one of these.
    pub fn find(&self, token: &str) -> Option<&T> {
        let digest = digest(token);
        self.tokens
            .iter()
            .find(|(d, _)| *d == digest)
            .map(|(_, v)| v)
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// A request's bearer token: `Ok(None)` without an `Authorization` header, `Err(())` when the
/// header is not `Bearer <token>` with a token.
#[allow(
    clippy::result_unit_err,
    reason = "each endpoint words the refusal its own way"
)]
pub fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ()> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Some)
        .ok_or(())
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn finds_each_token_by_its_digest_and_refuses_a_token_configured_twice() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "token-a\n").unwrap();
        std::fs::write(&b, "token-b").unwrap();
        let source = |file| Source {
            env: None,
            file: Some(file),
        };
        let set = TokenSet::load([(source(&a), "A"), (source(&b), "B")], "fix it").unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.find("token-a"), Some(&"A"));
        assert_eq!(set.find("token-b"), Some(&"B"));
        assert_eq!(set.find("token-c"), None);
        assert_eq!(set.find("token-a\n"), None, "tokens are matched exactly");

        let twice =
            TokenSet::load([(source(&a), 1), (source(&a), 2)], "give each its own").unwrap_err();
        assert_eq!(
            twice,
            EntryError {
                index: 1,
                problem: "the same token is configured twice; give each its own".to_owned()
            }
        );
        let missing = TokenSet::load([(source(&dir.path().join("nope")), ())], "").unwrap_err();
        assert_eq!(missing.index, 0);
        assert!(missing.problem.starts_with("cannot read `"), "{missing:?}");
    }

    #[test]
    fn reads_only_bearer_tokens() {
        assert_eq!(bearer(&HeaderMap::new()), Ok(None));
        assert_eq!(bearer(&headers("Bearer  abc ")), Ok(Some("abc")));
        for malformed in ["Basic abc", "Bearer ", "bearer abc", "Bearer    "] {
            assert_eq!(bearer(&headers(malformed)), Err(()), "{malformed}");
        }
    }
}
