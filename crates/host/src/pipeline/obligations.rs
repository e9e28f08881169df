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
//!
//! Pointers are checked when a policy returns them ([`Obligation::problem`]): an invalid one
//! makes that policy's decision a deny (`POLICY_FAILED`).

use std::sync::LazyLock;

use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_core::model::{ContentBlock, Obligation, PiiKind};
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
        "a policy obligation masks personal data, but the result carries binary resource \
         `{uri}` that cannot be inspected, so the result is withheld"
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
                if let Some(uri) = result.content.iter().find_map(|block| match block {
                    ContentBlock::Resource { resource } if resource.blob.is_some() => {
                        Some(resource.uri.clone())
                    }
                    _ => None,
                }) {
                    return Err(ObligationError::Blob { uri });
                }
                for_each_string(result, &mut |s| *s = mask(s, kinds));
            }
        }
    }
    Ok(())
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
        }
    }
}

/// Applies obligations to a JSON value shown to people rather than delivered to the caller:
/// a call's arguments as an approver sees them. The value at each redacted pointer, and every
/// copy of its text elsewhere in the value, becomes `"[REDACTED]"`; personal data is masked in
/// every string. A pointer the value does not have redacts nothing.
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
        }
    }
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
    for block in &mut result.content {
        match block {
            ContentBlock::Text { text } => f(text),
            ContentBlock::Resource { resource } => {
                f(&mut resource.uri);
                if let Some(text) = &mut resource.text {
                    f(text);
                }
            }
            ContentBlock::Image { .. } | ContentBlock::Audio { .. } => {}
        }
    }
    if let Some(value) = &mut result.structured_content {
        for_each_value_string(value, f);
    }
    result.evidence_refs.iter_mut().for_each(&mut *f);
    if let Some(error) = &mut result.error {
        f(&mut error.message);
        if let Some(remediation) = &mut error.remediation {
            f(remediation);
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
