//! State end to end: exactly-once effects under concurrency (through `Host::call` and through
//! MCP), replays and conflicts, a gateway killed mid-call, approvals from proposal to replay,
//! the audit chain against direct tampering, and a store that fails.

use std::sync::Arc;
use std::time::Duration;

use gatehouse_host::config::StoreConfig;
use gatehouse_host::model::Verdict;
use gatehouse_host::state::Store;
use gatehouse_host::state::sqlite::SqliteStore;
use gatehouse_host::{Host, OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_server::mcp::McpConfig;
use gatehouse_tests::artifacts::{POLICY_PROBE, REST};
use gatehouse_tests::cli::{gatehouse_async, gatehouse_output, s};
use gatehouse_tests::gateway::{Serve, write_config};
use gatehouse_tests::host::{HostBuilder, rest_config};
use gatehouse_tests::mcp::{outcome_of, try_call};
use gatehouse_tests::state::{
    config_file, five_records, host, post, probed, store_at, tamper, transfer, upstream_path, user,
};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{config, free_port, join_all};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_calls_on_ten_keys_reach_the_upstream_ten_times() {
    let upstream = Upstream::start().await;
    let host = Arc::new(host(rest_config(&upstream)));
    let calls = (0..200).map(|i| {
        let (host, call) = (
            Arc::clone(&host),
            post(
                &upstream,
                &format!("/api/orders/{}", i % 10),
                &json!({ "n": i % 10 }),
                &format!("order-{}", i % 10),
            ),
        );
        tokio::spawn(async move { (i % 10, host.call(call).await) })
    });
    let results = join_all(calls).await;
    assert_eq!(upstream.seen().len(), 10, "one upstream request per key");
    let mut ran = 0;
    for (k, result) in &results {
        assert!(result.is_ok(), "{result:#?}");
        assert_eq!(upstream_path(result), format!("/api/orders/{k}"));
        if result.replay_of.is_none() {
            ran += 1;
        }
    }
    assert_eq!(ran, 10, "the other 190 calls are replays");
    let report = host.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (200, None));
}

#[tokio::test]
async fn a_repeat_replays_and_a_different_request_under_the_key_conflicts() {
    let upstream = Upstream::start().await;
    let host = host(rest_config(&upstream));
    let first = host
        .call(post(&upstream, "/api/a", &json!({ "x": 1 }), "k1"))
        .await;
    assert!(first.is_ok(), "{first:#?}");
    assert_eq!(first.replay_of, None);

    let again = host
        .call(post(&upstream, "/api/a", &json!({ "x": 1 }), "k1"))
        .await;
    assert_eq!(
        again.replay_of.as_deref(),
        Some(first.tool_call_id.as_str())
    );
    assert_eq!(again.structured_content, first.structured_content);
    assert_eq!(again.outcome, OutcomeCode::Ok);
    assert_ne!(again.tool_call_id, first.tool_call_id);

    let other = host
        .call(post(&upstream, "/api/a", &json!({ "x": 2 }), "k1"))
        .await;
    assert_eq!(
        (other.status, other.outcome),
        (Status::Rejected, OutcomeCode::IdempotencyConflict)
    );
    assert!(
        other
            .error
            .as_ref()
            .unwrap()
            .message
            .contains(&first.tool_call_id)
    );
    assert_eq!(upstream.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_while_the_first_runs_waits_for_its_result() {
    let upstream = Upstream::start().await;
    let host = Arc::new(host(rest_config(&upstream)));
    let slow = post(&upstream, "/delay/600/api/slow", &json!({}), "slow-1");
    let first = {
        let (host, call) = (Arc::clone(&host), slow.clone());
        tokio::spawn(async move { host.call(call).await })
    };
    while upstream.seen().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut repeat = slow;
    repeat.tool_call_id = "call_repeat".to_owned();
    let second = host.call(repeat).await;
    let first = first.await.unwrap();
    assert!(first.is_ok(), "{first:#?}");
    assert_eq!(
        second.replay_of.as_deref(),
        Some(first.tool_call_id.as_str())
    );
    assert_eq!(second.structured_content, first.structured_content);
    assert_eq!(upstream.seen().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Approvals.

#[tokio::test]
async fn a_paused_call_runs_once_after_another_principal_approves_it() {
    let host = probed(
        "test.ledger.*",
        json!({ "verdict": "require_approval" }),
        store_at(&gatehouse_tests::store_path()),
    );
    let paused = host.call(transfer("pay-1", 1000)).await;
    assert_eq!(
        (paused.status, paused.outcome),
        (Status::Paused, OutcomeCode::ApprovalRequired)
    );
    let id = paused
        .approval_id
        .clone()
        .expect("a paused call names its approval");
    let remediation = paused.error.as_ref().unwrap().remediation.clone().unwrap();
    assert!(
        remediation.contains("same idempotency key"),
        "{remediation}"
    );

    // Repeating it while pending gives the same approval, never a second one.
    let repeat = host.call(transfer("pay-1", 1000)).await;
    assert_eq!(repeat.approval_id.as_deref(), Some(id.as_str()));
    assert_eq!(repeat.outcome, OutcomeCode::ApprovalRequired);
    let pending = host.approvals(Default::default()).await.unwrap();
    assert_eq!(pending.len(), 1);

    // The requester cannot approve its own call.
    let own = host
        .decide(&id, true, "usr_alice", "mine")
        .await
        .unwrap_err();
    assert!(
        own.to_string().contains("requesting principal chain"),
        "{own}"
    );
    let approved = host.decide(&id, true, "usr_bob", "checked").await.unwrap();
    assert_eq!(approved.decided_by.as_deref(), Some("usr_bob"));

    // A different request under the approved key is not covered.
    let other = host.call(transfer("pay-1", 5)).await;
    assert_eq!(other.outcome, OutcomeCode::ApprovalMismatch);

    let ran = host.call(transfer("pay-1", 1000)).await;
    assert!(ran.is_ok(), "{ran:#?}");
    assert_eq!(ran.replay_of, None);
    assert_eq!(ran.approval_id.as_deref(), Some(id.as_str()));
    let replay = host.call(transfer("pay-1", 1000)).await;
    assert_eq!(replay.replay_of.as_deref(), Some(ran.tool_call_id.as_str()));
    let executed = host.approval(&id).await.unwrap().unwrap();
    assert_eq!(
        executed.executed_by_call.as_deref(),
        Some(ran.tool_call_id.as_str())
    );
}

/// Hardening round 4, item 1, at the host: whatever names an approval (its id, its key), only
/// its own proposal runs, once; an approval that ran only replays, and never runs again once
/// its key's record is gone.
#[tokio::test]
async fn one_approval_runs_its_call_once_whatever_key_or_principal_names_it() {
    let upstream = Upstream::start().await;
    let mut config = rest_config(&upstream);
    config.store = store_at(&gatehouse_tests::store_path());
    config.pipeline.policies.push(gatehouse_tests::bind(
        "test.policy-probe",
        "gatehouse.rest.*",
        0,
        json!({ "verdict": "require_approval" }),
    ));
    let host = HostBuilder::on(config)
        .adapters(&[REST])
        .policies(&[POLICY_PROBE])
        .build();
    let refund = |key: Option<&str>, who: &str| {
        let call = ToolCallEnvelope::new(
            "default",
            "gatehouse.rest.send",
            json!({ "url": upstream.url("/refunds"), "method": "POST", "body": { "amount": 900 } }),
        )
        .with_principal(user(who));
        match key {
            Some(key) => call.with_idempotency_key(key),
            None => call,
        }
    };
    let paused = host.call(refund(Some("refund-1"), "usr_alice")).await;
    assert_eq!(paused.outcome, OutcomeCode::ApprovalRequired, "{paused:#?}");
    let id = paused.approval_id.clone().unwrap();
    let refused = |stage: &'static str| {
        let id = id.clone();
        let refund = &refund;
        let host = &host;
        async move {
            for (call, who) in [
                (
                    refund(Some(&format!("fresh-{stage}")), "usr_alice").with_approval(&id),
                    "the proposer, a fresh key",
                ),
                (
                    refund(Some(&format!("bob-{stage}")), "usr_bob").with_approval(&id),
                    "another principal, its key",
                ),
                (
                    refund(Some("refund-1"), "usr_bob"),
                    "another principal, the approval's key",
                ),
            ] {
                let result = host.call(call).await;
                assert_eq!(
                    (result.status, result.outcome),
                    (Status::Rejected, OutcomeCode::ApprovalMismatch),
                    "{stage}, {who}: {result:#?}"
                );
                assert_eq!(
                    result.approval_id.as_deref(),
                    Some(id.as_str()),
                    "{stage}, {who}"
                );
            }
        }
    };
    refused("pending").await;
    host.decide(&id, true, "usr_carol", "checked")
        .await
        .unwrap();
    refused("approved").await;
    assert!(upstream.seen().is_empty(), "nothing ran but the proposal");

    let ran = host.call(refund(Some("refund-1"), "usr_alice")).await;
    assert!(ran.is_ok(), "{ran:#?}");
    // Named by its id too, the proposer's call replays.
    let by_id = host
        .call(refund(Some("refund-1"), "usr_alice").with_approval(&id))
        .await;
    assert_eq!(
        by_id.replay_of.as_deref(),
        Some(ran.tool_call_id.as_str()),
        "{by_id:#?}"
    );
    refused("executed").await;
    assert_eq!(upstream.seen().len(), 1, "one effect");

    // The key's record pruned (past its dedupe window): the approval never runs again.
    host.store().prune(u64::MAX / 2).await.unwrap();
    for _ in 0..2 {
        let spent = host.call(refund(Some("refund-1"), "usr_alice")).await;
        assert_eq!(
            (spent.status, spent.outcome),
            (Status::Rejected, OutcomeCode::ApprovalExpired),
            "{spent:#?}"
        );
        assert!(spent.error.unwrap().message.contains(&ran.tool_call_id));
    }
    assert_eq!(upstream.seen().len(), 1, "still one effect");
    let report = host.verify_audit().await.unwrap();
    assert_eq!(report.first_break, None);
}

#[tokio::test]
async fn rejected_and_expired_approvals_refuse_the_call() {
    let host = probed(
        "test.ledger.*",
        json!({ "verdict": "require_approval" }),
        StoreConfig {
            approval_ttl_seconds: 1,
            ..store_at(&gatehouse_tests::store_path())
        },
    );
    let paused = host.call(transfer("pay-r", 10)).await;
    let id = paused.approval_id.unwrap();
    host.decide(&id, false, "usr_bob", "not this month")
        .await
        .unwrap();
    let rejected = host.call(transfer("pay-r", 10)).await;
    assert_eq!(
        (rejected.status, rejected.outcome),
        (Status::Rejected, OutcomeCode::ApprovalRejected)
    );
    assert!(rejected.error.unwrap().message.contains("not this month"));

    let paused = host.call(transfer("pay-e", 10)).await;
    let id = paused.approval_id.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let expired = host.call(transfer("pay-e", 10)).await;
    assert_eq!(expired.outcome, OutcomeCode::ApprovalExpired);
    let late = host.decide(&id, true, "usr_bob", "").await.unwrap_err();
    assert!(late.to_string().contains("expired"), "{late}");
}

#[tokio::test]
async fn a_call_without_a_key_resumes_with_its_approval_id() {
    let host = probed(
        "gatehouse.echo.*",
        json!({ "verdict": "require_approval" }),
        store_at(&gatehouse_tests::store_path()),
    );
    let echo = || {
        ToolCallEnvelope::new("default", "gatehouse.echo.echo", json!({ "message": "hi" }))
            .with_principal(user("usr_alice"))
    };
    let paused = host.call(echo()).await;
    assert_eq!(paused.outcome, OutcomeCode::ApprovalRequired);
    let id = paused.approval_id.unwrap();
    let remediation = paused.error.unwrap().remediation.unwrap();
    assert!(
        remediation.contains("gatehouse/approval_id"),
        "{remediation}"
    );
    assert_eq!(
        host.call(echo().with_approval(&id)).await.outcome,
        OutcomeCode::ApprovalRequired
    );
    host.decide(&id, true, "usr_bob", "").await.unwrap();
    let ran = host.call(echo().with_approval(&id)).await;
    assert!(ran.is_ok(), "{ran:#?}");
    let replay = host.call(echo().with_approval(&id)).await;
    assert_eq!(replay.replay_of.as_deref(), Some(ran.tool_call_id.as_str()));
    let unknown = host.call(echo().with_approval("apr_0000")).await;
    assert_eq!(unknown.outcome, OutcomeCode::InvalidArguments);
}

#[tokio::test]
async fn an_approval_survives_a_restart() {
    let path = gatehouse_tests::store_path();
    let probe = json!({ "verdict": "require_approval" });
    let id = {
        let host = probed("test.ledger.*", probe.clone(), store_at(&path));
        host.call(transfer("pay-restart", 10))
            .await
            .approval_id
            .unwrap()
    };
    let host = probed("test.ledger.*", probe, store_at(&path));
    host.decide(&id, true, "usr_bob", "").await.unwrap();
    let ran = host.call(transfer("pay-restart", 10)).await;
    assert!(ran.is_ok(), "{ran:#?}");
}

#[tokio::test]
async fn policies_see_the_principals_prior_actions() {
    let host = probed(
        "test.ledger.*",
        json!({ "report_prior_actions": true }),
        store_at(&gatehouse_tests::store_path()),
    );
    let mut last = None;
    for n in 0..3 {
        last = Some(host.call(transfer(&format!("p-{n}"), 10)).await);
    }
    let decision = last.unwrap().policy_decision.unwrap();
    assert_eq!(decision.verdict, Verdict::Allow);
    let prior = &decision.modules[0].reasons[0];
    assert_eq!(prior.code, "PRIOR_ACTIONS");
    assert_eq!(prior.message, "test.ledger.transfer,test.ledger.transfer");
}

#[tokio::test]
async fn prior_actions_are_read_from_the_file_then_follow_each_commit() {
    let path = gatehouse_tests::store_path();
    let probe = json!({ "report_prior_actions": true });
    let prior = |result: &ToolResultEnvelope| {
        let decision = result.policy_decision.as_ref().unwrap();
        let reason = &decision.modules[0].reasons[0];
        assert_eq!(reason.code, "PRIOR_ACTIONS");
        reason.message.clone()
    };
    {
        let host = probed("*", probe.clone(), store_at(&path));
        let echo =
            ToolCallEnvelope::new("default", "gatehouse.echo.echo", json!({ "message": "hi" }))
                .with_principal(user("usr_alice"));
        assert!(host.call(echo).await.is_ok());
        // Queued after the echo's record (nobody waits for that one), so committed after it;
        // whether its policy already saw the echo depends on that commit's timing.
        let first = host.call(transfer("prior-1", 10)).await;
        assert!(first.is_ok(), "{first:#?}");
    }
    // A new gateway on the same file: the first call reads them from the file, in order.
    let host = probed("*", probe, store_at(&path));
    let second = host.call(transfer("prior-2", 10)).await;
    assert_eq!(prior(&second), "gatehouse.echo.echo,test.ledger.transfer");
    // The next sees the call before it, committed before it was answered.
    let third = host.call(transfer("prior-3", 10)).await;
    assert_eq!(
        prior(&third),
        "gatehouse.echo.echo,test.ledger.transfer,test.ledger.transfer"
    );
    // Another principal has its own.
    let bob = host
        .call(transfer("prior-4", 10).with_principal(user("usr_bob")))
        .await;
    assert_eq!(prior(&bob), "");
}

// ---------------------------------------------------------------------------------------------
// The audit log.

#[tokio::test]
async fn audit_verify_names_the_first_edited_deleted_or_reordered_entry() {
    let dir = tempfile::tempdir().unwrap();
    let intact = five_records().await;
    let file = config_file(dir.path(), &intact, "");
    let (code, out) =
        gatehouse_async(&["audit", "verify", "--config", file.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok, 5 entries"), "{out}");
    let head = out
        .split("head ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();

    for (sql, expected) in [
        (
            "UPDATE audit SET outcome = 'OK' WHERE seq = 5",
            "entry 5 does not match its hash: it was edited",
        ),
        (
            "UPDATE audit SET record = replace(record, '\"capability_id\":\"transfer\"', '\"capability_id\":\"reverse\"') WHERE seq = 3",
            "entry 3 does not match its hash: it was edited",
        ),
        ("DELETE FROM audit WHERE seq = 2", "entry 2 is missing"),
        (
            "UPDATE audit SET seq = -1 WHERE seq = 2; UPDATE audit SET seq = 2 WHERE seq = 3; \
             UPDATE audit SET seq = 3 WHERE seq = -1;",
            "entry 2 does not link to the entry before it",
        ),
    ] {
        let store = five_records().await;
        tamper(&store, sql);
        let file = config_file(dir.path(), &store, "");
        let (code, out) =
            gatehouse_async(&["audit", "verify", "--config", file.to_str().unwrap()]).await;
        assert_eq!(code, 1, "{sql}: {out}");
        assert!(out.contains(expected), "{sql}: {out}");
    }

    // Removing the last entry keeps the chain whole; the recorded head catches it.
    tamper(&intact, "DELETE FROM audit WHERE seq = 5");
    let (code, out) = gatehouse_async(&[
        "audit",
        "verify",
        "--config",
        file.to_str().unwrap(),
        "--head",
        &head,
    ])
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("removed from the end"), "{out}");
}

#[tokio::test]
async fn the_audit_log_records_every_call_and_hides_sensitive_values() {
    let path = five_records().await;
    let dir = tempfile::tempdir().unwrap();
    let file = config_file(dir.path(), &path, "");
    let (code, out) =
        gatehouse_async(&["audit", "export", "--config", file.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[4]["outcome"], "UNKNOWN_CAPABILITY");
    // test.ledger.transfer is declared sensitive: its arguments and results are hashes.
    let transfer = &lines[0]["record"];
    assert!(
        transfer["call"]["args"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        transfer["result"]["structured_content"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        !out.contains("rent"),
        "the note must not be in clear: {out}"
    );
    // The decision record names the module digests; here none was bound.
    assert_eq!(
        transfer["result"]["policy_decision"]["default_applied"],
        true
    );

    let call_id = lines[1]["tool_call_id"].as_str().unwrap();
    let (code, out) =
        gatehouse_async(&["audit", "show", call_id, "--config", file.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(call_id));
}

#[tokio::test]
async fn replay_says_whether_a_policy_change_would_change_a_decision() {
    let path = gatehouse_tests::store_path();
    let host = probed("gatehouse.echo.*", json!({}), store_at(&path));
    let call = host
        .call(ToolCallEnvelope::new(
            "default",
            "gatehouse.echo.echo",
            json!({ "message": "hi" }),
        ))
        .await;
    assert!(call.is_ok(), "{call:#?}");
    // test.ledger.transfer is declared sensitive: its recorded arguments are a hash.
    let sensitive = host.call(transfer("replayed-1", 10)).await;
    assert!(sensitive.is_ok(), "{sensitive:#?}");
    let invalid = host
        .call(
            ToolCallEnvelope::new(
                "default",
                "test.ledger.transfer",
                json!({ "amount": "ten" }),
            )
            .with_idempotency_key("replayed-2"),
        )
        .await;
    assert_eq!(invalid.outcome, OutcomeCode::InvalidArguments);
    drop(host);
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe.wasm");
    std::fs::write(&probe, POLICY_PROBE.signed()).unwrap();
    let trust = format!(
        "[[trust.publisher]]\nkey_id = \"test-publisher\"\npublic_key = \"{}\"\npolicies = [\"test.*\"]\n",
        gatehouse_tests::publisher().public_key().to_base64()
    );
    for (binding, expected) in [
        ("{}", "the decision would not change"),
        ("{ verdict = \"deny\" }", "the decision WOULD CHANGE"),
    ] {
        let extra = format!(
            "{trust}\n[[pipeline.policy]]\nmodule = \"test.policy-probe\"\ntools = [\"gatehouse.echo.*\"]\nconfig = {binding}\n"
        );
        let file = config_file(dir.path(), &path, &extra);
        let (code, out) = gatehouse_async(&[
            "replay",
            &call.tool_call_id,
            "--policy",
            probe.to_str().unwrap(),
            "--config",
            file.to_str().unwrap(),
        ])
        .await;
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(expected), "{binding}: {out}");
    }

    // Sensitive calls (their recorded arguments and results are hashes), from a real process
    // so that its error message on stderr can be read: one that ended before the policy gate
    // has nothing to replay; one that reached it cannot be replayed from a hash, and is refused.
    let file = config_file(dir.path(), &path, &trust);
    for (id, code, expected) in [
        (
            &invalid.tool_call_id,
            0,
            "ended before the policy gate (INVALID_ARGUMENTS)",
        ),
        (
            &sensitive.tool_call_id,
            1,
            "`test.ledger.transfer` is declared sensitive: its arguments are kept only as a hash",
        ),
    ] {
        let (exit, out) = gatehouse_output(
            &["replay", id, "--policy", s(&probe), "--config", s(&file)],
            &[],
        );
        assert_eq!(exit, code, "{out}");
        assert!(out.contains(expected), "{out}");
    }
}

// ---------------------------------------------------------------------------------------------
// A failing store.

#[tokio::test]
async fn a_store_that_cannot_be_opened_fails_start_up_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![7u8; 4096]).unwrap();
    let mut bad = config(&[], &[]);
    bad.store = store_at(&garbage);
    let error = Host::new(bad).unwrap_err().to_string();
    assert!(error.contains(&garbage.display().to_string()), "{error}");

    let mut unwritable = config(&[], &[]);
    unwritable.store = store_at(&garbage.join("below-a-file.db"));
    let error = Host::new(unwritable).unwrap_err().to_string();
    assert!(error.contains("below-a-file.db"), "{error}");
}

#[tokio::test]
async fn a_full_store_fails_write_calls_and_delivers_nothing_unrecorded() {
    let upstream = Upstream::start().await;
    let mut config = rest_config(&upstream);
    config.store.max_size_mib = Some(1);
    let host = host(config);
    let big = "x".repeat(20_000);
    for n in 0..400 {
        let before = upstream.seen().len();
        let result = host
            .call(post(
                &upstream,
                "/api/fill",
                &json!({ "filler": big }),
                &format!("fill-{n}"),
            ))
            .await;
        if result.outcome == OutcomeCode::StoreUnavailable {
            assert_eq!(result.status, Status::Failed);
            let error = result.error.unwrap();
            if error.retryable {
                // The claim could not be written: nothing ran.
                assert_eq!(
                    upstream.seen().len(),
                    before,
                    "nothing runs without its record"
                );
            } else {
                // The claim fitted but the record did not: the effect happened, and its result
                // is withheld, naming the key for the operator.
                assert_eq!(upstream.seen().len(), before + 1);
                assert!(result.content.is_empty() && result.structured_content.is_none());
                assert!(
                    error.message.contains(&format!("`fill-{n}`")),
                    "{}",
                    error.message
                );
            }
            return;
        }
        assert!(result.is_ok(), "{result:#?}");
    }
    panic!("a 1 MiB store never filled up");
}

// ---------------------------------------------------------------------------------------------
// A gateway killed mid-call, and MCP under concurrency.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_mid_call_leaves_the_key_indeterminate() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut host_config = rest_config(&upstream);
    host_config.sandbox.timeout_ms = 3_000;
    host_config.egress.max_total_ms = 2_800;
    let config = dir.path().join("serve.toml");
    write_config(&config, &host_config, "");
    let adapter = dir.path().join("rest.wasm");
    std::fs::write(&adapter, REST.signed()).unwrap();
    let port = free_port();
    let serve = Serve::config(&config).adapter(&adapter).listen(port);
    let args =
        json!({ "url": upstream.url("/delay/2000/api/crash"), "method": "POST", "body": {} });

    let first = serve.clone().start().await;
    let in_flight = tokio::spawn(try_call(
        port,
        "gatehouse.rest.send",
        args.clone(),
        "crash-1",
    ));
    while upstream.seen().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(first); // SIGKILL while the adapter waits for the upstream
    assert_eq!(
        in_flight.await.unwrap(),
        None,
        "the killed gateway never answered"
    );

    let _second = serve.start().await;
    let mut outcome = String::new();
    for _ in 0..60 {
        let result = try_call(port, "gatehouse.rest.send", args.clone(), "crash-1")
            .await
            .expect("the restarted gateway answers");
        outcome = outcome_of(&result).to_owned();
        // Until the dead call's lease passes, the key looks in flight.
        if outcome != "IDEMPOTENCY_IN_FLIGHT" {
            break;
        }
    }
    assert_eq!(outcome, "IDEMPOTENCY_INDETERMINATE");
    assert_eq!(upstream.seen().len(), 1, "no second upstream effect");
    let store = SqliteStore::open(&host_config.store).unwrap();
    let report = store.verify_audit().await.unwrap();
    assert!(report.first_break.is_none(), "{report:?}");
    let stuck = store
        .keys(true, gatehouse_host::state::now_ms())
        .await
        .unwrap();
    assert_eq!(stuck.len(), 1);

    // The operator checked the upstream: the effect did not happen; release the key.
    let (code, out) = gatehouse_async(&[
        "idempotency",
        "resolve",
        "default",
        "gatehouse.rest.send",
        "crash-1",
        "--release",
        "--as",
        "ops",
        "--config",
        config.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    let result = try_call(port, "gatehouse.rest.send", args, "crash-1")
        .await
        .unwrap();
    assert_eq!(outcome_of(&result), "OK", "{result}");
    assert_eq!(upstream.seen().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_mcp_calls_on_ten_keys_reach_the_upstream_ten_times() {
    let upstream = Upstream::start().await;
    let host = Arc::new(host(rest_config(&upstream)));
    let mcp = McpConfig {
        anonymous_tenant: Some("default".to_owned()),
        ..McpConfig::default()
    };
    let port = gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await;
    let calls = (0..200).map(|i| {
        let args = json!({ "url": upstream.url(&format!("/api/mcp/{}", i % 10)), "method": "POST", "body": {} });
        tokio::spawn(async move { (i % 10, try_call(port, "gatehouse.rest.send", args, &format!("m-{}", i % 10)).await) })
    });
    let results = join_all(calls).await;
    assert_eq!(upstream.seen().len(), 10);
    let mut replays = 0;
    for (k, result) in results {
        let result = result.expect("every call answered");
        assert_eq!(outcome_of(&result), "OK", "{result}");
        let path = &result["structuredContent"]["body"]["path"];
        assert_eq!(path, &json!(format!("/api/mcp/{k}")));
        if result["_meta"].get("gatehouse/replay_of").is_some() {
            replays += 1;
        }
    }
    assert_eq!(replays, 190);
}
