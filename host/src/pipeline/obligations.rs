//! Result obligations from policy decisions: redact JSON pointers, mask personal data.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::model::{ContentBlock, Obligation, PiiKind};

/// What masked data is replaced with.
pub const REDACTED: &str = "[REDACTED]";

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}").expect("valid regex")
});
// International or local numbers of 7+ digits with common separators.
static PHONE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\+?\d[\d ().-]{5,}\d").expect("valid regex"));

/// Applies every obligation to the result's content and structured output.
pub fn apply(
    obligations: &[Obligation],
    content: &mut [ContentBlock],
    structured: &mut Option<Value>,
) {
    for obligation in obligations {
        match obligation {
            Obligation::RedactPointer(pointer) => {
                if let Some(slot) = structured.as_mut().and_then(|v| v.pointer_mut(pointer)) {
                    *slot = Value::String(REDACTED.to_owned());
                }
            }
            Obligation::MaskPii(kinds) => {
                for block in content.iter_mut() {
                    if let ContentBlock::Text { text } = block {
                        *text = mask(text, kinds);
                    }
                }
                if let Some(value) = structured.as_mut() {
                    mask_value(value, kinds);
                }
            }
        }
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

fn mask_value(value: &mut Value, kinds: &[PiiKind]) {
    match value {
        Value::String(s) => *s = mask(s, kinds),
        Value::Array(items) => items.iter_mut().for_each(|v| mask_value(v, kinds)),
        Value::Object(map) => map.values_mut().for_each(|v| mask_value(v, kinds)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn masks_emails_and_phones_and_redacts_pointers() {
        let mut content = vec![ContentBlock::Text {
            text: "mail ann@example.com or call +49 30 1234567".to_owned(),
        }];
        let mut structured = Some(json!({ "who": "bob@example.org", "iban": "DE89" }));
        apply(
            &[
                Obligation::MaskPii(vec![PiiKind::Email, PiiKind::Phone]),
                Obligation::RedactPointer("/iban".to_owned()),
            ],
            &mut content,
            &mut structured,
        );
        assert_eq!(
            content,
            [ContentBlock::Text {
                text: "mail [REDACTED] or call [REDACTED]".to_owned()
            }]
        );
        assert_eq!(
            structured,
            Some(json!({ "who": "[REDACTED]", "iban": "[REDACTED]" }))
        );
    }
}
