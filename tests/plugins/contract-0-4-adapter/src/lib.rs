//! `test.contract-0-4-adapter`: an adapter as a third party built it for the released contract
//! `gatehouse:plugin@0.4.0`, from the WIT as released (its `wit` links to
//! `wit/contract-0.4.0`), with wit-bindgen alone. Its world is the current one's less the
//! `caller` import, so the host prepares it against the current world; its `log` import is
//! `gatehouse:plugin/log@0.4.0`, which the host must link too.
//!
//! `whoami` logs `whoami called` at info and says the tenant and the skills text it was given.

wit_bindgen::generate!({
    path: "wit",
    world: "adapter",
    // The wasi:http / wasi:io / wasi:clocks interfaces the world imports.
    generate_all,
});

use gatehouse::plugin::log::{Level, log};
use gatehouse::plugin::types::Content;

struct Contract04Adapter;

impl Guest for Contract04Adapter {
    fn invoke(
        ctx: CallContext,
        _capability: String,
        _args: String,
    ) -> Result<ToolOutput, ToolError> {
        log(Level::Info, "whoami called");
        Ok(ToolOutput {
            content: vec![Content::Text(format!(
                "built for 0.4.0, called by {} with skills: {}",
                ctx.tenant,
                ctx.skill_context.as_deref().unwrap_or("none")
            ))],
            structured: None,
            evidence_refs: Vec::new(),
        })
    }
}

export!(Contract04Adapter);
