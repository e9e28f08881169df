//! Sessions on a real file: a session's actions and labels, kept across a reopen; its end,
//! idle timeout and restart; calls starting one at once; a damaged labels column.
use super::*;
use crate::sessions::{LabelSource, SessionFilter, SessionKey, SessionLimits, SessionWrite};

const LIMITS: SessionLimits = SessionLimits {
    idle_ms: 60_000,
    life_ms: 3_600_000,
    actions: 16,
};

fn key(session: &str) -> SessionKey {
    SessionKey {
        tenant: "acme".into(),
        principal: "agent:a".into(),
        key: session.into(),
    }
}

/// A read-only call in `session` at `at_ms` (its record names the session as the pipeline's
/// does), bringing `label` to the session that started at `started`.
fn call(session: &str, tool: &str, at_ms: u64, label: Option<(u64, &str)>) -> CallRecord {
    let record = if session.is_empty() {
        r#"{"v":3,"call":{"trace_id":"t"}}"#.to_owned()
    } else {
        serde_json::json!({"v": 3, "call": {"trace_id": "t", "session_id": session}}).to_string()
    };
    let call_id = format!("call_{tool}_{at_ms}");
    CallRecord {
        audit: AuditEvent {
            kind: "call".to_owned(),
            tool_call_id: Some(call_id.clone()),
            tenant: Some("acme".to_owned()),
            principal: Some("agent:a".to_owned()),
            tool: Some(tool.to_owned()),
            outcome: Some("OK".to_owned()),
            record,
            at_ms,
        },
        completes: None,
        releases: None,
        executes: None,
        durable: label.is_some(),
        session: Some(SessionWrite {
            key: session.to_owned(),
            labels: label.map(|(started, label)| {
                (
                    started,
                    vec![LabelSource {
                        label: label.to_owned(),
                        tool: tool.to_owned(),
                        tool_call_id: call_id,
                        at_ms,
                    }],
                )
            }),
        }),
    }
}

fn tools(session: &Session) -> Vec<&str> {
    session.actions.iter().map(|a| a.tool.as_str()).collect()
}

#[tokio::test]
async fn a_session_keeps_its_actions_and_labels_across_a_reopen_and_restarts_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        path: Some(dir.path().join("state.db")),
        ..StoreConfig::default()
    };
    let now = crate::records::now_ms();
    let started;
    {
        let store = SqliteStore::open(&config).unwrap();
        let session = store.session(key("s1"), now, LIMITS).await.unwrap();
        assert_eq!((session.started_ms, session.labels.len()), (now, 0));
        started = session.started_ms;
        store
            .record(call(
                "s1",
                "crm.lookup",
                now + 1,
                Some((started, "private")),
            ))
            .await
            .unwrap();
        store
            .record(call(
                "s1",
                "web.fetch",
                now + 2,
                Some((started, "untrusted")),
            ))
            .await
            .unwrap();
        // Another session, and the principal's window: not this session's.
        store
            .record(call("s2", "other.tool", now + 3, None))
            .await
            .unwrap();
        store
            .record(call("", "window.tool", now + 4, None))
            .await
            .unwrap();
        store.flush().await.unwrap();
        let session = store.session(key("s1"), now + 5, LIMITS).await.unwrap();
        assert_eq!(tools(&session), ["crm.lookup", "web.fetch"]);
        let labels: Vec<_> = session
            .labels
            .iter()
            .map(|l| (l.label.as_str(), l.tool.as_str()))
            .collect();
        assert_eq!(
            labels,
            [("private", "crm.lookup"), ("untrusted", "web.fetch")]
        );
    }
    // Reopened (a restarted gateway): read from the file.
    let store = SqliteStore::open(&config).unwrap();
    let session = store.session(key("s1"), now + 6, LIMITS).await.unwrap();
    assert_eq!(session.started_ms, started);
    assert_eq!(tools(&session), ["crm.lookup", "web.fetch"]);
    assert!(session.holds("private") && session.holds("untrusted"));
    // Calls that add no label write nothing of the session: its row stays as it was.
    let row = |store: &SqliteStore| {
        let reader = store.reader.lock().unwrap();
        reader
            .query_row(
                "SELECT last_at, labels FROM sessions WHERE key = 's1'",
                [],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
            )
            .unwrap()
    };
    let before = row(&store);
    for n in 0..20 {
        store
            .record(call("s1", &format!("crm.list{n}"), now + 6, None))
            .await
            .unwrap();
    }
    store.flush().await.unwrap();
    assert_eq!(row(&store), before);
    // A label a call brings again keeps its first source.
    store
        .record(call("s1", "crm.other", now + 7, Some((started, "private"))))
        .await
        .unwrap();
    let session = store.session(key("s1"), now + 8, LIMITS).await.unwrap();
    assert_eq!(session.labels[0].tool, "crm.lookup");
    assert_eq!(session.labels.len(), 2);
    // The window is a session of its own.
    let window = store.session(key(""), now + 8, LIMITS).await.unwrap();
    assert!(window.labels.is_empty());
    // Ended by an operator: the next call starts a new session under the same key.
    assert!(store.end_session(key("s1"), now + 9).await.unwrap());
    assert!(
        !store.end_session(key("s1"), now + 9).await.unwrap(),
        "ended already"
    );
    let listed = store.sessions(SessionFilter::default()).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|s| s.key == key("s1") && s.ended_ms == Some(now + 9))
    );
    let fresh = store.session(key("s1"), now + 10, LIMITS).await.unwrap();
    assert_eq!(
        (fresh.started_ms, fresh.labels.len(), fresh.actions.len()),
        (now + 10, 0, 0)
    );
    // Its timeline starts afresh too; the entries before it are still in the log.
    let (_, entries) = store.session_entries(key("s1"), 0).await.unwrap().unwrap();
    assert!(entries.is_empty());
    // Idle past the timeout: a new session again.
    let idle = store
        .session(key("s1"), now + 10 + LIMITS.idle_ms + 1, LIMITS)
        .await
        .unwrap();
    assert_eq!(idle.started_ms, now + 10 + LIMITS.idle_ms + 1);
    // Labels found in a session that has since been replaced join nothing.
    store
        .record(call(
            "s1",
            "late.tool",
            now + 70_000,
            Some((started, "secret")),
        ))
        .await
        .unwrap();
    let session = store
        .session(key("s1"), now + 70_001, LIMITS)
        .await
        .unwrap();
    assert!(!session.holds("secret"));
}

#[tokio::test]
async fn calls_starting_one_session_at_once_join_one_and_a_corrupt_label_column_fails() {
    let (store, dir) = store();
    let store = Arc::new(store);
    let now = crate::records::now_ms();
    let starts: Vec<_> = (0..8)
        .map(|n| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.session(key("race"), now + n, LIMITS).await.unwrap() })
        })
        .collect();
    let mut started = std::collections::BTreeSet::new();
    for start in starts {
        started.insert(start.await.unwrap().started_ms);
    }
    assert_eq!(
        started.len(),
        1,
        "one session, joined by every call: {started:?}"
    );
    // A damaged labels column is an error, never "no labels".
    let path = dir.path().join("state.db");
    let conn = Connection::open(path).unwrap();
    conn.execute(
        "UPDATE sessions SET labels = 'not json' WHERE key = 'race'",
        [],
    )
    .unwrap();
    let fresh = SqliteStore::open(&StoreConfig {
        path: Some(dir.path().join("state.db")),
        ..StoreConfig::default()
    })
    .unwrap();
    let error = fresh
        .session(key("race"), now + 20, LIMITS)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("labels"), "{error}");
}
