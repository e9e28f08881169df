//! Gate 9, verify: the structured output against the output schema, then the declared
//! evidence keys. Obligations are applied afterwards by [`super::obligations`].

use serde_json::Value;

use crate::pipeline::validate::Schemas;
use crate::plugin::manifest::Capability;

/// Why a result failed verification.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The structured output is not JSON.
    #[error("the tool's structured output is not JSON: {0}")]
    NotJson(String),
    /// The output breaks the output schema, or is missing though a schema is declared.
    #[error("the tool's output at `{field}` does not match its output schema: {message}")]
    Schema {
        /// JSON pointer of the offending value.
        field: String,
        /// What the schema expects.
        message: String,
    },
    /// A declared evidence key is missing from the output.
    #[error("the tool's output lacks the declared evidence key `{key}`")]
    EvidenceMissing {
        /// The missing key.
        key: String,
    },
}

/// Parses the adapter's structured output.
pub fn parse(structured: Option<&str>) -> Result<Option<Value>, VerifyError> {
    structured
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| VerifyError::NotJson(e.to_string()))
}

/// Gate 9: output schema, then evidence keys.
pub fn check(
    capability: &Capability,
    schemas: &Schemas,
    structured: Option<&Value>,
) -> Result<(), VerifyError> {
    if let Some(schema) = &schemas.output {
        let Some(value) = structured else {
            return Err(VerifyError::Schema {
                field: "/".to_owned(),
                message: "no structured output, but the capability declares an output schema"
                    .to_owned(),
            });
        };
        if let Err(e) = schema.validate(value) {
            let field = e.instance_path().to_string();
            return Err(VerifyError::Schema {
                field: if field.is_empty() {
                    "/".to_owned()
                } else {
                    field
                },
                message: e.to_string(),
            });
        }
    }
    for key in &capability.evidence_keys {
        if structured
            .and_then(|v| v.get(key))
            .is_none_or(Value::is_null)
        {
            return Err(VerifyError::EvidenceMissing { key: key.clone() });
        }
    }
    Ok(())
}
