//! The released contract `gatehouse:plugin@0.1.0`, adapted to the current one: what the host
//! hands a 0.1.0 plugin (its call context, its action) is the current value less what 0.1.0
//! did not have, and what it returns (output, error, decision, log level) is the same value
//! in the current types. 0.1.0 differs from 0.2.0 in one field: `call-context.upstream`,
//! which a 0.1.0 adapter never sees (it was written before generic adapters existed).

use super::LogLevel;
use super::adapter_0_1::gatehouse::plugin::log::Level as OldLevel;
use super::adapter_0_1::gatehouse::plugin::types as old;
use super::types as wit;

super::older::older_policy!();

/// The call context a 0.1.0 adapter takes: the current one without `upstream`.
pub(crate) fn call_context(ctx: &wit::CallContext) -> old::CallContext {
    old::CallContext {
        tool_call_id: ctx.tool_call_id.clone(),
        trace_id: ctx.trace_id.clone(),
        tenant: ctx.tenant.clone(),
        principals: ctx.principals.iter().map(principal).collect(),
        approval_mode: approval_mode(ctx.approval_mode),
        idempotency_key: ctx.idempotency_key.clone(),
        skill_context: ctx.skill_context.clone(),
    }
}

impl From<old::ToolOutput> for wit::ToolOutput {
    fn from(output: old::ToolOutput) -> Self {
        Self {
            content: output.content.into_iter().map(content).collect(),
            structured: output.structured,
            evidence_refs: output.evidence_refs,
        }
    }
}

fn content(content: old::Content) -> wit::Content {
    let blob = |b: old::Blob| wit::Blob {
        data: b.data,
        mime_type: b.mime_type,
    };
    match content {
        old::Content::Text(text) => wit::Content::Text(text),
        old::Content::Image(b) => wit::Content::Image(blob(b)),
        old::Content::Audio(b) => wit::Content::Audio(blob(b)),
        old::Content::Resource(r) => wit::Content::Resource(wit::EmbeddedResource {
            uri: r.uri,
            mime_type: r.mime_type,
            text: r.text,
            data: r.data,
        }),
    }
}

impl From<old::ToolError> for wit::ToolError {
    fn from(error: old::ToolError) -> Self {
        Self {
            kind: match error.kind {
                old::ErrorKind::Validation => wit::ErrorKind::Validation,
                old::ErrorKind::NotFound => wit::ErrorKind::NotFound,
                old::ErrorKind::Conflict => wit::ErrorKind::Conflict,
                old::ErrorKind::Upstream => wit::ErrorKind::Upstream,
                old::ErrorKind::Unavailable => wit::ErrorKind::Unavailable,
                old::ErrorKind::Internal => wit::ErrorKind::Internal,
            },
            code: error.code,
            message: error.message,
            retryable: error.retryable,
            remediation: error.remediation,
        }
    }
}
