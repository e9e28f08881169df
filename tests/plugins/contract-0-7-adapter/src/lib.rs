//! `test.contract-0-7-adapter`: an adapter as a third party built it for the released contract
//! `gatehouse:plugin@0.7.0`, from the WIT as released (its `wit` links to
//! `wit/contract-0.7.0`), with wit-bindgen alone. Its world is the current one's but for its
//! version (0.8.0 changed only what a policy evaluates), so the host prepares it against the
//! current world; its `log` and `caller` imports are `gatehouse:plugin/log@0.7.0` and
//! `gatehouse:plugin/caller@0.7.0`, which the host must link too.
//!
//! `whoami` reports progress 1 of 1 and an `info` line to its caller, and says the tenant;
//! the resource `test://about` says the contract; it has no prompts and suggests nothing.

wit_bindgen::generate!({
    path: "wit",
    world: "adapter",
    // The wasi:http / wasi:io / wasi:clocks interfaces the world imports.
    generate_all,
});

use gatehouse::plugin::caller::{self, LogLevel};
use gatehouse::plugin::types::{Content, ErrorKind};

struct Contract07Adapter;

impl Guest for Contract07Adapter {
    fn invoke(
        ctx: CallContext,
        _capability: String,
        _args: String,
    ) -> Result<ToolOutput, ToolError> {
        caller::progress(1.0, Some(1.0), Some("done"));
        caller::notify(LogLevel::Info, None, "\"whoami called\"");
        Ok(ToolOutput {
            content: vec![Content::Text(format!(
                "built for 0.7.0, called by {}",
                ctx.tenant
            ))],
            structured: None,
            evidence_refs: Vec::new(),
        })
    }

    fn read_resource(_ctx: CallContext, uri: String) -> Result<Vec<EmbeddedResource>, ToolError> {
        Ok(vec![EmbeddedResource {
            uri,
            mime_type: Some("text/plain".to_owned()),
            text: Some("read by an adapter built for 0.7.0".to_owned()),
            data: None,
        }])
    }

    fn get_prompt(_ctx: CallContext, name: String, _args: String) -> Result<Prompt, ToolError> {
        Err(not_found(format!("no prompt `{name}`")))
    }

    fn complete(
        _ctx: CallContext,
        _reference: CompletionRef,
        _argument: String,
        _value: String,
        _context: String,
    ) -> Result<Completion, ToolError> {
        Ok(Completion {
            values: Vec::new(),
            total: None,
            has_more: false,
        })
    }
}

fn not_found(message: String) -> ToolError {
    ToolError {
        kind: ErrorKind::NotFound,
        code: "PROMPT_NOT_FOUND".to_owned(),
        message,
        retryable: false,
        remediation: None,
    }
}

export!(Contract07Adapter);
