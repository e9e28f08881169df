//! `gatehouse.mcp-upstream`: forwards each capability to one tool of an upstream MCP server,
//! and each resource, resource template and prompt (contract 0.6.0) to the upstream's own:
//! `resources/read` at the URI the caller asked for, `prompts/get` of the pinned name, and
//! `completion/complete` for either.
//!
//! The component's code is the same for every import. What differs is the signed manifest
//! `gatehouse import mcp` writes: one capability per upstream tool, each with an `upstream`
//! table ([`mapping::Mapping`]: URL, tool name, protocol version, pinned digest) that the host
//! hands over with every call as `CallContext::upstream`. So per call:
//! 1. read the capability's mapping from the call context ([`mapping`]);
//! 2. call the upstream tool over Streamable HTTP ([`session`]): protocol 2026-07-28 in one
//!    request; 2025-11-25 as `initialize`, `notifications/initialized`, then the call, all
//!    within the call's egress budget. Each request goes through `gatehouse_sdk::http`, so the
//!    host's egress gate decides where it may go and injects the operator's credential for
//!    the upstream; this code never sees one, and a header it has no grant for is dropped;
//!    What the upstream tells and asks its client meanwhile (progress, log lines, elicitation,
//!    sampling, roots) reaches the caller through the gateway's caller gate ([`relay`]);
//! 3. turn the answer (JSON, or an SSE stream: [`rpc`]) into the call's result ([`result`]):
//!    content blocks and `structuredContent` as the upstream returned them; an `isError`
//!    result is the structured error `UPSTREAM_TOOL_ERROR`, a JSON-RPC error
//!    `UPSTREAM_RPC_ERROR`, an answer that is not MCP `UPSTREAM_NOT_MCP`, each naming the
//!    upstream and quoting (at most [`rpc::MAX_QUOTE`] bytes of) what it said.

use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{
    Adapter, Call, CallContext, Completion, CompletionRef, EmbeddedResource, Prompt, Result,
    ToolOutput,
};

mod mapping;
mod relay;
mod result;
mod rpc;
mod session;

struct McpUpstream;

impl Adapter for McpUpstream {
    fn invoke(ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
        let mapping = mapping::Mapping::of(ctx, call.capability())?;
        let arguments = call.args_value()?;
        let answer = session::call_tool(&mapping, &arguments)?;
        result::output(&mapping, &answer)
    }

    fn read_resource(ctx: &CallContext, uri: &str) -> Result<Vec<EmbeddedResource>> {
        let mapping = mapping::Mapping::of(ctx, uri)?;
        let answer =
            session::request(&mapping, "resources/read", Some(uri), json!({ "uri": uri }))?;
        result::contents(&mapping, &answer)
    }

    fn get_prompt(ctx: &CallContext, id: &str, args: &Value) -> Result<Prompt> {
        let mapping = mapping::Mapping::of(ctx, id)?;
        let params = json!({ "name": mapping.prompt, "arguments": args });
        let answer = session::request(&mapping, "prompts/get", Some(&mapping.prompt), params)?;
        result::prompt(&mapping, &answer)
    }

    fn complete(
        ctx: &CallContext,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &Value,
    ) -> Result<Completion> {
        let (mapping, reference) = match reference {
            CompletionRef::Prompt(id) => {
                let mapping = mapping::Mapping::of(ctx, id)?;
                let reference = json!({ "type": "ref/prompt", "name": mapping.prompt });
                (mapping, reference)
            }
            CompletionRef::Resource(template) => {
                let mapping = mapping::Mapping::of(ctx, template)?;
                let reference = json!({ "type": "ref/resource", "uri": mapping.uri });
                (mapping, reference)
            }
        };
        let params = json!({
            "ref": reference,
            "argument": { "name": argument, "value": value },
            "context": { "arguments": context },
        });
        let answer = session::request(&mapping, "completion/complete", None, params)?;
        result::completion(&mapping, &answer)
    }
}

gatehouse_sdk::export_adapter!(McpUpstream);
