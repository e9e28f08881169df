//! 2026-07-28 calls whose adapter asks its caller something (elicitation, sampling, roots):
//! the protocol has no requests from server to client, so the request ends with an
//! `InputRequiredResult` naming what is asked, and the client's retry carries the answers
//! (`inputResponses`) and the gateway's signed `requestState`. Meanwhile the call is not run
//! again: it waits, held in this gateway, for its answers, so a call has one effect across
//! every round.
//!
//! 1. A call's first request runs it with a relay ([`super::super::relay`]). An ask the
//!    request's own `inputResponses` already answers (under the ask's key) is answered at once;
//!    any other ends the round: the call is held ([`Held`]) and the client gets the asks as
//!    `inputRequests` and a state sealed to the caller, the tool, the arguments and the key,
//!    naming the held call and the round ([`Resumes::Held`]: each round's state differs).
//! 2. The retry's state opens only for the same caller and request; its answers go to the asks
//!    waiting, and the call goes on to its result or its next round. An answer that is not one
//!    (not an object, or an elicitation answer without an `action`) counts as missing: that ask
//!    is asked again.
//! 3. A call held longer than `[mcp] input_wait_ms` is let go: its asks fail, the adapter gets
//!    the error and finishes, and its record is kept like any call's; the state then resumes
//!    nothing (-32602). So does a state that reaches another gateway, or this one after a
//!    restart.
//!
//! Progress and log lines ride the request's response: as soon as there is one, the answer is
//! an event stream, with the request's answer as its last event.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_host::relay::{Ask, AskError, AskKind};
use rmcp::ErrorData;
use rmcp::model::{InputResponses, JsonObject};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::mcp::approvals::{Approvals, Resumes, Sent};
use crate::mcp::call::Gateway;
use crate::mcp::caller::Caller;
use crate::mcp::relay::{CallRelay, Event};
use crate::mcp::tasks;

/// A call's run: its result, when it has one.
pub type Run = JoinHandle<Result<ToolResultEnvelope, ErrorData>>;

/// The most calls held in this gateway at once; past it a new call that asks something gets
/// its asks refused (the adapter sees an error), not held.
pub const MOST_HELD: usize = 1_000;

/// How long a round waits for the next of several asks handed over together (see
/// [`Running::gather`]) before it ends with the asks it has.
const TOGETHER: Duration = Duration::from_millis(20);

/// A call in progress across rounds.
pub struct Running {
    run: Run,
    events: mpsc::Receiver<Event>,
    /// Asks waiting for the client's answer, by key.
    waiting: BTreeMap<String, (Ask, oneshot::Sender<Result<Value, AskError>>)>,
    /// Notifications received while gathering asks, sent at the next step.
    told: VecDeque<Value>,
    round: u32,
    /// When the round's client stops waiting and the call goes on as a task, if it may.
    deadline: Option<Instant>,
    /// Its relay, through which it is cancelled.
    relay: Option<Arc<CallRelay>>,
}

/// How far a round got.
pub enum Step {
    /// The call ended.
    Done(Box<Result<Result<ToolResultEnvelope, ErrorData>, tokio::task::JoinError>>),
    /// It told its caller something, to send now; the round goes on.
    Notify(Value, Box<Running>),
    /// It waits for answers the request did not carry.
    Input(Box<Running>),
    /// It is still running at the round's deadline ([`Running::until`]).
    Late(Box<Running>),
}

impl Running {
    /// A call started with a relay whose events are `events`.
    pub fn new(run: Run, events: mpsc::Receiver<Event>) -> Self {
        Self {
            run,
            events,
            waiting: BTreeMap::new(),
            told: VecDeque::new(),
            round: 0,
            deadline: None,
            relay: None,
        }
    }

    /// The call, cancelled through `relay` (its own) when its caller hangs up or cancels its
    /// task.
    #[must_use]
    pub fn cancelled_through(mut self, relay: Arc<CallRelay>) -> Self {
        self.relay = Some(relay);
        self
    }

    /// What cancels the call, if it can be.
    pub fn canceller(&self) -> Option<Arc<CallRelay>> {
        self.relay.clone()
    }

    /// Sets when this round ends with [`Step::Late`] if the call is still running then (and
    /// not waiting for answers): the client takes tasks, and the tool runs as one.
    pub fn until(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Runs the call on until it ends, tells its caller something, or waits for an answer that
    /// `responses` (the request's `inputResponses`) does not hold.
    pub async fn step(mut self: Box<Self>, responses: &mut InputResponses) -> Step {
        if let Some(message) = self.told.pop_front() {
            return Step::Notify(message, self);
        }
        let keys: Vec<String> = self.waiting.keys().cloned().collect();
        for key in keys {
            if let Some(answer) = take(responses, &key, self.waiting[&key].0.kind)
                && let Some((_, answer_to)) = self.waiting.remove(&key)
            {
                let _ = answer_to.send(Ok(answer));
            }
        }
        if !self.waiting.is_empty() {
            return Step::Input(self);
        }
        let deadline = self.deadline;
        let late = async move {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(late);
        loop {
            tokio::select! {
                // Events first: what the call told its caller before it ended is sent.
                biased;
                event = self.events.recv() => match event {
                    Some(Event::Notify(message)) => return Step::Notify(message, self),
                    Some(Event::Ask(ask, answer_to)) => {
                        match take(responses, &ask.key, ask.kind) {
                            Some(answer) => {
                                let _ = answer_to.send(Ok(answer));
                            }
                            None => {
                                self.waiting.insert(ask.key.clone(), (ask, answer_to));
                                self.gather(responses).await;
                                return Step::Input(self);
                            }
                        }
                    }
                    // The relay is gone: the call is about to end.
                    None => return Step::Done(Box::new((&mut self.run).await)),
                },
                joined = &mut self.run => return Step::Done(Box::new(joined)),
                () = &mut late => {
                    self.deadline = None;
                    return Step::Late(self);
                }
            }
        }
    }

    /// The asks that come right behind an unanswered one (an adapter's `ask-all` hands them
    /// over together, microseconds apart), gathered into the same round: each event that
    /// arrives within [`TOGETHER`] of the last. A notification among them waits for the next
    /// step.
    async fn gather(&mut self, responses: &mut InputResponses) {
        while let Ok(Some(event)) = tokio::time::timeout(TOGETHER, self.events.recv()).await {
            match event {
                Event::Ask(ask, answer_to) => match take(responses, &ask.key, ask.kind) {
                    Some(answer) => {
                        let _ = answer_to.send(Ok(answer));
                    }
                    None => {
                        self.waiting.insert(ask.key.clone(), (ask, answer_to));
                    }
                },
                Event::Notify(message) => self.told.push_back(message),
            }
        }
    }

    /// Fails the asks waiting: nobody answered them in time.
    fn let_go(&mut self) {
        self.waiting.clear();
    }

    /// The asks waiting, as `inputRequests`: each with its params as the adapter wrote them
    /// (rmcp's typed `InputRequest` would drop what it does not model).
    pub fn requests(&self) -> JsonObject {
        self.waiting
            .iter()
            .map(|(key, (ask, _))| {
                let request = json!({ "method": ask.kind.method(), "params": ask.params });
                (key.clone(), request)
            })
            .collect()
    }
}

/// The answer to an ask of `kind` under `key`, taken from `responses` if it is one.
fn take(responses: &mut InputResponses, key: &str, kind: AskKind) -> Option<Value> {
    let answer = responses.remove(key)?;
    let valid = match kind {
        AskKind::Elicitation => answer.get("action").is_some_and(Value::is_string),
        AskKind::Sampling => answer.get("content").is_some(),
        AskKind::Roots => answer.get("roots").is_some_and(Value::is_array),
    };
    valid.then_some(answer)
}

/// The calls held in this gateway, by id, and how long each is held; and the calls running
/// here as tasks, by task id.
pub struct Held {
    calls: Mutex<HashMap<String, (Caller, Box<Running>)>>,
    wait: Duration,
    tasks: Mutex<HashMap<String, Live>>,
    task_after: Duration,
}

/// A call running as a task in this gateway: whose it is, what its adapter waits for, and how
/// `tasks/update` and `tasks/cancel` reach the loop that drives it ([`Held::run_as_task`]).
struct Live {
    caller: Caller,
    /// The asks waiting for `tasks/update`, as `inputRequests`; empty while it runs.
    pending: JsonObject,
    to_driver: mpsc::UnboundedSender<Update>,
}

/// What reaches a task's driver.
enum Update {
    /// Answers to its asks, by key.
    Answers(InputResponses),
    /// `tasks/cancel`: stop waiting for the call.
    Cancel,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").finish_non_exhaustive()
    }
}

impl Held {
    /// Holding each call at most `wait` (`[mcp] input_wait_ms`); a call that may run as a task
    /// goes on as one once it ran `task_after` (`[mcp] task_after_ms`).
    pub fn new(wait: Duration, task_after: Duration) -> Self {
        Self {
            calls: Mutex::default(),
            wait,
            tasks: Mutex::default(),
            task_after,
        }
    }

    /// When a round of a call that may run as a task, starting now, goes on as one: `None`
    /// while this gateway runs as many tasks as it may ([`MOST_HELD`]).
    pub fn task_deadline(&self) -> Option<Instant> {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        (tasks.len() < MOST_HELD).then(|| Instant::now() + self.task_after)
    }

    /// Runs `running` on as task `task` of `caller` (its store row made: see
    /// [`tasks::running`]), until it ends, and stores how: its asks make the task
    /// `input_required`, with the asks as its `inputRequests`, until `tasks/update` answers
    /// them all ([`Held::answer`]), or `[mcp] input_wait_ms` passes (then the asks fail, and
    /// the adapter finishes with that); `tasks/cancel` ([`Held::cancel`]) cancels the call (the
    /// host stops waiting on its upstream, and tells a stdio server so) and stops the waiting:
    /// the asks fail, the call's run goes on to its end unwatched (its audit record is written
    /// as any call's), and the task stays cancelled. Progress and log lines have nobody to
    /// reach.
    pub fn run_as_task(
        self: &Arc<Self>,
        gateway: Gateway,
        caller: Caller,
        task: String,
        running: Box<Running>,
    ) {
        let (to_driver, updates) = mpsc::unbounded_channel();
        let live = Live {
            caller,
            pending: JsonObject::new(),
            to_driver,
        };
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task.clone(), live);
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let ended = this.drive(&gateway, &task, running, updates).await;
            this.tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&task);
            if let Some(ended) = ended
                && let Err(error) = tasks::settle(gateway.host(), &task, ended).await
            {
                tracing::warn!(%task, %error, "a task's result could not be stored");
            }
        });
    }

    /// The loop of [`Held::run_as_task`]: how the call ended, or `None` if it was cancelled.
    async fn drive(
        &self,
        gateway: &Gateway,
        task: &str,
        mut running: Box<Running>,
        mut updates: mpsc::UnboundedReceiver<Update>,
    ) -> Option<Result<ToolResultEnvelope, String>> {
        let mut responses = InputResponses::new();
        let mut queued = InputResponses::new();
        loop {
            let canceller = running.canceller();
            let step = {
                let step = running.step(&mut responses);
                tokio::pin!(step);
                loop {
                    tokio::select! {
                        step = &mut step => break step,
                        update = updates.recv() => match update {
                            // Answers that came behind others, while the call took those.
                            Some(Update::Answers(answers)) => queued.extend(answers),
                            // Cancelled: the call is told (the host stops waiting on its
                            // upstream and tells it), and is no longer watched (the step, and
                            // with it the asks, drop).
                            Some(Update::Cancel) | None => {
                                if let Some(relay) = &canceller {
                                    relay.cancel_call();
                                }
                                return None;
                            }
                        },
                    }
                }
            };
            responses.append(&mut queued);
            running = match step {
                Step::Notify(_, running) | Step::Late(running) => running,
                Step::Done(joined) => {
                    return Some(match *joined {
                        Ok(Ok(result)) => Ok(result),
                        Ok(Err(error)) => Err(error.message.to_string()),
                        Err(error) => {
                            tracing::error!(%error, %task, "a task's call failed inside the gateway");
                            Err("the call failed inside the gateway".to_owned())
                        }
                    });
                }
                Step::Input(mut running) => {
                    let requests = running.requests();
                    let answered = requests.keys().any(|key| responses.contains_key(key));
                    self.set_pending(task, requests);
                    // Unless answered already (the answers came while it ran): wait for them.
                    if !answered {
                        if let Err(error) = tasks::waits(gateway.host(), task, true).await {
                            tracing::warn!(%task, %error, "a task's status could not be stored");
                        }
                        // At most `[mcp] input_wait_ms`, as a held call: then its asks fail,
                        // and the adapter finishes with that.
                        match tokio::time::timeout(self.wait, updates.recv()).await {
                            Ok(Some(Update::Answers(answers))) => responses.extend(answers),
                            Ok(Some(Update::Cancel) | None) => return None,
                            Err(_) => {
                                running.let_go();
                                self.set_pending(task, JsonObject::new());
                            }
                        }
                    }
                    if !self.still_waits(task)
                        && let Err(error) = tasks::waits(gateway.host(), task, false).await
                    {
                        tracing::warn!(%task, %error, "a task's status could not be stored");
                    }
                    running
                }
            };
        }
    }

    /// What task `task` of `caller` waits for, if it runs here: empty while it runs.
    pub fn waits_for(&self, caller: &Caller, task: &str) -> Option<JsonObject> {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let live = tasks.get(task).filter(|live| live.caller == *caller)?;
        Some(live.pending.clone())
    }

    /// Whether task `task` runs here and still waits for answers.
    fn still_waits(&self, task: &str) -> bool {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.get(task).is_some_and(|live| !live.pending.is_empty())
    }

    /// Task `task` now waits for `requests`.
    fn set_pending(&self, task: &str, requests: JsonObject) {
        if let Some(live) = self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(task)
        {
            live.pending = requests;
        }
    }

    /// `tasks/update`: hands `answers` to the asks of task `task` of `caller` waiting for
    /// them. A subset may come at once (the rest stay pending); answers to what it does not
    /// wait for, or to a task not running here, are ignored.
    pub fn answer(&self, caller: &Caller, task: &str, answers: InputResponses) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(live) = tasks.get_mut(task).filter(|live| live.caller == *caller) else {
            return;
        };
        let answered: InputResponses = answers
            .into_iter()
            .filter(|(key, _)| live.pending.remove(key).is_some())
            .collect();
        if !answered.is_empty() {
            let _ = live.to_driver.send(Update::Answers(answered));
        }
    }

    /// `tasks/cancel` of task `task`, if it runs here: its driver stops waiting for it.
    pub fn cancel(&self, task: &str) {
        if let Some(live) = self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(task)
        {
            let _ = live.to_driver.send(Update::Cancel);
        }
    }

    /// How long a call is held.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Holds `running` for `caller` until its retry, at most `wait`: its `requestState`.
    pub fn hold(
        self: &Arc<Self>,
        approvals: &Approvals,
        caller: &Caller,
        sent: &Sent<'_>,
        id: Option<String>,
        mut running: Box<Running>,
        wait: Duration,
    ) -> Result<(String, JsonObject), ErrorData> {
        running.round += 1;
        let round = running.round;
        let requests = running.requests();
        let id = id.unwrap_or_else(|| format!("held-{}", gatehouse_core::ids::random_hex(16)));
        {
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            if calls.len() >= MOST_HELD {
                return Err(ErrorData::internal_error(
                    "the gateway holds as many calls waiting for answers as it may; retry later",
                    None,
                ));
            }
            calls.insert(id.clone(), (caller.clone(), running));
        }
        // Let go past the wait: the asks' senders drop with it, and the adapter gets an error.
        let (this, held) = (Arc::clone(self), id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let mut calls = this.calls.lock().unwrap_or_else(PoisonError::into_inner);
            if calls
                .get(&held)
                .is_some_and(|(_, running)| running.round == round)
            {
                calls.remove(&held);
            }
        });
        let state = approvals.seal_state(caller, sent, &Resumes::Held { held: id, round }, wait);
        Ok((state, requests))
    }

    /// Takes the call `id` back for `caller`, at `round` (the state's: an older round's state
    /// resumes nothing).
    pub fn resume(
        &self,
        caller: &Caller,
        id: &str,
        round: u32,
    ) -> Result<(String, Box<Running>), ErrorData> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        match calls.get(id) {
            Some((owner, running)) if owner == caller && running.round == round => {
                let (_, running) = calls
                    .remove(id)
                    .unwrap_or_else(|| unreachable!("just found"));
                Ok((id.to_owned(), running))
            }
            _ => Err(ErrorData::invalid_params(
                "the call this requestState resumes is not held by this gateway: it finished, waited past `[mcp] input_wait_ms`, or another gateway (or this one before a restart) holds it; call again without requestState to run it anew",
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gatehouse_core::envelope::ToolCallEnvelope;
    use gatehouse_host::relay::Relay;

    use super::*;
    use crate::mcp::relay::{Wants, channel};

    fn approvals() -> Approvals {
        Approvals::new(&[9; 32], Duration::from_secs(1), Vec::new()).unwrap()
    }

    /// A call that asks `user_name`, then `color`, and answers with what it got.
    fn asking_call() -> Box<Running> {
        let (relay, events) = channel(Wants::default());
        let run = tokio::spawn(async move {
            let mut got = Vec::new();
            for key in ["user_name", "color"] {
                let ask = Ask {
                    key: key.to_owned(),
                    kind: AskKind::Elicitation,
                    params: json!({ "message": key }),
                };
                got.push(relay.ask(ask).await.map_err(|e| e.to_string()));
            }
            let call = ToolCallEnvelope::new("t", "a.b", json!({}));
            let mut result = ToolResultEnvelope::begin(&call);
            result.structured_content = Some(json!(format!("{got:?}")));
            Ok(result)
        });
        Box::new(Running::new(run, events))
    }

    #[tokio::test]
    async fn a_call_is_held_between_rounds_and_each_rounds_state_resumes_it_once() {
        let (approvals, held) = (
            approvals(),
            Arc::new(Held::new(
                Duration::from_secs(60),
                Duration::from_millis(500),
            )),
        );
        let caller = crate::mcp::caller::caller("acme", "alice".to_owned());
        let args = JsonObject::new();
        let sent = Sent {
            tool: "t",
            args: &args,
            key: None,
        };
        let mut none = InputResponses::new();
        let Step::Input(running) = asking_call().step(&mut none).await else {
            panic!("the first ask ends the round");
        };
        assert_eq!(running.requests().keys().collect::<Vec<_>>(), ["user_name"]);
        let (state, _) = held
            .hold(&approvals, &caller, &sent, None, running, held.wait())
            .unwrap();
        let Resumes::Held { held: id, round } = approvals.open(&state, &caller, &sent).unwrap()
        else {
            panic!("a held call's state");
        };
        assert_eq!(round, 1);
        // Another caller, or a stale round, resumes nothing.
        let bob = crate::mcp::caller::caller("acme", "bob".to_owned());
        assert!(held.resume(&bob, &id, 1).is_err());
        assert!(held.resume(&caller, &id, 0).is_err());
        let (id, running) = held.resume(&caller, &id, 1).unwrap();
        assert!(held.resume(&caller, &id, 1).is_err(), "once");
        // Round 2: the answer is not one (re-asked), then it is; the next ask ends the round.
        let mut bad = InputResponses::new();
        bad.insert("user_name".to_owned(), json!(12345));
        let Step::Input(running) = running.step(&mut bad).await else {
            panic!("asked again");
        };
        let mut good = InputResponses::new();
        good.insert(
            "user_name".to_owned(),
            json!({ "action": "accept", "content": { "name": "Alice" } }),
        );
        let Step::Input(running) = running.step(&mut good).await else {
            panic!("the second ask");
        };
        assert_eq!(running.requests().keys().collect::<Vec<_>>(), ["color"]);
        let (second, _) = held
            .hold(
                &approvals,
                &caller,
                &sent,
                Some(id.clone()),
                running,
                held.wait(),
            )
            .unwrap();
        assert_ne!(second, state, "each round's state differs");
        assert!(
            held.resume(&caller, &id, 1).is_err(),
            "the first round's state is spent"
        );
        let (_, running) = held.resume(&caller, &id, 2).unwrap();
        let mut last = InputResponses::new();
        last.insert(
            "color".to_owned(),
            json!({ "action": "accept", "content": { "color": "blue" } }),
        );
        let Step::Done(joined) = running.step(&mut last).await else {
            panic!("done");
        };
        let result = joined.unwrap().unwrap();
        let got = result.structured_content.unwrap();
        assert!(
            got.as_str().unwrap().contains("Alice") && got.as_str().unwrap().contains("blue"),
            "{got}"
        );
    }

    #[tokio::test]
    async fn a_call_held_past_its_wait_is_let_go_and_its_asks_fail() {
        let (approvals, held) = (
            approvals(),
            Arc::new(Held::new(
                Duration::from_millis(50),
                Duration::from_millis(500),
            )),
        );
        let caller = crate::mcp::caller::caller("acme", "alice".to_owned());
        let args = JsonObject::new();
        let sent = Sent {
            tool: "t",
            args: &args,
            key: None,
        };
        let Step::Input(running) = asking_call().step(&mut InputResponses::new()).await else {
            panic!("asks");
        };
        let (state, _) = held
            .hold(&approvals, &caller, &sent, None, running, held.wait())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(Resumes::Held { held: id, round }) = approvals.open(&state, &caller, &sent) else {
            // The state expired with the wait: nothing resumes either way.
            return;
        };
        assert!(held.resume(&caller, &id, round).is_err());
    }

    #[test]
    fn an_answer_counts_only_in_its_kinds_shape() {
        let mut responses = InputResponses::new();
        responses.insert("a".to_owned(), json!({ "action": "accept", "content": {} }));
        responses.insert("b".to_owned(), json!(12345));
        responses.insert("c".to_owned(), json!({ "roots": [] }));
        responses.insert(
            "d".to_owned(),
            json!({ "role": "assistant", "content": { "type": "text", "text": "x" } }),
        );
        assert!(take(&mut responses, "a", AskKind::Elicitation).is_some());
        assert!(take(&mut responses, "b", AskKind::Elicitation).is_none());
        assert!(take(&mut responses, "c", AskKind::Roots).is_some());
        assert!(take(&mut responses, "d", AskKind::Sampling).is_some());
        assert!(take(&mut responses, "missing", AskKind::Roots).is_none());
    }
}
