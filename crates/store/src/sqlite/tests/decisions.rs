//! Decisions on a real file: in each capacity ([`DecidedAs`]), every refused one audited as
//! `approval_refused` and never as a decision, and of decisions made at once exactly one wins.

use rusqlite::OpenFlags;
use serde_json::{Value, json};

use super::store;
use crate::audit::AuditQuery;
use crate::config::StoreConfig;
use crate::jobs::{Done, Job, Op};
use crate::records::{
    Approval, ApprovalLookup, ApprovalStatus, DecidedAs, StoreError, Waiting, now_ms, proposal,
};
use crate::sqlite::writer::run_batch;
use crate::sqlite::{MIGRATIONS, SqliteStore, connect};
use crate::store::Store;

/// The records of the audit entries of `kind`, in log order.
async fn records(store: &SqliteStore, kind: &str) -> Vec<Value> {
    let query = AuditQuery {
        kind: Some(kind.to_owned()),
        ..AuditQuery::default()
    };
    let entries = store.audit(query).await.unwrap();
    entries
        .iter()
        .map(|entry| serde_json::from_str(&entry.event.record).unwrap())
        .collect()
}

/// The reason of a refusal; panics on any other answer.
fn refusal(answer: Result<Approval, StoreError>) -> String {
    match answer {
        Err(StoreError::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn stored(store: &SqliteStore, id: &str) -> Approval {
    let lookup = ApprovalLookup::Id(id.to_owned());
    store.approval(lookup).await.unwrap().unwrap()
}

#[tokio::test]
async fn the_calling_user_consents_or_declines_and_nobody_outside_the_chain_may() {
    let (store, _dir) = store();
    // `allow_self_approval` is false: consent does not ask it.
    let config = StoreConfig::default();
    store.propose(proposal("apr_yes", None)).await.unwrap();
    store.propose(proposal("apr_no", None)).await.unwrap();

    let outsider = refusal(
        store
            .decide(config.consent("apr_yes", true, "usr_bob", "sure"))
            .await,
    );
    assert!(
        outsider.starts_with(
            "`usr_bob` is not in the requesting principal chain of approval `apr_yes`"
        ),
        "{outsider}"
    );
    let yes = store
        .decide(config.consent("apr_yes", true, "usr_alice", "go"))
        .await
        .unwrap();
    assert_eq!(
        (yes.status, yes.decided_as, yes.decided_by.as_deref()),
        (
            ApprovalStatus::Approved,
            Some(DecidedAs::Consent),
            Some("usr_alice")
        )
    );
    let no = store
        .decide(config.consent("apr_no", false, "agent_a", "not now"))
        .await
        .unwrap();
    assert_eq!(
        (no.status, no.decided_as),
        (ApprovalStatus::Rejected, Some(DecidedAs::Consent))
    );
    assert_eq!(stored(&store, "apr_yes").await, yes);

    let decisions: Vec<_> = records(&store, "approval")
        .await
        .iter()
        .map(|r| {
            (
                r["approval_id"].clone(),
                r["decision"].clone(),
                r["decided_as"].clone(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (json!("apr_yes"), json!("approved"), json!("consent")),
            (json!("apr_no"), json!("rejected"), json!("consent")),
        ]
    );
    assert_eq!(
        records(&store, "approval_refused").await,
        [json!({
            "approval_id": "apr_yes", "by": "usr_bob", "decided_as": "consent", "reason": outsider
        })]
    );
}

#[tokio::test]
async fn a_caller_withdraws_its_own_proposal_as_a_rejection_and_cannot_approve_it() {
    let (store, _dir) = store();
    let config = StoreConfig::default();
    store.propose(proposal("apr_1", None)).await.unwrap();

    let mut approving = config.withdrawal("apr_1", "usr_alice", "");
    approving.approve = true;
    let approving = refusal(store.decide(approving).await);
    assert!(
        approving.contains("cannot approve its own call"),
        "{approving}"
    );
    let outsider = refusal(
        store
            .decide(config.withdrawal("apr_1", "usr_bob", "cancelled"))
            .await,
    );
    assert!(
        outsider.contains("only the caller withdraws its own proposal"),
        "{outsider}"
    );
    assert_eq!(
        stored(&store, "apr_1").await.status,
        ApprovalStatus::Pending
    );

    let withdrawn = store
        .decide(config.withdrawal("apr_1", "agent_a", "task cancelled"))
        .await
        .unwrap();
    assert_eq!(
        (
            withdrawn.status,
            withdrawn.decided_as,
            withdrawn.decided_by.as_deref(),
            withdrawn.decided_reason.as_deref()
        ),
        (
            ApprovalStatus::Rejected,
            Some(DecidedAs::Caller),
            Some("agent_a"),
            Some("task cancelled")
        )
    );
    assert_eq!(stored(&store, "apr_1").await, withdrawn);
    let refused: Vec<_> = records(&store, "approval_refused")
        .await
        .iter()
        .map(|r| (r["by"].clone(), r["decided_as"].clone()))
        .collect();
    assert_eq!(
        refused,
        [
            (json!("usr_alice"), json!("caller")),
            (json!("usr_bob"), json!("caller"))
        ]
    );
    let decisions = records(&store, "approval").await;
    assert_eq!(decisions.len(), 1);
    assert_eq!(
        (&decisions[0]["decision"], &decisions[0]["decided_as"]),
        (&json!("rejected"), &json!("caller"))
    );
}

#[tokio::test]
async fn a_second_decision_is_refused_and_audited_as_refused_never_as_a_decision() {
    let (store, _dir) = store();
    let config = StoreConfig::default();
    store.propose(proposal("apr_1", None)).await.unwrap();
    let approved = store
        .decide(config.decision("apr_1", true, "usr_bob", "fine"))
        .await
        .unwrap();
    let second = refusal(
        store
            .decide(config.decision("apr_1", false, "usr_carol", "no"))
            .await,
    );
    assert_eq!(
        second,
        "approval `apr_1` is already approved (by `usr_bob`)"
    );
    assert_eq!(stored(&store, "apr_1").await, approved);

    // Every other refusal is audited too: a self-approval, an expired approval.
    store.propose(proposal("apr_2", None)).await.unwrap();
    let own = refusal(
        store
            .decide(config.decision("apr_2", true, "usr_alice", "mine"))
            .await,
    );
    let mut expired = proposal("apr_3", None);
    expired.expires_at_ms = now_ms() - 1;
    store.propose(expired).await.unwrap();
    let late = refusal(
        store
            .decide(config.decision("apr_3", true, "usr_bob", ""))
            .await,
    );
    assert!(late.contains("expired"), "{late}");
    // An approval that does not exist is not found, and nothing is audited.
    let missing = store
        .decide(config.decision("apr_none", true, "usr_bob", ""))
        .await;
    assert!(
        matches!(&missing, Err(StoreError::NotFound(what)) if what == "approval `apr_none`"),
        "{missing:?}"
    );

    let decisions = records(&store, "approval").await;
    assert_eq!(decisions.len(), 1);
    assert_eq!(
        (&decisions[0]["by"], &decisions[0]["decided_as"]),
        (&json!("usr_bob"), &json!("approver"))
    );
    let refused = records(&store, "approval_refused").await;
    let expected: Vec<Value> = [
        ("apr_1", "usr_carol", &second),
        ("apr_2", "usr_alice", &own),
        ("apr_3", "usr_bob", &late),
    ]
    .iter()
    .map(|(id, by, why)| json!({ "approval_id": id, "by": by, "decided_as": "approver", "reason": why }))
    .collect();
    assert_eq!(refused, expected);
    let kinds: Vec<String> = store
        .audit(AuditQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.event.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "approval",
            "approval_refused",
            "approval_refused",
            "approval_refused"
        ]
    );
    let report = store.verify_audit().await.unwrap();
    assert_eq!((report.entries, report.first_break), (4, None));
}

#[tokio::test]
async fn two_decisions_in_one_batch_one_wins_and_the_others_refusal_is_committed() {
    let (store, dir) = store();
    let config = StoreConfig::default();
    store.propose(proposal("apr_1", None)).await.unwrap();
    let mut conn = connect(&dir.path().join("state.db"), OpenFlags::default()).unwrap();
    let mut batch = vec![
        Job {
            op: Op::Decide(config.decision("apr_1", true, "usr_bob", "yes")),
            reply: None,
        },
        Job {
            op: Op::Decide(config.decision("apr_1", false, "usr_carol", "no")),
            reply: None,
        },
    ];
    let results = run_batch(&mut conn, &mut batch);
    assert!(
        matches!(&results[0], Ok(Done::Approval(a)) if a.status == ApprovalStatus::Approved),
        "the first decision did not win"
    );
    assert!(
        matches!(&results[1], Ok(Done::Refused(why)) if why.contains("already approved")),
        "the second decision was not refused"
    );
    assert_eq!(records(&store, "approval").await.len(), 1);
    assert_eq!(records(&store, "approval_refused").await.len(), 1);
}

/// Two stores on one file (a gateway and `gatehouse approvals`, say) decide one approval at
/// once, again and again: exactly one decision wins each time, and it is what is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_stores_deciding_one_approval_at_once_exactly_one_wins() {
    const ROUNDS: usize = 20;
    let (first, dir) = store();
    let second = SqliteStore::open(&StoreConfig {
        path: Some(dir.path().join("state.db")),
        ..StoreConfig::default()
    })
    .unwrap();
    let config = StoreConfig::default();
    for round in 0..ROUNDS {
        let id = format!("apr_{round}");
        first.propose(proposal(&id, None)).await.unwrap();
        let (approve, reject) = tokio::join!(
            first.decide(config.decision(&id, true, "usr_bob", "yes")),
            second.decide(config.decision(&id, false, "usr_carol", "no")),
        );
        let won = match (approve, reject) {
            (Ok(won), Err(StoreError::Refused(_))) | (Err(StoreError::Refused(_)), Ok(won)) => won,
            other => panic!("round {round}: not exactly one decision won: {other:?}"),
        };
        assert_eq!(stored(&first, &id).await, won, "round {round}");
    }
    let ids = |records: Vec<Value>| -> Vec<String> {
        let mut ids: Vec<String> = records
            .iter()
            .map(|r| r["approval_id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut every: Vec<String> = (0..ROUNDS).map(|round| format!("apr_{round}")).collect();
    every.sort();
    assert_eq!(ids(records(&first, "approval").await), every);
    assert_eq!(ids(records(&first, "approval_refused").await), every);
    let report = first.verify_audit().await.unwrap();
    assert_eq!(
        (report.entries, report.first_break),
        (2 * ROUNDS as u64, None)
    );
}

/// A file from before tasks: its decisions were all approvers', and every caller retries.
#[tokio::test]
async fn approvals_from_before_tasks_were_decided_by_approvers_and_their_callers_retry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let mut conn = connect(&path, OpenFlags::default()).unwrap();
        let txn = conn.transaction().unwrap();
        // The schema just before the migration that added tasks (later ones follow it).
        let before = (MIGRATIONS.iter())
            .position(|sql| sql.contains("CREATE TABLE tasks"))
            .unwrap();
        for sql in &MIGRATIONS[..before] {
            txn.execute_batch(sql).unwrap();
        }
        txn.pragma_update(None, "user_version", before as i64)
            .unwrap();
        txn.execute_batch(
            "INSERT INTO approvals (id, tenant, tool, idempotency_key, request_hash, call, \
               principals, mode, reasons, status, created_at, expires_at, decided_by, \
               decided_reason, decided_at, executed_by_call) VALUES \
             ('apr_decided', 'acme', 't.pay', NULL, 'h', '{}', '[\"usr_alice\"]', 'delegated', \
               '[]', 'executed', 1, 2, 'usr_bob', 'ok', 1, 'call_1'), \
             ('apr_open', 'acme', 't.pay', NULL, 'h', '{}', '[\"usr_alice\"]', 'delegated', \
               '[]', 'pending', 1, 2, NULL, NULL, NULL, NULL)",
        )
        .unwrap();
        txn.commit().unwrap();
    }
    let store = SqliteStore::open(&StoreConfig {
        path: Some(path),
        ..StoreConfig::default()
    })
    .unwrap();
    let decided = stored(&store, "apr_decided").await;
    assert_eq!(
        (decided.decided_as, decided.waiting),
        (Some(DecidedAs::Approver), Waiting::Retry)
    );
    let open = stored(&store, "apr_open").await;
    assert_eq!((open.decided_as, open.waiting), (None, Waiting::Retry));
}
