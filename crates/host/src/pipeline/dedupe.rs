//! Gate 7, deduplicate: a call with an idempotency key claims it before anything runs, and
//! the claim is committed before the adapter is instantiated, so nothing runs without its
//! record.
//!
//! 1. a new key: the call runs and gate 10 stores its result under the key;
//! 2. the key with the same request, completed: the stored result is returned, marked as a
//!    replay (`replay_of`), and nothing runs;
//! 3. the key with a different request: `IDEMPOTENCY_CONFLICT`, nothing runs;
//! 4. the key held by a call still running: wait for it (the store wakes the waiter when the
//!    holder records, in this process or another), at most this call's deadline, then return
//!    its result (`IDEMPOTENCY_IN_FLIGHT` if it is still running);
//! 5. the key held by a call that never recorded an outcome (the process died): reported as
//!    `IDEMPOTENCY_INDETERMINATE` until an operator resolves it; never re-run by itself.

use std::time::Duration;

use gatehouse_core::envelope::{OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::{ErrorBody, ErrorKind};
use gatehouse_store::{Claim, ClaimRequest, Store};
use tokio::time::Instant;

use crate::pipeline::outcome::Stop;

/// How long a waiter sleeps without a wake-up before it looks at the key again: a backstop
/// for a holder the store cannot wake it for (an operator's command on another process's
/// SQLite file), not the way waiters normally learn.
const RECHECK: Duration = Duration::from_secs(1);

/// Gate 7's verdict.
#[derive(Debug)]
pub enum Dedupe {
    /// Run the call; gate 10 records its result under the claimed key.
    Run,
    /// Deliver this stored result; nothing runs.
    Replay(Box<ToolResultEnvelope>),
}

/// Gate 7: claims `request.key`, waiting for an in-flight holder until `deadline`.
pub async fn dedupe(
    store: &dyn Store,
    call: &ToolCallEnvelope,
    request: ClaimRequest,
    deadline: Instant,
) -> Result<Dedupe, Stop> {
    loop {
        let notify = store.watch(&request.key);
        let notified = notify.notified();
        tokio::pin!(notified);
        // Registered before the claim reads the key, so a holder that records after the read
        // still wakes this call.
        notified.as_mut().enable();
        match store.claim(request.clone()).await? {
            Claim::Run => return Ok(Dedupe::Run),
            Claim::Replay {
                tool_call_id,
                result,
            } => {
                return Ok(Dedupe::Replay(Box::new(replay(
                    call,
                    &tool_call_id,
                    result.as_deref(),
                ))));
            }
            Claim::Conflict { tool_call_id } => {
                return Err(Stop::IdempotencyConflict {
                    key: request.key.key,
                    holder: tool_call_id,
                });
            }
            Claim::Indeterminate { tool_call_id } => {
                tracing::warn!(key = %request.key.key, tool = %request.key.tool, tenant = %request.key.tenant, holder = %tool_call_id, "idempotency key is indeterminate: an operator must resolve it (gatehouse idempotency resolve)");
                return Err(Stop::IdempotencyIndeterminate {
                    key: request.key.key,
                    holder: tool_call_id,
                });
            }
            Claim::InFlight { tool_call_id } => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Stop::IdempotencyInFlight {
                        key: request.key.key,
                        holder: tool_call_id,
                    });
                }
                let _ = tokio::time::timeout_at(deadline.min(now + RECHECK), notified).await;
            }
        }
    }
}

/// The stored result of `holder`, as this call's replay. `None` (an operator resolved the key
/// as done without a result) becomes a result saying so.
fn replay(call: &ToolCallEnvelope, holder: &str, stored: Option<&str>) -> ToolResultEnvelope {
    let parsed = stored.map(serde_json::from_str::<ToolResultEnvelope>);
    let mut result = match parsed {
        Some(Ok(result)) => result,
        Some(Err(error)) => {
            tracing::error!(%error, holder, "the stored result of an idempotency key does not parse");
            stopped(
                call,
                OutcomeCode::InternalError,
                ErrorKind::Internal,
                format!(
                    "the result stored for this idempotency key (call `{holder}`) cannot be read; nothing ran again"
                ),
            )
        }
        None => stopped(
            call,
            OutcomeCode::IdempotencyIndeterminate,
            ErrorKind::Conflict,
            format!(
                "an operator resolved this idempotency key as done (call `{holder}` had its effect, but no result was recorded); nothing ran again"
            ),
        ),
    };
    result.tool_call_id.clone_from(&call.tool_call_id);
    result.trace_id.clone_from(&call.trace_id);
    result.replay_of = Some(holder.to_owned());
    // Nothing ran for this call: its audit entry and metrics must not count the original's
    // fuel a second time.
    result.usage = None;
    result
}

fn stopped(
    call: &ToolCallEnvelope,
    outcome: OutcomeCode,
    kind: ErrorKind,
    message: String,
) -> ToolResultEnvelope {
    let mut result = ToolResultEnvelope::begin(call);
    result.status = Status::Failed;
    result.outcome = outcome;
    result.error = Some(ErrorBody::new(kind, outcome.as_str(), message, false));
    result
}
