//! Which tenants and which names (tools, plugin ids) a tool grant, policy binding, skill or
//! trust scope applies to. Globs are compiled once, when the config is parsed, so a bad one is
//! a config error naming its line, and matching is the same everywhere.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A glob over names such as tool names (`<adapter id>.<capability id>`) or plugin ids: `*`
/// matches any run of characters, `?` one character, `[abc]` a class, `{a,b}` alternatives.
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Glob {
    text: String,
    matcher: globset::GlobMatcher,
}

/// A glob that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{glob}` is not a valid glob: {message}")]
pub struct GlobError {
    /// The glob as written.
    pub glob: String,
    /// The parser's message.
    pub message: String,
}

impl Glob {
    /// Compiles a glob.
    pub fn new(text: &str) -> Result<Self, GlobError> {
        let matcher = globset::Glob::new(text)
            .map_err(|e| GlobError {
                glob: text.to_owned(),
                message: e.kind().to_string(),
            })?
            .compile_matcher();
        Ok(Self {
            text: text.to_owned(),
            matcher,
        })
    }

    /// Whether `name` matches.
    pub fn is_match(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for Glob {
    type Err = GlobError;

    fn from_str(text: &str) -> Result<Self, GlobError> {
        Self::new(text)
    }
}

impl TryFrom<String> for Glob {
    type Error = GlobError;

    fn try_from(text: String) -> Result<Self, GlobError> {
        Self::new(&text)
    }
}

impl From<Glob> for String {
    fn from(glob: Glob) -> Self {
        glob.text
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Glob {}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.text)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The tenants something applies to: tenant ids, where `*` stands for every tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tenants(pub Vec<String>);

impl Tenants {
    /// Every tenant (`["*"]`).
    pub fn all() -> Self {
        Self(vec!["*".to_owned()])
    }

    /// Whether `tenant` is one of them.
    pub fn matches(&self, tenant: &str) -> bool {
        self.0.iter().any(|t| t == "*" || t == tenant)
    }
}

impl<S: Into<String>> FromIterator<S> for Tenants {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        Self(iter.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_and_round_trip_as_strings() {
        let glob: Glob = "acme.*".parse().unwrap();
        assert!(glob.is_match("acme.orders.lookup"));
        assert!(!glob.is_match("globex.orders"));
        assert_eq!(
            serde_json::to_value(&glob).unwrap(),
            serde_json::json!("acme.*")
        );
        let back: Glob = serde_json::from_value(serde_json::json!("acme.*")).unwrap();
        assert_eq!(back, glob);
    }

    #[test]
    fn a_bad_glob_is_a_parse_error_naming_it() {
        let err = serde_json::from_value::<Glob>(serde_json::json!("acme.[")).unwrap_err();
        assert!(
            err.to_string().starts_with("`acme.[` is not a valid glob"),
            "{err}"
        );
    }

    #[test]
    fn tenants_match_ids_and_star() {
        let some: Tenants = ["acme", "globex"].into_iter().collect();
        assert!(some.matches("acme") && !some.matches("initech"));
        assert!(Tenants::all().matches("anyone"));
    }
}
