//! `{{id}}`: a gatehouse adapter.
//!
//! One capability, `greet` (see `manifest.toml`): `{ "name": string }` in, a greeting as a
//! text block and `{ "greeting" }` as the structured result out.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Adapter, Call, CallContext, Result, ToolError, ToolOutput};
use serde::Deserialize;

/// Arguments of `greet`; mirrors its input schema in `manifest.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GreetArgs {
    name: String,
}

struct Plugin;

impl Adapter for Plugin {
    // The ids `invoke` handles: `gatehouse build` checks manifest.toml against them.
    const CAPABILITIES: &'static [&'static str] = &["greet"];

    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
        match call.capability() {
            "greet" => Ok(greet(&call.args()?)),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn greet(args: &GreetArgs) -> ToolOutput {
    let greeting = format!("Hello, {}!", args.name);
    ToolOutput::text(&greeting).with_structured(json!({ "greeting": greeting }))
}

gatehouse_sdk::export_adapter!(Plugin);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::testing::check_args;

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    #[test]
    fn greets_by_name() {
        let out = Plugin::invoke(&CallContext::default(), &Call::new("greet", r#"{"name":"Ada"}"#))
            .unwrap();
        assert_eq!(out.structured, Some(json!({ "greeting": "Hello, Ada!" })));
    }

    /// The manifest's schema and `GreetArgs` agree on a sample, and `greet` is a capability the
    /// manifest declares.
    #[test]
    fn the_manifest_and_the_code_agree() {
        let args: GreetArgs = check_args(MANIFEST, "greet", &json!({ "name": "Ada" }));
        assert_eq!(args.name, "Ada");
    }

    /// Every id in `CAPABILITIES` reaches a handler (here, one that wants its arguments).
    #[test]
    fn every_listed_capability_is_handled() {
        for id in Plugin::CAPABILITIES {
            let err = Plugin::invoke(&CallContext::default(), &Call::new(*id, "{}")).unwrap_err();
            assert_ne!(err.code, "UNKNOWN_CAPABILITY", "{id}");
        }
    }

    #[test]
    fn an_unknown_capability_is_refused() {
        let err = Plugin::invoke(&CallContext::default(), &Call::new("shout", "{}")).unwrap_err();
        assert_eq!(err.code, "UNKNOWN_CAPABILITY");
    }
}
