//! Data labels (issue 58): what a tool's results carry (`produces`) and what it can do with
//! data (`sends`), declared by its publisher, raised by the operator, found by the guardrails.
//! A session holds the labels its results brought; flow rules judge a call by them.
//!
//! A label is 1-64 of `[a-z0-9_.:-]`, starting with a letter (`private`, `pii:email`). The
//! names gatehouse itself gives meaning to are the constants here; any other is the operator's
//! own, for their rules.

use serde::{Deserialize, Serialize};

/// A label a session holds, and the action that first brought it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSource {
    /// The label.
    pub label: String,
    /// The tool whose result brought it.
    pub tool: String,
    /// That call's id.
    pub tool_call_id: String,
    /// When, unix ms.
    pub at_ms: u64,
}

/// What the flow rules (`gatehouse.flows`) judge a call by, as the audit entry keeps it for
/// `gatehouse replay`: its session's labels, each with its source, and what its tool sends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowFacts {
    /// The session's labels, in the order they joined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<LabelSource>,
    /// What the called tool can do with data (`external`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sends: Vec<String>,
}

impl FlowFacts {
    /// Whether there is nothing to judge by.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.sends.is_empty()
    }
}

/// Data about people or the business that must not leave: a CRM record, a mailbox.
pub const PRIVATE: &str = "private";
/// Content from outside that may carry instructions: a fetched web page, an inbound email.
pub const UNTRUSTED: &str = "untrusted";
/// A way out (in `sends`): the tool can send data outside (email, HTTP POST, a public post).
pub const EXTERNAL: &str = "external";
/// A secret the guardrails found in a result (a key, a token, a JWT).
pub const SECRET: &str = "secret";
/// The prefix of personal data the guardrails found in a result: `pii:email`, `pii:phone`,
/// `pii:<identifier>` for an operator-named identifier.
pub const PII: &str = "pii:";

/// Whether `label` is personal or secret data: `private`, `secret` or any `pii:` label. What
/// the trifecta rule counts as private.
pub fn is_private(label: &str) -> bool {
    label == PRIVATE || label == SECRET || label.starts_with(PII)
}

/// Checks a label's spelling.
///
/// # Errors
/// Why it is not a label, for the field that declares it.
pub fn check(label: &str) -> Result<(), String> {
    let well_formed = (1..=64).contains(&label.len())
        && label.starts_with(|c: char| c.is_ascii_lowercase())
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.:-".contains(c));
    if well_formed {
        Ok(())
    } else {
        Err(format!(
            "`{label}` is not a label: 1-64 of [a-z0-9_.:-], starting with a letter (e.g. \
             `private`, `untrusted`, `pii:email`)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_small_lower_case_names_and_private_covers_secrets_and_pii() {
        for good in ["private", "pii:email", "acme.internal", "x-1_2"] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for bad in ["", "Private", "1st", "pii email", "ü", &"a".repeat(65)] {
            assert!(check(bad).is_err(), "{bad}");
        }
        assert!(is_private("private") && is_private("secret") && is_private("pii:phone"));
        assert!(!is_private("untrusted") && !is_private("privateish"));
    }
}
