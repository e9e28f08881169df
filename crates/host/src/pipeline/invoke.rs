//! Gate 8, invoke: the skills context resolved for the call, a per-call egress gate, and the
//! adapter run in a fresh sandboxed instance. What the call spent (fuel, time, egress) is
//! recorded on the result whatever the outcome.

use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope, Usage};
use gatehouse_core::model::{ApprovalMode, ErrorBody, PrincipalKind};
use tracing::Instrument;

use crate::bindings::types as wit;
use crate::egress::{CallInfo, EgressGate};
use crate::pipeline::normalize::Target;
use crate::pipeline::outcome::Stop;
use crate::sandbox::Sandbox;
use crate::skills::Skills;

/// Gate 8: runs the target capability at approval mode `mode`; returns its output, or why
/// there is none.
pub async fn invoke(
    sandbox: &Sandbox,
    skills: &Skills,
    call: &ToolCallEnvelope,
    target: &Target,
    mode: ApprovalMode,
    result: &mut ToolResultEnvelope,
) -> Result<wit::ToolOutput, Stop> {
    let users: Vec<&str> = call
        .principal_chain
        .iter()
        .filter(|p| p.kind == PrincipalKind::User)
        .map(|p| p.id.as_str())
        .collect();
    let skills = skills.resolve(&call.tenant_id, &target.tool.name, &users);
    let ctx = wit::CallContext {
        tool_call_id: call.tool_call_id.clone(),
        trace_id: call.trace_id.clone(),
        tenant: call.tenant_id.clone(),
        principals: call.principal_chain.iter().map(Into::into).collect(),
        approval_mode: mode.into(),
        idempotency_key: call.idempotency_key.clone(),
        skill_context: skills.text,
        // Serialized per call: a small table, and only generic adapters declare one.
        upstream: target
            .tool
            .capability()
            .upstream
            .as_ref()
            .map(ToString::to_string),
    };
    let adapter = target.tool.adapter();
    let egress = EgressGate::new(
        adapter.grants(),
        CallInfo::new(mode, &call.trace_id, call.idempotency_key.clone()),
    );
    let report = sandbox
        .run_adapter(
            adapter.pre(),
            adapter.limits(),
            egress,
            &ctx,
            &target.tool.capability().id,
            &target.args.to_string(),
        )
        .instrument(tracing::info_span!(
            "adapter",
            adapter = %adapter.plugin().id,
            capability = %target.tool.capability().id,
        ))
        .await;
    for line in &report.logs {
        tracing::info!(target: "gatehouse::plugin", level = line.level, "{}", line.message);
    }
    if report.logs_dropped > 0 {
        tracing::info!(target: "gatehouse::plugin", dropped = report.logs_dropped, "log lines beyond the per-call cap were dropped");
    }
    result.egress = report.egress;
    result.usage = Some(Usage {
        fuel_consumed: report.fuel_consumed,
        duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
    });
    match report.outcome {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(tool_error)) => Err(Stop::Tool(ErrorBody::from(tool_error))),
        Err(failure) => Err(Stop::Sandbox(failure)),
    }
}
