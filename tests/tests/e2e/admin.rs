//! The admin API end to end: a `gatehouse serve` process (its own `[admin]` listener), driven
//! over loopback HTTP by raw requests and by `gatehouse admin ...`: a call paused for approval
//! over MCP, approved through the admin API, completes on the caller's retry; tokens and roles
//! are enforced (401, 403); the audit log is queried and verified; a policy pushed while calls
//! run fails none of them, and the audit log names the policy version and digest that decided
//! each call; health, readiness and metrics answer; an rmcp client, in both protocol versions,
//! meets every outcome path of a call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use gatehouse_tests::admin::{AGENT_KEY, APPROVER, AUDITOR, OPERATOR, SELF_APPROVER};
use gatehouse_tests::admin::{AdminGateway, request};
use gatehouse_tests::artifacts::POLICY_PROBE;
use gatehouse_tests::cli::gatehouse_async;
use gatehouse_tests::mcp::{client_speaking, record, rmcp_call, tool_names};
use gatehouse_tests::{bind, free_port};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

/// The policy probe among the modules `GET /v1/plugins` lists.
fn probe(plugins: &Value) -> &Value {
    plugins["policies"]
        .as_array()
        .and_then(|policies| policies.iter().find(|p| p["id"] == "test.policy-probe"))
        .unwrap_or_else(|| panic!("the probe is served: {plugins}"))
}

fn transfer_args() -> Value {
    json!({ "amount": 1200, "currency": "EUR", "note": "refund" })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_paused_over_mcp_is_approved_through_the_admin_api_and_its_retry_completes() {
    let gateway = AdminGateway::start(
        "test.ledger.*",
        json!({ "verdict": "require_approval" }),
        "1.0.0",
        "",
    )
    .await;
    let meta = json!({ "gatehouse/idempotency_key": "refund-1" });
    let paused = gateway
        .call("test.ledger.transfer", transfer_args(), meta.clone())
        .await;
    assert_eq!(record(&paused)["outcome"], "APPROVAL_REQUIRED", "{paused}");
    let id = record(&paused)["approval_id"].as_str().unwrap().to_owned();
    let approval_path = format!("/v1/approvals/{id}");

    // No token, a malformed one, an unknown one: 401, with nothing about what exists.
    let (status, body) = gateway.admin("GET", "/v1/approvals", None, None).await;
    assert_eq!(
        (status, &body["error"]),
        (401, &json!("unauthorized")),
        "{body}"
    );
    let (status, _) = gateway
        .admin("GET", &approval_path, Some("not-a-token"), None)
        .await;
    assert_eq!(status, 401);
    let (status, _) = request(
        gateway.admin,
        "POST",
        &format!("{approval_path}/approve"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 401);

    // The wrong role: an auditor may look but not decide; an operator may not even look.
    let (status, body) = gateway
        .admin(
            "POST",
            &format!("{approval_path}/approve"),
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("forbidden")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("approver"),
        "{body}"
    );
    let (status, _) = gateway
        .admin("GET", "/v1/approvals", Some(OPERATOR), None)
        .await;
    assert_eq!(status, 403);

    // The store's rules apply: the requesting agent cannot approve its own call.
    let (status, body) = gateway
        .admin(
            "POST",
            &format!("{approval_path}/approve"),
            Some(SELF_APPROVER),
            None,
        )
        .await;
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("conflict")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("requesting principal chain"),
        "{body}"
    );

    // Bad requests say why.
    let (status, body) = gateway
        .admin(
            "POST",
            &format!("{approval_path}/reject"),
            Some(APPROVER),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("needs a reason"),
        "{body}"
    );
    let (status, body) = gateway
        .admin("GET", "/v1/approvals?status=maybe", Some(APPROVER), None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("`maybe`"),
        "{body}"
    );
    let (status, _) = gateway
        .admin("GET", "/v1/approvals/apr_0000", Some(APPROVER), None)
        .await;
    assert_eq!(status, 404);

    // The approver sees it pending, from the command line.
    let approver = "usr_ops_ana.token";
    let (code, out) = gateway.cli(approver, &["approvals", "list"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&id) && out.contains("pending") && out.contains("asked by agent:bot"),
        "{out}"
    );
    let (code, out) = gateway.cli(approver, &["approvals", "show", &id]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"tool\": \"test.ledger.transfer\""), "{out}");

    // Still paused until approved.
    let again = gateway
        .call("test.ledger.transfer", transfer_args(), meta.clone())
        .await;
    assert_eq!(record(&again)["outcome"], "APPROVAL_REQUIRED");

    let (code, out) = gateway
        .cli(
            approver,
            &["approvals", "approve", &id, "--reason", "ticket 4411"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("approved by usr_ops_ana"), "{out}");
    // Its caller was answered and must call again.
    assert!(
        out.contains("the caller's next call with the same request runs it, once"),
        "{out}"
    );
    // A second decision is refused by the store (exit code 1, the server's reason).
    let (code, _) = gateway
        .cli(approver, &["approvals", "reject", &id, "--reason", "late"])
        .await;
    assert_eq!(code, 1);

    let done = gateway
        .call("test.ledger.transfer", transfer_args(), meta)
        .await;
    assert_eq!(record(&done)["outcome"], "OK", "{done}");
    assert_eq!(record(&done)["approval_id"], json!(id));
    let call_id = record(&done)["tool_call_id"].as_str().unwrap().to_owned();

    let (status, body) = gateway
        .admin("GET", &approval_path, Some(AUDITOR), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (&body["status"], &body["decided_by"]),
        (&json!("executed"), &json!("usr_ops_ana"))
    );

    // The auditor finds the call, and the decision, in the audit log.
    let (status, body) = gateway
        .admin(
            "GET",
            &format!("/v1/audit?tool_call_id={call_id}"),
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let entries = body["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{body}");
    assert_eq!(
        (&entries[0]["kind"], &entries[0]["outcome"]),
        (&json!("call"), &json!("OK"))
    );
    assert_eq!(entries[0]["record"]["result"]["approval_id"], json!(id));
    let (status, body) = gateway
        .admin(
            "GET",
            "/v1/audit?tenant=default&outcome=APPROVAL_REQUIRED",
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["entries"].as_array().unwrap().len(),
        2,
        "the two paused attempts: {body}"
    );
    let (_, body) = gateway
        .admin(
            "GET",
            "/v1/audit?since_ms=0&until_ms=1",
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(body["entries"], json!([]));
    let (status, _) = gateway
        .admin("GET", "/v1/audit?tool_call_id=x", Some(APPROVER), None)
        .await;
    assert_eq!(status, 403, "an approver does not read the audit log");
    let (status, body) = gateway
        .admin("GET", "/v1/audit?colour=red", Some(AUDITOR), None)
        .await;
    assert_eq!(status, 400);
    assert!(
        body["message"].as_str().unwrap().contains("`colour`"),
        "{body}"
    );

    let (status, body) = gateway
        .admin("GET", "/v1/audit/verify", Some(AUDITOR), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(
        body["entries"], 6,
        "two paused attempts, the refused self-approval, the decision, the refused second decision, the call: {body}"
    );
    let (code, out) = gateway.cli("usr_audit.token", &["verify"]).await;
    assert_eq!(
        (code, out.starts_with("audit log: ok, 6 entries")),
        (0, true),
        "{out}"
    );
    // The refused decisions are audited as refusals, never as decisions.
    let (status, body) = gateway
        .admin(
            "GET",
            "/v1/audit?kind=approval_refused",
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let refused: Vec<_> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["principal"].clone())
        .collect();
    assert_eq!(
        refused,
        [json!("agent:bot"), json!("usr_ops_ana")],
        "{body}"
    );
    let (_, body) = gateway
        .admin("GET", "/v1/audit?kind=approval", Some(AUDITOR), None)
        .await;
    assert_eq!(body["entries"].as_array().unwrap().len(), 1, "{body}");

    // The refused self-approval and second decision (409s) were answers, not store failures.
    let logs = std::fs::read_to_string(gateway.path("stderr.log")).unwrap();
    assert!(!logs.contains("a state store write failed"), "{logs}");
    // The approvals by state, and the policy's verdicts by module and version.
    let (status, metrics) = request(gateway.admin, "GET", "/metrics", None, None).await;
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics.to_vec()).unwrap();
    for expected in [
        "gatehouse_approvals{state=\"executed\"} 1",
        "gatehouse_approvals{state=\"pending\"} 0",
        "gatehouse_approvals{state=\"expired\"} 0",
        "gatehouse_policy_verdicts_total{module=\"test.policy-probe\",version=\"1.0.0\",verdict=\"require_approval\"} 3",
        "gatehouse_store_up 1",
    ] {
        assert!(metrics.contains(expected), "{expected} in:\n{metrics}");
    }
}

/// The whole audit log, page by page, as the auditor reads it.
async fn audit_log(gateway: &AdminGateway) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut path = "/v1/audit?limit=1000".to_owned();
    loop {
        let (status, mut body) = gateway.admin("GET", &path, Some(AUDITOR), None).await;
        assert_eq!(status, 200, "{body}");
        entries.append(body["entries"].as_array_mut().unwrap());
        match body["next_after_seq"].as_u64() {
            Some(seq) => path = format!("/v1/audit?limit=1000&after_seq={seq}"),
            None => return entries,
        }
    }
}

/// The audit log once `ready` holds for it: a read-only call's entry is queued, not committed
/// before its result (and a watched file's install is recorded just after it serves), so
/// the test waits for it, at most five seconds.
async fn audit_log_when(gateway: &AdminGateway, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut entries = Vec::new();
    for _ in 0..50 {
        entries = audit_log(gateway).await;
        if ready(&entries) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    entries
}

/// The version and digest of the policy module that decided an MCP call, from its audit entry
/// (callers see outcomes, not the decision record).
async fn decided_by(gateway: &AdminGateway, result: &Value) -> (String, String) {
    let entry = gateway.audit_entry(result).await;
    let module = &entry["record"]["result"]["policy_decision"]["modules"][0]["module"];
    (
        module["version"].as_str().unwrap().to_owned(),
        module["digest"].as_str().unwrap().to_owned(),
    )
}

/// Four callers of echo, each at most 2000 calls, until `pushed` is set and they made ten more;
/// every call must succeed. Each returns its results.
fn echo_callers(
    gateway: &Arc<AdminGateway>,
    pushed: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Value>>> {
    (0..4)
        .map(|w| {
            let (gateway, pushed) = (Arc::clone(gateway), Arc::clone(pushed));
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut after_push = 0;
                for n in 0..2000 {
                    let was_pushed = pushed.load(Ordering::SeqCst);
                    let result = gateway
                        .call(
                            "gatehouse.echo.echo",
                            json!({ "message": format!("w{w}-{n}") }),
                            json!({}),
                        )
                        .await;
                    assert_eq!(record(&result)["outcome"], "OK", "{result}");
                    seen.push(result);
                    if was_pushed {
                        after_push += 1;
                        if after_push == 10 {
                            break;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                seen
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_pushed_while_calls_run_fails_none_and_the_audit_names_each_decider() {
    let gateway = Arc::new(
        AdminGateway::start(
            "gatehouse.echo.*",
            json!({ "verdict": "allow" }),
            "1.0.0",
            "",
        )
        .await,
    );
    let v2 = gateway.path("probe-2.0.0.wasm");
    std::fs::write(&v2, POLICY_PROBE.signed_as_version("2.0.0")).unwrap();

    let (status, plugins) = gateway
        .admin("GET", "/v1/plugins", Some(AUDITOR), None)
        .await;
    assert_eq!(status, 200);
    let v1_digest = probe(&plugins)["digest"].as_str().unwrap().to_owned();
    assert_eq!(probe(&plugins)["version"], "1.0.0", "{plugins}");
    assert_eq!(probe(&plugins)["key_id"], "test-publisher", "{plugins}");
    let adapters: Vec<&str> = plugins["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(adapters, ["gatehouse.echo", "test.ledger"]);

    let pushed = Arc::new(AtomicBool::new(false));
    let workers = echo_callers(&gateway, &pushed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, out) = gateway
        .cli(
            "usr_ops_olaf.token",
            &["policy", "push", v2.to_str().unwrap()],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("installed policy test.policy-probe 2.0.0") && out.contains("replaced 1.0.0"),
        "{out}"
    );
    pushed.store(true, Ordering::SeqCst);
    let mut results = Vec::new();
    for worker in workers {
        results.extend(worker.await.unwrap());
    }
    let mut calls = Vec::new();
    for result in &results {
        let id = record(result)["tool_call_id"].as_str().unwrap().to_owned();
        calls.push((id, decided_by(&gateway, result).await));
    }
    let v2_digest = calls.last().map(|(_, (_, d))| d.clone()).unwrap();
    assert_ne!(v1_digest, v2_digest);
    let versions: std::collections::BTreeSet<&str> =
        calls.iter().map(|(_, (v, _))| v.as_str()).collect();
    assert_eq!(
        versions.into_iter().collect::<Vec<_>>(),
        ["1.0.0", "2.0.0"],
        "calls ran on both sides of the push"
    );

    // The audit log names the decider of every call.
    let entries = audit_log_when(&gateway, |entries| {
        calls
            .iter()
            .all(|(id, _)| entries.iter().any(|e| e["tool_call_id"] == json!(id)))
    })
    .await;
    for (id, (version, digest)) in &calls {
        let entry = entries
            .iter()
            .find(|e| e["tool_call_id"] == json!(id))
            .unwrap_or_else(|| panic!("{id} is in the audit log"));
        let module = &entry["record"]["result"]["policy_decision"]["modules"][0]["module"];
        assert_eq!(
            (&module["version"], &module["digest"]),
            (&json!(version), &json!(digest))
        );
    }
    let push = entries
        .iter()
        .find(|e| e["kind"] == "plugin")
        .expect("the push is audited");
    assert_eq!(push["principal"], "usr_ops_olaf");
    assert_eq!(push["record"]["action"], "install");
    assert_eq!(
        (
            &push["record"]["plugin"]["digest"],
            &push["record"]["replaced"]["digest"]
        ),
        (&json!(v2_digest), &json!(v1_digest))
    );

    // A component that is not signed by a trusted key is refused; 2.0.0 keeps serving.
    let mut tampered = POLICY_PROBE.signed_as_version("3.0.0");
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let (status, body) = gateway
        .admin(
            "POST",
            "/v1/plugins",
            Some(OPERATOR),
            Some(Bytes::from(tampered)),
        )
        .await;
    assert_eq!((status, &body["error"]), (400, &json!("refused")), "{body}");
    let (status, _) = gateway
        .admin(
            "POST",
            "/v1/plugins",
            Some(AUDITOR),
            Some(Bytes::from(POLICY_PROBE.signed_as_version("3.0.0"))),
        )
        .await;
    assert_eq!(status, 403);

    // An older version than the one serving is refused like at start-up (a rollback is the
    // operator's way back); 2.0.0 keeps serving.
    let (status, body) = gateway
        .admin(
            "POST",
            "/v1/plugins",
            Some(OPERATOR),
            Some(Bytes::from(POLICY_PROBE.signed_as_version("1.5.0"))),
        )
        .await;
    assert_eq!((status, &body["error"]), (400, &json!("refused")), "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| m
            .contains("`test.policy-probe` 1.5.0 is older than 2.0.0, the version serving")
            && m.contains("gatehouse admin policy rollback test.policy-probe")),
        "{body}"
    );
    let (status, plugins) = gateway
        .admin("GET", "/v1/plugins", Some(AUDITOR), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (&probe(&plugins)["version"], &probe(&plugins)["digest"]),
        (&json!("2.0.0"), &json!(v2_digest)),
        "{plugins}"
    );

    // Roll back from the command line: 1.0.0 decides again, and the rollback is audited.
    let (code, out) = gateway
        .cli(
            "usr_ops_olaf.token",
            &["policy", "rollback", "test.policy-probe"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("serving policy test.policy-probe 1.0.0"),
        "{out}"
    );
    let result = gateway
        .call(
            "gatehouse.echo.echo",
            json!({ "message": "after" }),
            json!({}),
        )
        .await;
    assert_eq!(
        decided_by(&gateway, &result).await,
        ("1.0.0".to_owned(), v1_digest.clone())
    );
    let (code, out) = gateway
        .cli(
            "usr_ops_olaf.token",
            &["policy", "rollback", "test.policy-probe"],
        )
        .await;
    assert_eq!(code, 1, "nothing left to roll back: {out}");

    // A binding's config, checked against the module's schema, then audited.
    let (status, body) = gateway
        .admin(
            "PUT",
            "/v1/policies/test.policy-probe/config",
            Some(OPERATOR),
            Some(Bytes::from(r#"{"verdict":"deny"}"#)),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let denied = gateway
        .call(
            "gatehouse.echo.echo",
            json!({ "message": "now" }),
            json!({}),
        )
        .await;
    assert_eq!(record(&denied)["outcome"], "POLICY_BLOCKED", "{denied}");
    let (status, _) = gateway
        .admin(
            "PUT",
            "/v1/policies/no.such/config",
            Some(OPERATOR),
            Some(Bytes::from("{}")),
        )
        .await;
    assert_eq!(status, 404);
    let entries = audit_log(&gateway).await;
    let changes: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "plugin")
        .map(|e| &e["record"]["action"])
        .collect();
    assert_eq!(
        changes,
        [&json!("install"), &json!("rollback"), &json!("set_config")]
    );

    // Health, readiness and metrics need no token.
    let (status, body) = gateway.admin("GET", "/healthz", None, None).await;
    assert_eq!((status, &body["status"]), (200, &json!("ok")));
    let (status, body) = gateway.admin("GET", "/readyz", None, None).await;
    assert_eq!((status, &body["status"]), (200, &json!("ready")));
    let (status, metrics) = request(gateway.admin, "GET", "/metrics", None, None).await;
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics.to_vec()).unwrap();
    let ok_calls = format!(
        "gatehouse_calls_total{{adapter=\"gatehouse.echo\",capability=\"echo\",outcome=\"OK\"}} {}",
        calls.len() + 1
    );
    assert!(metrics.contains(&ok_calls), "{ok_calls} in:\n{metrics}");
    assert!(metrics.contains("gatehouse_calls_total{adapter=\"gatehouse.echo\",capability=\"echo\",outcome=\"POLICY_BLOCKED\"} 1"), "{metrics}");
    assert!(
        metrics.contains(
            "gatehouse_call_duration_seconds_count{adapter=\"gatehouse.echo\",capability=\"echo\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("gatehouse_approvals_pending 0"),
        "{metrics}"
    );
    assert!(metrics.contains("gatehouse_instance_slots 16"), "{metrics}");
    assert!(
        metrics.contains("gatehouse_instance_slots_in_use 0"),
        "{metrics}"
    );
}

/// The serving policy probe's version, digest, rollback versions and binding configs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_pushed_from_a_registry_while_calls_run_fails_none_and_is_cited() {
    let registry = gatehouse_tests::registry::Registry::anonymous();
    let gateway = Arc::new(
        AdminGateway::start(
            "gatehouse.echo.*",
            json!({ "verdict": "allow" }),
            "1.0.0",
            &registry.config_entry(false),
        )
        .await,
    );
    let v2 = gateway.path("probe-2.0.0.wasm");
    std::fs::write(&v2, POLICY_PROBE.signed_as_version("2.0.0")).unwrap();
    let tag = registry.reference("acme/probe", ":2.0.0");
    let config = gateway.path("gatehouse.toml");
    let (code, out) = gatehouse_async(&[
        "push",
        v2.to_str().unwrap(),
        &tag,
        "--config",
        config.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    let pinned = out
        .lines()
        .find_map(|l| l.strip_prefix("pinned "))
        .unwrap()
        .to_owned();
    let operator = "usr_ops_olaf.token";

    // A tag where the gateway's config allows only digests: refused, v1 serves on.
    let (code, _) = gateway.cli(operator, &["policy", "push", &tag]).await;
    assert_eq!(code, 1);
    // A registry that cannot be reached: 502.
    let down = format!(
        "oci://127.0.0.1:{}/acme/probe@sha256:{}",
        free_port(),
        "ab".repeat(32)
    );
    let bearer = format!("Bearer {OPERATOR}");
    let (status, _, body) = gatehouse_tests::http(
        gateway.admin,
        "POST",
        "/v1/plugins",
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        json!({ "source": down }).to_string(),
    )
    .await;
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("cannot reach the registry"), "{body}");
    // Both times, v1 serves on.
    let (_, plugins) = gateway
        .admin("GET", "/v1/plugins", Some(AUDITOR), None)
        .await;
    assert_eq!(probe(&plugins)["version"], "1.0.0", "{plugins}");

    let pushed = Arc::new(AtomicBool::new(false));
    let workers = echo_callers(&gateway, &pushed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, out) = gateway.cli(operator, &["policy", "push", &pinned]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("installed policy test.policy-probe 2.0.0")
            && out.contains(&format!("from {pinned}"))
            && out.contains("replaced 1.0.0"),
        "{out}"
    );
    pushed.store(true, Ordering::SeqCst);
    let mut results = Vec::new();
    for worker in workers {
        results.extend(worker.await.unwrap());
    }
    let mut versions = std::collections::BTreeSet::new();
    for result in &results {
        versions.insert(decided_by(&gateway, result).await.0);
    }
    assert_eq!(versions.into_iter().collect::<Vec<_>>(), ["1.0.0", "2.0.0"]);

    // The install's audit entry and the last call's decision cite the pinned reference.
    let last = record(results.last().unwrap())["tool_call_id"].clone();
    let entries = audit_log_when(&gateway, |entries| {
        entries.iter().any(|e| e["tool_call_id"] == last)
    })
    .await;
    let install = entries
        .iter()
        .find(|e| e["kind"] == "plugin" && e["record"]["action"] == "install")
        .expect("the install is audited");
    assert_eq!(
        install["record"]["plugin"]["source"],
        json!(pinned),
        "{install}"
    );
    let call = entries.iter().find(|e| e["tool_call_id"] == last).unwrap();
    let module = &call["record"]["result"]["policy_decision"]["modules"][0]["module"];
    assert_eq!(
        (&module["version"], &module["source"]),
        (&json!("2.0.0"), &json!(pinned)),
        "{call}"
    );

    // A restart serves it again from the store, still citing where it came from.
    let mut gateway = Arc::try_unwrap(gateway).expect("the workers are done");
    gateway.restart("restarted.out").await;
    let (_, plugins) = gateway
        .admin("GET", "/v1/plugins", Some(AUDITOR), None)
        .await;
    assert_eq!(
        (&probe(&plugins)["version"], &probe(&plugins)["source"]),
        (&json!("2.0.0"), &json!(pinned)),
        "{plugins}"
    );
}

async fn serving_policy(gateway: &AdminGateway) -> (Value, Value, Vec<Value>, Value) {
    let (status, plugins) = gateway
        .admin("GET", "/v1/plugins", Some(AUDITOR), None)
        .await;
    assert_eq!(status, 200, "{plugins}");
    let policy = &probe(&plugins);
    let previous = policy["previous"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["version"].clone())
        .collect();
    (
        policy["version"].clone(),
        policy["digest"].clone(),
        previous,
        policy["configs"].clone(),
    )
}

/// `GET /v1/audit/verify?head=HEAD`: (ok, message).
async fn verify_head(gateway: &AdminGateway, head: &str) -> (Value, String) {
    let (status, body) = gateway
        .admin(
            "GET",
            &format!("/v1/audit/verify?head={head}"),
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    (
        body["ok"].clone(),
        body["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_changes_made_through_the_admin_api_survive_a_restart_and_a_kept_head_holds() {
    let mut gateway = AdminGateway::start(
        "gatehouse.echo.*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        "",
    )
    .await;
    let echo = |message: &str| json!({ "message": message });
    let first = gateway
        .call("gatehouse.echo.echo", echo("one"), json!({}))
        .await;
    assert_eq!(record(&first)["outcome"], "OK", "{first}");
    decided_by(&gateway, &first).await;
    let (status, body) = gateway
        .admin("GET", "/v1/audit/verify", Some(AUDITOR), None)
        .await;
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{body}");
    let keep = body["keep"].as_str().unwrap().to_owned();
    assert_eq!(keep, format!("1:{}", body["head"].as_str().unwrap()));
    let (_, v1_digest, _, _) = serving_policy(&gateway).await;

    let (status, body) = gateway
        .admin(
            "POST",
            "/v1/plugins",
            Some(OPERATOR),
            Some(Bytes::from(POLICY_PROBE.signed_as_version("2.0.0"))),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let v2_digest = body["plugin"]["digest"].clone();

    // The pushed version serves again after a restart, with what it replaced to roll back to.
    gateway.restart("restart-1.log").await;
    assert_eq!(
        serving_policy(&gateway).await,
        (
            json!("2.0.0"),
            v2_digest.clone(),
            vec![json!("1.0.0")],
            json!([{ "verdict": "allow" }])
        )
    );
    let out = std::fs::read_to_string(gateway.path("restart-1.log")).unwrap();
    assert!(
        out.contains(&format!(
            "loaded test.policy-probe 2.0.0 ({}) from the state store: installed through the admin API at ",
            v2_digest.as_str().unwrap()
        )) && out.contains("loaded gatehouse.echo "),
        "{out}"
    );
    let after = gateway
        .call("gatehouse.echo.echo", echo("two"), json!({}))
        .await;
    assert_eq!(
        decided_by(&gateway, &after).await,
        ("2.0.0".to_owned(), v2_digest.as_str().unwrap().to_owned())
    );
    // A head kept before more calls (and a restart) still holds.
    let (ok, message) = verify_head(&gateway, &keep).await;
    assert_eq!(ok, json!(true), "{message}");
    assert!(message.starts_with("ok, "), "{message}");

    // A rollback and a binding config survive a restart too.
    let (status, body) = gateway
        .admin(
            "POST",
            "/v1/policies/test.policy-probe/rollback",
            Some(OPERATOR),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = gateway
        .admin(
            "PUT",
            "/v1/policies/test.policy-probe/config",
            Some(OPERATOR),
            Some(Bytes::from(r#"{"verdict":"deny"}"#)),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    gateway.restart("restart-2.log").await;
    assert_eq!(
        serving_policy(&gateway).await,
        (
            json!("1.0.0"),
            v1_digest,
            vec![],
            json!([{ "verdict": "deny" }])
        )
    );
    let denied = gateway
        .call("gatehouse.echo.echo", echo("three"), json!({}))
        .await;
    assert_eq!(record(&denied)["outcome"], "POLICY_BLOCKED", "{denied}");
    let (ok, message) = verify_head(&gateway, &keep).await;
    assert_eq!(ok, json!(true), "{message}");
    let (ok, message) = verify_head(
        &gateway,
        "9999:sha256:0000000000000000000000000000000000000000000000000000000000000000",
    )
    .await;
    assert_eq!(ok, json!(false), "{message}");
    assert!(
        message.ends_with("before entry 9999: entries were removed from the end"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_installs_policy_modules_from_the_watched_directory_and_audits_them() {
    let policies = tempfile::tempdir().unwrap();
    let extra = format!(
        "\n[watch]\npolicy_dir = {:?}\ninterval_ms = 100\n",
        policies.path().display().to_string()
    );
    let gateway = AdminGateway::start(
        "gatehouse.echo.*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        &extra,
    )
    .await;
    let echo = || gateway.call("gatehouse.echo.echo", json!({ "message": "m" }), json!({}));
    assert_eq!(decided_by(&gateway, &echo().await).await.0, "1.0.0");
    // A file that does not verify is refused and changes nothing.
    std::fs::write(policies.path().join("junk.wasm"), b"not a component").unwrap();
    std::fs::write(
        policies.path().join("probe.wasm"),
        POLICY_PROBE.signed_as_version("2.0.0"),
    )
    .unwrap();
    let mut version = String::new();
    for _ in 0..100 {
        version = decided_by(&gateway, &echo().await).await.0;
        if version == "2.0.0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(version, "2.0.0", "the watched file was installed");
    let entries = audit_log_when(&gateway, |entries| {
        entries.iter().any(|e| e["kind"] == "plugin")
    })
    .await;
    let installs: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "plugin").collect();
    assert_eq!(
        installs.len(),
        1,
        "one install, the junk refused: {installs:#?}"
    );
    let by = format!("watch:{}", policies.path().display());
    assert_eq!(installs[0]["principal"], json!(by));
    assert_eq!(installs[0]["record"]["plugin"]["version"], "2.0.0");
    assert_eq!(installs[0]["record"]["replaced"]["version"], "1.0.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skills_resolution_trace_shows_what_a_call_would_receive() {
    let skill = |name: &str, scope: &str, matches: &str, priority: i32, text: &str| json!({ "name": name, "scope": scope, "match": matches, "priority": priority, "text": text });
    let gateway = AdminGateway::start_with(
        "gatehouse.echo.*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        "",
        |host| {
            host.pipeline.skills = serde_json::from_value(json!([
                skill(
                    "request-id",
                    "global",
                    "",
                    10,
                    "Always include a request ID."
                ),
                skill("gdpr", "tenant", "acme", 50, "EU data stays in the EU."),
                skill(
                    "echo-style",
                    "tool",
                    "gatehouse.echo.*",
                    0,
                    "Echo politely."
                ),
            ]))
            .unwrap();
        },
    )
    .await;
    let path = "/v1/skills/resolve?tenant=acme&tool=gatehouse.echo.echo&user=usr_john";
    let (status, trace) = gateway.admin("GET", path, Some(OPERATOR), None).await;
    assert_eq!(status, 200, "{trace}");
    assert_eq!(
        trace["resolved_context"],
        "Always include a request ID.\n\nEU data stays in the EU.\n\nEcho politely."
    );
    let entry = |level: &str, skill: Value, priority: Value, matched: bool| json!({ "level": level, "skill": skill, "priority": priority, "matched": matched, "included": matched });
    assert_eq!(
        trace["trace"],
        json!([
            entry("global", json!("request-id"), json!(10), true),
            entry("tenant", json!("gdpr"), json!(50), true),
            entry("tool", json!("echo-style"), json!(0), true),
            entry("user", Value::Null, Value::Null, false),
        ])
    );
    // Another tenant and tool get only the global skill.
    let (_, other) = gateway
        .admin(
            "GET",
            "/v1/skills/resolve?tenant=globex&tool=test.ledger.transfer",
            Some(AUDITOR),
            None,
        )
        .await;
    assert_eq!(other["resolved_context"], "Always include a request ID.");
    // The approver role may not; a missing parameter is a 400 naming it; no token is 401.
    let (status, _) = gateway.admin("GET", path, Some(APPROVER), None).await;
    assert_eq!(status, 403);
    let (status, error) = gateway
        .admin(
            "GET",
            "/v1/skills/resolve?tenant=acme",
            Some(OPERATOR),
            None,
        )
        .await;
    assert_eq!(
        (status, error["error"].as_str()),
        (400, Some("bad_request"))
    );
    assert!(
        error["message"].as_str().unwrap().contains("`tool`"),
        "{error}"
    );
    let (status, _) = gateway.admin("GET", path, None, None).await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_client_meets_every_outcome_path_in_both_protocol_versions() {
    // The probe pauses transfers for approval; a second binding of it denies statements.
    let gateway = AdminGateway::start_with(
        "test.ledger.transfer",
        json!({ "verdict": "require_approval" }),
        "1.0.0",
        "",
        |host| {
            host.pipeline.policies.push(bind(
                "test.policy-probe",
                "test.ledger.statement",
                1,
                json!({ "verdict": "deny" }),
            ));
        },
    )
    .await;
    for version in [ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25] {
        let client = client_speaking(&gateway.mcp_url(), Some(AGENT_KEY), &version).await;
        let tools = tool_names(&client).await;
        for tool in [
            "gatehouse.echo.echo",
            "test.ledger.transfer",
            "test.ledger.statement",
        ] {
            assert!(
                tools.iter().any(|t| t == tool),
                "{version}: {tool} not in {tools:?}"
            );
        }

        // ok
        let (result, record) = rmcp_call(
            &client,
            "gatehouse.echo.echo",
            json!({ "message": "hi" }),
            json!({}),
        )
        .await;
        assert_eq!(
            (result.is_error, &record["outcome"]),
            (Some(false), &json!("OK")),
            "{version}: {record}"
        );

        // invalid arguments: refused before anything runs
        let (result, record) = rmcp_call(
            &client,
            "test.ledger.transfer",
            json!({ "amount": "a lot" }),
            json!({ "gatehouse/idempotency_key": format!("bad-{version}") }),
        )
        .await;
        assert_eq!(
            (result.is_error, &record["outcome"]),
            (Some(true), &json!("INVALID_ARGUMENTS")),
            "{version}: {record}"
        );

        // policy denial
        let (result, record) =
            rmcp_call(&client, "test.ledger.statement", json!({}), json!({})).await;
        assert_eq!(
            (result.is_error, &record["outcome"]),
            (Some(true), &json!("POLICY_BLOCKED")),
            "{version}: {record}"
        );

        // paused -> approved through the admin API -> completed
        let meta = json!({ "gatehouse/idempotency_key": format!("refund-{version}") });
        let (result, paused) = rmcp_call(
            &client,
            "test.ledger.transfer",
            transfer_args(),
            meta.clone(),
        )
        .await;
        assert_eq!(
            (result.is_error, &paused["outcome"]),
            (Some(true), &json!("APPROVAL_REQUIRED")),
            "{version}: {paused}"
        );
        let id = paused["approval_id"].as_str().expect("an approval id");
        let (status, body) = gateway
            .admin(
                "POST",
                &format!("/v1/approvals/{id}/approve"),
                Some(APPROVER),
                Some(Bytes::from(json!({ "reason": "ticket 4412" }).to_string())),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (result, done) = rmcp_call(
            &client,
            "test.ledger.transfer",
            transfer_args(),
            meta.clone(),
        )
        .await;
        assert_eq!(
            (result.is_error, &done["outcome"], &done["approval_id"]),
            (Some(false), &json!("OK"), &json!(id)),
            "{version}: {done}"
        );
        let transfer_id = result.structured_content.as_ref().unwrap()["transfer_id"].clone();
        assert!(transfer_id.is_string(), "{result:?}");

        // idempotent replay: the same key and request returns the first result, runs nothing
        let (result, replay) =
            rmcp_call(&client, "test.ledger.transfer", transfer_args(), meta).await;
        assert_eq!(
            (result.is_error, &replay["outcome"]),
            (Some(false), &json!("OK")),
            "{replay}"
        );
        assert_eq!(
            result.meta.as_ref().unwrap()["gatehouse/replay_of"],
            done["tool_call_id"],
            "{version}"
        );
        assert_eq!(
            result.structured_content.as_ref().unwrap()["transfer_id"],
            transfer_id
        );
        client.cancel().await.unwrap();
    }
}

/// One request to the admin listener with these exact headers (`Host` among them): the status
/// and the JSON body.
async fn raw(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let (status, _, bytes) =
        gatehouse_tests::http(port, method, path, headers, Bytes::from(body.to_owned())).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensitive_arguments_are_masked_auditors_never_see_them_and_a_reveal_is_audited() {
    let gateway = AdminGateway::start(
        "test.ledger.*",
        json!({ "verdict": "require_approval" }),
        "1.0.0",
        "",
    )
    .await;
    let paused = gateway
        .call(
            "test.ledger.transfer",
            transfer_args(),
            json!({ "gatehouse/idempotency_key": "sensitive-1" }),
        )
        .await;
    let id = record(&paused)["approval_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/approvals/{id}");
    // Listed and shown, to an approver and to an auditor: the values are their hashes.
    for token in [APPROVER, AUDITOR] {
        let (status, list) = gateway
            .admin("GET", "/v1/approvals", Some(token), None)
            .await;
        assert_eq!(status, 200, "{list}");
        let (status, one) = gateway.admin("GET", &path, Some(token), None).await;
        assert_eq!(status, 200, "{one}");
        for args in [&list["approvals"][0]["call"]["args"], &one["call"]["args"]] {
            let text = args.to_string();
            assert!(
                !text.contains("1200") && !text.contains("refund") && !text.contains("EUR"),
                "{text}"
            );
            assert!(
                args["amount"].as_str().unwrap().starts_with("sha256:"),
                "{args}"
            );
        }
        assert_eq!(one["sensitive"], true);
    }
    // An auditor can never reveal them.
    let (status, body) = gateway
        .admin("GET", &format!("{path}?reveal=true"), Some(AUDITOR), None)
        .await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("forbidden")),
        "{body}"
    );
    // An approver can (`[admin] reveal_sensitive = ["approver"]`), and the log says who.
    let (status, body) = gateway
        .admin("GET", &format!("{path}?reveal=true"), Some(APPROVER), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["call"]["args"]["amount"], 1200, "{body}");
    let (_, audit) = gateway
        .admin("GET", "/v1/audit?kind=reveal", Some(AUDITOR), None)
        .await;
    let entries = audit["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["principal"], "usr_ops_ana", "{audit}");
    assert!(entries[0]["record"].to_string().contains(&id), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_refuses_other_hosts_and_origins_slows_guessing_and_caps_sessions_per_principal()
 {
    let gateway = AdminGateway::start(
        "gatehouse.echo.*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        "",
    )
    .await;
    let port = gateway.admin;
    let own = format!("127.0.0.1:{port}");
    let bearer = format!("Bearer {APPROVER}");
    // A DNS-rebinding page sends its own name as Host: refused, metrics and sign-in alike,
    // whatever the token.
    for (method, path, body) in [
        ("GET", "/metrics", String::new()),
        ("GET", "/v1/approvals", String::new()),
        (
            "POST",
            "/console/session",
            json!({ "token": APPROVER }).to_string(),
        ),
    ] {
        let (status, answer) = raw(
            port,
            method,
            path,
            &[
                ("host", "evil.example"),
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert_eq!(answer["error"], "forbidden_host", "{answer}");
    }
    // Another site's page, with this listener's Host: refused by its Origin.
    let (status, answer) = raw(
        port,
        "GET",
        "/v1/approvals",
        &[
            ("host", &own),
            ("origin", "https://evil.example"),
            ("authorization", &bearer),
        ],
        "",
    )
    .await;
    assert_eq!(
        (status, &answer["error"]),
        (403, &json!("forbidden_origin")),
        "{answer}"
    );
    let (status, _) = raw(
        port,
        "GET",
        "/v1/approvals",
        &[
            ("host", &own),
            ("origin", &format!("http://{own}")),
            ("authorization", &bearer),
        ],
        "",
    )
    .await;
    assert_eq!(status, 200, "the console's own origin passes");

    // Sign-in: five wrong tokens, then even the right one waits.
    let sign_in = |token: &str| {
        let body = json!({ "token": token }).to_string();
        let own = own.clone();
        async move {
            let (status, headers, bytes) = gatehouse_tests::http(
                port,
                "POST",
                "/console/session",
                &[("host", &own), ("content-type", "application/json")],
                Bytes::from(body),
            )
            .await;
            (status, headers, bytes)
        }
    };
    for n in 0..5 {
        let (status, _, _) = sign_in(&format!("wrong-{n}")).await;
        assert_eq!(status, 401);
    }
    let (status, headers, body) = sign_in(APPROVER).await;
    assert_eq!(status, 429, "{}", String::from_utf8_lossy(&body));
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=61).contains(&wait), "{wait}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_signing_in_again_and_again_ends_only_its_own_oldest_sessions() {
    let gateway = AdminGateway::start(
        "gatehouse.echo.*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        "",
    )
    .await;
    let own = format!("127.0.0.1:{}", gateway.admin);
    let sign_in = |token: &'static str| {
        let own = own.clone();
        let port = gateway.admin;
        async move {
            let (status, headers, _) = gatehouse_tests::http(
                port,
                "POST",
                "/console/session",
                &[("host", &own), ("content-type", "application/json")],
                Bytes::from(json!({ "token": token }).to_string()),
            )
            .await;
            assert_eq!(status, 200);
            let cookie = headers["set-cookie"].to_str().unwrap();
            cookie.split(';').next().unwrap().to_owned()
        }
    };
    let session_ok = |cookie: String| {
        let own = own.clone();
        let port = gateway.admin;
        async move {
            let (status, _, _) = gatehouse_tests::http(
                port,
                "GET",
                "/console/session",
                &[("host", &own), ("cookie", &cookie)],
                Bytes::new(),
            )
            .await;
            status == 200
        }
    };
    let auditor = sign_in(AUDITOR).await;
    let first = sign_in(APPROVER).await;
    for _ in 0..40 {
        sign_in(APPROVER).await;
    }
    assert!(
        session_ok(auditor).await,
        "another principal's session survives"
    );
    assert!(
        !session_ok(first).await,
        "the flooding principal's oldest session ended"
    );
    let last = sign_in(APPROVER).await;
    assert!(session_ok(last).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_admin_listener_on_port_0_approval_links_name_the_bound_port() {
    use gatehouse_tests::gateway::Serve;
    let dir = tempfile::tempdir().unwrap();
    let mut host = gatehouse_tests::config(&["gatehouse.*", "test.*"], &["test.*"]);
    host.pipeline.policy_default = gatehouse_host::config::PolicyDefault::Allow;
    host.pipeline.policies.push(bind(
        "test.policy-probe",
        "test.ledger.*",
        0,
        json!({ "verdict": "require_approval" }),
    ));
    let mcp = free_port();
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let config = format!(
        "{}\n[mcp]\nlisten = \"127.0.0.1:{mcp}\"\nanonymous_tenant = \"default\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
        toml::to_string(&host).unwrap()
    );
    let stdout = dir.path().join("stdout.txt");
    let _gateway = Serve::config(file("gatehouse.toml", config.as_bytes()))
        .adapter(file(
            "ledger.wasm",
            &gatehouse_tests::artifacts::LEDGER.signed(),
        ))
        .policy(file("probe.wasm", &POLICY_PROBE.signed()))
        .stdout(&stdout)
        .wait_for(mcp)
        .start()
        .await;
    let printed = std::fs::read_to_string(&stdout).unwrap();
    let admin = printed
        .split("admin API at http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .unwrap_or_else(|| panic!("the admin API's address: {printed}"));
    assert_ne!(admin, "0", "{printed}");
    let paused = gatehouse_tests::mcp::call(
        mcp,
        &[],
        "test.ledger.transfer",
        transfer_args(),
        json!({ "gatehouse/idempotency_key": "port-0" }),
    )
    .await;
    let remediation = record(&paused)["error"]["remediation"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        remediation.contains(&format!(
            "http://127.0.0.1:{admin}/console/#/approvals/apr_"
        )),
        "{remediation}"
    );
    assert!(!remediation.contains(":0/"), "{remediation}");
}
