//! `gatehouse.notes`: the demo's write-class adapter.
//!
//! One capability, `send` (act, `network`, approval gate `DEMO_SEND`, idempotency key
//! required): `{ "to", "text" }` in, the receipt `{ "sent", "to", "idempotency_key" }` out.
//! It stands in for an effect so the approval gate and exactly-once retries can be tried
//! without a service: the manifest requests no egress, so nothing leaves the sandbox.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Adapter, Call, CallContext, Result, ToolError, ToolOutput};
use serde::Deserialize;

/// Arguments of `send`; mirrors the input schema in `manifest.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    to: String,
    text: String,
}

struct Notes;

impl Adapter for Notes {
    fn invoke(ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
        match call.capability() {
            "send" => send(ctx, &call.args()?),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn send(ctx: &CallContext, args: &SendArgs) -> Result<ToolOutput> {
    // The host refuses a write-class call without a key before it gets here; a native caller
    // may still forget one.
    let key = ctx.idempotency_key.as_deref().ok_or_else(|| {
        ToolError::validation("IDEMPOTENCY_KEY_MISSING", "`send` needs an idempotency key")
    })?;
    Ok(ToolOutput::text(format!(
        "sent {} characters to {}",
        args.text.chars().count(),
        args.to
    ))
    .with_structured(json!({ "sent": true, "to": args.to, "idempotency_key": key })))
}

gatehouse_sdk::export_adapter!(Notes);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::testing::check_args;

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    #[test]
    fn sends_under_the_calls_idempotency_key() {
        let ctx = CallContext {
            idempotency_key: Some("note-1".to_owned()),
            ..CallContext::default()
        };
        let args: SendArgs = check_args(MANIFEST, "send", &json!({ "to": "ops", "text": "hi" }));
        assert_eq!(
            send(&ctx, &args).unwrap().structured,
            Some(json!({ "sent": true, "to": "ops", "idempotency_key": "note-1" }))
        );
        let err = send(&CallContext::default(), &args).unwrap_err();
        assert_eq!(err.code, "IDEMPOTENCY_KEY_MISSING");
    }
}
