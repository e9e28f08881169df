//! `gatehouse.a2a-upstream`: forwards each capability to one skill of an A2A agent (protocol
//! 1.0, the JSON-RPC binding), so a peer agent is governed like any adapter: the policy gate,
//! approvals and idempotency before the message leaves, the egress gate on every request.
//!
//! The component's code is the same for every import. What differs is the signed manifest
//! `gatehouse import a2a` writes from the agent's card: one capability per skill, each with an
//! `upstream` table ([`mapping::Mapping`]: the agent's endpoint, the skill's id, whether the
//! agent streams, the pinned digests) that the host hands over with every call. Per call:
//! 1. read the capability's mapping from the call context ([`mapping`]);
//! 2. send the arguments (`text` and `data`, or an answer with the `task_id` and
//!    `context_id` of a task that asked for input) as a user message whose `messageId` is the
//!    call's idempotency key, so a retried message is one effect, and follow its task until
//!    it ends ([`task`]): its updates reach the caller as progress, its questions as
//!    elicitation, and a cancelled call cancels it. Each request goes through
//!    `gatehouse_sdk::http` ([`peer`]), so the egress gate decides where it may go and injects
//!    the operator's credential for the agent; this code never sees one;
//! 3. turn the task into the call's result ([`result`]): the artifacts' parts as content,
//!    their data parts also as structured content; `FAILED`, `REJECTED` and `CANCELED` as the
//!    errors `A2A_TASK_FAILED`, `A2A_TASK_REJECTED` and `A2A_TASK_CANCELED`, quoting the
//!    agent's status message.

use gatehouse_sdk::serde_json;
use gatehouse_sdk::{Adapter, Call, CallContext, Result, ToolError, ToolOutput};

mod mapping;
mod peer;
mod result;
mod task;

struct A2aUpstream;

impl Adapter for A2aUpstream {
    fn invoke(ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
        let mapping = mapping::Mapping::of(ctx, call.capability())?;
        let input: task::Input = serde_json::from_value(call.args_value()?).map_err(|e| {
            ToolError::validation("INVALID_ARGUMENTS", format!("the arguments: {e}"))
        })?;
        // A write's idempotency key, so the agent sees a retry as the same message; a read
        // has none, and its call's id is unique.
        let message_id = ctx.idempotency_key.as_deref().unwrap_or(&ctx.tool_call_id);
        task::run(&mapping, input, message_id)
    }
}

gatehouse_sdk::export_adapter!(A2aUpstream);
