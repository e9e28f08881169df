//! The signed `upstream` table of a capability, resource, resource template or prompt: which
//! MCP server it forwards to, and which of its tools or prompts.

use gatehouse_sdk::{CallContext, ToolError};
use serde::Deserialize;

/// The protocol version that needs no session: one request per call.
pub const STATELESS: &str = "2026-07-28";
/// The protocol version with a session: `initialize` first.
pub const SESSION: &str = "2025-11-25";

/// One `upstream` table, as `gatehouse import mcp` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The upstream's Streamable HTTP endpoint, e.g. `https://tools.example.com/mcp`.
    pub url: String,
    /// A capability's: the tool's name on the upstream (the capability id is its sanitized
    /// form).
    #[serde(default)]
    pub tool: String,
    /// A prompt's: its name on the upstream (the prompt id is its sanitized form).
    #[serde(default)]
    pub prompt: String,
    /// A resource's or resource template's: its URI or URI template on the upstream (read at
    /// the URI the caller asked for, which the host matched against it).
    #[serde(default)]
    pub uri: String,
    /// The protocol version the upstream answered at import: `2026-07-28` or `2025-11-25`.
    pub protocol: String,
    /// A capability's, when the upstream runs its tool only as a task (2025-11-25's
    /// `execution.taskSupport`): `required`. Empty otherwise.
    #[serde(default)]
    pub task: String,
    /// SHA-256 of the tool's definition at import. Not used here: `gatehouse import mcp
    /// --check` compares it with the upstream's current definition.
    pub digest: String,
}

impl Mapping {
    /// The mapping of `capability` (or resource, or prompt) from the call context; a missing
    /// or malformed one, or a protocol version this adapter does not speak, is an `internal`
    /// error.
    pub fn of(ctx: &CallContext, capability: &str) -> Result<Self, ToolError> {
        let mapping: Self = ctx.upstream_table(capability)?;
        if mapping.protocol != STATELESS && mapping.protocol != SESSION {
            return Err(ToolError::internal(
                "UPSTREAM_MAPPING_INVALID",
                format!(
                    "capability `{capability}` names protocol `{}`; this adapter speaks \
                     {STATELESS} and {SESSION}",
                    mapping.protocol
                ),
            ));
        }
        Ok(mapping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(upstream: Option<&str>) -> CallContext {
        CallContext {
            upstream: upstream.map(str::to_owned),
            ..CallContext::default()
        }
    }

    #[test]
    fn reads_the_mapping() {
        let text = r#"{"url":"http://127.0.0.1:1/mcp","tool":"Get Forecast","protocol":"2025-11-25","digest":"sha256:00"}"#;
        let mapping = Mapping::of(&ctx(Some(text)), "get_forecast").unwrap();
        assert_eq!(
            (mapping.tool.as_str(), mapping.protocol.as_str()),
            ("Get Forecast", SESSION)
        );
    }

    #[test]
    fn a_missing_or_bad_mapping_is_an_internal_error_naming_the_capability() {
        let err = Mapping::of(&ctx(None), "x").unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.message.as_str()),
            (
                "UPSTREAM_MAPPING_INVALID",
                "capability `x` has no `upstream` table in its manifest"
            )
        );
        let err = Mapping::of(
            &ctx(Some(
                r#"{"url":"u","tool":"t","protocol":"2024-11-05","digest":"d"}"#,
            )),
            "x",
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "capability `x` names protocol `2024-11-05`; this adapter speaks 2026-07-28 and 2025-11-25"
        );
        let err = Mapping::of(&ctx(Some(r#"{"url":"u"}"#)), "x").unwrap_err();
        assert!(
            err.message.contains("missing field `protocol`"),
            "{}",
            err.message
        );
    }
}
