//! `gatehouse.redact`: asks the host to mask personal data in results.
//!
//! It never decides whether a call runs (it abstains); it attaches obligations the host
//! applies to the result before delivery: mask the configured PII kinds (default: emails and
//! phone numbers) in every text, mask the identifiers the config names (`identifiers`, name to
//! pattern: `customer_id = "CUS-[0-9]{8}"` masks as `[CUSTOMER_ID]`; the host masks them in
//! the arguments the audit log and approval view keep too), and redact the configured JSON
//! pointers.

use std::collections::BTreeMap;

use gatehouse_sdk::{Action, Decision, Identifier, Obligation, PiiKind, Policy};
use serde::Deserialize;

/// The operator's config; mirrors `config_schema` in `manifest.toml`.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    pii: Vec<PiiKind>,
    pointers: Vec<String>,
    identifiers: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            pii: vec![PiiKind::Email, PiiKind::Phone],
            pointers: Vec::new(),
            identifiers: BTreeMap::new(),
        }
    }
}

struct Redact;

impl Policy for Redact {
    type Config = Config;

    fn evaluate(_action: &Action, config: &Config) -> Decision {
        let mut decision = Decision::abstain();
        if !config.pii.is_empty() {
            decision = decision.with_obligation(Obligation::MaskPii(config.pii.clone()));
        }
        if !config.identifiers.is_empty() {
            decision = decision.with_obligation(Obligation::MaskIdentifiers(
                (config.identifiers.iter())
                    .map(|(name, pattern)| Identifier {
                        name: name.clone(),
                        pattern: pattern.clone(),
                    })
                    .collect(),
            ));
        }
        for pointer in &config.pointers {
            decision = decision.with_obligation(Obligation::RedactPointer(pointer.clone()));
        }
        decision
    }
}

gatehouse_sdk::export_policy!(Redact);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::policy::evaluate_with_config_json;
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::check_config;
    use gatehouse_sdk::{ApprovalMode, CapabilityClass, Verdict};

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    #[test]
    fn sample_configs_satisfy_the_schema_and_the_struct() {
        let config: Config = check_config(
            MANIFEST,
            &json!({ "pii": ["phone"], "pointers": ["/card/number"] }),
        );
        assert_eq!(
            (config.pii, config.pointers),
            (vec![PiiKind::Phone], vec!["/card/number".to_owned()])
        );
        let default: Config = check_config(MANIFEST, &json!({}));
        assert_eq!(default.pii, [PiiKind::Email, PiiKind::Phone]);
    }

    #[test]
    fn abstains_with_default_pii_obligation() {
        let a = Action::new("a", "b", CapabilityClass::Observe, ApprovalMode::ReadOnly);
        let d = evaluate_with_config_json::<Redact>(&a, "{}");
        assert_eq!(d.verdict, Verdict::Abstain);
        assert_eq!(
            d.obligations,
            [Obligation::MaskPii(vec![PiiKind::Email, PiiKind::Phone])]
        );
        let d = evaluate_with_config_json::<Redact>(&a, r#"{"pii":[],"pointers":["/iban"]}"#);
        assert_eq!(d.obligations, [Obligation::RedactPointer("/iban".into())]);
        let d = evaluate_with_config_json::<Redact>(
            &a,
            r#"{"pii":[],"identifiers":{"customer_id":"CUS-[0-9]{8}"}}"#,
        );
        assert_eq!(
            d.obligations,
            [Obligation::MaskIdentifiers(vec![Identifier {
                name: "customer_id".into(),
                pattern: "CUS-[0-9]{8}".into()
            }])]
        );
    }
}
