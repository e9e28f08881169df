//! Tasks on a real file: created, read, listed a page at a time, updated only from the statuses
//! an update names, pruned once expired; and the approval a task waits on.

use rusqlite::params;
use serde_json::json;

use super::{query_plan, store};
use crate::records::{
    ApprovalLookup, StoreError, Task, TaskFilter, TaskStatus, TaskUpdate, Waiting, proposal,
    task_id,
};
use crate::sqlite::SqliteStore;
use crate::sqlite::sql::task_query;
use crate::store::Store;

/// A working task of `t.pay` for tenant `acme`, made by `principal` at `created_at_ms`,
/// expiring a minute later.
fn task(id: &str, principal: &str, created_at_ms: u64) -> Task {
    Task {
        id: id.to_owned(),
        tenant: "acme".to_owned(),
        principal: principal.to_owned(),
        tool: "t.pay".to_owned(),
        approval_id: None,
        call: json!({ "tool_call_id": format!("call_{id}") }),
        status: TaskStatus::Working,
        status_message: None,
        result: None,
        created_at_ms,
        updated_at_ms: created_at_ms,
        expires_at_ms: created_at_ms + 60_000,
    }
}

/// The ids of the tasks `filter` lists, in order.
async fn listed(store: &SqliteStore, filter: TaskFilter) -> Vec<String> {
    let tasks = store.tasks(filter).await.unwrap();
    tasks.into_iter().map(|task| task.id).collect()
}

fn alices(limit: usize, before: Option<(u64, &str)>) -> TaskFilter {
    TaskFilter {
        tenant: Some("acme".to_owned()),
        principal: Some("usr_alice".to_owned()),
        limit,
        before: before.map(|(at, id)| (at, id.to_owned())),
        ..TaskFilter::default()
    }
}

#[tokio::test]
async fn tasks_are_stored_as_given_and_listed_newest_first_a_page_at_a_time() {
    let (store, _dir) = store();
    // Alice's five, two of them made in the same millisecond (ordered by id), and Bob's one.
    for (id, principal, at) in [
        ("task_a", "usr_alice", 1_000),
        ("task_b", "usr_alice", 2_000),
        ("task_c", "usr_alice", 3_000),
        ("task_d", "usr_alice", 3_000),
        ("task_e", "usr_alice", 4_000),
        ("task_bob", "usr_bob", 5_000),
    ] {
        let made = task(id, principal, at);
        assert_eq!(store.create_task(made.clone()).await.unwrap(), made);
    }
    let mut done = task("task_x", "usr_alice", 500);
    done.status = TaskStatus::Completed;
    done.status_message = Some("done".to_owned());
    done.result = Some(json!({ "content": [{ "type": "text", "text": "ok" }] }));
    store.create_task(done.clone()).await.unwrap();
    assert_eq!(store.task("task_x".to_owned()).await.unwrap(), Some(done));
    assert_eq!(store.task("task_none".to_owned()).await.unwrap(), None);

    // A task id is taken once.
    let again = store.create_task(task("task_a", "usr_bob", 9_000)).await;
    assert!(
        matches!(&again, Err(StoreError::Refused(why)) if why.contains("`task_a` exists")),
        "{again:?}"
    );
    assert_eq!(
        store.task("task_a".to_owned()).await.unwrap(),
        Some(task("task_a", "usr_alice", 1_000))
    );

    // Pages of two, each after the last task of the one before.
    let first = listed(&store, alices(2, None)).await;
    assert_eq!(first, ["task_e", "task_d"]);
    let second = listed(&store, alices(2, Some((3_000, "task_d")))).await;
    assert_eq!(second, ["task_c", "task_b"]);
    let third = listed(&store, alices(2, Some((2_000, "task_b")))).await;
    assert_eq!(third, ["task_a", "task_x"]);
    let past = listed(&store, alices(2, Some((500, "task_x")))).await;
    assert!(past.is_empty(), "{past:?}");

    // Everybody's, by default at most 100; by status; one tenant's.
    let all = listed(&store, TaskFilter::default()).await;
    assert_eq!(
        all,
        [
            "task_bob", "task_e", "task_d", "task_c", "task_b", "task_a", "task_x"
        ]
    );
    let finished = TaskFilter {
        statuses: vec![TaskStatus::Completed, TaskStatus::Failed],
        ..TaskFilter::default()
    };
    assert_eq!(listed(&store, finished).await, ["task_x"]);
    let bobs = TaskFilter {
        principal: Some("usr_bob".to_owned()),
        statuses: vec![TaskStatus::Working],
        ..TaskFilter::default()
    };
    assert_eq!(listed(&store, bobs).await, ["task_bob"]);
    let elsewhere = TaskFilter {
        tenant: Some("globex".to_owned()),
        ..TaskFilter::default()
    };
    assert!(listed(&store, elsewhere).await.is_empty());
}

#[tokio::test]
async fn an_owners_listing_searches_its_index_newest_first() {
    let (store, _dir) = store();
    let plan = query_plan(
        &store,
        &task_query(true),
        params![
            "acme",
            "usr_alice",
            None::<String>,
            None::<String>,
            None::<i64>,
            None::<String>,
            10
        ],
    );
    assert!(
        plan.iter()
            .any(|step| step.contains("USING INDEX tasks_by_owner")),
        "{plan:?}"
    );
    // Read in the index's order, backwards: nothing to sort.
    assert!(
        !plan.iter().any(|step| step.contains("TEMP B-TREE")),
        "{plan:?}"
    );
}

#[tokio::test]
async fn a_task_changes_only_from_the_statuses_its_update_names() {
    let (store, _dir) = store();
    let made = task(&task_id(), "usr_alice", 1_000);
    store.create_task(made.clone()).await.unwrap();
    let update = |from: Vec<TaskStatus>, status: TaskStatus| TaskUpdate {
        id: made.id.clone(),
        from,
        status,
        status_message: Some(format!("now {}", status.as_str())),
        result: status
            .is_terminal()
            .then(|| json!({ "status": status.as_str() })),
        now_ms: 2_000,
    };

    // From a status it is not in: nothing changes.
    let wrong = update(vec![TaskStatus::InputRequired], TaskStatus::Completed);
    assert_eq!(store.update_task(wrong).await.unwrap(), None);
    assert_eq!(
        store.task(made.id.clone()).await.unwrap(),
        Some(made.clone())
    );
    let none = update(Vec::new(), TaskStatus::Completed);
    assert_eq!(store.update_task(none).await.unwrap(), None);

    // From its status: the change, as stored.
    let asked = update(
        vec![TaskStatus::Working, TaskStatus::InputRequired],
        TaskStatus::InputRequired,
    );
    let asked = store.update_task(asked).await.unwrap().unwrap();
    assert_eq!(
        asked,
        Task {
            status: TaskStatus::InputRequired,
            status_message: Some("now input_required".to_owned()),
            updated_at_ms: 2_000,
            ..made.clone()
        }
    );
    assert_eq!(
        store.task(made.id.clone()).await.unwrap(),
        Some(asked.clone())
    );
    let cancelled = update(vec![TaskStatus::InputRequired], TaskStatus::Cancelled);
    let cancelled = store.update_task(cancelled).await.unwrap().unwrap();
    assert_eq!(
        cancelled.result,
        Some(json!({ "status": "cancelled" })),
        "{cancelled:?}"
    );
    // Terminal: the runner's late completion from `working` does not apply.
    let late = update(vec![TaskStatus::Working], TaskStatus::Completed);
    assert_eq!(store.update_task(late).await.unwrap(), None);
    assert_eq!(store.task(made.id.clone()).await.unwrap(), Some(cancelled));
    // A task that does not exist is not updated either.
    let mut missing = update(vec![TaskStatus::Working], TaskStatus::Failed);
    missing.id = "task_none".to_owned();
    assert_eq!(store.update_task(missing).await.unwrap(), None);
    assert_eq!(store.task("task_none".to_owned()).await.unwrap(), None);
}

#[tokio::test]
async fn tasks_past_their_expiry_are_pruned_and_counted() {
    let (store, _dir) = store();
    let now = 1_000_000;
    let expiring = |id: &str, expires_at_ms: u64| Task {
        expires_at_ms,
        ..task(id, "usr_alice", 1_000)
    };
    for made in [
        expiring("task_gone_1", now - 60_000),
        expiring("task_gone_2", now - 1),
        expiring("task_now", now),
        expiring("task_later", now + 1),
    ] {
        store.create_task(made).await.unwrap();
    }
    assert_eq!(store.prune(now).await.unwrap(), 2);
    // Made in the same millisecond: by id, descending.
    assert_eq!(
        listed(&store, TaskFilter::default()).await,
        ["task_now", "task_later"]
    );
    assert_eq!(store.prune(now).await.unwrap(), 0);
}

#[tokio::test]
async fn a_task_waiting_on_an_approval_marks_it_waited_on_in_the_same_transaction() {
    let (store, _dir) = store();
    store.propose(proposal("apr_1", None)).await.unwrap();
    let approval = |id: &str| {
        let lookup = ApprovalLookup::Id(id.to_owned());
        let store = &store;
        async move { store.approval(lookup).await.unwrap().unwrap() }
    };
    assert_eq!(approval("apr_1").await.waiting, Waiting::Retry);

    let waiting = Task {
        approval_id: Some("apr_1".to_owned()),
        ..task("task_1", "usr_alice", 1_000)
    };
    store.create_task(waiting).await.unwrap();
    assert_eq!(
        approval("apr_1").await.waiting,
        Waiting::Task {
            id: "task_1".to_owned()
        }
    );
    let of_approval = TaskFilter {
        approval_id: Some("apr_1".to_owned()),
        ..TaskFilter::default()
    };
    assert_eq!(listed(&store, of_approval).await, ["task_1"]);

    // On an approval that does not exist: not found, and no task is stored.
    let orphan = Task {
        approval_id: Some("apr_none".to_owned()),
        ..task("task_2", "usr_alice", 1_000)
    };
    let refused = store.create_task(orphan).await;
    assert!(
        matches!(&refused, Err(StoreError::NotFound(what)) if what == "approval `apr_none`"),
        "{refused:?}"
    );
    assert_eq!(store.task("task_2".to_owned()).await.unwrap(), None);

    // Set directly: held until a time, then back to retry.
    let held = Waiting::Held { until_ms: 90_000 };
    store
        .set_waiting("apr_1".to_owned(), held.clone())
        .await
        .unwrap();
    assert_eq!(approval("apr_1").await.waiting, held);
    store
        .set_waiting("apr_1".to_owned(), Waiting::Retry)
        .await
        .unwrap();
    assert_eq!(approval("apr_1").await.waiting, Waiting::Retry);
    let missing = store
        .set_waiting("apr_none".to_owned(), Waiting::Retry)
        .await;
    assert!(
        matches!(&missing, Err(StoreError::NotFound(what)) if what == "approval `apr_none`"),
        "{missing:?}"
    );

    // A proposal that says how its caller waits is stored so.
    let mut proposed = proposal("apr_2", None);
    proposed.waiting = Waiting::Held { until_ms: 5_000 };
    assert_eq!(
        store.propose(proposed).await.unwrap().waiting,
        Waiting::Held { until_ms: 5_000 }
    );
    assert_eq!(
        approval("apr_2").await.waiting,
        Waiting::Held { until_ms: 5_000 }
    );
}
