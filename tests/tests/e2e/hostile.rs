//! Hostile plugins: each is stopped with its exact outcome code, and the same host serves a
//! normal call right after.

use gatehouse_host::ErrorKind;
use gatehouse_host::PluginRef;
use gatehouse_host::{Host, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::artifacts::{
    AMBIENT_PROBE, ECHO, EGRESS_PROBE, INFINITE_LOOP, LEDGER, MEMORY_BOMB, OVERSIZED_OUTPUT, PANIC,
    POLICY_PROBE, RECURSION, TEST_PROGRAMS, WRONG_WORLD,
};
use gatehouse_tests::{Artifact, config, glob};
use serde_json::json;

fn host() -> Host {
    Host::new(config(&["gatehouse.*", "test.*"], &[])).expect("host builds")
}

fn load(host: &Host, artifact: Artifact) -> PluginRef {
    host.install_adapter(&artifact.signed())
        .unwrap_or_else(|e| panic!("{} loads: {e}", artifact.name))
}

async fn run(host: &Host, adapter: &PluginRef, args: serde_json::Value) -> ToolResultEnvelope {
    host.call(ToolCallEnvelope::new(
        "default",
        format!("{}.run", adapter.id),
        args,
    ))
    .await
}

/// After any failure, the host still serves a normal call.
async fn assert_echo_still_works(host: &Host) {
    load(host, ECHO);
    let result = gatehouse_tests::echo(host, "still here").await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    assert_eq!(
        result.structured_content,
        Some(json!({ "message": "still here", "length": 10 }))
    );
}

fn assert_failed(result: &ToolResultEnvelope, outcome: OutcomeCode, kind: ErrorKind) -> &str {
    assert_eq!(result.status, Status::Failed, "{result:#?}");
    assert_eq!(result.outcome, outcome, "{result:#?}");
    let error = result
        .error
        .as_ref()
        .expect("a failed result carries an error");
    assert_eq!(error.kind, kind, "{result:#?}");
    assert_eq!(error.code, outcome.as_str());
    assert!(result.content.is_empty() && result.structured_content.is_none());
    &error.message
}

#[tokio::test]
async fn an_infinite_loop_runs_out_of_fuel() {
    let host = host();
    let adapter = load(&host, INFINITE_LOOP);
    let result = run(&host, &adapter, json!({})).await;
    let message = assert_failed(&result, OutcomeCode::ToolTimeout, ErrorKind::Timeout);
    assert!(
        message.contains("ran out of fuel after 200000000 units"),
        "{message}"
    );
    assert_eq!(result.usage.as_ref().unwrap().fuel_consumed, 200_000_000);
    assert!(!result.error.as_ref().unwrap().retryable);
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn an_infinite_loop_with_ample_fuel_hits_the_deadline() {
    let mut config = config(&["gatehouse.*", "test.*"], &[]);
    config.sandbox.fuel = u64::MAX / 2;
    config.sandbox.timeout_ms = 300;
    let host = Host::new(config).unwrap();
    let adapter = load(&host, INFINITE_LOOP);
    let result = run(&host, &adapter, json!({})).await;
    let message = assert_failed(&result, OutcomeCode::ToolTimeout, ErrorKind::Timeout);
    assert!(message.contains("300ms deadline"), "{message}");
    assert!(result.error.as_ref().unwrap().retryable);
    let ms = result.usage.as_ref().unwrap().duration_ms;
    assert!((300..5_000).contains(&ms), "stopped after {ms}ms");
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_limit() {
    let host = host();
    let adapter = load(&host, MEMORY_BOMB);
    let result = run(&host, &adapter, json!({})).await;
    let message = assert_failed(&result, OutcomeCode::ToolMemoryLimit, ErrorKind::Limit);
    assert!(
        message.contains("memory limit of 33554432 bytes exceeded"),
        "{message}"
    );
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn unbounded_recursion_traps_with_stack_overflow() {
    let host = host();
    let adapter = load(&host, RECURSION);
    let result = run(&host, &adapter, json!({})).await;
    let message = assert_failed(&result, OutcomeCode::ToolTrapped, ErrorKind::Internal);
    assert!(message.contains("call stack exhausted"), "{message}");
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn a_panic_traps_and_reports_the_panic_message() {
    let host = host();
    let adapter = load(&host, PANIC);
    let result = run(&host, &adapter, json!({})).await;
    let message = assert_failed(&result, OutcomeCode::ToolTrapped, ErrorKind::Internal);
    assert!(message.contains("unreachable"), "{message}");
    assert!(
        message.contains("panic plugin: deliberate panic"),
        "{message}"
    );
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn oversized_output_is_refused() {
    let host = host();
    let adapter = load(&host, OVERSIZED_OUTPUT);
    let result = run(&host, &adapter, json!({ "bytes": 1_000_000 })).await;
    let message = assert_failed(&result, OutcomeCode::ToolOutputTooLarge, ErrorKind::Limit);
    assert!(
        message.contains("returned 1000000 bytes of output; the limit is 262144"),
        "{message}"
    );
    // Just under the limit passes: the cap is exact, not approximate.
    let result = run(&host, &adapter, json!({ "bytes": 262_144 })).await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn a_component_for_the_wrong_world_is_refused_at_load() {
    let host = host();
    let err = host
        .load_adapter(&WRONG_WORLD.signed())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "the component does not implement the `adapter` world of gatehouse:plugin@0.1.0"
        ),
        "{err}"
    );
    assert!(err.contains("invoke"), "names the missing export: {err}");
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn many_failures_in_a_row_do_not_exhaust_the_pool() {
    // The pool has 16 slots; a leaked instance per failure would run it dry.
    let host = host();
    let adapter = load(&host, PANIC);
    for _ in 0..40 {
        let result = run(&host, &adapter, json!({})).await;
        assert_eq!(result.outcome, OutcomeCode::ToolTrapped);
    }
    assert_echo_still_works(&host).await;
}

/// A policy that loops past its deadline denies the call (fail closed); trap and fuel
/// exhaustion are in tests/pipeline.rs.
#[tokio::test]
async fn a_policy_that_hits_its_deadline_denies() {
    let mut config = config(&["gatehouse.*"], &["test.*"]);
    config.sandbox.fuel = u64::MAX / 2;
    config.sandbox.timeout_ms = 300;
    config.pipeline.policies = vec![gatehouse_host::config::PolicyBinding {
        module: "test.policy-probe".to_owned(),
        tenants: ["*"].into_iter().collect(),
        tools: vec![glob("*")],
        order: 0,
        config: json!({ "behavior": "loop" }),
    }];
    let host = Host::new(config).unwrap();
    load(&host, ECHO);
    host.install_policy(&POLICY_PROBE.signed()).unwrap();
    let result = gatehouse_tests::echo(&host, "m").await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Rejected, OutcomeCode::PolicyBlocked),
        "{result:#?}"
    );
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("300ms deadline"), "{message}");
    assert!(result.usage.is_none(), "the adapter never ran");
}

#[test]
fn every_test_program_has_a_test_here() {
    let covered = [
        AMBIENT_PROBE.name,
        // Not hostile: the pipeline's test adapter, driven by tests/pipeline.rs.
        LEDGER.name,
        POLICY_PROBE.name,
        INFINITE_LOOP.name,
        MEMORY_BOMB.name,
        RECURSION.name,
        PANIC.name,
        OVERSIZED_OUTPUT.name,
        WRONG_WORLD.name,
        // Driven by tests/egress.rs.
        EGRESS_PROBE.name,
    ];
    for program in TEST_PROGRAMS {
        assert!(
            covered.contains(program),
            "tests/plugins/{program} has no test in hostile.rs or egress.rs"
        );
    }
}

#[tokio::test]
async fn a_plugin_has_no_environment_files_sockets_or_egress() {
    let host = host();
    let adapter = load(&host, AMBIENT_PROBE);
    let result = run(&host, &adapter, json!({})).await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    let seen = result.structured_content.unwrap();
    assert_eq!(seen["env_vars"], 0, "{seen:#}");
    assert_eq!(seen["args"], 0, "{seen:#}");
    for attempt in [
        "read_root_dir",
        "read_passwd",
        "write_tmp",
        "tcp_connect",
        "udp_bind",
    ] {
        let got = seen[attempt].as_str().unwrap();
        assert!(got.starts_with("error: "), "{attempt} must fail, got {got}");
    }
    assert_eq!(
        seen["http_get"], "error: ErrorCode::HttpRequestDenied",
        "{seen:#}"
    );
    assert_eq!(result.egress.len(), 1, "the denied attempt is recorded");
    assert_eq!(
        (result.egress[0].method.as_str(), result.egress[0].allowed),
        ("GET", false)
    );
    assert_eq!(result.egress[0].destination, "http://example.com:80/");
    assert_eq!(result.egress[0].code, "no_matching_grant");
}
