//! `pattern`s of an imported input schema in the dialect JSON Schema knows: ECMA-262 regular
//! expressions. OpenAPI documents written from Ruby or Python code often anchor theirs with
//! `\A` and `\z` (or `\Z`), which ECMA-262 does not have (a client's JavaScript reads `\A`
//! as the letter `A`, or refuses it; the host's engine refuses `\Z`): each is translated to
//! `^` and `$`. A pattern the host still cannot compile is dropped. Either is noted, and the
//! rest of the schema is kept: a pattern narrows what a call may send, and the upstream still
//! checks its own.

use gatehouse_host::plugin::manifest::schema_problem;
use serde_json::Value;

/// Keys whose values are instances, not schemas: a `pattern` inside them is data.
const DATA: [&str; 5] = ["enum", "const", "default", "example", "examples"];

/// Keys whose values map names to schemas: a name there is no keyword (a property may be
/// called `default`).
const NAMED: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Translates each `pattern` of `schema` anchored with `\A`, `\z` or `\Z`, and drops one the
/// host cannot compile: what was done, one note each, naming where (a JSON pointer into the
/// input schema).
pub fn translate(schema: &mut Value) -> Vec<String> {
    let mut notes = Vec::new();
    walk(schema, &mut String::new(), false, &mut notes);
    notes
}

/// Walks `value`, at `at`; `names`: its keys are names of schemas, not keywords.
fn walk(value: &mut Value, at: &mut String, names: bool, notes: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if !names && let Some(Value::String(pattern)) = map.get("pattern") {
                let original = pattern.clone();
                let translated = ecma(&original);
                if !compiles(&translated) {
                    notes.push(format!(
                        "pattern `{original}` at {at}/pattern dropped: it is not an ECMA-262 \
                         regular expression (the dialect of JSON Schema); the upstream still \
                         checks the value"
                    ));
                    map.shift_remove("pattern");
                } else if translated != original {
                    notes.push(format!(
                        "pattern `{original}` at {at}/pattern written as `{translated}`: `\\A`, \
                         `\\z` and `\\Z` are not ECMA-262, the dialect of JSON Schema"
                    ));
                    map.insert("pattern".to_owned(), Value::String(translated));
                }
            }
            for (key, item) in map.iter_mut() {
                if !names && DATA.contains(&key.as_str()) {
                    continue;
                }
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                walk(item, at, !names && NAMED.contains(&key.as_str()), notes);
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{index}"));
                walk(item, at, false, notes);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// Whether the host compiles `pattern`, as it compiles a manifest's schemas.
fn compiles(pattern: &str) -> bool {
    schema_problem(&serde_json::json!({ "pattern": pattern })).is_none()
}

/// `pattern` with the anchors `\A` (start) and `\z`, `\Z` (end) as ECMA-262's `^` and `$`
/// (without the `m` flag, `$` is the end of the input); an escaped backslash stays one.
fn ecma(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('A') => out.push('^'),
            Some('z' | 'Z') => out.push('$'),
            Some(next) => {
                out.push('\\');
                out.push(next);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn translates_ruby_anchors_and_drops_what_still_does_not_compile() {
        let mut schema = json!({ "type": "object", "properties": {
            "slug": { "type": "string", "pattern": "\\A[a-z0-9-]+\\z" },
            "path": { "type": "string", "pattern": "\\A\\\\A\\Z" },
            "plain": { "type": "string", "pattern": "^[a-z]+$" },
            "broken": { "type": "string", "pattern": "(?<=x" },
            "data": { "type": "object", "default": { "pattern": "\\A" } },
            "default": { "type": "string", "pattern": "\\Aa\\z" },
        } });
        let notes = translate(&mut schema);
        let properties = &schema["properties"];
        assert_eq!(properties["slug"]["pattern"], "^[a-z0-9-]+$");
        assert_eq!(properties["path"]["pattern"], "^\\\\A$");
        assert_eq!(properties["plain"]["pattern"], "^[a-z]+$");
        assert_eq!(properties["broken"], json!({ "type": "string" }));
        assert_eq!(properties["data"]["default"], json!({ "pattern": "\\A" }));
        assert_eq!(
            properties["default"]["pattern"], "^a$",
            "a property, not data"
        );
        assert_eq!(notes.len(), 4, "{notes:#?}");
        assert!(
            notes[0].starts_with(
                "pattern `\\A[a-z0-9-]+\\z` at /properties/slug/pattern written as `^[a-z0-9-]+$`"
            ),
            "{notes:#?}"
        );
        assert_eq!(
            notes[2],
            "pattern `(?<=x` at /properties/broken/pattern dropped: it is not an ECMA-262 \
             regular expression (the dialect of JSON Schema); the upstream still checks the value"
        );
        assert_eq!(schema_problem(&schema), None);
    }
}
