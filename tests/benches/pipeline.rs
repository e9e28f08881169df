//! Cost of the governed call, gate by gate: each case ends at a later gate, so the difference
//! between consecutive cases is the cost of that gate. Echo adapter + the baseline policy.
//!
//! Run: `cargo bench -p gatehouse-tests --bench pipeline`

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_host::config::PolicyDefault;
use gatehouse_host::model::ApprovalMode;
use gatehouse_host::{Host, OutcomeCode, ToolCallEnvelope};
use gatehouse_tests::artifacts::{BASELINE, ECHO};
use gatehouse_tests::config;
use serde_json::{Value, json};

fn host(baseline_config: Value) -> Host {
    let mut config = config(&["gatehouse.*"], &["gatehouse.*"]);
    config.sandbox.max_concurrent_calls = 64;
    config.pipeline.policy_default = PolicyDefault::Deny;
    config.pipeline.policies = vec![gatehouse_tests::bind(
        "gatehouse.baseline",
        "*",
        0,
        baseline_config,
    )];
    let host = Host::new(config).expect("host builds");
    host.install_adapter(&ECHO.signed()).expect("echo installs");
    host.install_policy(&BASELINE.signed())
        .expect("baseline installs");
    host
}

fn gates(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let allow = host(json!({}));
    let deny = host(json!({ "deny": { "*": ["gatehouse.echo.echo"] } }));
    let echo = |args: Value| ToolCallEnvelope::new("default", "gatehouse.echo.echo", args);
    let cases: [(&str, &Host, ToolCallEnvelope, OutcomeCode); 5] = [
        (
            "1_normalize_unknown",
            &allow,
            ToolCallEnvelope::new("default", "gatehouse.echo.nope", json!({})),
            OutcomeCode::UnknownCapability,
        ),
        (
            "2_validate_invalid",
            &allow,
            echo(json!({ "message": 5 })),
            OutcomeCode::InvalidArguments,
        ),
        (
            "3_invariants_mode_ceiling",
            &allow,
            echo(json!({ "message": "hi" })).with_mode(ApprovalMode::Network),
            OutcomeCode::PolicyBlocked,
        ),
        (
            "4_policy_deny",
            &deny,
            echo(json!({ "message": "hi" })),
            OutcomeCode::PolicyBlocked,
        ),
        (
            "5_end_to_end_ok",
            &allow,
            echo(json!({ "message": "hi" })),
            OutcomeCode::Ok,
        ),
    ];
    let mut group = c.benchmark_group("pipeline");
    for (name, host, call, outcome) in cases {
        assert_eq!(
            runtime.block_on(host.call(call.clone())).outcome,
            outcome,
            "{name}"
        );
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(host.call(call.clone())));
        });
    }
    group.finish();
}

criterion_group!(benches, gates);
criterion_main!(benches);
