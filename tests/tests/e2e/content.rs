//! Resources and prompts (contract 0.6.0) as governed calls, on a real host with the
//! first-party `conformance` adapter, which serves the suite's resources, template and prompts:
//! a read or fill-in passes the gates a tool call passes, in the same order, and each is
//! judged by what the sandbox ran (the result's `usage`, present only once the adapter ran)
//! and what the audit log kept, not only by the outcome.

use gatehouse_host::config::PolicyDefault;
use gatehouse_host::model::{ContentBlock, Operation};
use gatehouse_host::{Host, HostConfig, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::artifacts::{BASELINE, CONFORMANCE, REDACT};
use gatehouse_tests::{audit_record, bind, config, grant};
use serde_json::{Value, json};

const ADAPTER: &str = "gatehouse.conformance";

/// Tenant `acme` sees every conformance entry, its template's `id` constrained to digits;
/// tenant `globex` sees the tools only. Baseline allows; `redact` masks email addresses, and
/// `ID: <digits>` as `[RECORD]`.
fn host() -> Host {
    let mut config: HostConfig = config(&["gatehouse.*"], &["gatehouse.*"]);
    let mut acme = grant("gatehouse.conformance.*", &["acme"]);
    acme.arg_constraints =
        serde_json::from_value(json!({ "id": { "pattern": "[0-9]+" } })).unwrap();
    config.pipeline.tools = vec![acme, grant("gatehouse.conformance.test_*", &["globex"])];
    config.pipeline.policy_default = PolicyDefault::Deny;
    config.pipeline.policies = vec![
        bind("gatehouse.baseline", "*", 0, json!({})),
        bind(
            "gatehouse.redact",
            "*",
            1,
            json!({ "pii": ["email"], "identifiers": { "record": "ID: [0-9]+" } }),
        ),
    ];
    let host = Host::new(config).expect("the host builds");
    host.install_adapter(&CONFORMANCE.signed())
        .expect("the conformance adapter installs");
    for policy in [&BASELINE, &REDACT] {
        host.install_policy(&policy.signed())
            .unwrap_or_else(|e| panic!("{} installs: {e}", policy.name));
    }
    host
}

/// A read of `uri` as `tenant`, as the MCP server makes it.
async fn read(host: &Host, tenant: &str, uri: &str) -> ToolResultEnvelope {
    let (name, args) = host
        .resource_at(tenant, uri)
        .unwrap_or_else(|| (format!("{ADAPTER}.static_text"), json!({ "uri": uri })));
    let call = ToolCallEnvelope::new(tenant, name, args).with_operation(Operation::ReadResource);
    host.call(call).await
}

fn text_of(result: &ToolResultEnvelope) -> String {
    serde_json::to_string(&result.content).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_read_is_a_governed_call_and_is_audited() {
    let host = host();
    let result = read(&host, "acme", "test://template/123/data").await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    let [ContentBlock::Resource { resource }] = result.content.as_slice() else {
        panic!("one resource block: {result:#?}");
    };
    assert_eq!(resource.uri, "test://template/123/data");
    // The adapter wrote `Data for ID: 123`; the policy's obligation masked it in the contents.
    let text = resource.text.as_deref().unwrap();
    assert!(
        text.contains("Data for [RECORD]") && !text.contains("ID: 123"),
        "{text}"
    );
    assert_eq!(result.evidence_refs, ["test://template/123/data"]);
    assert!(result.usage.is_some(), "the adapter ran");
    let record = audit_record(&host, &result.tool_call_id).await;
    assert_eq!(record["call"]["operation"], "read_resource", "{record}");
    assert_eq!(
        record["call"]["capability_id"],
        "gatehouse.conformance.template_data"
    );
    // The policy saw the read's parameters and its reviewed classification.
    let args: Value = serde_json::from_str(record["action"]["args"].as_str().unwrap_or("null"))
        .unwrap_or_else(|_| record["action"]["args"].clone());
    assert_eq!(
        args,
        json!({ "uri": "test://template/123/data", "id": "123", "classification": "public" }),
        "{record}"
    );
    assert_eq!(
        record["action"]["data_classification"],
        json!(["public"]),
        "{record}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_the_tenant_may_not_make_runs_nothing() {
    let host = host();
    // Hidden from globex: there is nothing at the URI for it, and a call naming the resource
    // directly is unknown, before anything runs.
    assert_eq!(host.resource_at("globex", "test://static-text"), None);
    assert!(host.resource_catalog("globex").is_empty());
    let hidden = read(&host, "globex", "test://static-text").await;
    assert_eq!(
        hidden.outcome,
        OutcomeCode::UnknownCapability,
        "{hidden:#?}"
    );
    assert!(hidden.usage.is_none(), "the adapter ran: {hidden:#?}");

    // A template parameter outside the grant's constraint: refused, and the adapter never ran.
    let (name, args) = host
        .resource_at("acme", "test://template/abc/data")
        .unwrap();
    assert_eq!(args["id"], "abc");
    let call = ToolCallEnvelope::new("acme", name, args).with_operation(Operation::ReadResource);
    let refused = host.call(call).await;
    assert_eq!(
        (refused.status, refused.outcome),
        (Status::Rejected, OutcomeCode::InvalidArguments),
        "{refused:#?}"
    );
    assert!(refused.usage.is_none(), "the adapter ran: {refused:#?}");
    let record = audit_record(&host, &refused.tool_call_id).await;
    assert_eq!(record["result"]["status"], "rejected", "{record}");

    // A URI the template does not serve, though the call names the template: unknown. The
    // caller's own arguments never reach the adapter: the host makes them from the URI.
    let forged = ToolCallEnvelope::new(
        "acme",
        format!("{ADAPTER}.template_data"),
        json!({ "uri": "test://elsewhere/1/data", "id": "1" }),
    )
    .with_operation(Operation::ReadResource);
    let forged = host.call(forged).await;
    assert_eq!(
        forged.outcome,
        OutcomeCode::UnknownCapability,
        "{forged:#?}"
    );
    assert!(forged.usage.is_none());

    // A resource is not a tool, and a tool is not a resource.
    let as_tool = ToolCallEnvelope::new(
        "acme",
        format!("{ADAPTER}.static_text"),
        json!({ "uri": "test://static-text" }),
    );
    assert_eq!(
        host.call(as_tool).await.outcome,
        OutcomeCode::UnknownCapability
    );
    let as_resource =
        ToolCallEnvelope::new("acme", format!("{ADAPTER}.test_simple_text"), json!({}))
            .with_operation(Operation::ReadResource);
    assert_eq!(
        host.call(as_resource).await.outcome,
        OutcomeCode::UnknownCapability
    );
    assert!(
        (host.tool_catalog("acme").iter()).all(|(name, _)| !name.ends_with(".static_text")),
        "a resource is listed as a tool"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_is_filled_in_through_the_gates_and_its_messages_are_masked() {
    let host = host();
    let prompts: Vec<String> = (host.prompt_catalog("acme").into_iter())
        .map(|p| p.name)
        .collect();
    assert!(
        prompts.contains(&format!("{ADAPTER}.test_prompt_with_arguments")),
        "{prompts:?}"
    );
    let fill = |args: Value| {
        ToolCallEnvelope::new(
            "acme",
            format!("{ADAPTER}.test_prompt_with_arguments"),
            args,
        )
        .with_operation(Operation::GetPrompt)
    };
    let result = host
        .call(fill(json!({ "arg1": "ann@example.com", "arg2": "two" })))
        .await;
    assert_eq!(
        (result.status, result.outcome),
        (Status::Ok, OutcomeCode::Ok),
        "{result:#?}"
    );
    let text = text_of(&result);
    assert!(
        !text.contains("ann@example.com") && text.contains("arg2='two'"),
        "the redact policy's obligation reaches the prompt's messages: {text}"
    );
    assert_eq!(
        result.structured_content,
        Some(json!({ "description": null, "roles": ["user"] }))
    );
    let record = audit_record(&host, &result.tool_call_id).await;
    assert_eq!(record["call"]["operation"], "get_prompt", "{record}");

    // Arguments are checked against the declared ones before anything runs.
    for args in [
        json!({ "arg1": "one" }),
        json!({ "arg1": "1", "arg2": "2", "arg3": "3" }),
    ] {
        let refused = host.call(fill(args)).await;
        assert_eq!(
            refused.outcome,
            OutcomeCode::InvalidArguments,
            "{refused:#?}"
        );
        assert!(refused.usage.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_is_asked_only_of_what_the_tenant_may_see() {
    use gatehouse_host::CompletionRef;
    let host = host();
    let prompt = CompletionRef::Prompt(format!("{ADAPTER}.test_prompt_with_arguments"));
    let completion = host
        .complete("acme", &prompt, "arg1", "par", &json!({}))
        .await
        .expect("acme sees the prompt");
    assert_eq!(completion.values, ["paris", "park", "parse"]);
    let template = CompletionRef::Resource("test://template/{id}/data".to_owned());
    assert!(
        host.complete("acme", &template, "id", "1", &json!({}))
            .await
            .is_some()
    );
    assert!(
        host.complete("globex", &template, "id", "1", &json!({}))
            .await
            .is_none()
    );
    let unknown = CompletionRef::Prompt(format!("{ADAPTER}.nope"));
    assert!(
        host.complete("acme", &unknown, "a", "", &json!({}))
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_built_before_0_6_0_that_declares_a_resource_is_refused_at_load() {
    use gatehouse_host::plugin::manifest::{Manifest, Resource};
    use gatehouse_tests::artifacts::CONTRACT_0_5_ADAPTER;
    let host = gatehouse_tests::host::HostBuilder::trusting(&["test.*"], &[]).build();
    let mut manifest = CONTRACT_0_5_ADAPTER.manifest();
    let Manifest::Adapter(adapter) = &mut manifest else {
        panic!("an adapter");
    };
    adapter.resources.push(Resource {
        id: "notes".to_owned(),
        uri: "notes://all".to_owned(),
        name: None,
        title: None,
        description: String::new(),
        mime_type: None,
        size: None,
        classification: None,
        sensitive: false,
        upstream: None,
        produces: Vec::new(),
    });
    let signed = gatehouse_host::plugin::pack(
        &CONTRACT_0_5_ADAPTER.bytes(),
        &manifest,
        gatehouse_tests::publisher(),
    )
    .expect("it packs");
    let error = host.install_adapter(&signed).unwrap_err().to_string();
    assert!(
        error.contains("built for gatehouse:plugin@0.5.0 or before") && error.contains("rebuild"),
        "{error}"
    );
    assert!(host.adapters().is_empty());
}
