//! The signed `upstream` table of a capability: which A2A agent it forwards to, and which of
//! its skills.

use gatehouse_sdk::{CallContext, ToolError};
use serde::Deserialize;

/// One `upstream` table, as `gatehouse import a2a` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The agent's JSON-RPC endpoint, from its card's `supportedInterfaces`.
    pub url: String,
    /// The skill's id on the agent's card (the capability id is its sanitized form). Sent as
    /// the message's `metadata["gatehouse/skill"]`: A2A has no field that addresses a skill.
    pub skill: String,
    /// Whether the card says the agent streams (`capabilities.streaming`): then a message is
    /// sent with `SendStreamingMessage` and its updates reach the caller as progress.
    #[serde(default)]
    pub streaming: bool,
    /// SHA-256 of the skill's definition at import. Not used here: `gatehouse import a2a
    /// --check` compares it with the agent's card now.
    pub digest: String,
    /// The card as it was at import, for the same check.
    pub card: CardPin,
}

/// The agent card an import read, pinned. Not used here: `gatehouse import a2a --check` reads
/// the card again and compares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardPin {
    /// Where it was read.
    pub url: String,
    /// SHA-256 of the card, without its signatures.
    pub digest: String,
    /// The public key (base64 Ed25519) its signature verified with, when it was signed.
    #[serde(default)]
    pub signer: Option<String>,
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

    fn ctx(upstream: &str) -> CallContext {
        CallContext {
            upstream: Some(upstream.to_owned()),
            ..CallContext::default()
        }
    }

    #[test]
    fn reads_the_mapping() {
        let text = r#"{"url":"http://127.0.0.1:1/","skill":"book","streaming":true,"digest":"sha256:00","card":{"url":"http://127.0.0.1:1/.well-known/agent-card.json","digest":"sha256:01"}}"#;
        let mapping = Mapping::of(&ctx(text), "book").unwrap();
        assert_eq!((mapping.skill.as_str(), mapping.streaming), ("book", true));
        assert_eq!(mapping.card.signer, None);
    }

    #[test]
    fn a_bad_mapping_is_an_internal_error_naming_the_capability() {
        let err = Mapping::of(&ctx(r#"{"url":"u","tool":"t"}"#), "x").unwrap_err();
        assert_eq!(err.code, "UPSTREAM_MAPPING_INVALID");
        assert!(err.message.starts_with("capability `x`"), "{}", err.message);
    }
}
