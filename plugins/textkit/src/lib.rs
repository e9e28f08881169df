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
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::check_args;

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn call(capability: &str, args: &str) -> Result<ToolOutput, ToolError> {
        TextKit::invoke(&CallContext::default(), &Call::new(capability, args))
    }

    /// One sample per capability: its input schema and its argument struct both accept it
    /// (`check_args`), and `invoke` dispatches it.
    #[test]
    fn dispatches_every_capability_in_the_manifest() {
        let word_stats = json!({ "text": "The gate opens.\nWho keeps it?" });
        let verify_iban = json!({ "iban": "DE89 3704 0044 0532 0130 00" });
        let render_badge = json!({ "label": "build", "value": "passing", "color": "#4c1" });
        let describe_call = json!({});
        check_args::<stats::WordStatsArgs>(MANIFEST, "word_stats", &word_stats);
        check_args::<iban::VerifyIbanArgs>(MANIFEST, "verify_iban", &verify_iban);
        check_args::<badge::RenderBadgeArgs>(MANIFEST, "render_badge", &render_badge);
        check_args::<context::DescribeCallArgs>(MANIFEST, "describe_call", &describe_call);
        let cases = [
            ("word_stats", word_stats),
            ("verify_iban", verify_iban),
            ("render_badge", render_badge),
            ("describe_call", describe_call),
        ];
        for (capability, args) in &cases {
            call(capability, &args.to_string()).unwrap_or_else(|e| panic!("{capability}: {e}"));
        }
        assert_eq!(
            MANIFEST.matches("[[capability]]").count(),
            cases.len(),
            "a capability of manifest.toml has no sample here"
        );
    }

    #[test]
    fn optional_arguments_may_be_left_out() {
        let args: badge::RenderBadgeArgs = check_args(
            MANIFEST,
            "render_badge",
            &json!({ "label": "build", "value": "passing" }),
        );
        let out = badge::render_badge(&args).unwrap();
        assert_eq!(
            out.structured,
            Some(json!({ "width": 108, "height": 20, "color": "#4c1" }))
        );
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
