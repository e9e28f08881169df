//! The pinned digest of an imported tool's definition: SHA-256 over its canonical JSON (object
//! keys sorted, no whitespace), so the same definition always has the same digest whatever
//! order the upstream writes its keys in.

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// `sha256:<hex>` of the canonical JSON of `definition`.
pub fn of(definition: &Value) -> String {
    let canonical = serde_json::to_vec(&canonical(definition)).expect("JSON values serialize");
    format!("sha256:{}", hex::encode(Sha256::digest(canonical)))
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let sorted: Map<String, Value> = keys
                .into_iter()
                .map(|k| (k.clone(), canonical(&map[k])))
                .collect();
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_does_not_change_the_digest_and_content_does() {
        let a: Value = serde_json::from_str(
            r#"{"name":"t","inputSchema":{"type":"object","properties":{"a":{},"b":{}}}}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            r#"{"inputSchema":{"properties":{"b":{},"a":{}},"type":"object"},"name":"t"}"#,
        )
        .unwrap();
        assert_eq!(of(&a), of(&b));
        assert_ne!(of(&a), of(&json!({ "name": "t" })));
        assert!(of(&a).starts_with("sha256:") && of(&a).len() == 7 + 64);
    }
}
