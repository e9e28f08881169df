//! Hostile plugins: each is stopped with its exact outcome code, and the same host serves a
//! normal call right after.

use gatehouse_host::ErrorKind;
use gatehouse_host::PluginRef;
use gatehouse_host::{Host, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::artifacts::{
    AMBIENT_PROBE, ECHO, INFINITE_LOOP, MEMORY_BOMB, OVERSIZED_OUTPUT, PANIC, POLICY_PROBE,
    RECURSION, TEST_PROGRAMS, WRONG_WORLD,
};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::{Artifact, bind, config};
use serde_json::json;

/// A host trusting the test publisher's `gatehouse.*` and `test.*` adapters; each test
/// installs the plugin it drives.
fn host() -> Host {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &[]).build()
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
    // Only the looping plugin gets the short deadline: the echo that proves the host still
    // works keeps the default one, which a loaded machine cannot overrun.
    let host = HostBuilder::trusting(&["gatehouse.*", "test.*"], &[])
        .with(|config| {
            config.sandbox.max_fuel = u64::MAX / 2;
            config.sandbox.plugins = serde_json::from_value(json!([
                { "id": INFINITE_LOOP.manifest().id(), "fuel": u64::MAX / 2, "timeout_ms": 300 }
            ]))
            .unwrap();
        })
        .build();
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
            "the component does not implement the `adapter` world of gatehouse:plugin@0.8.0"
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
    let host = HostBuilder::trusting(&["gatehouse.*"], &["test.*"])
        .with(|config| {
            config.sandbox.fuel = u64::MAX / 2;
            config.sandbox.max_fuel = u64::MAX / 2;
            config.sandbox.timeout_ms = 300;
            config.pipeline.policies = vec![bind(
                "test.policy-probe",
                "*",
                0,
                json!({ "behavior": "loop" }),
            )];
        })
        .adapters(&[ECHO])
        .policies(&[POLICY_PROBE])
        .build();
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
    // By name, not by their constants: `build.rs` fails the build when a program's constant
    // is used by no test, and this list is not a use.
    let covered = [
        "ambient-probe",
        // Not hostile: the pipeline's test adapter, driven by tests/pipeline.rs.
        "ledger",
        "policy-probe",
        "infinite-loop",
        "memory-bomb",
        "recursion",
        "panic",
        "oversized-output",
        "wrong-world",
        // Driven by tests/egress.rs.
        "egress-probe",
        // Not hostile: adapters built for the released contracts 0.1.0, 0.2.0 and 0.3.0,
        // driven by tests/adapters.rs, and policies built for 0.2.0 and 0.3.0, driven by
        // tests/pipeline.rs.
        "contract-0-1",
        "contract-0-2-adapter",
        "contract-0-3-adapter",
        "contract-0-2",
        "contract-0-3",
        // Not hostile: the caller interface's probe (contract 0.5.0) and an adapter built for
        // the released 0.4.0, driven by tests/caller.rs.
        "caller-probe",
        "contract-0-4-adapter",
        // An adapter built for the released 0.5.0, driven by tests/caller.rs.
        "contract-0-5-adapter",
        // A policy built for 0.4.0, driven by tests/pipeline.rs.
        "contract-0-4",
        // An adapter built for the released 0.6.0, driven by tests/caller.rs, and a policy,
        // driven by tests/sessions.rs.
        "contract-0-6-adapter",
        "contract-0-6",
        // An adapter built for the released 0.7.0, driven by tests/caller.rs, and a policy,
        // driven by tests/sessions.rs.
        "contract-0-7-adapter",
        "contract-0-7",
    ];
    for program in TEST_PROGRAMS {
        assert!(
            covered.contains(program),
            "tests/plugins/{program} has no test in hostile.rs, egress.rs, adapters.rs, \
             pipeline.rs or caller.rs"
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

// Issue 9, item 6: bounded everything.

#[tokio::test]
async fn an_oversized_error_is_refused_like_oversized_output() {
    let host = host();
    load(&host, OVERSIZED_OUTPUT);
    let result = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.oversized-output.error",
            json!({ "bytes": 1_000_000 }),
        ))
        .await;
    let message = assert_failed(&result, OutcomeCode::ToolOutputTooLarge, ErrorKind::Limit);
    assert!(message.contains("the limit is 262144"), "{message}");
    assert!(message.len() < 1000, "the error itself is small");
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn an_oversized_policy_decision_fails_closed() {
    let mut config = config(&["gatehouse.*", "test.*"], &["test.*"]);
    config.pipeline.policies = vec![bind(
        "test.policy-probe",
        "*",
        0,
        json!({ "reason_bytes": 100_000 }),
    )];
    let host = Host::new(config).unwrap();
    host.install_policy(&POLICY_PROBE.signed()).unwrap();
    load(&host, ECHO);
    let result = gatehouse_tests::echo(&host, "hi").await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Rejected, OutcomeCode::PolicyBlocked),
        "{result:#?}"
    );
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("POLICY_FAILED"), "{message}");
    assert!(message.contains("the limit is 65536"), "{message}");
    assert!(
        !message.contains("rrrr"),
        "the oversized reason is not kept"
    );
}

/// Collects what the host logs.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn guest_log_lines_are_bounded_and_escaped_in_the_hosts_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // A current-thread runtime: the whole call runs on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let host = host();
    load(&host, OVERSIZED_OUTPUT);
    let result = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.oversized-output.log",
            json!({ "lines": 1000 }),
        ))
        .await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let plugin_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("gatehouse::plugin"))
        .collect();
    // 256 lines kept, then one line saying how many were dropped.
    assert_eq!(plugin_lines.len(), 257, "{log}");
    assert!(
        plugin_lines[256].contains("dropped=744"),
        "{}",
        plugin_lines[256]
    );
    // Every forged record stayed inside its own line, escaped.
    for line in &plugin_lines[..256] {
        assert!(
            line.contains("ok\\n2026-01-01T00:00:00Z  INFO gatehouse: FORGED"),
            "{line}"
        );
        assert!(line.contains("\\u{1b}[2J\\u{202e}desrever"), "{line}");
    }
    assert!(
        !log.lines().any(|l| l.starts_with("2026-01-01")),
        "a forged record: {log}"
    );
    assert!(!log.contains('\u{1b}') && !log.contains('\u{202e}'));
}

// Issue 9, item 3: memory and instance budgets per component, not per memory.

/// `component` plus a nested component that instantiates `memories` core modules, each
/// declaring one memory of `pages` 64 KiB pages: memory the adapter's own code never asked
/// for.
fn with_memories(component: &[u8], memories: u32, pages: u64) -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentInstanceSection, InstanceSection, MemorySection, MemoryType, Module,
        ModuleSection, NestedComponentSection,
    };
    let mut memory = MemorySection::new();
    memory.memory(MemoryType {
        minimum: pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut module = Module::new();
    module.section(&memory);
    let mut nested = Component::new();
    let mut core = InstanceSection::new();
    for index in 0..memories {
        nested.section(&ModuleSection(&module));
        core.instantiate(index, Vec::<(&str, wasm_encoder::ModuleArg)>::new());
    }
    nested.section(&core);
    // The appended component's index is the number of components the adapter already has.
    let existing = wasmparser::Parser::new(0)
        .parse_all(component)
        .filter(|p| matches!(p, Ok(wasmparser::Payload::ComponentSection { .. })))
        .count();
    let mut outer = Component::new();
    outer.section(&NestedComponentSection(&nested));
    let mut instance = ComponentInstanceSection::new();
    instance.instantiate(
        u32::try_from(existing).unwrap(),
        Vec::<(&str, wasm_encoder::ComponentExportKind, u32)>::new(),
    );
    outer.section(&instance);
    let tail = outer.finish();
    let mut bytes = component.to_vec();
    bytes.extend_from_slice(&tail[8..]);
    bytes
}

fn signed_echo_with(memories: u32, pages: u64) -> Vec<u8> {
    let bytes = with_memories(&ECHO.bytes(), memories, pages);
    gatehouse_host::plugin::pack(&bytes, &ECHO.manifest(), gatehouse_tests::publisher()).unwrap()
}

#[tokio::test]
async fn a_component_with_more_memories_than_an_instance_may_have_is_refused_at_load() {
    let host = host();
    // As many more memories as the cap, beside the adapter's own: one over the per-component
    // cap of 12 (room for a componentize-py component's 10).
    let err = host
        .install_adapter(&signed_echo_with(12, 1))
        .expect_err("13 memories in one component");
    let text = err.to_string();
    assert!(
        text.contains("13 Wasm linear memories, which exceeds the configured maximum of 12"),
        "{text}"
    );
    // As many more core instances (and memories) as the instance cap: over the caps.
    let err = host
        .install_adapter(&signed_echo_with(16, 1))
        .expect_err("more core instances in one component than the cap");
    let text = err.to_string();
    assert!(
        text.contains("which exceeds the configured maximum of"),
        "{text}"
    );
    assert_echo_still_works(&host).await;
}

#[tokio::test]
async fn memory_is_budgeted_across_all_of_an_instances_memories() {
    // `memory_mib` is 32: one extra memory of 31.25 MiB is under it on its own, but not
    // together with the adapter's own memory.
    let host = host();
    host.install_adapter(&signed_echo_with(1, 500)).unwrap();
    let result = gatehouse_tests::echo(&host, "hi").await;
    let message = assert_failed(&result, OutcomeCode::ToolMemoryLimit, ErrorKind::Limit);
    assert!(
        message.contains("memory limit of 33554432 bytes exceeded"),
        "{message}"
    );
}
