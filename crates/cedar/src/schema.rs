//! The Cedar schema of a config's tools: the entity types of the model ([`crate`]) and one
//! action per tool, its context's `args` typed from the tool's input schema.

use serde_json::{Map, Value, json};

use crate::Tool;

/// The Cedar schema (JSON form) of `tools`.
pub fn schema(tools: &[Tool]) -> Value {
    let string = || json!({ "type": "String" });
    let strings = || json!({ "type": "Set", "element": { "type": "String" } });
    let optional_bool = || json!({ "type": "Boolean", "required": false });
    let mut actions = Map::new();
    actions.insert("call".to_owned(), json!({}));
    for tool in tools {
        let args = cedar_type(&tool.input_schema).unwrap_or_else(|| record(Map::new()));
        actions.insert(
            tool.name.clone(),
            json!({
                "memberOf": [{ "id": "call" }],
                "appliesTo": {
                    "principalTypes": ["Caller"],
                    "resourceTypes": ["Tool"],
                    "context": record(Map::from_iter([
                        ("args".to_owned(), args),
                        ("mode".to_owned(), string()),
                        ("now".to_owned(), json!({ "type": "Long" })),
                        ("hour".to_owned(), json!({ "type": "Long" })),
                        ("weekday".to_owned(), json!({ "type": "Long" })),
                        ("prior_actions".to_owned(), strings()),
                        ("data_classification".to_owned(), strings()),
                        ("skills".to_owned(), strings()),
                        ("protocol".to_owned(), string()),
                        ("delegated_by".to_owned(), json!({ "type": "String", "required": false })),
                        ("session".to_owned(), record(Map::from_iter([
                            ("labels".to_owned(), strings()),
                            ("tools".to_owned(), strings()),
                        ]))),
                    ])),
                }
            }),
        );
    }
    json!({
        "": {
            "entityTypes": {
                "Tenant": {},
                "Caller": {
                    "memberOfTypes": ["Tenant"],
                    "shape": record(Map::from_iter([
                        ("tenant".to_owned(), string()),
                        ("kind".to_owned(), string()),
                        ("chain".to_owned(), strings()),
                        ("roles".to_owned(), strings()),
                        ("groups".to_owned(), strings()),
                    ])),
                },
                "Adapter": {},
                "Tool": {
                    "memberOfTypes": ["Adapter"],
                    "shape": record(Map::from_iter([
                        ("adapter".to_owned(), string()),
                        ("capability".to_owned(), string()),
                        ("class".to_owned(), string()),
                        ("max_mode".to_owned(), string()),
                        ("annotations".to_owned(), record(Map::from_iter([
                            ("read_only".to_owned(), optional_bool()),
                            ("destructive".to_owned(), optional_bool()),
                            ("idempotent".to_owned(), optional_bool()),
                            ("open_world".to_owned(), optional_bool()),
                        ]))),
                        ("produces".to_owned(), strings()),
                        ("sends".to_owned(), strings()),
                    ])),
                },
            },
            "actions": actions,
        }
    })
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "every caller builds the map for this call"
)]
fn record(attributes: Map<String, Value>) -> Value {
    json!({ "type": "Record", "attributes": attributes })
}

/// The JSON type a JSON Schema declares (`["string", "null"]` declares `string`); an `enum`
/// of strings is a string.
pub fn json_type(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(types)) => {
            let mut real = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null");
            let first = real.next()?;
            real.next().is_none().then_some(first)
        }
        _ => schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty() && e.iter().all(Value::is_string))
            .map(|_| "string"),
    }
}

/// The Cedar type of a JSON Schema, if it has one: `integer` is `Long`, `number` a `decimal`,
/// an object with `properties` a record (required as the schema says), an array of typed
/// `items` a set.
fn cedar_type(schema: &Value) -> Option<Value> {
    Some(match json_type(schema)? {
        "string" => json!({ "type": "String" }),
        "integer" => json!({ "type": "Long" }),
        "number" => json!({ "type": "Extension", "name": "decimal" }),
        "boolean" => json!({ "type": "Boolean" }),
        "array" => json!({ "type": "Set", "element": cedar_type(schema.get("items")?)? }),
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut attributes = Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if let Some(mut ty) = cedar_type(property) {
                        ty["required"] = Value::Bool(required.contains(&name.as_str()));
                        attributes.insert(name.clone(), ty);
                    }
                }
            }
            record(attributes)
        }
        _ => return None,
    })
}
