//! `test.contract-0-3-adapter`: an adapter as a third party built it for the released contract
//! `gatehouse:plugin@0.3.0`, from the same WIT as `test.contract-0-3` (its `wit` links there),
//! with wit-bindgen alone. Its world has the current one's shape, so the host prepares it
//! against the current world; its `log` import is `gatehouse:plugin/log@0.3.0`, which the host
//! must link too.
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

struct Contract03Adapter;

impl Guest for Contract03Adapter {
    fn invoke(
        ctx: CallContext,
        _capability: String,
        _args: String,
    ) -> Result<ToolOutput, ToolError> {
        log(Level::Info, "whoami called");
        Ok(ToolOutput {
            content: vec![Content::Text(format!(
                "built for 0.3.0, called by {} with skills: {}",
                ctx.tenant,
                ctx.skill_context.as_deref().unwrap_or("none")
            ))],
            structured: None,
            evidence_refs: Vec::new(),
        })
    }
}

export!(Contract03Adapter);
