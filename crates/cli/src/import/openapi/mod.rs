//! `gatehouse import openapi`: the manifest of `gatehouse.openapi` for the operations of an
//! OpenAPI document (3.0 or 3.1, JSON or YAML).
//!
//! 1. Parse the document ([`parse`]); Swagger 2.0 is refused, naming the version.
//! 2. Pick the server: `--server`, else the first of `servers` with its variables' defaults
//!    (a scheme-relative one, `//api.example.com`, as `https:`, noted).
//! 3. Credential slots from `components.securitySchemes`: HTTP bearer and basic
//!    (`authorization`, with the scheme), API keys in a header. An API key in the query or a
//!    cookie, and OAuth flows, are noted and skipped: the egress gate injects credentials as
//!    headers only.
//! 4. One capability per operation: path- and operation-level parameters (path, query,
//!    header) and a JSON request body (argument `body`) make the input schema, local `$ref`s
//!    inlined ([`refs`]) within [`MAX_SCHEMA_VALUES`] JSON values per operation and
//!    [`MAX_IMPORT_VALUES`] for the whole import. An operation whose schemas refer to each
//!    other several times over, past the bound once inlined, keeps the component schemas it
//!    uses once each in its input schema's `$defs` instead (noted); one still past it is
//!    refused naming the schema, not expanded until memory runs out. 3.0's `nullable` and
//!    boolean `exclusiveMinimum`/`exclusiveMaximum` are rewritten as JSON Schema 2020-12 says
//!    them; a `pattern` in another regular-expression dialect is translated (`\A`, `\z`) or
//!    dropped ([`patterns`]), noted. An operation with a construct the adapter
//!    cannot send (a multipart, form or XML body, a cookie parameter, callbacks, a `$ref` to
//!    another document), or whose input schema the host cannot compile (`type: file`), is
//!    skipped with the reason; the rest of the document is imported.
//!
//! Defaults from the method:
//!
//! | method           | class     | approval mode | also                                        |
//! |------------------|-----------|---------------|---------------------------------------------|
//! | GET, HEAD        | `observe` | `read_only`   |                                             |
//! | POST, PUT, PATCH | `act`     | `network`     | idempotency key required                    |
//! | DELETE           | `act`     | `destructive` | approval gate `IMPORTED_DESTRUCTIVE`, idempotency key required |

use std::collections::{BTreeMap, BTreeSet};

use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use gatehouse_host::config::MethodName;
use gatehouse_host::plugin::manifest::{Capability, schema_problem};
use serde_json::{Map, Value, json};

use super::headers::HeaderCredential;
use super::mcp::DESTRUCTIVE_GATE;
use super::names::{Filter, Ids};
use super::{Choice, Destination, Import, ImportError, Options, Reach, Served, Skipped, assemble};

pub mod patterns;
pub mod refs;

use refs::{Budget, RefError};

/// JSON values one operation's parameters and request body may expand to once their `$ref`s
/// are inlined. The largest operation of GitHub's published description (1,223 operations)
/// takes 936; a hundred thousand values is a schema of several megabytes, more than a model
/// reads as a tool's arguments, and about 10 MB of memory while it is built.
pub const MAX_SCHEMA_VALUES: usize = 100_000;

/// JSON values all operations of one import may expand to together: GitHub's description
/// takes about 48,000; two million values are about 200 MB of memory at import, and a
/// manifest no reviewer reads whole.
pub const MAX_IMPORT_VALUES: usize = 2_000_000;

/// The methods an operation may have, in the order the document's path items list them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Parses a document: JSON if it starts with `{`, YAML otherwise.
pub fn parse(text: &str) -> Result<Value, ImportError> {
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| ImportError::Syntax {
            format: "JSON",
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            ImportError::Syntax {
                format: "YAML",
                line,
                column,
                message: e.to_string(),
            }
        })
    }
}

/// Imports the document `text`, calling `server` (or the document's first server).
pub fn import(text: &str, server: Option<&str>, options: &Options) -> Result<Import, ImportError> {
    let doc = parse(text)?;
    let legacy = version(&doc)?;
    let mut notes = Vec::new();
    let base = server_url(&doc, server, &mut notes)?;
    let filter = Filter::new(&options.include, &options.exclude)?;
    let mut skipped = Vec::new();
    let credentials = credentials(&doc, &options.id, &mut skipped);
    let mut ids = Ids::default();
    let mut capabilities = Vec::new();
    let mut choices = Vec::new();
    let mut methods = BTreeSet::new();
    let mut header_names = BTreeSet::new();
    let mut total = Budget::new(MAX_IMPORT_VALUES);
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    for (path, item) in &paths {
        let item = match item.get("$ref").and_then(Value::as_str) {
            Some(reference) => refs::lookup(&doc, reference)
                .map_err(|_| unresolved(reference, &format!("/paths/{path}")))?,
            None => item,
        };
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let source = format!("{} {path}", method.to_uppercase());
            let name = operation["operationId"].as_str().unwrap_or(&source);
            if let Some(reason) = filter.refuses(name) {
                skipped.push(Skipped {
                    source,
                    reason: reason.to_owned(),
                });
                continue;
            }
            // What is left of the import's budget, at most one operation's.
            let mut budget = Budget::new(MAX_SCHEMA_VALUES.min(total.left));
            let parts = (item, operation);
            let mut result = operation_of(&doc, (legacy, false), path, method, parts, &mut budget);
            if matches!(result, Err(Unsupported::TooLarge { .. })) {
                // Too large inlined: its component schemas kept once each, in `$defs`.
                budget = Budget::new(MAX_SCHEMA_VALUES.min(total.left));
                result = operation_of(&doc, (legacy, true), path, method, parts, &mut budget);
                if let Ok(op) = &result {
                    notes.push(format!(
                        "{source}: its input schema keeps the {} component schemas it uses in \
                         `$defs`, once each (inlined, they would take it past its bound of JSON \
                         values)",
                        op.input_schema["$defs"].as_object().map_or(0, Map::len)
                    ));
                }
            }
            let op = match result {
                Ok(mut op) => {
                    for note in patterns::translate(&mut op.input_schema) {
                        notes.push(format!("{source}: {note}"));
                    }
                    // One operation's schema the host cannot compile (`type: file`, say) would
                    // refuse the whole manifest: that operation is left out, saying why.
                    if let Some(problem) = schema_problem(&op.input_schema) {
                        skipped.push(Skipped {
                            source,
                            reason: format!(
                                "its input schema {problem}; correct the document to import it"
                            ),
                        });
                        continue;
                    }
                    op
                }
                Err(Unsupported::Skip(reason)) => {
                    skipped.push(Skipped { source, reason });
                    continue;
                }
                Err(Unsupported::Fail(error)) => return Err(error),
                Err(Unsupported::TooLarge { reference, at }) => {
                    return Err(too_large(
                        reference.as_deref(),
                        &at,
                        name,
                        budget.limit < MAX_SCHEMA_VALUES,
                    ));
                }
            };
            total.left -= budget.spent();
            let id = ids.assign(name)?;
            methods.insert(method.to_uppercase());
            header_names.extend(op.headers.iter().cloned());
            let (class, mode) = defaults(method);
            let description = [
                operation["summary"].as_str(),
                operation["description"].as_str(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("\n\n");
            capabilities.push(Capability {
                id: id.clone(),
                title: operation["summary"].as_str().map(str::to_owned),
                description,
                capability_class: class,
                approval_mode: mode,
                input_schema: op.input_schema,
                output_schema: None,
                evidence_keys: Vec::new(),
                // Derived from the class, as for an MCP tool.
                idempotency: None,
                approval_gate: (mode == ApprovalMode::Destructive)
                    .then(|| DESTRUCTIVE_GATE.to_owned()),
                rollback: None,
                annotations: None,
                sensitive: false,
                client_capabilities: Vec::new(),
                task_support: None,
                produces: Vec::new(),
                sends: Vec::new(),
                upstream: Some(json!({
                    "method": method.to_uppercase(),
                    "url": format!("{}{path}", base.trim_end_matches('/')),
                    "parameters": op.parameters,
                    "body": op.body,
                })),
            });
            let shortened = super::names::shortened(name);
            choices.push(Choice {
                source,
                capability: id,
                class,
                mode,
                reason: method.to_uppercase(),
                shortened,
                labels: String::new(),
            });
        }
    }
    let methods = methods
        .iter()
        .map(|m| MethodName::parse(m).expect("HTTP methods parse"))
        .collect();
    let destination = Destination {
        url: &base,
        methods,
        credentials: &credentials,
        headers: header_names,
        read_methods: BTreeSet::new(),
    };
    let operations = choices.len() + skipped.len();
    let mut import = assemble(
        options,
        format!(
            "Operations of the HTTP service at {base}, imported by `gatehouse import openapi`."
        ),
        Reach::Http(destination),
        (capabilities, choices, skipped),
        Served::default(),
        || {
            format!(
                "the document has {operations} operations the filters and the adapter leave none of"
            )
        },
    )?;
    import.notes = notes;
    Ok(import)
}

/// Whether the document is OpenAPI 3.0 (whose schemas need rewriting); refuses others.
fn version(doc: &Value) -> Result<bool, ImportError> {
    if let Some(swagger) = doc.get("swagger") {
        return Err(ImportError::Spec(format!(
            "this is Swagger {}, not OpenAPI 3; convert it to OpenAPI 3.0 first (for example \
             with swagger2openapi) and import that",
            swagger.as_str().unwrap_or("2.0")
        )));
    }
    match doc["openapi"].as_str() {
        Some(v) if v.starts_with("3.0") => Ok(true),
        Some(v) if v.starts_with("3.1") => Ok(false),
        Some(v) => Err(ImportError::Spec(format!(
            "OpenAPI version `{v}` is not supported; import a 3.0 or 3.1 document"
        ))),
        None => Err(ImportError::Spec(
            "no `openapi` version field: is this an OpenAPI document?".to_owned(),
        )),
    }
}

/// `--server`, else the first server with its variables' defaults; it must be absolute, or
/// scheme-relative (`//api.example.com/v1`: relative to wherever the document was served
/// from, which an import from a file does not know), taken as `https:` and noted.
fn server_url(
    doc: &Value,
    given: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<String, ImportError> {
    let url = match given {
        Some(url) => url.to_owned(),
        None => {
            let server = &doc["servers"][0];
            let mut url = server["url"]
                .as_str()
                .ok_or_else(|| {
                    ImportError::Spec(
                        "the document names no server; pass --server https://host/base".to_owned(),
                    )
                })?
                .to_owned();
            if let Some(variables) = server["variables"].as_object() {
                for (name, variable) in variables {
                    let default = variable["default"].as_str().unwrap_or_default();
                    url = url.replace(&format!("{{{name}}}"), default);
                }
            }
            if url.starts_with("//") {
                notes.push(format!(
                    "server `{url}` names no scheme: https is assumed; pass --server \
                     http:{url} for plain http"
                ));
                url = format!("https:{url}");
            }
            url
        }
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ImportError::Spec(format!(
            "server URL `{url}` is not an absolute http(s) URL; pass --server https://host/base"
        )));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// A header credential per usable security scheme, the rest noted as skipped.
fn credentials(doc: &Value, id: &str, skipped: &mut Vec<Skipped>) -> Vec<HeaderCredential> {
    let mut out: Vec<HeaderCredential> = Vec::new();
    let Some(schemes) = doc["components"]["securitySchemes"].as_object() else {
        return out;
    };
    let env_prefix: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    for (name, scheme) in schemes {
        let slot = super::names::capability_id(name)
            .unwrap_or_else(|| "credential".to_owned())
            .replace('-', "_");
        let header = match (scheme["type"].as_str(), scheme["in"].as_str()) {
            (Some("http"), _) => match scheme["scheme"].as_str().map(str::to_ascii_lowercase) {
                Some(s) if s == "bearer" => Some(("authorization".to_owned(), Some("Bearer"))),
                Some(s) if s == "basic" => Some(("authorization".to_owned(), Some("Basic"))),
                _ => None,
            },
            (Some("apiKey"), Some("header")) => scheme["name"]
                .as_str()
                .map(|n| (n.to_ascii_lowercase(), None)),
            _ => None,
        };
        match header {
            Some((header, _)) if out.iter().any(|c| c.name == header) => skipped.push(Skipped {
                source: format!("security scheme {name}"),
                reason: format!("another scheme already sends header `{header}`"),
            }),
            Some((header, scheme)) => out.push(HeaderCredential {
                env: format!("{env_prefix}_{}", slot.to_ascii_uppercase()),
                slot,
                name: header,
                scheme: scheme.map(str::to_owned),
            }),
            None => skipped.push(Skipped {
                source: format!("security scheme {name}"),
                reason: "only HTTP bearer and basic, and API keys in a header, become credentials \
                         (the gateway injects credentials as headers)"
                    .to_owned(),
            }),
        }
    }
    out
}

fn defaults(method: &str) -> (CapabilityClass, ApprovalMode) {
    match method {
        "get" | "head" => (CapabilityClass::Observe, ApprovalMode::ReadOnly),
        "delete" => (CapabilityClass::Act, ApprovalMode::Destructive),
        _ => (CapabilityClass::Act, ApprovalMode::Network),
    }
}

/// What one operation becomes.
struct Operation {
    input_schema: Value,
    parameters: Vec<Value>,
    body: bool,
    /// Header parameter names, lowercase: the grant lets them through.
    headers: Vec<String>,
}

/// Why an operation is not imported: skipped with a reason, or the whole import fails.
enum Unsupported {
    Skip(String),
    Fail(ImportError),
    /// Its input schema spent the inlining budget while expanding `reference`, at `at`.
    TooLarge {
        reference: Option<String>,
        at: String,
    },
}

/// The refusal of an operation (`name`, at `at`) whose schema, `reference`, spent the budget:
/// one operation's ([`MAX_SCHEMA_VALUES`]) or, when `whole_import`, what the import had left
/// of [`MAX_IMPORT_VALUES`].
fn too_large(reference: Option<&str>, at: &str, name: &str, whole_import: bool) -> ImportError {
    let schema = match reference {
        Some(reference) => format!("the schema `{reference}` (at {at})"),
        None => format!("the input schema of {at}"),
    };
    ImportError::Spec(if whole_import {
        format!(
            "{schema} takes the import's input schemas past {MAX_IMPORT_VALUES} JSON values; \
             import fewer operations with --include or --exclude"
        )
    } else {
        format!(
            "{schema} expands to more than {MAX_SCHEMA_VALUES} JSON values, even with each \
             component schema it uses kept once in `$defs`; leave the operation out with \
             --exclude '{name}'"
        )
    })
}

fn unresolved(pointer: &str, at: &str) -> ImportError {
    ImportError::Spec(format!(
        "`$ref` `{pointer}` (at {at}) does not resolve to anything in the document"
    ))
}

/// What `operation` (of path `item`) becomes; its `$ref`s inlined from `budget`, or, when
/// `shared`, its component schemas kept in `$defs` ([`refs::share`]). `legacy`: an OpenAPI
/// 3.0 document, whose schemas are rewritten as 2020-12.
fn operation_of(
    doc: &Value,
    (legacy, shared): (bool, bool),
    path: &str,
    method: &str,
    (item, operation): (&Value, &Value),
    budget: &mut Budget,
) -> Result<Operation, Unsupported> {
    let at = format!(
        "/paths/{}/{method}",
        path.replace('~', "~0").replace('/', "~1")
    );
    let mut defs = Map::new();
    let mut inline = |value: &Value| -> Result<Value, Unsupported> {
        let resolved = if shared {
            refs::share(doc, value, budget, &mut defs)
        } else {
            refs::inline(doc, value, budget)
        };
        match resolved {
            Ok(mut value) => {
                if legacy {
                    to_2020_12(&mut value);
                }
                Ok(value)
            }
            Err(RefError::External(reference)) => Err(Unsupported::Skip(format!(
                "`$ref` `{reference}` points into another document"
            ))),
            Err(RefError::TooLarge { reference, .. }) => Err(Unsupported::TooLarge {
                reference,
                at: at.clone(),
            }),
            Err(RefError::Unresolved(pointer)) => Err(Unsupported::Fail(unresolved(&pointer, &at))),
        }
    };
    if operation.get("callbacks").is_some() {
        return Err(Unsupported::Skip("callbacks are not supported".to_owned()));
    }
    // Operation-level parameters override path-level ones with the same name and location.
    let mut parameters: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut order = Vec::new();
    for list in [&item["parameters"], &operation["parameters"]] {
        for parameter in list.as_array().into_iter().flatten() {
            let parameter = inline(parameter)?;
            let key = (
                parameter["name"].as_str().unwrap_or_default().to_owned(),
                parameter["in"].as_str().unwrap_or_default().to_owned(),
            );
            if !parameters.contains_key(&key) {
                order.push(key.clone());
            }
            parameters.insert(key, parameter);
        }
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for (name, _) in &order {
        *names.entry(name.clone()).or_default() += 1;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut mapped = Vec::new();
    let mut headers = Vec::new();
    for key in &order {
        let parameter = &parameters[key];
        let (name, location) = key;
        match location.as_str() {
            "path" | "query" => {}
            "header" if is_gateway_header(name) => {
                return Err(Unsupported::Skip(format!(
                    "header parameter `{name}` is the gateway's to set"
                )));
            }
            "header" => headers.push(name.to_ascii_lowercase()),
            other => {
                return Err(Unsupported::Skip(format!(
                    "{other} parameter `{name}` is not supported"
                )));
            }
        }
        let argument = if names[name] > 1 {
            format!("{location}_{name}")
        } else {
            name.clone()
        };
        let mut schema = parameter
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if let (Some(object), Some(description)) =
            (schema.as_object_mut(), parameter["description"].as_str())
        {
            object
                .entry("description")
                .or_insert_with(|| Value::String(description.to_owned()));
        }
        properties.insert(argument.clone(), schema);
        if parameter["required"] == Value::Bool(true) || location == "path" {
            required.push(Value::String(argument.clone()));
        }
        mapped.push(json!({
            "name": name,
            "in": location,
            "argument": argument,
            "explode": parameter["explode"].as_bool().unwrap_or(true),
        }));
    }
    let mut body = false;
    if let Some(request_body) = operation.get("requestBody") {
        let request_body = inline(request_body)?;
        let content = request_body["content"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let json_type = content
            .keys()
            .find(|t| *t == "application/json" || t.ends_with("+json"));
        match json_type {
            Some(json_type) => {
                let schema = content[json_type]
                    .get("schema")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                if properties.insert("body".to_owned(), schema).is_some() {
                    return Err(Unsupported::Skip(
                        "a parameter named `body` leaves no argument for the request body"
                            .to_owned(),
                    ));
                }
                if request_body["required"] == Value::Bool(true) {
                    required.push(Value::String("body".to_owned()));
                }
                body = true;
            }
            None if content.is_empty() => {}
            None => {
                let types: Vec<&str> = content.keys().map(String::as_str).collect();
                return Err(Unsupported::Skip(format!(
                    "the request body is {}, not JSON (multipart, form and XML bodies are not \
                     supported)",
                    types.join(", ")
                )));
            }
        }
    }
    let mut input_schema = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    if !required.is_empty() {
        input_schema["required"] = Value::Array(required);
    }
    if !defs.is_empty() {
        let mut defs = Value::Object(defs);
        if legacy {
            to_2020_12(&mut defs);
        }
        input_schema["$defs"] = defs;
    }
    Ok(Operation {
        input_schema,
        parameters: mapped,
        body,
        headers,
    })
}

/// Headers the egress gate owns or drops whatever the grant says.
fn is_gateway_header(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "authorization"
            | "cookie"
            | "host"
            | "content-length"
            | "content-type"
            | "accept"
            | "traceparent"
            | "idempotency-key"
            | "proxy-authorization"
    )
}

/// Rewrites OpenAPI 3.0's schema dialect as JSON Schema 2020-12: `nullable: true` adds
/// `"null"` to `type`; boolean `exclusiveMinimum`/`exclusiveMaximum` take the bound's number.
fn to_2020_12(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.remove("nullable") == Some(Value::Bool(true))
                && let Some(Value::String(t)) = map.get("type").cloned()
            {
                map.insert("type".to_owned(), json!([t, "null"]));
            }
            for (flag, bound) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                if let Some(Value::Bool(exclusive)) = map.get(flag).cloned() {
                    map.remove(flag);
                    if exclusive && let Some(number) = map.remove(bound) {
                        map.insert(flag.to_owned(), number);
                    }
                }
            }
            map.values_mut().for_each(to_2020_12);
        }
        Value::Array(items) => items.iter_mut().for_each(to_2020_12),
        _ => {}
    }
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
