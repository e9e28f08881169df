//! Test helpers: does `manifest.toml` agree with your Rust types? (Cargo feature `testing`.)
//!
//! The host checks a call's arguments against the capability's `input_schema` before the
//! adapter sees them, and a policy binding's config against `config_schema`; then serde reads
//! them into your types. If the schema accepts what the type refuses, callers meet
//! `INVALID_ARGUMENTS` (or every call is denied with `POLICY_CONFIG_INVALID`) at run time.
//! These helpers put that mistake into `cargo test`:
//!
//! 1. enable the feature for tests only, so the wasm build carries none of it:
//!    `[dev-dependencies] gatehouse-sdk = { version = "..", features = ["testing"] }`;
//! 2. pass `include_str!("../manifest.toml")`, a capability id and sample arguments to
//!    [`check_args`] (or a sample config to [`check_config`]);
//! 3. it validates the sample against the schema (JSON Schema 2020-12, as the host does),
//!    deserializes it into your type exactly as the SDK does at run time, and returns the
//!    value; on a mismatch it panics with a message naming the schema, the capability and the
//!    field. [`try_check_args`] and [`try_check_config`] return the [`CheckError`] instead.
//!
//! ```
//! use gatehouse_sdk::serde_json::json;
//! use gatehouse_sdk::testing::{CheckError, check_args, try_check_args};
//! use serde::Deserialize;
//!
//! // In a plugin: `const MANIFEST: &str = include_str!("../manifest.toml");`
//! const MANIFEST: &str = r#"
//! [[capability]]
//! id = "echo"
//! input_schema = { type = "object", properties = { message = { type = "string" } }, required = ["message"] }
//! "#;
//!
//! #[derive(Deserialize)]
//! struct EchoArgs {
//!     message: String,
//! }
//!
//! let args: EchoArgs = check_args(MANIFEST, "echo", &json!({ "message": "hi" }));
//! assert_eq!(args.message, "hi");
//!
//! #[derive(Debug, Deserialize)]
//! struct Disagrees {
//!     message: u32,
//! }
//! let err = try_check_args::<Disagrees>(MANIFEST, "echo", &json!({ "message": "hi" }));
//! assert!(matches!(err, Err(CheckError::Type { field, .. }) if field == "/message"));
//! ```

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::policy::config::is_nothing_configured;

/// Why a sample does not get through both the schema and the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// `manifest.toml` does not parse, or declares no capability with the id asked for.
    Manifest(String),
    /// The schema itself is not a valid JSON Schema 2020-12.
    InvalidSchema {
        /// Which schema: ``input_schema of `echo` `` or `config_schema`.
        schema: String,
        /// The compiler's message.
        message: String,
    },
    /// The schema refuses the sample: fix the sample (or the schema, if the sample is right).
    Schema {
        /// Which schema: ``input_schema of `echo` `` or `config_schema`.
        schema: String,
        /// JSON pointer of the refused value, `/` for the whole sample.
        field: String,
        /// What the schema expects.
        message: String,
    },
    /// The schema accepts the sample but the type refuses it: the two disagree.
    Type {
        /// Which schema: ``input_schema of `echo` `` or `config_schema`.
        schema: String,
        /// The Rust type, as `std::any::type_name` spells it.
        type_name: &'static str,
        /// JSON pointer of the refused value, `/` for the whole sample.
        field: String,
        /// serde's message.
        message: String,
    },
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Manifest(message) => write!(f, "manifest.toml: {message}"),
            Self::InvalidSchema { schema, message } => {
                write!(
                    f,
                    "the {schema} is not a valid JSON Schema 2020-12: {message}"
                )
            }
            Self::Schema {
                schema,
                field,
                message,
            } => write!(
                f,
                "the {schema} refuses the sample at `{field}`: {message}; fix the sample, or \
                 the schema if the sample is right"
            ),
            Self::Type {
                schema,
                type_name,
                field,
                message,
            } => write!(
                f,
                "the {schema} accepts the sample but `{type_name}` refuses it at `{field}`: \
                 {message}; make the type and the schema agree"
            ),
        }
    }
}

impl std::error::Error for CheckError {}

/// Checks `args` against the `input_schema` of `capability` in `manifest_toml` and
/// deserializes them into `T` as [`Call::args`](crate::Call::args) does.
///
/// # Panics
/// With the [`CheckError`]'s message if the manifest lacks the capability, the schema refuses
/// `args`, or `T` refuses what the schema accepts.
#[track_caller]
pub fn check_args<T: DeserializeOwned>(manifest_toml: &str, capability: &str, args: &Value) -> T {
    try_check_args(manifest_toml, capability, args).unwrap_or_else(|e| panic!("{e}"))
}

/// [`check_args`], returning the mismatch instead of panicking.
pub fn try_check_args<T: DeserializeOwned>(
    manifest_toml: &str,
    capability: &str,
    args: &Value,
) -> Result<T, CheckError> {
    let manifest = Manifest::parse(manifest_toml)?;
    let Some(declared) = manifest.capabilities.iter().find(|c| c.id == capability) else {
        let ids: Vec<String> = manifest
            .capabilities
            .iter()
            .map(|c| format!("`{}`", c.id))
            .collect();
        return Err(CheckError::Manifest(format!(
            "no [[capability]] has id `{capability}` (declared: {})",
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.join(", ")
            }
        )));
    };
    let schema = format!("input_schema of `{capability}`");
    validate(&schema, &declared.input_schema, args)?;
    deserialize(&schema, args)
}

/// Checks a policy's `config` against the manifest's `config_schema` (any object when absent,
/// as for the host) and parses it into `C` as the exported `evaluate` does, including the
/// "nothing configured" rules of [`Policy::Config`](crate::Policy::Config).
///
/// # Panics
/// With the [`CheckError`]'s message if the schema refuses `config` or `C` refuses what the
/// schema accepts.
#[track_caller]
pub fn check_config<C: DeserializeOwned + Default>(manifest_toml: &str, config: &Value) -> C {
    try_check_config(manifest_toml, config).unwrap_or_else(|e| panic!("{e}"))
}

/// [`check_config`], returning the mismatch instead of panicking.
pub fn try_check_config<C: DeserializeOwned + Default>(
    manifest_toml: &str,
    config: &Value,
) -> Result<C, CheckError> {
    let manifest = Manifest::parse(manifest_toml)?;
    let schema = "config_schema";
    validate(schema, &manifest.config_schema, config)?;
    deserialize(schema, config).or_else(|e| {
        if is_nothing_configured::<C>(config) {
            Ok(C::default())
        } else {
            Err(e)
        }
    })
}

/// The two parts of `manifest.toml` these checks read; the host validates the rest.
#[derive(Deserialize)]
struct Manifest {
    #[serde(default, rename = "capability", alias = "capabilities")]
    capabilities: Vec<DeclaredCapability>,
    #[serde(default = "any_object")]
    config_schema: Value,
}

#[derive(Deserialize)]
struct DeclaredCapability {
    id: String,
    input_schema: Value,
}

/// The host's default `config_schema`.
fn any_object() -> Value {
    serde_json::json!({ "type": "object" })
}

impl Manifest {
    fn parse(text: &str) -> Result<Self, CheckError> {
        toml::from_str(text).map_err(|e| CheckError::Manifest(e.to_string()))
    }
}

/// Validates like the host: the first error, by field.
fn validate(schema_name: &str, schema: &Value, sample: &Value) -> Result<(), CheckError> {
    let validator =
        jsonschema::draft202012::new(schema).map_err(|e| CheckError::InvalidSchema {
            schema: schema_name.to_owned(),
            message: e.to_string(),
        })?;
    validator.validate(sample).map_err(|e| CheckError::Schema {
        schema: schema_name.to_owned(),
        field: pointer_or_root(e.instance_path().to_string()),
        message: e.to_string(),
    })
}

/// Deserializes like the SDK (serde_json from the same document), keeping the path serde
/// stopped at.
fn deserialize<T: DeserializeOwned>(schema_name: &str, sample: &Value) -> Result<T, CheckError> {
    serde_path_to_error::deserialize(sample).map_err(|e| {
        let field: String = e
            .path()
            .iter()
            .map(|segment| {
                let name = match segment {
                    serde_path_to_error::Segment::Seq { index } => index.to_string(),
                    serde_path_to_error::Segment::Map { key } => key.clone(),
                    serde_path_to_error::Segment::Enum { variant } => variant.clone(),
                    serde_path_to_error::Segment::Unknown => "?".to_owned(),
                };
                // RFC 6901 escaping.
                format!("/{}", name.replace('~', "~0").replace('/', "~1"))
            })
            .collect();
        CheckError::Type {
            schema: schema_name.to_owned(),
            type_name: std::any::type_name::<T>(),
            field: pointer_or_root(field),
            message: e.into_inner().to_string(),
        }
    })
}

fn pointer_or_root(pointer: String) -> String {
    if pointer.is_empty() {
        "/".to_owned()
    } else {
        pointer
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MANIFEST: &str = r#"
kind = "adapter"
id = "acme.shop"

[[capability]]
id = "refund"
input_schema = { type = "object", properties = { order = { type = "string" }, amount = { type = "integer", minimum = 1 }, lines = { type = "array", items = { type = "object", properties = { sku = { type = "string" } }, required = ["sku"] } } }, required = ["order", "amount"], additionalProperties = false }

[[capability]]
id = "broken"
input_schema = { type = "no-such-type" }
"#;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Refund {
        order: String,
        amount: u32,
        #[serde(default)]
        lines: Vec<Line>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Line {
        sku: String,
    }

    /// Agrees with the schema except that `sku` is a number.
    #[derive(Debug, Deserialize)]
    #[expect(dead_code, reason = "only its parse matters")]
    struct NumericSku {
        order: String,
        amount: u32,
        lines: Vec<NumericLine>,
    }

    #[derive(Debug, Deserialize)]
    #[expect(dead_code, reason = "only its parse matters")]
    struct NumericLine {
        sku: u64,
    }

    #[test]
    fn a_sample_both_accept_comes_back_typed() {
        let refund: Refund = check_args(
            MANIFEST,
            "refund",
            &json!({ "order": "o-1", "amount": 5, "lines": [{ "sku": "A-1" }] }),
        );
        assert_eq!(
            refund,
            Refund {
                order: "o-1".into(),
                amount: 5,
                lines: vec![Line { sku: "A-1".into() }]
            }
        );
    }

    #[test]
    fn the_schema_refusing_the_sample_names_capability_and_field() {
        let err =
            try_check_args::<Refund>(MANIFEST, "refund", &json!({ "order": "o-1", "amount": 0 }))
                .unwrap_err();
        assert_eq!(
            err,
            CheckError::Schema {
                schema: "input_schema of `refund`".into(),
                field: "/amount".into(),
                message: "0 is less than the minimum of 1".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "the input_schema of `refund` refuses the sample at `/amount`: 0 is less than the \
             minimum of 1; fix the sample, or the schema if the sample is right"
        );
    }

    #[test]
    fn a_type_that_disagrees_with_the_schema_is_caught_at_the_field() {
        let sample = json!({ "order": "o-1", "amount": 5, "lines": [{ "sku": "A-1" }] });
        let err = try_check_args::<NumericSku>(MANIFEST, "refund", &sample).unwrap_err();
        let type_name = std::any::type_name::<NumericSku>();
        assert_eq!(
            err,
            CheckError::Type {
                schema: "input_schema of `refund`".into(),
                type_name,
                field: "/lines/0/sku".into(),
                message: "invalid type: string \"A-1\", expected u64".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the input_schema of `refund` accepts the sample but `{type_name}` refuses it \
                 at `/lines/0/sku`: invalid type: string \"A-1\", expected u64; make the type \
                 and the schema agree"
            )
        );
    }

    #[test]
    fn a_required_field_the_schema_lacks_is_caught_at_the_root() {
        let err = try_check_args::<NumericSku>(
            MANIFEST,
            "refund",
            &json!({ "order": "o-1", "amount": 5 }),
        )
        .unwrap_err();
        assert_eq!(
            err,
            CheckError::Type {
                schema: "input_schema of `refund`".into(),
                type_name: std::any::type_name::<NumericSku>(),
                field: "/".into(),
                message: "missing field `lines`".into(),
            }
        );
    }

    #[test]
    #[should_panic(
        expected = "the input_schema of `refund` refuses the sample at `/`: Additional properties are not allowed ('note' was unexpected)"
    )]
    fn check_args_panics_with_the_message() {
        let _: Refund = check_args(
            MANIFEST,
            "refund",
            &json!({ "order": "o-1", "amount": 5, "note": "late" }),
        );
    }

    #[test]
    fn manifest_problems_say_what_is_missing() {
        assert_eq!(
            try_check_args::<Refund>(MANIFEST, "cancel", &json!({})).unwrap_err(),
            CheckError::Manifest(
                "no [[capability]] has id `cancel` (declared: `refund`, `broken`)".into()
            )
        );
        assert_eq!(
            try_check_args::<Refund>("kind = \"adapter\"", "refund", &json!({})).unwrap_err(),
            CheckError::Manifest("no [[capability]] has id `refund` (declared: none)".into())
        );
        let err = try_check_args::<Refund>(MANIFEST, "broken", &json!({})).unwrap_err();
        assert!(
            matches!(&err, CheckError::InvalidSchema { schema, .. } if schema == "input_schema of `broken`"),
            "{err:?}"
        );
        let err = try_check_args::<Refund>("[[capability]\n", "refund", &json!({})).unwrap_err();
        assert!(matches!(err, CheckError::Manifest(_)), "{err:?}");
    }

    const POLICY: &str = r#"
kind = "policy"
id = "acme.limits"
config_schema = { type = "object", properties = { max = { type = "number" } }, additionalProperties = false }
"#;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Limits {
        max: Option<f64>,
    }

    /// Agrees with the schema except that `max` must be an integer.
    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct IntegerLimits {
        max: u32,
    }

    #[test]
    fn configs_are_checked_like_arguments() {
        assert_eq!(
            check_config::<Limits>(POLICY, &json!({ "max": 2.5 })),
            Limits { max: Some(2.5) }
        );
        let err = try_check_config::<IntegerLimits>(POLICY, &json!({ "max": 2.5 })).unwrap_err();
        assert_eq!(
            err,
            CheckError::Type {
                schema: "config_schema".into(),
                type_name: std::any::type_name::<IntegerLimits>(),
                field: "/max".into(),
                message: "invalid type: floating point `2.5`, expected u32".into(),
            }
        );
        let err = try_check_config::<Limits>(POLICY, &json!({ "max": "high" })).unwrap_err();
        assert!(
            matches!(&err, CheckError::Schema { field, .. } if field == "/max"),
            "{err:?}"
        );
    }

    #[test]
    fn configs_follow_the_nothing_configured_rules() {
        let manifest_without_schema = "kind = \"policy\"\nid = \"acme.open\"\n";
        check_config::<()>(manifest_without_schema, &json!({}));
        assert_eq!(
            check_config::<Limits>(POLICY, &json!({})),
            Limits::default()
        );
        // The host's default schema is any object, so an array is refused before serde.
        let err =
            try_check_config::<Vec<String>>(manifest_without_schema, &json!(["a"])).unwrap_err();
        assert!(
            matches!(&err, CheckError::Schema { schema, field, .. }
                if schema == "config_schema" && field == "/"),
            "{err:?}"
        );
    }
}
