//! The idempotency key as a tool argument: a key a model can send.
//!
//! Agent hosts call a tool with its name and its arguments, nothing else, so a key in `_meta`
//! (`gatehouse/idempotency_key`) is out of a model's reach. Every tool whose calls take a key
//! therefore lists one more argument in `tools/list`: `[mcp] idempotency_key_argument`
//! (default `idempotency_key`), a string of the key's form, whose description tells the model to
//! make a fresh key for each effect it intends and to send the same key on every retry of that
//! effect. It is `required` where the key is (write-class tools, and tools whose `idempotency`
//! table says so), and optional on tools with an `idempotency` table or an approval gate (there
//! the key is what resumes an approval on a retry).
//!
//! On `tools/call` the gateway takes the argument out of the arguments into the call envelope,
//! before the adapter's own schema validates them, so the adapter never sees it, unless its own
//! input schema declares an argument of that name: that argument stays, and its value is the key
//! as well. A key in `_meta` still works; when both are sent they must be the same string, or
//! the call is refused (`IDEMPOTENCY_KEY_INVALID`) and nothing runs. The refusal is the MCP
//! layer's, like a malformed `_meta`: no gate ran, so the audit log has no entry for it.

use std::sync::Arc;

use gatehouse_core::envelope::{OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::{ErrorBody, ErrorKind};
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::Capability;
use rmcp::model::JsonObject;
use serde_json::{Value, json};

use super::meta::IDEMPOTENCY_KEY_META;

/// The default name of the key argument.
pub const DEFAULT_KEY_ARGUMENT: &str = "idempotency_key";

/// What the listed argument tells the model.
const DESCRIPTION: &str = "Idempotency key of this call. Make a fresh unique string (for example \
     a UUID) for each effect you intend, and send the same key again on every retry of that same \
     effect: the effect then happens at most once, and a retry returns the first call's result. \
     A call paused for approval resumes when called again with the same arguments and key.";

/// The key argument, as `[mcp] idempotency_key_argument` names it (`None`: turned off).
#[derive(Debug, Clone)]
pub struct KeyArgument(Option<Arc<str>>);

/// Why a call's key cannot be taken: the call is refused before any gate runs.
#[derive(Debug, thiserror::Error)]
pub enum KeyRefusal {
    /// The argument is not a string.
    #[error("the `{argument}` argument must be a string, not {found}")]
    NotAString {
        /// The argument's name.
        argument: String,
        /// What it was (a JSON type).
        found: &'static str,
    },
    /// The argument and `_meta` name two different keys.
    #[error(
        "the `{argument}` argument (`{from_argument}`) and `_meta[\"{IDEMPOTENCY_KEY_META}\"]` \
         (`{from_meta}`) name different idempotency keys; nothing ran"
    )]
    Mismatch {
        /// The argument's name.
        argument: String,
        /// The key the argument names.
        from_argument: String,
        /// The key `_meta` names.
        from_meta: String,
    },
}

impl KeyArgument {
    /// The argument `name`, or none.
    pub fn new(name: Option<&str>) -> Self {
        Self(name.map(Arc::from))
    }

    /// The argument's name, if it is on.
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// How `capability`'s tool lists the argument: not at all when its calls take no key or
    /// the adapter declares an argument of that name itself.
    pub fn listing(&self, capability: &Capability) -> Option<Listing<'_>> {
        let name = self.name()?;
        (capability.takes_idempotency_key() && !capability.declares_argument(name)).then(|| {
            Listing {
                name,
                required: capability.requires_idempotency_key(),
            }
        })
    }

    /// The call's idempotency key: the argument's (taken out of `args` unless `tool` declares
    /// it, see the module docs) or `_meta`'s, which must agree when both are sent.
    pub fn take(
        &self,
        host: &Host,
        tenant: &str,
        tool: &str,
        args: &mut JsonObject,
        meta: Option<&str>,
    ) -> Result<Option<String>, KeyRefusal> {
        let Some(name) = self.name() else {
            return Ok(meta.map(str::to_owned));
        };
        let argument = if !args.contains_key(name) {
            None
        } else if host.declares_argument(tenant, tool, name) {
            args.get(name).cloned()
        } else {
            args.remove(name)
        };
        let from_argument = match argument {
            None | Some(Value::Null) => None,
            Some(Value::String(key)) => Some(key),
            Some(other) => {
                return Err(KeyRefusal::NotAString {
                    argument: name.to_owned(),
                    found: json_type(&other),
                });
            }
        };
        match (from_argument, meta) {
            (Some(from_argument), Some(from_meta)) if from_argument != from_meta => {
                Err(KeyRefusal::Mismatch {
                    argument: name.to_owned(),
                    from_argument,
                    from_meta: from_meta.to_owned(),
                })
            }
            (Some(key), _) => Ok(Some(key)),
            (None, meta) => Ok(meta.map(str::to_owned)),
        }
    }

    /// How a caller passes a key, for a remediation: the argument, else `_meta`.
    pub fn how_to_send(&self) -> String {
        match self.name() {
            Some(name) => format!("the `{name}` argument"),
            None => format!("`_meta[\"{IDEMPOTENCY_KEY_META}\"]`"),
        }
    }

    /// Says how to send a key in a result that asks for one (`IDEMPOTENCY_KEY_REQUIRED`) or
    /// resumes with one (a paused call): the host's remediation speaks of the envelope's
    /// field, the caller needs the argument's name.
    pub fn name_in(&self, result: &mut ToolResultEnvelope) {
        let Some(error) = &mut result.error else {
            return;
        };
        let how = self.how_to_send();
        match result.outcome {
            OutcomeCode::IdempotencyKeyRequired => {
                error.remediation = Some(format!(
                    "send a fresh unique key (e.g. a UUID) in {how}, and the same key again on \
                     every retry of this same effect; nothing ran"
                ));
            }
            OutcomeCode::ApprovalRequired if error.remediation.is_some() => {
                if let Some(remediation) = &mut error.remediation {
                    *remediation = remediation.replace(
                        "the same idempotency key",
                        &format!("the same idempotency key in {how}"),
                    );
                }
            }
            _ => {}
        }
    }
}

/// The key argument as one tool lists it ([`KeyArgument::listing`]).
#[derive(Debug, Clone, Copy)]
pub struct Listing<'a> {
    name: &'a str,
    required: bool,
}

impl Listing<'_> {
    /// Adds the argument to `schema`, a tool's input schema as `tools/list` shows it.
    pub fn add_to(self, schema: &mut JsonObject) {
        let properties = schema
            .entry("properties")
            .or_insert_with(|| Value::Object(JsonObject::new()));
        if let Value::Object(properties) = properties {
            properties.insert(
                self.name.to_owned(),
                json!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": gatehouse_host::MAX_IDEMPOTENCY_KEY,
                    "pattern": "^[!-~]+$",
                    "description": DESCRIPTION,
                }),
            );
        }
        if self.required {
            let required = schema
                .entry("required")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(required) = required
                && !required.iter().any(|r| r.as_str() == Some(self.name))
            {
                required.push(Value::String(self.name.to_owned()));
            }
        }
    }
}

impl Default for KeyArgument {
    fn default() -> Self {
        Self::new(Some(DEFAULT_KEY_ARGUMENT))
    }
}

/// The refusal of `call` for `refusal`: rejected, `IDEMPOTENCY_KEY_INVALID`, nothing ran.
pub fn refused(call: &ToolCallEnvelope, refusal: &KeyRefusal) -> ToolResultEnvelope {
    let mut result = ToolResultEnvelope::begin(call);
    let mut error = ErrorBody::new(
        ErrorKind::Validation,
        OutcomeCode::IdempotencyKeyInvalid.as_str(),
        refusal.to_string(),
        false,
    );
    error.remediation = Some(match refusal {
        KeyRefusal::NotAString { .. } => {
            "send the key as a string of 1 to 255 printable ASCII characters, e.g. a UUID".into()
        }
        KeyRefusal::Mismatch { .. } => {
            "send the key once (as the argument), or the same key in both places".into()
        }
    });
    result.status = Status::Rejected;
    result.outcome = OutcomeCode::IdempotencyKeyInvalid;
    result.error = Some(error);
    result
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
