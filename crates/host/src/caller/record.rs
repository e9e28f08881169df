//! How an ask is kept in the call's audit record: its params and answer as sent, but a form's
//! sensitive fields as SHA-256 hashes (`sha256:<hex>` of the value's canonical JSON, as a
//! sensitive capability's arguments are kept), and everything as a hash for a capability
//! declared `sensitive`.
//!
//! A form field is sensitive when its schema in `requestedSchema.properties` says
//! `"format": "password"` or `"writeOnly": true`, or its name is one of the secrets
//! guardrail's [`SENSITIVE_FIELDS`](gatehouse_guardrails::SENSITIVE_FIELDS) (compared without
//! case). Its `default` in the params, and its value in the answer's `content`, are hashed.

use std::collections::BTreeSet;

use gatehouse_core::canonical::redacted;
use gatehouse_guardrails::is_sensitive_field;
use serde_json::Value;

/// The names of the sensitive fields of an elicitation's form (none for anything else).
pub fn sensitive_fields(params: &Value) -> BTreeSet<String> {
    let Some(properties) = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
    else {
        return BTreeSet::new();
    };
    properties
        .iter()
        .filter(|(name, schema)| {
            is_sensitive_field(name)
                || schema.get("format").and_then(Value::as_str) == Some("password")
                || schema.get("writeOnly").and_then(Value::as_bool) == Some(true)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// `params` as kept: the `default` of each of `fields` hashed.
pub fn params(mut params: Value, fields: &BTreeSet<String>) -> Value {
    if let Some(properties) = params
        .pointer_mut("/requestedSchema/properties")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in properties.iter_mut() {
            if fields.contains(name)
                && let Some(default) = schema.get_mut("default")
            {
                *default = redacted(default);
            }
        }
    }
    params
}

/// An answer as kept: the values of `fields` in its `content` hashed.
pub fn answer(mut answer: Value, fields: &BTreeSet<String>) -> Value {
    if let Some(content) = answer.get_mut("content").and_then(Value::as_object_mut) {
        for (name, value) in content.iter_mut() {
            if fields.contains(name) {
                *value = redacted(value);
            }
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_forms_sensitive_fields_are_kept_as_hashes_and_the_rest_in_clear() {
        let asked = json!({
            "message": "Sign in",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "user": { "type": "string", "default": "ada" },
                    "pin": { "type": "string", "format": "password", "default": "1234" },
                    "answer": { "type": "string", "writeOnly": true },
                    "API_Key": { "type": "string" },
                    "remember": { "type": "boolean", "format": "email" }
                }
            }
        });
        let fields = sensitive_fields(&asked);
        assert_eq!(
            fields.iter().map(String::as_str).collect::<Vec<_>>(),
            ["API_Key", "answer", "pin"]
        );
        let kept = params(asked.clone(), &fields);
        assert_eq!(
            kept["requestedSchema"]["properties"]["pin"]["default"],
            redacted(&json!("1234"))
        );
        assert_eq!(
            kept["requestedSchema"]["properties"]["user"]["default"],
            "ada"
        );
        let answered = json!({
            "action": "accept",
            "content": { "user": "ada", "pin": "1234", "answer": "42", "API_Key": "k-1", "remember": true }
        });
        let kept = answer(answered, &fields);
        assert_eq!(
            kept,
            json!({
                "action": "accept",
                "content": {
                    "user": "ada",
                    "pin": redacted(&json!("1234")),
                    "answer": redacted(&json!("42")),
                    "API_Key": redacted(&json!("k-1")),
                    "remember": true
                }
            })
        );
        // Not a form: nothing is sensitive, a sampling result is kept whole.
        let sampling = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": "password" } }], "maxTokens": 5 });
        assert!(sensitive_fields(&sampling).is_empty());
    }
}
