//! `test.contract-0-1`: an adapter as a third party built it for the released contract
//! `gatehouse:plugin@0.1.0`, before `call-context` carried `upstream`. Its WIT,
//! `wit/gatehouse.wit`, is the 0.1.0 file exactly as released (`git show
//! 12a0b59^:wit/gatehouse.wit`; `wit/deps` links the repository's WASI packages, unchanged
//! since), kept here rather than taken from the host's frozen copy (`wit/contract-0.1.0/`), so
//! a slip in that copy cannot hide here. It is built with wit-bindgen alone, not the SDK,
//! which follows the current contract. The host must keep loading and running it.
//!
//! - `whoami`: logs `whoami called` at info, and returns a text block and structured content
//!   echoing the context (tenant, principals, approval mode, idempotency key, skills) and the
//!   arguments;
//! - `fail`: a structured `conflict` error with a remediation.

wit_bindgen::generate!({
    path: "wit",
    world: "adapter",
    // The wasi:http / wasi:io / wasi:clocks interfaces the world imports.
    generate_all,
});

use gatehouse::plugin::log::{Level, log};
// The world's `use types.{call-context, tool-output, tool-error}` names those three here.
use gatehouse::plugin::types::{ApprovalMode, Content, ErrorKind, PrincipalKind};

struct Contract01;

impl Guest for Contract01 {
    fn invoke(ctx: CallContext, capability: String, args: String) -> Result<ToolOutput, ToolError> {
        match capability.as_str() {
            "whoami" => {
                log(Level::Info, "whoami called");
                let principals: Vec<String> = ctx
                    .principals
                    .iter()
                    .map(|p| {
                        let kind = match p.kind {
                            PrincipalKind::User => "user",
                            PrincipalKind::Agent => "agent",
                            PrincipalKind::Service => "service",
                        };
                        format!("{kind}:{}@{}", p.id, p.tenant)
                    })
                    .collect();
                let mode = match ctx.approval_mode {
                    ApprovalMode::ReadOnly => "read_only",
                    ApprovalMode::LocalWrite => "local_write",
                    ApprovalMode::Network => "network",
                    ApprovalMode::Delegated => "delegated",
                    ApprovalMode::Destructive => "destructive",
                };
                let structured = format!(
                    "{{\"tenant\":{},\"principals\":{},\"approval_mode\":{},\"idempotency_key\":{},\"skills\":{},\"args\":{args}}}",
                    quote(&ctx.tenant),
                    list(&principals),
                    quote(mode),
                    ctx.idempotency_key
                        .as_deref()
                        .map_or("null".to_owned(), quote),
                    ctx.skill_context
                        .as_deref()
                        .map_or("null".to_owned(), quote),
                );
                Ok(ToolOutput {
                    content: vec![Content::Text(format!(
                        "built for 0.1.0, called by {}",
                        ctx.tenant
                    ))],
                    structured: Some(structured),
                    evidence_refs: vec![format!("contract-0-1:{}", ctx.tool_call_id)],
                })
            }
            other => Err(ToolError {
                kind: ErrorKind::Conflict,
                code: "CONTRACT_0_1_FAILS".to_owned(),
                message: format!("`{other}` fails on purpose"),
                retryable: false,
                remediation: Some("call `whoami` instead".to_owned()),
            }),
        }
    }
}

/// `text` as a JSON string (the test inputs hold no control characters).
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quote(i)).collect();
    format!("[{}]", quoted.join(","))
}

export!(Contract01);
