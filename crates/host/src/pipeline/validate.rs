//! Gate 3, validate: arguments against the capability's input schema (JSON Schema 2020-12),
//! then the operator's `arg_constraints`. Failures are model-correctable: they name the field.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use jsonschema::Validator;
use regex::Regex;
use serde_json::{Number, Value};

use crate::pipeline::config::ArgConstraint;
use crate::plugin::manifest::Capability;

/// Why arguments were refused, or a schema/constraint could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The arguments break the input schema.
    #[error("argument `{field}` is invalid: {message}")]
    Schema {
        /// JSON pointer of the offending value (`/` for the whole object).
        field: String,
        /// What the schema expects.
        message: String,
    },
    /// The arguments break an operator constraint.
    #[error("argument `{field}` {message}")]
    Constraint {
        /// The argument name.
        field: String,
        /// What the constraint expects.
        message: String,
    },
    /// A capability's schema does not compile (reported when the adapter is installed).
    #[error("capability `{capability}`: {which} is not a valid JSON Schema 2020-12: {message}")]
    BadSchema {
        /// Capability id.
        capability: String,
        /// `input_schema` or `output_schema`.
        which: &'static str,
        /// The compiler's message.
        message: String,
    },
    /// An `arg_constraints` pattern is not a valid regular expression.
    #[error("arg_constraints.{field}.pattern is not a valid regular expression: {message}")]
    BadPattern {
        /// The argument name.
        field: String,
        /// The parser's message.
        message: String,
    },
}

/// A capability's compiled schemas; compiled once at install.
#[derive(Debug)]
pub struct Schemas {
    /// Input schema.
    pub input: Validator,
    /// Output schema, if declared.
    pub output: Option<Validator>,
}

impl Schemas {
    /// Compiles a capability's schemas.
    pub fn compile(capability: &Capability) -> Result<Self, ValidateError> {
        let compile = |which: &'static str, schema: &Value| {
            jsonschema::draft202012::new(schema).map_err(|e| ValidateError::BadSchema {
                capability: capability.id.clone(),
                which,
                message: e.to_string(),
            })
        };
        Ok(Self {
            input: compile("input_schema", &capability.input_schema)?,
            output: capability
                .output_schema
                .as_ref()
                .map(|s| compile("output_schema", s))
                .transpose()?,
        })
    }
}

/// One grant's constraints with compiled patterns.
#[derive(Debug, Clone)]
pub struct CompiledConstraints(Arc<BTreeMap<String, (ArgConstraint, Option<Regex>)>>);

impl CompiledConstraints {
    /// Compiles the patterns.
    pub fn new(constraints: &BTreeMap<String, ArgConstraint>) -> Result<Self, ValidateError> {
        let mut out = BTreeMap::new();
        for (field, c) in constraints {
            // Anchored: the whole string must match, not some part of it.
            let regex = c
                .pattern
                .as_deref()
                .map(|pattern| Regex::new(&format!("^(?:{pattern})$")))
                .transpose()
                .map_err(|e| ValidateError::BadPattern {
                    field: field.clone(),
                    message: e.to_string(),
                })?;
            out.insert(field.clone(), (c.clone(), regex));
        }
        Ok(Self(Arc::new(out)))
    }
}

/// Gate 3: schema first (the first error, by field), then every constraint.
pub fn check(
    schemas: &Schemas,
    constraints: &[CompiledConstraints],
    args: &Value,
) -> Result<(), ValidateError> {
    if let Err(e) = schemas.input.validate(args) {
        let field = e.instance_path().to_string();
        return Err(ValidateError::Schema {
            field: if field.is_empty() {
                "/".to_owned()
            } else {
                field
            },
            message: e.to_string(),
        });
    }
    for set in constraints {
        for (field, (c, regex)) in set.0.iter() {
            // `/a/b` reaches a nested field (a JSON pointer); a plain name a top-level one.
            let value = if field.starts_with('/') {
                args.pointer(field)
            } else {
                args.get(field)
            };
            check_one(field, c, regex.as_ref(), value)?;
        }
    }
    Ok(())
}

fn check_one(
    field: &str,
    c: &ArgConstraint,
    regex: Option<&Regex>,
    value: Option<&Value>,
) -> Result<(), ValidateError> {
    let fail = |message: String| ValidateError::Constraint {
        field: field.to_owned(),
        message,
    };
    let Some(value) = value else {
        return if c.required {
            Err(fail("is required".to_owned()))
        } else {
            Ok(())
        };
    };
    if let Some(min) = &c.min {
        match value.as_number().and_then(|v| compare(v, min)) {
            Some(Ordering::Greater | Ordering::Equal) => {}
            _ => return Err(fail(format!("must be a number >= {min}, got {value}"))),
        }
    }
    if let Some(max) = &c.max {
        match value.as_number().and_then(|v| compare(v, max)) {
            Some(Ordering::Less | Ordering::Equal) => {}
            _ => return Err(fail(format!("must be a number <= {max}, got {value}"))),
        }
    }
    if let Some(allowed) = &c.allowed
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(fail(format!(
            "must be one of {}, got {value}",
            list.join(", ")
        )));
    }
    if let Some(regex) = regex {
        match value.as_str() {
            Some(s) if regex.is_match(s) => {}
            _ => {
                return Err(fail(format!(
                    "must be a string matching `{}`, got {value}",
                    regex.as_str()
                )));
            }
        }
    }
    Ok(())
}

/// Compares two JSON numbers: integers exactly (beyond 2^53 too), anything else as `f64`.
fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    let int = |n: &Number| n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}
