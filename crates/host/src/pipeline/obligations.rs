//! Result obligations from policy decisions, applied to everything that reaches the caller:
//! text and resource content (text and URI), structured content, evidence refs and the error
//! (the caller's record under MCP `_meta` is built from these, so it is covered too).
//!
//! 1. **redact a JSON pointer**: the value at the pointer of the structured result becomes
//!    `"[REDACTED]"`, and every string it held (its text, and its JSON-escaped text) is
//!    replaced wherever else the result repeats it (SDK outputs repeat the JSON as a text
//!    block). A pointer that cannot be applied fails closed: a result with content but no
//!    structured output, or an error message from the tool, is withheld
//!    ([`ObligationError`]). A pointer to a field the output does not have redacts nothing.
//! 2. **mask personal data**: emails and phone numbers are masked in every string; a blob
//!    resource cannot be inspected, so a result carrying one is withheld. Images and audio are
//!    delivered as they are (no text to mask).
//! 3. **mask secrets and identifiers** (contract 0.3.0, found by `gatehouse-guardrails`):
//!    masked in every string as personal data is, and in the keys of the structured result
//!    (a key that masks like another gets `#2`, `#3`...), with high-entropy values of named fields
//!    found in the structured result and masked wherever a text repeats them; a blob resource
//!    withholds the result. What was masked, kind and place, is added to the decision record
//!    (`masked`). These masks also apply to the call's arguments wherever the host keeps or
//!    shows them: the audit entry ([`mask_arguments`], gate 10) and the approval view
//!    ([`apply_to_value`]).
//!
//! Pointers are checked when a policy returns them ([`Obligation::problem`]): an invalid one
//! makes that policy's decision a deny (`POLICY_FAILED`).

use std::sync::LazyLock;

use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_core::model::{ContentBlock, Finding, Obligation, PiiKind};
use gatehouse_guardrails::{Masks, mask_copies};
use regex::Regex;
use serde_json::Value;

/// What masked data is replaced with.
pub const REDACTED: &str = "[REDACTED]";

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}").expect("valid regex")
});
// International or local numbers of 7+ digits with common separators.
static PHONE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\+?\d[\d ().-]{5,}\d").expect("valid regex"));

// A date, perhaps with a time: what a phone number's shape also takes.
static DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d{4}-\d{2}-\d{2}").expect("valid regex"));

/// Why obligations could not be applied: the result is withheld.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObligationError {
    /// A pointer cannot be applied to a result without structured output.
    #[error(
        "a policy obligation redacts `{pointer}`, but the result has no structured output to \
         find it in, so the result is withheld"
    )]
    NoStructured {
        /// The pointer.
        pointer: String,
    },
    /// A blob resource cannot be masked.
    #[error(
        "a policy obligation masks personal data or secrets, but the result carries binary \
         resource `{uri}` that cannot be inspected, so the result is withheld"
    )]
    Blob {
        /// The resource URI.
        uri: String,
    },
}

/// Applies every obligation to a delivered result (content, structured, evidence, error).
pub fn apply(
    obligations: &[Obligation],
    result: &mut ToolResultEnvelope,
) -> Result<(), ObligationError> {
    for obligation in obligations {
        match obligation {
            Obligation::RedactPointer(pointer) => redact(pointer, result)?,
            Obligation::MaskPii(kinds) => {
                no_blob(result)?;
                for_each_string(result, &mut |s| *s = mask(s, kinds));
            }
            // All the masks at once, below.
            Obligation::MaskSecrets { .. } | Obligation::MaskIdentifiers(_) => {}
        }
    }
    let masks = masks(obligations);
    if masks.is_empty() {
        return Ok(());
    }
    no_blob(result)?;
    let mut found = Vec::new();
    let mut entropic = Vec::new();
    if let Some(value) = &mut result.structured_content {
        let (findings, values) = masks.mask_value(value, "structured_content");
        found.extend(findings);
        entropic = values;
    }
    for_each_text(result, &mut |text, at| {
        for kind in masks.mask_text(text) {
            found.push(Finding {
                kind,
                at: at.to_string(),
            });
        }
        if mask_copies(text, &entropic) {
            found.push(Finding {
                kind: gatehouse_guardrails::SecretKind::HighEntropy
                    .name()
                    .to_owned(),
                at: at.to_string(),
            });
        }
    });
    if let Some(decision) = &mut result.policy_decision {
        decision.masked.extend(found);
    }
    Ok(())
}

/// A blob resource cannot be inspected: a result carrying one cannot be masked.
fn no_blob(result: &ToolResultEnvelope) -> Result<(), ObligationError> {
    match result.content.iter().find_map(|block| match block {
        ContentBlock::Resource { resource } if resource.blob.is_some() => {
            Some(resource.uri.clone())
        }
        _ => None,
    }) {
        Some(uri) => Err(ObligationError::Blob { uri }),
        None => Ok(()),
    }
}

/// Every `mask-secrets` and `mask-identifiers` obligation, together. An identifier the policy
/// gate would have refused (`Obligation::problem`) masks nothing.
pub fn masks(obligations: &[Obligation]) -> Masks {
    obligations
        .iter()
        .filter_map(|o| o.masks().ok().flatten())
        .fold(Masks::new(), Masks::merge)
}

/// Masks secrets and identifiers in the arguments a call's audit entry keeps (gate 10): the
/// call's `args` and the action's JSON text. The adapter got the arguments as sent; only the
/// record is masked.
pub fn mask_arguments(masks: &Masks, args: &mut Value, action_args: Option<&mut String>) {
    if masks.is_empty() {
        return;
    }
    masks.mask_value(args, "");
    if let Some(text) = action_args {
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                masks.mask_value(&mut value, "");
                *text = value.to_string();
            }
            Err(_) => {
                masks.mask_text(text);
            }
        }
    }
}

/// What `masks` finds in a call's arguments, each place under `args` (`args/body`): for the
/// decision record's `masked`.
pub fn argument_findings(masks: &Masks, args: &Value) -> Vec<Finding> {
    if masks.is_empty() {
        return Vec::new();
    }
    gatehouse_guardrails::find(masks, args)
        .into_iter()
        .map(|f| Finding {
            at: format!("args{}", f.at),
            ..f
        })
        .collect()
}

/// Applies obligations to a call that failed after its tool ran: personal data is masked in
/// the error; a redaction cannot be applied to a message (the value is unknown), so the
/// tool's message is withheld.
pub fn apply_to_error(obligations: &[Obligation], result: &mut ToolResultEnvelope) {
    let Some(error) = &mut result.error else {
        return;
    };
    for obligation in obligations {
        match obligation {
            Obligation::RedactPointer(pointer) => {
                error.message = format!(
                    "the tool's error message was withheld: a policy obligation redacts `{pointer}` of this tool's output"
                );
            }
            Obligation::MaskPii(kinds) => {
                error.message = mask(&error.message, kinds);
                if let Some(remediation) = &mut error.remediation {
                    *remediation = mask(remediation, kinds);
                }
            }
            Obligation::MaskSecrets { .. } | Obligation::MaskIdentifiers(_) => {}
        }
    }
    let masks = masks(obligations);
    masks.mask_text(&mut error.message);
    if let Some(remediation) = &mut error.remediation {
        masks.mask_text(remediation);
    }
}

/// Applies obligations to a JSON value shown to people rather than delivered to the caller:
/// a call's arguments as an approver sees them. The value at each redacted pointer, and every
/// copy of its text elsewhere in the value, becomes `"[REDACTED]"`; personal data, secrets and
/// identifiers are masked in every string. A pointer the value does not have redacts nothing.
pub fn apply_to_value(obligations: &[Obligation], value: &mut Value) {
    for obligation in obligations {
        match obligation {
            Obligation::RedactPointer(pointer) => {
                let Some(slot) = value.pointer_mut(pointer) else {
                    continue;
                };
                let old = std::mem::replace(slot, Value::String(REDACTED.to_owned()));
                let secrets = secrets(&old);
                for_each_value_string(value, &mut |s| replace_secrets(s, &secrets));
            }
            Obligation::MaskPii(kinds) => {
                for_each_value_string(value, &mut |s| *s = mask(s, kinds));
            }
            Obligation::MaskSecrets { .. } | Obligation::MaskIdentifiers(_) => {}
        }
    }
    masks(obligations).mask_value(value, "");
}

fn redact(pointer: &str, result: &mut ToolResultEnvelope) -> Result<(), ObligationError> {
    let Some(structured) = result.structured_content.as_mut() else {
        if result.content.is_empty() && result.error.is_none() {
            return Ok(());
        }
        return Err(ObligationError::NoStructured {
            pointer: pointer.to_owned(),
        });
    };
    let Some(slot) = structured.pointer_mut(pointer) else {
        return Ok(());
    };
    let old = std::mem::replace(slot, Value::String(REDACTED.to_owned()));
    let secrets = secrets(&old);
    for_each_string(result, &mut |s| replace_secrets(s, &secrets));
    Ok(())
}

/// The texts a redacted value held, longest first, so a secret containing another is
/// replaced whole.
fn secrets(old: &Value) -> Vec<String> {
    let mut secrets = Vec::new();
    leaves(old, &mut secrets);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

fn replace_secrets(s: &mut String, secrets: &[String]) {
    for secret in secrets {
        if s.contains(secret.as_str()) {
            *s = s.replace(secret.as_str(), REDACTED);
        }
    }
}

/// The texts a value holds, as they may appear elsewhere: each string and its JSON-escaped
/// form, each number and boolean as written.
fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            if !s.is_empty() && s != REDACTED {
                let escaped = serde_json::to_string(s).unwrap_or_default();
                let escaped = escaped.trim_matches('"');
                if escaped != s {
                    out.push(escaped.to_owned());
                }
                out.push(s.clone());
            }
        }
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        Value::Null => {}
    }
}

/// Calls `f` on every string of the result a caller receives from the tool.
fn for_each_string(result: &mut ToolResultEnvelope, f: &mut dyn FnMut(&mut String)) {
    if let Some(value) = &mut result.structured_content {
        for_each_value_string(value, f);
    }
    for_each_text(result, &mut |text, _| f(text));
}

/// Where in a result a text is, as the decision record's `masked` names it.
enum Place {
    Content(usize),
    ResourceUri(usize),
    ResourceText(usize),
    Evidence(usize),
    ErrorMessage,
    Remediation,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Content(i) => write!(f, "content/{i}"),
            Self::ResourceUri(i) => write!(f, "content/{i}/uri"),
            Self::ResourceText(i) => write!(f, "content/{i}/text"),
            Self::Evidence(i) => write!(f, "evidence_refs/{i}"),
            Self::ErrorMessage => f.write_str("error/message"),
            Self::Remediation => f.write_str("error/remediation"),
        }
    }
}

/// Calls `f` on every string of the result a caller receives from the tool but the structured
/// content's, with its place.
fn for_each_text(result: &mut ToolResultEnvelope, f: &mut dyn FnMut(&mut String, Place)) {
    for (i, block) in result.content.iter_mut().enumerate() {
        match block {
            ContentBlock::Text { text } => f(text, Place::Content(i)),
            ContentBlock::Resource { resource } => {
                f(&mut resource.uri, Place::ResourceUri(i));
                if let Some(text) = &mut resource.text {
                    f(text, Place::ResourceText(i));
                }
            }
            ContentBlock::Image { .. } | ContentBlock::Audio { .. } => {}
        }
    }
    for (i, evidence) in result.evidence_refs.iter_mut().enumerate() {
        f(evidence, Place::Evidence(i));
    }
    if let Some(error) = &mut result.error {
        f(&mut error.message, Place::ErrorMessage);
        if let Some(remediation) = &mut error.remediation {
            f(remediation, Place::Remediation);
        }
    }
}

fn for_each_value_string(value: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| for_each_value_string(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| for_each_value_string(v, f)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Which kinds of personal data `text` holds: (`email`, found), (`phone`, found). An email as
/// the `mask-pii` obligation finds one; a phone number more strictly than it masks (masking a
/// little more is harmless, labelling a session that holds none is not): of what the mask
/// would take, a run of 9 or more digits with a `+`, a space, a dash or a parenthesis among
/// them, and not a date (`2026-11-29 10:00`). A dotted address (`127.0.0.1`) is no phone.
pub fn personal_data(text: &str) -> [(&'static str, bool); 2] {
    let phone = PHONE.find_iter(text).any(|found| {
        let number = found.as_str();
        let digits = number.chars().filter(char::is_ascii_digit).count();
        digits >= 9 && number.contains(['+', ' ', '-', '(', ')']) && !DATE.is_match(number)
    });
    [("email", EMAIL.is_match(text)), ("phone", phone)]
}

fn mask(text: &str, kinds: &[PiiKind]) -> String {
    let mut out = text.to_owned();
    for kind in kinds {
        let regex = match kind {
            PiiKind::Email => &*EMAIL,
            PiiKind::Phone => &*PHONE,
        };
        out = regex.replace_all(&out, REDACTED).into_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn masks_secrets_and_identifiers_everywhere_names_each_and_withholds_blobs() {
        use gatehouse_core::model::{
            ApprovalMode, DecisionRecord, IdentifierPattern, SecretKind, Verdict,
        };
        const ENTROPIC: &str = "Zq8r2Lw0Vx7Nf3Jk9Pd5Tb1Hm6Yc4G";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
        let obligations = [
            Obligation::MaskSecrets {
                kinds: vec![SecretKind::Jwt, SecretKind::HighEntropy],
                fields: vec!["Token".to_owned()],
            },
            Obligation::MaskIdentifiers(vec![IdentifierPattern {
                name: "customer_id".to_owned(),
                pattern: "CUS-[0-9]{8}".to_owned(),
            }]),
        ];
        let call = gatehouse_core::envelope::ToolCallEnvelope::new("t", "a.b", json!({}));
        let mut result = ToolResultEnvelope::begin(&call);
        result.content = vec![ContentBlock::Text {
            text: format!("{{\"token\":\"{ENTROPIC}\"}} for CUS-12345678 with {jwt}"),
        }];
        result.structured_content = Some(json!({ "token": ENTROPIC, "note": "CUS-87654321" }));
        result.policy_decision = Some(DecisionRecord {
            decision_id: "pol_1".to_owned(),
            verdict: Verdict::Allow,
            approval_mode_effective: ApprovalMode::ReadOnly,
            default_applied: false,
            modules: Vec::new(),
            obligations: obligations.to_vec(),
            shadow: Vec::new(),
            masked: Vec::new(),
        });
        apply(&obligations, &mut result).unwrap();
        assert_eq!(
            result.content,
            [ContentBlock::Text {
                text: "{\"token\":\"[SECRET:high_entropy]\"} for [CUSTOMER_ID] with [SECRET:jwt]"
                    .to_owned()
            }]
        );
        assert_eq!(
            result.structured_content,
            Some(json!({ "token": "[SECRET:high_entropy]", "note": "[CUSTOMER_ID]" }))
        );
        let masked: Vec<(String, String)> = result
            .policy_decision
            .unwrap()
            .masked
            .into_iter()
            .map(|f| (f.kind, f.at))
            .collect();
        for (kind, at) in [
            ("high_entropy", "structured_content/token"),
            ("customer_id", "structured_content/note"),
            ("jwt", "content/0"),
            ("customer_id", "content/0"),
            ("high_entropy", "content/0"),
        ] {
            assert!(
                masked.contains(&(kind.to_owned(), at.to_owned())),
                "{kind} at {at}: {masked:?}"
            );
        }

        // The arguments an approver sees, and the audit entry keeps, are masked the same way.
        let mut args = json!({ "token": ENTROPIC, "body": format!("{jwt} CUS-12345678") });
        let mut action_args = args.to_string();
        mask_arguments(&masks(&obligations), &mut args, Some(&mut action_args));
        let masked_args =
            json!({ "token": "[SECRET:high_entropy]", "body": "[SECRET:jwt] [CUSTOMER_ID]" });
        assert_eq!(args, masked_args);
        assert_eq!(
            serde_json::from_str::<Value>(&action_args).unwrap(),
            masked_args
        );

        // A blob cannot be looked into: the result is withheld.
        let mut blob = ToolResultEnvelope::begin(&call);
        blob.content = vec![ContentBlock::Resource {
            resource: gatehouse_core::model::ResourceContents {
                uri: "file:///k".to_owned(),
                mime_type: None,
                text: None,
                blob: Some("AAAA".to_owned()),
            },
        }];
        assert!(matches!(
            apply(&obligations, &mut blob),
            Err(ObligationError::Blob { .. })
        ));
    }

    #[test]
    fn masks_emails_and_phones_and_redacts_pointers_everywhere() {
        let call = gatehouse_core::envelope::ToolCallEnvelope::new("t", "a.b", json!({}));
        let mut result = ToolResultEnvelope::begin(&call);
        result.content = vec![
            ContentBlock::Text {
                text: "mail ann@example.com or call +49 30 1234567; {\"iban\":\"DE89 3704\"}"
                    .to_owned(),
            },
            ContentBlock::Resource {
                resource: gatehouse_core::model::ResourceContents {
                    uri: "mailto:ann@example.com".to_owned(),
                    mime_type: None,
                    text: Some("iban DE89 3704".to_owned()),
                    blob: None,
                },
            },
        ];
        result.structured_content = Some(json!({ "who": "bob@example.org", "iban": "DE89 3704" }));
        result.evidence_refs = vec![
            "ledger:DE89 3704".to_owned(),
            "by:bob@example.org".to_owned(),
        ];
        apply(
            &[
                Obligation::MaskPii(vec![PiiKind::Email, PiiKind::Phone]),
                Obligation::RedactPointer("/iban".to_owned()),
            ],
            &mut result,
        )
        .unwrap();
        let whole = serde_json::to_string(&result).unwrap();
        for secret in ["ann@example.com", "bob@example.org", "1234567", "DE89"] {
            assert!(!whole.contains(secret), "{secret}: {whole}");
        }
        assert_eq!(
            result.structured_content,
            Some(json!({ "who": "[REDACTED]", "iban": "[REDACTED]" }))
        );
    }

    #[test]
    fn a_pointer_that_cannot_be_applied_fails_closed() {
        let call = gatehouse_core::envelope::ToolCallEnvelope::new("t", "a.b", json!({}));
        let mut result = ToolResultEnvelope::begin(&call);
        result.content = vec![ContentBlock::Text {
            text: "iban DE89".to_owned(),
        }];
        let err = apply(
            &[Obligation::RedactPointer("/iban".to_owned())],
            &mut result,
        )
        .unwrap_err();
        assert_eq!(
            err,
            ObligationError::NoStructured {
                pointer: "/iban".to_owned()
            }
        );
    }

    #[test]
    fn arguments_shown_to_people_get_the_same_redactions() {
        let mut args = json!({
            "iban": "DE89 3704 0044 0532 0130 00",
            "note": "pay DE89 3704 0044 0532 0130 00, mail ana@example.com",
            "amount": 1200,
        });
        apply_to_value(
            &[
                Obligation::RedactPointer("/iban".to_owned()),
                Obligation::RedactPointer("/missing".to_owned()),
                Obligation::MaskPii(vec![PiiKind::Email]),
            ],
            &mut args,
        );
        assert_eq!(
            args,
            json!({
                "iban": "[REDACTED]",
                "note": "pay [REDACTED], mail [REDACTED]",
                "amount": 1200,
            })
        );
    }
}
