//! MCP tasks: a `tools/call` that a client asked to run as a task (2025-11-25: a task-augmented
//! call, `params.task`; 2026-07-28: the `io.modelcontextprotocol/tasks` extension), kept in the
//! store so it survives a restart and is seen by every gateway on a shared store.
//!
//! 1. **create**: the call runs through the pipeline first. One that ends (ran, or was refused)
//!    makes a task already terminal, holding its result. One paused for approval makes a task
//!    `working`, whose status message names the approval and where it is decided; it lives as
//!    long as its approval.
//! 2. **run** ([`run`], one loop per gateway): every [`POLL`] (and at once on a decision made
//!    through this gateway), each `working` task whose approval was decided or expired runs its
//!    call through the pipeline, under its approval and idempotency key, and stores the result:
//!    `completed`, whether it ran or its approval was rejected or expired (the result says
//!    which, with `isError`, as the tasks extension ends a call that returned a tool error);
//!    `failed` only when the stored call cannot be read. On the 2025-11-25 wire a completed
//!    task whose result is an error reads `failed`, as that version has it. Gateways
//!    sharing a store may both pick a task up; gate 7 runs the call once, and the task takes the
//!    first result stored (the update is conditional on `working`).
//! 3. **read** (`tasks/get`, `tasks/result`, `tasks/list`): only the principal and tenant that
//!    made a task see it; to anyone else it does not exist.
//! 4. **cancel** (`tasks/cancel`): withdraws the task's pending proposal (the approval ends
//!    rejected, recorded as withdrawn by the caller) and cancels the task; nothing runs.
//!
//! A call paused because its caller's account is not connected (`CONNECTION_REQUIRED`,
//! [`crate::oauth`]) makes a task `working` too (A2A's `AUTH_REQUIRED`), its status message
//! naming the link, its stored call the one the flow was begun for, marked with the connection
//! it waits for ([`AWAITS`]). The runner runs it once the store holds that connection, the
//! same way; a run that pauses again ends the task with that result (its new link).
//!
//! The 2026-07-28 extension also has tasks the server directs ([`running`]): a call of a tool
//! whose manifest says `task_support = "optional"` or `"required"`, from a client that declared
//! the extension, still running after `[mcp] task_after_ms`, goes on as a task in the gateway
//! that started it ([`super::v2026_07_28::held`]): `working`, `input_required` while its
//! adapter waits for answers (`tasks/update`), then `completed`, `failed` for a protocol-level
//! error ([`ended`]), or `cancelled`. The runner above leaves such tasks alone; one whose
//! gateway stopped stays `working` until it expires.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gatehouse_core::envelope::{OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_host::Host;
use gatehouse_store::{ApprovalStatus, Task, TaskFilter, TaskStatus, TaskUpdate, now_ms, task_id};
use serde_json::{Value, json};

use super::caller::Caller;

/// The key of a stored call that marks it as waiting for a connection (tenant, principal,
/// provider), removed before the call runs.
pub const AWAITS: &str = "gatehouse/awaits_connection";

/// How often the runner looks for tasks whose approval was decided elsewhere, and the poll
/// interval tasks suggest to clients.
pub const POLL: Duration = Duration::from_secs(1);

/// How long a task that ended at once is kept when the client asks for no TTL: an hour.
const DEFAULT_TTL_MS: u64 = 3_600_000;
/// The longest a task that ended at once is kept, whatever the client asks: a day.
const MAX_TTL_MS: u64 = 86_400_000;
/// The most working tasks the runner reads per round.
const BATCH: usize = 200;

/// Why a task request is refused.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// No such task, or another's (the two look the same).
    #[error("there is no task `{0}`")]
    Unknown(String),
    /// `tasks/cancel` of a task that already ended.
    #[error("task `{id}` already ended ({status}); there is nothing to cancel")]
    Ended {
        /// The task.
        id: String,
        /// How it ended.
        status: &'static str,
    },
    /// The store failed.
    #[error("the task store is unavailable: {0}")]
    Store(String),
}

impl From<gatehouse_store::StoreError> for TaskError {
    fn from(error: gatehouse_store::StoreError) -> Self {
        Self::Store(error.to_string())
    }
}

/// A task error as the protocol's: an unknown (or another's) task, or one that ended, is
/// invalid params; a store failure an internal error.
#[expect(
    clippy::needless_pass_by_value,
    reason = "a `map_err` function: it takes the error as `map_err` hands it over"
)]
pub fn task_error(error: TaskError) -> rmcp::ErrorData {
    match error {
        TaskError::Unknown(_) | TaskError::Ended { .. } => {
            rmcp::ErrorData::invalid_params(error.to_string(), None)
        }
        TaskError::Store(_) => rmcp::ErrorData::internal_error(error.to_string(), None),
    }
}

/// Makes the task of a call of `tool` (as it was called) whose first run gave `result`: one
/// paused for approval runs, once decided, the call its approval holds. It is kept `ttl_ms`,
/// what the client asked for (within [`MAX_TTL_MS`]; by default [`DEFAULT_TTL_MS`]), and a
/// task waiting for an approval never outlives it (by default, it lives as long).
pub async fn create(
    host: &Host,
    caller: &Caller,
    tool: &str,
    result: &ToolResultEnvelope,
    ttl_ms: Option<u64>,
) -> Result<Task, TaskError> {
    let mut task = new_task(caller, tool, ttl_ms);
    match (&result.approval_id, result.outcome) {
        (Some(approval_id), OutcomeCode::ApprovalRequired) => {
            let approval = host
                .approval(approval_id)
                .await?
                .ok_or_else(|| TaskError::Unknown(approval_id.clone()))?;
            let mut resume = approval.call.clone();
            resume["approval_id"] = Value::String(approval_id.clone());
            task.call = resume;
            task.approval_id = Some(approval_id.clone());
            task.status_message = Some(waiting_message(host, &approval.id));
            task.expires_at_ms = match ttl_ms {
                Some(_) => task.expires_at_ms.min(approval.expires_at_ms),
                None => approval.expires_at_ms,
            };
        }
        (_, OutcomeCode::ConnectionRequired) if let Some(flow) = flow_of(host, result).await? => {
            let mut call: Value = serde_json::from_str(&flow.call).unwrap_or(Value::Null);
            if let Some(fields) = call.as_object_mut() {
                let key = &flow.key;
                fields.insert(
                    AWAITS.to_owned(),
                    json!({ "tenant": key.tenant, "principal": key.principal, "provider": key.provider }),
                );
            }
            task.call = call;
            task.status_message = Some(format!(
                "waiting for you to connect your `{}` account: open {}; the call runs once it is connected",
                flow.key.provider,
                result.connect_url.as_deref().unwrap_or_default()
            ));
            task.expires_at_ms = task.expires_at_ms.min(flow.expires_at_ms);
        }
        _ => {
            let (status, message) = ended(result);
            task.status = status;
            task.status_message = message;
            task.result = Some(serde_json::to_value(result).unwrap_or_default());
        }
    }
    Ok(host.store().create_task(task).await?)
}

/// The flow a call paused for a connection began, if its link names one that is still stored.
async fn flow_of(
    host: &Host,
    result: &ToolResultEnvelope,
) -> Result<Option<gatehouse_store::Authorization>, TaskError> {
    let Some(hash) = (result.connect_url.as_deref()).and_then(crate::oauth::state_hash_of) else {
        return Ok(None);
    };
    Ok(host.store().authorization(hash).await?)
}

/// The connection a task waits for ([`AWAITS`]), if it waits for one.
pub fn awaits(task: &Task) -> Option<gatehouse_store::ConnectionKey> {
    let key = task.call.get(AWAITS)?;
    let part = |name: &str| key.get(name).and_then(Value::as_str).map(str::to_owned);
    Some(gatehouse_store::ConnectionKey {
        tenant: part("tenant")?,
        principal: part("principal")?,
        provider: part("provider")?,
    })
}

/// What a working task says while its approval is pending.
fn waiting_message(host: &Host, approval_id: &str) -> String {
    match host.approval_url(approval_id) {
        Some(url) => format!(
            "waiting for approval {approval_id}: an approver decides at {url}; the call runs once approved"
        ),
        None => format!(
            "waiting for approval {approval_id}: an approver decides it; the call runs once approved"
        ),
    }
}

/// How a task whose call ended with `result` ends: `completed` for a call that ran or was
/// refused (a tool error, a rejected or expired approval, a policy's refusal: each is a tool
/// result with `isError` and the gateway's record, as the tasks extension asks); `failed` for
/// a protocol-level error, where the adapter crashed (a trap, its memory limit) or the gateway
/// failed; still `working` while its approval is pending. A task that could not run its call
/// at all (its stored call does not read) is `failed` too.
fn ended(result: &ToolResultEnvelope) -> (TaskStatus, Option<String>) {
    let message = result.error.as_ref().map(|error| error.message.clone());
    let status = match result.outcome {
        OutcomeCode::ApprovalRequired if result.status == Status::Paused => TaskStatus::Working,
        OutcomeCode::ToolTrapped
        | OutcomeCode::ToolMemoryLimit
        | OutcomeCode::InternalError
        | OutcomeCode::StoreUnavailable => TaskStatus::Failed,
        _ => TaskStatus::Completed,
    };
    (status, message)
}

/// Makes the task of a call of `tool` that goes on running in this gateway (the tasks
/// extension's server-directed task: [`super::v2026_07_28::held`] runs it): `working`, no
/// approval, kept [`DEFAULT_TTL_MS`] (or `ttl_ms`, within [`MAX_TTL_MS`]) from now.
pub async fn running(
    host: &Host,
    caller: &Caller,
    tool: &str,
    ttl_ms: Option<u64>,
) -> Result<Task, TaskError> {
    let mut task = new_task(caller, tool, ttl_ms);
    task.status_message = Some("running".to_owned());
    Ok(host.store().create_task(task).await?)
}

/// A new `working` task of `caller`'s call of `tool`, kept `ttl_ms` from now (by default
/// [`DEFAULT_TTL_MS`], at most [`MAX_TTL_MS`]).
fn new_task(caller: &Caller, tool: &str, ttl_ms: Option<u64>) -> Task {
    let now = now_ms();
    Task {
        id: task_id(),
        tenant: caller.tenant.clone(),
        principal: caller.principal.id.clone(),
        tool: tool.to_owned(),
        approval_id: None,
        // Until it holds a call to run (a paused call's envelope, which names its session too),
        // what of its call a task keeps: the session (A2A reads its `contextId` there).
        call: caller
            .session
            .as_ref()
            .map_or(Value::Null, |session| json!({ "session_id": session })),
        status: TaskStatus::Working,
        status_message: None,
        result: None,
        created_at_ms: now,
        updated_at_ms: now,
        expires_at_ms: now + ttl_ms.unwrap_or(DEFAULT_TTL_MS).min(MAX_TTL_MS),
    }
}

/// Moves running task `id` to `input_required` (`waiting`) or back to `working`, unless it
/// ended meanwhile (was cancelled).
pub async fn waits(host: &Host, id: &str, waiting: bool) -> Result<(), TaskError> {
    let (from, status, message) = if waiting {
        (
            TaskStatus::Working,
            TaskStatus::InputRequired,
            "waiting for the caller's answers: see inputRequests, answer with tasks/update",
        )
    } else {
        (TaskStatus::InputRequired, TaskStatus::Working, "running")
    };
    let update = TaskUpdate {
        id: id.to_owned(),
        from: vec![from],
        status,
        status_message: Some(message.to_owned()),
        result: None,
        now_ms: now_ms(),
    };
    host.store().update_task(update).await?;
    Ok(())
}

/// Ends running task `id` with its call's `result` (see [`ended`]), or, where the call failed
/// inside the gateway, `failed` with `error`; unless it ended meanwhile (was cancelled).
pub async fn settle(
    host: &Host,
    id: &str,
    result: Result<ToolResultEnvelope, String>,
) -> Result<(), TaskError> {
    let (status, message, result) = match result {
        Ok(result) => {
            let (status, message) = match ended(&result) {
                // Paused for approval mid-task (the policy's input changed as it ran): its
                // paused result is the answer; the caller calls again to resume it.
                (TaskStatus::Working, message) => (TaskStatus::Completed, message),
                ended => ended,
            };
            (status, message, serde_json::to_value(&result).ok())
        }
        Err(error) => (TaskStatus::Failed, Some(error), None),
    };
    let update = TaskUpdate {
        id: id.to_owned(),
        from: vec![TaskStatus::Working, TaskStatus::InputRequired],
        status,
        status_message: message,
        result,
        now_ms: now_ms(),
    };
    host.store().update_task(update).await?;
    Ok(())
}

/// `caller`'s task `id`; another's is [`TaskError::Unknown`].
pub async fn owned(host: &Host, caller: &Caller, id: &str) -> Result<Task, TaskError> {
    match host.store().task(id.to_owned()).await? {
        Some(task) if task.tenant == caller.tenant && task.principal == caller.principal.id => {
            Ok(task)
        }
        _ => Err(TaskError::Unknown(id.to_owned())),
    }
}

/// `caller`'s tasks, newest first, after `cursor` (a previous page's last task id).
pub async fn list(
    host: &Host,
    caller: &Caller,
    cursor: Option<&str>,
) -> Result<(Vec<Task>, Option<String>), TaskError> {
    let before = match cursor {
        Some(id) => {
            let task = owned(host, caller, id).await?;
            Some((task.created_at_ms, task.id))
        }
        None => None,
    };
    let limit = 50;
    let tasks = page(host, caller, &[], before, limit).await?;
    let next = (tasks.len() == limit)
        .then(|| tasks.last().map(|task| task.id.clone()))
        .flatten();
    Ok((tasks, next))
}

/// Every task of `caller`'s in one of `statuses` (any, when empty), newest first: the store
/// read a page at a time.
pub async fn all(
    host: &Host,
    caller: &Caller,
    statuses: &[TaskStatus],
) -> Result<Vec<Task>, TaskError> {
    const LIMIT: usize = 100;
    let mut all: Vec<Task> = Vec::new();
    loop {
        let before = all.last().map(|task| (task.created_at_ms, task.id.clone()));
        let tasks = page(host, caller, statuses, before, LIMIT).await?;
        let last = tasks.len() < LIMIT;
        all.extend(tasks);
        if last {
            return Ok(all);
        }
    }
}

/// At most `limit` of `caller`'s tasks in one of `statuses` (any, when empty), newest first,
/// those before `before` (a task's creation time and id).
async fn page(
    host: &Host,
    caller: &Caller,
    statuses: &[TaskStatus],
    before: Option<(u64, String)>,
    limit: usize,
) -> Result<Vec<Task>, TaskError> {
    let filter = TaskFilter {
        tenant: Some(caller.tenant.clone()),
        principal: Some(caller.principal.id.clone()),
        statuses: statuses.to_vec(),
        limit,
        before,
        ..TaskFilter::default()
    };
    Ok(host.store().tasks(filter).await?)
}

/// Cancels `caller`'s task `id`: withdraws its pending proposal, then the task.
pub async fn cancel(host: &Host, caller: &Caller, id: &str) -> Result<Task, TaskError> {
    let task = owned(host, caller, id).await?;
    if task.status.is_terminal() {
        return Err(TaskError::Ended {
            id: task.id,
            status: task.status.as_str(),
        });
    }
    if let Some(approval_id) = &task.approval_id {
        // An approval decided meanwhile stays decided; the task is cancelled either way and its
        // call never runs from here.
        if let Err(error) = host
            .withdraw(
                approval_id,
                &caller.principal.id,
                &format!("withdrawn by the caller: task {} cancelled", task.id),
            )
            .await
        {
            tracing::info!(task = %task.id, %error, "a cancelled task's approval was not withdrawn");
        }
    }
    let update = TaskUpdate {
        id: task.id.clone(),
        from: vec![TaskStatus::Working, TaskStatus::InputRequired],
        status: TaskStatus::Cancelled,
        status_message: Some(
            if task.approval_id.is_some() {
                "cancelled by the caller; nothing ran"
            } else {
                "cancelled by the caller as it ran: nothing waits for it, and the call's record \
                 (with its result, if it ends) is kept in the audit log"
            }
            .to_owned(),
        ),
        result: None,
        now_ms: now_ms(),
    };
    match host.store().update_task(update).await? {
        Some(task) => Ok(task),
        // It ended meanwhile (the runner ran it): report what it is.
        None => owned(host, caller, id).await,
    }
}

/// Runs each working task whose approval was decided, until `stop` resolves (see the module
/// docs). `host` gives the host serving now, so a reload's host runs what is approved after it.
pub async fn run(host: impl Fn() -> Arc<Host> + Send + 'static) {
    let running = Arc::new(Mutex::new(HashSet::<String>::new()));
    loop {
        let current = host();
        let decided = current.decided_here();
        let woken = decided.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if let Err(error) = round(&current, &running).await {
            tracing::warn!(%error, "the task runner could not read the store; trying again");
        }
        tokio::select! {
            () = &mut woken => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// One look at the working tasks: starts each whose approval was decided or expired.
async fn round(host: &Arc<Host>, running: &Arc<Mutex<HashSet<String>>>) -> Result<(), TaskError> {
    let tasks = host
        .store()
        .tasks(TaskFilter {
            statuses: vec![TaskStatus::Working],
            limit: BATCH,
            ..TaskFilter::default()
        })
        .await?;
    let now = now_ms();
    for task in tasks {
        let due = match (&task.approval_id, awaits(&task)) {
            (Some(approval_id), _) => match host.approval(approval_id).await? {
                Some(approval) => {
                    approval.status != ApprovalStatus::Pending || approval.expired(now)
                }
                None => true,
            },
            // Waiting for its caller to connect: due once the connection is stored.
            (None, Some(whose)) => host.store().connection(whose).await?.is_some(),
            // A task without either runs in the gateway that started it (see [`running`]).
            (None, None) => continue,
        };
        if !due
            || !running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(task.id.clone())
        {
            continue;
        }
        let (host, running) = (Arc::clone(host), Arc::clone(running));
        // A task of its own: a call in flight is never cut short by the loop.
        tokio::spawn(async move {
            let id = task.id.clone();
            if let Err(error) = execute(&host, task).await {
                tracing::warn!(task = %id, %error, "a task's call could not be run and stored");
            }
            running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        });
    }
    Ok(())
}

/// Runs a task's call and stores how it ended.
async fn execute(host: &Host, task: Task) -> Result<(), TaskError> {
    let mut stored = task.call.clone();
    if let Some(fields) = stored.as_object_mut() {
        fields.remove(AWAITS);
    }
    let result = match serde_json::from_value::<ToolCallEnvelope>(stored) {
        Ok(mut call) => {
            call.tool_call_id = gatehouse_core::ids::tool_call_id();
            host.call_for_caller(call).await
        }
        Err(error) => {
            let update = TaskUpdate {
                id: task.id,
                from: vec![TaskStatus::Working],
                status: TaskStatus::Failed,
                status_message: Some(format!("the task's stored call does not read: {error}")),
                result: None,
                now_ms: now_ms(),
            };
            host.store().update_task(update).await?;
            return Ok(());
        }
    };
    let (status, message) = ended(&result);
    if status == TaskStatus::Working {
        // Still pending (decided as the call read it? no: a fresh proposal): look again later.
        return Ok(());
    }
    let update = TaskUpdate {
        id: task.id,
        from: vec![TaskStatus::Working],
        status,
        status_message: message,
        result: Some(serde_json::to_value(&result).unwrap_or_default()),
        now_ms: now_ms(),
    };
    host.store().update_task(update).await?;
    Ok(())
}

/// The result a task delivered (the caller's view of its envelope), if it has one.
pub fn result_of(task: &Task) -> Option<ToolResultEnvelope> {
    task.result
        .as_ref()
        .and_then(|result| serde_json::from_value(result.clone()).ok())
}

/// A task on the wire, in the shape of `version` (2025-11-25 `Task`, or the 2026-07-28
/// extension's), without a status payload.
pub fn wire(task: &Task, modern: bool) -> Value {
    let ttl = task.expires_at_ms.saturating_sub(task.created_at_ms);
    let status = wire_status(task, modern);
    let mut wire = json!({
        "taskId": task.id,
        "status": status,
        "createdAt": rfc3339(task.created_at_ms),
        "lastUpdatedAt": rfc3339(task.updated_at_ms),
    });
    if modern {
        wire["ttlMs"] = json!(ttl);
        wire["pollIntervalMs"] = json!(POLL.as_millis() as u64);
    } else {
        wire["ttl"] = json!(ttl);
        wire["pollInterval"] = json!(POLL.as_millis() as u64);
    }
    if let Some(message) = &task.status_message {
        wire["statusMessage"] = json!(message);
    }
    wire
}

/// A task's status on the wire. 2025-11-25 has a completed call with a tool error `failed`;
/// the 2026-07-28 extension keeps it `completed`, its result saying `isError`.
fn wire_status(task: &Task, modern: bool) -> &'static str {
    if !modern
        && task.status == TaskStatus::Completed
        && result_of(task).is_some_and(|result| result.status != Status::Ok)
    {
        return TaskStatus::Failed.as_str();
    }
    task.status.as_str()
}

/// Unix ms as an RFC 3339 UTC timestamp (`2026-11-27T03:04:05.678Z`).
pub fn rfc3339(ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result with `outcome`, as the pipeline reports a call that did not end `OK`.
    fn ending(outcome: OutcomeCode) -> ToolResultEnvelope {
        serde_json::from_value(json!({
            "envelope_version": "1", "tool_call_id": "c", "trace_id": "t",
            "capability_id": "x.y", "status": "failed", "outcome": outcome,
            "content": [], "evidence_refs": [],
            "error": { "kind": "upstream", "code": "E", "message": "it ended so", "retryable": false },
        }))
        .unwrap()
    }

    #[test]
    fn a_tool_error_completes_a_task_and_a_crash_fails_it() {
        for outcome in [
            OutcomeCode::ToolError,
            OutcomeCode::ToolTimeout,
            OutcomeCode::PolicyBlocked,
            OutcomeCode::ApprovalRejected,
        ] {
            assert_eq!(
                ended(&ending(outcome)).0,
                TaskStatus::Completed,
                "{outcome:?}"
            );
        }
        for outcome in [
            OutcomeCode::ToolTrapped,
            OutcomeCode::ToolMemoryLimit,
            OutcomeCode::InternalError,
            OutcomeCode::StoreUnavailable,
        ] {
            let (status, message) = ended(&ending(outcome));
            assert_eq!(status, TaskStatus::Failed, "{outcome:?}");
            assert_eq!(message.as_deref(), Some("it ended so"));
        }
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_748_645_678), "2026-11-27T03:04:05.678Z");
        assert_eq!(rfc3339(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }
}
