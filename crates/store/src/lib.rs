//! gatehouse-store: what must outlive a call and be shared by every call: idempotency records,
//! pending approvals, rate budgets and the audit log, behind one [`Store`] interface
//! (docs/architecture.md, section 8).
//!
//! The embedded default is one SQLite file ([`sqlite`]); several gateway processes share one
//! PostgreSQL database instead ([`postgres`], `[store] url`, feature `postgres`), with the same
//! semantics behind the same trait; [`open`] picks the backend. The pipeline uses the store at
//! three gates:
//! 1. **approve** (gate 6): a call that needs approval is proposed ([`Store::propose`], find or
//!    create, so a repeat never makes a second approval) and ends `paused`; a repeat finds it
//!    approved ([`Store::approval`]) and goes on;
//! 2. **deduplicate** (gate 7): a call with an idempotency key claims it
//!    ([`Store::claim`]) before anything runs, durably; the claim says whether to run, replay
//!    a stored result, refuse a conflicting request, wait for the call in flight, or report a
//!    record a crash left behind (`indeterminate`, never re-run by itself);
//! 3. **record** (gate 10): every call, refusals included, ends in one [`CallRecord`]: an entry
//!    appended to the hash-chained audit log, the key's result, the approval's execution, all
//!    in one transaction. For a write-class call it is durable before the result is delivered.
//!
//! A call that waits on an approval as an MCP task is a [`Task`] ([`Store::create_task`], which
//! also marks the approval as waited on by it: [`Waiting`]); its client polls it
//! ([`Store::task`]) until the call's runner moves it to a terminal status
//! ([`Store::update_task`], a conditional change). A decision ([`Store::decide`]) is a
//! transition from `pending` that exactly one decision wins, whichever gateway makes it; every
//! refused decision is audited as `approval_refused`.
//!
//! Writes from concurrent calls share commits (group commit). Nothing here knows the pipeline's
//! types: records arrive as JSON text, so the store has no opinion on envelopes. The crate
//! depends on `gatehouse-core` only (ids, canonical JSON, keys, secrets), never on wasmtime;
//! `gatehouse-host` re-exports it as `gatehouse_host::state`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

// Layers, top to bottom: this file (the facade, and `open` choosing a backend) -> sqlite,
// postgres -> checkpointer, verify -> jobs -> rows -> store (the `Store` trait) -> config ->
// checkpoint -> audit -> records, rate, session_cache, sessions.
pub mod audit;
pub mod checkpoint;
mod checkpointer;
mod config;
pub mod connections;
mod jobs;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod rate;
mod records;
mod rows;
mod session_cache;
pub mod sessions;
pub mod sqlite;
mod store;
mod verify;

use std::sync::Arc;

pub use audit::{Anchor, AnchorBreak, AuditEntry, AuditQuery, ChainBreak, ChainHead, VerifyReport};
pub use checkpoint::{Checkpoint, CheckpointConfig};
pub use checkpointer::Checkpointer;
pub use config::StoreConfig;
pub use connections::{Authorization, Connection, ConnectionFilter, ConnectionKey};
pub use records::{
    Approval, ApprovalFilter, ApprovalLookup, ApprovalStatus, AuditEvent, CallRecord, Claim,
    ClaimRequest, DecidedAs, Decision, IdempotencyKey, KeyRecord, KeyState, PluginChange,
    Resolution, ServedAs, ServedVersion, StoreError, Task, TaskFilter, TaskStatus, TaskUpdate,
    Waiting, approval_id, now_ms, task_id,
};
pub use sessions::{
    LabelSource, Session, SessionAction, SessionFilter, SessionKey, SessionLimits, SessionWrite,
};
pub use store::{Store, StoreFuture, Waiters};
pub use verify::{check_anchor, verify_checkpoints};

/// Opens the store `config` names: PostgreSQL when `url` is set, else the SQLite file.
pub fn open(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    let refuse = |detail: String| StoreError::Open {
        path: config.location(),
        detail,
    };
    if config.pool_size == 0 || config.writers == 0 {
        return Err(refuse(
            "`[store] pool_size` and `writers` must be at least 1".to_owned(),
        ));
    }
    if !(1..=audit::MAX_CHAINS).contains(&config.chains) {
        return Err(refuse(format!(
            "`[store] chains` = {}: expected 1 to {}",
            config.chains,
            audit::MAX_CHAINS
        )));
    }
    if config.chains > 1 && config.url.is_none() {
        return Err(refuse(format!(
            "`[store] chains` = {}: only a PostgreSQL store (`[store] url`) partitions its audit log; a SQLite file, with its one writer, keeps one chain",
            config.chains
        )));
    }
    match &config.url {
        #[cfg(feature = "postgres")]
        Some(_) => Ok(Arc::new(postgres::PostgresStore::open(config)?)),
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(StoreError::Open {
            path: config.location(),
            detail: "this build of gatehouse has no PostgreSQL support (cargo feature `postgres`)"
                .to_owned(),
        }),
        None => Ok(Arc::new(sqlite::SqliteStore::open(config)?)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn store_settings_out_of_range_are_refused_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let file = StoreConfig {
            path: Some(dir.path().join("state.db")),
            ..StoreConfig::default()
        };
        let refused = |config: StoreConfig| match open(&config) {
            Err(StoreError::Open { detail, .. }) => detail,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let detail = refused(StoreConfig {
            chains: 0,
            ..file.clone()
        });
        assert!(
            detail.contains("`[store] chains` = 0: expected 1 to 1024"),
            "{detail}"
        );
        let detail = refused(StoreConfig {
            chains: 4,
            ..file.clone()
        });
        assert!(detail.contains("only a PostgreSQL store"), "{detail}");
        let detail = refused(StoreConfig {
            writers: 0,
            ..file.clone()
        });
        assert!(detail.contains("must be at least 1"), "{detail}");
        assert!(open(&file).is_ok());
    }

    #[test]
    fn the_default_path_is_under_the_data_directory() {
        let config = StoreConfig {
            path: Some(PathBuf::from("/x/y.db")),
            ..StoreConfig::default()
        };
        assert_eq!(config.resolved_path(), PathBuf::from("/x/y.db"));
        assert!(
            StoreConfig::default()
                .resolved_path()
                .ends_with("gatehouse/gatehouse.db")
        );
    }
}
