//! Local `$ref`s of an OpenAPI document, resolved by inlining: JSON pointers into the same
//! document (`#/components/schemas/Pet`), nested refs followed, a recursive ref cut off (the
//! schema at the cycle is replaced by one that accepts anything and says why).
//!
//! Inlining copies a schema once per place that refers to it, so a small document can ask for
//! an enormous result: 40 schemas each referring twice to the one before make 2^40 copies of
//! the first. Every inline therefore draws on a [`Budget`] of JSON values and stops with
//! [`RefError::TooLarge`], naming the schema it was expanding, the moment the budget is spent:
//! what an import holds in memory is bounded by the budget, whatever the document.

use serde_json::{Map, Value};

/// How deep nested refs are inlined before the rest is accepted as is: deeper than any
/// hand-written schema.
const MAX_DEPTH: usize = 32;

/// Why a `$ref` cannot be inlined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefError {
    /// A local pointer that names nothing in the document.
    Unresolved(String),
    /// A ref to another document (`other.yaml#/...`, a URL).
    External(String),
    /// Inlining spent the budget of `limit` JSON values while expanding `reference` (the
    /// outermost `$ref` being expanded; `None` when the values were not behind a `$ref`).
    TooLarge {
        /// The schema that was being expanded.
        reference: Option<String>,
        /// The budget that was spent.
        limit: usize,
    },
}

/// How many JSON values (objects, arrays, strings, numbers, ...) inlining may still produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Values left.
    pub left: usize,
    /// Values the budget started with.
    pub limit: usize,
}

impl Budget {
    /// A budget of `limit` values.
    pub fn new(limit: usize) -> Self {
        Self { left: limit, limit }
    }

    /// Values spent so far.
    pub fn spent(&self) -> usize {
        self.limit - self.left
    }

    /// Spends one value, or says which schema was being expanded when there was none left.
    fn spend(&mut self, stack: &[String]) -> Result<(), RefError> {
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(RefError::TooLarge {
                reference: stack.first().cloned(),
                limit: self.limit,
            }),
        }
    }
}

/// The value at the JSON pointer `#/a/b~1c` in `root`.
pub fn lookup<'a>(root: &'a Value, reference: &str) -> Result<&'a Value, RefError> {
    let pointer = reference
        .strip_prefix('#')
        .ok_or_else(|| RefError::External(reference.to_owned()))?;
    root.pointer(pointer)
        .ok_or_else(|| RefError::Unresolved(reference.to_owned()))
}

/// `value` with every `$ref` inlined, each value of the result paid from `budget`.
pub fn inline(root: &Value, value: &Value, budget: &mut Budget) -> Result<Value, RefError> {
    let mut stack = Vec::new();
    expand(root, value, &mut stack, budget)
}

fn expand(
    root: &Value,
    value: &Value,
    stack: &mut Vec<String>,
    budget: &mut Budget,
) -> Result<Value, RefError> {
    budget.spend(stack)?;
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
                let expanded = expand(root, target, stack, budget);
                stack.pop();
                return expanded;
            }
            let mut out = Map::with_capacity(map.len());
            for (key, item) in map {
                out.insert(key.clone(), expand(root, item, stack, budget)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| expand(root, item, stack, budget))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// `levels` schemas `S0`..., each referring twice to the one before: 2^levels copies of `S0`
/// once inlined (for the tests here and the importer's).
#[cfg(test)]
pub(crate) fn fan_out(levels: usize) -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert("S0".into(), serde_json::json!({ "type": "string" }));
    for i in 1..levels {
        let before = format!("#/components/schemas/S{}", i - 1);
        schemas.insert(
            format!("S{i}"),
            serde_json::json!({ "type": "object", "properties": { "a": { "$ref": before }, "b": { "$ref": before } } }),
        );
    }
    schemas
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `value` inlined with a budget no test document reaches.
    fn inline(root: &Value, value: &Value) -> Result<Value, RefError> {
        super::inline(root, value, &mut Budget::new(1_000))
    }

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

    #[test]
    fn stops_a_fan_out_when_the_budget_is_spent_naming_the_schema() {
        let root = json!({ "components": { "schemas": fan_out(40) } });
        let top = json!({ "$ref": "#/components/schemas/S39" });
        let mut budget = Budget::new(10_000);
        assert_eq!(
            super::inline(&root, &top, &mut budget),
            Err(RefError::TooLarge {
                reference: Some("#/components/schemas/S39".into()),
                limit: 10_000
            })
        );
        assert_eq!(budget.left, 0);
        // Values not behind a `$ref` count too.
        let big = json!({ "enum": (0..100).collect::<Vec<_>>() });
        assert_eq!(
            super::inline(&root, &big, &mut Budget::new(50)),
            Err(RefError::TooLarge {
                reference: None,
                limit: 50
            })
        );
        // What fits is inlined whole, and the budget says what it cost: each `$ref` one, and
        // its target: S0 two values (the object, its `type`), S1 to S3 three (the object,
        // `type`, `properties`) and their two refs. 8 refs to S0, 4 to S1, 2 to S2, 1 to S3.
        let mut budget = Budget::new(1_000);
        let s3 = super::inline(
            &root,
            &json!({ "$ref": "#/components/schemas/S3" }),
            &mut budget,
        )
        .unwrap();
        assert_eq!(
            s3["properties"]["b"]["properties"]["a"]["properties"]["b"],
            json!({ "type": "string" })
        );
        assert_eq!(
            budget.spent(),
            8 * (1 + 2) + 4 * (1 + 3) + 2 * (1 + 3) + (1 + 3)
        );
    }
}
