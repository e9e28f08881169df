//! `gatehouse.echo`: returns its input.
//!
//! One capability, `echo` (observe, read-only): `{ "message": string }` in, the message as a
//! text block and `{ "message", "length" }` (length in Unicode scalar values) as the
//! structured result out.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};
use serde::Deserialize;

/// Arguments of `echo`; mirrors the input schema in `manifest.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// The text to return.
    message: String,
}

struct Echo;

impl Adapter for Echo {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "echo" => Ok(echo(&call.args()?)),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn echo(args: &EchoArgs) -> ToolOutput {
    let length = args.message.chars().count();
    ToolOutput::text(&args.message)
        .with_structured(json!({ "message": args.message, "length": length }))
}

gatehouse_sdk::export_adapter!(Echo);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::testing::{CheckError, check_args, try_check_args};
    use gatehouse_sdk::{Content, ErrorKind};

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn call(capability: &str, args: &str) -> Result<ToolOutput, ToolError> {
        Echo::invoke(&CallContext::default(), &Call::new(capability, args))
    }

    #[test]
    fn echoes_the_message_with_its_length_in_chars() {
        let out = call("echo", r#"{"message":"grüß dich"}"#).unwrap();
        assert_eq!(out.content, [Content::Text("grüß dich".into())]);
        assert_eq!(
            out.structured,
            Some(json!({ "message": "grüß dich", "length": 9 }))
        );
        assert!(out.evidence_refs.is_empty());
    }

    #[test]
    fn empty_message_is_fine() {
        let out = call("echo", r#"{"message":""}"#).unwrap();
        assert_eq!(out.structured, Some(json!({ "message": "", "length": 0 })));
    }

    #[test]
    fn missing_message_is_a_validation_error() {
        let err = call("echo", "{}").unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str()),
            (ErrorKind::Validation, "INVALID_ARGUMENTS")
        );
        assert!(
            err.message.contains("missing field `message`"),
            "{}",
            err.message
        );
    }

    #[test]
    fn extra_fields_are_rejected_like_the_schema_does() {
        let err = call("echo", r#"{"message":"a","shout":true}"#).unwrap_err();
        assert_eq!(err.code, "INVALID_ARGUMENTS");
        assert!(
            err.message.contains("unknown field `shout`"),
            "{}",
            err.message
        );
    }

    #[test]
    fn sample_arguments_satisfy_the_schema_and_echo_args() {
        let args: EchoArgs = check_args(MANIFEST, "echo", &json!({ "message": "grüß dich" }));
        assert_eq!(
            echo(&args).structured,
            Some(json!({ "message": "grüß dich", "length": 9 }))
        );
        let args: EchoArgs = check_args(MANIFEST, "echo", &json!({ "message": "" }));
        assert_eq!(args.message, "");
    }

    #[test]
    fn the_schema_refuses_what_echo_args_refuses() {
        let err =
            try_check_args::<EchoArgs>(MANIFEST, "echo", &json!({ "message": "a", "shout": true }))
                .unwrap_err();
        assert_eq!(
            err,
            CheckError::Schema {
                schema: "input_schema of `echo`".into(),
                field: "/".into(),
                message: "Additional properties are not allowed ('shout' was unexpected)".into(),
            }
        );
    }

    /// What `check_args` is for: a struct that drifted from `manifest.toml` (here `message`
    /// became a number) fails `cargo test`, naming the capability and the field.
    #[test]
    fn a_struct_that_disagrees_with_the_manifest_is_caught() {
        #[derive(Debug, Deserialize)]
        struct DriftedArgs {
            #[expect(dead_code, reason = "only its parse matters")]
            message: u64,
        }
        let err = try_check_args::<DriftedArgs>(MANIFEST, "echo", &json!({ "message": "hi" }))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the input_schema of `echo` accepts the sample but `{}` refuses it at \
                 `/message`: invalid type: string \"hi\", expected u64; make the type and the \
                 schema agree",
                std::any::type_name::<DriftedArgs>()
            )
        );
    }

    #[test]
    fn unknown_capability() {
        let err = call("reverse", r#"{"message":"a"}"#).unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str()),
            (ErrorKind::Validation, "UNKNOWN_CAPABILITY")
        );
    }
}
