//! What an adapter tells and asks its caller (contract 0.5.0's `caller` interface), through
//! `Host::call_relayed`: a real adapter built from source with the Rust SDK
//! (`test.caller-probe`) in wasmtime, and a test relay that records what reaches it and
//! answers each ask. The caller gate decides what passes (the manifest's `[caller]`, the
//! operator's `[[caller.grant]]`, its budgets, credentials), the audit record keeps each ask
//! and its answer, and an adapter built for 0.4.0 still loads and runs.

use std::time::{Duration, Instant};

use gatehouse_host::plugin::manifest::CallerRequest;
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_host::relay::{CallerCan, LogLevel};
use gatehouse_host::{ContentBlock, Host, HostConfig, OutcomeCode, Status, ToolCallEnvelope};
use gatehouse_tests::artifacts::{
    CALLER_PROBE, CONTRACT_0_4_ADAPTER, CONTRACT_0_5_ADAPTER, CONTRACT_0_6_ADAPTER,
    CONTRACT_0_7_ADAPTER,
};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::relay::{TestRelay, everything};
use gatehouse_tests::{TOKEN, audit_record, publisher, token_file};
use serde_json::{Value, json};

/// The probe's operator config: a credential bound to its egress request, and `grant` (a
/// `[[caller.grant]]` entry, or none).
fn config(grant: Option<Value>) -> HostConfig {
    HostBuilder::trusting(&["test.*"], &[])
        .egress(json!({
            "grant": [{
                "adapter": "test.caller-probe",
                "url": "https://api.example.com/",
                "methods": ["GET"],
                "credentials": { "api_token": { "file": token_file(), "scheme": "Bearer" } },
            }],
        }))
        .with(|config| {
            if let Some(grant) = grant {
                config.caller = serde_json::from_value(json!({ "grant": [grant] })).unwrap();
            }
        })
        .into_config()
}

/// A host with the probe installed under `config`, its manifest's `[caller]` table replaced by
/// `declared` if given.
fn probe_host(config: HostConfig, declared: Option<CallerRequest>) -> Host {
    let host = HostBuilder::on(config).build();
    let mut manifest = CALLER_PROBE.manifest();
    if let (Some(declared), Manifest::Adapter(adapter)) = (declared, &mut manifest) {
        adapter.caller = declared;
    }
    let signed = gatehouse_host::plugin::pack(&CALLER_PROBE.bytes(), &manifest, publisher())
        .expect("the probe packs");
    host.install_adapter(&signed).expect("the probe installs");
    host
}

fn call(capability: &str, args: Value) -> ToolCallEnvelope {
    ToolCallEnvelope::new("default", format!("test.caller-probe.{capability}"), args)
}

/// `ask` with these requests, one `ask` each or together.
fn asks(requests: &[Value], together: bool) -> ToolCallEnvelope {
    call("ask", json!({ "requests": requests, "together": together }))
}

fn form(key: &str, message: &str) -> Value {
    json!({
        "key": key,
        "kind": "elicitation",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "default": "Bob" },
                    "password": { "type": "string", "format": "password", "default": "swordfish" }
                }
            }
        }
    })
}

fn sampling(key: &str, max_tokens: u64) -> Value {
    json!({
        "key": key,
        "kind": "sampling",
        "params": {
            "messages": [{ "role": "user", "content": { "type": "text", "text": "Capital of France?" } }],
            "maxTokens": max_tokens
        }
    })
}

/// What the probe's `ask` returned for each request: the answer, or `error: reason`.
fn answers(result: &gatehouse_host::ToolResultEnvelope) -> Vec<Value> {
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    let structured = result
        .structured_content
        .as_ref()
        .expect("structured answers");
    structured["answers"].as_array().unwrap().clone()
}

fn error_of(answer: &Value) -> (String, String) {
    (
        answer["error"].as_str().unwrap_or("answered").to_owned(),
        answer["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_log_lines_reach_the_caller_when_declared_and_are_dropped_and_counted_when_not()
 {
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let host = probe_host(config(None), None);
    let result = host
        .call_relayed(call("tell", json!({})), relay.clone())
        .await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    assert_eq!(
        result.structured_content,
        Some(json!({ "elicit_form": true, "elicit_url": true, "sample": true, "roots": true }))
    );
    assert_eq!(
        result.caller, None,
        "the caller's view leaves the record out"
    );
    assert_eq!(
        relay.seen(),
        [
            json!({ "progress": 1.0, "total": 3.0, "message": "step 1" }),
            json!({ "progress": 2.0, "total": 3.0, "message": "step 2" }),
            json!({ "progress": 3.0, "total": 3.0, "message": "step 3" }),
            json!({ "log": "info", "logger": "probe", "data": "started" }),
            json!({ "log": "warning", "logger": null, "data": { "rows": 2 } }),
        ]
    );
    let record = audit_record(&host, &result.tool_call_id).await;
    assert_eq!(
        record["result"]["caller"],
        json!({ "progress": { "relayed": 3 }, "log": { "relayed": 2 } })
    );

    // The same component, its manifest declaring nothing: nothing reaches the caller.
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let host = probe_host(config(None), Some(CallerRequest::default()));
    let result = host
        .call_relayed(call("tell", json!({})), relay.clone())
        .await;
    assert_eq!(result.outcome, OutcomeCode::Ok, "{result:#?}");
    assert_eq!(relay.seen(), Vec::<Value>::new());
    let record = audit_record(&host, &result.tool_call_id).await;
    assert_eq!(
        record["result"]["caller"],
        json!({
            "progress": { "dropped": 3, "dropped_because": "the manifest does not declare `[caller] progress = true`" },
            "log": { "dropped": 2, "dropped_because": "the manifest does not declare `[caller] log = true`" }
        })
    );

    // A call without a caller (`Host::call`): declared, but nobody to tell; `can` is all false.
    let host = probe_host(config(None), None);
    let result = host.call(call("tell", json!({}))).await;
    assert_eq!(
        result.structured_content,
        Some(json!({ "elicit_form": false, "elicit_url": false, "sample": false, "roots": false }))
    );
    let caller = result.caller.expect("the full record has it");
    assert_eq!((caller.progress.dropped, caller.log.dropped), (3, 2));
    assert_eq!(
        caller.progress.dropped_because.as_deref(),
        Some("no caller is attached to this call")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_pass_only_when_declared_granted_within_budget_and_free_of_credentials() {
    let grant = json!({
        "adapter": "test.caller-probe",
        "ask": ["elicitation", "sampling"],
        "max_asks": 2,
        "max_sampling_tokens": 50
    });
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let host = probe_host(config(Some(grant)), None);
    let result = host
        .call_relayed(
            asks(
                &[
                    json!({ "key": "roots", "kind": "roots", "params": {} }),
                    sampling("big", 51),
                    form("leak", &format!("Your token is {TOKEN}")),
                    form("user", "Who are you?"),
                    sampling("capital", 50),
                    form("third", "One too many"),
                ],
                false,
            ),
            relay.clone(),
        )
        .await;
    let got = answers(&result);
    let errors: Vec<(String, String)> = got.iter().map(error_of).collect();
    assert_eq!(errors[0].0, "refused");
    assert!(
        errors[0]
            .1
            .contains("does not declare `roots` in `[caller] ask`"),
        "{}",
        errors[0].1
    );
    assert!(
        errors[1]
            .1
            .contains("`maxTokens` is 51; the operator allows this adapter at most 50"),
        "{}",
        errors[1].1
    );
    assert!(
        errors[2]
            .1
            .contains("carries the value of the egress credential `api_token`"),
        "{}",
        errors[2].1
    );
    assert!(
        !errors[2].1.contains(TOKEN),
        "the refusal does not repeat it"
    );
    assert_eq!(
        got[3]["ok"],
        json!({ "action": "accept", "content": { "name": "Ada", "password": "hunter2" } })
    );
    assert_eq!(got[4]["ok"]["content"]["text"], "Paris");
    assert_eq!(errors[5].0, "refused");
    assert!(
        errors[5]
            .1
            .contains("the call's 2 asks (`max_asks`) are spent"),
        "{}",
        errors[5].1
    );
    // Only the two asks that passed reached the caller.
    let asked: Vec<Value> = relay
        .seen()
        .iter()
        .map(|seen| seen["ask"].clone())
        .collect();
    assert_eq!(asked, [json!("user"), json!("capital")]);

    // The audit record keeps every ask, the form's password as hashes, never in clear.
    let record = audit_record(&host, &result.tool_call_id).await;
    let kept = &record["result"]["caller"]["asks"];
    let outcomes: Vec<&str> = (kept.as_array().unwrap().iter())
        .map(|ask| ask["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "refused", "refused", "refused", "answered", "answered", "refused"
        ]
    );
    let user = &kept[3];
    assert_eq!(user["answer"]["content"]["name"], "Ada");
    let hidden = user["answer"]["content"]["password"].as_str().unwrap();
    assert!(hidden.starts_with("sha256:"), "{hidden}");
    let default = &user["params"]["requestedSchema"]["properties"]["password"]["default"];
    assert!(
        default.as_str().unwrap().starts_with("sha256:"),
        "{default}"
    );
    // Nor is the credential the refused ask carried. (The probe's own result and the call's
    // arguments are the adapter's and the agent's: only what the caller gate kept is checked.)
    assert_eq!(kept[2]["outcome"], "refused");
    assert!(
        kept[2]["params"].as_str().unwrap().starts_with("sha256:"),
        "{}",
        kept[2]
    );
    let text = record["result"]["caller"].to_string();
    for secret in ["hunter2", "swordfish", TOKEN] {
        assert!(
            !text.contains(secret),
            "{secret} is in the caller record: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_nobody_granted_or_the_caller_cannot_answer_is_not_sent() {
    // Declared, but the operator granted nothing: refused, default deny.
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let host = probe_host(config(None), None);
    let result = host
        .call_relayed(asks(&[form("user", "Who?")], false), relay.clone())
        .await;
    let (error, reason) = error_of(&answers(&result)[0]);
    assert_eq!(error, "refused");
    assert!(
        reason.contains(
            "the operator has not granted adapter `test.caller-probe` to ask for `elicitation`"
        ),
        "{reason}"
    );
    assert_eq!(relay.seen(), Vec::<Value>::new());

    // Granted, but the client declared no sampling: not supported, nothing sent.
    let grant = json!({ "adapter": "test.*", "ask": ["elicitation", "sampling"] });
    let relay = TestRelay::new(
        CallerCan {
            elicit_form: true,
            ..CallerCan::default()
        },
        Duration::ZERO,
    );
    let host = probe_host(config(Some(grant.clone())), None);
    let result = host
        .call_relayed(
            asks(&[sampling("s", 10), form("f", "Who?")], true),
            relay.clone(),
        )
        .await;
    let got = answers(&result);
    assert_eq!(error_of(&got[0]).0, "not_supported");
    assert_eq!(got[1]["ok"]["action"], "accept");
    assert_eq!(relay.seen().len(), 1, "{:?}", relay.seen());

    // No caller at all.
    let result = host.call(asks(&[form("f", "Who?")], false)).await;
    assert_eq!(error_of(&answers(&result)[0]).0, "unavailable");
    // The full envelope (the operator's record), its caller record included, matches the
    // checked-in schema.
    let caller = result.caller.as_ref().expect("the ask is recorded");
    assert_eq!(
        caller.asks[0].outcome,
        gatehouse_host::model::AskOutcome::Unavailable
    );
    let schema: Value = serde_json::from_str(include_str!(
        "../../../schemas/tool_result_envelope.schema.json"
    ))
    .unwrap();
    let schema = jsonschema::draft202012::new(&schema).unwrap();
    let value = serde_json::to_value(&result).unwrap();
    if let Err(e) = schema.validate(&value) {
        panic!("result envelope {value}: {e} at {}", e.instance_path());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_waits_outside_the_calls_time_budget_and_times_out_on_its_own() {
    // The probe's calls have 2 s (the test config); the caller takes 3 s to answer.
    let grant = json!({ "adapter": "test.caller-probe", "ask": ["elicitation", "sampling"], "ask_timeout_seconds": 5 });
    let relay = TestRelay::new(everything(), Duration::from_secs(3));
    let host = probe_host(config(Some(grant)), None);
    let started = Instant::now();
    let result = host
        .call_relayed(
            asks(&[form("slow", "Take your time")], false),
            relay.clone(),
        )
        .await;
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(answers(&result)[0]["ok"]["action"], "accept", "{result:#?}");

    // One second allowed per ask: the caller's 3 s is too long.
    let grant =
        json!({ "adapter": "test.caller-probe", "ask": ["elicitation"], "ask_timeout_seconds": 1 });
    let host = probe_host(config(Some(grant)), None);
    let started = Instant::now();
    let result = host
        .call_relayed(asks(&[form("slow", "Quick!")], false), relay.clone())
        .await;
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        error_of(&answers(&result)[0]),
        ("timeout".to_owned(), "1".to_owned())
    );
    let record = audit_record(&host, &result.tool_call_id).await;
    assert_eq!(record["result"]["caller"]["asks"][0]["outcome"], "timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sensitive_capabilitys_asks_are_recorded_as_hashes() {
    let grant = json!({ "adapter": "test.caller-probe", "ask": ["elicitation"] });
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let host = probe_host(config(Some(grant)), None);
    let result = host
        .call_relayed(
            call(
                "ask_secret",
                json!({ "requests": [form("who", "Your name, Sir?")] }),
            ),
            relay,
        )
        .await;
    assert_eq!(result.outcome, OutcomeCode::Ok, "{result:#?}");
    let record = audit_record(&host, &result.tool_call_id).await;
    let ask = &record["result"]["caller"]["asks"][0];
    assert_eq!(ask["outcome"], "answered");
    for field in ["params", "answer"] {
        assert!(ask[field].as_str().unwrap().starts_with("sha256:"), "{ask}");
    }
    assert!(!record.to_string().contains("Your name, Sir?"));
}

/// Installs `adapter`, an adapter built for an older released contract, and calls its `whoami`
/// with a relay that can be asked anything: the call's only block of text (after checking it
/// ended `OK`), and what reached the relay.
async fn whoami_of_older(adapter: &gatehouse_tests::Artifact) -> (String, Vec<Value>) {
    let host = HostBuilder::trusting(&["test.*"], &[]).build();
    host.install_adapter(&adapter.signed())
        .unwrap_or_else(|e| panic!("{} installs: {e}", adapter.name));
    let relay = TestRelay::new(everything(), Duration::ZERO);
    let tool = format!("{}.whoami", adapter.manifest().id());
    let result = host
        .call_relayed(
            ToolCallEnvelope::new("default", tool, json!({})),
            relay.clone(),
        )
        .await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    let [ContentBlock::Text { text }] = result.content.as_slice() else {
        panic!("one text block: {result:#?}");
    };
    (text.clone(), relay.seen())
}

/// What a `whoami` built for 0.5.0 or later tells its caller: progress 1 of 1, and a line.
fn progress_and_a_line() -> Vec<Value> {
    vec![
        json!({ "progress": 1.0, "total": 1.0, "message": "done" }),
        json!({ "log": LogLevel::Info, "logger": null, "data": "whoami called" }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_built_for_0_4_0_still_loads_and_runs() {
    let (text, seen) = whoami_of_older(&CONTRACT_0_4_ADAPTER).await;
    assert_eq!(text, "built for 0.4.0, called by default with skills: none");
    assert_eq!(seen, Vec::<Value>::new());
}

/// An adapter built for the released 0.6.0, from that WIT as released: prepared against the
/// current world (0.7.0 changed only what a policy evaluates), its `caller@0.6.0` import
/// reaches the relay, and it serves the resource its manifest declares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_built_for_0_6_0_still_loads_tells_its_caller_and_serves_its_resource() {
    let (text, seen) = whoami_of_older(&CONTRACT_0_6_ADAPTER).await;
    assert_eq!(text, "built for 0.6.0, called by default");
    assert_eq!(seen, progress_and_a_line());
    let host = HostBuilder::trusting(&["test.*"], &[]).build();
    host.install_adapter(&CONTRACT_0_6_ADAPTER.signed())
        .expect("it installs");
    let (name, args) = host
        .resource_at("default", "test://about")
        .expect("its resource is served");
    let call = ToolCallEnvelope::new("default", name, args)
        .with_operation(gatehouse_host::model::Operation::ReadResource);
    let result = host.call(call).await;
    assert_eq!(result.outcome, OutcomeCode::Ok, "{result:#?}");
    let [ContentBlock::Resource { resource }] = result.content.as_slice() else {
        panic!("one resource block: {result:#?}");
    };
    assert_eq!(
        resource.text.as_deref(),
        Some("read by an adapter built for 0.6.0")
    );
    assert!(result.usage.is_some(), "the adapter ran");
}

/// An adapter built for the released 0.7.0: prepared against the current world too (0.8.0
/// changed only what a policy evaluates), its `caller@0.7.0` import reaching the relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_built_for_0_7_0_still_loads_and_tells_its_caller() {
    let (text, seen) = whoami_of_older(&CONTRACT_0_7_ADAPTER).await;
    assert_eq!(text, "built for 0.7.0, called by default");
    assert_eq!(seen, progress_and_a_line());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_built_for_0_5_0_still_loads_and_tells_its_caller() {
    let (text, seen) = whoami_of_older(&CONTRACT_0_5_ADAPTER).await;
    assert_eq!(text, "built for 0.5.0, called by default");
    // Its `caller@0.5.0` import reached the relay, as the current one does.
    assert_eq!(seen, progress_and_a_line());
}
