//! What a 2025-11-25 client needs remembered between its requests, which a stateless server
//! sees one at a time, in this process:
//!
//! 1. **what a caller declared**: a `tools/call` says nothing of the client, so the
//!    capabilities of a caller's last `initialize` are remembered per caller (tenant and
//!    principal), at most [`REMEMBERED`] callers; a caller not remembered (another gateway saw
//!    its `initialize`, or this one restarted since) is taken to declare nothing, so it gets
//!    the paused result;
//! 2. **a held approval**: a paused `tools/call` from a caller that declared URL elicitation is
//!    answered on an event stream: an `elicitation/create` of the approval's console page
//!    first, then, once an approver decides (within `[mcp] approval_hold_ms`),
//!    `notifications/elicitation/complete` and the call's result (run once), or, past the hold,
//!    the URL elicitation error (-32042) naming the page, for the client to call again later;
//! 3. **the client's answers** to the gateway's requests (those elicitations, and what an
//!    adapter asks during a call: [`crate::mcp::relay`]) come as JSON-RPC responses in POSTs of
//!    their own, matched to the waiting request by id in this process (answered 202), and only
//!    from the caller it was sent to. A decline or an error ends a hold with the paused result;
//!    an answer that reaches another gateway changes nothing, and the hold ends with the
//!    decision or the hold time;
//! 4. **the log level** a caller set (`logging/setLevel`): log lines an adapter writes for its
//!    caller reach it at or above that level; a caller that set none gets none;
//! 5. **the resources a caller subscribed to** (`resources/subscribe`, at most
//!    [`MOST_SUBSCRIBED`] each): its event streams (a `GET`: [`crate::mcp::watch`]) say when
//!    one changes;
//! 6. **the calls a client may cancel**: `initialize` answers with an `Mcp-Session-Id` (a
//!    random name for the client's connection, kept nowhere: any id a client sends is taken,
//!    and none is required), and a `tools/call` that carries one runs cancellable by a
//!    `notifications/cancelled` for its request id from the same caller with the same session
//!    id, while it runs in this process. Cancelling stops the host's waiting on the call's
//!    upstream, which a stdio server hears as its own `notifications/cancelled`; the request
//!    still gets the call's (failed) result, which the client ignores.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use gatehouse_core::envelope::{OutcomeCode, ToolResultEnvelope};
use gatehouse_host::relay::LogLevel;
use http::Response;
use rmcp::model::{JsonObject, RequestId};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::access_log::Note;
use crate::mcp::approvals::{self, ClientCan};
use crate::mcp::call::Gateway;
use crate::mcp::caller::Caller;
use crate::mcp::relay::CallRelay;
use crate::mcp::reply::{self, Body};
use crate::mcp::result::to_mcp;

/// The most callers whose `initialize` capabilities are remembered; past it the memory starts
/// over (a caller forgotten gets the paused result until it initializes again).
pub const REMEMBERED: usize = 10_000;

/// The most resources one caller is subscribed to at once.
pub const MOST_SUBSCRIBED: usize = 100;

/// The prefix of the ids of gatehouse's own requests to clients.
pub const OWN_ID: &str = "gatehouse-";

/// The 2025-11-25 state of one gateway process: remembered capabilities and log levels, and
/// the gateway's requests waiting for their answers.
#[derive(Debug, Default)]
pub struct Session {
    declared: PerCaller<Declared>,
    subscribed: PerCaller<BTreeSet<String>>,
    /// The gateway's requests waiting for an answer, by their (random) id: whose they are, and
    /// where the answer goes.
    waiting: Mutex<HashMap<String, (Caller, oneshot::Sender<Value>)>>,
    /// The calls running for a client that holds a session id (item 6): by caller, session
    /// id and request id, the relay that cancels each.
    cancellable: Mutex<HashMap<CallKey, Arc<CallRelay>>>,
}

/// What a caller declared at its last `initialize`, and the log level it set last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Declared {
    can: ClientCan,
    level: Option<LogLevel>,
}

/// A running call's name for `notifications/cancelled`: its caller (tenant and principal),
/// the session id its client sent, and its request id (as JSON: `1` and `"1"` differ).
type CallKey = (String, String, String, String);

/// A call `notifications/cancelled` can reach while this lives ([`Session::cancellable`]).
#[must_use = "the call is cancellable only while this lives"]
pub struct Cancellable {
    session: Arc<Session>,
    key: CallKey,
    relay: Arc<CallRelay>,
}

impl Drop for Cancellable {
    fn drop(&mut self) {
        let mut calls = (self.session.cancellable.lock()).unwrap_or_else(PoisonError::into_inner);
        if calls
            .get(&self.key)
            .is_some_and(|relay| Arc::ptr_eq(relay, &self.relay))
        {
            calls.remove(&self.key);
        }
    }
}

impl Session {
    /// What the caller declared at its last `initialize` seen here.
    pub fn remembered(&self, caller: &Caller) -> ClientCan {
        self.wants(caller).0
    }

    /// What the caller declared at its last `initialize` seen here, and the log level it set
    /// last, if any: what a `tools/call` reads (at one look).
    pub fn wants(&self, caller: &Caller) -> (ClientCan, Option<LogLevel>) {
        self.declared.read(caller, |declared| {
            let declared = declared.copied().unwrap_or_default();
            (declared.can, declared.level)
        })
    }

    /// Remembers what `caller` declared at `initialize`.
    pub fn remember(&self, caller: &Caller, can: ClientCan) {
        self.declared.write(caller, |declared| declared.can = can);
    }

    /// Remembers the log level `caller` set.
    pub fn set_level(&self, caller: &Caller, level: LogLevel) {
        self.declared
            .write(caller, |declared| declared.level = Some(level));
    }

    /// Subscribes `caller` to the resource at `uri`; `false` past [`MOST_SUBSCRIBED`].
    pub fn subscribe(&self, caller: &Caller, uri: &str) -> bool {
        self.subscribed.write(caller, |uris| {
            if uris.len() >= MOST_SUBSCRIBED && !uris.contains(uri) {
                return false;
            }
            uris.insert(uri.to_owned());
            true
        })
    }

    /// Unsubscribes `caller` from the resource at `uri`.
    pub fn unsubscribe(&self, caller: &Caller, uri: &str) {
        self.subscribed.write(caller, |uris| uris.remove(uri));
    }

    /// The resources `caller` is subscribed to.
    pub fn subscribed(&self, caller: &Caller) -> BTreeSet<String> {
        self.subscribed
            .read(caller, |uris| uris.cloned().unwrap_or_default())
    }

    /// A new id for a request of the gateway's to `caller` (`kind` says what it is), and where
    /// its answer will come: random, so nobody else can answer it by guessing, and only its
    /// caller's answer counts ([`Session::answered`]).
    pub fn expect(&self, caller: &Caller, kind: &str) -> (String, oneshot::Receiver<Value>) {
        let id = format!("{OWN_ID}{kind}-{}", gatehouse_core::ids::random_hex(16));
        let (answer_to, answer) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), (caller.clone(), answer_to));
        (id, answer)
    }

    /// Whether a paused call of `caller` is held on an event stream: it declared URL
    /// elicitation and the approval has a console page. `Some`: the page.
    pub fn holds(
        &self,
        gateway: &Gateway,
        caller: &Caller,
        result: &ToolResultEnvelope,
    ) -> Option<String> {
        if result.outcome != OutcomeCode::ApprovalRequired || !self.remembered(caller).url {
            return None;
        }
        let approval = result.approval_id.as_deref()?;
        gateway.host().approval_url(approval)
    }

    /// The held answer to `caller`'s request `id`, a paused call of `tool` (item 2 of the module
    /// docs): an event stream that elicits `url`, waits for the decision, then runs the call
    /// once.
    #[expect(
        clippy::too_many_arguments,
        reason = "one held request's parts, each used once by the task it starts"
    )]
    pub fn hold(
        self: &Arc<Self>,
        gateway: Gateway,
        caller: &Caller,
        id: RequestId,
        tool: &str,
        paused: ToolResultEnvelope,
        url: String,
        note: Note,
    ) -> Response<Body> {
        let (sender, response) = reply::events();
        tokio::spawn(Arc::clone(self).hold_on(
            sender,
            gateway,
            caller.clone(),
            id,
            tool.to_owned(),
            paused,
            url,
            note,
        ));
        response
    }

    /// [`Session::hold`] on an event stream already open (`sender`): the call's own, where it
    /// told its caller something before it paused.
    #[expect(
        clippy::too_many_arguments,
        reason = "one held request's parts, each used once"
    )]
    pub async fn hold_on(
        self: Arc<Self>,
        sender: mpsc::Sender<Bytes>,
        gateway: Gateway,
        caller: Caller,
        id: RequestId,
        tool: String,
        paused: ToolResultEnvelope,
        url: String,
        note: Note,
    ) {
        let approval_id = paused.approval_id.clone().unwrap_or_default();
        let (own, answer) = self.expect(&caller, "elicitation");
        let message = approvals::url_message(&tool, &approval_id);
        let elicitation = json!({
            "jsonrpc": "2.0",
            "id": own,
            "method": "elicitation/create",
            "params": { "mode": "url", "elicitationId": approval_id, "url": url, "message": message },
        });
        let _ = sender.send(reply::event(&elicitation)).await;
        gateway.held(&approval_id).await;
        let host = gateway.shared_host();
        let until = tokio::time::Instant::now() + gateway.approvals().hold();
        let declined = async {
            match answer.await {
                Ok(answer) if answer.get("action").and_then(Value::as_str) == Some("accept") => {
                    std::future::pending::<()>().await;
                }
                // Declined, cancelled, an error, or dropped: stop holding.
                _ => {}
            }
        };
        let decided = tokio::select! {
            decided = host.await_decision(&approval_id, until) => decided.ok().flatten(),
            () = declined => None,
            // The client hung up: nobody waits here any more (its retry runs the call).
            () = sender.closed() => {
                self.forget(&own);
                return;
            }
        };
        self.forget(&own);
        let last = match decided {
            Some(approval)
                if approval.status != gatehouse_store::ApprovalStatus::Pending
                    || approval.expired(gatehouse_store::now_ms()) =>
            {
                let complete = json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/elicitation/complete",
                    "params": { "elicitationId": approval_id },
                });
                let _ = sender.send(reply::event(&complete)).await;
                let result = match gateway.resume(&approval_id, Some(&note)).await {
                    Ok(Some(result)) => result,
                    _ => paused,
                };
                answer_of(&id, &result)
            }
            Some(_) => {
                let data = json!({
                    "elicitations": [{ "mode": "url", "elicitationId": approval_id, "url": url, "message": message }],
                });
                json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": -32042,
                        "message": format!("{message} Call again once it is approved."),
                        "data": data,
                    },
                })
            }
            None => answer_of(&id, &paused),
        };
        let _ = sender.send(reply::event(&last)).await;
    }

    /// Drops the wait for the answer to request `id` (its caller hung up).
    pub fn forget(&self, id: &str) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Makes `caller`'s call `id`, run with `relay`, cancellable by a `notifications/cancelled`
    /// of the same caller with the same session id (item 6), until the answer is dropped.
    pub fn cancellable(
        self: &Arc<Self>,
        caller: &Caller,
        session_id: &str,
        id: &RequestId,
        relay: &Arc<CallRelay>,
    ) -> Cancellable {
        let key = call_key(caller, session_id, id);
        (self.cancellable.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), Arc::clone(relay));
        Cancellable {
            session: Arc::clone(self),
            key,
            relay: Arc::clone(relay),
        }
    }

    /// `notifications/cancelled` from `caller` with `session_id`: cancels its call
    /// `params.requestId`, if one runs here; `false`: none does (it ended, it runs on another
    /// gateway, or it is someone else's).
    pub fn cancelled(&self, caller: &Caller, session_id: &str, params: &JsonObject) -> bool {
        let Some(id) = (params.get("requestId").cloned())
            .and_then(|id| serde_json::from_value::<RequestId>(id).ok())
        else {
            return false;
        };
        let key = call_key(caller, session_id, &id);
        let relay = (self.cancellable.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        let Some(relay) = relay else {
            return false;
        };
        let reason = params.get("reason").and_then(Value::as_str).unwrap_or("");
        tracing::info!(request = %key.3, reason, "the client cancelled its call");
        relay.cancel_call();
        true
    }

    /// Delivers `caller`'s answer to the request of the gateway's with this id; `false`: none
    /// of `caller`'s requests here has that id (another caller's answer is dropped).
    pub fn answered(&self, caller: &Caller, id: &RequestId, answer: Value) -> bool {
        let RequestId::String(id) = id else {
            return false;
        };
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting
            .get(id.as_ref())
            .is_some_and(|(owner, _)| owner == caller)
            && let Some((_, waiting)) = waiting.remove(id.as_ref())
        {
            let _ = waiting.send(answer);
            return true;
        }
        false
    }
}

fn call_key(caller: &Caller, session_id: &str, id: &RequestId) -> CallKey {
    (
        caller.tenant.clone(),
        caller.principal.id.clone(),
        session_id.to_owned(),
        serde_json::to_string(id).unwrap_or_default(),
    )
}

/// What is kept per caller (its tenant, then its principal): read without allocating, as every
/// `tools/call` reads it; at most [`REMEMBERED`] callers, past which it starts over.
#[derive(Debug)]
struct PerCaller<V>(Mutex<Callers<V>>);

#[derive(Debug)]
struct Callers<V> {
    by_tenant: HashMap<String, HashMap<String, V>>,
    /// How many callers `by_tenant` holds.
    callers: usize,
}

impl<V> Default for PerCaller<V> {
    fn default() -> Self {
        Self(Mutex::new(Callers {
            by_tenant: HashMap::new(),
            callers: 0,
        }))
    }
}

impl<V: Default> PerCaller<V> {
    /// What `read` makes of `caller`'s value (`None`: it has none).
    fn read<R>(&self, caller: &Caller, read: impl FnOnce(Option<&V>) -> R) -> R {
        let callers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        read(
            (callers.by_tenant.get(&caller.tenant))
                .and_then(|principals| principals.get(&caller.principal.id)),
        )
    }

    /// What `write` makes of `caller`'s value, which it may change (from the default, if the
    /// caller has none yet). A value left at its default is forgotten.
    fn write<R>(&self, caller: &Caller, write: impl FnOnce(&mut V) -> R) -> R
    where
        V: PartialEq,
    {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let callers = &mut *guard;
        let known = (callers.by_tenant.get(&caller.tenant))
            .is_some_and(|principals| principals.contains_key(&caller.principal.id));
        if !known && callers.callers >= REMEMBERED {
            callers.by_tenant.clear();
            callers.callers = 0;
        }
        let principals = callers.by_tenant.entry(caller.tenant.clone()).or_default();
        let value = principals.entry(caller.principal.id.clone()).or_default();
        let written = write(value);
        let forget = *value == V::default();
        if forget {
            principals.remove(&caller.principal.id);
            if principals.is_empty() {
                callers.by_tenant.remove(&caller.tenant);
            }
        }
        callers.callers = callers.callers + usize::from(!known) - usize::from(forget);
        written
    }

    /// How many callers it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .callers
    }
}

/// The JSON-RPC response to `id` carrying `result` as a tool result.
pub(super) fn answer_of(id: &RequestId, result: &ToolResultEnvelope) -> Value {
    match to_mcp(result) {
        Ok(mcp) => json!({ "jsonrpc": "2.0", "id": id, "result": mcp }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::caller::caller;

    #[test]
    fn memory_is_per_caller_and_bounded() {
        let session = Session::default();
        let alice = caller("acme", "alice".into());
        let bob = caller("acme", "bob".into());
        let can = ClientCan {
            url: true,
            form: true,
            ..ClientCan::default()
        };
        session.remember(&alice, can);
        assert_eq!(session.remembered(&alice), can);
        assert_eq!(session.remembered(&bob), ClientCan::default());
        for n in 0..REMEMBERED {
            session.remember(&caller("t", format!("p{n}")), can);
        }
        assert!(session.declared.len() <= REMEMBERED);

        // Past the bound the memory started over: alice is forgotten.
        assert_eq!(session.remembered(&alice), ClientCan::default());

        // Each kind of memory is its own; what is back at its default is forgotten.
        let session = Session::default();
        session.remember(&alice, can);
        assert_eq!(session.wants(&alice), (can, None));
        session.set_level(&alice, LogLevel::Warning);
        assert_eq!(session.wants(&alice), (can, Some(LogLevel::Warning)));
        session.remember(&alice, ClientCan::default());
        assert_eq!(
            session.wants(&alice),
            (ClientCan::default(), Some(LogLevel::Warning))
        );
        assert_eq!(session.wants(&bob), (ClientCan::default(), None));
        assert!(session.subscribe(&bob, "file:///a"));
        assert_eq!(session.subscribed(&bob).len(), 1);
        assert!(session.subscribed(&alice).is_empty());
        session.unsubscribe(&bob, "file:///a");
        assert_eq!(session.subscribed.len(), 0);
        for n in 0..MOST_SUBSCRIBED {
            assert!(session.subscribe(&bob, &format!("file:///{n}")));
        }
        assert!(!session.subscribe(&bob, "file:///one-more"));
        assert!(session.subscribe(&bob, "file:///0"), "already subscribed");
    }

    #[test]
    fn only_its_callers_answer_reaches_a_hold() {
        let session = Session::default();
        let alice = caller("acme", "alice".into());
        let bob = caller("acme", "bob".into());
        let (to, mut answer) = oneshot::channel();
        let id = "gatehouse-elicitation-0f";
        session
            .waiting
            .lock()
            .unwrap()
            .insert(id.to_owned(), (alice.clone(), to));
        let request = RequestId::String(id.into());
        assert!(!session.answered(&bob, &request, json!({ "action": "decline" })));
        assert!(answer.try_recv().is_err(), "bob's answer is dropped");
        assert!(session.answered(&alice, &request, json!({ "action": "accept" })));
        assert_eq!(answer.try_recv().unwrap()["action"], "accept");
    }
}
