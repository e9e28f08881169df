//! What every backend's writer does, independent of its SQL: the write jobs it queues, and the
//! rules that decide a claim, an approval decision, a task's update and an operator's
//! resolution. A backend reads the rows, asks these functions, and writes what they say, so
//! SQLite and PostgreSQL cannot drift apart in meaning.

use std::future::Future;

use serde_json::Value;
use tokio::sync::oneshot;

use super::rows::{KeyRow, key_state};
use crate::checkpoint::Checkpoint;
use crate::connections::{Authorization, Connection, ConnectionKey};
use crate::records::{
    Approval, ApprovalStatus, AuditEvent, CallRecord, Claim, ClaimRequest, DecidedAs, Decision,
    IdempotencyKey, KeyState, PluginChange, Resolution, ServedAs, ServedVersion, StoreError, Task,
    TaskUpdate, Waiting,
};
use crate::sessions::{LabelSource, Session, SessionKey};

/// A write job and where its answer goes (`None`: nobody waits for it).
pub(super) struct Job {
    pub op: Op,
    pub reply: Option<oneshot::Sender<Result<Done, StoreError>>>,
}

/// How long a writer holds a batch nobody waits on (the records of read-only calls), gathering
/// more jobs before it commits; a job someone waits on ends the wait at once.
///
/// A commit costs the writer about the same whatever it holds: its fsync, a write for each
/// page it changed (the log's last page and each index's), the wake-ups. Committing as soon as
/// the previous commit ended, a loaded gateway committed every two or three read-only records,
/// and that overhead was most of its store's CPU per call (`docs/benchmarks.md`, fifth round).
/// Held this long, a commit takes every record of the interval. The price: a read-only call's
/// entry reaches the disk (and `prior-actions`) up to this much later. Its caller never waited
/// for it.
pub(super) const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// A write.
#[allow(
    clippy::large_enum_variant,
    reason = "one job per call, moved once into the writer's queue"
)]
pub(super) enum Op {
    Claim(ClaimRequest),
    Record(CallRecord),
    Propose(Approval),
    Decide(Decision),
    SetWaiting {
        approval_id: String,
        waiting: Waiting,
    },
    CreateTask(Task),
    UpdateTask(TaskUpdate),
    Resolve {
        key: IdempotencyKey,
        resolution: Resolution,
        by: String,
        now_ms: u64,
    },
    Prune(u64),
    /// Nothing: answered once every job queued before it committed.
    Flush,
    AddCheckpoint(Checkpoint),
    AddPluginChange(PluginChange),
    /// Plugins started serving: each one's row (by kind and id), written as
    /// [`replaces_served`] says, in the order of their rows.
    RecordServed(Vec<(ServedVersion, ServedAs)>),
    /// A session starts: inserted, or put in place of the one that started at `replaces` (one
    /// no longer live). Done::Count(0) if another call started one first.
    StartSession {
        session: Session,
        replaces: Option<u64>,
    },
    /// An operator ends a session: Done::Count(0) if there is none or it ended already.
    EndSession {
        key: SessionKey,
        at_ms: u64,
    },
    /// A connection stored, in place of the principal's earlier one to the provider.
    PutConnection(Connection),
    /// A connection removed: Done::Count(0) if there was none.
    DeleteConnection(ConnectionKey),
    /// The right to refresh a connection taken until `until_ms`: Done::Count(1) if the
    /// connection still holds the token hashing to `token_hash` and nobody holds the right at
    /// `now_ms`, else Done::Count(0) and nothing changed.
    LeaseConnection {
        key: ConnectionKey,
        token_hash: String,
        now_ms: u64,
        until_ms: u64,
    },
    /// A flow starts.
    BeginAuthorization(Authorization),
    /// A browser opens a flow: its nonce's hash kept, if the flow is live and no browser
    /// opened it yet; answered with the flow as it now stands, or none.
    OpenAuthorization {
        state_hash: String,
        browser_hash: String,
        now_ms: u64,
    },
    /// The callback takes a flow: deleted, and answered if it was live and opened.
    TakeAuthorization {
        state_hash: String,
        now_ms: u64,
    },
}

impl Op {
    /// The key whose waiters a committed job wakes: a call that recorded under its claim, or
    /// an operator's resolution.
    pub fn wakes(&self) -> Option<&IdempotencyKey> {
        match self {
            Self::Record(record) => record
                .completes
                .as_ref()
                .map(|(key, _)| key)
                .or(record.releases.as_ref()),
            Self::Resolve { key, .. } => Some(key),
            Self::Claim(_)
            | Self::Propose(_)
            | Self::Decide(_)
            | Self::SetWaiting { .. }
            | Self::CreateTask(_)
            | Self::UpdateTask(_)
            | Self::Prune(_)
            | Self::Flush
            | Self::AddCheckpoint(_)
            | Self::AddPluginChange(_)
            | Self::RecordServed(_)
            | Self::StartSession { .. }
            | Self::EndSession { .. }
            | Self::PutConnection(_)
            | Self::DeleteConnection(_)
            | Self::LeaseConnection { .. }
            | Self::BeginAuthorization(_)
            | Self::OpenAuthorization { .. }
            | Self::TakeAuthorization { .. } => None,
        }
    }
}

/// [`Store::session`](crate::Store::session) for a backend: `find` reads the session under the
/// key as it stands (cached or stored), `write` commits a job and answers it.
pub(super) async fn live_session<F, W>(
    find: impl Fn() -> F,
    write: impl FnOnce(Op) -> W,
    key: SessionKey,
    now_ms: u64,
    limits: crate::sessions::SessionLimits,
) -> Result<Session, StoreError>
where
    F: Future<Output = Result<Option<Session>, StoreError>>,
    W: Future<Output = Result<Done, StoreError>>,
{
    let found = find().await?;
    if let Some(session) = found.as_ref().filter(|s| s.live(now_ms, limits)) {
        return Ok(session.clone());
    }
    let fresh = Session::start(key, now_ms, limits);
    let start = Op::StartSession {
        session: fresh.clone(),
        replaces: found.map(|s| s.started_ms),
    };
    if write(start).await?.count()? > 0 {
        return Ok(fresh);
    }
    // Another call (or gateway) started it first: join that one.
    find()
        .await?
        .ok_or_else(|| StoreError::Unavailable("a session just started is gone".into()))
}

/// The labels column after a call brought `brought` to a session whose column is `current`:
/// the labels it did not hold join, each with its source (the first source of a label stays).
/// `None` if nothing joins (nothing to write). A column that does not parse fails the write:
/// a session must never lose its labels.
pub(super) fn joined_labels(
    current: &str,
    brought: &[LabelSource],
) -> Result<Option<String>, StoreError> {
    let mut labels = crate::sessions::labels_of(current)
        .map_err(|e| StoreError::Unavailable(format!("a session's labels do not parse: {e}")))?;
    let joined = crate::sessions::join(&mut labels, brought);
    Ok(joined.then(|| crate::sessions::labels_json(&labels)))
}

/// Stops a writer: closes its queue (`jobs`), so it ends after the jobs already queued, and
/// waits for its thread. A store's `Drop` calls it, so a clean shutdown loses nothing queued.
pub(super) fn stop_writer<S>(
    jobs: &std::sync::Mutex<Option<S>>,
    thread: &std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
) {
    use std::sync::PoisonError;
    jobs.lock().unwrap_or_else(PoisonError::into_inner).take();
    let thread = thread.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(thread) = thread
        && thread.join().is_err()
    {
        tracing::error!("the state store's writer thread panicked");
    }
}

/// Hands `op` to a writer through `send` (false: the writer is gone); the answer once the job
/// committed when `wait`, else at once.
pub(super) fn submit<'a>(
    op: Op,
    wait: bool,
    send: impl FnOnce(Job) -> bool,
) -> crate::store::StoreFuture<'a, Done> {
    let (reply, answer) = oneshot::channel();
    let sent = send(Job {
        op,
        reply: wait.then_some(reply),
    });
    Box::pin(async move {
        if !sent {
            return Err(StoreError::Unavailable(
                "the store is shutting down (its writer has stopped); see the log".to_owned(),
            ));
        }
        if !wait {
            return Ok(Done::Unit);
        }
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the store's writer stopped before answering; see the log".to_owned(),
            ))
        })
    })
}

/// The [`Store`](crate::store::Store) methods that are writes, for a backend with an inherent
/// `fn write(&self, op: Op, wait: bool) -> StoreFuture<'_, Done>` that queues a job for its
/// writer (waiting for the commit when `wait`). Expands inside `impl Store for ...`.
macro_rules! queued_writes {
    () => {
        fn claim(
            &self,
            request: $crate::records::ClaimRequest,
        ) -> $crate::store::StoreFuture<'_, $crate::records::Claim> {
            let write = self.write($crate::jobs::Op::Claim(request), true);
            Box::pin(async move { write.await?.claim() })
        }

        fn record(
            &self,
            record: $crate::records::CallRecord,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let durable = record.durable;
            let write = self.write($crate::jobs::Op::Record(record), durable);
            Box::pin(async move { write.await.map(drop) })
        }

        fn propose(
            &self,
            proposal: $crate::records::Approval,
        ) -> $crate::store::StoreFuture<'_, $crate::records::Approval> {
            let write = self.write($crate::jobs::Op::Propose(proposal), true);
            Box::pin(async move { write.await?.approval() })
        }

        fn decide(
            &self,
            decision: $crate::records::Decision,
        ) -> $crate::store::StoreFuture<'_, $crate::records::Approval> {
            let write = self.write($crate::jobs::Op::Decide(decision), true);
            Box::pin(async move { write.await?.approval() })
        }

        fn set_waiting(
            &self,
            approval_id: String,
            waiting: $crate::records::Waiting,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let op = $crate::jobs::Op::SetWaiting {
                approval_id,
                waiting,
            };
            let write = self.write(op, true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn create_task(
            &self,
            task: $crate::records::Task,
        ) -> $crate::store::StoreFuture<'_, $crate::records::Task> {
            let write = self.write($crate::jobs::Op::CreateTask(task), true);
            Box::pin(async move { write.await?.created_task() })
        }

        fn update_task(
            &self,
            update: $crate::records::TaskUpdate,
        ) -> $crate::store::StoreFuture<'_, Option<$crate::records::Task>> {
            let write = self.write($crate::jobs::Op::UpdateTask(update), true);
            Box::pin(async move { write.await?.task() })
        }

        fn resolve(
            &self,
            key: $crate::records::IdempotencyKey,
            resolution: $crate::records::Resolution,
            by: String,
            now_ms: u64,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let op = $crate::jobs::Op::Resolve {
                key,
                resolution,
                by,
                now_ms,
            };
            let write = self.write(op, true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn prune(&self, now_ms: u64) -> $crate::store::StoreFuture<'_, u64> {
            let write = self.write($crate::jobs::Op::Prune(now_ms), true);
            Box::pin(async move { write.await?.count() })
        }

        fn end_session(
            &self,
            key: $crate::sessions::SessionKey,
            now_ms: u64,
        ) -> $crate::store::StoreFuture<'_, bool> {
            let write = self.write($crate::jobs::Op::EndSession { key, at_ms: now_ms }, true);
            Box::pin(async move { Ok(write.await?.count()? > 0) })
        }

        fn put_connection(
            &self,
            connection: $crate::connections::Connection,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let write = self.write($crate::jobs::Op::PutConnection(connection), true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn delete_connection(
            &self,
            key: $crate::connections::ConnectionKey,
        ) -> $crate::store::StoreFuture<'_, bool> {
            let write = self.write($crate::jobs::Op::DeleteConnection(key), true);
            Box::pin(async move { Ok(write.await?.count()? > 0) })
        }

        fn lease_connection(
            &self,
            key: $crate::connections::ConnectionKey,
            token_hash: String,
            now_ms: u64,
            until_ms: u64,
        ) -> $crate::store::StoreFuture<'_, bool> {
            let op = $crate::jobs::Op::LeaseConnection {
                key,
                token_hash,
                now_ms,
                until_ms,
            };
            let write = self.write(op, true);
            Box::pin(async move { Ok(write.await?.count()? > 0) })
        }

        fn begin_authorization(
            &self,
            flow: $crate::connections::Authorization,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let write = self.write($crate::jobs::Op::BeginAuthorization(flow), true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn open_authorization(
            &self,
            state_hash: String,
            browser_hash: String,
            now_ms: u64,
        ) -> $crate::store::StoreFuture<'_, Option<$crate::connections::Authorization>> {
            let op = $crate::jobs::Op::OpenAuthorization {
                state_hash,
                browser_hash,
                now_ms,
            };
            let write = self.write(op, true);
            Box::pin(async move { write.await?.authorization() })
        }

        fn take_authorization(
            &self,
            state_hash: String,
            now_ms: u64,
        ) -> $crate::store::StoreFuture<'_, Option<$crate::connections::Authorization>> {
            let op = $crate::jobs::Op::TakeAuthorization { state_hash, now_ms };
            let write = self.write(op, true);
            Box::pin(async move { write.await?.authorization() })
        }

        fn flush(&self) -> $crate::store::StoreFuture<'_, ()> {
            let write = self.write($crate::jobs::Op::Flush, true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn add_checkpoint(
            &self,
            checkpoint: $crate::checkpoint::Checkpoint,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let write = self.write($crate::jobs::Op::AddCheckpoint(checkpoint), true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn add_plugin_change(
            &self,
            change: $crate::records::PluginChange,
        ) -> $crate::store::StoreFuture<'_, ()> {
            let write = self.write($crate::jobs::Op::AddPluginChange(change), true);
            Box::pin(async move { write.await.map(drop) })
        }

        fn record_served(
            &self,
            mut served: Vec<($crate::records::ServedVersion, $crate::records::ServedAs)>,
        ) -> $crate::store::StoreFuture<'_, ()> {
            // In the order of their rows, so two transactions never lock two rows in opposite
            // orders.
            served.sort_by(|(a, _), (b, _)| (&a.kind, &a.plugin).cmp(&(&b.kind, &b.plugin)));
            let write = self.write($crate::jobs::Op::RecordServed(served), true);
            Box::pin(async move { write.await.map(drop) })
        }
    };
}
pub(super) use queued_writes;

/// A write's answer.
pub(super) enum Done {
    Claim(Claim),
    Approval(Box<Approval>),
    /// A task as written, or none (an update that did not apply).
    Task(Option<Box<Task>>),
    Count(u64),
    /// A flow as opened or taken, or none (no live flow answered).
    Authorization(Option<Box<Authorization>>),
    Unit,
    /// A refusal that is itself written, and committed: a refused decision's audit entry
    /// (`approval_refused`). The caller's answer is [`StoreError::Refused`] with this reason.
    Refused(String),
}

impl Done {
    pub fn claim(self) -> Result<Claim, StoreError> {
        match self {
            Self::Claim(claim) => Ok(claim),
            other => other.unexpected(),
        }
    }

    pub fn approval(self) -> Result<Approval, StoreError> {
        match self {
            Self::Approval(approval) => Ok(*approval),
            other => other.unexpected(),
        }
    }

    pub fn task(self) -> Result<Option<Task>, StoreError> {
        match self {
            Self::Task(task) => Ok(task.map(|task| *task)),
            other => other.unexpected(),
        }
    }

    /// A task the write created (a create always writes one).
    pub fn created_task(self) -> Result<Task, StoreError> {
        self.task()?.map_or_else(wrong_answer, Ok)
    }

    pub fn authorization(self) -> Result<Option<Authorization>, StoreError> {
        match self {
            Self::Authorization(flow) => Ok(flow.map(|flow| *flow)),
            other => other.unexpected(),
        }
    }

    pub fn count(self) -> Result<u64, StoreError> {
        match self {
            Self::Count(n) => Ok(n),
            other => other.unexpected(),
        }
    }

    /// The answer of a write that answered something else than asked: a committed refusal
    /// is the caller's refusal; anything else is a bug.
    fn unexpected<T>(self) -> Result<T, StoreError> {
        match self {
            Self::Refused(why) => Err(StoreError::Refused(why)),
            Self::Claim(_)
            | Self::Approval(_)
            | Self::Task(_)
            | Self::Count(_)
            | Self::Authorization(_)
            | Self::Unit => wrong_answer(),
        }
    }
}

/// Logs a write the writer could not do. A refusal by the records' rules (an approval already
/// decided, a self-approval, a record that does not exist) is the caller's answer, not a store
/// failure: it goes to the caller, and only to the debug log here.
pub(super) fn log_failed_write(error: &StoreError) {
    match error {
        StoreError::Refused(_) | StoreError::NotFound(_) => {
            tracing::debug!(%error, "a state store write was refused");
        }
        StoreError::Open { .. } | StoreError::Unavailable(_) => {
            tracing::warn!(%error, "a state store write failed");
        }
    }
}

fn wrong_answer<T>() -> Result<T, StoreError> {
    Err(StoreError::Unavailable(
        "the store's writer answered a different question (a bug in gatehouse)".to_owned(),
    ))
}

/// The stored plugin changes, from their JSON texts as a backend reads them.
pub(super) fn plugin_changes(
    texts: crate::store::StoreFuture<'_, Vec<String>>,
) -> crate::store::StoreFuture<'_, Vec<PluginChange>> {
    Box::pin(async move {
        texts
            .await?
            .iter()
            .map(|text| {
                serde_json::from_str(text).map_err(|e| {
                    StoreError::Unavailable(format!("a stored plugin change does not read: {e}"))
                })
            })
            .collect()
    })
}

/// Whether `served` replaces `recorded`, the version its kind and id's row holds (`None`: no
/// row): always as [`ServedAs::Downgrade`] (an operator's rollback or forced downgrade);
/// as [`ServedAs::Install`], unless it is lower than the recorded one (semver, as manifests
/// require; a version that does not parse as one replaces it). The host refuses an install
/// below the record, so only an install by another gateway, made before it saw a higher one,
/// is ever lower: the higher stands.
pub(super) fn replaces_served(
    recorded: Option<&str>,
    served: &ServedVersion,
    how: ServedAs,
) -> bool {
    let Some(recorded) = recorded else {
        return true;
    };
    match how {
        ServedAs::Downgrade => true,
        ServedAs::Install => match (
            semver::Version::parse(&served.version),
            semver::Version::parse(recorded),
        ) {
            (Ok(offered), Ok(recorded)) => offered >= recorded,
            _ => true,
        },
    }
}

/// What a claim does with the row it found.
pub(super) enum Judgement {
    /// Answer this; write nothing.
    Answer(Claim),
    /// Mark the row `indeterminate`, then answer this.
    Indeterminate(Claim),
    /// Write the claim (insert, or take over a forgotten row): the call runs.
    Take,
}

/// Gate 7's rule: what a claim of `request` does, given the key's row.
pub(super) fn judge(existing: Option<KeyRow>, request: &ClaimRequest, now_ms: u64) -> Judgement {
    let Some(row) = existing else {
        return Judgement::Take;
    };
    let same = row.request_hash == request.request_hash;
    let tool_call_id = row.tool_call_id;
    match row.state.as_str() {
        // A completed record past its window is forgotten: the key is free again.
        "complete" if row.expires_at_ms <= now_ms => Judgement::Take,
        "complete" if same => Judgement::Answer(Claim::Replay {
            tool_call_id,
            result: row.result,
        }),
        "in_progress" if row.lease_until_ms > now_ms => Judgement::Answer(if same {
            Claim::InFlight { tool_call_id }
        } else {
            Claim::Conflict { tool_call_id }
        }),
        "in_progress" | "indeterminate" if same => {
            Judgement::Indeterminate(Claim::Indeterminate { tool_call_id })
        }
        _ => Judgement::Answer(Claim::Conflict { tool_call_id }),
    }
}

/// Whether `decision` may be applied to `approval`: the status it sets, or why it is refused
/// (the refusal is audited: [`refusal_event`]).
///
/// - every decision needs the approval `pending` and not expired;
/// - [`DecidedAs::Approver`]: `by` outside the requesting chain, unless `allow_self_approval`;
/// - [`DecidedAs::Consent`]: `by` in the requesting chain (the calling user consents or
///   declines); the self-approval rule is not asked;
/// - [`DecidedAs::Caller`]: a rejection, by someone in the requesting chain (the caller
///   withdraws its own proposal).
pub(super) fn check_decision(
    approval: &Approval,
    decision: &Decision,
) -> Result<ApprovalStatus, String> {
    if approval.status != ApprovalStatus::Pending {
        return Err(format!(
            "approval `{}` is already {}{}",
            approval.id,
            approval.status.as_str(),
            approval
                .decided_by
                .as_deref()
                .map(|by| format!(" (by `{by}`)"))
                .unwrap_or_default()
        ));
    }
    if approval.expired(decision.now_ms) {
        return Err(format!(
            "approval `{}` expired; the caller must propose the call again",
            approval.id
        ));
    }
    let in_chain = approval.principals.contains(&decision.by);
    match decision.decided_as {
        DecidedAs::Approver if in_chain && !decision.allow_self_approval => {
            return Err(format!(
                "`{}` is in the requesting principal chain of approval `{}`; another principal must decide (or the operator sets `[store] allow_self_approval = true`)",
                decision.by, approval.id
            ));
        }
        DecidedAs::Consent if !in_chain => {
            return Err(format!(
                "`{}` is not in the requesting principal chain of approval `{}`: only the calling user consents to its call (an approver decides through the admin API, the console or `gatehouse approvals`)",
                decision.by, approval.id
            ));
        }
        DecidedAs::Caller if !in_chain => {
            return Err(format!(
                "`{}` is not in the requesting principal chain of approval `{}`: only the caller withdraws its own proposal",
                decision.by, approval.id
            ));
        }
        DecidedAs::Caller if decision.approve => {
            return Err(format!(
                "a caller withdrawing approval `{}` rejects it; a caller cannot approve its own call",
                approval.id
            ));
        }
        DecidedAs::Approver | DecidedAs::Consent | DecidedAs::Caller => {}
    }
    Ok(if decision.approve {
        ApprovalStatus::Approved
    } else {
        ApprovalStatus::Rejected
    })
}

/// Why a decision that passed [`check_decision`] on the approval as first read was then not
/// applied (the approval was no longer `pending` when its conditional update ran: another
/// decision, made at once, won): the refusal the approval as read again gives.
pub(super) fn lost_race(now: Option<&Approval>, decision: &Decision) -> String {
    now.and_then(|approval| check_decision(approval, decision).err())
        .unwrap_or_else(|| {
            format!(
                "approval `{}` was decided by another decision made at the same time",
                decision.id
            )
        })
}

/// The audit entry of a decision.
pub(super) fn decision_event(
    approval: &Approval,
    decision: &Decision,
    status: ApprovalStatus,
) -> AuditEvent {
    let record = serde_json::json!({
        "approval_id": approval.id, "decision": status.as_str(),
        "by": decision.by, "reason": decision.reason,
        "decided_as": decision.decided_as.as_str(),
        "request_hash": approval.request_hash,
    });
    approval_event("approval", approval, decision, &record)
}

/// The audit entry of a refused decision (`approval_refused`): who tried, in what capacity,
/// and why it was refused. Never a decision.
pub(super) fn refusal_event(approval: &Approval, decision: &Decision, why: &str) -> AuditEvent {
    let record = serde_json::json!({
        "approval_id": approval.id, "by": decision.by,
        "decided_as": decision.decided_as.as_str(), "reason": why,
    });
    approval_event("approval_refused", approval, decision, &record)
}

fn approval_event(
    kind: &str,
    approval: &Approval,
    decision: &Decision,
    record: &Value,
) -> AuditEvent {
    AuditEvent {
        kind: kind.to_owned(),
        tool_call_id: approval
            .call
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        tenant: Some(approval.tenant.clone()),
        principal: Some(decision.by.clone()),
        tool: Some(approval.tool.clone()),
        outcome: None,
        record: gatehouse_core::canonical::canonical_json(record),
        at_ms: decision.now_ms,
    }
}

/// The task `update` makes of `task`, or `None` when it does not apply (the task's status is
/// not one of `update.from`). A backend writes it only if the task is still in the status it
/// read (a conditional update), so two updates racing from one status never both apply.
pub(super) fn updated_task(task: &Task, update: &TaskUpdate) -> Option<Task> {
    update.from.contains(&task.status).then(|| Task {
        status: update.status,
        status_message: update.status_message.clone(),
        result: update.result.clone(),
        updated_at_ms: update.now_ms,
        ..task.clone()
    })
}

/// The error for a task created with the id of one that exists.
pub(super) fn task_exists(id: &str) -> StoreError {
    StoreError::Refused(format!(
        "task `{id}` exists already; a new task needs a new id"
    ))
}

/// The error for an approval that does not exist.
pub(super) fn unknown_approval(id: &str) -> StoreError {
    StoreError::NotFound(format!("approval `{id}`"))
}

/// The error for a key that has no row.
pub(super) fn unknown_key(key: &IdempotencyKey) -> StoreError {
    StoreError::NotFound(format!(
        "idempotency key `{}` of `{}` for tenant `{}`",
        key.key, key.tool, key.tenant
    ))
}

/// Whether a key in `state` may be resolved by an operator: only a stuck one.
pub(super) fn check_resolvable(
    key: &IdempotencyKey,
    state: &str,
    lease_until_ms: u64,
    now_ms: u64,
) -> Result<(), StoreError> {
    if key_state(state, lease_until_ms, now_ms) == KeyState::Indeterminate {
        Ok(())
    } else {
        Err(StoreError::Refused(format!(
            "key `{}` is {state}, not indeterminate: nothing to resolve",
            key.key
        )))
    }
}

/// The audit entry of an operator's resolution.
pub(super) fn resolution_event(
    key: &IdempotencyKey,
    resolution: Resolution,
    by: &str,
    now_ms: u64,
    claimed_by_call: String,
) -> AuditEvent {
    let done = match resolution {
        Resolution::Release => "released",
        Resolution::Done => "done",
    };
    let record = serde_json::json!({
        "resolution": done, "by": by, "tenant": key.tenant, "tool": key.tool, "key": key.key,
        "claimed_by_call": claimed_by_call,
    });
    AuditEvent {
        kind: "operator".to_owned(),
        tool_call_id: Some(claimed_by_call),
        tenant: Some(key.tenant.clone()),
        principal: Some(by.to_owned()),
        tool: Some(key.tool.clone()),
        outcome: None,
        record: gatehouse_core::canonical::canonical_json(&record),
        at_ms: now_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::proposal;

    /// Approval `apr_1`, pending, asked by `usr_alice` through `agent_a`.
    fn pending() -> Approval {
        proposal("apr_1", None)
    }

    fn decision(decided_as: DecidedAs, approve: bool, by: &str, allow_self: bool) -> Decision {
        Decision {
            id: "apr_1".to_owned(),
            approve,
            by: by.to_owned(),
            reason: String::new(),
            now_ms: pending().created_at_ms,
            allow_self_approval: allow_self,
            decided_as,
        }
    }

    #[test]
    fn each_capacity_decides_by_its_own_rule() {
        use ApprovalStatus::{Approved, Rejected};
        use DecidedAs::{Approver, Caller, Consent};
        /// A capacity, approve, by, allow_self_approval: the status set, or part of the refusal.
        type Case = (
            DecidedAs,
            bool,
            &'static str,
            bool,
            Result<ApprovalStatus, &'static str>,
        );
        let cases: [Case; 12] = [
            (Approver, true, "usr_bob", false, Ok(Approved)),
            (Approver, false, "usr_bob", false, Ok(Rejected)),
            (
                Approver,
                true,
                "usr_alice",
                false,
                Err("`usr_alice` is in the requesting"),
            ),
            (
                Approver,
                false,
                "agent_a",
                false,
                Err("`agent_a` is in the requesting"),
            ),
            (Approver, true, "usr_alice", true, Ok(Approved)),
            (Consent, true, "usr_alice", false, Ok(Approved)),
            (Consent, false, "agent_a", false, Ok(Rejected)),
            (
                Consent,
                true,
                "usr_bob",
                true,
                Err("`usr_bob` is not in the requesting"),
            ),
            (Caller, false, "usr_alice", false, Ok(Rejected)),
            (Caller, false, "agent_a", true, Ok(Rejected)),
            (
                Caller,
                true,
                "usr_alice",
                true,
                Err("cannot approve its own call"),
            ),
            (
                Caller,
                false,
                "usr_bob",
                false,
                Err("only the caller withdraws"),
            ),
        ];
        for (decided_as, approve, by, allow_self, expected) in cases {
            let decision = decision(decided_as, approve, by, allow_self);
            let case = format!("{decided_as:?} approve={approve} by={by} self={allow_self}");
            match (check_decision(&pending(), &decision), expected) {
                (Ok(status), Ok(expected)) => assert_eq!(status, expected, "{case}"),
                (Err(why), Err(part)) => assert!(why.contains(part), "{case}: {why}"),
                (got, expected) => panic!("{case}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn no_capacity_decides_an_approval_decided_or_expired() {
        let mut decided = pending();
        decided.status = ApprovalStatus::Approved;
        decided.decided_by = Some("usr_bob".to_owned());
        for decided_as in [DecidedAs::Approver, DecidedAs::Consent, DecidedAs::Caller] {
            let decision = decision(decided_as, false, "usr_alice", true);
            assert_eq!(
                check_decision(&decided, &decision),
                Err("approval `apr_1` is already approved (by `usr_bob`)".to_owned())
            );
            let open = pending();
            let late = Decision {
                now_ms: open.expires_at_ms,
                ..decision
            };
            assert_eq!(
                check_decision(&open, &late),
                Err("approval `apr_1` expired; the caller must propose the call again".to_owned())
            );
        }
    }

    #[test]
    fn an_install_never_lowers_the_served_version_and_a_downgrade_does() {
        let served = |version: &str| ServedVersion {
            kind: "adapter".to_owned(),
            plugin: "acme.orders".to_owned(),
            version: version.to_owned(),
            digest: "sha256:ab".to_owned(),
            source: None,
            at_ms: 1,
        };
        use ServedAs::{Downgrade, Install};
        // The recorded version, the one serving, how: whether it replaces the record.
        let cases = [
            (None, "1.0.0", Install, true),
            (Some("1.0.0"), "1.0.0", Install, true),
            (Some("1.0.0"), "1.0.1", Install, true),
            (Some("1.9.0"), "1.10.0", Install, true),
            (Some("1.10.0"), "1.9.0", Install, false),
            (Some("2.0.0"), "2.0.0-rc.1", Install, false),
            (Some("1.1.0"), "1.0.0", Downgrade, true),
            (None, "1.0.0", Downgrade, true),
            // Never written by gatehouse (manifests are semver): the last one stands.
            (Some("latest"), "1.0.0", Install, true),
        ];
        for (recorded, version, how, replaces) in cases {
            assert_eq!(
                replaces_served(recorded, &served(version), how),
                replaces,
                "{recorded:?} then {version} as {how:?}"
            );
        }
    }

    #[test]
    fn a_decision_that_lost_the_race_says_who_won() {
        let mut won = pending();
        won.status = ApprovalStatus::Rejected;
        won.decided_by = Some("usr_carol".to_owned());
        let lost = decision(DecidedAs::Approver, true, "usr_bob", false);
        assert_eq!(
            lost_race(Some(&won), &lost),
            "approval `apr_1` is already rejected (by `usr_carol`)"
        );
        // Read again still pending (or gone): it says what it knows.
        let unknown = "approval `apr_1` was decided by another decision made at the same time";
        assert_eq!(lost_race(Some(&pending()), &lost), unknown);
        assert_eq!(lost_race(None, &lost), unknown);
    }

    #[test]
    fn a_refused_decision_is_audited_as_refused_with_who_and_why() {
        let approval = pending();
        let refused = decision(DecidedAs::Consent, true, "usr_bob", false);
        let event = refusal_event(&approval, &refused, "not in the chain");
        assert_eq!(
            (event.kind.as_str(), event.ids()),
            (
                "approval_refused",
                [
                    Some("call_1"),
                    Some("acme"),
                    Some("usr_bob"),
                    Some("t.pay"),
                    None
                ]
            )
        );
        assert_eq!(
            event.record,
            r#"{"approval_id":"apr_1","by":"usr_bob","decided_as":"consent","reason":"not in the chain"}"#
        );
        let decided = decision_event(&approval, &refused, ApprovalStatus::Approved);
        assert_eq!(decided.kind, "approval");
        assert!(
            decided.record.contains(r#""decided_as":"consent""#),
            "{}",
            decided.record
        );
    }
}
