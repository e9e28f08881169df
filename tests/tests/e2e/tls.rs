//! HTTPS egress: real guests against a loopback TLS upstream whose certificate a throwaway CA
//! issued. Trusting the CA through `[egress] extra_root_certificates` lets the request through
//! with the credential; an untrusted issuer, a certificate for another name, or a peer that
//! does not speak TLS stops it in the handshake, before any header (so any credential) is
//! sent, and the guest sees the typed TLS error.

use gatehouse_host::envelope::EgressAttempt;
use gatehouse_host::{
    Host, HostConfig, HostError, OutcomeCode, ToolCallEnvelope, ToolResultEnvelope,
};
use gatehouse_tests::Artifact;
use gatehouse_tests::artifacts::{EGRESS_PROBE, REST};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::upstream::{TestCa, Upstream, write_file};
use gatehouse_tests::{TOKEN, token_file};
use serde_json::{Value, json};

/// The test publisher trusted for `gatehouse.*` and `test.*` adapters, with `egress`.
fn trusting(egress: Value) -> HostBuilder {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &[]).egress(egress)
}

/// A host with `adapter` installed and granted, loopback allowed, GET and POST on the
/// upstream's port over https via `localhost` (the token bound) and GET via `127.0.0.1`;
/// `ca`, if given, trusted through `extra_root_certificates`.
fn host(adapter: &Artifact, upstream: &Upstream, ca: Option<&TestCa>) -> Host {
    let id = adapter.manifest().id().to_owned();
    let port = upstream.port;
    let roots: Vec<String> = ca
        .map(|ca| ca.pem_file().display().to_string())
        .into_iter()
        .collect();
    let token = json!({ "api_token": { "file": token_file(), "scheme": "Bearer" } });
    trusting(json!({
        "extra_root_certificates": roots,
        "grant": [
            { "adapter": id, "url": format!("https://localhost:{port}/"), "methods": ["GET", "POST"], "credentials": token, "allow_private": ["127.0.0.0/8", "::1/128"] },
            { "adapter": id, "url": format!("https://127.0.0.1:{port}/"), "methods": ["GET"], "allow_private": ["127.0.0.0/8"] },
        ],
    }))
    .adapters(&[*adapter])
    .build()
}

/// Sends one GET from the probe in a read-only call and returns the envelope.
async fn probe_get(host: &Host, url: &str) -> ToolResultEnvelope {
    let args = json!({ "requests": [{ "method": "GET", "url": url }] });
    host.call(ToolCallEnvelope::new(
        "default",
        "test.egress-probe.read",
        args,
    ))
    .await
}

/// The probe's single result, and the single recorded attempt.
fn outcome(envelope: &ToolResultEnvelope) -> (Value, EgressAttempt) {
    assert!(envelope.is_ok(), "{envelope:#?}");
    let results = envelope.structured_content.as_ref().unwrap()["results"].clone();
    assert_eq!(envelope.egress.len(), 1, "{:#?}", envelope.egress);
    (results[0].clone(), envelope.egress[0].clone())
}

#[tokio::test]
async fn rest_over_https_with_a_trusted_ca_reaches_the_upstream_with_the_credential() {
    let ca = TestCa::new();
    let upstream = Upstream::start_tls(&ca, &["localhost"]).await;
    let host = host(&REST, &upstream, Some(&ca));

    let url = upstream.url_via("localhost", "/api/items");
    let mut call = ToolCallEnvelope::new(
        "default",
        "gatehouse.rest.send",
        json!({ "url": url, "method": "POST", "body": { "name": "widget" } }),
    );
    call.idempotency_key = Some("idem-tls-1".to_owned());
    let envelope = host.call(call).await;

    assert!(envelope.is_ok(), "{envelope:#?}");
    assert_eq!(
        envelope.structured_content.as_ref().unwrap()["body"],
        json!({ "ok": true, "method": "POST", "path": "/api/items" })
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(seen[0].headers["idempotency-key"], "idem-tls-1");
    assert_eq!(
        seen[0].headers["host"],
        format!("localhost:{}", upstream.port)
    );
    assert_eq!(&seen[0].body[..], br#"{"name":"widget"}"#);
    let attempt = &envelope.egress[0];
    assert_eq!(attempt.code, "ok");
    assert_eq!(
        attempt.destination,
        format!("https://localhost:{}/api/items", upstream.port)
    );
    assert_eq!(
        attempt.address,
        Some(([127, 0, 0, 1], upstream.port).into())
    );
    assert_eq!(attempt.status, Some(200));
    assert!(!serde_json::to_string(&envelope).unwrap().contains(TOKEN));
}

#[tokio::test]
async fn an_ip_literal_is_checked_against_the_certificates_ip_names() {
    let ca = TestCa::new();
    let upstream = Upstream::start_tls(&ca, &["localhost", "127.0.0.1"]).await;
    let host = host(&EGRESS_PROBE, &upstream, Some(&ca));

    let envelope = probe_get(&host, &upstream.url("/ok")).await;
    let (result, attempt) = outcome(&envelope);
    assert_eq!(result["status"], 200, "{result}");
    assert_eq!(attempt.code, "ok");
}

#[tokio::test]
async fn an_untrusted_issuer_fails_the_handshake_before_anything_is_sent() {
    let ca = TestCa::new();
    let upstream = Upstream::start_tls(&ca, &["localhost"]).await;
    // The CA is not listed: only the system roots are trusted.
    let host = host(&REST, &upstream, None);

    let envelope = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.rest.get",
            json!({ "url": upstream.url_via("localhost", "/api/items") }),
        ))
        .await;
    assert_eq!(envelope.outcome, OutcomeCode::ToolError, "{envelope:#?}");
    let error = envelope.error.as_ref().expect("the call fails");
    assert_eq!(error.code, "UPSTREAM_TLS_FAILED", "{envelope:#?}");
    assert!(!error.retryable);
    assert_eq!(
        error.message,
        "TLS handshake with the upstream failed: its certificate is not trusted by the gateway \
         or does not name the host"
    );
    let attempt = &envelope.egress[0];
    assert!(attempt.allowed, "the gate allowed it; the handshake failed");
    assert_eq!(attempt.code, "tls_error");
    assert!(
        attempt.reason.contains("invalid peer certificate") && attempt.reason.contains("Unknown"),
        "{}",
        attempt.reason
    );
    assert_eq!(attempt.status, None);
    assert!(
        upstream.seen().is_empty(),
        "no request (and no credential) may reach an unverified peer"
    );
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let ca = TestCa::new();
    // Issued for `localhost` only; the request names 127.0.0.1.
    let upstream = Upstream::start_tls(&ca, &["localhost"]).await;
    let host = host(&EGRESS_PROBE, &upstream, Some(&ca));

    let envelope = probe_get(&host, &upstream.url("/ok")).await;
    let (result, attempt) = outcome(&envelope);
    assert_eq!(
        result,
        json!({ "error": "TLS handshake with the upstream failed: its certificate is not trusted by the gateway or does not name the host" })
    );
    assert_eq!(attempt.code, "tls_error");
    assert!(
        attempt.reason.contains("not valid for name"),
        "{}",
        attempt.reason
    );
    assert!(upstream.seen().is_empty());
}

#[tokio::test]
async fn a_plain_http_peer_on_an_https_url_is_a_tls_protocol_error() {
    let ca = TestCa::new();
    let plain = Upstream::start().await;
    let host = host(&EGRESS_PROBE, &plain, Some(&ca));

    let url = format!("https://localhost:{}/ok", plain.port);
    let envelope = probe_get(&host, &url).await;
    let (result, attempt) = outcome(&envelope);
    assert_eq!(
        result,
        json!({ "error": "TLS handshake with the upstream failed: protocol error (does the upstream speak TLS?)" })
    );
    assert_eq!(attempt.code, "tls_error");
    assert!(
        attempt.reason.starts_with("TLS handshake failed"),
        "{}",
        attempt.reason
    );
    assert!(plain.seen().is_empty());
}

#[test]
fn bad_root_certificate_files_fail_the_host_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let not_pem = write_file(dir.path(), "notes.pem", "just some text\n");
    let garbage = write_file(
        dir.path(),
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    );
    let cases = [
        (&missing, "cannot read"),
        (&not_pem, "holds no certificate"),
        (&garbage, "certificate #0"),
    ];
    for (path, expected) in cases {
        let config: HostConfig =
            trusting(json!({ "extra_root_certificates": [path] })).into_config();
        let error = Host::new(config).expect_err("a bad root file must fail the host");
        assert!(matches!(error, HostError::Tls(_)), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains(expected) && message.contains(&path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("extra_root_certificates"), "{message}");
    }
}

#[tokio::test]
async fn repeated_https_calls_reuse_one_connection_and_new_connections_resume_tls() {
    let ca = TestCa::new();
    let upstream = Upstream::start_tls(&ca, &["localhost"]).await;
    let host = host(&REST, &upstream, Some(&ca));

    // Three calls, each a fresh instance and gate: one connection, one full handshake.
    for _ in 0..3 {
        let envelope = host
            .call(ToolCallEnvelope::new(
                "default",
                "gatehouse.rest.get",
                json!({ "url": upstream.url_via("localhost", "/api/items") }),
            ))
            .await;
        assert!(envelope.is_ok(), "{envelope:#?}");
    }
    assert_eq!(upstream.connections(), 1);
    assert_eq!(upstream.resumed(), 0);

    // The upstream ends the kept connection after this answer, so the next call connects
    // anew, and resumes the TLS session instead of a full handshake.
    for path in ["/close/items", "/api/items"] {
        let envelope = host
            .call(ToolCallEnvelope::new(
                "default",
                "gatehouse.rest.get",
                json!({ "url": upstream.url_via("localhost", path) }),
            ))
            .await;
        assert!(envelope.is_ok(), "{envelope:#?}");
    }
    assert_eq!(upstream.connections(), 2);
    assert_eq!(upstream.resumed(), 1);
    assert_eq!(upstream.seen().len(), 5);
}
