//! `{{id}}`: a gatehouse policy module.
//!
//! Denies a call whose tool (`<adapter id>.<capability id>`) matches one of the `deny` globs
//! of its config, and allows the rest (see `config_schema` in `manifest.toml`).

use gatehouse_sdk::policy::glob_match;
use gatehouse_sdk::{Action, Decision, Policy};
use serde::Deserialize;

/// The operator's config; mirrors `config_schema` in `manifest.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    deny: Vec<String>,
}

struct Plugin;

impl Policy for Plugin {
    type Config = Config;

    fn evaluate(action: &Action, config: &Config) -> Decision {
        let tool = action.tool();
        match config.deny.iter().find(|glob| glob_match(glob, &tool)) {
            Some(glob) => Decision::deny("TOOL_DENIED", format!("`{tool}` is denied by `{glob}`")),
            None => Decision::allow(),
        }
    }
}

gatehouse_sdk::export_policy!(Plugin);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::policy::evaluate_with_config_json;
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::check_config;
    use gatehouse_sdk::{ApprovalMode, CapabilityClass, Verdict};

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn action() -> Action {
        Action::new("acme.orders", "delete", CapabilityClass::Act, ApprovalMode::Destructive)
    }

    #[test]
    fn denies_what_a_glob_matches_and_allows_the_rest() {
        let config = r#"{"deny":["acme.orders.delete"]}"#;
        assert_eq!(evaluate_with_config_json::<Plugin>(&action(), config).verdict, Verdict::Deny);
        let config = r#"{"deny":["acme.billing.*"]}"#;
        assert_eq!(evaluate_with_config_json::<Plugin>(&action(), config).verdict, Verdict::Allow);
    }

    /// A sample config satisfies `config_schema` and parses into `Config`.
    #[test]
    fn the_manifest_and_the_code_agree() {
        let config: Config = check_config(MANIFEST, &json!({ "deny": ["*.delete"] }));
        assert_eq!(config.deny, ["*.delete"]);
    }
}
