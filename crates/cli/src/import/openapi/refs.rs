//! Local `$ref`s of an OpenAPI document: JSON pointers into the same document
//! (`#/components/schemas/Pet`, `#/paths/~1pets/get/parameters/0`, percent-encoded as a URI
//! fragment may be: `#/components/schemas/Pet%20Owner`), resolved one of two ways:
//!
//! - [`inline`]: each `$ref` replaced by a copy of what it points to, nested refs followed, a
//!   recursive ref cut off (the schema at the cycle is replaced by one that accepts anything
//!   and says why). What the importer does first: a model reads one schema, no references.
//! - [`share`]: a `$ref` to a whole component schema (`#/components/schemas/NAME`) becomes a
//!   `$ref` to `#/$defs/NAME` of the input schema, and the schema is copied there once, its
//!   own refs shared the same way (recursion included); any other ref is inlined. What the
//!   importer does for an operation whose inlined schema is too large.
//!
//! Inlining copies a schema once per place that refers to it, so a small document can ask for
//! an enormous result: 40 schemas each referring twice to the one before make 2^40 copies of
//! the first. Shared, each is copied once per operation. Either way each value is paid from a
//! [`Budget`] of JSON values, and resolution stops with [`RefError::TooLarge`], naming the
//! schema it was expanding, the moment the budget is spent: what an import holds in memory is
//! bounded by the budget, whatever the document.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::{Map, Value};

/// How deep nested refs are inlined before the rest is accepted as is: deeper than any
/// hand-written schema.
const MAX_DEPTH: usize = 32;

/// Where a shared component schema is put: the input schema's `$defs` (JSON Schema 2020-12).
const DEFS: &str = "#/$defs/";

/// The prefix of a `$ref` to a component schema, which [`share`] keeps shared.
const COMPONENT_SCHEMAS: &str = "#/components/schemas/";

/// Every byte but RFC 3986's unreserved characters: what a `$ref` this module writes encodes.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

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

/// The value at the local ref `#/a/b~1c` in `root`: a JSON pointer in a URI fragment, so
/// percent-decoded first (`#/components/schemas/a%20b` is `a b`).
pub fn lookup<'a>(root: &'a Value, reference: &str) -> Result<&'a Value, RefError> {
    let fragment = reference
        .strip_prefix('#')
        .ok_or_else(|| RefError::External(reference.to_owned()))?;
    let unresolved = || RefError::Unresolved(reference.to_owned());
    let pointer = percent_decoded(fragment).ok_or_else(unresolved)?;
    root.pointer(&pointer).ok_or_else(unresolved)
}

/// `value` with every `$ref` inlined, each value of the result paid from `budget`.
pub fn inline(root: &Value, value: &Value, budget: &mut Budget) -> Result<Value, RefError> {
    Resolver {
        root,
        budget,
        stack: Vec::new(),
        shared: None,
    }
    .expand(value)
}

/// `value` with each `$ref` to a component schema made a `$ref` into `defs` (the input
/// schema's `$defs`), where the schema is put once, and every other `$ref` inlined; each value
/// of the result and of what it adds to `defs` paid from `budget`. Call it for each part of
/// one input schema with the same `defs`.
pub fn share(
    root: &Value,
    value: &Value,
    budget: &mut Budget,
    defs: &mut Map<String, Value>,
) -> Result<Value, RefError> {
    let mut resolver = Resolver {
        root,
        budget,
        stack: Vec::new(),
        shared: Some(Shared {
            defs,
            pending: Vec::new(),
        }),
    };
    let shared = resolver.expand(value)?;
    // Each schema met is expanded here, after the one that met it, not inside it: a chain of
    // schemas as long as the document's takes no deeper recursion than one schema's nesting.
    while let Some((name, reference)) = resolver.shared.as_mut().and_then(|s| s.pending.pop()) {
        let target = lookup(root, &reference)?;
        resolver.stack = vec![reference];
        let expanded = resolver.expand(target)?;
        if let Some(shared) = &mut resolver.shared {
            shared.defs.insert(name, expanded);
        }
    }
    Ok(shared)
}

/// The component schemas met while sharing: `defs` holds each by name (a placeholder until it
/// is expanded), `pending` those still to expand, with their refs.
struct Shared<'a> {
    defs: &'a mut Map<String, Value>,
    pending: Vec<(String, String)>,
}

struct Resolver<'a, 'b> {
    root: &'a Value,
    budget: &'b mut Budget,
    /// The refs being inlined, outermost first.
    stack: Vec<String>,
    /// `Some` when component schemas are shared ([`share`]).
    shared: Option<Shared<'b>>,
}

impl Resolver<'_, '_> {
    fn expand(&mut self, value: &Value) -> Result<Value, RefError> {
        self.budget.spend(&self.stack)?;
        match value {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    return self.reference(reference);
                }
                let mut out = Map::with_capacity(map.len());
                for (key, item) in map {
                    out.insert(key.clone(), self.expand(item)?);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => items
                .iter()
                .map(|item| self.expand(item))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => Ok(other.clone()),
        }
    }

    /// What `{"$ref": reference}` becomes.
    fn reference(&mut self, reference: &str) -> Result<Value, RefError> {
        if let Some(shared) = &mut self.shared
            && let Some(name) = component_schema(reference)
        {
            // The ref object is paid for; its string.
            self.budget.spend(&self.stack)?;
            if !shared.defs.contains_key(&name) {
                // Resolved now, so a dangling ref is refused where it is met.
                lookup(self.root, reference)?;
                shared.defs.insert(name.clone(), Value::Bool(true));
                shared.pending.push((name.clone(), reference.to_owned()));
            }
            return Ok(serde_json::json!({ "$ref": format!("{DEFS}{}", fragment_segment(&name)) }));
        }
        if self.stack.iter().any(|r| r == reference) || self.stack.len() >= MAX_DEPTH {
            return Ok(serde_json::json!({
                "description": format!("recursive: another {reference}")
            }));
        }
        let target = lookup(self.root, reference)?;
        self.stack.push(reference.to_owned());
        let expanded = self.expand(target);
        self.stack.pop();
        expanded
    }
}

/// The name of the component schema `reference` names whole (`#/components/schemas/NAME`,
/// one pointer segment, unescaped), if it does.
fn component_schema(reference: &str) -> Option<String> {
    let segment = percent_decoded(reference.strip_prefix(COMPONENT_SCHEMAS)?)?;
    (!segment.contains('/')).then(|| segment.replace("~1", "/").replace("~0", "~"))
}

/// `name` as one segment of a JSON pointer in a URI fragment: `~` and `/` escaped as the
/// pointer does (`~0`, `~1`), then every byte but RFC 3986's unreserved characters
/// percent-encoded.
fn fragment_segment(name: &str) -> String {
    let escaped = name.replace('~', "~0").replace('/', "~1");
    utf8_percent_encode(&escaped, NOT_UNRESERVED).to_string()
}

/// `text` with its `%XX` escapes decoded (a `%` not followed by two hex digits stays as it
/// is); `None` if the result is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
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
