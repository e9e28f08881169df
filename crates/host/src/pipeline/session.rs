//! Sessions and labels (issue 58): which session a call belongs to, the labels its tool
//! declares, and the labels its result brings.
//!
//! - **Which session**: the call's `session_id` (the MCP session, or the trace id a stateless
//!   client sends), else the principal's window; always the calling principal's own in its
//!   tenant ([`SessionKey`]), so one caller can never read or feed another's. The store keeps
//!   it ([`gatehouse_store::sessions`]); `[sessions]` says how long one lives.
//! - **A tool's labels**: what its manifest declares (`produces`, `sends`), with what the
//!   operator's `[[sessions.label]]` rules add for tools matching their glob. The operator only
//!   adds: a publisher can never lower the operator's labels.
//! - **What a result brings**: its tool's `produces`, and what the guardrails find in what it
//!   returned, before any mask (a masked email still means the session touched personal
//!   data): `secret` for a private key, cloud key, bearer token or JWT; `pii:email` and
//!   `pii:phone`; `pii:<name>` for an identifier a policy's `mask-identifiers` found. Only a
//!   result that ran (`ok`) brings labels.
//!
//! ```toml
//! [sessions]
//! idle_timeout_seconds = 1800     # a session idle this long ends
//! max_life_seconds = 86400        # and none lives longer
//! actions = 16                    # the most of its latest actions a policy sees
//!
//! [[sessions.label]]              # the operator's labels, above the publisher's
//! tools = "web.*"
//! produces = ["untrusted"]
//!
//! [[sessions.label]]
//! tools = "mail.send"
//! sends = ["external"]
//! ```

use std::collections::BTreeSet;
use std::sync::LazyLock;

use gatehouse_core::envelope::ToolCallEnvelope;
use gatehouse_core::model::label::{self, SECRET};
use gatehouse_core::model::{ContentBlock, Glob};
use gatehouse_guardrails::{Masks, SecretKind};
use gatehouse_store::{LabelSource, SessionKey, SessionLimits};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plugin::manifest::Capability;

/// The `[sessions]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// A session idle this long ends; the next call starts a new one. Default: 1800 (30 min).
    #[serde(default = "default_idle")]
    pub idle_timeout_seconds: u64,
    /// A session ends this long after it started, however busy. Default: 86400 (a day).
    #[serde(default = "default_life")]
    pub max_life_seconds: u64,
    /// The most of a session's latest actions a policy sees (`prior-actions`, Cedar's
    /// `context.session.tools`), 1 to 256. Its labels are all seen, however old. Default: 16.
    #[serde(default = "default_actions")]
    pub actions: usize,
    /// The operator's labels for tools, by glob. Default: none.
    #[serde(default, rename = "label", skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<LabelRule>,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_timeout_seconds: default_idle(),
            max_life_seconds: default_life(),
            actions: default_actions(),
            labels: Vec::new(),
        }
    }
}

fn default_idle() -> u64 {
    1_800
}

fn default_life() -> u64 {
    86_400
}

fn default_actions() -> usize {
    16
}

/// One `[[sessions.label]]`: labels the operator gives the tools its glob matches, added to
/// what their manifests declare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelRule {
    /// Glob over tool names (`<adapter id>.<capability id>`), e.g. `web.*`.
    pub tools: Glob,
    /// Labels their results carry.
    #[serde(default)]
    pub produces: Vec<String>,
    /// What they can do with data (`external`).
    #[serde(default)]
    pub sends: Vec<String>,
}

impl SessionsConfig {
    /// Checks what serde cannot.
    ///
    /// # Errors
    /// What is wrong, naming the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.idle_timeout_seconds == 0 || self.max_life_seconds == 0 {
            return Err(
                "[sessions] idle_timeout_seconds and max_life_seconds must be at least 1".into(),
            );
        }
        if !(1..=256).contains(&self.actions) {
            return Err(format!(
                "[sessions] actions = {} must be 1 to 256",
                self.actions
            ));
        }
        for (i, rule) in self.labels.iter().enumerate() {
            for (field, labels) in [("produces", &rule.produces), ("sends", &rule.sends)] {
                for name in labels {
                    label::check(name)
                        .map_err(|e| format!("[[sessions.label]] #{} {field}: {e}", i + 1))?;
                }
            }
            if rule.produces.is_empty() && rule.sends.is_empty() {
                return Err(format!(
                    "[[sessions.label]] #{} for `{}` gives no label: set `produces` or `sends`",
                    i + 1,
                    rule.tools.as_str()
                ));
            }
        }
        Ok(())
    }

    /// How long a session lives, and how many of its actions a call reads.
    pub fn limits(&self) -> SessionLimits {
        SessionLimits {
            idle_ms: self.idle_timeout_seconds.saturating_mul(1_000),
            life_ms: self.max_life_seconds.saturating_mul(1_000),
            actions: self.actions,
        }
    }

    /// What `tool`'s results carry: its manifest's `produces` and the operator's, each once.
    pub fn produces(&self, tool: &str, capability: &Capability) -> Vec<String> {
        self.merged(tool, &capability.produces, |rule| &rule.produces)
    }

    /// What `tool` can do with data: its manifest's `sends` and the operator's, each once.
    pub fn sends(&self, tool: &str, capability: &Capability) -> Vec<String> {
        self.sends_beside(tool, &capability.sends)
    }

    /// What `tool` can do with data, where what its manifest says is `declared` (or is not at
    /// hand: `gatehouse replay`, `gatehouse call` deciding with a policy module): `declared`
    /// and the operator's, each once.
    pub fn sends_beside(&self, tool: &str, declared: &[String]) -> Vec<String> {
        self.merged(tool, declared, |rule| &rule.sends)
    }

    fn merged(
        &self,
        tool: &str,
        declared: &[String],
        of: impl Fn(&LabelRule) -> &Vec<String>,
    ) -> Vec<String> {
        let mut labels = declared.to_vec();
        for rule in self.labels.iter().filter(|r| r.tools.is_match(tool)) {
            for name in of(rule) {
                if !labels.contains(name) {
                    labels.push(name.clone());
                }
            }
        }
        labels
    }
}

/// The session a call belongs to: its principal's, under its `session_id` or the principal's
/// window (`""`). `None` for a call without a principal.
pub fn key(call: &ToolCallEnvelope) -> Option<SessionKey> {
    let principal = call.principal_chain.last()?;
    Some(SessionKey {
        tenant: call.tenant_id.clone(),
        principal: principal.id.clone(),
        key: call.session_id.clone().unwrap_or_default(),
    })
}

/// What a result is looked at for: the secret kinds found by their shape alone.
static SECRETS: LazyLock<Masks> = LazyLock::new(|| {
    let kinds = [
        SecretKind::PrivateKey,
        SecretKind::CloudAccessKey,
        SecretKind::BearerToken,
        SecretKind::Jwt,
    ];
    Masks::new().secrets(&kinds, &[])
});

/// The labels the guardrails find in what a tool returned (its content and structured
/// output): `secret`, `pii:email`, `pii:phone`.
pub fn found(content: &[ContentBlock], structured: Option<&Value>) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    let mut look = |text: &str| {
        if SECRETS.finds_in(text) {
            labels.insert(SECRET.to_owned());
        }
        for (kind, found) in super::obligations::personal_data(text) {
            if found {
                labels.insert(format!("{}{kind}", label::PII));
            }
        }
    };
    for block in content {
        match block {
            ContentBlock::Text { text } => look(text),
            ContentBlock::Resource { resource } => {
                if let Some(text) = &resource.text {
                    look(text);
                }
            }
            _ => {}
        }
    }
    if let Some(value) = structured {
        strings(value, &mut look);
    }
    labels
}

fn strings(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, f)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            f(k);
            strings(v, f);
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The labels of what the result's masking obligations found (`masked` in its decision
/// record): `secret` for a secret kind, `pii:<name>` for an identifier a policy named.
pub fn masked(findings: &[gatehouse_core::model::Finding]) -> BTreeSet<String> {
    findings
        .iter()
        .map(|finding| {
            if SecretKind::ALL.iter().any(|k| k.name() == finding.kind) {
                SECRET.to_owned()
            } else {
                format!("{}{}", label::PII, finding.kind.to_ascii_lowercase())
            }
        })
        .filter(|name| label::check(name).is_ok())
        .collect()
}

/// The labels of `brought` the session does not hold (`held`), each with its source: this
/// call.
pub fn joining<'a>(
    brought: impl IntoIterator<Item = &'a String>,
    held: &[LabelSource],
    tool: &str,
    tool_call_id: &str,
    at_ms: u64,
) -> Vec<LabelSource> {
    let mut joining: Vec<LabelSource> = Vec::new();
    for name in brought {
        if held.iter().chain(&joining).any(|l| &l.label == name) {
            continue;
        }
        joining.push(LabelSource {
            label: name.clone(),
            tool: tool.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            at_ms,
        });
    }
    joining
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(toml: &str) -> SessionsConfig {
        let config: SessionsConfig = toml::from_str(toml).expect("parses");
        config.validate().expect("valid");
        config
    }

    #[test]
    fn the_operator_adds_labels_by_glob_and_never_takes_the_publishers_away() {
        let config = config(
            r#"
            [[label]]
            tools = "web.*"
            produces = ["untrusted"]
            [[label]]
            tools = "mail.send"
            sends = ["external"]
            "#,
        );
        let mut capability: Capability = serde_json::from_value(json!({
            "id": "fetch", "capability_class": "observe", "approval_mode": "read_only",
            "input_schema": {"type": "object"}, "produces": ["private"]
        }))
        .expect("capability");
        assert_eq!(
            config.produces("web.fetch", &capability),
            ["private", "untrusted"]
        );
        assert!(config.sends("web.fetch", &capability).is_empty());
        capability.produces = vec!["untrusted".into()];
        assert_eq!(config.produces("web.fetch", &capability), ["untrusted"]);
        assert_eq!(config.produces("crm.lookup", &capability), ["untrusted"]);
        assert_eq!(config.sends("mail.send", &capability), ["external"]);
    }

    #[test]
    fn a_bad_label_rule_names_its_key() {
        for (toml, says) in [
            (
                "[[label]]\ntools = \"a.*\"\nproduces = [\"Private\"]",
                "produces",
            ),
            ("[[label]]\ntools = \"a.*\"", "gives no label"),
            ("actions = 0", "1 to 256"),
            ("idle_timeout_seconds = 0", "at least 1"),
        ] {
            let config: SessionsConfig = toml::from_str(toml).expect("parses");
            let error = config.validate().expect_err(toml);
            assert!(error.contains(says), "{toml}: {error}");
        }
    }

    fn text_block(text: &str) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }

    #[test]
    fn the_guardrails_label_secrets_and_personal_data_in_what_a_tool_returned() {
        let text = |t: &str| ContentBlock::Text { text: t.into() };
        assert!(found(&[text("the weather is fine")], None).is_empty());
        let labels = found(
            &[text("write to ada@example.com")],
            Some(&json!({"customer": {"phone": "+44 20 7946 0958"}})),
        );
        assert_eq!(
            labels.into_iter().collect::<Vec<_>>(),
            ["pii:email", "pii:phone"]
        );
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
        assert_eq!(
            found(&[], Some(&json!({ "token": jwt })))
                .into_iter()
                .collect::<Vec<_>>(),
            ["secret"]
        );
        // What only looks like a phone number: an address, a port, a date, an amount.
        for text in [
            "see http://127.0.0.1:46415/pages/news",
            "on 2026-11-29 10:00 UTC",
            "order 12345678 of 1,234.56 EUR",
        ] {
            assert!(found(&[text_block(text)], None).is_empty(), "{text}");
        }
        for phone in ["call 555-123-4567", "(020) 7946 0958", "+33612345678"] {
            assert_eq!(
                found(&[text_block(phone)], None)
                    .into_iter()
                    .collect::<Vec<_>>(),
                ["pii:phone"],
                "{phone}"
            );
        }
    }

    #[test]
    fn only_labels_the_session_lacks_join_once_each() {
        let held = vec![LabelSource {
            label: "private".into(),
            tool: "crm.lookup".into(),
            tool_call_id: "c1".into(),
            at_ms: 1,
        }];
        let brought = [
            "private".to_owned(),
            "untrusted".to_owned(),
            "untrusted".to_owned(),
        ];
        let joining = joining(&brought, &held, "web.fetch", "c2", 2);
        assert_eq!(joining.len(), 1);
        assert_eq!(
            (joining[0].label.as_str(), joining[0].tool_call_id.as_str()),
            ("untrusted", "c2")
        );
    }
}
