//! Canonical JSON and the hashes made from it: the same value always gives the same text, so
//! its hash identifies it. The pipeline keys idempotency on [`request_hash`]; the audit log
//! keeps [`redacted`] hashes in place of sensitive values.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// `value` as canonical JSON: object keys sorted at every level, no insignificant
/// whitespace. The same value always gives the same text, so its hash identifies it.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(key).unwrap_or_default());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The hash that identifies a request under an idempotency key: SHA-256 of the canonical
/// JSON of the tool (after meta-tool resolution), its arguments and the approval mode asked
/// for. The same key with a different request is a conflict.
pub fn request_hash(tool: &str, args: &Value, mode_requested: Option<&str>) -> String {
    let request = serde_json::json!({ "tool": tool, "args": args, "mode": mode_requested });
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(&request)))
    )
}

/// The hash an audit record keeps in place of a sensitive value.
pub fn redacted(value: &Value) -> Value {
    Value::String(format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(value)))
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({ "b": 1, "a": { "d": [1, { "z": 0, "y": "é" }], "c": null } });
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[1,{"y":"é","z":0}]},"b":1}"#
        );
    }

    #[test]
    fn request_hash_ignores_key_order_and_sees_every_change() {
        let one = request_hash("t.x", &json!({ "a": 1, "b": 2 }), None);
        assert_eq!(one, request_hash("t.x", &json!({ "b": 2, "a": 1 }), None));
        assert_ne!(one, request_hash("t.x", &json!({ "a": 1, "b": 3 }), None));
        assert_ne!(one, request_hash("t.y", &json!({ "a": 1, "b": 2 }), None));
        assert_ne!(
            one,
            request_hash("t.x", &json!({ "a": 1, "b": 2 }), Some("network"))
        );
    }
}
