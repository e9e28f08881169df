//! `describe_call`: what the host told this adapter about the call in flight.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{CallContext, ToolError, ToolOutput};
use serde::Deserialize;

/// No arguments: `{}` only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DescribeCallArgs {}

pub(crate) fn describe_call(
    ctx: &CallContext,
    _args: &DescribeCallArgs,
) -> Result<ToolOutput, ToolError> {
    let principals: Vec<_> = ctx
        .principals
        .iter()
        .map(|p| json!({ "kind": p.kind, "id": p.id, "tenant": p.tenant }))
        .collect();
    let chain: Vec<&str> = ctx.principals.iter().map(|p| p.id.as_str()).collect();
    Ok(ToolOutput::text(format!(
        "tenant {:?}, principals [{}], approval mode {}",
        ctx.tenant,
        chain.join(" -> "),
        ctx.approval_mode
    ))
    .with_structured(json!({
        "tool_call_id": ctx.tool_call_id,
        "trace_id": ctx.trace_id,
        "tenant": ctx.tenant,
        "principals": principals,
        "approval_mode": ctx.approval_mode,
        "idempotency_key": ctx.idempotency_key,
        // Only whether there is one: skill text is the operator's, not the model's.
        "has_skill_context": ctx.skill_context.is_some(),
    })))
}

#[cfg(test)]
mod tests {
    use gatehouse_sdk::{ApprovalMode, Content, Principal, PrincipalKind};

    use super::*;

    #[test]
    fn reports_the_context() {
        let ctx = CallContext {
            tool_call_id: "call-7".into(),
            trace_id: "trace-7".into(),
            tenant: "acme".into(),
            principals: vec![
                Principal::new(PrincipalKind::User, "ada", "acme"),
                Principal::new(PrincipalKind::Agent, "helper", "acme"),
            ],
            approval_mode: ApprovalMode::LocalWrite,
            idempotency_key: Some("idem-1".into()),
            skill_context: Some("be brief".into()),
            upstream: None,
        };
        let out = describe_call(&ctx, &DescribeCallArgs {}).unwrap();
        assert_eq!(
            out.content,
            [Content::Text(
                r#"tenant "acme", principals [ada -> helper], approval mode local_write"#.into()
            )]
        );
        assert_eq!(
            out.structured,
            Some(json!({
                "tool_call_id": "call-7",
                "trace_id": "trace-7",
                "tenant": "acme",
                "principals": [
                    { "kind": "user", "id": "ada", "tenant": "acme" },
                    { "kind": "agent", "id": "helper", "tenant": "acme" },
                ],
                "approval_mode": "local_write",
                "idempotency_key": "idem-1",
                "has_skill_context": true,
            }))
        );
    }
}
