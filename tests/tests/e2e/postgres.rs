//! The shared store on a real PostgreSQL server (one per test, started from the distribution's
//! binaries; see `gatehouse_tests::postgres`): exactly-once across two gateway processes, an
//! approval made on one gateway executed through another, a gateway killed mid-call, the
//! database restarted under load, read-only calls while it is down, signed audit checkpoints
//! and plugin changes kept in the shared database, a claim made while another session holds
//! the audit chain's lock, the chain the database appends verified with the gateway's hash,
//! one approval decided at once through two stores (exactly one decision wins), tasks, the
//! version each plugin last served (of two gateways recording at once, the higher stands), and
//! users' connections and authorization flows.

use std::sync::Arc;
use std::time::Duration;

use gatehouse_host::config::StoreConfig;
use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_host::state::postgres::{PostgresStore, WRITE_LOCK};
use gatehouse_host::state::verify_checkpoints;
use gatehouse_host::state::{
    Anchor, Approval, ApprovalLookup, ApprovalStatus, AuditEvent, AuditQuery, CallRecord,
    ChainBreak, Checkpoint, KeyState, PluginChange, ServedAs, ServedVersion, Store, StoreError,
    Task, TaskFilter, TaskStatus, TaskUpdate, Waiting, now_ms,
};
use gatehouse_host::{Host, HostConfig, OutcomeCode, Status, ToolCallEnvelope};
use gatehouse_tests::artifacts::{LEDGER, REST};
use gatehouse_tests::cli::gatehouse_async;
use gatehouse_tests::gateway::{Serve, write_config};
use gatehouse_tests::host::rest_config;
use gatehouse_tests::mcp::{outcome_of, try_call};
use gatehouse_tests::postgres::Postgres;
use gatehouse_tests::state::{host, post, probed, transfer};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{free_port, join_all};
use serde_json::json;

fn on(pg: &Postgres) -> StoreConfig {
    StoreConfig {
        url: Some(pg.url()),
        ..StoreConfig::default()
    }
}

/// `rest_config(upstream)` storing its state in `pg`.
fn shared_config(upstream: &Upstream, pg: &Postgres) -> HostConfig {
    let mut config = rest_config(upstream);
    config.store = on(pg);
    config
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateway_processes_run_two_hundred_calls_on_ten_keys_ten_times() {
    let pg = Postgres::start();
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let host_config = shared_config(&upstream, &pg);
    let config = dir.path().join("serve.toml");
    write_config(&config, &host_config, "");
    let adapter = dir.path().join("rest.wasm");
    std::fs::write(&adapter, REST.signed()).unwrap();
    let ports = [free_port(), free_port()];
    let serve = Serve::config(&config).adapter(&adapter);
    let _a = serve.clone().listen(ports[0]).start().await;
    let _b = serve.listen(ports[1]).start().await;

    let calls = (0..200).map(|i| {
        let k = i % 10;
        let args = json!({ "url": upstream.url(&format!("/api/pg/{k}")), "method": "POST", "body": { "k": k } });
        let port = ports[i % 2];
        tokio::spawn(async move {
            (
                k,
                try_call(port, "gatehouse.rest.send", args, &format!("pg-{k}")).await,
            )
        })
    });
    let results = join_all(calls).await;
    assert_eq!(
        upstream.seen().len(),
        10,
        "one upstream request per key, whichever gateway took it"
    );
    let mut replays = 0;
    for (k, result) in results {
        let result = result.expect("every call answered");
        assert_eq!(outcome_of(&result), "OK", "{result}");
        assert_eq!(
            result["structuredContent"]["body"]["path"],
            json!(format!("/api/pg/{k}"))
        );
        if result["_meta"].get("gatehouse/replay_of").is_some() {
            replays += 1;
        }
    }
    assert_eq!(replays, 190);
    // The writers of both gateways lock key rows in one order (by key), so none deadlocked
    // (which PostgreSQL would break after a second by failing a transaction).
    let probe = session(&pg).await;
    let deadlocks: i64 = probe
        .query_one("SELECT sum(deadlocks)::bigint FROM pg_stat_database", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(deadlocks, 0);
    let store = PostgresStore::open(&host_config.store).unwrap();
    let report = store.verify_audit().await.unwrap();
    assert_eq!(
        (report.entries, report.first_break),
        (200, None),
        "both gateways' entries form one chain"
    );
}

/// Call `n`'s audit entry, for `tenant`.
fn tenant_event(n: u64, tenant: Option<&str>) -> AuditEvent {
    AuditEvent {
        at_ms: 1_700_000_000_000 + n,
        kind: "call".to_owned(),
        tool_call_id: Some(format!("call_{n}")),
        tenant: tenant.map(str::to_owned),
        principal: None,
        tool: Some("t.x".to_owned()),
        outcome: Some("OK".to_owned()),
        record: format!("{{\"n\":{n}}}"),
    }
}

/// An audit entry alone, recorded durably.
fn record(audit: AuditEvent) -> CallRecord {
    CallRecord {
        audit,
        completes: None,
        releases: None,
        executes: None,
        durable: true,
        session: None,
    }
}

/// A session of the test's own on `pg`'s database.
async fn session(pg: &Postgres) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Another session, holding the lock that orders audit chain `chain` (0: the only one of a
/// log of one chain) until [`release_the_audit_lock`].
async fn hold_the_audit_lock(pg: &Postgres, chain: u32) -> tokio_postgres::Client {
    let other = session(pg).await;
    other
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&(WRITE_LOCK + i64::from(chain))],
        )
        .await
        .unwrap();
    other
}

async fn release_the_audit_lock(other: &tokio_postgres::Client, chain: u32) {
    other
        .execute(
            "SELECT pg_advisory_unlock($1)",
            &[&(WRITE_LOCK + i64::from(chain))],
        )
        .await
        .unwrap();
}

/// Claims are row-level: a call claims its key while another session holds the lock that
/// orders the audit chain; only the call's record (its audit entry) waits for the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_does_not_wait_for_the_audit_chains_lock() {
    let pg = Postgres::start();
    let mut config = gatehouse_tests::config(&["test.*"], &[]);
    config.store = on(&pg);
    let host = Arc::new(Host::new(config).unwrap());
    host.install_adapter(&LEDGER.signed()).unwrap();
    let other = hold_the_audit_lock(&pg, 0).await;

    let call = tokio::spawn({
        let host = Arc::clone(&host);
        async move {
            host.call(
                ToolCallEnvelope::new(
                    "default",
                    "test.ledger.transfer",
                    json!({ "amount": 1, "currency": "EUR" }),
                )
                .with_idempotency_key("held"),
            )
            .await
        }
    });
    let state = async || {
        let keys = host.store().keys(false, now_ms()).await.unwrap();
        keys.iter().find(|k| k.key.key == "held").map(|k| k.state)
    };
    for _ in 0..200 {
        if state().await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        state().await,
        Some(KeyState::InProgress),
        "the key was claimed while the lock was held"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call.is_finished(), "the record waits for the lock");

    release_the_audit_lock(&other, 0).await;
    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ends once the lock is free")
        .unwrap();
    assert_eq!(result.outcome, OutcomeCode::Ok, "{result:#?}");
    assert_eq!(state().await, Some(KeyState::Complete));
    let report = host.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (1, None));
}

/// The database chains the entries (`gatehouse_append`) with the hash the Rust verifier
/// checks: absent and empty columns, text beyond ASCII, one entry or many in a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_the_database_chains_verify_with_the_gateways_hash() {
    let pg = Postgres::start();
    let store = Arc::new(PostgresStore::open(&on(&pg)).unwrap());
    let event = |n: u64, tenant: Option<&str>, record: &str| AuditEvent {
        at_ms: 1_700_000_000_000 + n,
        kind: "call".to_owned(),
        tool_call_id: Some(format!("call_{n}")),
        tenant: tenant.map(str::to_owned),
        principal: None,
        tool: Some(String::new()),
        outcome: Some("OK".to_owned()),
        record: record.to_owned(),
    };
    store.record(record(event(1, None, "{}"))).await.unwrap();
    let many = (2..40).map(|n| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let text = format!("{{\"n\":{n},\"note\":\"héllo ✓ — 日本\"}}");
            store
                .record(record(event(n, Some("tenant-é"), &text)))
                .await
        })
    });
    for done in join_all(many).await {
        done.unwrap();
    }
    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, &report.first_break), (39, &None));
    let entries = store.audit(AuditQuery::default()).await.unwrap();
    assert!(entries.iter().all(|e| e.hash == e.expected_hash()));
    assert_eq!(report.head(), entries.last().unwrap().hash);
}

/// A gateway writes on `[store] writers` connections per crew (claims; records and the rest),
/// each named in `pg_stat_activity`. When one writer of each crew is cut off, the others take
/// their jobs: the store stays available, no call is refused, and the two connect again by
/// themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_connection_is_cut_leaves_its_jobs_to_the_others() {
    let pg = Postgres::start();
    let mut config = gatehouse_tests::config(&["test.*"], &[]);
    config.store = StoreConfig {
        writers: 3,
        ..on(&pg)
    };
    let host = Arc::new(Host::new(config).unwrap());
    host.install_adapter(&LEDGER.signed()).unwrap();
    let admin = session(&pg).await;
    let names = async || -> Vec<String> {
        let rows = admin
            .query(
                "SELECT application_name FROM pg_stat_activity \
                 WHERE application_name LIKE 'gatehouse %' ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    };
    let mut expected: Vec<String> = ["claims", "records"]
        .iter()
        .flat_map(|crew| (0..3).map(move |i| format!("gatehouse {crew} writer {i}")))
        .collect();
    expected.push("gatehouse listener".to_owned());
    expected.sort();
    let all_connected = async || {
        for _ in 0..100 {
            if names().await == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(names().await, expected, "every writer and the listener");
    };
    all_connected().await;
    assert!(host.call(transfer("before", 1)).await.is_ok());

    let cut: Vec<i32> = admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name \
             IN ('gatehouse claims writer 0', 'gatehouse records writer 1')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(cut.len(), 2);
    for pid in &cut {
        admin
            .execute("SELECT pg_terminate_backend($1)", &[pid])
            .await
            .unwrap();
    }
    for _ in 0..100 {
        let left: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                &[&cut],
            )
            .await
            .unwrap()
            .get(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Long enough for the gateway to read the end of both connections.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(host.store().available(), "the other writers hold");

    let calls = (0..40).map(|n| {
        let host = Arc::clone(&host);
        tokio::spawn(async move { host.call(transfer(&format!("after-{n}"), 1)).await })
    });
    for result in join_all(calls).await {
        assert_eq!(result.outcome, OutcomeCode::Ok, "{result:#?}");
    }
    all_connected().await;
    let report = host.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (41, None));
}

/// [`Store::flush`] is a barrier across a crew's writers: it is answered after every record
/// queued before it, whichever writer took it, is committed. Two records wait for the audit
/// chain's lock (held by another session) on two writers; a flush a third writer takes waits
/// for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_waits_for_the_records_every_writer_took_before_it() {
    let pg = Postgres::start();
    let store = Arc::new(
        PostgresStore::open(&StoreConfig {
            writers: 3,
            ..on(&pg)
        })
        .unwrap(),
    );
    let other = hold_the_audit_lock(&pg, 0).await;
    for n in 0..2u64 {
        let record = CallRecord {
            audit: AuditEvent {
                at_ms: 1_700_000_000_000 + n,
                kind: "call".to_owned(),
                tool_call_id: Some(format!("call_{n}")),
                tenant: Some("acme".to_owned()),
                principal: None,
                tool: Some("test.echo".to_owned()),
                outcome: Some("OK".to_owned()),
                record: format!("{{\"n\":{n}}}"),
            },
            completes: None,
            releases: None,
            executes: None,
            durable: false,
            session: None,
        };
        // Not durable: queued, not waited on; a writer takes it and waits for the lock.
        store.record(record).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let flush = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.flush().await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!flush.is_finished(), "the flush waits for both records");
    release_the_audit_lock(&other, 0).await;
    tokio::time::timeout(Duration::from_secs(10), flush)
        .await
        .expect("the flush ends once the records are in")
        .unwrap()
        .unwrap();
    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (2, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_made_on_one_gateway_executes_through_another() {
    let pg = Postgres::start();
    let verdict = json!({ "verdict": "require_approval" });
    let a = probed("test.ledger.*", verdict.clone(), on(&pg));
    let b = probed("test.ledger.*", verdict, on(&pg));

    let paused = a.call(transfer("shared-1", 700)).await;
    assert_eq!(paused.status, Status::Paused);
    let id = paused.approval_id.clone().unwrap();
    // The same call on the other gateway finds the same approval.
    let again = b.call(transfer("shared-1", 700)).await;
    assert_eq!(again.approval_id.as_deref(), Some(id.as_str()));

    // An operator approves from the command line, against the database.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ops.toml");
    std::fs::write(&config, format!("[store]\nurl = {:?}\n", pg.url())).unwrap();
    let config = config.to_str().unwrap();
    let (code, out) = gatehouse_async(&[
        "approvals",
        "approve",
        &id,
        "--as",
        "usr_bob",
        "--reason",
        "checked",
        "--config",
        config,
    ])
    .await;
    assert_eq!(code, 0, "{out}");

    let ran = b.call(transfer("shared-1", 700)).await;
    assert!(ran.is_ok(), "{ran:#?}");
    assert_eq!(ran.replay_of, None);
    assert_eq!(ran.approval_id.as_deref(), Some(id.as_str()));
    let replay = a.call(transfer("shared-1", 700)).await;
    assert_eq!(replay.replay_of.as_deref(), Some(ran.tool_call_id.as_str()));
    let executed = a.approval(&id).await.unwrap().unwrap();
    assert_eq!(
        executed.executed_by_call.as_deref(),
        Some(ran.tool_call_id.as_str())
    );
    let report = a.verify_audit().await.unwrap();
    assert!(report.first_break.is_none(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_mid_call_is_never_rerun_by_another() {
    let pg = Postgres::start();
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut host_config = shared_config(&upstream, &pg);
    host_config.sandbox.timeout_ms = 3_000;
    host_config.egress.max_total_ms = 2_800;
    let config = dir.path().join("serve.toml");
    write_config(&config, &host_config, "");
    let adapter = dir.path().join("rest.wasm");
    std::fs::write(&adapter, REST.signed()).unwrap();
    let (port_a, port_b) = (free_port(), free_port());
    let args =
        json!({ "url": upstream.url("/delay/2000/api/crash"), "method": "POST", "body": {} });

    let serve = Serve::config(&config).adapter(&adapter);
    let a = serve.clone().listen(port_a).start().await;
    let b = serve.listen(port_b).start().await;
    let in_flight = tokio::spawn(try_call(
        port_a,
        "gatehouse.rest.send",
        args.clone(),
        "crash-pg",
    ));
    while upstream.seen().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(a); // SIGKILL while the adapter waits for the upstream
    assert_eq!(in_flight.await.unwrap(), None);

    let mut outcome = String::new();
    for _ in 0..60 {
        let result = try_call(port_b, "gatehouse.rest.send", args.clone(), "crash-pg")
            .await
            .expect("the other gateway answers");
        outcome = outcome_of(&result).to_owned();
        if outcome != "IDEMPOTENCY_IN_FLIGHT" {
            break;
        }
    }
    assert_eq!(outcome, "IDEMPOTENCY_INDETERMINATE");
    assert_eq!(upstream.seen().len(), 1, "no second upstream effect");
    drop(b);
    let store = PostgresStore::open(&host_config.store).unwrap();
    let stuck = store.keys(true, now_ms()).await.unwrap();
    assert_eq!(stuck.len(), 1);
    assert_eq!(stuck[0].key.key, "crash-pg");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_under_load_loses_nothing_acknowledged() {
    let pg = Postgres::start();
    let upstream = Upstream::start().await;
    let host = Arc::new(host(shared_config(&upstream, &pg)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (host, stop) = (Arc::clone(&host), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut results = Vec::new();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let key = format!("load-{w}-{n}");
                    n += 1;
                    let result = host.call(transfer(&key, 1)).await;
                    if !result.is_ok() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    results.push((key, result));
                }
                results
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    pg.stop();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    pg.resume();
    eventually("the store is back", || host.store().available()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let results: Vec<_> = join_all(workers.into_iter())
        .await
        .into_iter()
        .flatten()
        .collect();

    let (mut acknowledged, mut refused) = (Vec::new(), 0);
    for (key, result) in &results {
        if result.is_ok() {
            acknowledged.push((key, result));
        } else {
            assert_eq!(
                result.outcome,
                OutcomeCode::StoreUnavailable,
                "{key}: {result:#?}"
            );
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "the restart was seen by some calls ({} calls)",
        results.len()
    );
    assert!(
        !acknowledged.is_empty(),
        "calls around the restart succeeded"
    );
    // Every acknowledged call is in the audit log, and replays rather than runs again.
    for (key, result) in &acknowledged {
        let entries = host
            .audit(AuditQuery {
                tool_call_id: Some(result.tool_call_id.clone()),
                ..AuditQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(entries.len(), 1, "{key} is recorded");
        let replay = host.call(transfer(key, 1)).await;
        assert_eq!(
            replay.replay_of.as_deref(),
            Some(result.tool_call_id.as_str())
        );
    }
    let report = host.verify_audit().await.unwrap();
    assert!(report.first_break.is_none(), "{report:?}");
    // Service resumed by itself: a new call runs.
    assert!(host.call(transfer("after", 1)).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_database_is_down_only_allowed_read_only_calls_run() {
    let pg = Postgres::start();
    let upstream = Upstream::start().await;
    let lenient = {
        let mut config = shared_config(&upstream, &pg);
        config.store.read_only_without_store = true;
        host(config)
    };
    let strict = host(shared_config(&upstream, &pg));
    let echo =
        || ToolCallEnvelope::new("default", "gatehouse.echo.echo", json!({ "message": "hi" }));
    assert!(lenient.call(echo()).await.is_ok());

    pg.stop();
    eventually("both gateways see the database down", || {
        !lenient.store().available() && !strict.store().available()
    })
    .await;
    assert!(
        lenient.call(echo()).await.is_ok(),
        "read-only calls are served when the operator allows it"
    );
    let refused = strict.call(echo()).await;
    assert_eq!(refused.outcome, OutcomeCode::StoreUnavailable);
    assert!(refused.error.unwrap().retryable);
    let write = lenient.call(transfer("down-1", 5)).await;
    assert_eq!(write.outcome, OutcomeCode::StoreUnavailable);
    assert!(
        write.error.unwrap().retryable,
        "nothing ran, so a retry is safe"
    );

    pg.resume();
    eventually("both gateways see the database again", || {
        lenient.store().available() && strict.store().available()
    })
    .await;
    assert!(strict.call(echo()).await.is_ok());
    let write = lenient.call(transfer("down-1", 5)).await;
    assert!(write.is_ok(), "{write:#?}");
}

#[test]
fn a_database_that_cannot_be_reached_fails_start_up_without_its_password() {
    let config = StoreConfig {
        url: Some(format!(
            "postgres://gatehouse:hunter2@127.0.0.1:{}/postgres?connect_timeout=2",
            free_port()
        )),
        ..StoreConfig::default()
    };
    let error = Host::new(HostConfig {
        store: config,
        ..HostConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("cannot connect"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
}

#[test]
fn gateways_starting_together_apply_the_migrations_once() {
    let pg = Postgres::start();
    let config = on(&pg);
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let config = config.clone();
            std::thread::spawn(move || PostgresStore::open(&config).map(drop))
        })
        .collect();
    for store in opened {
        store
            .join()
            .unwrap()
            .expect("every gateway opens the store");
    }
    // A fifth finds the schema current and works.
    let store = PostgresStore::open(&config).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(store.verify_audit()).unwrap();
    assert_eq!((report.entries, report.first_break), (0, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_on_one_database_share_their_rate_budgets() {
    let pg = Postgres::start();
    let upstream = Upstream::start().await;
    let gateway = || {
        let mut config = shared_config(&upstream, &pg);
        config.pipeline.rate_limits = serde_json::from_value(json!([
            { "tenants": ["default"], "tools": "gatehouse.echo.*", "calls": 5, "per_seconds": 60 },
        ]))
        .unwrap();
        host(config)
    };
    let (a, b) = (gateway(), gateway());
    let echo =
        || ToolCallEnvelope::new("default", "gatehouse.echo.echo", json!({ "message": "hi" }));
    for n in 0..5 {
        let on = if n % 2 == 0 { &a } else { &b };
        let result = on.call(echo()).await;
        assert!(result.is_ok(), "call {n}: {result:#?}");
    }
    // Five calls in all, three on A and two on B: the budget is spent on both.
    for on in [&a, &b] {
        let limited = on.call(echo()).await;
        assert_eq!(limited.outcome, OutcomeCode::RateLimited, "{limited:#?}");
        assert!(limited.error.unwrap().retryable);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_checkpoints_and_plugin_changes_are_kept_in_the_shared_database() {
    let upstream = Upstream::start().await;
    let pg = Postgres::start();
    let host = host(shared_config(&upstream, &pg));
    for n in 0..3 {
        let result = host
            .call(post(
                &upstream,
                "/api/cp",
                &json!({ "n": n }),
                &format!("cp-{n}"),
            ))
            .await;
        assert!(result.is_ok(), "{result:#?}");
    }
    let store = host.store();
    store.flush().await.unwrap();
    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, &report.first_break), (3, &None));

    let key = SigningKey::generate("pg-audit").unwrap();
    let checkpoint = Checkpoint::sign(&key, report.last_seq(), report.head(), 1_000);
    store.add_checkpoint(checkpoint.clone()).await.unwrap();
    assert_eq!(
        store.checkpoints().await.unwrap(),
        std::slice::from_ref(&checkpoint)
    );
    let checked = verify_checkpoints(&**store, &report, &[checkpoint], &key.public_key())
        .await
        .unwrap();
    assert_eq!(checked, Ok(()));

    let changes = vec![
        PluginChange::Install {
            plugin: "test.policy-probe".to_owned(),
            component: "AGFzbQ==".to_owned(),
            source: Some(format!(
                "oci://127.0.0.1:5000/acme/probe@sha256:{}",
                "ab".repeat(32)
            )),
            at_ms: 1,
        },
        PluginChange::Rollback {
            plugin: "test.policy-probe".to_owned(),
            at_ms: 2,
        },
        PluginChange::SetConfig {
            plugin: "test.policy-probe".to_owned(),
            config: json!({ "verdict": "deny" }),
            at_ms: 3,
        },
    ];
    for change in &changes {
        store.add_plugin_change(change.clone()).await.unwrap();
    }
    assert_eq!(store.plugin_changes().await.unwrap(), changes);
}

/// `[store] chains` partitions the log by tenant. A log written with one chain goes on as
/// chain 0 after the gateways move to four; two stores (two gateways) append entries of eight
/// tenants and of none concurrently, and a gateway of the version before one entry; every entry is in its tenant's chain, each chain verifies
/// and reports its head, and the checkpointer signs every head. A session holding one chain's
/// lock holds up only that chain's appends. An edit in one chain is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_log_partitioned_by_tenant_verifies_every_chain_and_one_chains_lock_holds_up_only_it() {
    use gatehouse_host::state::audit::{chain_of, framed_columns};
    use gatehouse_host::state::{CheckpointConfig, Checkpointer};

    let pg = Postgres::start();
    let event = tenant_event;
    let tenants: Vec<String> = (0..8).map(|t| format!("tenant-{t}")).collect();

    // One chain, as every log was before partitioning.
    let before = PostgresStore::open(&on(&pg)).unwrap();
    for n in 1..=5 {
        before
            .record(record(event(n, Some(&tenants[n as usize % 8]))))
            .await
            .unwrap();
    }
    drop(before);

    let partitioned = StoreConfig {
        chains: 4,
        ..on(&pg)
    };
    let stores = [
        Arc::new(PostgresStore::open(&partitioned).unwrap()),
        Arc::new(PostgresStore::open(&partitioned).unwrap()),
    ];
    let writes = (6..=205_u64).map(|n| {
        let store = Arc::clone(&stores[n as usize % 2]);
        let tenant = (n % 9 != 0).then(|| tenants[n as usize % 8].clone());
        tokio::spawn(async move { store.record(record(event(n, tenant.as_deref()))).await })
    });
    for done in join_all(writes).await {
        done.unwrap();
    }

    // A gateway of the version before, still running in a rolling upgrade, appends through
    // the function it knows: to chain 0.
    let old = tenant_event(206, Some(&tenants[3]));
    session(&pg)
        .await
        .query_one(
            "SELECT gatehouse_append($1, $2::bigint[], $3::text[], $4::text[], $5::text[], \
               $6::text[], $7::text[], $8::text[], $9::text[], $10::bytea[])",
            &[
                &WRITE_LOCK,
                &vec![old.at_ms as i64],
                &vec![old.kind.as_str()],
                &vec![old.tool_call_id.as_deref()],
                &vec![old.tenant.as_deref()],
                &vec![old.principal.as_deref()],
                &vec![old.tool.as_deref()],
                &vec![old.outcome.as_deref()],
                &vec![old.record.as_str()],
                &vec![framed_columns(&old)],
            ],
        )
        .await
        .unwrap();

    let report = stores[0].verify_audit().await.unwrap();
    assert_eq!((report.entries, &report.first_break), (206, &None));
    let entries = stores[0].audit(AuditQuery::default()).await.unwrap();
    assert_eq!(entries.len(), 206);
    for entry in &entries[..5] {
        assert_eq!((entry.chain, entry.link), (0, entry.seq), "{entry:?}");
    }
    for entry in &entries[5..] {
        let chain = if entry.event == old {
            0
        } else {
            chain_of(entry.event.tenant.as_deref(), 4)
        };
        assert_eq!(entry.chain, chain, "{entry:?}");
    }
    assert_eq!(entries[205].event, old);
    let mut chains: Vec<u32> = entries.iter().map(|e| e.chain).collect();
    chains.sort_unstable();
    chains.dedup();
    assert!(
        chains.len() > 1,
        "eight tenants over four chains: {chains:?}"
    );
    assert_eq!(
        report.heads.iter().map(|h| h.chain).collect::<Vec<_>>(),
        chains
    );
    for head in &report.heads {
        let of_chain: Vec<_> = entries.iter().filter(|e| e.chain == head.chain).collect();
        let last = of_chain.last().unwrap();
        assert_eq!(
            (head.entries, head.seq, &head.hash),
            (of_chain.len() as u64, last.seq, &last.hash)
        );
    }

    // The checkpointer signs each chain's head; the log extends every checkpoint.
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate("pg-chains").unwrap();
    let key_file = dir.path().join("key.toml");
    std::fs::write(&key_file, key.to_toml()).unwrap();
    let store: Arc<dyn Store> = stores[0].clone();
    let signer = Checkpointer::start(
        Arc::clone(&store),
        &CheckpointConfig {
            key: Some(key_file),
            ..CheckpointConfig::default()
        },
    )
    .unwrap()
    .unwrap();
    signer.stop().await;
    let checkpoints = store.checkpoints().await.unwrap();
    let mut signed: Vec<u64> = checkpoints.iter().map(|c| c.seq).collect();
    signed.sort_unstable();
    let mut heads: Vec<u64> = report.heads.iter().map(|h| h.seq).collect();
    heads.sort_unstable();
    assert_eq!(signed, heads, "one checkpoint per chain head");
    let checked = verify_checkpoints(&*store, &report, &checkpoints, &key.public_key())
        .await
        .unwrap();
    assert_eq!(checked, Ok(()));

    // Another session holds one chain's lock: an entry of another chain commits, one of that
    // chain waits until the lock is released.
    let held = chain_of(Some(&tenants[1]), 4);
    let free = (0..8)
        .map(|t| &tenants[t])
        .find(|t| chain_of(Some(t), 4) != held)
        .unwrap()
        .clone();
    let other = hold_the_audit_lock(&pg, held).await;
    let waiting = {
        let store = Arc::clone(&stores[1]);
        let tenant = tenants[1].clone();
        tokio::spawn(async move { store.record(record(event(300, Some(&tenant)))).await })
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        stores[0].record(record(event(301, Some(&free)))),
    )
    .await
    .expect("an entry of another chain does not wait for the held chain's lock")
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the held chain's entry waits");
    release_the_audit_lock(&other, held).await;
    waiting.await.unwrap().unwrap();
    let report = stores[0].verify_audit().await.unwrap();
    assert_eq!((report.entries, &report.first_break), (208, &None));

    // An edit in one chain is named by its entry.
    let victim = stores[0]
        .audit(AuditQuery {
            chain: Some(held),
            ..AuditQuery::default()
        })
        .await
        .unwrap()[3]
        .clone();
    assert_eq!(victim.chain, held);
    session(&pg)
        .await
        .execute(
            "UPDATE audit SET outcome = 'DENIED' WHERE seq = $1",
            &[&(victim.seq as i64)],
        )
        .await
        .unwrap();
    let report = stores[0].verify_audit().await.unwrap();
    assert_eq!(
        report.first_break,
        Some(ChainBreak::Altered { seq: victim.seq })
    );
}

/// `gatehouse audit verify` on a log of several chains prints every chain's head, and the
/// heads it printed hold after more entries. A chain whose last entries were removed still
/// chains correctly (as a log whose tail was cut does), and the kept heads catch it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_prints_each_chains_head_and_the_kept_heads_catch_a_cut_chain() {
    let pg = Postgres::start();
    let partitioned = StoreConfig {
        chains: 4,
        ..on(&pg)
    };
    let store = PostgresStore::open(&partitioned).unwrap();
    let tenant = |n: u64| format!("tenant-{}", n % 8);
    for n in 1..=24 {
        store
            .record(record(tenant_event(n, Some(&tenant(n)))))
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gatehouse.toml");
    std::fs::write(
        &file,
        format!("[store]\nurl = \"{}\"\nchains = 4\n", pg.url()),
    )
    .unwrap();
    let verify = async |more: &[&str]| {
        let mut args = vec!["audit", "verify", "--config", file.to_str().unwrap()];
        args.extend_from_slice(more);
        gatehouse_async(&args).await
    };

    let report = store.verify_audit().await.unwrap();
    let kept = Anchor::of(&report);
    assert!(report.heads.len() > 1, "{report:?}");
    let (code, out) = verify(&[]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "ok, 24 entries in {} chains; heads {kept} (keep them elsewhere and pass them as --head next time)",
            report.heads.len()
        )),
        "{out}"
    );

    for n in 25..=32 {
        store
            .record(record(tenant_event(n, Some(&tenant(n)))))
            .await
            .unwrap();
    }
    let (code, out) = verify(&["--head", &kept]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok, 32 entries in "), "{out}");

    // Cut one chain back to before its kept head: every chain still links.
    let cut = &report.heads[1];
    session(&pg)
        .await
        .execute(
            "DELETE FROM audit WHERE chain = $1 AND seq >= $2",
            &[&i32::try_from(cut.chain).unwrap(), &(cut.seq as i64)],
        )
        .await
        .unwrap();
    let (code, out) = verify(&[]).await;
    assert_eq!(code, 0, "the chains alone cannot see a cut tail: {out}");
    let (code, out) = verify(&["--head", &kept]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "but not through the head you recorded ({}): the log holds no entry {}: entries were removed from the end of its chain",
            cut.hash, cut.seq
        )),
        "{out}"
    );
}

/// A pending proposal asked by `usr_alice`, valid for a minute.
fn proposal(id: &str) -> Approval {
    Approval {
        id: id.to_owned(),
        tenant: "acme".to_owned(),
        tool: "test.ledger.transfer".to_owned(),
        idempotency_key: None,
        request_hash: "h".to_owned(),
        call: json!({ "tool_call_id": format!("call_{id}") }),
        principals: vec!["usr_alice".to_owned()],
        mode: "delegated".to_owned(),
        reasons: vec!["needs review".to_owned()],
        status: ApprovalStatus::Pending,
        created_at_ms: now_ms(),
        expires_at_ms: now_ms() + 60_000,
        decided_by: None,
        decided_reason: None,
        decided_at_ms: None,
        executed_by_call: None,
        decided_as: None,
        waiting: Waiting::Retry,
    }
}

/// Issue 43, item 2: two stores on one database (two gateways; one of them with two writers)
/// approve and reject one approval at once, fifty times. Each time exactly one decision wins,
/// what is stored is the winner's, and the loser is audited as refused, never as a decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_approval_decided_at_once_through_two_stores_is_decided_once() {
    const ROUNDS: usize = 50;
    let pg = Postgres::start();
    let a = Arc::new(PostgresStore::open(&on(&pg)).unwrap());
    let b = Arc::new(
        PostgresStore::open(&StoreConfig {
            writers: 2,
            ..on(&pg)
        })
        .unwrap(),
    );
    let config = on(&pg);
    for round in 0..ROUNDS {
        let id = format!("apr_{round}");
        a.propose(proposal(&id)).await.unwrap();
        let approve = tokio::spawn({
            let (a, decision) = (Arc::clone(&a), config.decision(&id, true, "usr_bob", "yes"));
            async move { a.decide(decision).await }
        });
        let reject = tokio::spawn({
            let (b, decision) = (
                Arc::clone(&b),
                config.decision(&id, false, "usr_carol", "no"),
            );
            async move { b.decide(decision).await }
        });
        let (approve, reject) = (approve.await.unwrap(), reject.await.unwrap());
        let won = match (approve, reject) {
            (Ok(won), Err(StoreError::Refused(why))) | (Err(StoreError::Refused(why)), Ok(won)) => {
                assert!(why.contains("is already"), "round {round}: {why}");
                won
            }
            other => panic!("round {round}: not exactly one decision won: {other:?}"),
        };
        let stored = b.approval(ApprovalLookup::Id(id.clone())).await.unwrap();
        assert_eq!(stored.as_ref(), Some(&won), "round {round}");
    }
    let entries = |kind: &str| {
        let query = AuditQuery {
            kind: Some(kind.to_owned()),
            ..AuditQuery::default()
        };
        let a = Arc::clone(&a);
        async move {
            let mut ids: Vec<String> = a
                .audit(query)
                .await
                .unwrap()
                .iter()
                .map(|entry| {
                    let record: serde_json::Value =
                        serde_json::from_str(&entry.event.record).unwrap();
                    record["approval_id"].as_str().unwrap().to_owned()
                })
                .collect();
            ids.sort();
            ids
        }
    };
    let mut every: Vec<String> = (0..ROUNDS).map(|round| format!("apr_{round}")).collect();
    every.sort();
    assert_eq!(entries("approval").await, every, "one decision entry each");
    assert_eq!(entries("approval_refused").await, every, "one refusal each");
    let report = a.verify_audit().await.unwrap();
    assert_eq!(
        (report.entries, report.first_break),
        (2 * ROUNDS as u64, None)
    );
}

/// Tasks in the shared database: made on one gateway and seen on another, the approval they
/// wait on marked in the same transaction, listed a page at a time, changed only from the
/// statuses an update names (of two updates racing from one status, one applies), and pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_kept_in_the_shared_database() {
    let pg = Postgres::start();
    let a = Arc::new(PostgresStore::open(&on(&pg)).unwrap());
    let b = Arc::new(PostgresStore::open(&on(&pg)).unwrap());
    a.propose(proposal("apr_1")).await.unwrap();
    // Times from now: each store's writer prunes what expired before now, by itself.
    let base = now_ms();
    let task = |id: &str, at: u64| Task {
        id: id.to_owned(),
        tenant: "acme".to_owned(),
        principal: "usr_alice".to_owned(),
        tool: "test.ledger.transfer".to_owned(),
        approval_id: None,
        call: json!({ "tool_call_id": format!("call_{id}") }),
        status: TaskStatus::Working,
        status_message: None,
        result: None,
        created_at_ms: base + at,
        updated_at_ms: base + at,
        expires_at_ms: base + at + 60_000,
    };
    let waiting = Task {
        approval_id: Some("apr_1".to_owned()),
        ..task("task_c", 3_000)
    };
    assert_eq!(a.create_task(waiting.clone()).await.unwrap(), waiting);
    for (id, at) in [("task_a", 1_000), ("task_b", 3_000)] {
        a.create_task(task(id, at)).await.unwrap();
    }
    assert_eq!(b.task("task_c".to_owned()).await.unwrap(), Some(waiting));
    let approval = b
        .approval(ApprovalLookup::Id("apr_1".to_owned()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        approval.waiting,
        Waiting::Task {
            id: "task_c".to_owned()
        }
    );
    let orphan = Task {
        approval_id: Some("apr_none".to_owned()),
        ..task("task_d", 4_000)
    };
    assert!(matches!(
        a.create_task(orphan).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(b.task("task_d".to_owned()).await.unwrap(), None);
    assert!(matches!(
        b.set_waiting("apr_none".to_owned(), Waiting::Retry).await,
        Err(StoreError::NotFound(_))
    ));
    let held = Waiting::Held { until_ms: 9_000 };
    b.set_waiting("apr_1".to_owned(), held.clone())
        .await
        .unwrap();
    let approval = a
        .approval(ApprovalLookup::Id("apr_1".to_owned()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(approval.waiting, held);

    let page = |limit: usize, before: Option<(u64, &str)>| {
        let filter = TaskFilter {
            tenant: Some("acme".to_owned()),
            principal: Some("usr_alice".to_owned()),
            limit,
            before: before.map(|(at, id)| (at, id.to_owned())),
            ..TaskFilter::default()
        };
        let b = Arc::clone(&b);
        async move {
            let tasks = b.tasks(filter).await.unwrap();
            tasks.into_iter().map(|task| task.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(2, None).await, ["task_c", "task_b"]);
    assert_eq!(page(2, Some((base + 3_000, "task_b"))).await, ["task_a"]);
    let by_status = TaskFilter {
        statuses: vec![TaskStatus::Working, TaskStatus::InputRequired],
        approval_id: Some("apr_1".to_owned()),
        ..TaskFilter::default()
    };
    let found: Vec<String> = a
        .tasks(by_status)
        .await
        .unwrap()
        .into_iter()
        .map(|task| task.id)
        .collect();
    assert_eq!(found, ["task_c"]);

    // Two updates from `working` at once, through both stores: one applies.
    let update = |status: TaskStatus| TaskUpdate {
        id: "task_c".to_owned(),
        from: vec![TaskStatus::Working],
        status,
        status_message: None,
        result: Some(json!({ "status": status.as_str() })),
        now_ms: base + 5_000,
    };
    let completed = tokio::spawn({
        let (a, update) = (Arc::clone(&a), update(TaskStatus::Completed));
        async move { a.update_task(update).await }
    });
    let cancelled = tokio::spawn({
        let (b, update) = (Arc::clone(&b), update(TaskStatus::Cancelled));
        async move { b.update_task(update).await }
    });
    let (completed, cancelled) = (
        completed.await.unwrap().unwrap(),
        cancelled.await.unwrap().unwrap(),
    );
    let applied = match (completed, cancelled) {
        (Some(applied), None) | (None, Some(applied)) => applied,
        other => panic!("not exactly one update applied: {other:?}"),
    };
    assert_eq!(a.task("task_c".to_owned()).await.unwrap(), Some(applied));

    // Pruned once expired: task_a a minute after its creation, the others two seconds later.
    assert_eq!(a.prune(base + 62_000).await.unwrap(), 1);
    assert_eq!(b.task("task_a".to_owned()).await.unwrap(), None);
    assert_eq!(page(10, None).await, ["task_c", "task_b"]);
}

/// The version each plugin last served, in the shared database: what one gateway records,
/// another reads. Two gateways recording the same new plugin at once, one 1.0.0 and the other
/// 2.0.0, leave 2.0.0 whichever commits first (an install never lowers the record); an
/// operator's downgrade does lower it; an adapter and a policy of one id are two rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_versions_are_shared_and_an_install_never_lowers_them() {
    let pg = Postgres::start();
    let a = Arc::new(PostgresStore::open(&on(&pg)).unwrap());
    let b = Arc::new(PostgresStore::open(&on(&pg)).unwrap());
    let served = |kind: &str, plugin: &str, version: &str| ServedVersion {
        kind: kind.to_owned(),
        plugin: plugin.to_owned(),
        version: version.to_owned(),
        digest: format!("sha256:{version}"),
        source: None,
        at_ms: 1_000,
    };
    const ROUNDS: usize = 20;
    for round in 0..ROUNDS {
        let plugin = format!("acme.p{round:02}");
        let (low, high) = tokio::join!(
            a.record_served(vec![(
                served("policy", &plugin, "1.0.0"),
                ServedAs::Install
            )]),
            b.record_served(vec![(
                served("policy", &plugin, "2.0.0"),
                ServedAs::Install
            )]),
        );
        low.unwrap();
        high.unwrap();
    }
    let recorded = a.served_versions().await.unwrap();
    assert_eq!(recorded.len(), ROUNDS);
    for (round, row) in recorded.iter().enumerate() {
        assert_eq!(
            *row,
            served("policy", &format!("acme.p{round:02}"), "2.0.0"),
            "round {round}"
        );
    }

    // One transaction may hold several rows, of any kind, lowered or not.
    let both = vec![
        (served("policy", "acme.p00", "1.0.0"), ServedAs::Downgrade),
        (served("adapter", "acme.p00", "0.1.0"), ServedAs::Install),
    ];
    a.record_served(both).await.unwrap();
    let recorded = b.served_versions().await.unwrap();
    assert_eq!(
        recorded[..3],
        [
            served("adapter", "acme.p00", "0.1.0"),
            served("policy", "acme.p00", "1.0.0"),
            served("policy", "acme.p01", "2.0.0"),
        ]
    );
}

/// Users' connections and authorization flows (issue 60) on PostgreSQL, as on SQLite: a
/// connection replaced (its creation kept), listed by filter and removed; a flow opened by one
/// browser only, taken once (a replayed or forged state finds nothing), never past its expiry,
/// and pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_and_authorization_flows_keep_their_rules_on_postgres() {
    use gatehouse_host::state::{Authorization, Connection, ConnectionFilter, ConnectionKey};
    let pg = Postgres::start();
    let store = PostgresStore::open(&on(&pg)).unwrap();
    let whose = |principal: &str| ConnectionKey {
        tenant: "acme".into(),
        principal: principal.into(),
        provider: "github".into(),
    };
    let connection = |principal: &str, sealed: &str, at: u64| Connection {
        key: whose(principal),
        resource: "https://api.example/".into(),
        sealed: sealed.into(),
        token_hash: "0123456789abcdef".into(),
        scope: "repo".into(),
        expires_at_ms: (principal == "user:alice").then_some(at + 3_600_000),
        created_at_ms: at,
        updated_at_ms: at,
    };
    store
        .put_connection(connection("user:alice", "first", 10))
        .await
        .unwrap();
    store
        .put_connection(connection("user:bob", "bobs", 20))
        .await
        .unwrap();
    let mut refreshed = connection("user:alice", "second", 30);
    refreshed.created_at_ms = 99;
    store.put_connection(refreshed).await.unwrap();
    let alice = store
        .connection(whose("user:alice"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alice.sealed, "second");
    assert_eq!(alice.updated_at_ms, 30);
    assert_eq!(
        alice.created_at_ms, 10,
        "a replaced connection keeps its creation"
    );
    assert_eq!(alice.expires_at_ms, Some(30 + 3_600_000));
    let bobs = store.connection(whose("user:bob")).await.unwrap().unwrap();
    assert_eq!(bobs.expires_at_ms, None);
    let listed = store
        .connections(ConnectionFilter {
            principal: Some("user:bob".into()),
            ..ConnectionFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed, [bobs]);
    assert_eq!(
        store
            .connections(ConnectionFilter::default())
            .await
            .unwrap()
            .len(),
        2
    );
    // The right to refresh alice's connection, across two gateways' stores on one database:
    // one takes it, the other cannot until it lapses or the refreshed connection is stored.
    let other = PostgresStore::open(&on(&pg)).unwrap();
    let hash = alice.token_hash.clone();
    async fn lease(store: &PostgresStore, key: &ConnectionKey, hash: &str, now: u64) -> bool {
        (store.lease_connection(key.clone(), hash.to_owned(), now, now + 30_000))
            .await
            .unwrap()
    }
    let key = whose("user:alice");
    assert!(lease(&store, &key, &hash, 100).await);
    assert!(!lease(&other, &key, &hash, 200).await);
    assert!(lease(&other, &key, &hash, 30_101).await, "lapsed");
    let mut rotated = connection("user:alice", "third", 40);
    rotated.token_hash = "fedcba9876543210".into();
    other.put_connection(rotated.clone()).await.unwrap();
    assert!(
        !lease(&store, &key, &hash, 30_200).await,
        "the spent token's"
    );
    assert!(lease(&store, &key, &rotated.token_hash, 30_200).await);
    assert!(!lease(&other, &key, &rotated.token_hash, 30_300).await);
    assert!(
        !store
            .lease_connection(whose("user:carol"), hash.clone(), 1, 2)
            .await
            .unwrap()
    );
    assert!(store.delete_connection(whose("user:alice")).await.unwrap());
    assert!(!store.delete_connection(whose("user:alice")).await.unwrap());

    let flow = |state: &str, expires_at_ms: u64| Authorization {
        state_hash: state.into(),
        key: whose("user:alice"),
        resource: String::new(),
        sealed_verifier: "sealed".into(),
        tool: "gh.create_issue".into(),
        browser_hash: None,
        created_at_ms: 1,
        expires_at_ms,
        call: "{}".into(),
    };
    store.begin_authorization(flow("s1", 1_000)).await.unwrap();
    store
        .begin_authorization(flow("late", 1_000))
        .await
        .unwrap();
    store.begin_authorization(flow("old", 1_000)).await.unwrap();
    let opened = store
        .open_authorization("s1".into(), "browser-1".into(), 500)
        .await
        .unwrap()
        .expect("a live flow opens");
    assert_eq!(opened.browser_hash.as_deref(), Some("browser-1"));
    assert_eq!(
        store
            .open_authorization("s1".into(), "browser-2".into(), 600)
            .await
            .unwrap(),
        None,
        "a second browser cannot open it"
    );
    assert_eq!(
        store
            .open_authorization("late".into(), "b".into(), 1_001)
            .await
            .unwrap(),
        None,
        "past its expiry"
    );
    assert_eq!(
        store.take_authorization("s1".into(), 700).await.unwrap(),
        Some(opened)
    );
    assert_eq!(
        store.take_authorization("s1".into(), 700).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .take_authorization("forged".into(), 700)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.prune(2_000).await.unwrap(), 2, "`late` and `old`");
}
