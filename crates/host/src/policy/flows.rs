//! `gatehouse.flows`: the first-party flow rules, over a call's session (issue 58). The host
//! runs it itself: it is bound like any module (`[[pipeline.policy]] module =
//! "gatehouse.flows"`, enforcing or in shadow mode), needs no component, and names the action
//! that brought each of the session's labels however old (a module built for contract 0.7.0
//! sees the labels its `prior-actions` brought, and what the called tool `sends`, so it can
//! hold a flow rule of its own).
//!
//! The rule, the "lethal trifecta": once a session holds private data (`private`, `secret` or
//! a `pii:` label) and untrusted content (`untrusted`), a call of a tool that `sends` data
//! `external` needs approval, or is denied (`config = { on_trifecta = "deny" }`). The reason
//! names the actions that brought the labels, so the approver sees why. Any other call
//! abstains.

use gatehouse_core::model::label::LabelSource;
use gatehouse_core::model::label::{self, EXTERNAL, UNTRUSTED};
use gatehouse_core::model::{ModuleDecision, Reason, Verdict};
use serde::Deserialize;
use serde_json::Value;

/// The module id it is bound by.
pub const ID: &str = "gatehouse.flows";

/// The reason's code when the trifecta rule matches.
pub const TRIFECTA: &str = "FLOW_TRIFECTA";

/// What the rule judges a call by: its session's labels, and what its tool sends.
pub use gatehouse_core::model::label::FlowFacts as Facts;

/// A binding's `config`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What the trifecta gets. Default: `require_approval`.
    #[serde(default)]
    pub on_trifecta: OnTrifecta,
}

/// What a call completing the trifecta gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTrifecta {
    /// It waits for an approver.
    #[default]
    RequireApproval,
    /// It is refused.
    Deny,
}

impl Config {
    /// A binding's config (`{}` or absent: the defaults).
    ///
    /// # Errors
    /// What is wrong with it, for the operator.
    pub fn parse(config: &Value) -> Result<Self, String> {
        if config.is_null() {
            return Ok(Self::default());
        }
        Self::deserialize(config).map_err(|e| {
            format!(
                "the config of `{ID}` is not valid: {e}; it takes `on_trifecta = \
                 \"require_approval\"` (the default) or `\"deny\"`"
            )
        })
    }
}

/// The rule's decision on a call, as a module's.
pub fn decide(config: &Value, facts: &Facts, tool: &str) -> ModuleDecision {
    let mut decision = ModuleDecision {
        module: None,
        module_id: ID.to_owned(),
        verdict: Verdict::Abstain,
        effective_mode: None,
        mode_raise_ignored: false,
        reasons: Vec::new(),
        evidence_refs: Vec::new(),
        fuel_consumed: 0,
    };
    let config = match Config::parse(config) {
        Ok(config) => config,
        Err(message) => {
            decision.verdict = Verdict::Deny;
            decision.reasons.push(Reason {
                code: gatehouse_core::model::POLICY_FAILED.to_owned(),
                message,
            });
            return decision;
        }
    };
    let private: Vec<&LabelSource> = (facts.labels.iter())
        .filter(|l| label::is_private(&l.label))
        .collect();
    let untrusted: Vec<&LabelSource> = (facts.labels.iter())
        .filter(|l| l.label == UNTRUSTED)
        .collect();
    if private.is_empty() || untrusted.is_empty() || !facts.sends.iter().any(|s| s == EXTERNAL) {
        return decision;
    }
    decision.verdict = match config.on_trifecta {
        OnTrifecta::RequireApproval => Verdict::RequireApproval,
        OnTrifecta::Deny => Verdict::Deny,
    };
    let sources = |labels: &[&LabelSource]| {
        labels
            .iter()
            .map(|l| format!("`{}` from {} (call {})", l.label, l.tool, l.tool_call_id))
            .collect::<Vec<_>>()
            .join(", ")
    };
    decision.reasons.push(Reason {
        code: TRIFECTA.to_owned(),
        message: format!(
            "this session holds private data ({}) and untrusted content ({}), and `{tool}` \
             sends data external: together they could carry the private data out",
            sources(&private),
            sources(&untrusted),
        ),
    });
    for source in &facts.labels {
        if !decision.evidence_refs.contains(&source.tool_call_id) {
            decision.evidence_refs.push(source.tool_call_id.clone());
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn source(label: &str, tool: &str, call: &str) -> LabelSource {
        LabelSource {
            label: label.into(),
            tool: tool.into(),
            tool_call_id: call.into(),
            at_ms: 1,
        }
    }

    fn facts(labels: &[(&str, &str, &str)], sends: &[&str]) -> Facts {
        Facts {
            labels: labels.iter().map(|(l, t, c)| source(l, t, c)).collect(),
            sends: sends.iter().map(|&s| s.to_owned()).collect(),
        }
    }

    #[test]
    fn the_trifecta_needs_all_three_and_names_the_actions_that_brought_it() {
        let all = facts(
            &[
                ("pii:email", "crm.lookup", "c1"),
                ("untrusted", "web.fetch", "c2"),
            ],
            &["external"],
        );
        let decision = decide(&Value::Null, &all, "mail.send");
        assert_eq!(decision.verdict, Verdict::RequireApproval);
        let why = &decision.reasons[0];
        assert_eq!(why.code, TRIFECTA);
        assert!(
            why.message
                .contains("`pii:email` from crm.lookup (call c1)"),
            "{}",
            why.message
        );
        assert!(
            why.message.contains("`untrusted` from web.fetch (call c2)"),
            "{}",
            why.message
        );
        let denied = decide(&json!({"on_trifecta": "deny"}), &all, "mail.send");
        assert_eq!(denied.verdict, Verdict::Deny);
        // Without any one of the three: abstain.
        for partial in [
            facts(&[("untrusted", "web.fetch", "c2")], &["external"]),
            facts(&[("private", "crm.lookup", "c1")], &["external"]),
            facts(
                &[
                    ("private", "crm.lookup", "c1"),
                    ("untrusted", "web.fetch", "c2"),
                ],
                &[],
            ),
        ] {
            assert_eq!(
                decide(&json!({}), &partial, "x.y").verdict,
                Verdict::Abstain
            );
        }
    }

    #[test]
    fn a_bad_config_denies_and_says_what_it_takes() {
        let decision = decide(&json!({"on_trifecta": "shrug"}), &Facts::default(), "x.y");
        assert_eq!(decision.verdict, Verdict::Deny);
        assert!(decision.reasons[0].message.contains("require_approval"));
        assert!(Config::parse(&json!({"unknown": 1})).is_err());
    }
}
