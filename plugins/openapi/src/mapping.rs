//! The signed `upstream` table of a capability: which HTTP operation it is.

use gatehouse_sdk::{CallContext, ToolError};
use serde::Deserialize;

/// One capability's `upstream` table, as `gatehouse import openapi` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The method, uppercase, e.g. `GET`.
    pub method: String,
    /// The server URL and the path template, e.g. `https://api.example.com/v1/pets/{petId}`.
    pub url: String,
    /// Where each parameter goes. Default: none.
    #[serde(default)]
    pub parameters: Vec<Parameter>,
    /// Whether the `body` argument is sent as the JSON request body. Default: false.
    #[serde(default)]
    pub body: bool,
}

/// One parameter of the operation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameter {
    /// Its name in the HTTP request.
    pub name: String,
    /// Where it goes.
    #[serde(rename = "in")]
    pub location: Location,
    /// The argument that carries it (the name, unless two locations share one).
    pub argument: String,
    /// For a query array: one `name=value` per item (true, the OpenAPI default) or one
    /// comma-joined value (false).
    #[serde(default = "yes")]
    pub explode: bool,
}

fn yes() -> bool {
    true
}

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// Into the URL template's `{name}`.
    Path,
    /// Into the query string.
    Query,
    /// Into a request header.
    Header,
}

impl Mapping {
    /// The mapping of `capability` from the call context; a missing or malformed one is an
    /// `internal` error.
    pub fn of(ctx: &CallContext, capability: &str) -> Result<Self, ToolError> {
        ctx.upstream_table(capability)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_mapping_and_refuses_a_missing_one() {
        let ctx = CallContext {
            upstream: Some(r#"{"method":"GET","url":"http://h/pets","parameters":[{"name":"tags","in":"query","argument":"tags","explode":false}]}"#.into()),
            ..CallContext::default()
        };
        let mapping = Mapping::of(&ctx, "list").unwrap();
        assert_eq!(mapping.parameters[0].location, Location::Query);
        assert!(!mapping.parameters[0].explode && !mapping.body);
        let err = Mapping::of(&CallContext::default(), "list").unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.message.as_str()),
            (
                "UPSTREAM_MAPPING_INVALID",
                "capability `list` has no `upstream` table in its manifest"
            )
        );
    }
}
