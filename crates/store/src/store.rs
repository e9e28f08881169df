//! The [`Store`] trait every backend implements, and what the writers share with the calls
//! that wait on them ([`Waiters`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::audit::{AuditEntry, AuditQuery, VerifyReport};
use crate::checkpoint::Checkpoint;
use crate::connections::{Authorization, Connection, ConnectionFilter, ConnectionKey};
use crate::rate::RateBudget;
use crate::records::{
    Approval, ApprovalFilter, ApprovalLookup, CallRecord, Claim, ClaimRequest, Decision,
    IdempotencyKey, KeyRecord, PluginChange, Resolution, ServedAs, ServedVersion, StoreError, Task,
    TaskFilter, TaskUpdate, Waiting,
};
use crate::sessions::{Session, SessionFilter, SessionKey, SessionLimits};

/// A store operation in flight.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The state interface every backend implements with the same semantics. All writes are
/// transactions; a write that returns `Ok` is committed. Every store also keeps the rate
/// budgets of gate 4 ([`RateBudget`]).
pub trait Store: RateBudget + Send + Sync + std::fmt::Debug {
    /// Registers interest in `key`: the returned `Notify` is woken when a call holding the key
    /// records (in this process or, for a shared backend, any other) or an operator resolves
    /// it. Call before [`Store::claim`] reads the key, so no wake-up is lost.
    fn watch(&self, key: &IdempotencyKey) -> Arc<tokio::sync::Notify>;

    /// Whether the store answers now (a shared database can be down for a while). A call made
    /// while it is not may still fail: this only lets the pipeline refuse early.
    fn available(&self) -> bool;

    /// The chains this store appends audit entries to: `[store] chains` (see
    /// [`audit::chain_of`]); a log may also hold chains of an earlier setting.
    fn chains(&self) -> u32 {
        1
    }

    /// Gate 7: claims `request.key` for a call, atomically, durably.
    fn claim(&self, request: ClaimRequest) -> StoreFuture<'_, Claim>;

    /// Gate 10: appends the audit entry and applies the rest of `record`, in one transaction.
    fn record(&self, record: CallRecord) -> StoreFuture<'_, ()>;

    /// Gate 6: the approval for `proposal`'s key if there is one, else `proposal` (pending,
    /// undecided), stored.
    fn propose(&self, proposal: Approval) -> StoreFuture<'_, Approval>;

    /// Gate 6: an existing approval.
    fn approval(&self, lookup: ApprovalLookup) -> StoreFuture<'_, Option<Approval>>;

    /// Approves or rejects a pending approval, appending the decision (an `approval` entry)
    /// to the audit log; returns the approval as decided.
    ///
    /// A decision is a transition from `pending`, atomic in the database: of decisions made
    /// at once on one approval (by two gateways, or two writers of one), exactly one wins.
    /// Every other, and every decision the rules refuse (the approval decided already,
    /// expired, a decider who may not decide it: [`DecidedAs`](crate::DecidedAs)), is
    /// [`StoreError::Refused`] and audited as an `approval_refused` entry, never as a
    /// decision. An approval that does not exist is [`StoreError::NotFound`] (not audited).
    fn decide(&self, decision: Decision) -> StoreFuture<'_, Approval>;

    /// Approvals, newest first.
    fn approvals(&self, filter: ApprovalFilter) -> StoreFuture<'_, Vec<Approval>>;

    /// Sets how the caller of approval `approval_id` waits for its decision.
    /// [`StoreError::NotFound`] if there is no such approval.
    fn set_waiting(&self, approval_id: String, waiting: Waiting) -> StoreFuture<'_, ()>;

    /// Stores a new task, as given, and returns it. When it waits on an approval
    /// (`approval_id`), that approval's [`Waiting`] becomes [`Waiting::Task`] with its id, in
    /// the same transaction ([`StoreError::NotFound`] if there is no such approval, and
    /// nothing is stored). [`StoreError::Refused`] if a task with its id exists.
    fn create_task(&self, task: Task) -> StoreFuture<'_, Task>;

    /// Changes a task's status if it exists and its current status is one of `update.from`,
    /// atomically (of updates racing from one status, one applies); returns the task as
    /// updated, or `None` (nothing changed) if it does not exist or is in another status.
    fn update_task(&self, update: TaskUpdate) -> StoreFuture<'_, Option<Task>>;

    /// A task, by id.
    fn task(&self, id: String) -> StoreFuture<'_, Option<Task>>;

    /// Tasks, newest first (by creation time, then id, descending), a page at a time
    /// ([`TaskFilter::before`]).
    fn tasks(&self, filter: TaskFilter) -> StoreFuture<'_, Vec<Task>>;

    /// The live session under `key` at `now_ms`, with its latest actions (at most
    /// `limits.actions`, oldest first). When none is live, a new one starts (a write) and is
    /// returned; of calls starting one at once, one starts it and the others join it.
    fn session(
        &self,
        key: SessionKey,
        now_ms: u64,
        limits: SessionLimits,
    ) -> StoreFuture<'_, Session>;

    /// Sessions, the most recently started first, without their actions.
    fn sessions(&self, filter: SessionFilter) -> StoreFuture<'_, Vec<Session>>;

    /// The session under `key` as stored (live or not) and its call entries since it started,
    /// newest first, at most `limit` (0: all); `None` if there is none.
    fn session_entries(
        &self,
        key: SessionKey,
        limit: usize,
    ) -> StoreFuture<'_, Option<(Session, Vec<AuditEntry>)>>;

    /// Ends the session under `key`: its next call starts a new one. False if there is none,
    /// or it ended already.
    fn end_session(&self, key: SessionKey, now_ms: u64) -> StoreFuture<'_, bool>;

    /// Stores a principal's connection to a provider, in place of the one it had.
    fn put_connection(&self, connection: Connection) -> StoreFuture<'_, ()>;

    /// A principal's connection to a provider, if it has one.
    fn connection(&self, key: ConnectionKey) -> StoreFuture<'_, Option<Connection>>;

    /// Connections, by tenant, principal and provider.
    fn connections(&self, filter: ConnectionFilter) -> StoreFuture<'_, Vec<Connection>>;

    /// Removes a connection; false if there was none.
    fn delete_connection(&self, key: ConnectionKey) -> StoreFuture<'_, bool>;

    /// Takes the right to refresh the connection under `key` until `until_ms`, atomically for
    /// every gateway sharing the store: true if the connection still holds the token whose
    /// hash is `token_hash` and nobody holds the right at `now_ms`. Storing the connection
    /// ([`Store::put_connection`]) gives the right up. A provider that rotates refresh tokens
    /// takes each once: of gateways refreshing one connection at once, only the one with the
    /// right spends it.
    fn lease_connection(
        &self,
        key: ConnectionKey,
        token_hash: String,
        now_ms: u64,
        until_ms: u64,
    ) -> StoreFuture<'_, bool>;

    /// The flow whose state hashes to `state_hash`, as stored (live, opened, expired: any
    /// that is not taken or pruned).
    fn authorization(&self, state_hash: String) -> StoreFuture<'_, Option<Authorization>>;

    /// Stores a flow that starts ([`Authorization`]).
    fn begin_authorization(&self, flow: Authorization) -> StoreFuture<'_, ()>;

    /// A browser opens the flow whose state hashes to `state_hash`: the hash of the nonce it
    /// was given is kept, atomically, if the flow is live (`expires_at_ms >= now_ms`) and no
    /// browser opened it before. The flow if so, else `None` (nothing changed).
    fn open_authorization(
        &self,
        state_hash: String,
        browser_hash: String,
        now_ms: u64,
    ) -> StoreFuture<'_, Option<Authorization>>;

    /// Takes the flow whose state hashes to `state_hash`, atomically: it is removed, and
    /// returned if it was live and opened by a browser. Of two callbacks with one state, one
    /// gets it.
    fn take_authorization(
        &self,
        state_hash: String,
        now_ms: u64,
    ) -> StoreFuture<'_, Option<Authorization>>;

    /// Idempotency records; `indeterminate_only` lists only those needing an operator.
    fn keys(&self, indeterminate_only: bool, now_ms: u64) -> StoreFuture<'_, Vec<KeyRecord>>;

    /// An operator's resolution of an indeterminate key, appended to the audit log.
    fn resolve(
        &self,
        key: IdempotencyKey,
        resolution: Resolution,
        by: String,
        now_ms: u64,
    ) -> StoreFuture<'_, ()>;

    /// Forgets idempotency records past their window, and tasks, sessions and authorization
    /// flows past their expiry
    /// (`expires_at_ms < now_ms`); returns how many together.
    fn prune(&self, now_ms: u64) -> StoreFuture<'_, u64>;

    /// Audit entries matching `query`, in log order.
    fn audit(&self, query: AuditQuery) -> StoreFuture<'_, Vec<AuditEntry>>;

    /// Walks every audit chain, in one view of the log, and reports each head and the first
    /// bad entry, if any.
    fn verify_audit(&self) -> StoreFuture<'_, VerifyReport>;

    /// Returns once every write queued before it is committed (the records of read-only
    /// calls nobody waited for): a barrier, before a last checkpoint.
    fn flush(&self) -> StoreFuture<'_, ()>;

    /// Stores a signed checkpoint of the audit chain.
    fn add_checkpoint(&self, checkpoint: Checkpoint) -> StoreFuture<'_, ()>;

    /// The stored checkpoints, oldest first.
    fn checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>>;

    /// Stores a change the admin API made to the serving plugins, after the ones before it:
    /// start-up applies them again ([`PluginChange`]).
    fn add_plugin_change(&self, change: PluginChange) -> StoreFuture<'_, ()>;

    /// The stored plugin changes, in the order they were made.
    fn plugin_changes(&self) -> StoreFuture<'_, Vec<PluginChange>>;

    /// Records that each of `served` started serving, in one transaction: the version its
    /// kind and id last served, which a later start or reload may not go below unless forced.
    /// As [`ServedAs::Install`] a version replaces the recorded one only if it is not lower (of
    /// two gateways recording at once, the higher version stands); as [`ServedAs::Downgrade`]
    /// it replaces it whatever it is. Each row is read and written in the same transaction.
    fn record_served(&self, served: Vec<(ServedVersion, ServedAs)>) -> StoreFuture<'_, ()>;

    /// The recorded versions ([`Store::record_served`]), sorted by kind, then id.
    fn served_versions(&self) -> StoreFuture<'_, Vec<ServedVersion>>;
}

/// Wake-ups for calls waiting on a key another call holds (gate 7), by the key's digest
/// ([`Waiters::digest`]; a shared backend sends it to other processes).
#[derive(Debug, Default)]
pub struct Waiters {
    keys: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
}

impl Waiters {
    /// The key's short, fixed-size name: hex SHA-256 of its three parts.
    pub fn digest(key: &IdempotencyKey) -> String {
        let mut hasher = Sha256::new();
        for part in [&key.tenant, &key.tool, &key.key] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hex::encode(hasher.finalize())
    }

    /// Registers interest in `key`: await the returned `Notify`'s `notified()` (created before
    /// checking the key's state, so no wake-up is lost).
    pub fn watch(&self, key: &IdempotencyKey) -> Arc<tokio::sync::Notify> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(keys.entry(Self::digest(key)).or_default())
    }

    /// Wakes every call waiting on `key`.
    pub fn wake(&self, key: &IdempotencyKey) {
        self.wake_digest(&Self::digest(key));
    }

    /// Wakes every call waiting on the key with this digest.
    pub fn wake_digest(&self, digest: &str) {
        let notify = self
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(digest);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter (they check their keys again): after a lost notification channel.
    pub fn wake_all(&self) {
        let all = std::mem::take(&mut *self.keys.lock().unwrap_or_else(PoisonError::into_inner));
        for notify in all.into_values() {
            notify.notify_waiters();
        }
    }
}
