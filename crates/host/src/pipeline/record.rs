//! Gate 10, record: every call, whatever its status and outcome, leaves one audit entry — the
//! call, the normalized action the policies saw, and the result with its decision record
//! (module digests), approval id, egress attempts and outcome — appended to the hash-chained
//! log together with its key's result and its approval's execution, in one transaction. A
//! write-class call's record is durable before its result is delivered; a read-only call's is
//! queued.
//!
//! The record is stored lean (format 3 of [`gatehouse_store::audit::record`]): each id and the
//! arguments once, and nothing the rest of the entry restores. Arguments and results of a
//! capability that declares `sensitive = true` are kept as SHA-256 hashes in the audit entry,
//! never in clear; so are its adapter's asks to its caller, and a form's sensitive fields in
//! any capability's (the [caller gate](crate::caller) records them so).

use std::borrow::Cow;

use gatehouse_core::canonical::redacted;
use gatehouse_core::envelope::{
    CallerRecord, DecisionRecord, DelegatedBy, EgressAttempt, ModuleDecision, PluginRef, Protocol,
    Status, ToolCallEnvelope, ToolResultEnvelope, Usage,
};
use gatehouse_core::model::ActionRecord;
use gatehouse_core::model::label::FlowFacts;
use gatehouse_core::model::{
    ApprovalMode, CapabilityClass, Claims, ContentBlock, ErrorBody, Finding, Obligation, Operation,
    Principal, PrincipalKind, PriorAction, ShadowDecision, Verdict,
};
use gatehouse_store::audit::record::{CALL_ENVELOPE, LEAN, RESULT_ENVELOPE};
use gatehouse_store::{AuditEvent, CallRecord, IdempotencyKey, SessionWrite};
use serde::Serialize;
use serde_json::Value;

use super::obligations;

/// What gate 10 records about one call.
pub struct Facts<'a> {
    /// The call as received.
    pub call: &'a ToolCallEnvelope,
    /// The full result.
    pub result: &'a ToolResultEnvelope,
    /// The normalized action the policies evaluated, if the call got that far.
    pub action: Option<ActionRecord>,
    /// Whether the capability declared its arguments and results sensitive.
    pub sensitive: bool,
    /// The policy decision's `mask-secrets` and `mask-identifiers`, for the arguments kept.
    pub masks: &'a gatehouse_guardrails::Masks,
    /// The key this call claimed.
    pub claimed: Option<IdempotencyKey>,
    /// Whether the call stopped before anything could run (the key is released, not
    /// completed, so a retry runs).
    pub nothing_ran: bool,
    /// The approval this call executed.
    pub executes: Option<String>,
    /// The call's session, and the labels its result adds to it.
    pub session: Option<SessionWrite>,
    /// When the record is made, unix ms.
    pub at_ms: u64,
}

/// The call's record, ready for the store.
pub fn record(facts: Facts<'_>) -> CallRecord {
    let Facts {
        call,
        result,
        mut action,
        sensitive,
        masks,
        claimed,
        nothing_ran,
        executes,
        session,
        at_ms,
    } = facts;
    // The arguments as recorded: a sensitive capability's as their hash; otherwise with the
    // secrets and identifiers a policy asked to mask, masked.
    let args = if sensitive {
        Cow::Owned(redacted(&call.args))
    } else if masks.is_empty() {
        Cow::Borrowed(&call.args)
    } else {
        let mut args = call.args.clone();
        obligations::mask_arguments(masks, &mut args, action.as_mut().map(|a| &mut a.args));
        Cow::Owned(args)
    };
    if sensitive && let Some(action) = action.as_mut() {
        // `args` is JSON text: kept as the hash of that text as a JSON string.
        let hash = redacted(&Value::String(std::mem::take(&mut action.args)));
        action.args = hash.as_str().unwrap_or_default().to_owned();
    }
    // Serialized once, in the lean form (`state::audit::record`): the entry's text is hashed as
    // stored, so it only has to be deterministic, not canonical.
    let lean = Lean {
        v: LEAN,
        call: LeanCall::of(call, &args, &result.capability_id),
        action: action
            .as_ref()
            .map(|action| LeanAction::of(action, call, &args, result)),
        result: LeanResult::of(result, call, sensitive),
    };
    let record = serde_json::to_string(&lean).unwrap_or_else(|_| "null".to_owned());
    // Write-class calls carry a key; theirs, replays included, any touching an approval, and
    // any adding a label to its session (the caller's next call must be judged with it), are
    // committed before the result is delivered.
    let durable = call.idempotency_key.is_some()
        || claimed.is_some()
        || executes.is_some()
        || result.approval_id.is_some()
        || session.as_ref().is_some_and(|s| s.labels.is_some());
    let (releases, completes) = match claimed {
        Some(key) if nothing_ran => (Some(key), None),
        // What a repeat under the key replays: the result as it was delivered.
        Some(key) => (
            None,
            Some((key, serde_json::to_string(result).unwrap_or_default())),
        ),
        None => (None, None),
    };
    let executes = executes.filter(|_| completes.is_some());
    CallRecord {
        audit: AuditEvent {
            kind: "call".to_owned(),
            tool_call_id: Some(call.tool_call_id.clone()),
            tenant: Some(call.tenant_id.clone()),
            principal: call.principal_chain.last().map(|p| p.id.clone()),
            tool: Some(result.capability_id.clone()),
            outcome: Some(result.outcome.as_str().to_owned()),
            record,
            at_ms,
        },
        completes,
        releases,
        executes,
        durable,
        session,
    }
}

/// A call's record in format 3 (`state::audit::record`). Each part destructures its source
/// without `..`, so a field added to an envelope or the action does not compile until it is
/// recorded here.
#[derive(Serialize)]
struct Lean<'a> {
    v: u64,
    call: LeanCall<'a>,
    action: Option<LeanAction<'a>>,
    result: LeanResult<'a>,
}

/// The call envelope less its id and tenant (the entry's columns), its tool when the entry's
/// (`capability_id` of the result) is the same, its version when it is the one implied, and
/// each principal's tenant when it is the call's.
#[derive(Serialize)]
struct LeanCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    envelope_version: Option<&'a str>,
    trace_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    principal_chain: Vec<LeanPrincipal<'a>>,
    #[serde(skip_serializing_if = "Claims::is_empty")]
    claims: &'a Claims,
    #[serde(skip_serializing_if = "Option::is_none")]
    capability_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Operation::is_call_tool")]
    operation: Operation,
    args: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_mode_requested: Option<ApprovalMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delegated_by: Option<&'a DelegatedBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<Protocol>,
}

impl<'a> LeanCall<'a> {
    fn of(call: &'a ToolCallEnvelope, args: &'a Value, tool: &str) -> Self {
        let ToolCallEnvelope {
            envelope_version,
            tool_call_id: _,
            trace_id,
            session_id,
            tenant_id,
            principal_chain,
            claims,
            capability_id,
            operation,
            args: _,
            approval_mode_requested,
            idempotency_key,
            approval_id,
            delegated_by,
            protocol,
        } = call;
        Self {
            envelope_version: unless(envelope_version, CALL_ENVELOPE),
            trace_id,
            session_id: session_id.as_deref(),
            principal_chain: principal_chain
                .iter()
                .map(|principal| LeanPrincipal::of(principal, tenant_id))
                .collect(),
            claims,
            capability_id: unless(capability_id, tool),
            operation: *operation,
            args,
            approval_mode_requested: *approval_mode_requested,
            idempotency_key: idempotency_key.as_deref(),
            approval_id: approval_id.as_deref(),
            delegated_by: delegated_by.as_ref(),
            protocol: *protocol,
        }
    }
}

/// A link of the principal chain less its tenant when it is the call's.
#[derive(Serialize)]
struct LeanPrincipal<'a> {
    kind: PrincipalKind,
    id: &'a str,
    #[serde(rename = "tenant_id", skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
}

impl<'a> LeanPrincipal<'a> {
    fn of(principal: &'a Principal, call_tenant: &str) -> Self {
        let Principal { kind, id, tenant } = principal;
        Self {
            kind: *kind,
            id,
            tenant: unless(tenant, call_tenant),
        }
    }
}

/// The action less what the call states (its id, tenant, principals, claims and, unless a
/// meta-tool or a sensitive capability made them differ, arguments), its adapter when it is
/// the result's, the mode requested when it is the most the capability allows, and its empty
/// lists.
#[derive(Serialize)]
struct LeanAction<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter_id: Option<&'a str>,
    capability_id: &'a str,
    capability_class: CapabilityClass,
    approval_mode_max: ApprovalMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_mode_requested: Option<ApprovalMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    principals: Option<&'a [Principal]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    claims: Option<&'a Claims>,
    now_unix_ms: u64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    prior_actions: &'a [PriorAction],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    data_classification: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    skills: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    risk_signals: &'a [(String, f64)],
    #[serde(skip_serializing_if = "str::is_empty")]
    protocol: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    delegated_by: Option<&'a str>,
    #[serde(skip_serializing_if = "FlowFacts::is_empty")]
    flows: &'a FlowFacts,
}

impl<'a> LeanAction<'a> {
    fn of(
        action: &'a ActionRecord,
        call: &ToolCallEnvelope,
        args: &Value,
        result: &ToolResultEnvelope,
    ) -> Self {
        let ActionRecord {
            tool_call_id,
            adapter_id,
            capability_id,
            capability_class,
            approval_mode_max,
            approval_mode_requested,
            args: action_args,
            principals,
            tenant,
            claims,
            now_unix_ms,
            prior_actions,
            data_classification,
            skills,
            risk_signals,
            protocol,
            delegated_by,
            flows,
        } = action;
        Self {
            tool_call_id: unless(tool_call_id, &call.tool_call_id),
            adapter_id: match &result.adapter {
                Some(adapter) => unless(adapter_id, &adapter.id),
                None => Some(adapter_id),
            },
            capability_id,
            capability_class: *capability_class,
            approval_mode_max: *approval_mode_max,
            approval_mode_requested: (approval_mode_requested != approval_mode_max)
                .then_some(*approval_mode_requested),
            args: unless(action_args, &args.to_string()),
            principals: (principals != &call.principal_chain).then_some(principals),
            tenant: unless(tenant, &call.tenant_id),
            claims: (claims != &call.claims).then_some(claims),
            now_unix_ms: *now_unix_ms,
            prior_actions,
            data_classification,
            skills,
            risk_signals,
            protocol,
            delegated_by: delegated_by.as_deref(),
            flows,
        }
    }
}

/// The result envelope less its id, tool and outcome (the entry's columns), its trace id
/// (the call's), its version when it is the one implied, and its evidence when there is none.
/// A sensitive capability's content is kept as its hash.
#[derive(Serialize)]
struct LeanResult<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    envelope_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter: Option<&'a PluginRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved_from: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_mode_effective: Option<ApprovalMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replay_of: Option<&'a str>,
    status: Status,
    content: Shown<'a, Vec<ContentBlock>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_content: Option<Shown<'a, Value>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    evidence_refs: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy_decision: Option<LeanDecision<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    egress: &'a [EgressAttempt],
    #[serde(skip_serializing_if = "Option::is_none")]
    caller: Option<&'a CallerRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
}

impl<'a> LeanResult<'a> {
    fn of(result: &'a ToolResultEnvelope, call: &ToolCallEnvelope, sensitive: bool) -> Self {
        let ToolResultEnvelope {
            envelope_version,
            tool_call_id,
            trace_id,
            adapter,
            capability_id: _,
            resolved_from,
            approval_mode_effective,
            approval_id,
            replay_of,
            status,
            outcome: _,
            content,
            structured_content,
            evidence_refs,
            error,
            policy_decision,
            egress,
            caller,
            usage,
            // Signed over the entry this record becomes: it cannot be in it.
            receipt: _,
            // A capability until it is used: given to the caller, never recorded.
            connect_url: _,
        } = result;
        Self {
            envelope_version: unless(envelope_version, RESULT_ENVELOPE),
            tool_call_id: unless(tool_call_id, &call.tool_call_id),
            trace_id: unless(trace_id, &call.trace_id),
            adapter: adapter.as_ref(),
            resolved_from: resolved_from.as_deref(),
            approval_mode_effective: *approval_mode_effective,
            approval_id: approval_id.as_deref(),
            replay_of: replay_of.as_deref(),
            status: *status,
            content: Shown::of(content, sensitive),
            structured_content: structured_content
                .as_ref()
                .map(|value| Shown::of(value, sensitive)),
            evidence_refs,
            error: error.as_ref(),
            policy_decision: policy_decision
                .as_ref()
                .map(|decision| LeanDecision::of(decision, *approval_mode_effective)),
            egress,
            caller: caller.as_ref(),
            usage: usage.as_ref(),
        }
    }
}

/// The policy's decision record less its mode when it is the result's, and its modules when
/// none was bound.
#[derive(Serialize)]
struct LeanDecision<'a> {
    decision_id: &'a str,
    verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_mode_effective: Option<ApprovalMode>,
    default_applied: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    modules: &'a [ModuleDecision],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    obligations: &'a [Obligation],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    shadow: &'a [ShadowDecision],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    masked: &'a [Finding],
}

impl<'a> LeanDecision<'a> {
    fn of(decision: &'a DecisionRecord, result_mode: Option<ApprovalMode>) -> Self {
        let DecisionRecord {
            decision_id,
            verdict,
            approval_mode_effective,
            default_applied,
            modules,
            obligations,
            shadow,
            masked,
        } = decision;
        Self {
            decision_id,
            verdict: *verdict,
            approval_mode_effective: (Some(*approval_mode_effective) != result_mode)
                .then_some(*approval_mode_effective),
            default_applied: *default_applied,
            modules,
            obligations,
            shadow,
            masked,
        }
    }
}

/// A value in clear, or its hash.
#[derive(Serialize)]
#[serde(untagged)]
enum Shown<'a, T> {
    Clear(&'a T),
    Hidden(Value),
}

impl<'a, T: Serialize> Shown<'a, T> {
    fn of(value: &'a T, hidden: bool) -> Self {
        if hidden {
            Self::Hidden(redacted(
                &serde_json::to_value(value).unwrap_or(Value::Null),
            ))
        } else {
            Self::Clear(value)
        }
    }
}

/// `value`, unless it is `implied` (then the full form restores it).
fn unless<'a>(value: &'a str, implied: &str) -> Option<&'a str> {
    (value != implied).then_some(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use gatehouse_core::envelope::OutcomeCode;
    use gatehouse_core::model::PrincipalKind;
    use gatehouse_store::audit::record::full;

    fn call() -> ToolCallEnvelope {
        let mut call = ToolCallEnvelope::new("acme", "support.refund", json!({ "order": "o-1" }))
            .with_idempotency_key("k-1")
            .with_mode(ApprovalMode::Network)
            .with_claims(Claims {
                roles: vec!["refunds".into()],
                groups: vec!["eu".into()],
            });
        call.principal_chain = vec![Principal {
            kind: PrincipalKind::User,
            id: "usr_1".into(),
            tenant: "acme".into(),
        }];
        call.session_id = Some("s-1".into());
        call
    }

    fn result(call: &ToolCallEnvelope) -> ToolResultEnvelope {
        let mut result = ToolResultEnvelope::begin(call);
        result.adapter = Some(PluginRef {
            id: "support".into(),
            version: "1.0.0".into(),
            digest: format!("sha256:{}", "ab".repeat(32)),
            key_id: "k".into(),
            source: None,
        });
        result.status = Status::Failed;
        result.outcome = OutcomeCode::ToolError;
        result.content = vec![ContentBlock::Text { text: "t".into() }];
        result.structured_content = Some(json!({ "refund": 12.5 }));
        result.approval_id = Some("apr_1".into());
        result.usage = Some(Usage {
            fuel_consumed: 7,
            duration_ms: 1,
        });
        result
    }

    fn action(call: &ToolCallEnvelope, args: &Value) -> ActionRecord {
        ActionRecord {
            tool_call_id: call.tool_call_id.clone(),
            adapter_id: "support".into(),
            capability_id: "refund".into(),
            capability_class: CapabilityClass::Act,
            approval_mode_max: ApprovalMode::Delegated,
            approval_mode_requested: ApprovalMode::Network,
            args: args.to_string(),
            principals: call.principal_chain.clone(),
            tenant: call.tenant_id.clone(),
            claims: call.claims.clone(),
            now_unix_ms: 1_700_000_000_000,
            prior_actions: vec![PriorAction::tool("support.lookup")],
            data_classification: Vec::new(),
            skills: vec!["refund-tone".into()],
            risk_signals: vec![("velocity".into(), 0.25)],
            protocol: "mcp".into(),
            delegated_by: None,
            flows: FlowFacts::default(),
        }
    }

    static NO_MASKS: std::sync::LazyLock<gatehouse_guardrails::Masks> =
        std::sync::LazyLock::new(gatehouse_guardrails::Masks::new);

    fn facts<'a>(
        call: &'a ToolCallEnvelope,
        result: &'a ToolResultEnvelope,
        action: Option<ActionRecord>,
        sensitive: bool,
    ) -> Facts<'a> {
        Facts {
            call,
            result,
            action,
            sensitive,
            masks: &NO_MASKS,
            claimed: None,
            nothing_ran: false,
            executes: None,
            session: None,
            at_ms: 1,
        }
    }

    /// The full form, as format 1 stored it.
    fn format_1(call: &impl Serialize, action: &impl Serialize, result: &impl Serialize) -> Value {
        json!({ "call": call, "action": action, "result": result })
    }

    #[test]
    fn a_lean_record_states_each_id_once_and_reads_back_in_full() {
        let call = call();
        let result = result(&call);
        let action = action(&call, &call.args);
        let recorded = record(facts(&call, &result, Some(action.clone()), false));
        let stored = &recorded.audit.record;
        assert!(stored.starts_with(r#"{"v":3,"call":"#), "{stored}");
        for repeated in [&call.tool_call_id, &call.trace_id, "gatehouse.tool_"] {
            assert!(
                stored.matches(repeated).count() <= 1,
                "{repeated} in {stored}"
            );
        }
        assert!(!stored.contains(r#"\"order\""#), "args twice: {stored}");
        // The action's claims are the call's: stated once.
        assert_eq!(
            stored
                .matches(r#""claims":{"roles":["refunds"],"groups":["eu"]}"#)
                .count(),
            1,
            "{stored}"
        );
        assert!(stored.contains(r#""skills":["refund-tone"]"#), "{stored}");
        let expected = format_1(&call, &action, &result);
        assert_eq!(full(&recorded.audit), Some(expected));
    }

    /// A read-only call's record, as the demo's echo writes it: what repeats from call to call
    /// is left out, and restored.
    #[test]
    fn what_a_read_only_call_repeats_is_left_out_and_restored() {
        let mut call = ToolCallEnvelope::new("acme", "gatehouse.echo.echo", json!({ "m": "hi" }));
        call.principal_chain = vec![
            Principal {
                kind: PrincipalKind::User,
                id: "usr_1".into(),
                tenant: "acme".into(),
            },
            Principal {
                kind: PrincipalKind::Agent,
                id: "agent_1".into(),
                tenant: "partner".into(),
            },
        ];
        let mut result = result(&call);
        result.approval_id = None;
        result.approval_mode_effective = Some(ApprovalMode::ReadOnly);
        result.policy_decision = Some(DecisionRecord {
            decision_id: "pol_1".into(),
            verdict: Verdict::Allow,
            approval_mode_effective: ApprovalMode::ReadOnly,
            default_applied: true,
            modules: Vec::new(),
            obligations: Vec::new(),
            shadow: Vec::new(),
            masked: Vec::new(),
        });
        let mut action = action(&call, &call.args);
        action.approval_mode_max = ApprovalMode::ReadOnly;
        action.approval_mode_requested = ApprovalMode::ReadOnly;
        action.prior_actions.clear();
        action.skills.clear();
        action.risk_signals.clear();
        let recorded = record(facts(&call, &result, Some(action.clone()), false));
        let stored = &recorded.audit.record;
        for left_out in [
            "adapter_id",
            "approval_mode_requested",
            "prior_actions",
            "data_classification",
            "skills",
            "claims",
            "risk_signals",
            "evidence_refs",
            "modules",
        ] {
            assert!(!stored.contains(left_out), "{left_out} in {stored}");
        }
        assert_eq!(stored.matches("read_only").count(), 2, "{stored}");
        // The principal of the call's tenant loses its tenant; the other keeps it.
        assert_eq!(stored.matches("tenant_id").count(), 1, "{stored}");
        assert!(stored.contains(r#""tenant_id":"partner""#), "{stored}");
        assert_eq!(
            full(&recorded.audit),
            Some(format_1(&call, &action, &result))
        );
    }

    #[test]
    fn what_differs_from_what_the_rules_restore_is_kept() {
        let call = call();
        let mut result = result(&call);
        result.approval_mode_effective = Some(ApprovalMode::Network);
        result.evidence_refs = vec!["ev_1".into()];
        result.policy_decision = Some(DecisionRecord {
            decision_id: "pol_1".into(),
            verdict: Verdict::RequireApproval,
            approval_mode_effective: ApprovalMode::Delegated,
            default_applied: false,
            modules: vec![ModuleDecision {
                module: None,
                module_id: "baseline".into(),
                verdict: Verdict::RequireApproval,
                effective_mode: Some(ApprovalMode::Delegated),
                mode_raise_ignored: false,
                reasons: Vec::new(),
                evidence_refs: Vec::new(),
                fuel_consumed: 3,
            }],
            obligations: Vec::new(),
            shadow: Vec::new(),
            masked: Vec::new(),
        });
        let mut action = action(&call, &call.args);
        action.adapter_id = "support-v2".into();
        action.data_classification = vec!["pii".into()];
        action.claims.groups.clear();
        let recorded = record(facts(&call, &result, Some(action.clone()), false));
        let stored = &recorded.audit.record;
        for kept in [
            r#""adapter_id":"support-v2""#,
            r#""approval_mode_requested":"network""#,
            r#""data_classification":["pii"]"#,
            r#""claims":{"roles":["refunds"]}"#,
            r#""evidence_refs":["ev_1"]"#,
            r#""approval_mode_effective":"delegated""#,
        ] {
            assert!(stored.contains(kept), "{kept} not in {stored}");
        }
        assert_eq!(
            full(&recorded.audit),
            Some(format_1(&call, &action, &result))
        );
        // A result without an adapter (refused before one was chosen) keeps the action's.
        result.adapter = None;
        action.adapter_id = "support".into();
        let recorded = record(facts(&call, &result, Some(action.clone()), false));
        assert!(recorded.audit.record.contains(r#""adapter_id":"support""#));
        assert_eq!(
            full(&recorded.audit),
            Some(format_1(&call, &action, &result))
        );
    }

    /// An echo call's record as gatehouse wrote it in format 2, which kept what format 3
    /// leaves out: read back in full, unchanged.
    #[test]
    fn records_of_format_2_read_back_in_full() {
        let stored = r#"{"v":2,"call":{"trace_id":"c6f2082f2492d2dcc25ffd91997826ab","principal_chain":[{"kind":"agent","id":"anonymous","tenant_id":"default"}],"args":{"message":"hello"}},"action":{"adapter_id":"gatehouse.echo","capability_id":"echo","capability_class":"observe","approval_mode_max":"read_only","approval_mode_requested":"read_only","now_unix_ms":1795703245911,"prior_actions":[],"data_classification":[],"risk_signals":[]},"result":{"adapter":{"id":"gatehouse.echo","version":"0.1.0","digest":"sha256:331fa7a1413ecfd46c537a35b52174906ed3f72f6d4be83e856e02ddf5ebc21f","key_id":"gatehouse-demo"},"approval_mode_effective":"read_only","status":"ok","content":[{"type":"text","text":"hello"}],"structured_content":{"length":5,"message":"hello"},"evidence_refs":[],"policy_decision":{"decision_id":"pol_2f8b40d8ee20bb6b","verdict":"allow","approval_mode_effective":"read_only","default_applied":true,"modules":[]},"usage":{"fuel_consumed":16940,"duration_ms":0}}}"#;
        let event = AuditEvent {
            kind: "call".into(),
            tool_call_id: Some("call_01a218410c57981663303cb8".into()),
            tenant: Some("default".into()),
            principal: Some("anonymous".into()),
            tool: Some("gatehouse.echo.echo".into()),
            outcome: Some("OK".into()),
            record: stored.into(),
            at_ms: 1,
        };
        let principals = json!([{ "kind": "agent", "id": "anonymous", "tenant_id": "default" }]);
        let expected = json!({
            "call": {
                "envelope_version": "gatehouse.tool_call.v1",
                "tool_call_id": "call_01a218410c57981663303cb8",
                "trace_id": "c6f2082f2492d2dcc25ffd91997826ab",
                "tenant_id": "default",
                "principal_chain": principals,
                "capability_id": "gatehouse.echo.echo",
                "args": { "message": "hello" },
            },
            "action": {
                "tool_call_id": "call_01a218410c57981663303cb8",
                "adapter_id": "gatehouse.echo",
                "capability_id": "echo",
                "capability_class": "observe",
                "approval_mode_max": "read_only",
                "approval_mode_requested": "read_only",
                "args": r#"{"message":"hello"}"#,
                "principals": principals,
                "tenant": "default",
                "claims": {},
                "now_unix_ms": 1_795_703_245_911_u64,
                "prior_actions": [],
                "data_classification": [],
                "skills": [],
                "risk_signals": [],
            },
            "result": {
                "envelope_version": "gatehouse.tool_result.v1",
                "tool_call_id": "call_01a218410c57981663303cb8",
                "trace_id": "c6f2082f2492d2dcc25ffd91997826ab",
                "adapter": {
                    "id": "gatehouse.echo",
                    "version": "0.1.0",
                    "digest": "sha256:331fa7a1413ecfd46c537a35b52174906ed3f72f6d4be83e856e02ddf5ebc21f",
                    "key_id": "gatehouse-demo",
                },
                "capability_id": "gatehouse.echo.echo",
                "approval_mode_effective": "read_only",
                "status": "ok",
                "outcome": "OK",
                "content": [{ "type": "text", "text": "hello" }],
                "structured_content": { "length": 5, "message": "hello" },
                "evidence_refs": [],
                "policy_decision": {
                    "decision_id": "pol_2f8b40d8ee20bb6b",
                    "verdict": "allow",
                    "approval_mode_effective": "read_only",
                    "default_applied": true,
                    "modules": [],
                },
                "usage": { "fuel_consumed": 16940, "duration_ms": 0 },
            },
        });
        assert_eq!(full(&event), Some(expected));
    }

    #[test]
    fn what_differs_from_the_call_is_kept() {
        // A meta-tool: the call names the meta-tool, the action has the inner arguments.
        let mut call = call();
        call.capability_id = "run_tool".into();
        call.args = json!({ "tool": "support.refund", "args": { "order": "o-1" } });
        call.trace_id = "0".repeat(32);
        let mut result = result(&call);
        result.trace_id = "1".repeat(32);
        result.capability_id = "support.refund".into();
        result.resolved_from = Some("run_tool".into());
        let mut action = action(&call, &json!({ "order": "o-1" }));
        action.principals.clear();
        let recorded = record(facts(&call, &result, Some(action.clone()), false));
        let expected = format_1(&call, &action, &result);
        assert_eq!(full(&recorded.audit), Some(expected));
    }

    #[test]
    fn a_call_refused_before_the_policy_gate_has_no_action() {
        let call = ToolCallEnvelope::new("acme", "nope", json!({}));
        let mut result = ToolResultEnvelope::begin(&call);
        result.status = Status::Rejected;
        result.outcome = OutcomeCode::UnknownCapability;
        let recorded = record(facts(&call, &result, None, false));
        let expected = format_1(&call, &Value::Null, &result);
        assert_eq!(full(&recorded.audit), Some(expected));
    }

    #[test]
    fn a_sensitive_capability_keeps_hashes_of_its_arguments_and_results() {
        let call = call();
        let result = result(&call);
        let action = action(&call, &call.args);
        let recorded = record(facts(&call, &result, Some(action.clone()), true));
        let stored = &recorded.audit.record;
        for secret in ["o-1", "12.5", r#""t""#] {
            assert!(!stored.contains(secret), "{secret} in {stored}");
        }
        let mut call_json = serde_json::to_value(&call).unwrap();
        call_json["args"] = redacted(&call.args);
        let mut action_json = serde_json::to_value(&action).unwrap();
        action_json["args"] = redacted(&Value::String(action.args.clone()));
        let mut result_json = serde_json::to_value(&result).unwrap();
        result_json["content"] = redacted(&result_json["content"]);
        result_json["structured_content"] = redacted(&result_json["structured_content"]);
        assert_eq!(
            full(&recorded.audit),
            Some(format_1(&call_json, &action_json, &result_json))
        );
    }

    #[test]
    fn records_of_the_first_format_read_as_stored() {
        let call = call();
        let result = result(&call);
        let mut recorded = record(facts(&call, &result, None, false));
        let stored = format_1(&call, &Value::Null, &result);
        recorded.audit.record = stored.to_string();
        assert_eq!(full(&recorded.audit), Some(stored));
        // Only a call's record is read as format 2.
        let plugin = json!({ "v": 2, "action": { "x": 1 }, "result": {} });
        recorded.audit.kind = "plugin".to_owned();
        recorded.audit.record = plugin.to_string();
        assert_eq!(full(&recorded.audit), Some(plugin));
    }
}
