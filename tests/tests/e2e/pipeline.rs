//! The governed call: real components driven through `Host::call`, one test per gate outcome,
//! each asserting the exact outcome code and status.

use gatehouse_host::ErrorKind;
use gatehouse_host::config::{ArgConstraint, MetaTool, PolicyBinding, PolicyDefault};
use gatehouse_host::envelope::POLICY_FAILED;
use gatehouse_host::model::Verdict;
use gatehouse_host::model::{ApprovalMode, Claims, Principal, PrincipalKind};
use gatehouse_host::{Host, HostConfig, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::artifacts::{
    BASELINE, CONTRACT_0_2, CONTRACT_0_3, CONTRACT_0_4, ECHO, LEDGER, POLICY_PROBE, REDACT,
};
use gatehouse_tests::{bind, config, grant};
use serde_json::{Value, json};

/// Tenant `acme` sees echo and ledger; tenant `globex` sees only echo.
fn base_config() -> HostConfig {
    let mut config = config(&["gatehouse.*", "test.*"], &["gatehouse.*", "test.*"]);
    config.pipeline.tools = vec![
        grant("gatehouse.echo.*", &["acme", "globex"]),
        grant("test.ledger.*", &["acme"]),
    ];
    config.pipeline.policy_default = PolicyDefault::Deny;
    config
}

/// A host with echo and ledger installed and the given policies bound and installed.
fn host_with(
    mut config: HostConfig,
    policies: &[(&gatehouse_tests::Artifact, PolicyBinding)],
) -> Host {
    config.pipeline.policies = policies.iter().map(|(_, b)| b.clone()).collect();
    let host = Host::new(config).expect("host builds");
    host.install_adapter(&ECHO.signed()).expect("echo installs");
    host.install_adapter(&LEDGER.signed())
        .expect("ledger installs");
    for (artifact, _) in policies {
        host.install_policy(&artifact.signed())
            .unwrap_or_else(|e| panic!("{} installs: {e}", artifact.name));
    }
    host
}

/// Baseline bound everywhere, allowing by default.
fn baseline_host(baseline_config: Value) -> Host {
    host_with(
        base_config(),
        &[(
            &BASELINE,
            bind("gatehouse.baseline", "*", 0, baseline_config),
        )],
    )
}

async fn call(host: &Host, tenant: &str, tool: &str, args: Value) -> ToolResultEnvelope {
    host.call(ToolCallEnvelope::new(tenant, tool, args)).await
}

fn transfer(amount: f64) -> ToolCallEnvelope {
    ToolCallEnvelope::new(
        "acme",
        "test.ledger.transfer",
        json!({ "amount": amount, "currency": "EUR", "note": "mail ann@example.com" }),
    )
    .with_idempotency_key("ik_1")
}

#[track_caller]
fn assert_outcome(result: &ToolResultEnvelope, status: Status, outcome: OutcomeCode) -> String {
    assert_eq!(
        (result.status, result.outcome),
        (status, outcome),
        "{result:#?}"
    );
    match status {
        Status::Ok => {
            assert!(result.error.is_none(), "{result:#?}");
            String::new()
        }
        Status::Failed | Status::Paused | Status::Rejected => {
            let error = result.error.as_ref().expect("a refusal carries an error");
            assert_eq!(error.code, outcome.as_str());
            error.message.clone()
        }
    }
}

#[tokio::test]
async fn an_allowed_call_runs_and_names_the_deciding_module() {
    let host = baseline_host(json!({}));
    let result = host.call(transfer(10.0)).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(
        result.structured_content.as_ref().unwrap()["transfer_id"],
        "tr_1"
    );
    let decision = result.policy_decision.as_ref().unwrap();
    assert_eq!(decision.verdict, Verdict::Allow);
    let module = decision.modules[0].module.as_ref().unwrap();
    assert_eq!(
        (module.id.as_str(), module.version.as_str()),
        ("gatehouse.baseline", "0.1.0")
    );
    assert!(module.digest.starts_with("sha256:"));
}

#[tokio::test]
async fn unknown_and_hidden_tools_are_indistinguishable() {
    let host = baseline_host(json!({}));
    let unknown = call(&host, "globex", "test.ledger.nope", json!({})).await;
    let hidden = call(&host, "globex", "test.ledger.bad_output", json!({})).await;
    assert_outcome(&unknown, Status::Rejected, OutcomeCode::UnknownCapability);
    assert_outcome(&hidden, Status::Rejected, OutcomeCode::UnknownCapability);
    let strip = |r: &ToolResultEnvelope| {
        let mut v = serde_json::to_value(r).unwrap();
        for key in ["tool_call_id", "trace_id", "capability_id"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v.to_string()
            .replace("test.ledger.nope", "T")
            .replace("test.ledger.bad_output", "T")
    };
    assert_eq!(strip(&unknown), strip(&hidden));
    assert!(unknown.adapter.is_none() && hidden.adapter.is_none());
    assert!(
        !host
            .visible_tools("globex")
            .contains(&"test.ledger.bad_output".to_owned())
    );
    assert!(
        host.visible_tools("acme")
            .contains(&"test.ledger.bad_output".to_owned())
    );
}

#[tokio::test]
async fn a_schema_violation_is_a_correctable_error_naming_the_field() {
    let host = baseline_host(json!({}));
    let result = call(
        &host,
        "acme",
        "test.ledger.transfer",
        json!({ "amount": "ten", "currency": "EUR" }),
    )
    .await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::InvalidArguments);
    assert_eq!(result.error.as_ref().unwrap().kind, ErrorKind::Validation);
    assert!(message.contains("`/amount`"), "{message}");
    assert!(
        result.policy_decision.is_none(),
        "no policy runs on invalid arguments"
    );
}

#[tokio::test]
async fn a_constraint_violation_names_the_argument() {
    let mut config = base_config();
    let mut constraints = std::collections::BTreeMap::new();
    constraints.insert(
        "amount".to_owned(),
        ArgConstraint {
            max: Some(500.into()),
            ..ArgConstraint::default()
        },
    );
    constraints.insert(
        "currency".to_owned(),
        ArgConstraint {
            allowed: Some(vec![json!("EUR")]),
            ..ArgConstraint::default()
        },
    );
    config.pipeline.tools[1].arg_constraints = constraints;
    let host = host_with(
        config,
        &[(&BASELINE, bind("gatehouse.baseline", "*", 0, json!({})))],
    );
    let result = host.call(transfer(501.0)).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::InvalidArguments);
    assert!(
        message.contains("argument `amount` must be a number <= 500"),
        "{message}"
    );
    let mut usd = transfer(5.0);
    usd.args["currency"] = json!("USD");
    let result = host.call(usd).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::InvalidArguments);
    assert!(
        message.contains("argument `currency` must be one of \"EUR\""),
        "{message}"
    );
    assert_outcome(
        &host.call(transfer(500.0)).await,
        Status::Ok,
        OutcomeCode::Ok,
    );
}

#[tokio::test]
async fn a_write_without_idempotency_key_is_refused() {
    let host = baseline_host(json!({}));
    let mut call = transfer(1.0);
    call.idempotency_key = None;
    let result = host.call(call).await;
    let message = assert_outcome(
        &result,
        Status::Rejected,
        OutcomeCode::IdempotencyKeyRequired,
    );
    assert!(message.contains("idempotency_key"), "{message}");
}

#[tokio::test]
async fn destructive_without_approval_or_rollback_metadata_is_refused() {
    let host = baseline_host(json!({}));
    let purge =
        ToolCallEnvelope::new("acme", "test.ledger.purge", json!({})).with_idempotency_key("ik_p");
    let result = host.call(purge).await;
    assert_outcome(&result, Status::Rejected, OutcomeCode::RollbackRequired);
    // With an approval gate declared, it pauses for approval instead of running.
    let close = ToolCallEnvelope::new("acme", "test.ledger.close_account", json!({}))
        .with_idempotency_key("ik_c");
    let result = host.call(close).await;
    let message = assert_outcome(&result, Status::Paused, OutcomeCode::ApprovalRequired);
    assert!(message.contains("GATE_ACCOUNT_CLOSURE"), "{message}");
    assert!(
        result.structured_content.is_none() && result.usage.is_none(),
        "nothing ran"
    );
}

#[tokio::test]
async fn a_policy_deny_blocks_the_call() {
    let host = baseline_host(json!({ "deny": { "acme": ["test.ledger.transfer"] } }));
    let result = host.call(transfer(1.0)).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
    assert!(message.contains("CAPABILITY_DENIED"), "{message}");
    assert!(result.usage.is_none(), "the adapter never ran");
}

#[tokio::test]
async fn a_policy_require_approval_pauses_the_call() {
    let host = baseline_host(json!({ "approval_thresholds": { "amount": 100 } }));
    let result = host.call(transfer(250.0)).await;
    let message = assert_outcome(&result, Status::Paused, OutcomeCode::ApprovalRequired);
    assert!(message.contains("AMOUNT_ABOVE_THRESHOLD"), "{message}");
    assert_eq!(
        result.policy_decision.as_ref().unwrap().verdict,
        Verdict::RequireApproval
    );
    assert!(result.usage.is_none(), "the adapter never ran");
}

#[tokio::test]
async fn composition_deny_beats_approval_beats_allow_and_abstain_falls_to_default() {
    let probe = |verdict: &str, order| {
        (
            &POLICY_PROBE,
            bind(
                "test.policy-probe",
                "*",
                order,
                json!({ "verdict": verdict }),
            ),
        )
    };
    // require-approval (probe) + allow (baseline) -> paused.
    let host = host_with(
        base_config(),
        &[
            (&BASELINE, bind("gatehouse.baseline", "*", 0, json!({}))),
            probe("require_approval", 1),
        ],
    );
    assert_outcome(
        &host.call(transfer(1.0)).await,
        Status::Paused,
        OutcomeCode::ApprovalRequired,
    );
    // Only abstain -> the operator default: deny unless set.
    let host = host_with(base_config(), &[probe("abstain", 0)]);
    let result = host.call(transfer(1.0)).await;
    assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
    assert!(result.policy_decision.as_ref().unwrap().default_applied);
    // The log's message and the caller's remediation name the fix, with the config's keys.
    let error = result.error.as_ref().unwrap();
    assert!(
        error.message.contains("`[[pipeline.policy]]`")
            && error.message.contains("`[pipeline] policy_default`"),
        "{error:?}"
    );
    let seen = gatehouse_host::caller_view(&result);
    let remediation = seen.error.as_ref().unwrap().remediation.as_deref().unwrap();
    for fix in [
        "nothing ran",
        "`[[pipeline.policy]]`",
        "gatehouse policy pack",
        "`[pipeline] policy_default = \"allow\"`",
    ] {
        assert!(remediation.contains(fix), "{fix} in {remediation}");
    }
    let mut allow_default = base_config();
    allow_default.pipeline.policy_default = PolicyDefault::Allow;
    let host = host_with(allow_default, &[probe("abstain", 0)]);
    assert_outcome(&host.call(transfer(1.0)).await, Status::Ok, OutcomeCode::Ok);
}

/// A policy built for the released contract 0.4.0 (before the `caller` interface), from that
/// WIT as released: it installs, its `log@0.4.0` import is linked, and it is passed the
/// action's claims, which 0.4.0 added.
#[tokio::test]
async fn a_policy_built_for_contract_0_4_keeps_loading_and_deciding() {
    let host = host_with(
        base_config(),
        &[(&CONTRACT_0_4, bind("test.contract-0-4", "*", 0, json!({})))],
    );
    let call = ToolCallEnvelope::new("acme", "gatehouse.echo.echo", json!({ "message": "hi" }))
        .with_claims(Claims {
            roles: vec!["refunds".into(), "audit".into()],
            groups: Vec::new(),
        });
    let result = host.call(call).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    let module = &result.policy_decision.as_ref().unwrap().modules[0];
    assert_eq!(
        (module.module_id.as_str(), module.verdict),
        ("test.contract-0-4", Verdict::Allow)
    );
    assert_eq!(module.reasons[0].message, "tenant=acme roles=refunds,audit");
}

/// A policy built for the released contract 0.3.0 (before the action carried `claims` and
/// `context.skills`), from that WIT as released, with wit-bindgen alone: it installs, is passed
/// the action it was built for, and the host carries out the obligations only 0.3.0 and later
/// can return (`mask-identifiers`, `mask-secrets`) on what the caller and the audit log get.
#[tokio::test]
async fn a_policy_built_for_contract_0_3_keeps_loading_and_its_masks_apply() {
    let host = host_with(
        base_config(),
        &[(&CONTRACT_0_3, bind("test.contract-0-3", "*", 0, json!({})))],
    );
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyOjcifQ.c2lnbmF0dXJl";
    let args = json!({ "message": format!("refund ord_123 for {jwt}") });
    let mut call =
        ToolCallEnvelope::new("acme", "gatehouse.echo.echo", args.clone()).with_claims(Claims {
            roles: vec!["refunds".into()],
            groups: Vec::new(),
        });
    call.principal_chain = vec![Principal {
        kind: PrincipalKind::User,
        id: "usr_ada".into(),
        tenant: "acme".into(),
    }];
    let result = host.call(call).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    let delivered = serde_json::to_string(&(&result.content, &result.structured_content)).unwrap();
    assert!(
        delivered.contains("refund [ORDER] for [SECRET:jwt]"),
        "{delivered}"
    );
    assert!(
        !delivered.contains("ord_123") && !delivered.contains(jwt),
        "{delivered}"
    );
    let decision = result.policy_decision.as_ref().unwrap();
    let module = &decision.modules[0];
    assert_eq!(
        (module.module_id.as_str(), module.verdict),
        ("test.contract-0-3", Verdict::Allow)
    );
    assert_eq!(
        module.reasons[0].message,
        format!(
            "tenant=acme tool=gatehouse.echo.echo caller=usr_ada mode=read_only args_bytes={}",
            args.to_string().len()
        )
    );
    // The audit log keeps the arguments masked too.
    let record = gatehouse_tests::audit_record(&host, &result.tool_call_id)
        .await
        .to_string();
    assert!(record.contains("[ORDER]"), "{record}");
    assert!(
        !record.contains("ord_123") && !record.contains(jwt),
        "{record}"
    );
}

/// A policy built for the released contract 0.2.0 (wit-bindgen alone) keeps loading: it is
/// passed the action as 0.2.0 knew it, its decision is carried out, and its `mask-pii`
/// obligation masks the result the caller gets and the audit log keeps.
#[tokio::test]
async fn a_policy_built_for_contract_0_2_keeps_loading_and_its_mask_applies() {
    let host = host_with(
        base_config(),
        &[(&CONTRACT_0_2, bind("test.contract-0-2", "*", 0, json!({})))],
    );
    let args = json!({ "message": "write to ann@example.com" });
    let result = host
        .call(ToolCallEnvelope::new("acme", "gatehouse.echo.echo", args))
        .await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    let delivered = serde_json::to_string(&(&result.content, &result.structured_content)).unwrap();
    assert!(!delivered.contains("ann@example.com"), "{delivered}");
    let module = &result.policy_decision.as_ref().unwrap().modules[0];
    assert_eq!(
        (module.module_id.as_str(), module.verdict),
        ("test.contract-0-2", Verdict::Allow)
    );
    assert_eq!(
        module.reasons[0].message,
        "tenant=acme tool=gatehouse.echo.echo mode=read_only"
    );
    let record = gatehouse_tests::audit_record(&host, &result.tool_call_id).await;
    let kept = record["result"].to_string();
    assert!(
        kept.contains("write to") && !kept.contains("ann@example.com"),
        "{kept}"
    );
}

#[tokio::test]
async fn a_trapping_or_looping_policy_fails_closed() {
    for behavior in ["trap", "loop"] {
        let host = host_with(
            base_config(),
            &[(
                &POLICY_PROBE,
                bind("test.policy-probe", "*", 0, json!({ "behavior": behavior })),
            )],
        );
        let result = host.call(transfer(1.0)).await;
        let message = assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
        assert!(message.contains(POLICY_FAILED), "{behavior}: {message}");
        let module = &result.policy_decision.as_ref().unwrap().modules[0];
        assert_eq!(module.verdict, Verdict::Deny);
        if behavior == "loop" {
            assert!(message.contains("ran out of fuel"), "{message}");
        }
    }
}

#[tokio::test]
async fn the_approval_mode_can_go_down_never_up() {
    // The caller asks for more than the declared maximum.
    let host = baseline_host(json!({}));
    let result = host
        .call(transfer(1.0).with_mode(ApprovalMode::Destructive))
        .await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
    assert!(message.contains("maximum of `delegated`"), "{message}");
    // A policy tries to raise the mode: ignored, recorded.
    let host = host_with(
        base_config(),
        &[(
            &POLICY_PROBE,
            bind(
                "test.policy-probe",
                "*",
                0,
                json!({ "effective_mode": "destructive" }),
            ),
        )],
    );
    let result = host.call(transfer(1.0)).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(
        result.approval_mode_effective,
        Some(ApprovalMode::Delegated)
    );
    assert!(result.policy_decision.as_ref().unwrap().modules[0].mode_raise_ignored);
    // A policy lowers it: honoured.
    let host = host_with(
        base_config(),
        &[(
            &POLICY_PROBE,
            bind(
                "test.policy-probe",
                "*",
                0,
                json!({ "effective_mode": "local_write" }),
            ),
        )],
    );
    let result = host.call(transfer(1.0)).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(
        result.approval_mode_effective,
        Some(ApprovalMode::LocalWrite)
    );
}

#[tokio::test]
async fn an_output_schema_mismatch_fails_verification() {
    let host = baseline_host(json!({}));
    let result = call(&host, "acme", "test.ledger.bad_output", json!({})).await;
    let message = assert_outcome(&result, Status::Failed, OutcomeCode::VerificationFailed);
    assert!(message.contains("`/count`"), "{message}");
    assert!(result.structured_content.is_none());
}

#[tokio::test]
async fn a_missing_evidence_key_is_evidence_missing() {
    let host = baseline_host(json!({}));
    let result = call(&host, "acme", "test.ledger.no_evidence", json!({})).await;
    let message = assert_outcome(&result, Status::Failed, OutcomeCode::EvidenceMissing);
    assert!(message.contains("`receipt_id`"), "{message}");
}

#[tokio::test]
async fn a_meta_tool_resolves_to_its_target_before_policy() {
    let mut config = base_config();
    config.pipeline.meta_tools = vec![MetaTool {
        name: "mcp_tool".to_owned(),
        target_arg: "tool".to_owned(),
        args_arg: "arguments".to_owned(),
    }];
    let host = host_with(
        config,
        &[(
            &BASELINE,
            bind(
                "gatehouse.baseline",
                "*",
                0,
                json!({ "deny": { "*": ["test.ledger.transfer"] } }),
            ),
        )],
    );
    let wrapped = ToolCallEnvelope::new(
        "acme",
        "mcp_tool",
        json!({ "tool": "test.ledger.transfer", "arguments": { "amount": 1, "currency": "EUR" } }),
    )
    .with_idempotency_key("ik_m");
    let result = host.call(wrapped).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
    assert!(message.contains("CAPABILITY_DENIED"), "{message}");
    assert_eq!(result.capability_id, "test.ledger.transfer");
    assert_eq!(result.resolved_from.as_deref(), Some("mcp_tool"));
    // An allowed target runs through the wrapper, validated as the target.
    let ok = call(
        &host,
        "acme",
        "mcp_tool",
        json!({ "tool": "gatehouse.echo.echo", "arguments": { "message": "hi" } }),
    )
    .await;
    assert_outcome(&ok, Status::Ok, OutcomeCode::Ok);
    let bad = call(
        &host,
        "acme",
        "mcp_tool",
        json!({ "tool": "gatehouse.echo.echo", "arguments": { "message": 5 } }),
    )
    .await;
    assert_outcome(&bad, Status::Rejected, OutcomeCode::InvalidArguments);
}

#[tokio::test]
async fn redact_masks_personal_data_in_results() {
    let host = host_with(
        base_config(),
        &[
            (&BASELINE, bind("gatehouse.baseline", "*", 0, json!({}))),
            (
                &REDACT,
                bind(
                    "gatehouse.redact",
                    "*",
                    1,
                    json!({ "pointers": ["/transfer_id"] }),
                ),
            ),
        ],
    );
    let result = host.call(transfer(1.0)).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    let structured = result.structured_content.as_ref().unwrap();
    assert_eq!(structured["note"], "mail [REDACTED]");
    assert_eq!(structured["transfer_id"], "[REDACTED]");
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(!text.contains("ann@example.com"), "{text}");
}

#[tokio::test]
async fn a_policy_config_that_breaks_the_config_schema_is_refused_at_install() {
    let mut config = base_config();
    config.pipeline.policies = vec![bind(
        "gatehouse.baseline",
        "*",
        0,
        json!({ "deny": "everything" }),
    )];
    let host = Host::new(config).unwrap();
    let err = host
        .install_policy(&BASELINE.signed())
        .unwrap_err()
        .to_string();
    assert!(err.contains("config_schema"), "{err}");
    assert!(host.policy_version("gatehouse.baseline").is_none());
}

/// The checked-in JSON Schemas (schemas/) accept real envelopes of every status.
#[tokio::test]
async fn envelopes_match_their_checked_in_schemas() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas/");
    let load = |name: &str| {
        let text = std::fs::read_to_string(format!("{root}{name}")).unwrap();
        let schema: Value = serde_json::from_str(&text).unwrap();
        jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let call_schema = load("tool_call_envelope.schema.json");
    let result_schema = load("tool_result_envelope.schema.json");
    let host = baseline_host(json!({ "approval_thresholds": { "amount": 100 } }));
    let mut calls = vec![
        transfer(1.0),
        transfer(1000.0),
        ToolCallEnvelope::new("acme", "test.ledger.bad_output", json!({})),
        ToolCallEnvelope::new("acme", "test.ledger.nope", json!({})),
    ];
    calls[0] = calls[0].clone().with_principal(Principal {
        kind: PrincipalKind::User,
        id: "usr_1".to_owned(),
        tenant: "acme".to_owned(),
    });
    let mut statuses = Vec::new();
    for call in calls {
        let value = serde_json::to_value(&call).unwrap();
        if let Err(e) = call_schema.validate(&value) {
            panic!("call envelope {value}: {e} at {}", e.instance_path());
        }
        let back: ToolCallEnvelope = serde_json::from_value(value).unwrap();
        assert_eq!(back, call);
        let result = host.call(call).await;
        statuses.push(result.status);
        let value = serde_json::to_value(&result).unwrap();
        if let Err(e) = result_schema.validate(&value) {
            panic!("result envelope {value}: {e} at {}", e.instance_path());
        }
    }
    assert_eq!(
        statuses,
        [Status::Ok, Status::Paused, Status::Failed, Status::Rejected]
    );
}

/// Skills reach the adapter as `skill-context`, resolved through the cascade; tools/list is
/// unchanged; secret-looking skills are refused when the host is built.
#[tokio::test]
async fn skills_reach_the_adapter_and_never_change_the_tool_list() {
    use gatehouse_host::SkillLevel as Level;
    use gatehouse_host::config::{Skill, SkillScope as Scope};
    let skill = |name: &str, scope, matches: &str, priority, text: &str| Skill {
        name: name.to_owned(),
        scope,
        matches: matches.to_owned(),
        priority,
        text: text.to_owned(),
    };
    let plain = baseline_host(json!({}));
    let mut config = base_config();
    config.pipeline.skills = vec![
        skill("house-style", Scope::Global, "", 0, "Be brief."),
        skill(
            "ledger",
            Scope::Tool,
            "test.ledger.*",
            0,
            "Amounts are in EUR.",
        ),
        skill("globex-only", Scope::Tenant, "globex", 0, "Globex rules."),
    ];
    let host = host_with(
        config.clone(),
        &[(&BASELINE, bind("gatehouse.baseline", "*", 0, json!({})))],
    );
    let result = host.call(transfer(1.0)).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(
        result.structured_content.as_ref().unwrap()["skill_context"],
        "Be brief.\n\nAmounts are in EUR."
    );
    let trace = host.resolve_skills("acme", "test.ledger.transfer", &[]);
    let levels: Vec<(Level, Option<&str>)> = trace
        .trace
        .iter()
        .map(|t| (t.level, t.skill.as_deref()))
        .collect();
    assert_eq!(
        levels,
        [
            (Level::Global, Some("house-style")),
            (Level::Tenant, None),
            (Level::Tool, Some("ledger")),
            (Level::User, None),
        ]
    );
    assert_eq!(host.visible_tools("acme"), plain.visible_tools("acme"));

    config.pipeline.skills.push(skill(
        "leaky",
        Scope::Global,
        "",
        0,
        "-----BEGIN PRIVATE KEY----- abc",
    ));
    let err = Host::new(config).unwrap_err().to_string();
    assert!(
        err.contains("skill `leaky` looks like it contains a secret"),
        "{err}"
    );
}

/// Issue 9, item 1: the caller's requested mode never lowers a rule keyed to risk.
#[tokio::test]
async fn a_caller_cannot_lower_the_mode_past_the_high_risk_rule() {
    let host = baseline_host(json!({}));
    // `purge` is destructive with neither gate nor rollback; asking for `network` used to run it.
    for mode in [ApprovalMode::ReadOnly, ApprovalMode::Network] {
        let purge = ToolCallEnvelope::new("acme", "test.ledger.purge", json!({}))
            .with_idempotency_key(format!("ik_purge_{mode}"))
            .with_mode(mode);
        let result = host.call(purge).await;
        assert_outcome(&result, Status::Rejected, OutcomeCode::RollbackRequired);
        assert!(result.usage.is_none(), "{mode}: the adapter never ran");
    }
}

#[tokio::test]
async fn a_caller_cannot_skip_an_approval_gate_by_asking_for_a_lower_mode() {
    let host = baseline_host(json!({}));
    // `close_account` is gated at destructive; asking for `local_write` used to skip the gate.
    let close = ToolCallEnvelope::new("acme", "test.ledger.close_account", json!({}))
        .with_idempotency_key("ik_close_low")
        .with_mode(ApprovalMode::LocalWrite);
    let result = host.call(close).await;
    let message = assert_outcome(&result, Status::Paused, OutcomeCode::ApprovalRequired);
    assert!(message.contains("GATE_ACCOUNT_CLOSURE"), "{message}");
    assert!(result.usage.is_none(), "the adapter never ran");
}

#[tokio::test]
async fn the_baseline_destructive_hours_see_the_declared_mode_not_the_requested_one() {
    // A window that excludes the current UTC hour.
    let hour = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
        % 24) as u8;
    let (start, end) = if hour >= 22 {
        (0, 1)
    } else {
        (hour + 1, hour + 2)
    };
    let host = baseline_host(json!({ "destructive_hours": { "start": start, "end": end } }));
    let close = ToolCallEnvelope::new("acme", "test.ledger.close_account", json!({}))
        .with_idempotency_key("ik_close_hours")
        .with_mode(ApprovalMode::Network);
    let result = host.call(close).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
    assert!(message.contains("OUTSIDE_DESTRUCTIVE_HOURS"), "{message}");
}

#[tokio::test]
async fn a_policy_may_lower_the_risk_mode_and_the_caller_narrows_the_run_mode() {
    // A policy lowering `purge` below destructive lifts the high-risk rule ...
    let host = host_with(
        base_config(),
        &[(
            &POLICY_PROBE,
            bind(
                "test.policy-probe",
                "*",
                0,
                json!({ "effective_mode": "network" }),
            ),
        )],
    );
    let purge = ToolCallEnvelope::new("acme", "test.ledger.purge", json!({}))
        .with_idempotency_key("ik_purge_lowered");
    let result = host.call(purge).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(result.approval_mode_effective, Some(ApprovalMode::Network));
    // ... and the caller's request narrows the mode the adapter runs at.
    let transfer = transfer(1.0).with_mode(ApprovalMode::LocalWrite);
    let result = baseline_host(json!({})).call(transfer).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(
        result.approval_mode_effective,
        Some(ApprovalMode::LocalWrite)
    );
}

// Issue 9, item 2: obligations cover everything that reaches the caller.

/// The adapter's own error: `TOOL_ERROR` with its code; returns the message.
#[track_caller]
fn tool_error<'a>(result: &'a ToolResultEnvelope, code: &str) -> &'a str {
    assert_eq!(
        (result.status, result.outcome),
        (Status::Failed, OutcomeCode::ToolError),
        "{result:#?}"
    );
    let error = result
        .error
        .as_ref()
        .expect("a failed call carries an error");
    assert_eq!(error.code, code);
    &error.message
}

fn redact_host(redact_config: Value) -> Host {
    host_with(
        base_config(),
        &[
            (&BASELINE, bind("gatehouse.baseline", "*", 0, json!({}))),
            (&REDACT, bind("gatehouse.redact", "*", 1, redact_config)),
        ],
    )
}

#[tokio::test]
async fn a_redacted_value_is_gone_from_text_resources_evidence_and_the_callers_record() {
    let host = redact_host(json!({ "pii": [], "pointers": ["/iban"] }));
    let result = call(&host, "acme", "test.ledger.statement", json!({})).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    assert_eq!(
        result.structured_content.as_ref().unwrap()["iban"],
        "[REDACTED]"
    );
    // The SDK repeats the JSON as a text block; the resource and the evidence name it too.
    let view = gatehouse_host::caller_view(&result);
    let whole = serde_json::to_string(&view).unwrap();
    assert!(!whole.contains("DE89370400440532013000"), "{whole}");
    assert!(whole.contains("account:[REDACTED]"), "{whole}");
}

#[tokio::test]
async fn personal_data_is_masked_in_resources_evidence_and_tool_errors() {
    let host = redact_host(json!({ "pii": ["email"] }));
    let result = call(&host, "acme", "test.ledger.statement", json!({})).await;
    assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
    let whole = serde_json::to_string(&gatehouse_host::caller_view(&result)).unwrap();
    assert!(!whole.contains("ann@example.com"), "{whole}");
    assert!(whole.contains("mailto:[REDACTED]"), "{whole}");

    // An adapter's error quoting an upstream body.
    let result = call(&host, "acme", "test.ledger.reject", json!({})).await;
    let message = tool_error(&result, "UPSTREAM_REJECTED");
    assert!(!message.contains("ann@example.com"), "{message}");
    assert!(
        message.contains("account of [REDACTED] is frozen"),
        "{message}"
    );
}

#[tokio::test]
async fn a_redaction_on_a_failed_call_withholds_the_tools_message() {
    let host = redact_host(json!({ "pii": [], "pointers": ["/holder"] }));
    let result = call(&host, "acme", "test.ledger.reject", json!({})).await;
    let message = tool_error(&result, "UPSTREAM_REJECTED");
    assert!(!message.contains("ann@example.com"), "{message}");
    assert!(message.contains("withheld"), "{message}");
}

#[tokio::test]
async fn an_invalid_pointer_in_a_policy_obligation_fails_closed() {
    // `~2` is no JSON pointer escape: the redaction cannot mean anything, so it cannot be
    // carried out; the call is denied rather than delivered unredacted.
    let host = redact_host(json!({ "pii": [], "pointers": ["/iban~2"] }));
    let result = call(&host, "acme", "test.ledger.statement", json!({})).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::PolicyBlocked);
    assert!(message.contains("not a JSON pointer"), "{message}");
    assert!(result.usage.is_none(), "the adapter never ran");
}

// Issue 9, item 5: per-tenant and per-tool rate budgets.

#[tokio::test]
async fn a_tenant_past_its_rate_budget_is_refused_and_others_are_not() {
    let mut config = base_config();
    config.pipeline.rate_limits = serde_json::from_value(json!([
        { "tenants": ["acme"], "tools": "gatehouse.echo.*", "calls": 2, "per_seconds": 60 },
        { "tenants": ["*"], "tools": "test.ledger.*", "calls": 1, "per_seconds": 60, "per": "tool" },
    ]))
    .unwrap();
    let host = host_with(
        config,
        &[(&BASELINE, bind("gatehouse.baseline", "*", 0, json!({})))],
    );
    for _ in 0..2 {
        let ok = call(
            &host,
            "acme",
            "gatehouse.echo.echo",
            json!({ "message": "hi" }),
        )
        .await;
        assert_outcome(&ok, Status::Ok, OutcomeCode::Ok);
    }
    let limited = call(
        &host,
        "acme",
        "gatehouse.echo.echo",
        json!({ "message": "hi" }),
    )
    .await;
    let message = assert_outcome(&limited, Status::Rejected, OutcomeCode::RateLimited);
    assert!(message.contains("2 calls per 60 s"), "{message}");
    assert!(message.contains("retry in"), "{message}");
    let error = limited.error.as_ref().unwrap();
    assert!(error.retryable);
    assert!(
        limited.usage.is_none() && limited.policy_decision.is_none(),
        "nothing ran"
    );
    // Another tenant's budget is its own.
    let other = call(
        &host,
        "globex",
        "gatehouse.echo.echo",
        json!({ "message": "hi" }),
    )
    .await;
    assert_outcome(&other, Status::Ok, OutcomeCode::Ok);
    // Per tool: one call to each ledger tool, the second to the same tool refused.
    let first = call(&host, "acme", "test.ledger.bad_output", json!({})).await;
    assert_eq!(first.outcome, OutcomeCode::VerificationFailed, "it ran");
    let other_tool = call(&host, "acme", "test.ledger.no_evidence", json!({})).await;
    assert_eq!(other_tool.outcome, OutcomeCode::EvidenceMissing, "it ran");
    let again = call(&host, "acme", "test.ledger.bad_output", json!({})).await;
    assert_outcome(&again, Status::Rejected, OutcomeCode::RateLimited);
}

// Issue 9, item 8: a policy's decision replays exactly: its clocks are stopped and its random
// numbers fixed.

#[tokio::test]
async fn a_policy_sees_no_clock_and_no_randomness() {
    let host = host_with(
        base_config(),
        &[(
            &POLICY_PROBE,
            bind(
                "test.policy-probe",
                "*",
                0,
                json!({ "report_entropy": true }),
            ),
        )],
    );
    let mut seen = Vec::new();
    for key in ["ik_e1", "ik_e2"] {
        let result = host.call(transfer(1.0).with_idempotency_key(key)).await;
        assert_outcome(&result, Status::Ok, OutcomeCode::Ok);
        let module = &result.policy_decision.as_ref().unwrap().modules[0];
        let reason = module.reasons.iter().find(|r| r.code == "ENTROPY").unwrap();
        seen.push(reason.message.clone());
    }
    assert!(seen[0].starts_with("clock=0 "), "{seen:?}");
    assert_eq!(seen[0], seen[1], "two evaluations differ");
}

// Issue 9, item 8: arg_constraints reach nested fields, patterns are anchored, integers
// compare exactly.

#[tokio::test]
async fn arg_constraints_are_anchored_exact_and_reach_nested_fields() {
    let mut config = base_config();
    config.pipeline.tools[1].arg_constraints = serde_json::from_value(json!({
        "amount": { "max": 9_007_199_254_740_992_u64 },
        "currency": { "pattern": "EUR|USD" },
    }))
    .unwrap();
    config
        .pipeline
        .tools
        .push(grant("test.egress-probe.*", &["acme"]));
    config.pipeline.tools[2].arg_constraints = serde_json::from_value(json!({
        "/requests/0/method": { "enum": ["GET"] },
    }))
    .unwrap();
    let host = host_with(
        config,
        &[(&BASELINE, bind("gatehouse.baseline", "*", 0, json!({})))],
    );
    host.install_adapter(&gatehouse_tests::artifacts::EGRESS_PROBE.signed())
        .unwrap();
    let transfer = |amount: Value, currency: &str, key: &str| {
        ToolCallEnvelope::new(
            "acme",
            "test.ledger.transfer",
            json!({ "amount": amount, "currency": currency }),
        )
        .with_idempotency_key(key)
    };
    // 2^53 + 1 is above 2^53, though both are the same f64.
    let result = host
        .call(transfer(json!(9_007_199_254_740_993_u64), "EUR", "ik_big"))
        .await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::InvalidArguments);
    assert!(message.contains("<= 9007199254740992"), "{message}");
    // A pattern matches the whole string, not a part of it.
    let result = host.call(transfer(json!(1), "XEURX", "ik_pat")).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::InvalidArguments);
    assert!(message.contains("`currency`"), "{message}");
    let ok = host.call(transfer(json!(1), "USD", "ik_ok")).await;
    assert_outcome(&ok, Status::Ok, OutcomeCode::Ok);
    // A nested field.
    let probe = |method: &str| {
        ToolCallEnvelope::new(
            "acme",
            "test.egress-probe.read",
            json!({ "requests": [{ "method": method, "url": "http://example.invalid/" }] }),
        )
    };
    let result = host.call(probe("DELETE")).await;
    let message = assert_outcome(&result, Status::Rejected, OutcomeCode::InvalidArguments);
    assert!(message.contains("/requests/0/method"), "{message}");
    assert_outcome(&host.call(probe("GET")).await, Status::Ok, OutcomeCode::Ok);
}
