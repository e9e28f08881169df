//! The SQLite store's own tests: batches, the audit chain, approvals, claims and served versions
//! on a real file; decisions (`decisions`) and tasks (`tasks`) in their own files.

mod connections;
mod decisions;
mod sessions;
mod tasks;

use rusqlite::params;

use super::sql::{Head, append, audit_query};
use super::writer::run_batch;
use super::*;
use crate::jobs::Job;
use crate::records::{
    ApprovalFilter, ApprovalStatus, AuditEvent, CallRecord, Claim, ClaimRequest, DecidedAs,
    Decision, KeyState, Resolution, ServedAs, ServedVersion, proposal,
};

fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        path: Some(dir.path().join("state.db")),
        ..StoreConfig::default()
    };
    (SqliteStore::open(&config).unwrap(), dir)
}

fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey {
        tenant: "acme".to_owned(),
        tool: "t.pay".to_owned(),
        key: k.to_owned(),
    }
}

fn claim_request(k: &str, hash: &str, call: &str, lease_ms: u64) -> ClaimRequest {
    let now = crate::records::now_ms();
    ClaimRequest {
        key: key(k),
        request_hash: hash.to_owned(),
        tool_call_id: call.to_owned(),
        lease_until_ms: now + lease_ms,
        expires_at_ms: now + 60_000,
    }
}

fn finished(call: &str, k: &str, result: &str) -> CallRecord {
    CallRecord {
        audit: AuditEvent {
            kind: "call".to_owned(),
            tool_call_id: Some(call.to_owned()),
            tenant: Some("acme".to_owned()),
            principal: Some("agent:a".to_owned()),
            tool: Some("t.pay".to_owned()),
            outcome: Some("OK".to_owned()),
            record: "{}".to_owned(),
            at_ms: crate::records::now_ms(),
        },
        completes: Some((key(k), result.to_owned())),
        releases: None,
        executes: None,
        durable: true,
        session: None,
    }
}

#[tokio::test]
async fn a_key_runs_once_then_replays_and_refuses_other_requests() {
    let (store, _dir) = store();
    let first = claim_request("k1", "h1", "call_1", 60_000);
    assert_eq!(store.claim(first.clone()).await.unwrap(), Claim::Run);
    assert_eq!(
        store
            .claim(claim_request("k1", "h1", "call_2", 60_000))
            .await
            .unwrap(),
        Claim::InFlight {
            tool_call_id: "call_1".to_owned()
        }
    );
    assert_eq!(
        store
            .claim(claim_request("k1", "h2", "call_3", 60_000))
            .await
            .unwrap(),
        Claim::Conflict {
            tool_call_id: "call_1".to_owned()
        }
    );
    store
        .record(finished("call_1", "k1", "{\"r\":1}"))
        .await
        .unwrap();
    assert_eq!(
        store
            .claim(claim_request("k1", "h1", "call_4", 60_000))
            .await
            .unwrap(),
        Claim::Replay {
            tool_call_id: "call_1".to_owned(),
            result: Some("{\"r\":1}".to_owned())
        }
    );
    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (1, None));
}

/// The steps of SQLite's plan for `sql` with `params`, on the store's reader.
fn query_plan(store: &SqliteStore, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
    let reader = store.reader.lock().unwrap();
    let mut statement = reader
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap();
    statement
        .query_map(params, |row| row.get(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The job recording a read-only call: one write.
fn read_only(call: &str) -> Job {
    let mut record = finished(call, call, "{}");
    record.completes = None;
    record.durable = false;
    Job {
        op: Op::Record(record),
        reply: None,
    }
}

#[tokio::test]
async fn a_job_failing_inside_a_batch_leaves_one_chain_through_the_others() {
    let (store, dir) = store();
    let missing = Decision {
        id: "apr_missing".to_owned(),
        approve: true,
        by: "ops".to_owned(),
        reason: "r".to_owned(),
        now_ms: crate::records::now_ms(),
        allow_self_approval: false,
        decided_as: DecidedAs::Approver,
    };
    let mut first = finished("call_0", "call_0", "{}");
    first.completes = None;
    store.record(first).await.unwrap();
    // One batch on a connection of its own: two entries, a job that fails, two more.
    let mut conn = connect(&dir.path().join("state.db"), OpenFlags::default()).unwrap();
    let mut batch = vec![
        read_only("call_1"),
        read_only("call_2"),
        Job {
            op: Op::Decide(missing),
            reply: None,
        },
        read_only("call_3"),
        read_only("call_4"),
    ];
    let results = run_batch(&mut conn, &mut batch);
    let failed: Vec<bool> = results.iter().map(Result::is_err).collect();
    assert_eq!(failed, [false, false, true, false, false]);
    assert!(matches!(&results[2], Err(StoreError::NotFound(what)) if what.contains("apr_missing")));
    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (5, None));
}

/// Jobs of one write run without a savepoint. A record too large for a capped store fails
/// in the middle of a batch, and SQLite may undo the statement or the whole transaction:
/// either way the log keeps exactly the jobs answered `Ok`, and the small records after
/// the large one are not kept behind the batch's back.
#[tokio::test]
async fn a_batch_that_fills_the_store_keeps_exactly_the_jobs_it_answers_ok() {
    let (store, dir) = store();
    let mut first = finished("call_0", "call_0", "{}");
    first.completes = None;
    store.record(first).await.unwrap();
    let mut conn = connect(&dir.path().join("state.db"), OpenFlags::default()).unwrap();
    let pages: i64 = conn
        .pragma_query_value(None, "page_count", |row| row.get(0))
        .unwrap();
    conn.pragma_update(None, "max_page_count", pages + 8)
        .unwrap();
    let mut batch: Vec<Job> = (1..=5).map(|n| read_only(&format!("call_{n}"))).collect();
    if let Op::Record(record) = &mut batch[2].op {
        record.audit.record = format!("{{\"filler\":\"{}\"}}", "x".repeat(100_000));
    }
    let results = run_batch(&mut conn, &mut batch);
    let errors: Vec<Option<String>> = results
        .iter()
        .map(|result| result.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(
        matches!(&results[2], Err(StoreError::Unavailable(_))),
        "the large record fitted: {errors:?}"
    );
    let kept = results.iter().filter(|result| result.is_ok()).count();
    let report = store.verify_audit().await.unwrap();
    assert_eq!(
        (report.entries, report.first_break),
        (1 + kept as u64, None),
        "{errors:?}"
    );
}

#[tokio::test]
async fn a_call_s_entries_are_found_through_the_call_index() {
    let (store, _dir) = store();
    for call in ["call_1", "call_2", "call_3"] {
        let mut record = finished(call, call, "{}");
        record.completes = None;
        store.record(record).await.unwrap();
    }
    let entries = store
        .audit(AuditQuery {
            tool_call_id: Some("call_2".to_owned()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let found: Vec<_> = entries
        .iter()
        .map(|e| (e.seq, e.event.tool_call_id.as_deref()))
        .collect();
    assert_eq!(found, [(2, Some("call_2"))]);
    // Searched, not scanned: a log of a million calls answers as fast as this one.
    let plan = query_plan(
        &store,
        &audit_query(true),
        params![
            "call_2",
            None::<String>,
            None::<String>,
            None::<i64>,
            None::<i64>,
            None::<i64>,
            None::<String>,
            None::<String>,
            None::<String>,
            None::<String>,
            -1
        ],
    );
    assert!(
        plan.iter()
            .any(|step| step.contains("USING INDEX audit_by_call")),
        "{plan:?}"
    );
}

#[tokio::test]
async fn a_claim_past_its_lease_is_indeterminate_until_an_operator_resolves_it() {
    let (store, _dir) = store();
    assert_eq!(
        store
            .claim(claim_request("k", "h", "call_1", 0))
            .await
            .unwrap(),
        Claim::Run
    );
    let again = claim_request("k", "h", "call_2", 60_000);
    let indeterminate = Claim::Indeterminate {
        tool_call_id: "call_1".to_owned(),
    };
    assert_eq!(store.claim(again.clone()).await.unwrap(), indeterminate);
    assert_eq!(store.claim(again.clone()).await.unwrap(), indeterminate);
    let now = crate::records::now_ms();
    let listed = store.keys(true, now).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, KeyState::Indeterminate);
    store
        .resolve(key("k"), Resolution::Release, "ops".to_owned(), now)
        .await
        .unwrap();
    assert_eq!(store.claim(again).await.unwrap(), Claim::Run);
    // The resolution is in the audit log, chained.
    let entries = store.audit(AuditQuery::default()).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].event.kind, "operator");
    assert!(store.verify_audit().await.unwrap().first_break.is_none());
}

#[tokio::test]
async fn proposals_are_found_by_key_and_decided_by_someone_else() {
    let (store, _dir) = store();
    let first = store.propose(proposal("apr_1", Some("k"))).await.unwrap();
    let second = store.propose(proposal("apr_2", Some("k"))).await.unwrap();
    assert_eq!((first.id.as_str(), second.id.as_str()), ("apr_1", "apr_1"));
    let decision = |by: &str| Decision {
        id: "apr_1".to_owned(),
        approve: true,
        by: by.to_owned(),
        reason: "fine".to_owned(),
        now_ms: crate::records::now_ms(),
        allow_self_approval: false,
        decided_as: DecidedAs::Approver,
    };
    let refused = store.decide(decision("usr_alice")).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Refused(ref m) if m.contains("requesting principal chain")),
        "{refused}"
    );
    let approved = store.decide(decision("usr_bob")).await.unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(approved.decided_by.as_deref(), Some("usr_bob"));
    assert_eq!(approved.decided_as, Some(DecidedAs::Approver));
    let again = store.decide(decision("usr_carol")).await.unwrap_err();
    assert!(
        matches!(again, StoreError::Refused(ref m) if m.contains("already approved")),
        "{again}"
    );
    let pending = store
        .approvals(ApprovalFilter {
            status: Some(ApprovalStatus::Pending),
            ..ApprovalFilter::default()
        })
        .await
        .unwrap();
    assert!(pending.is_empty());
}

#[test]
fn gateways_opening_a_new_file_at_once_migrate_it_once() {
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: Some(dir.path().join("state.db")),
            ..StoreConfig::default()
        };
        let start = std::sync::Barrier::new(6);
        std::thread::scope(|scope| {
            let opens: Vec<_> = (0..6)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        SqliteStore::open(&config).map(drop)
                    })
                })
                .collect();
            for open in opens {
                open.join().unwrap().expect("every open succeeds");
            }
        });
        let conn = connect(
            dir.path().join("state.db").as_path(),
            OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        assert_eq!(schema_version(&conn).unwrap(), MIGRATIONS.len());
    }
}

#[tokio::test]
async fn a_version_2_log_is_rebuilt_around_its_rowid_and_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    // A file as version 2 left it, with three chained entries.
    {
        let mut conn = connect(&path, OpenFlags::default()).unwrap();
        let txn = conn.transaction().unwrap();
        for sql in &MIGRATIONS[..2] {
            txn.execute_batch(sql).unwrap();
        }
        txn.pragma_update(None, "user_version", 2).unwrap();
        for call in ["call_1", "call_2", "call_3"] {
            append(
                &txn,
                &mut Head::default(),
                &finished(call, call, "{}").audit,
            )
            .unwrap();
        }
        txn.commit().unwrap();
    }
    let store = SqliteStore::open(&StoreConfig {
        path: Some(path.clone()),
        ..StoreConfig::default()
    })
    .unwrap();
    let mut record = finished("call_4", "k", "{}");
    record.completes = None;
    store.record(record).await.unwrap();

    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (4, None));
    let entries = store.audit(AuditQuery::default()).await.unwrap();
    let calls: Vec<_> = entries
        .iter()
        .map(|e| (e.seq, e.event.tool_call_id.as_deref().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [(1, "call_1"), (2, "call_2"), (3, "call_3"), (4, "call_4")]
    );
    // `seq` is the rowid now (no unique index of its own), and the time index is gone.
    let reader = store.reader.lock().unwrap();
    assert_eq!(schema_version(&reader).unwrap(), MIGRATIONS.len());
    let mut indexes: Vec<String> = reader
        .prepare("SELECT name FROM pragma_index_list('audit')")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    indexes.sort();
    assert_eq!(indexes, ["audit_by_call", "audit_by_session"]);
    let head_plan: String = reader
        .query_row(
            "EXPLAIN QUERY PLAN SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |row| row.get(3),
        )
        .unwrap();
    assert_eq!(head_plan, "SCAN audit");
}

/// `acme.orders` as a plugin of `kind` at `version`, recorded at `at_ms`.
fn served(kind: &str, version: &str, at_ms: u64) -> ServedVersion {
    ServedVersion {
        kind: kind.to_owned(),
        plugin: "acme.orders".to_owned(),
        version: version.to_owned(),
        digest: format!("sha256:{version}"),
        source: (kind == "adapter").then(|| format!("oci://127.0.0.1:5000/acme/orders:{version}")),
        at_ms,
    }
}

#[tokio::test]
async fn a_served_version_is_raised_by_installs_and_lowered_only_by_a_downgrade() {
    let (store, dir) = store();
    let record = |version: ServedVersion, how| store.record_served(vec![(version, how)]);
    record(served("adapter", "1.9.0", 1), ServedAs::Install)
        .await
        .unwrap();
    // An install below the record (another gateway's, made before it saw 1.9.0) leaves it.
    record(served("adapter", "1.2.0", 2), ServedAs::Install)
        .await
        .unwrap();
    // The same id as a policy is a row of its own.
    record(served("policy", "0.1.0", 3), ServedAs::Install)
        .await
        .unwrap();
    assert_eq!(
        store.served_versions().await.unwrap(),
        [served("adapter", "1.9.0", 1), served("policy", "0.1.0", 3)]
    );
    // Versions compare as semver, not as text: 1.10.0 is above 1.9.0.
    record(served("adapter", "1.10.0", 4), ServedAs::Install)
        .await
        .unwrap();
    assert_eq!(
        store.served_versions().await.unwrap()[0],
        served("adapter", "1.10.0", 4)
    );
    // An operator's downgrade lowers it.
    record(served("adapter", "1.2.0", 5), ServedAs::Downgrade)
        .await
        .unwrap();
    assert_eq!(
        store.served_versions().await.unwrap(),
        [served("adapter", "1.2.0", 5), served("policy", "0.1.0", 3)]
    );
    // Kept in the file: a store opened on it again reads the same.
    drop(store);
    let config = StoreConfig {
        path: Some(dir.path().join("state.db")),
        ..StoreConfig::default()
    };
    let again = SqliteStore::open(&config).unwrap();
    assert_eq!(
        again.served_versions().await.unwrap(),
        [served("adapter", "1.2.0", 5), served("policy", "0.1.0", 3)]
    );
}

#[test]
fn a_file_that_is_not_a_store_fails_the_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let config = StoreConfig {
        path: Some(path.clone()),
        ..StoreConfig::default()
    };
    let error = SqliteStore::open(&config).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("cannot open the state store {}", path.display())),
        "{error}"
    );
    let under_a_file = StoreConfig {
        path: Some(path.join("inside.db")),
        ..StoreConfig::default()
    };
    let error = SqliteStore::open(&under_a_file).unwrap_err().to_string();
    assert!(error.contains("cannot create its directory"), "{error}");
}
