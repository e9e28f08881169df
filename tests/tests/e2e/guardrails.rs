//! The first-party guardrails over a real `gatehouse serve` with a real loopback upstream:
//! `gatehouse.secrets` stops a call whose arguments carry a secret of each kind, and has the
//! host mask each kind in a result; `gatehouse.redact` masks the identifiers its config names.
//! Each secret is then looked for where it must not be: the audit entries (and the SQLite
//! store file itself, for calls that leave nothing else behind), the gateway's debug log and
//! the approval view, even with the sensitive arguments revealed.

use gatehouse_host::config::EgressConfig;
use gatehouse_tests::admin::{APPROVER, AdminGateway};
use gatehouse_tests::artifacts::{REST, SECRETS};
use gatehouse_tests::bind;
use gatehouse_tests::cli::s;
use gatehouse_tests::mcp::record;
use gatehouse_tests::upstream::{Upstream, field, secrets, spellings};
use serde_json::{Value, json};

/// A gateway serving `gatehouse.rest` (granted the upstream) beside echo and the ledger, with
/// `gatehouse.secrets` bound first: denying on `gatehouse.rest.*`, pausing for approval on
/// echo; and `gatehouse.redact` masking customer ids on echo. Logs at debug.
async fn gateway(upstream: &Upstream) -> AdminGateway {
    let dir = tempfile::tempdir().unwrap();
    let rest = dir.path().join("rest.wasm");
    let guard = dir.path().join("secrets.wasm");
    std::fs::write(&rest, REST.signed()).unwrap();
    std::fs::write(&guard, SECRETS.signed()).unwrap();
    let extra = format!(
        "\n[plugins]\nadapters = [{:?}]\npolicies = [{:?}]\n",
        s(&rest),
        s(&guard)
    );
    let port = upstream.port;
    let gateway = AdminGateway::start_logging(
        "test.ledger.*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        &extra,
        move |host| {
            host.egress = serde_json::from_value::<EgressConfig>(json!({
                "grant": [{
                    "allow_private": ["127.0.0.0/8"],
                    "adapter": "gatehouse.rest",
                    "url": format!("http://127.0.0.1:{port}/"),
                    "methods": ["GET", "POST"],
                    "credentials": { "api_token": { "file": gatehouse_tests::token_file(), "scheme": "Bearer" } },
                }],
            }))
            .unwrap();
            let policies = &mut host.pipeline.policies;
            policies.insert(0, bind("gatehouse.secrets", "gatehouse.rest.*", -2, json!({})));
            policies.insert(
                0,
                bind(
                    "gatehouse.secrets",
                    "gatehouse.echo.*",
                    -2,
                    json!({ "arguments": "require_approval" }),
                ),
            );
            policies.push(bind(
                "gatehouse.redact",
                "gatehouse.echo.*",
                1,
                json!({ "pii": [], "identifiers": { "customer_id": "CUS-[0-9]{8}" } }),
            ));
        },
        "debug",
    )
    .await;
    // The plugins' files stay with the gateway's own directory from here on.
    drop(dir);
    gateway
}

/// Everything the store file (and its write-ahead log) holds, as text.
fn store_bytes(gateway: &AdminGateway) -> String {
    let mut all = Vec::new();
    for suffix in ["", "-wal"] {
        let path = format!("{}{suffix}", gateway.store.display());
        all.extend(std::fs::read(&path).unwrap_or_default());
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// The part of a secret that must not appear: the value without its `Bearer ` prefix.
fn core(secret: &str) -> &str {
    secret.strip_prefix("Bearer ").unwrap_or(secret)
}

/// What the upstream serves at `path`, got through `gatehouse.rest`: the caller's result and
/// the call's audit entry.
async fn served(gateway: &AdminGateway, upstream: &Upstream, path: &str) -> (Value, Value) {
    let got = gateway
        .call(
            "gatehouse.rest.get",
            json!({ "url": upstream.url(path) }),
            Value::Null,
        )
        .await;
    assert_eq!(record(&got)["outcome"], "OK", "{got}");
    assert_eq!(upstream.seen().len(), 1, "the upstream served the secrets");
    let audit = gateway.audit_entry(&got).await;
    (got, audit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_secret_in_an_argument_stops_the_call_and_is_kept_nowhere() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let url = upstream.url("/orders");
    for (i, (kind, secret)) in secrets().into_iter().enumerate() {
        let sent = gateway
            .call(
                "gatehouse.rest.send",
                json!({ "url": url, "method": "POST", "body": { "to": "ann", field(kind): secret } }),
                json!({ "gatehouse/idempotency_key": format!("send-{i}") }),
            )
            .await;
        let said = sent.to_string();
        assert_eq!(record(&sent)["outcome"], "POLICY_BLOCKED", "{kind}: {sent}");
        assert!(
            said.contains(&format!("{kind} at /body/{}", field(kind))),
            "{kind}: {sent}"
        );
        assert!(!said.contains(core(&secret)), "{kind} in the reply: {sent}");

        // The audit entry: the arguments kept masked, what was found named.
        let audit = gateway.audit_entry(&sent).await;
        let text = audit.to_string();
        assert!(
            !text.contains(core(&secret)),
            "{kind} in the audit log: {audit}"
        );
        let entry = &audit["record"];
        assert_eq!(
            entry["call"]["args"]["body"][field(kind)],
            format!("[SECRET:{kind}]"),
            "{entry}"
        );
        let decision = &entry["result"]["policy_decision"];
        assert_eq!(
            decision["modules"][0]["module_id"], "gatehouse.secrets",
            "{entry}"
        );
        assert!(
            decision["masked"]
                .as_array()
                .unwrap()
                .contains(&json!({ "kind": kind, "at": format!("args/body/{}", field(kind)) })),
            "{entry}"
        );
    }
    // The upstream saw none of the calls; the store file and the debug log hold none of the
    // secrets.
    assert!(upstream.seen().is_empty(), "{:?}", upstream.seen());
    let (store, log) = (store_bytes(&gateway), gateway.log());
    assert!(log.contains("DEBUG"), "the log is at debug: {log}");
    for (kind, secret) in secrets() {
        assert!(!store.contains(core(&secret)), "{kind} in the store file");
        assert!(!log.contains(core(&secret)), "{kind} in the log:\n{log}");
    }

    // Clean arguments go through, and the upstream sees them.
    let clean = gateway
        .call(
            "gatehouse.rest.send",
            json!({ "url": url, "method": "POST", "body": { "to": "ann", "note": "hello" } }),
            json!({ "gatehouse/idempotency_key": "send-clean" }),
        )
        .await;
    assert_eq!(record(&clean)["outcome"], "OK", "{clean}");
    assert_eq!(upstream.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_secret_in_a_result_is_masked_and_named_and_kept_nowhere() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let (got, audit) = served(&gateway, &upstream, "/secrets").await;
    let delivered = got.to_string();
    let masked = &audit["record"]["result"]["policy_decision"]["masked"];
    assert!(masked.is_array(), "{audit}");
    for (kind, secret) in secrets() {
        assert!(
            !delivered.contains(core(&secret)),
            "{kind} delivered: {got}"
        );
        assert!(
            delivered.contains(&format!("[SECRET:{kind}]")),
            "{kind} not masked: {got}"
        );
        assert!(
            masked.as_array().unwrap().iter().any(|f| f["kind"] == kind
                && f["at"].as_str().unwrap().starts_with("structured_content")),
            "{kind} not named: {masked}"
        );
        assert!(
            !audit.to_string().contains(core(&secret)),
            "{kind} in the audit log"
        );
    }
    let (store, log) = (store_bytes(&gateway), gateway.log());
    for (kind, secret) in secrets() {
        assert!(!store.contains(core(&secret)), "{kind} in the store file");
        assert!(!log.contains(core(&secret)), "{kind} in the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ordinary_spelling_of_a_secret_in_an_argument_stops_the_call() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let url = upstream.url("/orders");
    for (i, spelling) in spellings().into_iter().enumerate() {
        let mut body = json!({ "to": "ann" });
        body[&spelling.key] = spelling.value.clone();
        let sent = gateway
            .call(
                "gatehouse.rest.send",
                json!({ "url": url, "method": "POST", "body": body }),
                json!({ "gatehouse/idempotency_key": format!("spelled-{i}") }),
            )
            .await;
        let (kind, secret, said) = (spelling.kind, &spelling.secret, sent.to_string());
        assert_eq!(record(&sent)["outcome"], "POLICY_BLOCKED", "{kind}: {sent}");
        assert!(
            said.contains(&format!("{kind} at /body{}", spelling.at)),
            "{kind}: {sent}"
        );
        assert!(!said.contains(secret), "{kind} in the reply: {sent}");

        let audit = gateway.audit_entry(&sent).await;
        assert!(
            !audit.to_string().contains(secret),
            "{kind} in the audit log: {audit}"
        );
        let entry = &audit["record"];
        let module = &entry["result"]["policy_decision"]["modules"][0];
        assert_eq!(module["module_id"], "gatehouse.secrets", "{entry}");
        assert_eq!(
            module["reasons"][0]["code"], "SECRET_IN_ARGUMENTS",
            "{entry}"
        );
        assert!(
            entry["call"]["args"]["body"]
                .to_string()
                .contains(&format!("[SECRET:{kind}]")),
            "{entry}"
        );
        assert!(upstream.seen().is_empty(), "{kind}: {:?}", upstream.seen());
    }
    let (store, log) = (store_bytes(&gateway), gateway.log());
    for spelling in spellings() {
        let (kind, secret) = (spelling.kind, &spelling.secret);
        assert!(!store.contains(secret), "{kind} in the store file");
        assert!(!log.contains(secret), "{kind} in the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ordinary_spelling_of_a_secret_in_a_result_is_masked() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let (got, audit) = served(&gateway, &upstream, "/secrets/spellings").await;
    let delivered = got.to_string();
    let masked = &audit["record"]["result"]["policy_decision"]["masked"];
    let (store, log) = (store_bytes(&gateway), gateway.log());
    for spelling in spellings() {
        let (kind, secret) = (spelling.kind, &spelling.secret);
        assert!(!delivered.contains(secret), "{kind} delivered: {got}");
        assert!(
            masked.as_array().unwrap().contains(
                &json!({ "kind": kind, "at": format!("structured_content/body{}", spelling.at) })
            ),
            "{kind} at {} not named: {masked}",
            spelling.at
        );
        assert!(
            !audit.to_string().contains(secret),
            "{kind} in the audit log"
        );
        assert!(!store.contains(secret), "{kind} in the store file");
        assert!(!log.contains(secret), "{kind} in the log:\n{log}");
    }
    // The key that was an access key, delivered masked.
    assert_eq!(
        got["structuredContent"]["body"]["[SECRET:cloud_access_key]"], "read-only",
        "{got}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_call_shows_the_approver_masked_secrets_and_identifiers() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream).await;
    let (_, jwt) = secrets()[3].clone();
    let message = format!("refund CUS-12345678, session {jwt}");
    let paused = gateway
        .call(
            "gatehouse.echo.echo",
            json!({ "message": message }),
            Value::Null,
        )
        .await;
    assert_eq!(record(&paused)["outcome"], "APPROVAL_REQUIRED", "{paused}");
    assert!(!paused.to_string().contains(&jwt), "{paused}");
    let id = record(&paused)["approval_id"].as_str().unwrap().to_owned();

    // The approver's view, asked to reveal what is hidden: masked all the same.
    for path in [
        format!("/v1/approvals/{id}"),
        format!("/v1/approvals/{id}?reveal=true"),
    ] {
        let (status, view) = gateway.admin("GET", &path, Some(APPROVER), None).await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            view["call"]["args"]["message"], "refund [CUSTOMER_ID], session [SECRET:jwt]",
            "{view}"
        );
        assert!(!view.to_string().contains(&jwt), "{view}");
        assert!(!view.to_string().contains("CUS-12345678"), "{view}");
    }
    let audit = gateway.audit_entry(&paused).await;
    assert!(!audit.to_string().contains(&jwt), "{audit}");
    assert!(!audit.to_string().contains("CUS-12345678"), "{audit}");

    // Approved, the adapter gets the arguments as sent; the caller, the result masked.
    let (status, body) = gateway
        .admin(
            "POST",
            &format!("/v1/approvals/{id}/approve"),
            Some(APPROVER),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = gateway
        .call(
            "gatehouse.echo.echo",
            json!({ "message": message }),
            json!({ "gatehouse/approval_id": id }),
        )
        .await;
    assert_eq!(record(&done)["outcome"], "OK", "{done}");
    let structured = &done["structuredContent"];
    assert_eq!(
        structured["message"], "refund [CUSTOMER_ID], session [SECRET:jwt]",
        "{done}"
    );
    assert_eq!(
        structured["length"],
        message.chars().count(),
        "the adapter counted the message as sent: {done}"
    );
    let log = gateway.log();
    assert!(!log.contains(&jwt), "the log:\n{log}");
    assert!(!log.contains("CUS-12345678"), "the log:\n{log}");
}
