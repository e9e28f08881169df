//! Gate 8, invoke: a per-call egress gate, and the adapter run in a fresh sandboxed instance
//! with the skills context resolved for the call (before the policy gate, which sees the
//! skills' names), what it tells and asks its caller through a per-call caller gate. What the
//! call spent (fuel, time, egress) and what it told and asked its caller are recorded on the
//! result whatever the outcome.

use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope, Usage};
use gatehouse_core::model::{ApprovalMode, EgressAttempt, ErrorBody, ErrorKind};
use tracing::Instrument;

use std::sync::Arc;

use crate::bindings::types as wit;
use crate::caller::CallerGate;
use crate::delegation::{Delegation, Delegations};
use crate::egress::{CallInfo, EgressGate};
use crate::pipeline::normalize::Target;
use crate::pipeline::outcome::Stop;
use crate::pipeline::registry::Kind;
use crate::relay::Relay;
use crate::sandbox::{Export, Sandbox, Served};

/// Gate 8: runs the target capability at approval mode `mode`, with the resolved skills'
/// text as its `skill-context`, what it tells and asks its caller going to `relay`, its
/// delegation sealed with `delegations` and the caller's `user_tokens` for the grants that
/// send them; returns its output, or why there is none.
#[expect(
    clippy::too_many_arguments,
    reason = "the call, what the pipeline resolved for it, and where its result goes"
)]
pub async fn invoke(
    sandbox: &Sandbox,
    delegations: &Delegations,
    skill_context: Option<String>,
    call: &ToolCallEnvelope,
    target: &Target,
    mode: ApprovalMode,
    user_tokens: Vec<crate::accounts::UserToken>,
    relay: Option<Arc<dyn Relay>>,
    result: &mut ToolResultEnvelope,
) -> Result<wit::ToolOutput, Stop> {
    let ctx = wit::CallContext {
        tool_call_id: call.tool_call_id.clone(),
        trace_id: call.trace_id.clone(),
        tenant: call.tenant_id.clone(),
        principals: call.principal_chain.iter().map(Into::into).collect(),
        approval_mode: mode.into(),
        idempotency_key: call.idempotency_key.clone(),
        skill_context,
        // Serialized per call: a small table, and only generic adapters declare one.
        upstream: target
            .tool
            .capability()
            .upstream
            .as_ref()
            .map(ToString::to_string),
    };
    let adapter = target.tool.adapter();
    let grants = adapter.grants();
    // Sealed only for an adapter that sends it somewhere.
    let delegation = grants.rules.iter().any(|rule| rule.delegate).then(|| {
        let now_ms = gatehouse_store::now_ms();
        delegations.seal(&Delegation {
            tenant: call.tenant_id.clone(),
            chain: call.principal_chain.clone(),
            tool_call_id: call.tool_call_id.clone(),
            approval_mode: mode,
            expires_ms: now_ms
                .saturating_add(u64::try_from(grants.max_total.as_millis()).unwrap_or(u64::MAX)),
        })
    });
    // The caller's own tokens: for its egress, and for no ask of the adapter's.
    let own_tokens = (user_tokens.iter())
        .map(|t| {
            (
                format!("oauth:{}", t.provider),
                t.expose().as_bytes().to_vec(),
            )
        })
        .collect();
    let egress = EgressGate::new(
        grants,
        CallInfo::new(mode, &call.trace_id, call.idempotency_key.clone())
            .for_tenant(&call.tenant_id)
            .delegating(delegation)
            .with_user_tokens(user_tokens),
    )
    .cancelled_by(relay.as_ref().and_then(|relay| relay.cancel()));
    let caller = CallerGate::new(adapter.caller(), relay, target.tool.capability().sensitive)
        .holding(own_tokens);
    let args = target.args.to_string();
    let id = &target.tool.capability().id;
    let export = match target.tool.kind() {
        Kind::Tool => Export::Invoke {
            capability: id,
            args: &args,
        },
        Kind::Resource(_) | Kind::Template(_) => Export::ReadResource {
            uri: target.args["uri"].as_str().unwrap_or_default(),
        },
        Kind::Prompt(_) => Export::GetPrompt {
            name: id,
            args: &args,
        },
    };
    let report = sandbox
        .run_adapter(
            adapter.pre(),
            adapter.limits(),
            egress,
            caller,
            &ctx,
            export,
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
    result.caller = report.caller;
    result.usage = Some(Usage {
        fuel_consumed: report.fuel_consumed,
        duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
    });
    match report.outcome {
        Ok(Ok(served)) => Ok(as_output(served)),
        Ok(Err(tool_error)) => {
            let mut error = ErrorBody::from(tool_error);
            refused_by_the_gate(&mut error, &result.egress);
            Err(Stop::Tool(error))
        }
        Err(failure) => Err(Stop::Sandbox(failure)),
    }
}

/// What an export answered, as the tool output the later gates check, mask and record: a
/// resource's contents as `resource` blocks (their URIs its evidence); a prompt's messages'
/// contents as blocks, in order, with its description and each message's role in the
/// structured part (`{"description", "roles"}`), which the MCP server puts back together.
fn as_output(served: Served) -> wit::ToolOutput {
    match served {
        Served::Output(output) => output,
        Served::Contents(contents) => wit::ToolOutput {
            evidence_refs: contents.iter().map(|c| c.uri.clone()).collect(),
            content: contents.into_iter().map(wit::Content::Resource).collect(),
            structured: None,
        },
        Served::Prompt(prompt) => {
            let roles: Vec<&str> = (prompt.messages.iter())
                .map(|m| match m.role {
                    wit::Role::User => "user",
                    wit::Role::Assistant => "assistant",
                })
                .collect();
            let structured = serde_json::json!({
                "description": prompt.description,
                "roles": roles,
            });
            wit::ToolOutput {
                content: prompt.messages.into_iter().map(|m| m.content).collect(),
                structured: Some(structured.to_string()),
                evidence_refs: Vec::new(),
            }
        }
        // Completions are not governed calls (`Host::complete`).
        Served::Completion(_) => wit::ToolOutput {
            content: Vec::new(),
            structured: None,
            evidence_refs: Vec::new(),
        },
    }
}

/// An adapter that failed for want of a response (`unavailable`, retryable) right after the
/// gate refused its last request failed because of that refusal, and a retry meets the same
/// refusal: its error becomes the gate's, `EGRESS_DENIED`, not retryable, as the Rust and
/// Python SDKs report it themselves. JavaScript's `fetch` rejects a refused request and an
/// unreachable upstream with the same `TypeError`, so the JS SDK cannot tell them apart; the
/// host, which refused it, can.
///
/// Either way, an `EGRESS_DENIED` error then says which kind of refusal it was ([`refusal`]):
/// the setting that decides it, never the operator's grants, addresses or budgets.
fn refused_by_the_gate(error: &mut ErrorBody, egress: &[EgressAttempt]) {
    let Some(last) = egress.last().filter(|attempt| !attempt.allowed) else {
        return;
    };
    let gate_refused = error.kind == ErrorKind::Unavailable && error.retryable;
    if gate_refused || error.code == "EGRESS_DENIED" {
        let (message, remediation) = refusal(&last.code);
        *error = ErrorBody::new(ErrorKind::Unavailable, "EGRESS_DENIED", message, false)
            .with_remediation(remediation);
    }
}

/// What a caller is told of an egress refusal with `code` (an attempt's): the kind of refusal
/// and the setting that decides it.
fn refusal(code: &str) -> (&'static str, &'static str) {
    match code {
        "address_not_allowed" => (
            "the gateway does not allow this request: its destination is a loopback, private, \
             link-local or metadata address, which an egress grant reaches only when it lists \
             that address range in `allow_private`",
            "ask the operator to add the range to the grant's `allow_private`, or use a \
             public destination",
        ),
        "method_not_granted" => (
            "the gateway does not allow this request: the egress grant for its destination \
             does not allow this HTTP method",
            "ask the operator to add the method to the grant's `methods`",
        ),
        "approval_mode" => (
            "the gateway does not allow this request: a method that changes upstream state is \
             not allowed in a read-only call",
            "call a capability declared for writes, or ask the operator for a higher approval \
             mode",
        ),
        "cancelled" => (
            "the gateway does not allow this request: the caller cancelled the call",
            "nothing to do: the caller no longer waits for this call",
        ),
        "request_budget" | "time_budget" | "request_bytes_budget" => (
            "the gateway does not allow this request: the call's egress budget is spent",
            "make fewer or smaller requests per call, or ask the operator for a larger budget",
        ),
        _ => (
            "the gateway does not allow this request: no egress grant covers its destination",
            "ask the operator to grant this destination, or use a URL it grants",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(allowed: bool) -> EgressAttempt {
        EgressAttempt {
            method: "GET".to_owned(),
            destination: "https://api.example.com/admin".to_owned(),
            address: None,
            allowed,
            code: if allowed {
                "connect_failed"
            } else {
                "no_matching_grant"
            }
            .to_owned(),
            reason: String::new(),
            status: None,
            request_bytes: 0,
            response_bytes: 0,
            credentials: Vec::new(),
        }
    }

    fn unreachable() -> ErrorBody {
        ErrorBody::new(
            ErrorKind::Unavailable,
            "UPSTREAM_UNREACHABLE",
            "the request got no response",
            true,
        )
    }

    #[test]
    fn a_failure_after_the_gates_refusal_is_the_refusal() {
        let mut error = unreachable();
        refused_by_the_gate(&mut error, &[attempt(true), attempt(false)]);
        assert_eq!(
            (error.code.as_str(), error.retryable, error.kind),
            ("EGRESS_DENIED", false, ErrorKind::Unavailable)
        );
        assert!(
            error.message.contains("no egress grant covers"),
            "{}",
            error.message
        );
        // An SDK's own EGRESS_DENIED says which refusal it met: a loopback address names the
        // setting, and nothing of the operator's config.
        let mut error = ErrorBody::new(
            ErrorKind::Unavailable,
            "EGRESS_DENIED",
            "the egress gate refused the request",
            false,
        );
        let mut loopback = attempt(false);
        loopback.code = "address_not_allowed".to_owned();
        loopback.reason =
            "127.0.0.1 is loopback (127.0.0.0/8); grant it in allow_private".to_owned();
        refused_by_the_gate(&mut error, &[loopback]);
        assert!(
            error.message.contains("`allow_private`"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("127.0.0"), "{}", error.message);
        // An upstream that did not answer, after an allowed request, stays what the adapter
        // said; so does an adapter's own error, and a failure with no egress at all.
        for (egress, mut error) in [
            (vec![attempt(false), attempt(true)], unreachable()),
            (
                vec![attempt(false)],
                ErrorBody::new(ErrorKind::NotFound, "NO_ORDER", "no such order", false),
            ),
            (Vec::new(), unreachable()),
        ] {
            let before = error.clone();
            refused_by_the_gate(&mut error, &egress);
            assert_eq!(error, before);
        }
    }
}
