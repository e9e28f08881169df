//! `gatehouse.textkit`: offline text helpers that show the SDK off. No egress.
//!
//! | capability      | class         | mode      | result                                   |
//! |-----------------|---------------|-----------|------------------------------------------|
//! | `word_stats`    | think_support | read_only | counts of a text, structured             |
//! | `verify_iban`   | verify        | read_only | ISO 13616 mod-97 check, with evidence    |
//! | `render_badge`  | think_support | read_only | an SVG badge as an `image` content block |
//! | `describe_call` | observe       | read_only | the call context the host passed in      |
//!
//! Each capability lives in its own module as a plain function of typed arguments, so the
//! logic is tested natively; this file only dispatches.

use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

mod badge;
mod context;
mod iban;
mod stats;

struct TextKit;

impl Adapter for TextKit {
    fn invoke(ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "word_stats" => stats::word_stats(&call.args()?),
            "verify_iban" => iban::verify_iban(&call.args()?),
            "render_badge" => badge::render_badge(&call.args()?),
            "describe_call" => context::describe_call(ctx, &call.args()?),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

gatehouse_sdk::export_adapter!(TextKit);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::ErrorKind;

    use super::*;

    fn call(capability: &str, args: &str) -> Result<ToolOutput, ToolError> {
        TextKit::invoke(&CallContext::default(), &Call::new(capability, args))
    }

    #[test]
    fn dispatches_every_capability_in_the_manifest() {
        let manifest = include_str!("../manifest.toml");
        let cases = [
            ("word_stats", r#"{"text":"a b"}"#),
            ("verify_iban", r#"{"iban":"DE89 3704 0044 0532 0130 00"}"#),
            ("render_badge", r#"{"label":"build","value":"passing"}"#),
            ("describe_call", "{}"),
        ];
        for (capability, args) in cases {
            assert!(
                manifest.contains(&format!("id = \"{capability}\"")),
                "{capability} is not in manifest.toml"
            );
            call(capability, args).unwrap_or_else(|e| panic!("{capability}: {e}"));
        }
        assert_eq!(manifest.matches("[[capability]]").count(), cases.len());
    }

    #[test]
    fn unknown_capability() {
        let err = call("summarize", "{}").unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str()),
            (ErrorKind::Validation, "UNKNOWN_CAPABILITY")
        );
    }

    #[test]
    fn bad_arguments_are_validation_errors() {
        let err = call("word_stats", r#"{"txt":"a"}"#).unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str()),
            (ErrorKind::Validation, "INVALID_ARGUMENTS")
        );
        assert!(
            err.message.contains("unknown field `txt`"),
            "{}",
            err.message
        );
    }
}
