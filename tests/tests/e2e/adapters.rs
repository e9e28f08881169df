//! The first-party adapters through the host: content blocks, structured output, evidence,
//! structured errors, and the call context reaching the guest.

use gatehouse_host::model::{ApprovalMode, Principal, PrincipalKind};
use gatehouse_host::{ContentBlock, ErrorKind};
use gatehouse_host::{Host, OutcomeCode, Status, ToolCallEnvelope};
use gatehouse_tests::artifacts::{
    CONTRACT_0_1, CONTRACT_0_2_ADAPTER, CONTRACT_0_3_ADAPTER, ECHO, TEXTKIT,
};
use gatehouse_tests::host::HostBuilder;
use serde_json::json;

/// A host trusting the test publisher's `gatehouse.*` adapters; each test installs the one it
/// calls.
fn host() -> Host {
    HostBuilder::trusting(&["gatehouse.*"], &[]).build()
}

#[tokio::test]
async fn echo_returns_text_and_structured_output() {
    let host = host();
    host.install_adapter(&ECHO.signed()).unwrap();
    let result = gatehouse_tests::echo(&host, "héllo").await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok)
    );
    assert_eq!(
        result.content,
        vec![ContentBlock::Text {
            text: "héllo".to_owned()
        }]
    );
    assert_eq!(
        result.structured_content,
        Some(json!({ "message": "héllo", "length": 5 }))
    );
    assert_eq!(result.approval_mode_effective, Some(ApprovalMode::ReadOnly));
    assert!(result.usage.unwrap().fuel_consumed > 0);
}

#[tokio::test]
async fn bad_arguments_are_rejected_before_the_adapter_runs() {
    let host = host();
    host.install_adapter(&ECHO.signed()).unwrap();
    let result = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.echo.echo",
            json!({}),
        ))
        .await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Rejected, OutcomeCode::InvalidArguments),
        "{result:#?}"
    );
    assert!(result.usage.is_none(), "the adapter never ran");
    let error = result.error.unwrap();
    assert_eq!(
        (error.kind, error.code.as_str()),
        (ErrorKind::Validation, "INVALID_ARGUMENTS")
    );
    assert!(
        error.message.contains("message"),
        "names the missing field: {}",
        error.message
    );
}

#[tokio::test]
async fn verify_iban_returns_evidence_and_structured_errors() {
    let host = host();
    host.install_adapter(&TEXTKIT.signed()).unwrap();
    let ok = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.textkit.verify_iban",
            json!({ "iban": "GB82 WEST 1234 5698 7654 32" }),
        ))
        .await;
    assert_eq!(ok.status, Status::Ok, "{ok:#?}");
    assert_eq!(ok.structured_content.as_ref().unwrap()["valid"], true);
    assert_eq!(ok.evidence_refs, vec!["iso13616:mod97".to_owned()]);

    let bad = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.textkit.verify_iban",
            json!({ "iban": "12" }),
        ))
        .await;
    assert_eq!(bad.outcome, OutcomeCode::ToolError);
    let error = bad.error.unwrap();
    assert_eq!(
        (error.kind, error.code.as_str()),
        (ErrorKind::Validation, "MALFORMED_IBAN")
    );
    assert!(error.remediation.is_some());
}

#[tokio::test]
async fn render_badge_returns_an_svg_image_block() {
    let host = host();
    host.install_adapter(&TEXTKIT.signed()).unwrap();
    let result = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.textkit.render_badge",
            json!({ "label": "a", "value": "b" }),
        ))
        .await;
    match result.content.as_slice() {
        [ContentBlock::Image { data, mime_type }] => {
            assert_eq!(mime_type, "image/svg+xml");
            assert!(data.starts_with("PHN2Zy"), "base64 of `<svg`: {data}");
        }
        other => panic!("expected one image block, got {other:?}"),
    }
}

#[tokio::test]
async fn the_call_context_reaches_the_guest() {
    let host = host();
    host.install_adapter(&TEXTKIT.signed()).unwrap();
    let mut call = ToolCallEnvelope::new("acme", "gatehouse.textkit.describe_call", json!({}));
    call.idempotency_key = Some("ik_1".to_owned());
    call.principal_chain = vec![Principal {
        kind: PrincipalKind::User,
        id: "usr_1".to_owned(),
        tenant: "acme".to_owned(),
    }];
    let (id, trace) = (call.tool_call_id.clone(), call.trace_id.clone());
    let result = host.call(call).await;
    let seen = result.structured_content.unwrap();
    assert_eq!(seen["tool_call_id"], id);
    assert_eq!(seen["trace_id"], trace);
    assert_eq!(seen["tenant"], "acme");
    assert_eq!(seen["idempotency_key"], "ik_1");
    assert_eq!(seen["approval_mode"], "read_only");
    assert_eq!(
        seen["principals"],
        json!([{ "kind": "user", "id": "usr_1", "tenant": "acme" }])
    );
    assert_eq!(seen["has_skill_context"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_concurrently_from_spawned_tasks() {
    let host = std::sync::Arc::new(host());
    host.install_adapter(&ECHO.signed()).unwrap();
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let host = host.clone();
            tokio::spawn(async move {
                let message = format!("call {i}");
                let result = gatehouse_tests::echo(&host, &message).await;
                assert_eq!(result.structured_content.unwrap()["message"], message);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// A plugin built for the released contract `gatehouse:plugin@0.1.0` (before `call-context`
/// carried `upstream`), from that WIT as released, with wit-bindgen alone: the host links
/// 0.1.0 beside 0.2.0, so it installs and runs, gets the call context it was built for, and
/// its output and structured errors reach the caller as any adapter's.
#[tokio::test]
async fn an_adapter_built_for_contract_0_1_keeps_loading_and_running() {
    let host = HostBuilder::trusting(&["test.*"], &[]).build();
    host.install_adapter(&CONTRACT_0_1.signed())
        .expect("a 0.1.0 adapter installs");
    let mut call = ToolCallEnvelope::new("default", "test.contract-0-1.whoami", json!({ "x": 1 }));
    call.principal_chain = vec![Principal {
        kind: PrincipalKind::User,
        id: "usr_ada".to_owned(),
        tenant: "default".to_owned(),
    }];
    let result = host.call(call).await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    assert_eq!(
        result.content,
        vec![ContentBlock::Text {
            text: "built for 0.1.0, called by default".to_owned()
        }]
    );
    assert_eq!(
        result.structured_content,
        Some(json!({
            "tenant": "default",
            "principals": ["user:usr_ada@default"],
            "approval_mode": "read_only",
            "idempotency_key": null,
            "skills": null,
            "args": { "x": 1 },
        }))
    );
    assert_eq!(
        result.evidence_refs,
        [format!("contract-0-1:{}", result.tool_call_id)]
    );

    let result = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.contract-0-1.fail",
            json!({}),
        ))
        .await;
    assert_eq!(result.outcome, OutcomeCode::ToolError, "{result:#?}");
    let error = result.error.unwrap();
    assert_eq!(
        (
            error.kind,
            error.code.as_str(),
            error.message.as_str(),
            error.remediation.as_deref()
        ),
        (
            ErrorKind::Conflict,
            "CONTRACT_0_1_FAILS",
            "`fail` fails on purpose",
            Some("call `whoami` instead")
        )
    );
}

/// Adapters built for the released contracts 0.2.0 and 0.3.0, with wit-bindgen alone: each
/// installs, its `log` import at its version is linked, and it gets the call context, skills
/// text included.
#[tokio::test]
async fn adapters_built_for_contracts_0_2_and_0_3_keep_loading_and_running() {
    use gatehouse_host::config::{Skill, SkillScope};
    for (adapter, version) in [
        (&CONTRACT_0_2_ADAPTER, "0.2.0"),
        (&CONTRACT_0_3_ADAPTER, "0.3.0"),
    ] {
        let host = HostBuilder::trusting(&["test.*"], &[])
            .with(|c| {
                c.pipeline.skills = vec![Skill {
                    name: "tone".to_owned(),
                    scope: SkillScope::Global,
                    matches: String::new(),
                    priority: 0,
                    text: "Be brief.".to_owned(),
                }];
            })
            .build();
        host.install_adapter(&adapter.signed())
            .unwrap_or_else(|e| panic!("a {version} adapter installs: {e}"));
        let id = adapter.manifest().id().to_owned();
        let result = host
            .call(ToolCallEnvelope::new(
                "default",
                format!("{id}.whoami"),
                json!({}),
            ))
            .await;
        assert_eq!(
            (result.status, result.outcome),
            (Status::Ok, OutcomeCode::Ok),
            "{version}: {result:#?}"
        );
        assert_eq!(
            result.content,
            vec![ContentBlock::Text {
                text: format!("built for {version}, called by default with skills: Be brief.")
            }]
        );
    }
}
