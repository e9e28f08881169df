//! Gate 11, deliver: what a caller sees of a call. [`caller_view`] is a pure function from the
//! full [`ToolResultEnvelope`] (the operator's record: logs and the audit log keep it whole) to
//! the one a caller gets: outcome codes and model-useful messages, never the gateway's
//! internals.
//!
//! 1. kept: ids, the tool, status, outcome, approval mode and id, replay marker, the adapter's
//!    content, structured content and evidence refs (after obligations), the adapter that ran;
//! 2. dropped: the policy decision record (module digests, fuel, failure details), the egress
//!    attempts (internal addresses, resolver errors, config hints), the caller record (the
//!    caller saw its own asks; the record keeps why others were refused) and usage;
//! 3. rewritten: the error of an outcome whose message comes from the engine, the sandbox, the
//!    store or the verifier (traps and guest stderr, config keys, output values) gets a fixed
//!    message and remediation for that outcome; a policy denial lists the policies' reasons,
//!    with a failed module named but not its failure (a call the policies allowed and a host
//!    rule after them blocked keeps the rule's message).
//!
//! The pipeline records the full envelope before delivery; the MCP server and
//! [`crate::Host::call_for_caller`] deliver this view, a replayed result included.

use gatehouse_core::envelope::{OutcomeCode, ToolResultEnvelope};

use gatehouse_core::model::{POLICY_FAILED, Verdict};

/// The caller-facing view of `full` (see the module docs).
pub fn caller_view(full: &ToolResultEnvelope) -> ToolResultEnvelope {
    let mut view = full.clone();
    view.policy_decision = None;
    view.egress = Vec::new();
    view.caller = None;
    view.usage = None;
    let Some(error) = &mut view.error else {
        return view;
    };
    if let Some((message, remediation)) = fixed(full.outcome) {
        error.message = message.to_owned();
        error.remediation = remediation.map(str::to_owned);
    } else if full.outcome == OutcomeCode::PolicyBlocked
        && let Some(decision) = &full.policy_decision
        // A call the policies allowed was blocked by a host rule after them (a delegated call
        // above its delegator's mode): its own message says why.
        && decision.verdict != Verdict::Allow
    {
        let reasons: Vec<String> = decision
            .modules
            .iter()
            .flat_map(|module| {
                module.reasons.iter().map(|reason| {
                    if reason.code == POLICY_FAILED {
                        format!(
                            "{POLICY_FAILED}: policy `{}` failed, so the call is denied",
                            module.module_id
                        )
                    } else {
                        format!("{}: {}", reason.code, reason.message)
                    }
                })
            })
            .collect();
        error.message = if reasons.is_empty() {
            "no policy allowed this call".to_owned()
        } else {
            format!("policy denied the call: {}", reasons.join("; "))
        };
    }
    view
}

/// The message and remediation a caller gets for an outcome whose full message is internal.
fn fixed(outcome: OutcomeCode) -> Option<(&'static str, Option<&'static str>)> {
    use OutcomeCode as O;
    Some(match outcome {
        O::ToolTimeout => (
            "the tool did not finish within its compute or time budget",
            Some("retry later, with a smaller input if you can"),
        ),
        O::ToolMemoryLimit => (
            "the tool needed more memory than it is allowed",
            Some("use a smaller input"),
        ),
        O::ToolTrapped => (
            "the tool crashed",
            Some("do not retry the same input; report it to the gateway's operator"),
        ),
        O::ToolOutputTooLarge => (
            "the tool's output was larger than the gateway delivers",
            Some("ask for less data (paging, filters)"),
        ),
        O::GatewayBusy => (
            "the gateway is running as many tools as it may at once; the tool did not run",
            Some("retry shortly"),
        ),
        O::StoreUnavailable => (
            "the gateway could not record the call, so nothing ran",
            Some("retry shortly"),
        ),
        O::ConnectionUnavailable => (
            "the gateway could not get your account's token for this tool; nothing ran",
            Some("retry shortly; tell the gateway's operator if it persists"),
        ),
        O::InternalError => (
            "the gateway failed while handling the call",
            Some("retry later; report it to the gateway's operator if it persists"),
        ),
        O::VerificationFailed => (
            "the tool's output failed the gateway's checks (its output schema, or a policy obligation that could not be applied); it was withheld",
            Some("do not rely on this tool's result; report it to the gateway's operator"),
        ),
        O::Ok
        | O::IdentityInvalid
        | O::PolicyBlocked
        | O::ApprovalRequired
        | O::ConnectionRequired
        | O::RollbackRequired
        | O::EvidenceMissing
        | O::ToolError
        | O::UnknownCapability
        | O::InvalidArguments
        | O::IdempotencyKeyRequired
        | O::IdempotencyKeyInvalid
        | O::RateLimited
        | O::IdempotencyConflict
        | O::IdempotencyInFlight
        | O::IdempotencyIndeterminate
        | O::ApprovalRejected
        | O::ApprovalExpired
        | O::ApprovalMismatch => return None,
    })
}
