//! Plugin manifests: what an adapter or policy module declares about itself.
//!
//! Authors write the manifest as a TOML (or JSON) file next to their crate; `gatehouse pack` checks
//! it, embeds it in the component as the `gatehouse:manifest` custom section (as JSON) and signs
//! the result. The manifest is a *request*: the operator's config is the grant
//! (docs/architecture.md, section 4). Every field is documented here because operators review
//! manifests.
//!
//! ```toml
//! kind = "adapter"
//! id = "acme.orders"
//! version = "1.2.0"
//! publisher = "acme"
//! description = "Look up and refund orders."
//!
//! [[capability]]
//! id = "lookup"
//! description = "Find an order by id."
//! capability_class = "observe"
//! approval_mode = "read_only"
//! input_schema = { type = "object", properties = { order_id = { type = "string" } } }
//! ```
//!
//! TOML has no `null`, and its integers stop at 2^63 - 1, while a JSON Schema may hold either
//! (`"default": null`, `"enum": ["a", null]`). So in a TOML manifest, `input_schema`,
//! `output_schema`, `upstream` and a policy's `config_schema` may also be written as a string
//! holding the value as JSON text, read exactly as that JSON:
//! `input_schema = '{"type": "object", "properties": {"tag": {"default": null}}}'`.
//! [`Manifest::to_toml`] writes a value that way when, and only when, TOML cannot hold it
//! (`gatehouse import` does). A string is never a schema or a table, so the two spellings
//! cannot be confused; the embedded JSON form always holds the value itself.

use std::collections::BTreeSet;
use std::path::Path;

use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::content::{Prompt, PromptArgument, Resource, ResourceTemplate};
pub use crate::caller::CallerRequest;
pub use crate::egress::EgressRequest;
pub use crate::relay::AskKind;
use crate::stdio::StdioSpec;

/// A plugin manifest: either an adapter's or a policy module's, told apart by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Manifest {
    /// An integration with an external system (WIT world `adapter`).
    Adapter(AdapterManifest),
    /// A decision module (WIT world `policy`).
    Policy(PolicyManifest),
}

/// What an adapter declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterManifest {
    /// Stable identifier, lowercase `[a-z0-9._-]`, e.g. `acme.orders`. Trust scopes match on it.
    pub id: String,
    /// Semantic version of this build, e.g. `1.2.0`.
    pub version: String,
    /// Who publishes it (informational; the signing key is what is trusted).
    pub publisher: String,
    /// One-line description for operators.
    #[serde(default)]
    pub description: String,
    /// Outbound access the adapter asks for. Nothing here is granted until the operator's
    /// config grants it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<EgressRequest>,
    /// The stdio MCP server its tools forward to (`gatehouse import mcp --stdio`): what runs,
    /// pinned. Nothing runs until the operator's `[[stdio.server]]` entry grants it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio: Option<Box<StdioSpec>>,
    /// What it tells and asks its caller while a call runs (contract 0.5.0's `caller`
    /// interface): `progress`, `log`, and the kinds it may `ask` (`elicitation`, `sampling`,
    /// `roots`). A use not declared is dropped (progress, log lines) or refused (an ask); an
    /// ask also needs the operator's `[[caller.grant]]`. Default: nothing.
    #[serde(default, skip_serializing_if = "CallerRequest::is_empty")]
    pub caller: CallerRequest,
    /// The capabilities (tools) it offers. An adapter offers at least one capability,
    /// resource, resource template or prompt.
    #[serde(rename = "capability", alias = "capabilities", default)]
    pub capabilities: Vec<Capability>,
    /// The resources it serves (contract 0.6.0's `read-resource`). Default: none.
    #[serde(
        rename = "resource",
        alias = "resources",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<Resource>,
    /// The resource templates it serves (contract 0.6.0's `read-resource`). Default: none.
    #[serde(
        rename = "resource_template",
        alias = "resource_templates",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_templates: Vec<ResourceTemplate>,
    /// The prompts it serves (contract 0.6.0's `get-prompt`). Default: none.
    #[serde(
        rename = "prompt",
        alias = "prompts",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub prompts: Vec<Prompt>,
}

/// One capability (an MCP tool) of an adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    /// Identifier within the adapter, `[a-z0-9_-]`, e.g. `issue_refund`.
    pub id: String,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does, for the model and for operators.
    #[serde(default)]
    pub description: String,
    /// The kind of operation (spec 000).
    pub capability_class: CapabilityClass,
    /// The highest approval mode this capability can produce. Policy may lower it for a call,
    /// never raise it.
    pub approval_mode: ApprovalMode,
    /// JSON Schema (2020-12) of the arguments (in TOML, or a string of JSON text: see the
    /// module docs).
    #[serde(deserialize_with = "json_value")]
    pub input_schema: Value,
    /// JSON Schema (2020-12) of the structured output, if it returns one.
    #[serde(
        default,
        deserialize_with = "json_value_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<Value>,
    /// Keys the structured output must carry as evidence (e.g. `refund_id`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_keys: Vec<String>,
    /// Idempotency requirements. Write-class capabilities always need a key, whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<Idempotency>,
    /// Name of the approval gate a call must pass before it runs, e.g. `GATE_FINANCE_APPROVAL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_gate: Option<String>,
    /// Id of the capability (in this adapter) that undoes this one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<String>,
    /// MCP tool annotations (hints for clients; never trusted for enforcement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Whether its arguments and results are sensitive: the audit log keeps only their
    /// SHA-256 hashes. Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// Where a generic adapter forwards this capability: a table in the adapter's own format
    /// (for `gatehouse.mcp-upstream`, the upstream URL, tool name, protocol version and the
    /// pinned digest of the tool's definition), handed to the adapter with every call as
    /// `call-context.upstream` (JSON). It is part of the signed manifest, so the mapping the
    /// operator reviewed is the one that runs, while the component's code stays the same for
    /// every import (`gatehouse import` writes it). Default: none.
    #[serde(
        default,
        deserialize_with = "json_value_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub upstream: Option<Value>,
    /// What the client calling it must have declared it can be asked (`sampling`,
    /// `elicitation`, `roots`: MCP's client capabilities), because the capability cannot do
    /// without: the MCP server refuses a call from a client that did not declare them, before
    /// anything runs (-32021). Each must be one the adapter may ask (`[caller] ask`).
    /// Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_capabilities: Vec<AskKind>,
    /// Whether its calls run as MCP tasks (MCP's `execution.taskSupport`). Absent, a call
    /// becomes a task only when it pauses for approval. `optional` or `required`: for a client
    /// that declared the tasks extension, a call still running after `[mcp] task_after_ms`
    /// goes on as a task; `required` also refuses a client that did not declare it.
    /// `forbidden`: never a task, not even to wait for an approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<TaskSupport>,
    /// The labels its results carry (`private`, `untrusted`, ...: see
    /// [`gatehouse_core::model::label`]), which join the caller's session. The operator may
    /// add to them (`[[sessions.label]]`), never take one away. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produces: Vec<String>,
    /// What it can do with data: `external` if it can send data out (email, a POST, a public
    /// post). Flow rules (`gatehouse.flows`) judge such a call by its session. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sends: Vec<String>,
}

/// MCP's `execution.taskSupport` of a capability: see [`Capability::task_support`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Never a task.
    Forbidden,
    /// A task for a client that takes tasks, once the call outlasts `[mcp] task_after_ms`.
    Optional,
    /// Always a task: a client that does not take tasks is refused.
    Required,
}

impl TaskSupport {
    /// MCP's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

impl Capability {
    /// Whether every call must carry an idempotency key (gate 4): a write-class capability
    /// (`act`, or a declared maximum of `local_write` or above), or one whose `idempotency`
    /// table says `required`.
    pub fn requires_idempotency_key(&self) -> bool {
        self.writes() || self.idempotency.as_ref().is_some_and(|i| i.required)
    }

    /// Whether it is write-class: `act`, or a declared maximum of `local_write` or above. Its
    /// calls need an idempotency key whatever its `idempotency` table says.
    fn writes(&self) -> bool {
        self.capability_class == CapabilityClass::Act
            || self.approval_mode >= ApprovalMode::LocalWrite
    }

    /// How its `idempotency.required` disagrees with its class and mode, if it does (`pack`
    /// warns): `true` where the class needs no key (a class reviewed down, its table left as
    /// an older import wrote it: every call is refused without a key), or `false` where the
    /// class needs one anyway (it has no effect).
    pub fn idempotency_disagreement(&self) -> Option<String> {
        let required = self.idempotency.as_ref()?.required;
        let (id, class, mode) = (&self.id, self.capability_class, self.approval_mode);
        match (required, self.writes()) {
            (true, false) => Some(format!(
                "capability `{id}`: `idempotency.required = true` asks every call for an \
                 idempotency key, though class `{class}` at mode `{mode}` needs none; if the \
                 review lowered its class, remove the `idempotency` table (or set `required = \
                 false`)"
            )),
            (false, true) => Some(format!(
                "capability `{id}`: `idempotency.required = false` has no effect: class \
                 `{class}` at mode `{mode}` needs an idempotency key on every call; remove it, \
                 or lower the class and mode if the tool only reads"
            )),
            _ => None,
        }
    }

    /// Whether a key means something to its calls: it is required, the capability declares
    /// an `idempotency` table, or a call may pause at its approval gate (the key is what a
    /// retry resumes the approval with).
    pub fn takes_idempotency_key(&self) -> bool {
        self.requires_idempotency_key()
            || self.idempotency.is_some()
            || self.approval_gate.is_some()
    }

    /// Whether its input schema declares the top-level argument `name` itself.
    pub fn declares_argument(&self, name: &str) -> bool {
        self.input_schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| properties.contains_key(name))
    }
}

/// Idempotency requirements of a capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Idempotency {
    /// Whether calls must carry an idempotency key.
    pub required: bool,
    /// How long a key is remembered, in seconds. Default: 86400 (one day).
    #[serde(default = "default_dedup_window")]
    pub dedup_window_seconds: u64,
}

fn default_dedup_window() -> u64 {
    86_400
}

/// MCP tool annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotations {
    /// The tool does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no additional effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// What a policy module declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyManifest {
    /// Stable identifier, lowercase `[a-z0-9._-]`, e.g. `acme.refund-limits`.
    pub id: String,
    /// Semantic version of this build.
    pub version: String,
    /// Who publishes it (informational).
    pub publisher: String,
    /// One-line description for operators.
    #[serde(default)]
    pub description: String,
    /// JSON Schema (2020-12) the operator's config for this module must satisfy.
    /// Default: any JSON object.
    #[serde(default = "any_object", deserialize_with = "json_value")]
    pub config_schema: Value,
}

fn any_object() -> Value {
    serde_json::json!({ "type": "object" })
}

/// A JSON value as written: the value itself, or a string of JSON text (how a TOML manifest
/// writes a value TOML cannot hold).
fn json_value<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    Ok(from_text(Value::deserialize(deserializer)?))
}

/// [`json_value`] for an optional field: JSON `null` (in a JSON manifest) is none.
fn json_value_opt<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value => Ok(Some(from_text(value))),
    }
}

/// [`json_value`] for each value of a map (a template's `parameters`).
pub(super) fn json_values<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<serde_json::Map<String, Value>, D::Error> {
    let map = serde_json::Map::<String, Value>::deserialize(deserializer)?;
    Ok(map
        .into_iter()
        .map(|(key, value)| (key, from_text(value)))
        .collect())
}

/// `value`, or the value a string holds as JSON text. A string that is not JSON text stays a
/// string, which validation refuses naming the field (no schema or table is a string).
fn from_text(value: Value) -> Value {
    match value {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        value => value,
    }
}

/// Whether TOML can hold `value`: no `null` anywhere, no integer above `i64::MAX`.
fn toml_holds(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Number(n) => !(n.is_u64() && n.as_i64().is_none()),
        Value::Bool(_) | Value::String(_) => true,
        Value::Array(items) => items.iter().all(toml_holds),
        Value::Object(map) => map.values().all(toml_holds),
    }
}

/// `value` as a TOML manifest writes it: itself, or its JSON text when TOML cannot hold it.
fn for_toml(value: &mut Value) {
    if !toml_holds(value) {
        *value = Value::String(value.to_string());
    }
}

/// Why a manifest is not acceptable.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read manifest {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not valid TOML or JSON at all.
    #[error("the manifest is not valid {format}: {message}")]
    Syntax {
        /// `TOML` or `JSON`.
        format: &'static str,
        /// The parser's message (with the line and column).
        message: String,
    },
    /// The text is valid TOML or JSON, but not a manifest of the documented shape: an unknown
    /// or missing field, a value of another type.
    #[error("{message}")]
    Shape {
        /// The parser's message, with the line and column, and the nearest known name to an
        /// unknown one.
        message: String,
    },
    /// The manifest has the documented shape but breaks a rule.
    #[error("{}manifest field `{field}`: {message}", at.map(|(line, column)| format!("line {line}, column {column}: ")).unwrap_or_default())]
    Invalid {
        /// Which field, e.g. `capability[2].id`.
        field: String,
        /// What is wrong and what is expected.
        message: String,
        /// Where in the TOML file the field is, when read from one: line and column, from 1.
        at: Option<(usize, usize)>,
    },
    /// A manifest file that is not acceptable, with its path.
    #[error("{path}: {source}")]
    In {
        /// The file.
        path: String,
        /// Why.
        source: Box<ManifestError>,
    },
}

impl Manifest {
    /// Reads and checks a manifest file; `.json` files are JSON, anything else TOML.
    pub fn from_file(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.display().to_string(),
            source,
        })?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_json(text.as_bytes())
        } else {
            Self::from_toml(&text)
        }
        .map_err(|source| ManifestError::In {
            path: path.display().to_string(),
            source: Box::new(source),
        })
    }

    /// Parses and checks a TOML manifest.
    ///
    /// Errors say where: a TOML syntax error, an unknown or mistyped field (with the nearest
    /// known name) and a broken rule each name the line and column.
    pub fn from_toml(text: &str) -> Result<Self, ManifestError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ManifestError::Syntax {
            format: "TOML",
            message: e.to_string(),
        })?;
        let kind = match table.get("kind") {
            Some(toml::Value::String(kind)) => kind.clone(),
            Some(other) => {
                return Err(ManifestError::Shape {
                    message: format!(
                        "`kind` is {other}; write kind = \"adapter\" or kind = \"policy\""
                    ),
                });
            }
            None => {
                return Err(ManifestError::Shape {
                    message: "`kind` is missing: write kind = \"adapter\" or kind = \"policy\" \
                              on the first line"
                        .to_owned(),
                });
            }
        };
        if !["adapter", "policy"].contains(&kind.as_str()) {
            return Err(ManifestError::Shape {
                message: with_suggestion(&format!(
                    "unknown variant `{kind}` of `kind`, expected one of `adapter`, `policy`"
                )),
            });
        }
        // The kind's own fields are read from the text itself, its `kind` line blanked (same
        // length, so every line and column stays), for the parser's positions and its
        // unknown-field check, which a tagged enum loses.
        let untagged = blank_kind(text);
        let shape = |e: toml::de::Error| ManifestError::Shape {
            message: with_suggestion(&e.to_string()),
        };
        // An unknown top-level name first (`[[capabilty]]`): the parser would meet what it
        // breaks (`[capability.annotations]` then has no list to go in) before the name.
        for key in table.keys().filter(|k| *k != "kind") {
            let mut alone = toml::Table::new();
            alone.insert(key.clone(), toml::Value::Boolean(true));
            let unknown = if kind == "adapter" {
                alone.try_into::<AdapterManifest>().err()
            } else {
                alone.try_into::<PolicyManifest>().err()
            }
            .map(|e| e.to_string())
            .filter(|e| e.contains("unknown field"));
            if let Some(message) = unknown {
                let at = locate_key(text, key)
                    .map(|(line, column)| format!("line {line}, column {column}: "))
                    .unwrap_or_default();
                return Err(ManifestError::Shape {
                    message: format!("{at}{}", with_suggestion(message.trim())),
                });
            }
        }
        let manifest = if kind == "adapter" {
            Self::Adapter(toml::from_str(&untagged).map_err(shape)?)
        } else {
            Self::Policy(toml::from_str(&untagged).map_err(shape)?)
        };
        manifest.validate().map_err(|e| match e {
            ManifestError::Invalid { field, message, .. } => ManifestError::Invalid {
                at: locate(text, &field),
                field,
                message,
            },
            other => other,
        })?;
        Ok(manifest)
    }

    /// Parses and checks a JSON manifest (the form embedded in components).
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(|e| ManifestError::Syntax {
            format: "JSON",
            message: e.to_string(),
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// The manifest as a TOML file, which [`Manifest::from_toml`] reads back as this same
    /// manifest: a schema or `upstream` table TOML cannot hold (a JSON `null`, an integer
    /// above 2^63 - 1) is written as a string of JSON text (see the module docs).
    pub fn to_toml(&self) -> Result<String, ManifestError> {
        let mut manifest = self.clone();
        match &mut manifest {
            Self::Adapter(m) => {
                for cap in &mut m.capabilities {
                    for_toml(&mut cap.input_schema);
                    cap.output_schema.iter_mut().for_each(for_toml);
                    cap.upstream.iter_mut().for_each(for_toml);
                }
                for resource in &mut m.resources {
                    resource.upstream.iter_mut().for_each(for_toml);
                }
                for template in &mut m.resource_templates {
                    template.parameters.values_mut().for_each(for_toml);
                    template.upstream.iter_mut().for_each(for_toml);
                }
                for prompt in &mut m.prompts {
                    prompt.upstream.iter_mut().for_each(for_toml);
                }
            }
            Self::Policy(m) => for_toml(&mut m.config_schema),
        }
        toml::to_string(&manifest).map_err(|e| ManifestError::Syntax {
            format: "TOML",
            message: e.to_string(),
        })
    }

    /// The canonical JSON form embedded in components.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("manifest types always serialize")
    }

    /// The plugin id.
    pub fn id(&self) -> &str {
        match self {
            Self::Adapter(m) => &m.id,
            Self::Policy(m) => &m.id,
        }
    }

    /// The plugin version.
    pub fn version(&self) -> &str {
        match self {
            Self::Adapter(m) => &m.version,
            Self::Policy(m) => &m.version,
        }
    }

    /// `adapter` or `policy`.
    pub fn kind(&self) -> PluginKind {
        match self {
            Self::Adapter(_) => PluginKind::Adapter,
            Self::Policy(_) => PluginKind::Policy,
        }
    }

    /// Checks the rules serde cannot express.
    pub fn validate(&self) -> Result<(), ManifestError> {
        match self {
            Self::Adapter(m) => m.validate(),
            Self::Policy(m) => {
                check_common(&m.id, &m.version)?;
                check_schema("config_schema", &m.config_schema)
            }
        }
    }
}

/// The two kinds of plugin, one per WIT world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PluginKind {
    /// WIT world `adapter`.
    Adapter,
    /// WIT world `policy`.
    Policy,
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Adapter => "adapter",
            Self::Policy => "policy",
        })
    }
}

impl AdapterManifest {
    /// Whether it declares resources, resource templates or prompts, which only an adapter
    /// built for contract 0.6.0 or later serves.
    pub fn serves_content(&self) -> bool {
        !(self.resources.is_empty()
            && self.resource_templates.is_empty()
            && self.prompts.is_empty())
    }

    /// The rules of `[[resource]]`, `[[resource_template]]` and `[[prompt]]`: ids unique among
    /// everything the adapter serves (`seen` holds the capabilities'), URIs unique, templates of simple expressions whose parameters' schemas compile, prompt
    /// arguments named once.
    fn validate_content<'a>(&'a self, seen: &mut BTreeSet<&'a str>) -> Result<(), ManifestError> {
        let mut id = |field: String, id: &'a str| {
            if !is_name(id, false) {
                return Err(invalid(
                    &field,
                    &format!("`{id}` must be 1-64 of [a-z0-9_-], starting with a letter or digit"),
                ));
            }
            if !seen.insert(id) {
                return Err(invalid(
                    &field,
                    &format!(
                        "`{id}` is declared twice (capabilities, resources, resource templates \
                         and prompts share one set of ids)"
                    ),
                ));
            }
            Ok(())
        };
        let mut uris = BTreeSet::new();
        for (i, resource) in self.resources.iter().enumerate() {
            id(format!("resource[{i}].id"), &resource.id)?;
            if resource.uri.is_empty() || !resource.uri.contains(':') {
                return Err(invalid(
                    &format!("resource[{i}].uri"),
                    &format!("`{}` is not a URI (scheme:rest)", resource.uri),
                ));
            }
            if !uris.insert(resource.uri.as_str()) {
                return Err(invalid(
                    &format!("resource[{i}].uri"),
                    &format!("`{}` is declared twice", resource.uri),
                ));
            }
            check_labels(&format!("resource[{i}].produces"), &resource.produces)?;
            if resource.upstream.as_ref().is_some_and(|u| !u.is_object()) {
                return Err(invalid(
                    &format!("resource[{i}].upstream"),
                    "must be a table",
                ));
            }
        }
        for (i, template) in self.resource_templates.iter().enumerate() {
            let at = |field: &str| format!("resource_template[{i}].{field}");
            id(at("id"), &template.id)?;
            let names = super::content::parameter_names(&template.uri_template)
                .map_err(|message| invalid(&at("uri_template"), &message))?;
            for (name, schema) in &template.parameters {
                if !names.contains(name) {
                    return Err(invalid(
                        &at("parameters"),
                        &format!("`{name}` is not a parameter of `{}`", template.uri_template),
                    ));
                }
                check_schema(&at(&format!("parameters.{name}")), schema)?;
            }
            check_labels(&at("produces"), &template.produces)?;
            if template.upstream.as_ref().is_some_and(|u| !u.is_object()) {
                return Err(invalid(&at("upstream"), "must be a table"));
            }
        }
        for (i, prompt) in self.prompts.iter().enumerate() {
            let at = |field: &str| format!("prompt[{i}].{field}");
            id(at("id"), &prompt.id)?;
            let mut arguments = BTreeSet::new();
            for (j, argument) in prompt.arguments.iter().enumerate() {
                if argument.name.is_empty() || !arguments.insert(argument.name.as_str()) {
                    return Err(invalid(
                        &at(&format!("arguments[{j}].name")),
                        &format!("`{}` is empty or declared twice", argument.name),
                    ));
                }
            }
            if prompt.upstream.as_ref().is_some_and(|u| !u.is_object()) {
                return Err(invalid(&at("upstream"), "must be a table"));
            }
        }
        Ok(())
    }

    /// Looks a capability up by id.
    pub fn capability(&self, id: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.id == id)
    }

    fn validate(&self) -> Result<(), ManifestError> {
        check_common(&self.id, &self.version)?;
        if self.capabilities.is_empty() && !self.serves_content() {
            return Err(invalid(
                "capability",
                "declare at least one [[capability]] (or [[resource]], [[resource_template]] \
                 or [[prompt]])",
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, cap) in self.capabilities.iter().enumerate() {
            let at = |field: &str| format!("capability[{i}].{field}");
            if !is_name(&cap.id, false) {
                return Err(invalid(
                    &at("id"),
                    &format!(
                        "`{}` must be 1-64 of [a-z0-9_-], starting with a letter or digit",
                        cap.id
                    ),
                ));
            }
            if !seen.insert(cap.id.as_str()) {
                return Err(invalid(
                    &at("id"),
                    &format!("`{}` is declared twice", cap.id),
                ));
            }
            check_schema(&at("input_schema"), &cap.input_schema)?;
            check_labels(&at("produces"), &cap.produces)?;
            check_labels(&at("sends"), &cap.sends)?;
            if cap.upstream.as_ref().is_some_and(|u| !u.is_object()) {
                return Err(invalid(&at("upstream"), "must be a table"));
            }
            if let Some(schema) = &cap.output_schema {
                check_schema(&at("output_schema"), schema)?;
            }
            if cap.capability_class == CapabilityClass::Act
                && cap.approval_mode == ApprovalMode::ReadOnly
            {
                return Err(invalid(
                    &at("approval_mode"),
                    "an `act` capability has side effects, so its maximum cannot be `read_only`; \
                     declare local_write, network, delegated or destructive",
                ));
            }
            if let Some(target) = &cap.rollback
                && self.capability(target).is_none()
            {
                return Err(invalid(
                    &at("rollback"),
                    &format!("names `{target}`, which is not a capability of this adapter"),
                ));
            }
            let mut required = BTreeSet::new();
            for kind in &cap.client_capabilities {
                let name = crate::caller::name(*kind);
                if !required.insert(name) {
                    return Err(invalid(
                        &at("client_capabilities"),
                        &format!("`{name}` is listed twice"),
                    ));
                }
                if !self.caller.asks(*kind) {
                    return Err(invalid(
                        &at("client_capabilities"),
                        &format!(
                            "`{name}` is required of the client, but the adapter does not \
                             declare it may ask for it: add \"{name}\" to `ask` in the \
                             `[caller]` table, or remove it here"
                        ),
                    ));
                }
            }
        }
        self.validate_content(&mut seen)?;
        if let Some(kind) = self.caller.repeated() {
            return Err(invalid(
                "caller.ask",
                &format!("`{}` is listed twice", crate::caller::name(kind)),
            ));
        }
        if let Some(stdio) = &self.stdio {
            stdio.validate().map_err(|e| invalid("stdio", &e))?;
        }
        for (i, egress) in self.egress.iter().enumerate() {
            let field = format!("egress[{i}].methods");
            if egress.methods.is_empty() {
                return Err(invalid(&field, "list at least one HTTP method"));
            }
            if let Some(unknown) = egress
                .methods
                .iter()
                .map(ToString::to_string)
                .find(|m| !METHODS.contains(&m.as_str()))
            {
                let mut message = format!(
                    "`{unknown}` is not an HTTP method the egress gate sends (one of {})",
                    METHODS.join(", ")
                );
                if let Some(nearest) = nearest(&unknown, &METHODS) {
                    message.push_str(&format!("; did you mean `{nearest}`?"));
                }
                return Err(invalid(&field, &message));
            }
        }
        Ok(())
    }
}

/// Labels (`produces`, `sends`) are spelled as labels, each once.
fn check_labels(field: &str, labels: &[String]) -> Result<(), ManifestError> {
    let mut seen = BTreeSet::new();
    for label in labels {
        gatehouse_core::model::label::check(label).map_err(|e| invalid(field, &e))?;
        if !seen.insert(label) {
            return Err(invalid(field, &format!("`{label}` is listed twice")));
        }
    }
    Ok(())
}

fn check_common(id: &str, version: &str) -> Result<(), ManifestError> {
    if !is_name(id, true) {
        return Err(invalid(
            "id",
            &format!(
                "`{id}` must be 1-64 of [a-z0-9._-], starting with a letter or digit, e.g. `acme.orders`"
            ),
        ));
    }
    if semver::Version::parse(version).is_err() {
        return Err(invalid(
            "version",
            &format!("`{version}` is not a semantic version like `1.2.0`"),
        ));
    }
    Ok(())
}

/// A JSON Schema (2020-12) the host can compile, as loading compiles it: the same check in
/// `pack`, `verify` and load.
fn check_schema(field: &str, schema: &Value) -> Result<(), ManifestError> {
    if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
        return Err(invalid(
            field,
            "must be a JSON Schema: an object (or true/false), or one written as JSON text in \
             a string",
        ));
    }
    match schema_problem(schema) {
        Some(message) => Err(invalid(field, &message)),
        None => Ok(()),
    }
}

/// Why the host cannot compile `schema` as a JSON Schema (2020-12), as `pack`, `verify` and
/// load compile a manifest's schemas, naming where (and, for a misspelt type, the nearest
/// one); `None` if it compiles. (`gatehouse import` asks it of each schema it writes.)
pub fn schema_problem(schema: &Value) -> Option<String> {
    let error = jsonschema::draft202012::new(schema).err()?;
    let at = error.instance_path().to_string();
    let value = schema.pointer(&at);
    let mut message = format!("is not a valid JSON Schema (2020-12): at `{at}`: {error}");
    if at.ends_with("/type")
        && let Some(Value::String(name)) = value
    {
        const TYPES: [&str; 7] = [
            "string", "number", "integer", "boolean", "object", "array", "null",
        ];
        message = format!(
            "is not a valid JSON Schema (2020-12): at `{at}`, `{name}` is not a type (one of {})",
            TYPES.join(", ")
        );
        if let Some(nearest) = nearest(name, &TYPES) {
            message.push_str(&format!("; did you mean `{nearest}`?"));
        }
    }
    Some(message)
}

/// The one of `candidates` nearest to `name`, if it is near enough to be a typo of it.
pub(crate) fn nearest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|candidate| (strsim::levenshtein(name, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 2).max(2))
        .min()
        .map(|(_, candidate)| candidate)
}

/// The methods a manifest may ask the egress gate for: HTTP's (RFC 9110, and PATCH), but
/// CONNECT, which is no request to a resource.
const METHODS: [&str; 8] = [
    "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE", "TRACE",
];

fn is_name(s: &str, allow_dot: bool) -> bool {
    let ok = |c: char| {
        c.is_ascii_lowercase()
            || c.is_ascii_digit()
            || c == '_'
            || c == '-'
            || (allow_dot && c == '.')
    };
    !s.is_empty()
        && s.len() <= 64
        && s.chars().all(ok)
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn invalid(field: &str, message: &str) -> ManifestError {
    ManifestError::Invalid {
        field: field.to_owned(),
        message: message.to_owned(),
        at: None,
    }
}

/// Where the top-level `key` is written: its `[[key]]` or `[key...]` header, or `key =`.
fn locate_key(text: &str, key: &str) -> Option<(usize, usize)> {
    text.lines().enumerate().find_map(|(i, line)| {
        let trimmed = line.trim_start();
        let named = trimmed
            .trim_start_matches('[')
            .strip_prefix(key)
            .is_some_and(|rest| {
                let rest = rest.trim_start();
                rest.starts_with(']') || rest.starts_with('.') || rest.starts_with('=')
            });
        named.then(|| (i + 1, line.len() - trimmed.len() + 1))
    })
}

/// `text` with its top-level `kind = ...` line (before the first table header) blanked.
fn blank_kind(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut top = true;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            top = false;
        }
        let is_kind = top
            && trimmed
                .strip_prefix("kind")
                .is_some_and(|rest| rest.trim_start().starts_with('='));
        if is_kind {
            out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// `message` (a parser's) with `; did you mean `x`?` when it names an unknown field or variant
/// and one of the expected names is near it.
fn with_suggestion(message: &str) -> String {
    let Some(unknown) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|prefix| message.split_once(prefix).map(|(_, rest)| rest))
        .and_then(|rest| rest.split_once('`'))
    else {
        return message.to_owned();
    };
    let (name, rest) = unknown;
    let expected: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    match nearest(name, &expected) {
        Some(candidate) => format!("{}; did you mean `{candidate}`?", message.trim_end()),
        None => message.to_owned(),
    }
}

/// Where `field` (as [`ManifestError::Invalid`] names it: `id`, `capability[2].input_schema`,
/// `egress[0].methods`) is written in the TOML `text`: its line and column, from 1. The n-th
/// `[[capability]]` (or `[[egress]]`) table, then the key's line within it.
fn locate(text: &str, field: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let key_line = |from: usize, to: usize, key: &str| {
        (from..to).find_map(|i| {
            let line = lines[i];
            let trimmed = line.trim_start();
            let rest = trimmed.strip_prefix(key)?;
            rest.trim_start()
                .starts_with('=')
                .then(|| (i + 1, line.len() - trimmed.len() + 1))
        })
    };
    let header = |line: &str| line.trim_start().starts_with('[');
    let first_header = lines.iter().position(|l| header(l)).unwrap_or(lines.len());
    let Some((table, rest)) = field.split_once('[') else {
        // `caller.ask`: the key in its `[caller]` table, or the dotted key at the top.
        if let Some((table, key)) = field.split_once('.') {
            let start = lines
                .iter()
                .position(|l| l.trim_start().starts_with(&format!("[{table}]")));
            if let Some(start) = start {
                let end = (start + 1..lines.len())
                    .find(|&i| header(lines[i]))
                    .unwrap_or(lines.len());
                return key_line(start + 1, end, key).or(Some((start + 1, 1)));
            }
            return key_line(0, first_header, table);
        }
        return key_line(0, first_header, field);
    };
    let (index, key) = rest.split_once("].")?;
    let index: usize = index.parse().ok()?;
    let headers = [format!("[[{table}]]"), format!("[[{table}s]]")];
    let start = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            headers
                .iter()
                .any(|h| l.trim_start().starts_with(h.as_str()))
        })
        .nth(index)?
        .0;
    let end = (start + 1..lines.len())
        .find(|&i| lines[i].trim_start().starts_with("[["))
        .unwrap_or(lines.len());
    key_line(start + 1, end, key.split(['.', '[']).next()?).or(Some((start + 1, 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: &str = r#"
        kind = "adapter"
        id = "gatehouse.echo"
        version = "0.1.0"
        publisher = "gatehouse"
        [[capability]]
        id = "echo"
        capability_class = "observe"
        approval_mode = "read_only"
        input_schema = { type = "object" }
    "#;

    fn error_of(text: &str) -> String {
        Manifest::from_toml(text).unwrap_err().to_string()
    }

    /// Where the parser's position points survives the blanked `kind` line, and a missing
    /// or unknown kind says what to write.
    #[test]
    fn shape_errors_keep_their_place_and_name_the_fix() {
        let error = error_of(&ECHO.replace("approval_mode = \"read_only\"", "approval_mode = 1"));
        assert!(error.contains("line 9, column 25"), "{error}");
        let error = error_of(&ECHO.replace("kind = \"adapter\"", ""));
        assert!(error.contains("`kind` is missing"), "{error}");
        let error = error_of(&ECHO.replace("kind = \"adapter\"", "kind = \"policies\""));
        assert!(error.ends_with("did you mean `policy`?"), "{error}");
        // No suggestion when nothing is near.
        let error = error_of(&ECHO.replace("[[capability]]", "[[zzz]]\n[[capability]]"));
        assert!(error.contains("unknown field `zzz`"), "{error}");
        assert!(!error.contains("did you mean"), "{error}");
        // A rule's place: the line of the field in the right [[capability]] table.
        let two = format!(
            "{ECHO}\n        [[capability]]\n        id = \"second\"\n        capability_class = \"act\"\n        approval_mode = \"read_only\"\n        input_schema = {{ type = \"object\" }}\n"
        );
        let lines: Vec<&str> = two.lines().collect();
        let line = lines
            .iter()
            .rposition(|l| l.contains("approval_mode"))
            .unwrap()
            + 1;
        let error = error_of(&two);
        assert!(
            error.starts_with(&format!(
                "line {line}, column 9: manifest field `capability[1].approval_mode`"
            )),
            "{error}"
        );
    }

    /// Resources, templates and prompts: their rules, each error naming its field; an adapter
    /// of resources alone needs no capability; and the manifest round-trips through TOML.
    #[test]
    fn resources_templates_and_prompts_are_checked() {
        const SERVED: &str = r#"
            kind = "adapter"
            id = "acme.docs"
            version = "0.1.0"
            publisher = "acme"
            [[resource]]
            id = "handbook"
            uri = "docs://handbook"
            classification = "internal"
            [[resource_template]]
            id = "page"
            uri_template = "docs://pages/{page}"
            parameters = { page = { type = "string", pattern = "^[a-z]+$" } }
            [[prompt]]
            id = "summarize"
            arguments = [{ name = "text", required = true }]
        "#;
        let manifest = Manifest::from_toml(SERVED).expect("resources alone make an adapter");
        let Manifest::Adapter(adapter) = &manifest else {
            panic!("an adapter");
        };
        assert!(adapter.serves_content() && adapter.capabilities.is_empty());
        let again = Manifest::from_toml(&manifest.to_toml().unwrap()).unwrap();
        assert_eq!(again, manifest);
        for (from, to, field, says) in [
            (
                "id = \"page\"",
                "id = \"handbook\"",
                "resource_template[0].id",
                "declared twice",
            ),
            (
                "docs://pages/{page}",
                "docs://pages/{+page}",
                "resource_template[0].uri_template",
                "not a simple expression",
            ),
            (
                "docs://pages/{page}",
                "docs://pages/all",
                "resource_template[0].uri_template",
                "declare a fixed URI",
            ),
            (
                "docs://pages/{page}",
                "docs://pages/{uri}",
                "resource_template[0].uri_template",
                "rename the parameter",
            ),
            (
                "parameters = { page",
                "parameters = { other",
                "resource_template[0].parameters",
                "not a parameter",
            ),
            (
                "uri = \"docs://handbook\"",
                "uri = \"handbook\"",
                "resource[0].uri",
                "not a URI",
            ),
            (
                "id = \"summarize\"",
                "id = \"Sum Up\"",
                "prompt[0].id",
                "1-64 of [a-z0-9_-]",
            ),
            (
                "{ name = \"text\", required = true }",
                "{ name = \"t\" }, { name = \"t\" }",
                "prompt[0].arguments[1].name",
                "declared twice",
            ),
        ] {
            let error = error_of(&SERVED.replace(from, to));
            assert!(
                error.contains(&format!("`{field}`")) && error.contains(says),
                "{from} -> {to}: {error}"
            );
        }
        let nothing = "kind = \"adapter\"\nid = \"a.b\"\nversion = \"0.1.0\"\npublisher = \"p\"\n";
        assert!(
            error_of(nothing).contains("[[resource]]"),
            "{}",
            error_of(nothing)
        );
    }

    /// The class decides whether a key is needed; `idempotency.required` saying otherwise is
    /// named, both ways, and agreeing or absent says nothing.
    #[test]
    fn an_idempotency_table_that_disagrees_with_the_class_is_named() {
        let Manifest::Adapter(echo) = Manifest::from_toml(ECHO).unwrap() else {
            panic!("an adapter");
        };
        let base = echo.capabilities[0].clone();
        let with = |class, mode, required: Option<bool>| Capability {
            capability_class: class,
            approval_mode: mode,
            idempotency: required.map(|required| Idempotency {
                required,
                dedup_window_seconds: 86_400,
            }),
            ..base.clone()
        };
        use ApprovalMode::{Network, ReadOnly};
        use CapabilityClass::{Act, Observe};
        for (capability, disagreement) in [
            (
                with(Observe, ReadOnly, Some(true)),
                Some(
                    "capability `echo`: `idempotency.required = true` asks every call for an \
                     idempotency key, though class `observe` at mode `read_only` needs none; if \
                     the review lowered its class, remove the `idempotency` table (or set \
                     `required = false`)",
                ),
            ),
            (
                with(Act, Network, Some(false)),
                Some(
                    "capability `echo`: `idempotency.required = false` has no effect: class \
                     `act` at mode `network` needs an idempotency key on every call; remove it, \
                     or lower the class and mode if the tool only reads",
                ),
            ),
            (with(Act, Network, Some(true)), None),
            (with(Observe, ReadOnly, Some(false)), None),
            (with(Act, Network, None), None),
            (with(Observe, ReadOnly, None), None),
        ] {
            assert_eq!(
                capability.idempotency_disagreement().as_deref(),
                disagreement,
                "{:?} {:?} {:?}",
                capability.capability_class,
                capability.approval_mode,
                capability.idempotency
            );
        }
        assert!(with(Act, Network, None).requires_idempotency_key());
        assert!(!with(Observe, ReadOnly, None).requires_idempotency_key());
    }

    #[test]
    fn accepts_a_minimal_adapter_and_round_trips_through_json() {
        let manifest = Manifest::from_toml(ECHO).unwrap();
        assert_eq!(manifest.id(), "gatehouse.echo");
        assert_eq!(manifest.kind(), PluginKind::Adapter);
        assert_eq!(Manifest::from_json(&manifest.to_json()).unwrap(), manifest);
    }

    #[test]
    fn accepts_a_policy_with_default_config_schema() {
        let m = Manifest::from_toml(
            "kind = \"policy\"\nid = \"p\"\nversion = \"1.0.0\"\npublisher = \"x\"",
        )
        .unwrap();
        let Manifest::Policy(p) = m else {
            panic!("expected a policy")
        };
        assert_eq!(p.config_schema, serde_json::json!({"type": "object"}));
    }

    #[test]
    fn rejects_unknown_fields_naming_them() {
        let err = error_of(&format!("{ECHO}\nrisk = \"low\""));
        assert!(err.contains("unknown field `risk`"), "{err}");
    }

    #[test]
    fn the_caller_table_and_client_capabilities_are_checked_naming_the_fix() {
        let with = |caller: &str, required: &str| {
            ECHO.replace(
                "[[capability]]",
                &format!("[caller]\n{caller}\n[[capability]]"),
            ) + required
        };
        let manifest = Manifest::from_toml(&with(
            "progress = true\nask = [\"sampling\"]",
            "client_capabilities = [\"sampling\"]",
        ))
        .unwrap();
        let Manifest::Adapter(adapter) = manifest else {
            panic!("an adapter");
        };
        assert!(adapter.caller.progress && !adapter.caller.log);
        assert_eq!(
            adapter.capabilities[0].client_capabilities,
            [AskKind::Sampling]
        );
        let err = error_of(&with(
            "ask = [\"roots\"]",
            "client_capabilities = [\"sampling\"]",
        ));
        assert!(
            err.contains(
                "`sampling` is required of the client, but the adapter does not declare \
                          it may ask for it: add \"sampling\" to `ask` in the `[caller]` table"
            ),
            "{err}"
        );
        let err = error_of(&with("ask = [\"roots\", \"roots\"]", ""));
        assert!(err.contains("`roots` is listed twice"), "{err}");
        let err = error_of(&with("asks = [\"roots\"]", ""));
        assert!(err.contains("unknown field `asks`"), "{err}");
    }

    #[test]
    fn rejects_unknown_kind() {
        let err = error_of(&ECHO.replace("kind = \"adapter\"", "kind = \"gadget\""));
        assert!(err.contains("gadget"), "{err}");
    }

    #[test]
    fn rejects_bad_ids_and_versions() {
        assert!(error_of(&ECHO.replace("gatehouse.echo", "Echo!")).contains("manifest field `id`"));
        assert!(error_of(&ECHO.replace("0.1.0", "one")).contains("manifest field `version`"));
        assert!(
            error_of(&ECHO.replace("id = \"echo\"", "id = \"a.b\"")).contains("capability[0].id")
        );
    }

    #[test]
    fn rejects_duplicate_capabilities() {
        let twice = format!(
            "{ECHO}\n[[capability]]\nid = \"echo\"\ncapability_class = \"observe\"\napproval_mode = \"read_only\"\ninput_schema = {{}}"
        );
        assert!(error_of(&twice).contains("declared twice"));
    }

    #[test]
    fn rejects_read_only_act() {
        let err = error_of(&ECHO.replace("\"observe\"", "\"act\""));
        assert!(err.contains("capability[0].approval_mode"), "{err}");
    }

    #[test]
    fn rejects_non_object_schema_and_dangling_rollback() {
        assert!(
            error_of(&ECHO.replace("{ type = \"object\" }", "\"object\"")).contains("input_schema")
        );
        let err = error_of(&format!("{ECHO}rollback = \"undo\""));
        assert!(err.contains("capability[0].rollback"), "{err}");
    }

    #[test]
    fn an_upstream_table_round_trips_and_nothing_else_is_one() {
        let manifest = Manifest::from_toml(&format!(
            "{ECHO}\n[capability.upstream]\ntool = \"Echo It\"\nparameters = [{{ name = \"a\", in = \"query\" }}]"
        ))
        .unwrap();
        let Manifest::Adapter(adapter) = &manifest else {
            panic!("an adapter")
        };
        assert_eq!(
            adapter.capabilities[0].upstream,
            Some(
                serde_json::json!({ "tool": "Echo It", "parameters": [{ "name": "a", "in": "query" }] })
            )
        );
        assert_eq!(Manifest::from_json(&manifest.to_json()).unwrap(), manifest);
        let err = error_of(&format!("{ECHO}upstream = \"http://x\""));
        assert_eq!(
            err,
            "line 11, column 5: manifest field `capability[0].upstream`: must be a table"
        );
    }

    #[test]
    fn rejects_an_adapter_without_capabilities() {
        let err = error_of(
            "kind = \"adapter\"\nid = \"a\"\nversion = \"1.0.0\"\npublisher = \"x\"\ncapability = []",
        );
        assert!(err.contains("at least one"), "{err}");
    }

    /// TOML cannot hold a JSON `null` or an integer above 2^63 - 1: `to_toml` writes such a
    /// schema as JSON text in a string, and it reads back as the same manifest; every other
    /// schema stays a table.
    #[test]
    fn any_json_schema_survives_the_toml_form() {
        let mut manifest = Manifest::from_toml(ECHO).unwrap();
        let Manifest::Adapter(adapter) = &mut manifest else {
            panic!("an adapter");
        };
        let nulls = serde_json::json!({
            "type": "object",
            "properties": {
                "tag": { "type": ["string", "null"], "default": null, "enum": ["a", null] },
                "big": { "maximum": u64::MAX },
            },
        });
        adapter.capabilities[0].input_schema = nulls.clone();
        adapter.capabilities[0].output_schema = Some(serde_json::json!({ "const": null }));
        adapter.capabilities[0].upstream =
            Some(serde_json::json!({ "url": "http://h", "x": null }));
        let text = manifest.to_toml().unwrap();
        assert!(
            text.contains(
                r#"input_schema = '{"type":"object","properties":{"tag":{"type":["string","null"],"default":null,"enum":["a",null]},"big":{"maximum":18446744073709551615}}}'"#
            ),
            "{text}"
        );
        let back = Manifest::from_toml(&text).unwrap();
        assert_eq!(back, manifest);
        let Manifest::Adapter(back) = back else {
            panic!("an adapter");
        };
        assert_eq!(back.capabilities[0].input_schema, nulls);
        // The embedded JSON form holds the value itself, and reads back the same.
        assert_eq!(Manifest::from_json(&manifest.to_json()).unwrap(), manifest);
        assert!(
            !String::from_utf8(manifest.to_json())
                .unwrap()
                .contains(r#""input_schema": "{"#)
        );
        // A schema TOML can hold stays a table.
        let plain = Manifest::from_toml(ECHO).unwrap();
        let text = plain.to_toml().unwrap();
        assert!(!text.contains("input_schema = '"), "{text}");
        assert_eq!(Manifest::from_toml(&text).unwrap(), plain);
        // A string that is not JSON text is refused, naming the field and the two spellings.
        let err = error_of(&ECHO.replace("{ type = \"object\" }", "'{ nope'"));
        assert_eq!(
            err,
            "line 10, column 9: manifest field `capability[0].input_schema`: must be a JSON \
             Schema: an object (or true/false), or one written as JSON text in a string"
        );
    }
}
