//! Local `$ref`s of an OpenAPI document, resolved by inlining: JSON pointers into the same
//! document (`#/components/schemas/Pet`), nested refs followed, a recursive ref cut off (the
//! schema at the cycle is replaced by one that accepts anything and says why).

use serde_json::{Map, Value};

/// How deep nested refs are inlined before the rest is accepted as is: deeper than any
/// hand-written schema, and a bound on the size a document can make an import.
const MAX_DEPTH: usize = 32;

/// Why a `$ref` cannot be inlined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefError {
    /// A local pointer that names nothing in the document.
    Unresolved(String),
    /// A ref to another document (`other.yaml#/...`, a URL).
    External(String),
}

/// The value at the JSON pointer `#/a/b~1c` in `root`.
pub fn lookup<'a>(root: &'a Value, reference: &str) -> Result<&'a Value, RefError> {
    let pointer = reference
        .strip_prefix('#')
        .ok_or_else(|| RefError::External(reference.to_owned()))?;
    root.pointer(pointer)
        .ok_or_else(|| RefError::Unresolved(reference.to_owned()))
}

/// `value` with every `$ref` inlined.
pub fn inline(root: &Value, value: &Value) -> Result<Value, RefError> {
    let mut stack = Vec::new();
    expand(root, value, &mut stack)
}

fn expand(root: &Value, value: &Value, stack: &mut Vec<String>) -> Result<Value, RefError> {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                if stack.iter().any(|r| r == reference) || stack.len() >= MAX_DEPTH {
                    return Ok(serde_json::json!({
                        "description": format!("recursive: another {reference}")
                    }));
                }
                let target = lookup(root, reference)?;
                stack.push(reference.clone());
                let expanded = expand(root, target, stack);
                stack.pop();
                return expanded;
            }
            let mut out = Map::with_capacity(map.len());
            for (key, item) in map {
                out.insert(key.clone(), expand(root, item, stack)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| expand(root, item, stack))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn inlines_nested_refs_and_cuts_cycles() {
        let root = json!({ "components": { "schemas": {
            "Pet": { "type": "object", "properties": { "owner": { "$ref": "#/components/schemas/Owner" } } },
            "Owner": { "type": "object", "properties": { "name": { "type": "string" } } },
            "Node": { "type": "object", "properties": { "next": { "$ref": "#/components/schemas/Node" } } },
            "a/b": { "type": "integer" },
        } } });
        let pet = inline(&root, &json!({ "$ref": "#/components/schemas/Pet" })).unwrap();
        assert_eq!(
            pet["properties"]["owner"]["properties"]["name"]["type"],
            "string"
        );
        let node = inline(&root, &json!({ "$ref": "#/components/schemas/Node" })).unwrap();
        assert_eq!(
            node["properties"]["next"],
            json!({ "description": "recursive: another #/components/schemas/Node" })
        );
        let escaped = inline(&root, &json!({ "$ref": "#/components/schemas/a~1b" })).unwrap();
        assert_eq!(escaped, json!({ "type": "integer" }));
    }

    #[test]
    fn names_the_pointer_that_does_not_resolve() {
        assert_eq!(
            inline(
                &json!({}),
                &json!({ "items": { "$ref": "#/components/schemas/Nope" } })
            ),
            Err(RefError::Unresolved("#/components/schemas/Nope".into()))
        );
        assert_eq!(
            inline(&json!({}), &json!({ "$ref": "pets.yaml#/Pet" })),
            Err(RefError::External("pets.yaml#/Pet".into()))
        );
    }
}
