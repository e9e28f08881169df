//! What an adapter serves besides its tools (contract 0.6.0): resources, resource templates
//! and prompts, as its manifest declares them (`[[resource]]`, `[[resource_template]]`,
//! `[[prompt]]`).
//!
//! Each is governed as a tool is: it has an id in the adapter (`<adapter id>.<id>` is the name
//! the operator's `[[pipeline.tool]]` grants, policies and the audit log see), and a read or a
//! fill-in is a call of the read-only capability [`Resource::capability`],
//! [`ResourceTemplate::capability`] or [`Prompt::capability`] makes of it: class `observe`,
//! mode `read_only`, arguments the URI (and a template's parameters, each checked against the
//! manifest's schema and the grant's `arg_constraints`) or the prompt's arguments.
//!
//! ```toml
//! [[resource]]
//! id = "handbook"
//! uri = "docs://handbook"
//! mime_type = "text/markdown"
//! classification = "internal"
//!
//! [[resource_template]]
//! id = "order"
//! uri_template = "orders://{order_id}"
//! parameters = { order_id = { type = "string", pattern = "^[0-9]{1,12}$" } }
//!
//! [[prompt]]
//! id = "summarize"
//! arguments = [{ name = "text", required = true }]
//! ```

use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::manifest::Capability;

/// One resource: a fixed URI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Identifier within the adapter, `[a-z0-9_-]`, unique among its capabilities, resources,
    /// resource templates and prompts.
    pub id: String,
    /// Its URI, as `resources/read` names it.
    pub uri: String,
    /// MCP's `name` (shown to users). Default: the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it holds.
    #[serde(default)]
    pub description: String,
    /// Its MIME type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The data classification the operator reviewed (e.g. `public`, `internal`, `PII`):
    /// policies see it in the action's arguments (`classification`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<String>,
    /// Whether its contents are sensitive: the audit log keeps only their hashes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// The labels its contents carry, which join the reader's session (as a capability's
    /// `produces`). Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produces: Vec<String>,
    /// Where a generic adapter reads it (as a capability's `upstream`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Value>,
}

/// One resource template: URIs made from an RFC 6570 template of simple expressions
/// (`{name}`, which never holds `/`, `?` or `#`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceTemplate {
    /// Identifier within the adapter (as [`Resource::id`]).
    pub id: String,
    /// The template, e.g. `orders://{order_id}`.
    pub uri_template: String,
    /// MCP's `name`. Default: the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What its resources hold.
    #[serde(default)]
    pub description: String,
    /// The MIME type of its resources, if they share one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The data classification the operator reviewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<String>,
    /// A JSON Schema (2020-12) for each of the template's parameters (each a string), by
    /// name: a parameter not listed is any string. "`file:///{path}` is not a permission model
    /// by itself": constrain what a parameter may be here, and per tenant with the grant's
    /// `arg_constraints`. In TOML, a schema may be written as a string of JSON text (as a
    /// capability's `input_schema`).
    #[serde(
        default,
        deserialize_with = "super::manifest::json_values",
        skip_serializing_if = "Map::is_empty"
    )]
    pub parameters: Map<String, Value>,
    /// Whether its contents are sensitive.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// The labels its contents carry, which join the reader's session (as a capability's
    /// `produces`). Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produces: Vec<String>,
    /// Where a generic adapter reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Value>,
}

/// One prompt template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// Identifier within the adapter (as [`Resource::id`]). `prompts/list` names it
    /// `<adapter id>.<id>`, as `tools/list` names a tool (and `[mcp.aliases]` may give it a
    /// name of its own); an imported prompt's upstream name is in its `upstream` table.
    pub id: String,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// Its arguments (each a string).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    /// Where a generic adapter gets it, and the pinned digest of its definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Value>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether `prompts/get` must give it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// A read-only capability, as every resource and prompt is governed.
fn read_only(
    id: &str,
    description: &str,
    input_schema: Value,
    sensitive: bool,
    upstream: Option<&Value>,
    produces: &[String],
) -> Capability {
    Capability {
        id: id.to_owned(),
        title: None,
        description: description.to_owned(),
        capability_class: CapabilityClass::Observe,
        approval_mode: ApprovalMode::ReadOnly,
        input_schema,
        output_schema: None,
        evidence_keys: Vec::new(),
        idempotency: None,
        approval_gate: None,
        rollback: None,
        annotations: None,
        sensitive,
        upstream: upstream.cloned(),
        client_capabilities: Vec::new(),
        task_support: None,
        produces: produces.to_vec(),
        sends: Vec::new(),
    }
}

impl Resource {
    /// MCP's name.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }

    /// The capability a read of it is: its argument is its URI, and its classification.
    pub fn capability(&self) -> Capability {
        let mut properties = Map::new();
        properties.insert("uri".to_owned(), json!({ "const": self.uri }));
        classified(&mut properties, self.classification.as_deref());
        let schema = json!({
            "type": "object",
            "properties": properties,
            "required": ["uri"],
            "additionalProperties": false,
        });
        read_only(
            &self.id,
            &self.description,
            schema,
            self.sensitive,
            self.upstream.as_ref(),
            &self.produces,
        )
    }
}

impl ResourceTemplate {
    /// MCP's name.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }

    /// The capability a read of one of its resources is: its arguments are the URI, each
    /// parameter (by the manifest's schema) and its classification.
    pub fn capability(&self) -> Capability {
        let mut properties = Map::new();
        properties.insert("uri".to_owned(), json!({ "type": "string" }));
        classified(&mut properties, self.classification.as_deref());
        let names = parameter_names(&self.uri_template).unwrap_or_default();
        for name in &names {
            let schema = self
                .parameters
                .get(name)
                .cloned()
                .unwrap_or_else(|| json!({}));
            properties.insert(
                name.clone(),
                json!({ "allOf": [{ "type": "string" }, schema] }),
            );
        }
        let mut required = vec!["uri".to_owned()];
        required.extend(names);
        let schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        read_only(
            &self.id,
            &self.description,
            schema,
            self.sensitive,
            self.upstream.as_ref(),
            &self.produces,
        )
    }

    /// The parameters `uri` gives the template, if it matches it.
    pub fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        match_template(&self.uri_template, uri)
    }
}

impl Prompt {
    /// The capability a fill-in of it is: its arguments are the prompt's, strings, the
    /// required ones required, no others.
    pub fn capability(&self) -> Capability {
        let properties: Map<String, Value> = (self.arguments.iter())
            .map(|argument| (argument.name.clone(), json!({ "type": "string" })))
            .collect();
        let required: Vec<&str> = (self.arguments.iter())
            .filter(|argument| argument.required)
            .map(|argument| argument.name.as_str())
            .collect();
        let schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        read_only(
            &self.id,
            &self.description,
            schema,
            false,
            self.upstream.as_ref(),
            &[],
        )
    }
}

/// A read's `classification` argument, which the host sets to the reviewed one, if there is
/// one.
fn classified(properties: &mut Map<String, Value>, classification: Option<&str>) {
    if let Some(classification) = classification {
        properties.insert(
            "classification".to_owned(),
            json!({ "const": classification }),
        );
    }
}

/// The arguments of a read of `uri`: the URI, the template's parameters and the
/// classification, as the read's capability takes them.
pub fn read_args(uri: &str, parameters: Map<String, Value>, classification: Option<&str>) -> Value {
    let mut args = parameters;
    args.insert("uri".to_owned(), Value::String(uri.to_owned()));
    if let Some(classification) = classification {
        args.insert(
            "classification".to_owned(),
            Value::String(classification.to_owned()),
        );
    }
    Value::Object(args)
}

/// The names the host gives a read's own arguments, which a template's parameter may not take.
const READ_ARGUMENTS: [&str; 2] = ["uri", "classification"];

/// The parameter names of a template the host can match, in order, or why it cannot: a
/// template of simple expressions, with at least one parameter, none named as a read's own
/// arguments ([`read_args`]). The manifest's rule, and the one `gatehouse import` skips a
/// server's template by.
pub fn parameter_names(template: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("`{template}` has a `{{` that is never closed"));
        };
        let name = &rest[open + 1..open + close];
        let simple =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !simple {
            return Err(format!(
                "`{{{name}}}` in `{template}` is not a simple expression: write `{{name}}`, \
                 with a name of [A-Za-z0-9_] (operators such as `+`, `#` or `/`, and lists, \
                 are not supported: a parameter never holds `/`, `?` or `#`)"
            ));
        }
        if names.iter().any(|n| n == name) {
            return Err(format!("`{{{name}}}` appears twice in `{template}`"));
        }
        names.push(name.to_owned());
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(format!("`{template}` has a `}}` that was never opened"));
    }
    if names.is_empty() {
        return Err(format!(
            "`{template}` has no `{{parameter}}`: declare a fixed URI as a [[resource]]"
        ));
    }
    if let Some(name) = names.iter().find(|n| READ_ARGUMENTS.contains(&n.as_str())) {
        return Err(format!(
            "`{{{name}}}` is a name the host gives the read's own arguments: rename the parameter"
        ));
    }
    Ok(names)
}

/// The parameters `uri` gives `template` (simple expressions, each one or more characters
/// other than `/`, `?` and `#`, percent-decoded), if it matches.
fn match_template(template: &str, uri: &str) -> Option<Map<String, Value>> {
    let mut parameters = Map::new();
    let (mut template, mut uri) = (template, uri);
    loop {
        let Some(open) = template.find('{') else {
            return (template == uri).then_some(parameters);
        };
        uri = uri.strip_prefix(&template[..open])?;
        let close = open + template[open..].find('}')?;
        let name = &template[open + 1..close];
        template = &template[close + 1..];
        // The value runs to the next literal character of the template (or the end), and
        // never across `/`, `?` or `#`.
        let stop = template.chars().next();
        let end = uri
            .char_indices()
            .find(|&(_, c)| Some(c) == stop || matches!(c, '/' | '?' | '#'))
            .map_or(uri.len(), |(i, _)| i);
        if end == 0 {
            return None;
        }
        let value = percent_encoding::percent_decode_str(&uri[..end])
            .decode_utf8()
            .ok()?;
        parameters.insert(name.to_owned(), Value::String(value.into_owned()));
        uri = &uri[end..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_gives_its_parameters_and_nothing_across_a_slash() {
        let template = "test://template/{id}/data";
        assert_eq!(
            match_template(template, "test://template/123/data"),
            Some(Map::from_iter([("id".to_owned(), json!("123"))]))
        );
        for other in [
            "test://template/1/2/data",
            "test://template//data",
            "test://template/123/data/more",
            "test://other/123/data",
        ] {
            assert_eq!(match_template(template, other), None, "{other}");
        }
        assert_eq!(
            match_template("orders://{a}-{b}", "orders://x%20y-z"),
            Some(Map::from_iter([
                ("a".to_owned(), json!("x y")),
                ("b".to_owned(), json!("z"))
            ]))
        );
    }

    #[test]
    fn only_simple_expressions_are_templates() {
        assert_eq!(parameter_names("a://{x}/{y_2}").unwrap(), ["x", "y_2"]);
        for bad in [
            "a://{+x}",
            "a://{x",
            "a://x}",
            "a://{}",
            "a://{x}/{x}",
            "a://{x,y}",
        ] {
            assert!(parameter_names(bad).is_err(), "{bad}");
        }
    }
}
