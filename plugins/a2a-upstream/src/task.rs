//! One call's conversation with the agent: the message, the task it starts followed until it
//! ends or stops for input, the caller asked (where it can be) and the task continued.
//!
//! - **Sending.** An agent that streams gets `SendStreamingMessage`: each status update
//!   reaches the caller as progress, artifacts are gathered as they come. Another gets
//!   `SendMessage` with `returnImmediately`, so the task's id is known at once.
//! - **Following.** A task that has not ended (`SUBMITTED`, `WORKING`) is followed:
//!   `SubscribeToTask` where the agent streams, else `GetTask`, first after [`POLL`], each
//!   wait twice the last up to [`MAX_POLL`] (so a long task spends few of the call's egress
//!   requests, `[egress] max_requests`). Nothing here
//!   bounds the wait: the call's time budget does, so a peer that never answers ends the call
//!   as the operator configured, and the audit record says so.
//! - **Input.** A task in `INPUT_REQUIRED` asks the caller its question as a form
//!   (elicitation), and the answer continues the task (`taskId`, `contextId`), at most
//!   [`MAX_ROUNDS`] times. Where nobody can be asked, the call's result is the question and
//!   the task's ids: the caller answers with another call, which passes every gate again.
//! - **Cancellation.** A request the call lost (the caller cancelled the call, or the
//!   connection broke) while a task runs cancels the task: `CancelTask`, the one request the
//!   egress gate still lets out after a cancellation. Best effort: its failure changes nothing.

use std::cell::Cell;
use std::time::Duration;

use gatehouse_sdk::caller::{self, AskError, Request};
use gatehouse_sdk::serde_json::{Map, Value, json};
use gatehouse_sdk::{ToolError, ToolOutput};
use serde::Deserialize;

use crate::mapping::Mapping;
use crate::peer::{Flow, Peer};
use crate::result;

/// Messages one call sends at most: the first, and answers to the agent's questions.
const MAX_ROUNDS: usize = 8;
/// How long a task is left before it is first asked how it stands, where the agent does not
/// stream (or a subscription ended early).
const POLL: Duration = Duration::from_millis(500);
/// The longest wait between two such questions.
const MAX_POLL: Duration = Duration::from_secs(8);
/// The message metadata key that names the skill (A2A has no field for it).
pub const SKILL_KEY: &str = "gatehouse/skill";

/// A call's arguments, as the capability's input schema (`gatehouse import a2a`) has them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// What to ask the agent, as a text part.
    pub text: Option<String>,
    /// Structured input, as a data part.
    pub data: Option<Map<String, Value>>,
    /// The agent's task this message continues (one that asked for input).
    pub task_id: Option<String>,
    /// The conversation it belongs to.
    pub context_id: Option<String>,
}

/// Runs one call: sends `input` to the mapping's skill as message `message_id` (the call's
/// idempotency key, so a retried message is one effect), and follows its task.
pub fn run(mapping: &Mapping, input: Input, message_id: &str) -> Result<ToolOutput, ToolError> {
    if input.text.is_none() && input.data.is_none() {
        return Err(ToolError::validation(
            "A2A_EMPTY_MESSAGE",
            "a message to the agent needs `text`, `data` or both",
        ));
    }
    let call = Conversation {
        mapping,
        peer: Peer::new(&mapping.url),
        updates: Cell::new(0),
    };
    let mut message = user_message(message_id, &mapping.skill, parts(input.text, input.data));
    if let Some(task) = input.task_id {
        message["taskId"] = Value::from(task);
    }
    if let Some(context) = input.context_id {
        message["contextId"] = Value::from(context);
    }
    for round in 1..=MAX_ROUNDS {
        let task = match call.send(&message)? {
            Answer::Message(answer) => return Ok(result::message(&answer)),
            Answer::Task(task) => call.settle(task)?,
        };
        match state(&task) {
            "TASK_STATE_COMPLETED" => return Ok(result::completed(&task)),
            "TASK_STATE_INPUT_REQUIRED" => {
                let question = result::status_text(&task);
                let Some(answer) = ask(&question, round)? else {
                    return Ok(result::input_required(&task, &question));
                };
                let id = format!("{message_id}.{}", round + 1);
                message = user_message(&id, &mapping.skill, parts(Some(answer), None));
                message["taskId"] = task["id"].clone();
                message["contextId"] = task["contextId"].clone();
            }
            other => return Err(result::ended(mapping, &task, other)),
        }
    }
    Err(ToolError::upstream(
        "A2A_TOO_MANY_ROUNDS",
        format!(
            "the agent's skill `{}` asked for input more than {MAX_ROUNDS} times",
            mapping.skill
        ),
    ))
}

/// What the agent answered a message with.
enum Answer {
    /// A task, as it stands.
    Task(Value),
    /// A message: an answer without a task.
    Message(Value),
}

/// One call's requests of the agent.
struct Conversation<'a> {
    mapping: &'a Mapping,
    peer: Peer<'a>,
    /// Status updates passed on to the caller as progress so far.
    updates: Cell<u32>,
}

impl Conversation<'_> {
    /// Sends `message`: the agent's task (or message) as it stands when the answer is whole.
    fn send(&self, message: &Value) -> Result<Answer, ToolError> {
        if !self.mapping.streaming {
            let params =
                json!({ "message": message, "configuration": { "returnImmediately": true } });
            return answer_of(&self.mapping.url, self.peer.call("SendMessage", &params)?);
        }
        let mut task = None;
        let mut reply = None;
        let streamed = self.peer.stream(
            "SendStreamingMessage",
            &json!({ "message": message }),
            &mut |event| {
                if let Some(answer) = event.get("message") {
                    reply = Some(Answer::Message(answer.clone()));
                    return Ok(Flow::Done);
                }
                Ok(self.apply(&mut task, &event))
            },
        );
        if let Err(error) = streamed {
            return Err(self.cancel(task.as_ref(), error));
        }
        match (reply, task) {
            (Some(reply), _) => Ok(reply),
            (None, Some(task)) => Ok(Answer::Task(task)),
            (None, None) => Err(ToolError::upstream(
                "A2A_NOT_A2A",
                format!(
                    "the A2A agent at {} ended its stream without a task or a message",
                    self.mapping.url
                ),
            )),
        }
    }

    /// Follows `task` until it ends or stops for input or credentials: the task then.
    fn settle(&self, task: Value) -> Result<Value, ToolError> {
        let mut task = Some(task);
        let mut wait = POLL;
        let mut pause = || {
            std::thread::sleep(wait);
            wait = (wait * 2).min(MAX_POLL);
        };
        loop {
            let now = task.as_ref().expect("set above and below");
            if settled(state(now)) {
                return Ok(task.expect("checked"));
            }
            let id = json!({ "id": now["id"] });
            let followed = if self.mapping.streaming {
                self.peer.stream("SubscribeToTask", &id, &mut |event| {
                    Ok(self.apply(&mut task, &event))
                })
            } else {
                pause();
                self.peer.call("GetTask", &id).map(|now| {
                    self.tell(&now);
                    task = Some(now);
                })
            };
            if let Err(error) = followed {
                return Err(self.cancel(task.as_ref(), error));
            }
            if self.mapping.streaming && !settled(state(task.as_ref().expect("kept"))) {
                // The subscription ended early: ask once how the task stands, then follow on
                // (after a pause, so an agent that ends every subscription at once is not
                // asked in a loop).
                pause();
                let now = self.peer.call("GetTask", &id);
                task = Some(now.map_err(|error| self.cancel(task.as_ref(), error))?);
            }
        }
    }

    /// Applies one streamed event (a task, a status update, an artifact update) to `task`;
    /// whether to read on.
    fn apply(&self, task: &mut Option<Value>, event: &Value) -> Flow {
        if let Some(snapshot) = event.get("task") {
            *task = Some(snapshot.clone());
        } else if let Some(update) = event.get("statusUpdate") {
            let now = task.get_or_insert_with(
                || json!({ "id": update["taskId"], "contextId": update["contextId"] }),
            );
            now["status"] = update["status"].clone();
            self.tell(now);
        } else if let Some(update) = event.get("artifactUpdate") {
            let now = task.get_or_insert_with(
                || json!({ "id": update["taskId"], "contextId": update["contextId"] }),
            );
            gather(now, &update["artifact"], update["append"] == true);
        }
        match task {
            Some(now) if settled(state(now)) => Flow::Done,
            _ => Flow::More,
        }
    }

    /// Tells the caller how `task` stands, as progress: its status message, or its state.
    fn tell(&self, task: &Value) {
        let said = result::status_text(task);
        let message = if said.is_empty() {
            state(task).to_owned()
        } else {
            said
        };
        self.updates.set(self.updates.get() + 1);
        caller::progress(f64::from(self.updates.get()), None, Some(&message));
    }

    /// `error`, after cancelling `task` at the agent if the request was lost while it runs.
    fn cancel(&self, task: Option<&Value>, error: ToolError) -> ToolError {
        if let Some(task) = task.filter(|t| self.peer.lost() && !settled(state(t))) {
            let _told = self.peer.call("CancelTask", &json!({ "id": task["id"] }));
        }
        error
    }
}

/// A user message `id` to `skill` with `parts`.
fn user_message(id: &str, skill: &str, parts: Vec<Value>) -> Value {
    let mut message =
        json!({ "messageId": id, "role": "ROLE_USER", "metadata": { SKILL_KEY: skill } });
    message["parts"] = Value::Array(parts);
    message
}

/// `text` and `data` as a message's parts.
fn parts(text: Option<String>, data: Option<Map<String, Value>>) -> Vec<Value> {
    let text = text.map(|text| json!({ "text": text }));
    let data = data.map(|data| json!({ "data": data }));
    text.into_iter().chain(data).collect()
}

/// The state of `task`, e.g. `TASK_STATE_WORKING` (empty if it has none).
fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// Whether a task in `state` waits on nobody but the caller: it ended, or stopped for input
/// or credentials. Every other state (`SUBMITTED`, `WORKING`, one A2A 1.0 does not name) is
/// followed.
fn settled(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
    )
}

/// `artifact`, streamed, gathered into `task`: appended to the artifact of the same id when
/// `append`, else in its place (or added).
fn gather(task: &mut Value, artifact: &Value, append: bool) {
    if !task["artifacts"].is_array() {
        task["artifacts"] = json!([]);
    }
    let artifacts = task["artifacts"].as_array_mut().expect("made a list above");
    let same = artifacts
        .iter_mut()
        .find(|a| a["artifactId"] == artifact["artifactId"]);
    match same {
        Some(existing) if append => {
            let more = artifact["parts"].as_array().cloned().unwrap_or_default();
            if let Some(parts) = existing["parts"].as_array_mut() {
                parts.extend(more);
            }
        }
        Some(existing) => *existing = artifact.clone(),
        None => artifacts.push(artifact.clone()),
    }
}

/// `SendMessage`'s result: `{"task": ...}` or `{"message": ...}`.
fn answer_of(url: &str, mut result: Value) -> Result<Answer, ToolError> {
    if let Some(task) = result.get_mut("task").filter(|t| t.is_object()) {
        return Ok(Answer::Task(task.take()));
    }
    if let Some(message) = result.get_mut("message").filter(|m| m.is_object()) {
        return Ok(Answer::Message(message.take()));
    }
    Err(ToolError::upstream(
        "A2A_NOT_A2A",
        format!("the A2A agent at {url} answered `SendMessage` with neither a task nor a message"),
    ))
}

/// Asks the caller the agent's `question` (round `round`) as a form: the answer, or `None`
/// when nobody can be asked (the caller declared no form elicitation, or the operator's
/// `[[caller.grant]]` does not let this adapter ask). A refusal to answer is an error.
fn ask(question: &str, round: usize) -> Result<Option<String>, ToolError> {
    if !caller::can().elicit_form {
        return Ok(None);
    }
    let schema = json!({
        "type": "object",
        "properties": { "answer": { "type": "string", "title": "Your answer" } },
        "required": ["answer"],
    });
    let message = if question.is_empty() {
        "The agent needs more input."
    } else {
        question
    };
    let request = Request::form(format!("input-{round}"), message, schema);
    let reply = match caller::ask(request) {
        Ok(reply) => reply,
        Err(AskError::NotSupported(_) | AskError::Unavailable(_) | AskError::Refused(_)) => {
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    match (
        reply["action"].as_str(),
        reply["content"]["answer"].as_str(),
    ) {
        (Some("accept"), Some(answer)) => Ok(Some(answer.to_owned())),
        (action, _) => Err(ToolError::validation(
            "A2A_INPUT_DECLINED",
            format!(
                "the agent asked \"{question}\" and the user did not answer ({})",
                action.unwrap_or("no action")
            ),
        )
        .with_remediation("call again with the answer as `text`, and the task's `task_id`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_artifact_is_gathered_appended_or_replaced() {
        let mut task = json!({ "id": "t" });
        gather(
            &mut task,
            &json!({ "artifactId": "a", "parts": [{ "text": "one" }] }),
            false,
        );
        gather(
            &mut task,
            &json!({ "artifactId": "a", "parts": [{ "text": "two" }] }),
            true,
        );
        gather(&mut task, &json!({ "artifactId": "b", "parts": [] }), false);
        assert_eq!(
            task["artifacts"],
            json!([
                { "artifactId": "a", "parts": [{ "text": "one" }, { "text": "two" }] },
                { "artifactId": "b", "parts": [] },
            ])
        );
        gather(&mut task, &json!({ "artifactId": "a", "parts": [] }), false);
        assert_eq!(task["artifacts"][0]["parts"], json!([]));
    }

    #[test]
    fn working_tasks_are_followed_and_the_rest_are_not() {
        for waiting in [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "",
            "TASK_STATE_NEW",
        ] {
            assert!(!settled(waiting), "{waiting}");
        }
        assert!(settled("TASK_STATE_INPUT_REQUIRED"));
        assert!(settled("TASK_STATE_REJECTED"));
    }

    #[test]
    fn an_answer_is_a_task_or_a_message() {
        let task = answer_of("u", json!({ "task": { "id": "t" } })).unwrap();
        assert!(matches!(task, Answer::Task(t) if t["id"] == "t"));
        let error = answer_of("u", json!({ "tasks": [] })).err().unwrap();
        assert_eq!(error.code, "A2A_NOT_A2A");
        assert_eq!(parts(Some("hi".into()), None), [json!({ "text": "hi" })]);
    }
}
