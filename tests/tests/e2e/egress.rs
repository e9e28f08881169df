//! Egress through real guests: the `gatehouse.rest` adapter and the `egress-probe` test
//! program, against a hyper upstream on loopback. Rule-by-rule checks live with the gate
//! (host/src/egress/tests.rs); these prove the outcomes reach a guest as the typed error and
//! land on the result envelope.

use gatehouse_host::envelope::EgressAttempt;
use gatehouse_host::{Host, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_tests::Artifact;
use gatehouse_tests::artifacts::{EGRESS_PROBE, REST};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{TOKEN, token_file};
use serde_json::{Value, json};

/// A host trusting the test publisher, with `egress` as its `[egress]` table.
fn host(egress: Value) -> Host {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &[])
        .egress(egress)
        .build()
}

/// `[egress]` granting `adapter` GET and POST on the upstream's `/api/` (with the token bound,
/// and the guest header `x-trace` allowed), GET on the same upstream via `localhost` and via
/// IPv4-mapped IPv6, loopback allowed or not.
fn egress(adapter: &str, upstream: &Upstream, allow_loopback: bool) -> Value {
    let port = upstream.port;
    let allow = if allow_loopback {
        json!(["127.0.0.0/8"])
    } else {
        json!([])
    };
    json!({
        "grant": [
            {
                "adapter": adapter,
                "url": format!("http://127.0.0.1:{port}/api/"),
                "methods": ["GET", "POST"],
                "credentials": { "api_token": { "file": token_file(), "scheme": "Bearer" } },
                "allow_private": allow,
                "headers": ["x-trace"],
            },
            { "adapter": adapter, "url": format!("http://localhost:{port}/"), "methods": ["GET"], "allow_private": allow },
            { "adapter": adapter, "url": format!("http://[::ffff:127.0.0.1]:{port}/"), "methods": ["GET"], "allow_private": allow },
        ],
    })
}

/// A host with `adapter` installed and granted [`egress`] to `upstream`.
fn granted(adapter: &Artifact, upstream: &Upstream, allow_loopback: bool) -> Host {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &[])
        .egress(egress(adapter.manifest().id(), upstream, allow_loopback))
        .adapters(&[*adapter])
        .build()
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
            credentials: Vec::new(),
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
    assert!(
        !error.retryable,
        "the same request is refused again: {error:#?}"
    );
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
        "grant": [{ "adapter": "test.egress-probe", "url": "http://*:*", "methods": ["GET"], "allow_private": ["127.0.0.0/8"] }],
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

// Issue 9, item 4: egress hardening, from the adapter's side.

/// Sends one request from the probe (`write` when `key` is given) and returns the envelope.
async fn probe_one(host: &Host, request: Value, key: Option<&str>) -> ToolResultEnvelope {
    let capability = if key.is_some() { "write" } else { "read" };
    let mut call = ToolCallEnvelope::new(
        "default",
        format!("test.egress-probe.{capability}"),
        probe(&json!([request])),
    );
    call.idempotency_key = key.map(str::to_owned);
    host.call(call).await
}

#[tokio::test]
async fn a_private_range_opened_for_one_adapter_stays_closed_to_another() {
    let upstream = Upstream::start().await;
    let port = upstream.port;
    // The operator opens loopback for `gatehouse.rest`'s grant only. The probe is granted a
    // name (`localhost` standing for a vendor host whose DNS the vendor controls) that
    // resolves into that range.
    let host = host(json!({
        "grant": [
            {
                "adapter": "gatehouse.rest",
                "url": format!("http://127.0.0.1:{port}/api/"),
                "methods": ["GET"],
                "allow_private": ["127.0.0.0/8"],
            },
            { "adapter": "test.egress-probe", "url": format!("http://localhost:{port}/"), "methods": ["GET"] },
        ],
    }));
    host.install_adapter(&REST.signed()).unwrap();
    host.install_adapter(&EGRESS_PROBE.signed()).unwrap();

    let envelope = probe_one(
        &host,
        json!({ "method": "GET", "url": format!("http://localhost:{port}/api/x") }),
        None,
    )
    .await;
    assert_eq!(results(&envelope), [json!({ "error": "denied" })]);
    assert_eq!(codes(&envelope), ["address_not_allowed"]);
    assert!(
        upstream.seen().is_empty(),
        "the probe reached the private range"
    );

    // The adapter the range was opened for still reaches it.
    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.rest.get",
            json!({ "url": upstream.url("/api/x") }),
        ))
        .await;
    assert_eq!(codes(&envelope), ["ok"]);
    assert_eq!(upstream.seen().len(), 1);
}

#[tokio::test]
async fn special_purpose_addresses_are_refused_before_any_connection() {
    // Any host, loopback allowed: translation and tunnelling prefixes that embed 127.0.0.1,
    // documentation and benchmarking ranges are still special-purpose.
    let host = host(json!({
        "grant": [{
            "adapter": "test.egress-probe",
            "url": "http://*:*",
            "methods": ["GET"],
            "allow_private": ["127.0.0.0/8"],
        }],
    }));
    host.install_adapter(&EGRESS_PROBE.signed()).unwrap();
    for (url, class) in [
        ("http://[64:ff9b::7f00:1]:9/", "translation"),
        ("http://[2002:7f00:1::1]:9/", "tunnelling"),
        ("http://[2001:0:7f00:1::1]:9/", "tunnelling"),
        ("http://192.0.2.1:9/", "documentation"),
        ("http://[2001:db8::1]:9/", "documentation"),
        ("http://198.18.0.1:9/", "benchmarking"),
        ("http://192.0.0.170:9/", "translation"),
        ("http://[fec0::1]:9/", "reserved"),
    ] {
        let envelope = probe_one(&host, json!({ "method": "GET", "url": url }), None).await;
        assert_eq!(results(&envelope), [json!({ "error": "denied" })], "{url}");
        assert_eq!(codes(&envelope), ["address_not_allowed"], "{url}");
        let attempt = &envelope.egress[0];
        assert!(attempt.reason.contains(class), "{url}: {}", attempt.reason);
        assert_eq!(attempt.address, None, "{url}: no connection attempted");
    }
}

#[tokio::test]
async fn encoded_path_tricks_do_not_escape_the_granted_prefix() {
    let upstream = Upstream::start().await;
    // The probe holds a credentialed grant for `/api/` only.
    let host = granted(&EGRESS_PROBE, &upstream, true);
    let port = upstream.port;
    for path in [
        "/api/..%2fadmin",
        "/api/..%2Fadmin",
        "/api/..%5cadmin",
        "/api/..;/admin",
        "/api/%3b/x",
        "/api/%252e%252e/admin",
        "/api/%2e%252e/admin",
    ] {
        let url = format!("http://127.0.0.1:{port}{path}");
        let envelope = probe_one(&host, json!({ "method": "GET", "url": url }), None).await;
        assert_eq!(results(&envelope), [json!({ "error": "denied" })], "{path}");
        assert_eq!(codes(&envelope), ["ambiguous_path"], "{path}");
    }
    // Dot segments the URL parser resolves leave the prefix, so no grant covers them.
    for path in ["/api/%2e%2e/admin", "/api/.%2E/admin", "/api;/../admin"] {
        let url = format!("http://127.0.0.1:{port}{path}");
        let envelope = probe_one(&host, json!({ "method": "GET", "url": url }), None).await;
        assert_eq!(codes(&envelope), ["no_matching_grant"], "{path}");
    }
    assert!(
        upstream.seen().is_empty(),
        "a request outside /api/ reached the upstream: {:?}",
        upstream.seen()
    );
}

#[tokio::test]
async fn guest_headers_outside_the_allow_list_never_reach_the_upstream() {
    let upstream = Upstream::start().await;
    let host = granted(&EGRESS_PROBE, &upstream, true);
    let headers = [
        ["x-http-method-override", "DELETE"],
        ["x-method-override", "DELETE"],
        ["x-original-url", "/admin"],
        ["x-rewrite-url", "/admin"],
        ["x-forwarded-for", "10.0.0.1"],
        ["x-forwarded-host", "admin.internal"],
        ["forwarded", "for=10.0.0.1"],
        ["x-real-ip", "10.0.0.1"],
        ["accept", "application/json"],
        ["x-trace", "granted"],
    ];
    let envelope = probe_one(
        &host,
        json!({ "method": "GET", "url": upstream.url("/api/items"), "headers": headers }),
        None,
    )
    .await;
    assert_eq!(results(&envelope)[0]["status"], 200);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    for [name, _] in &headers[..8] {
        assert!(
            seen[0].headers.get(*name).is_none(),
            "{name} reached the upstream"
        );
    }
    assert_eq!(seen[0].headers["accept"], "application/json");
    assert_eq!(seen[0].headers["x-trace"], "granted");
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
}

#[tokio::test]
async fn an_idempotency_key_that_cannot_travel_is_refused_before_anything_runs() {
    let upstream = Upstream::start().await;
    let host = granted(&EGRESS_PROBE, &upstream, true);
    let long = "k".repeat(256);
    for key in [
        "bad key",
        "tab\tkey",
        "line\nbreak",
        "caf\u{e9}",
        long.as_str(),
        "",
    ] {
        let envelope = probe_one(
            &host,
            json!({ "method": "POST", "url": upstream.url("/api/items"), "body": "{}" }),
            Some(key),
        )
        .await;
        assert_eq!(
            (envelope.status, envelope.outcome),
            (Status::Rejected, OutcomeCode::IdempotencyKeyInvalid),
            "{key:?}: {envelope:#?}"
        );
        assert!(
            envelope.egress.is_empty() && envelope.usage.is_none(),
            "{key:?}: nothing ran"
        );
    }
    assert!(
        upstream.seen().is_empty(),
        "a write went out without its key"
    );
    // A printable key of 255 characters goes out as the header.
    let key = "k".repeat(255);
    let envelope = probe_one(
        &host,
        json!({ "method": "POST", "url": upstream.url("/api/items"), "body": "{}" }),
        Some(&key),
    )
    .await;
    assert_eq!(codes(&envelope), ["ok"]);
    assert_eq!(upstream.seen()[0].headers["idempotency-key"], key.as_str());
}

/// `allow_private` takes a bare address as that one address (`127.0.0.1/32`).
#[tokio::test]
async fn a_bare_ip_in_allow_private_allows_that_one_address() {
    let upstream = Upstream::start().await;
    let port = upstream.port;
    let host = host(json!({
        "grant": [{
            "adapter": "gatehouse.rest",
            "url": format!("http://127.0.0.1:{port}/api/"),
            "methods": ["GET"],
            "allow_private": ["127.0.0.1"],
        }],
    }));
    host.install_adapter(&REST.signed()).unwrap();
    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.rest.get",
            json!({ "url": upstream.url("/api/items/1") }),
        ))
        .await;
    assert!(envelope.is_ok(), "{envelope:#?}");
    assert_eq!(codes(&envelope), ["ok"], "{:#?}", envelope.egress);
}
