//! `gatehouse.secrets`: a guardrail against secrets in tool calls.
//!
//! - **Arguments.** A call whose arguments carry a secret is denied (`arguments = "deny"`, the
//!   default) or paused for a person (`"require_approval"`), with the reason
//!   `SECRET_IN_ARGUMENTS` naming each kind and JSON pointer found, never the value.
//! - **Results and records.** Every decision carries the `mask-secrets` obligation: the host
//!   masks the secrets it finds in the result before delivery, and in the arguments the audit
//!   log and the approval view keep, and lists what it masked in the decision record.
//!
//! Finding is `gatehouse-guardrails`, the code the host masks with, so the module and the host
//! agree on what a secret is. Bind it first in the chain: a module that denies before it stops
//! the chain, and its masks with it.

use gatehouse_guardrails::{Masks, SENSITIVE_FIELDS, SecretKind, find};
use gatehouse_sdk::serde_json::{self, Value};
use gatehouse_sdk::{Action, Decision, Obligation, Policy};
use serde::Deserialize;

/// What a secret in the arguments does to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OnArguments {
    Deny,
    RequireApproval,
}

/// The operator's config; mirrors `config_schema` in `manifest.toml`.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    kinds: Vec<SecretKind>,
    fields: Vec<String>,
    arguments: OnArguments,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            kinds: SecretKind::ALL.to_vec(),
            fields: SENSITIVE_FIELDS.map(str::to_owned).to_vec(),
            arguments: OnArguments::Deny,
        }
    }
}

/// The reason code of a call stopped for a secret in its arguments.
const SECRET_IN_ARGUMENTS: &str = "SECRET_IN_ARGUMENTS";

struct Secrets;

impl Policy for Secrets {
    type Config = Config;

    fn evaluate(action: &Action, config: &Config) -> Decision {
        let masks = Masks::new().secrets(&config.kinds, &config.fields);
        let args: Value = serde_json::from_str(&action.args_json).unwrap_or(Value::Null);
        let findings = find(&masks, &args);
        let mut decision = if findings.is_empty() {
            Decision::abstain()
        } else {
            let places: Vec<String> = findings
                .iter()
                .map(|f| {
                    let at = if f.at.is_empty() { "/" } else { &f.at };
                    format!("{} at {at}", f.kind)
                })
                .collect();
            let message = format!(
                "the arguments carry secrets ({}); pass a reference to a secret store, not the secret",
                places.join(", ")
            );
            match config.arguments {
                OnArguments::Deny => Decision::deny(SECRET_IN_ARGUMENTS, message),
                OnArguments::RequireApproval => {
                    Decision::require_approval(SECRET_IN_ARGUMENTS, message)
                }
            }
        };
        if !config.kinds.is_empty() {
            decision = decision.with_obligation(Obligation::MaskSecrets {
                kinds: config.kinds.iter().map(|k| sdk_kind(*k)).collect(),
                fields: config.fields.clone(),
            });
        }
        decision
    }
}

fn sdk_kind(kind: SecretKind) -> gatehouse_sdk::SecretKind {
    match kind {
        SecretKind::PrivateKey => gatehouse_sdk::SecretKind::PrivateKey,
        SecretKind::CloudAccessKey => gatehouse_sdk::SecretKind::CloudAccessKey,
        SecretKind::BearerToken => gatehouse_sdk::SecretKind::BearerToken,
        SecretKind::Jwt => gatehouse_sdk::SecretKind::Jwt,
        SecretKind::HighEntropy => gatehouse_sdk::SecretKind::HighEntropy,
    }
}

gatehouse_sdk::export_policy!(Secrets);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::policy::evaluate_with_config_json;
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::check_config;
    use gatehouse_sdk::{ApprovalMode, CapabilityClass, Verdict};

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn action(args: &Value) -> Action {
        Action::new("mail", "send", CapabilityClass::Act, ApprovalMode::Network)
            .with_args(args.to_string())
    }

    #[test]
    fn sample_configs_satisfy_the_schema_and_the_struct() {
        let config: Config = check_config(
            MANIFEST,
            &json!({ "kinds": ["jwt", "high_entropy"], "fields": ["pin"], "arguments": "require_approval" }),
        );
        assert_eq!(config.kinds, [SecretKind::Jwt, SecretKind::HighEntropy]);
        assert_eq!(config.arguments, OnArguments::RequireApproval);
        let default: Config = check_config(MANIFEST, &json!({}));
        assert_eq!(default.kinds, SecretKind::ALL);
        assert_eq!(default.arguments, OnArguments::Deny);
    }

    #[test]
    fn a_secret_in_the_arguments_denies_naming_kind_and_place_not_value() {
        let key = format!("AKIA{}", "IOSFODNN7EXAMPLE");
        let d = evaluate_with_config_json::<Secrets>(
            &action(&json!({ "to": "ann", "body": format!("key {key}") })),
            "{}",
        );
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(d.reasons[0].code, SECRET_IN_ARGUMENTS);
        assert!(
            d.reasons[0].message.contains("cloud_access_key at /body"),
            "{:?}",
            d.reasons
        );
        assert!(!format!("{d:?}").contains(&key));
        assert!(matches!(d.obligations[0], Obligation::MaskSecrets { .. }));
        let d = evaluate_with_config_json::<Secrets>(
            &action(&json!({ "body": format!("key {key}") })),
            r#"{"arguments":"require_approval"}"#,
        );
        assert_eq!(d.verdict, Verdict::RequireApproval);
    }

    #[test]
    fn clean_arguments_abstain_with_the_mask_for_results() {
        let d = evaluate_with_config_json::<Secrets>(
            &action(&json!({ "to": "ann", "body": "hello" })),
            r#"{"kinds":["jwt"],"fields":[]}"#,
        );
        assert_eq!(d.verdict, Verdict::Abstain);
        assert_eq!(
            d.obligations,
            [Obligation::MaskSecrets {
                kinds: vec![gatehouse_sdk::SecretKind::Jwt],
                fields: Vec::new()
            }]
        );
    }
}
