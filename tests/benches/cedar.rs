//! Policy evaluation per call: the generic Cedar module initialized with 10, 100 and 1,000
//! rules, beside the baseline policy in Rust, in one run. Each case is the policy gate alone
//! (`Host::evaluate_policy`: a fresh sandboxed instance per call, as in the pipeline), timed
//! call by call, one caller.
//!
//! Two shapes of rule set:
//! - `spread`: each rule names its own tool (`action == Action::"shop.tN"`), as rules about
//!   many tools do; a call evaluates only the rules of its tool (the module slices them by
//!   tool when it is packed);
//! - `every`: each rule applies to every tool (`action in Action::"call"`), the worst case: a
//!   call evaluates all of them.
//!
//! Target (issue 45): 100 rules add at most 50 µs per call to the baseline's time.
//!
//! Beside each Cedar case, `native`: the same decision (`gatehouse_cedar::Rules::decide`) run
//! natively, outside the sandbox, so the sandbox's share is plain.
//!
//! Run: `cargo bench -p gatehouse-tests --bench cedar [-- --calls N] [--rules N] [--shape S]`
//! (default 2,000 calls per case; `--rules` and `--shape` keep only the Cedar cases named, for a
//! profile of one).

use std::time::{Duration, Instant};

use gatehouse_cedar::{Packed, Tool};
use gatehouse_cli::import::generic::Generic;
use gatehouse_host::config::PolicyDefault;
use gatehouse_host::model::{ActionRecord, ApprovalMode, CapabilityClass, Claims, Verdict};
use gatehouse_host::plugin::manifest::{Manifest, PolicyManifest};
use gatehouse_host::{Host, plugin};
use gatehouse_tests::artifacts::BASELINE;
use serde_json::json;

fn host(module: &str, config: serde_json::Value, signed: &[u8]) -> Host {
    let mut host = gatehouse_tests::config(&["gatehouse.*"], &["gatehouse.*", "test.*"]);
    host.sandbox.max_concurrent_calls = 8;
    host.pipeline.policy_default = PolicyDefault::Deny;
    host.pipeline.policies = vec![gatehouse_tests::bind(module, "*", 0, config)];
    let host = Host::new(host).expect("the host builds");
    host.install_policy(signed).expect("the policy installs");
    host
}

fn tool(n: usize) -> Tool {
    Tool {
        name: format!("shop.t{n}"),
        adapter: "shop".to_owned(),
        capability: format!("t{n}"),
        class: "act".to_owned(),
        max_mode: "network".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": { "amount": { "type": "number" } },
            "required": ["amount"]
        }),
        annotations: Default::default(),
        produces: Vec::new(),
        sends: Vec::new(),
    }
}

/// `n` rules of `shape`, over `n` tools, checked.
fn rule_set(n: usize, shape: &str) -> Packed {
    let mut rules = String::new();
    for i in 0..n {
        let rule = match shape {
            "spread" => format!(
                "@id(\"r{i}\") forbid (principal in Tenant::\"trial\", action == Action::\"shop.t{i}\", resource) when {{ context.args.amount.greaterThan(decimal(\"{i}.0\")) }};\n"
            ),
            _ => format!(
                "@id(\"r{i}\") forbid (principal, action in Action::\"call\", resource) when {{ principal.tenant == \"t{i}\" && context.args.amount.greaterThan(decimal(\"{i}.0\")) }};\n"
            ),
        };
        rules.push_str(&rule);
    }
    let tools: Vec<Tool> = (0..n).map(tool).collect();
    gatehouse_cedar::check::check(&rules, &tools).expect("the bench's rules check");
    Packed { rules, tools }
}

/// `packed`, initialized in the generic module and signed as `test.rules`.
fn cedar(packed: &Packed) -> Vec<u8> {
    let input = serde_json::to_string(packed).expect("serializes");
    let snapshot =
        plugin::pre_initialize(Generic::Cedar.component(), &input).expect("the module initializes");
    let manifest = Manifest::Policy(PolicyManifest {
        id: "test.rules".to_owned(),
        version: "1.0.0".to_owned(),
        publisher: "bench".to_owned(),
        description: String::new(),
        config_schema: json!({ "type": "object" }),
    });
    plugin::pack(&snapshot, &manifest, gatehouse_tests::publisher()).expect("packs")
}

fn action(n: usize) -> ActionRecord {
    ActionRecord {
        tool_call_id: "call_bench".to_owned(),
        adapter_id: "shop".to_owned(),
        capability_id: format!("t{}", n / 2),
        capability_class: CapabilityClass::Act,
        approval_mode_max: ApprovalMode::Network,
        approval_mode_requested: ApprovalMode::Network,
        args: json!({ "amount": 5 }).to_string(),
        principals: Vec::new(),
        tenant: "acme".to_owned(),
        claims: Claims::default(),
        now_unix_ms: 1_795_773_600_000,
        prior_actions: Vec::new(),
        data_classification: Vec::new(),
        skills: Vec::new(),
        risk_signals: Vec::new(),
        protocol: "mcp".to_owned(),
        delegated_by: None,
        flows: Default::default(),
    }
}

/// The mean of `calls` native decisions on the bench's call, after a warm-up.
fn native(packed: &Packed, n: usize, calls: usize) -> Duration {
    let rules = gatehouse_cedar::Rules::new(packed).expect("the rules parse");
    rules.warm_up();
    let action = action(n);
    let call = || gatehouse_cedar::Call {
        tool: format!("{}.{}", action.adapter_id, action.capability_id),
        adapter: action.adapter_id.clone(),
        capability: action.capability_id.clone(),
        class: "act".to_owned(),
        max_mode: "network".to_owned(),
        mode: "network".to_owned(),
        args: serde_json::from_str(&action.args).expect("the bench's arguments"),
        tenant: action.tenant.clone(),
        principals: Vec::new(),
        now_unix_ms: action.now_unix_ms,
        prior_actions: Vec::new(),
        data_classification: Vec::new(),
        roles: Vec::new(),
        groups: Vec::new(),
        skills: Vec::new(),
        protocol: action.protocol.clone(),
        delegated_by: None,
    };
    // No rule matches the bench's call (tenant `acme`, amount 5), in either shape.
    let outcome = rules.decide(&call());
    assert!(
        outcome.verdict == gatehouse_cedar::Verdict::Abstain && outcome.reasons.is_empty(),
        "{outcome:?}"
    );
    for _ in 0..100 {
        std::hint::black_box(rules.decide(&call()));
    }
    let started = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(rules.decide(&call()));
    }
    started.elapsed() / u32::try_from(calls).unwrap_or(u32::MAX)
}

/// `calls` evaluations after a warm-up: p50, p99 and mean. Each decision must not be a
/// failure, and must be `expect` if given: a module that failed fast would look fast.
fn time(
    runtime: &tokio::runtime::Runtime,
    host: &Host,
    n: usize,
    calls: usize,
    expect: Option<Verdict>,
) -> [Duration; 3] {
    let tool = format!("shop.t{}", n / 2);
    for _ in 0..100 {
        runtime.block_on(host.evaluate_policy(&tool, action(n)));
    }
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let decision = runtime.block_on(host.evaluate_policy(&tool, action(n)));
        times.push(started.elapsed());
        let module = &decision.modules[0];
        assert!(
            module.reasons.iter().all(|r| r.code != "POLICY_FAILED")
                && expect.is_none_or(|verdict| module.verdict == verdict),
            "{decision:?}"
        );
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / u32::try_from(calls).unwrap_or(u32::MAX);
    [times[calls / 2], times[calls * 99 / 100], mean]
}

/// The value after `--name` on the command line.
fn option(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

fn main() {
    let calls = option("--calls")
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    let rules: Option<usize> = option("--rules").and_then(|n| n.parse().ok());
    let only_shape = option("--shape");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let baseline = host(
        "gatehouse.baseline",
        json!({ "deny": { "trial": ["shop.*"] }, "approval_thresholds": { "amount": 100 } }),
        &BASELINE.signed(),
    );
    let base = time(&runtime, &baseline, 10, calls, None);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("policy evaluation per call, {calls} calls per case, one caller (µs)");
    println!("| policy | p50 | p99 | mean | mean - baseline | native |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| baseline (Rust) | {:.1} | {:.1} | {:.1} | | |",
        us(base[0]),
        us(base[1]),
        us(base[2])
    );
    for shape in ["spread", "every"] {
        if only_shape.as_deref().is_some_and(|only| only != shape) {
            continue;
        }
        for n in [10, 100, 1000] {
            if rules.is_some_and(|only| only != n) {
                continue;
            }
            let packed = rule_set(n, shape);
            let host = host("test.rules", json!({}), &cedar(&packed));
            // No rule matches the bench's call: the module abstains, having evaluated them.
            let t = time(&runtime, &host, n, calls, Some(Verdict::Abstain));
            println!(
                "| cedar, {n} rules, {shape} | {:.1} | {:.1} | {:.1} | {:+.1} | {:.1} |",
                us(t[0]),
                us(t[1]),
                us(t[2]),
                us(t[2]) - us(base[2]),
                us(native(&packed, n, calls))
            );
        }
    }
}
