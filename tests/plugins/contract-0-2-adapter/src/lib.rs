//! `test.contract-0-2-adapter`: an adapter as a third party built it for the released contract
//! `gatehouse:plugin@0.2.0` (its `wit` links to the host's frozen copy), with wit-bindgen alone.
//! Its world has the current one's shape but for what later versions added to it, so the host
//! prepares it against 0.5.0's; its `log` import is `gatehouse:plugin/log@0.2.0`, which the host
//! must link too. (The JavaScript and Python SDKs built for 0.2.0 until they moved to 0.6.0;
//! this keeps 0.2.0 loading under test.)
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

struct Contract02Adapter;

impl Guest for Contract02Adapter {
    fn invoke(
        ctx: CallContext,
        _capability: String,
        _args: String,
    ) -> Result<ToolOutput, ToolError> {
        log(Level::Info, "whoami called");
        Ok(ToolOutput {
            content: vec![Content::Text(format!(
                "built for 0.2.0, called by {} with skills: {}",
                ctx.tenant,
                ctx.skill_context.as_deref().unwrap_or("none")
            ))],
            structured: None,
            evidence_refs: Vec::new(),
        })
    }
}

export!(Contract02Adapter);
