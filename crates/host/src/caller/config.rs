//! The `[caller]` table of the operator config: which adapters may ask their callers what
//! (contract 0.5.0's `caller.ask`), within which budgets. Progress and log lines need no grant:
//! the manifest's declaration is enough, and the caller chooses whether it wants them.
//!
//! ```toml
//! [[caller.grant]]               # no entries: no adapter may ask its caller anything
//! adapter = "acme.*"             # an adapter id, or a glob; the first matching entry applies
//! ask = ["elicitation", "sampling"]   # what it may ask, of what its manifest declares
//! max_asks = 3                   # asks per call sent to the caller; default 3
//! max_sampling_tokens = 1000     # a sampling ask's `maxTokens` at most; default 1000
//! ask_timeout_seconds = 300      # how long one ask waits for its answer; default 300
//! ```

use serde::{Deserialize, Serialize};

use crate::relay::AskKind;
use gatehouse_core::model::Glob;

/// The most asks per call a grant may allow: each waits up to its timeout holding an instance
/// slot of the sandbox's pool, so a handful is what a real conversation needs.
pub const MAX_ASKS_CEILING: u32 = 16;
/// The longest an ask may wait for its answer, in seconds: an hour, for a person filling in a
/// form; beyond it a call is better asked again.
pub const ASK_TIMEOUT_CEILING: u64 = 3600;

/// The `[caller]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerConfig {
    /// Per-adapter grants (`[[caller.grant]]`): the first entry whose `adapter` glob matches an
    /// adapter's id decides what it may ask. Default: none, so no adapter may ask anything
    /// (its asks are refused), whatever its manifest declares.
    #[serde(default, rename = "grant", skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<AskGrant>,
}

/// One `[[caller.grant]]` entry: what the adapters whose id matches `adapter` may ask their
/// callers, and the budgets of each call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskGrant {
    /// The adapter ids this entry applies to: an id, or a glob (`acme.*`).
    pub adapter: Glob,
    /// What they may ask: `elicitation`, `sampling`, `roots`. Only what an adapter's manifest
    /// also declares (`[caller] ask`) is granted. Required, at least one.
    pub ask: Vec<AskKind>,
    /// Asks per call that may reach the caller (an `ask-all` counts each of its requests);
    /// further ones are refused. 1 to 16. Default: 3.
    #[serde(default = "defaults::max_asks")]
    pub max_asks: u32,
    /// The largest `maxTokens` a sampling ask may request; a sampling ask above it, or without
    /// `maxTokens`, is refused. At least 1. Default: 1000.
    #[serde(default = "defaults::max_sampling_tokens")]
    pub max_sampling_tokens: u32,
    /// How long one ask waits for its answer, in seconds; then it fails as `timeout`. The
    /// call's own deadline does not run while it waits. 1 to 3600. Default: 300.
    #[serde(default = "defaults::ask_timeout_seconds")]
    pub ask_timeout_seconds: u64,
}

mod defaults {
    pub fn max_asks() -> u32 {
        3
    }
    pub fn max_sampling_tokens() -> u32 {
        1000
    }
    pub fn ask_timeout_seconds() -> u64 {
        300
    }
}

/// A `[caller]` entry out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid [caller] config: `{key}` is {value}; {expected}")]
pub struct CallerConfigError {
    /// The key, e.g. `grant[0] (adapter = "acme.*").max_asks`.
    pub key: String,
    /// Its value, as written.
    pub value: String,
    /// What it must be, and how to fix it.
    pub expected: String,
}

impl CallerConfig {
    /// Checks every grant: it asks for something, and its budgets are in range.
    pub fn check(&self) -> Result<(), CallerConfigError> {
        for (index, grant) in self.grants.iter().enumerate() {
            let error = |field: &str, value: String, expected: String| CallerConfigError {
                key: format!("grant[{index}] (adapter = \"{}\").{field}", grant.adapter),
                value,
                expected,
            };
            if grant.ask.is_empty() {
                return Err(error(
                    "ask",
                    "[]".to_owned(),
                    "list what the adapters may ask: \"elicitation\", \"sampling\", \"roots\" \
                     (or remove the entry)"
                        .to_owned(),
                ));
            }
            if !(1..=MAX_ASKS_CEILING).contains(&grant.max_asks) {
                return Err(error(
                    "max_asks",
                    grant.max_asks.to_string(),
                    format!("it must be between 1 and {MAX_ASKS_CEILING}"),
                ));
            }
            if grant.max_sampling_tokens == 0 {
                return Err(error(
                    "max_sampling_tokens",
                    "0".to_owned(),
                    "it must be at least 1; to refuse sampling, leave \"sampling\" out of `ask`"
                        .to_owned(),
                ));
            }
            if !(1..=ASK_TIMEOUT_CEILING).contains(&grant.ask_timeout_seconds) {
                return Err(error(
                    "ask_timeout_seconds",
                    grant.ask_timeout_seconds.to_string(),
                    format!("it must be between 1 and {ASK_TIMEOUT_CEILING}"),
                ));
            }
        }
        Ok(())
    }

    /// The grant of adapter `id`: the first entry matching it.
    pub fn grant_for(&self, id: &str) -> Option<&AskGrant> {
        self.grants.iter().find(|grant| grant.adapter.is_match(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Result<CallerConfig, String> {
        toml::from_str(toml).map_err(|e| e.to_string())
    }

    #[test]
    fn accepts_a_grant_with_its_defaults_and_the_first_match_wins() {
        let config = config(
            r#"
            [[grant]]
            adapter = "acme.*"
            ask = ["elicitation", "sampling"]
            [[grant]]
            adapter = "acme.orders"
            ask = ["roots"]
            "#,
        )
        .unwrap();
        config.check().unwrap();
        let grant = config.grant_for("acme.orders").unwrap();
        assert_eq!(
            (
                grant.ask.as_slice(),
                grant.max_asks,
                grant.max_sampling_tokens,
                grant.ask_timeout_seconds
            ),
            (&[AskKind::Elicitation, AskKind::Sampling][..], 3, 1000, 300)
        );
        assert!(config.grant_for("other.thing").is_none());
        assert!(CallerConfig::default().grant_for("acme.orders").is_none());
    }

    #[test]
    fn rejects_what_is_out_of_range_naming_the_key() {
        let cases = [
            (
                "[[grant]]\nadapter = \"a.b\"\nask = []",
                "invalid [caller] config: `grant[0] (adapter = \"a.b\").ask` is []; list what",
            ),
            (
                "[[grant]]\nadapter = \"a.b\"\nask = [\"roots\"]\nmax_asks = 0",
                "`grant[0] (adapter = \"a.b\").max_asks` is 0; it must be between 1 and 16",
            ),
            (
                "[[grant]]\nadapter = \"a.b\"\nask = [\"roots\"]\nmax_asks = 17",
                "`grant[0] (adapter = \"a.b\").max_asks` is 17; it must be between 1 and 16",
            ),
            (
                "[[grant]]\nadapter = \"a.b\"\nask = [\"sampling\"]\nmax_sampling_tokens = 0",
                "`grant[0] (adapter = \"a.b\").max_sampling_tokens` is 0; it must be at least 1",
            ),
            (
                "[[grant]]\nadapter = \"a.b\"\nask = [\"roots\"]\nask_timeout_seconds = 3601",
                "`grant[0] (adapter = \"a.b\").ask_timeout_seconds` is 3601; it must be between 1 and 3600",
            ),
        ];
        for (toml, expected) in cases {
            let error = config(toml).unwrap().check().unwrap_err().to_string();
            assert!(error.contains(expected), "{toml}: {error}");
        }
    }

    #[test]
    fn rejects_unknown_keys_and_kinds() {
        let error =
            config("[[grant]]\nadapter = \"a\"\nask = [\"roots\"]\nmax_ask = 2").unwrap_err();
        assert!(error.contains("unknown field `max_ask`"), "{error}");
        let error = config("[[grant]]\nadapter = \"a\"\nask = [\"sampel\"]").unwrap_err();
        assert!(
            error.contains(
                "unknown variant `sampel`, expected one of `elicitation`, `sampling`, `roots`"
            ),
            "{error}"
        );
        let error = config("[[grant]]\nask = [\"roots\"]").unwrap_err();
        assert!(error.contains("missing field `adapter`"), "{error}");
    }
}
