//! `test.contract-0-5-adapter`: an adapter as a third party built it for the released contract
//! `gatehouse:plugin@0.5.0`, from the WIT as released (its `wit` links to
//! `wit/contract-0.5.0`), with wit-bindgen alone. It exports `invoke` only (0.6.0 added
//! `read-resource`, `get-prompt` and `complete`), so the host prepares it against 0.5.0's
//! world; its `log` and `caller` imports are `gatehouse:plugin/log@0.5.0` and
//! `gatehouse:plugin/caller@0.5.0`, which the host must link too.
//!
//! `whoami` reports progress 1 of 1 and an `info` line to its caller, and says the tenant.

wit_bindgen::generate!({
    path: "wit",
    world: "adapter",
    // The wasi:http / wasi:io / wasi:clocks interfaces the world imports.
    generate_all,
});

use gatehouse::plugin::caller::{self, LogLevel};
use gatehouse::plugin::types::Content;

struct Contract05Adapter;

impl Guest for Contract05Adapter {
    fn invoke(
        ctx: CallContext,
        _capability: String,
        _args: String,
    ) -> Result<ToolOutput, ToolError> {
        caller::progress(1.0, Some(1.0), Some("done"));
        caller::notify(LogLevel::Info, None, "\"whoami called\"");
        Ok(ToolOutput {
            content: vec![Content::Text(format!(
                "built for 0.5.0, called by {}",
                ctx.tenant
            ))],
            structured: None,
            evidence_refs: Vec::new(),
        })
    }
}

export!(Contract05Adapter);
