//! The agent's answers as the call's: a task's artifacts (or a message's parts) as content
//! blocks, its data parts also as structured content; a task waiting for input as a result
//! that says how to answer; a task that failed, was rejected or cancelled as an error.

use base64::Engine as _;
use gatehouse_sdk::http;
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{Content, ToolError, ToolOutput};

use crate::mapping::Mapping;
use crate::peer::MAX_QUOTE;

/// The text of a task's status message: its text parts, joined by newlines.
pub fn status_text(task: &Value) -> String {
    texts(&task["status"]["message"]["parts"]).join("\n")
}

/// A finished task's result: the parts of its artifacts, in order (or, with no artifact, of
/// its status message), and `{state, task_id, context_id, data}` as structured content.
pub fn completed(task: &Value) -> ToolOutput {
    let artifacts = task["artifacts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut parts: Vec<&Value> = artifacts
        .iter()
        .flat_map(|artifact| {
            artifact["parts"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
        })
        .collect();
    if parts.is_empty() {
        parts.extend(
            task["status"]["message"]["parts"]
                .as_array()
                .into_iter()
                .flatten(),
        );
    }
    let mut structured = ids(task, "completed");
    output(&parts, &mut structured).with_structured(structured)
}

/// An answer that is a message, not a task: its parts.
pub fn message(message: &Value) -> ToolOutput {
    let parts: Vec<&Value> = message["parts"].as_array().into_iter().flatten().collect();
    let mut structured = json!({ "state": "message", "context_id": message["contextId"] });
    output(&parts, &mut structured).with_structured(structured)
}

/// A task waiting for input that nobody was asked (the caller cannot be, or the operator
/// did not let the agent ask it): the question, and how to answer it with another call (one
/// that passes every gate again).
pub fn input_required(task: &Value, question: &str) -> ToolOutput {
    let mut structured = ids(task, "input_required");
    structured["question"] = Value::from(question);
    ToolOutput::text(format!(
        "The agent needs more input: {question}\nTo answer, call this tool again with `task_id` \
         {}, `context_id` {} and your answer as `text`.",
        task["id"], task["contextId"]
    ))
    .with_structured(structured)
}

/// The error of a task that ended in `state` without a result (or stopped for credentials).
pub fn ended(mapping: &Mapping, task: &Value, state: &str) -> ToolError {
    let said = status_text(task);
    let why = if said.is_empty() {
        String::new()
    } else {
        format!(": {}", http::quote(&said, MAX_QUOTE))
    };
    let task_id = &task["id"];
    let skill = &mapping.skill;
    match state {
        "TASK_STATE_FAILED" => ToolError::upstream(
            "A2A_TASK_FAILED",
            format!("the agent's task {task_id} for skill `{skill}` failed{why}"),
        ),
        "TASK_STATE_REJECTED" => ToolError::upstream(
            "A2A_TASK_REJECTED",
            format!("the agent rejected the task {task_id} for skill `{skill}`{why}"),
        ),
        "TASK_STATE_CANCELED" => ToolError::upstream(
            "A2A_TASK_CANCELED",
            format!("the agent's task {task_id} for skill `{skill}` was cancelled{why}"),
        ),
        "TASK_STATE_AUTH_REQUIRED" => ToolError::unavailable(
            "A2A_AUTH_REQUIRED",
            format!("the agent's task {task_id} for skill `{skill}` needs credentials{why}"),
        )
        .with_remediation(
            "ask the operator to grant the agent's credentials in the adapter's [[egress.grant]]",
        ),
        other => ToolError::upstream(
            "A2A_NOT_A2A",
            format!(
                "the A2A agent at {} answered a task {task_id} in state `{other}`, which A2A 1.0 \
                 does not have",
                mapping.url
            ),
        ),
    }
}

/// `{state, task_id, context_id}` of `task`.
fn ids(task: &Value, state: &str) -> Value {
    json!({ "state": state, "task_id": task["id"], "context_id": task["contextId"] })
}

/// The content blocks of `parts`; their data parts also go to `structured["data"]`.
fn output(parts: &[&Value], structured: &mut Value) -> ToolOutput {
    let mut output = ToolOutput::new();
    let mut data = Vec::new();
    for part in parts {
        output = output.with_content(content(part));
        if let Some(value) = part.get("data") {
            data.push(value.clone());
        }
    }
    if !data.is_empty() {
        structured["data"] = Value::Array(data);
    }
    output
}

/// One A2A part (text, data, raw bytes or a URL) as a content block: data as its JSON text,
/// an image or audio file as itself, another file as a line naming it.
fn content(part: &Value) -> Content {
    if let Some(text) = part["text"].as_str() {
        return Content::text(text);
    }
    if let Some(data) = part.get("data") {
        return Content::text(data.to_string());
    }
    let media = part["mediaType"]
        .as_str()
        .unwrap_or("application/octet-stream");
    let name = part["filename"].as_str().unwrap_or("a file");
    if let Some(raw) = part["raw"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(raw);
        return match bytes {
            Ok(bytes) if media.starts_with("image/") => Content::image(bytes, media),
            Ok(bytes) if media.starts_with("audio/") => Content::audio(bytes, media),
            Ok(bytes) => Content::text(format!("[{name} ({media}), {} bytes]", bytes.len())),
            Err(_) => Content::text(format!("[{name} ({media}), not valid base64]")),
        };
    }
    if let Some(url) = part["url"].as_str() {
        return Content::text(format!("[{name} ({media})]: {url}"));
    }
    Content::text(part.to_string())
}

/// The text parts of `parts`.
fn texts(parts: &Value) -> Vec<&str> {
    (parts.as_array().into_iter().flatten())
        .filter_map(|part| part["text"].as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping() -> Mapping {
        Mapping {
            url: "http://127.0.0.1:1/".into(),
            skill: "book".into(),
            streaming: false,
            digest: String::new(),
            card: crate::mapping::CardPin {
                url: String::new(),
                digest: String::new(),
                signer: None,
            },
        }
    }

    #[test]
    fn a_completed_task_gives_its_artifacts_parts() {
        let task = json!({
            "id": "t1", "contextId": "c1",
            "status": { "state": "TASK_STATE_COMPLETED" },
            "artifacts": [
                { "artifactId": "a", "parts": [{ "text": "booked" }, { "data": { "room": 4 } }] },
                { "artifactId": "b", "parts": [{ "url": "https://x/y.pdf", "mediaType": "application/pdf", "filename": "y.pdf" }] },
            ],
        });
        let output = completed(&task);
        assert_eq!(
            output.content,
            [
                Content::text("booked"),
                Content::text(r#"{"room":4}"#),
                Content::text("[y.pdf (application/pdf)]: https://x/y.pdf"),
            ]
        );
        assert_eq!(
            output.structured,
            Some(
                json!({ "state": "completed", "task_id": "t1", "context_id": "c1", "data": [{ "room": 4 }] })
            )
        );
    }

    #[test]
    fn a_task_waiting_for_input_says_how_to_answer() {
        let task = json!({
            "id": "t1", "contextId": "c1",
            "status": { "state": "TASK_STATE_INPUT_REQUIRED",
                        "message": { "role": "ROLE_AGENT", "parts": [{ "text": "Which room?" }] } },
        });
        let question = status_text(&task);
        let output = input_required(&task, &question);
        assert_eq!(
            output.structured.as_ref().unwrap()["question"],
            "Which room?"
        );
        let Content::Text(text) = &output.content[0] else {
            panic!("{output:?}")
        };
        assert!(
            text.contains(r#"`task_id` "t1", `context_id` "c1""#),
            "{text}"
        );
    }

    #[test]
    fn a_task_that_ended_otherwise_is_an_error_quoting_the_agent() {
        let task = json!({
            "id": "t1",
            "status": { "state": "TASK_STATE_FAILED",
                        "message": { "parts": [{ "text": "the room is gone" }] } },
        });
        let error = ended(&mapping(), &task, "TASK_STATE_FAILED");
        assert_eq!(error.code, "A2A_TASK_FAILED");
        assert_eq!(
            error.message,
            r#"the agent's task "t1" for skill `book` failed: the room is gone"#
        );
        let error = ended(&mapping(), &task, "TASK_STATE_BORED");
        assert_eq!(error.code, "A2A_NOT_A2A");
    }
}
