//! Egress through real guests: the `gatehouse.rest` adapter and the `egress-probe` test
//! program, against a hyper upstream on loopback. Rule-by-rule checks live with the gate
//! (host/src/egress/tests.rs); these prove the outcomes reach a guest as the typed error and
//! land on the result envelope.

use gatehouse_host::config::EgressConfig;
use gatehouse_host::envelope::EgressAttempt;
use gatehouse_host::{Host, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::Artifact;
use gatehouse_tests::artifacts::{EGRESS_PROBE, REST};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{TOKEN, token_file};
use serde_json::{Value, json};

/// A host trusting the test publisher, with `egress` as its `[egress]` table.
fn host(egress: Value) -> Host {
    let mut config = gatehouse_tests::config(&["gatehouse.*", "test.*"], &[]);
    config.egress = serde_json::from_value::<EgressConfig>(egress).unwrap();
    Host::new(config).unwrap()
}

/// `[egress]` granting `adapter` GET and POST on the upstream's `/api/` (with the token bound),
/// GET on the same upstream via `localhost` and via IPv4-mapped IPv6, loopback allowed or not.
fn egress(adapter: &str, upstream: &Upstream, allow_loopback: bool) -> Value {
    let port = upstream.port;
    json!({
        "allow_private": if allow_loopback { json!(["127.0.0.0/8"]) } else { json!([]) },
        "grant": [
            {
                "adapter": adapter,
                "url": format!("http://127.0.0.1:{port}/api/"),
                "methods": ["GET", "POST"],
                "credentials": { "api_token": { "file": token_file(), "scheme": "Bearer" } },
            },
            { "adapter": adapter, "url": format!("http://localhost:{port}/"), "methods": ["GET"] },
            { "adapter": adapter, "url": format!("http://[::ffff:127.0.0.1]:{port}/"), "methods": ["GET"] },
        ],
    })
}

/// A host with `adapter` installed and granted [`egress`] to `upstream`.
fn granted(adapter: &Artifact, upstream: &Upstream, allow_loopback: bool) -> Host {
    let host = host(egress(adapter.manifest().id(), upstream, allow_loopback));
    host.install_adapter(&adapter.signed()).unwrap();
    host
}

fn probe(requests: &Value) -> Value {
    json!({ "requests": requests })
}

fn results(envelope: &ToolResultEnvelope) -> Vec<Value> {
    assert!(envelope.is_ok(), "{envelope:#?}");
    envelope.structured_content.as_ref().unwrap()["results"]
        .as_array()
        .unwrap()
        .clone()
}

fn codes(envelope: &ToolResultEnvelope) -> Vec<&str> {
    envelope.egress.iter().map(|a| a.code.as_str()).collect()
}

#[tokio::test]
async fn rest_get_reaches_the_upstream_with_the_injected_credential() {
    let upstream = Upstream::start().await;
    let host = granted(&REST, &upstream, true);
    let call = ToolCallEnvelope::new(
        "default",
        "gatehouse.rest.get",
        json!({ "url": upstream.url("/api/items/7") }),
    );
    let trace_id = call.trace_id.clone();
    let envelope = host.call(call).await;

    assert!(envelope.is_ok(), "{envelope:#?}");
    assert_eq!(
        envelope.structured_content,
        Some(
            json!({ "status": 200, "body": { "ok": true, "method": "GET", "path": "/api/items/7" } })
        )
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert!(
        seen[0].headers["traceparent"]
            .to_str()
            .unwrap()
            .starts_with(&format!("00-{trace_id}-"))
    );
    assert!(seen[0].headers.get("idempotency-key").is_none());
    assert_eq!(
        envelope.egress,
        vec![EgressAttempt {
            method: "GET".to_owned(),
            destination: format!("http://127.0.0.1:{}/api/items/7", upstream.port),
            address: Some(([127, 0, 0, 1], upstream.port).into()),
            allowed: true,
            code: "ok".to_owned(),
            reason: String::new(),
            status: Some(200),
            request_bytes: 0,
            response_bytes: seen_len(&envelope),
        }]
    );
    let whole = serde_json::to_string(&envelope).unwrap();
    assert!(
        !whole.contains(TOKEN),
        "the credential leaked into the envelope"
    );
}

fn seen_len(envelope: &ToolResultEnvelope) -> u64 {
    serde_json::to_vec(&envelope.structured_content.as_ref().unwrap()["body"])
        .unwrap()
        .len() as u64
}

#[tokio::test]
async fn rest_send_carries_the_calls_idempotency_key() {
    let upstream = Upstream::start().await;
    let host = granted(&REST, &upstream, true);
    let mut call = ToolCallEnvelope::new(
        "default",
        "gatehouse.rest.send",
        json!({ "url": upstream.url("/api/items"), "method": "POST", "body": { "name": "widget" } }),
    );
    call.idempotency_key = Some("idem-42".to_owned());
    let envelope = host.call(call).await;

    assert!(envelope.is_ok(), "{envelope:#?}");
    let seen = upstream.seen();
    assert_eq!(seen[0].method, "POST");
    assert_eq!(&seen[0].body[..], br#"{"name":"widget"}"#);
    assert_eq!(seen[0].headers["idempotency-key"], "idem-42");
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(codes(&envelope), ["ok"]);
    assert_eq!(envelope.egress[0].request_bytes, 17);
}

#[tokio::test]
async fn rest_denial_is_a_typed_tool_error_and_recorded() {
    let upstream = Upstream::start().await;
    let host = granted(&REST, &upstream, true);
    // PUT is requested by the manifest but not granted by the operator.
    let mut call = ToolCallEnvelope::new(
        "default",
        "gatehouse.rest.send",
        json!({ "url": upstream.url("/api/items/1"), "method": "PUT", "body": {} }),
    );
    call.idempotency_key = Some("k".to_owned());
    let envelope = host.call(call).await;

    let error = envelope.error.as_ref().unwrap();
    assert_eq!(error.code, "EGRESS_DENIED");
    assert_eq!(codes(&envelope), ["method_not_granted"]);
    assert!(
        envelope.egress[0].reason.contains("PUT is not granted"),
        "{:?}",
        envelope.egress
    );
    assert!(upstream.seen().is_empty());
}

#[tokio::test]
async fn the_guest_cannot_read_or_override_the_credential() {
    let upstream = Upstream::start().await;
    let host = granted(&EGRESS_PROBE, &upstream, true);
    let args = probe(&json!([{
        "method": "GET",
        "url": upstream.url("/api/whoami"),
        "headers": [["authorization", "Bearer forged"], ["cookie", "a=b"], ["x-trace", "1"]],
    }]));
    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.egress-probe.read",
            args,
        ))
        .await;

    let structured = envelope.structured_content.clone().unwrap();
    assert_eq!(
        structured["env"],
        json!([]),
        "the guest sees no environment"
    );
    assert_eq!(results(&envelope)[0]["status"], 200);
    let seen = upstream.seen();
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert!(seen[0].headers.get("cookie").is_none());
    assert_eq!(seen[0].headers["x-trace"], "1");
    assert!(!serde_json::to_string(&envelope).unwrap().contains(TOKEN));
}

#[tokio::test]
async fn each_denial_reaches_the_guest_as_denied_and_is_recorded() {
    let upstream = Upstream::start().await;
    let host = granted(&EGRESS_PROBE, &upstream, true);
    let port = upstream.port;
    let cases = [
        (
            "read",
            "GET",
            format!("http://127.0.0.1:{port}/private/x"),
            "no_matching_grant",
        ),
        (
            "read",
            "GET",
            "http://example.invalid/".to_owned(),
            "no_matching_grant",
        ),
        (
            "write",
            "DELETE",
            format!("http://127.0.0.1:{port}/api/1"),
            "method_not_granted",
        ),
        (
            "read",
            "POST",
            format!("http://127.0.0.1:{port}/api/1"),
            "approval_mode",
        ),
    ];
    for (n, (capability, method, url, code)) in cases.into_iter().enumerate() {
        let args = probe(&json!([{ "method": method, "url": url, "body": "x" }]));
        let mut call =
            ToolCallEnvelope::new("default", format!("test.egress-probe.{capability}"), args);
        // `write` is write-class: the pipeline requires a key before anything runs. One key
        // per request: reusing a key for a different request is a conflict.
        call.idempotency_key = Some(format!("k-{n}"));
        let envelope = host.call(call).await;
        assert_eq!(
            results(&envelope),
            [json!({ "error": "denied" })],
            "{method} {url}"
        );
        assert_eq!(codes(&envelope), [code], "{method} {url}");
        assert!(!envelope.egress[0].allowed);
    }
    assert!(upstream.seen().is_empty());

    // The same POST in a network-mode call goes through.
    let args = probe(&json!([{ "method": "POST", "url": upstream.url("/api/1"), "body": "x" }]));
    let mut call = ToolCallEnvelope::new("default", "test.egress-probe.write", args);
    call.idempotency_key = Some("k-post".to_owned());
    let envelope = host.call(call).await;
    assert_eq!(results(&envelope)[0]["status"], 200);
    assert_eq!(codes(&envelope), ["ok"]);
}

#[tokio::test]
async fn loopback_is_refused_without_the_allowance_by_ip_name_and_mapped_ipv6() {
    let upstream = Upstream::start().await;
    let host = granted(&REST, &upstream, false);
    let port = upstream.port;
    for url in [
        format!("http://127.0.0.1:{port}/api/x"),
        format!("http://localhost:{port}/api/x"),
        format!("http://[::ffff:127.0.0.1]:{port}/api/x"),
    ] {
        let envelope = host
            .call(ToolCallEnvelope::new(
                "default",
                "gatehouse.rest.get",
                json!({ "url": url }),
            ))
            .await;
        assert_eq!(
            envelope.error.as_ref().unwrap().code,
            "EGRESS_DENIED",
            "{url}"
        );
        assert_eq!(codes(&envelope), ["address_not_allowed"], "{url}");
        assert!(envelope.egress[0].reason.contains("loopback"), "{url}");
    }
    assert!(upstream.seen().is_empty());
}

#[tokio::test]
async fn a_redirect_to_a_forbidden_address_is_refused() {
    let upstream = Upstream::start().await;
    // A wide grant (any host, GET) so the redirect target passes the rules and meets the
    // address check.
    let host = host(json!({
        "allow_private": ["127.0.0.0/8"],
        "grant": [{ "adapter": "test.egress-probe", "url": "http://*:*", "methods": ["GET"] }],
    }));
    host.install_adapter(&EGRESS_PROBE.signed()).unwrap();

    let args = probe(&json!([{ "method": "GET", "url": upstream.url("/redirect/metadata") }]));
    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.egress-probe.read",
            args,
        ))
        .await;
    assert_eq!(results(&envelope), [json!({ "error": "denied" })]);
    assert_eq!(codes(&envelope), ["ok", "address_not_allowed"]);
    assert_eq!(envelope.egress[0].status, Some(302));
    assert_eq!(
        envelope.egress[1].destination,
        "http://169.254.169.254:80/latest/meta-data/"
    );
    assert!(envelope.egress[1].reason.contains("cloud metadata"));

    // A redirect within the grant is followed, through the gate again.
    let args = probe(&json!([{ "method": "GET", "url": upstream.url("/redirect/local") }]));
    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.egress-probe.read",
            args,
        ))
        .await;
    assert_eq!(results(&envelope)[0]["status"], 200);
    assert_eq!(codes(&envelope), ["ok", "ok"]);
}

#[tokio::test]
async fn the_request_budget_cuts_off_a_looping_adapter() {
    let upstream = Upstream::start().await;
    let mut egress = egress("test.egress-probe", &upstream, true);
    egress["max_requests"] = json!(3);
    let host = host(egress);
    host.install_adapter(&EGRESS_PROBE.signed()).unwrap();
    let args = json!({
        "requests": [{ "method": "GET", "url": upstream.url("/api/loop") }],
        "repeat": 1000,
    });
    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "test.egress-probe.read",
            args,
        ))
        .await;
    let results = results(&envelope);
    assert_eq!(results.len(), 4);
    assert_eq!(results[3], json!({ "error": "denied" }));
    assert_eq!(codes(&envelope), ["ok", "ok", "ok", "request_budget"]);
    assert_eq!(upstream.seen().len(), 3);
}

#[tokio::test]
async fn a_grant_the_manifest_did_not_request_fails_the_load() {
    let host = host(json!({
        "grant": [{ "adapter": "gatehouse.rest", "url": "http://127.0.0.1:1/", "methods": ["TRACE"] }],
    }));
    let error = host.load_adapter(&REST.signed()).unwrap_err().to_string();
    assert!(error.contains("grants method `TRACE`"), "{error}");
    assert!(error.contains("remove it from the grant"), "{error}");
}
