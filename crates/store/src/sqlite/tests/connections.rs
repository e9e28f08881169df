//! Connections and authorization flows on a real file: a connection replaced, listed and
//! removed; the right to refresh one taken by one at a time; a flow opened by one browser
//! only, taken once, and never past its expiry.
use super::*;
use crate::connections::{Authorization, Connection, ConnectionFilter, ConnectionKey};

fn whose(principal: &str) -> ConnectionKey {
    ConnectionKey {
        tenant: "acme".into(),
        principal: principal.into(),
        provider: "github".into(),
    }
}

fn connection(principal: &str, sealed: &str, at_ms: u64) -> Connection {
    Connection {
        key: whose(principal),
        resource: "https://api.example/".into(),
        sealed: sealed.into(),
        token_hash: "0123456789abcdef".into(),
        scope: "repo".into(),
        expires_at_ms: Some(at_ms + 3_600_000),
        created_at_ms: at_ms,
        updated_at_ms: at_ms,
    }
}

fn flow(state_hash: &str, expires_at_ms: u64) -> Authorization {
    Authorization {
        state_hash: state_hash.into(),
        key: whose("user:alice"),
        resource: String::new(),
        sealed_verifier: "sealed".into(),
        tool: "gh.create_issue".into(),
        browser_hash: None,
        created_at_ms: 1,
        expires_at_ms,
        call: "{}".into(),
    }
}

#[tokio::test]
async fn a_connection_is_replaced_listed_and_removed() {
    let (store, _dir) = store();
    store
        .put_connection(connection("user:alice", "first", 10))
        .await
        .unwrap();
    store
        .put_connection(connection("user:bob", "bobs", 20))
        .await
        .unwrap();
    let mut refreshed = connection("user:alice", "second", 10);
    refreshed.updated_at_ms = 30;
    store.put_connection(refreshed.clone()).await.unwrap();

    let alice = store.connection(whose("user:alice")).await.unwrap();
    assert_eq!(alice, Some(refreshed), "replaced, created_at kept");
    let all = store
        .connections(ConnectionFilter::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter()
            .map(|c| c.key.principal.as_str())
            .collect::<Vec<_>>(),
        ["user:alice", "user:bob"]
    );
    let bobs = ConnectionFilter {
        principal: Some("user:bob".into()),
        ..ConnectionFilter::default()
    };
    assert_eq!(store.connections(bobs).await.unwrap().len(), 1);

    assert!(store.delete_connection(whose("user:alice")).await.unwrap());
    assert!(!store.delete_connection(whose("user:alice")).await.unwrap());
    assert_eq!(store.connection(whose("user:alice")).await.unwrap(), None);
}

#[tokio::test]
async fn the_right_to_refresh_a_connection_is_held_by_one_until_it_lapses_or_is_stored() {
    let (store, _dir) = store();
    let held = connection("user:alice", "first", 10);
    store.put_connection(held.clone()).await.unwrap();
    let lease = |hash: &str, now_ms: u64| {
        store.lease_connection(
            whose("user:alice"),
            hash.to_owned(),
            now_ms,
            now_ms + 30_000,
        )
    };
    // One takes it; another, at once, does not; nor after the token it read was replaced.
    assert!(lease(&held.token_hash, 100).await.unwrap());
    assert!(!lease(&held.token_hash, 200).await.unwrap());
    assert!(!lease("another-token", 200).await.unwrap());
    // Lapsed, it is taken again.
    assert!(lease(&held.token_hash, 30_101).await.unwrap());
    // Storing the refreshed connection gives it up: its new token may be refreshed at once,
    // the old one's never again.
    let mut refreshed = connection("user:alice", "second", 10);
    refreshed.token_hash = "fedcba9876543210".into();
    store.put_connection(refreshed.clone()).await.unwrap();
    assert!(!lease(&held.token_hash, 30_200).await.unwrap());
    assert!(lease(&refreshed.token_hash, 30_200).await.unwrap());
    // No connection, no right.
    assert!(
        !store
            .lease_connection(whose("user:bob"), held.token_hash.clone(), 1, 2)
            .await
            .unwrap()
    );
    assert_eq!(
        store.connection(whose("user:alice")).await.unwrap(),
        Some(refreshed)
    );
}

#[tokio::test]
async fn a_flow_is_opened_by_one_browser_and_taken_once() {
    let (store, _dir) = store();
    store.begin_authorization(flow("s1", 1_000)).await.unwrap();

    // Not opened: the callback cannot take it (and it is gone).
    store.begin_authorization(flow("s2", 1_000)).await.unwrap();
    assert_eq!(
        store.take_authorization("s2".into(), 500).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .open_authorization("s2".into(), "b".into(), 500)
            .await
            .unwrap(),
        None,
        "taken means gone"
    );

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
    let taken = store.take_authorization("s1".into(), 700).await.unwrap();
    assert_eq!(taken, Some(opened));
    assert_eq!(
        store.take_authorization("s1".into(), 700).await.unwrap(),
        None,
        "a replayed state finds nothing"
    );
    assert_eq!(
        store
            .take_authorization("forged".into(), 700)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn an_expired_flow_neither_opens_nor_is_taken_and_is_pruned() {
    let (store, _dir) = store();
    store
        .begin_authorization(flow("late", 1_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .open_authorization("late".into(), "b".into(), 1_001)
            .await
            .unwrap(),
        None
    );
    store
        .begin_authorization(flow("opened", 1_000))
        .await
        .unwrap();
    store
        .open_authorization("opened".into(), "b".into(), 999)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .take_authorization("opened".into(), 1_001)
            .await
            .unwrap(),
        None
    );
    store.begin_authorization(flow("old", 1_000)).await.unwrap();
    assert_eq!(store.prune(2_000).await.unwrap(), 2, "`late` and `old`");
}
