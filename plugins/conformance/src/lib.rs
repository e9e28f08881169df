//! `gatehouse.conformance`: the tools the MCP conformance suite
//! (`@modelcontextprotocol/conformance`) calls by fixed name, each answering what its scenario
//! expects. Offline; no capability has an effect.
//!
//! | capability | scenario | returns |
//! |---|---|---|
//! | `test_simple_text` | tools-call-simple-text | one text block |
//! | `test_image_content` | tools-call-image | a 1x1 red PNG |
//! | `test_audio_content` | tools-call-audio | 0.1 s of silence as `audio/wav` |
//! | `test_embedded_resource` | tools-call-embedded-resource | a `text/plain` resource |
//! | `test_multiple_content_types` | tools-call-mixed-content | text, image, JSON resource |
//! | `test_error_handling` | tools-call-error | a tool error |
//! | `json_schema_2020_12_tool` | json-schema-2020-12 | the arguments, as text |
//! | `test_header_param` | http-custom-header-server-validation | `region: <region>` |
//! | `test_tool_with_progress` | tools-call-with-progress | progress 0, 50, 100 of 100 |
//! | `test_tool_with_logging` | tools-call-with-logging | three `info` log lines |
//! | `test_sampling` | tools-call-sampling | the caller's model's answer to `prompt` |
//! | `test_elicitation` | tools-call-elicitation | the user's answer to a form |
//! | `test_elicitation_sep1034_defaults` | elicitation-sep1034-defaults | a form with defaults |
//! | `test_elicitation_sep1330_enums` | elicitation-sep1330-enums | a form of every enum kind |
//! | `test_input_required_result_multiple_inputs` | input-required-result-multiple-input-requests | a form, a sampling request and the roots, asked at once |
//!
//! | `test_input_required_result_elicitation` | input-required-result-basic-elicitation, -result-type, -validate-input | `Hello, <name>!` |
//! | `test_input_required_result_sampling` | input-required-result-basic-sampling | the model's answer |
//! | `test_input_required_result_list_roots` | input-required-result-basic-list-roots | how many roots |
//! | `test_input_required_result_request_state` | input-required-result-request-state | `state-ok` |
//! | `test_input_required_result_multi_round` | input-required-result-multi-round | a name, then a color |
//! | `test_input_required_result_tampered_state` | input-required-result-tampered-state | `state-ok` |
//! | `test_input_required_result_capabilities` | input-required-result-capability-check | what it could ask |
//! | `test_missing_capability`, `test_streaming_elicitation`, `test_logging_tool` | server-stateless | a word; a greeting; three log lines |
//! | `greet` | tasks-* | `Hello, <name>!`, never as a task |
//! | `slow_compute` | tasks-* | after `seconds` s; a task for a client that takes them |
//! | `failing_job` | tasks-* | a tool error after 1 s; a task only (`required`) |
//! | `protocol_error_job` | tasks-lifecycle | a crash (a trap) after 1 s |
//! | `confirm_delete` | tasks-mrtr-input, -dispatch-and-envelope | after 1 s, asks to confirm |
//! | `multi_input` | tasks-mrtr-input | after 1 s, asks two confirmations at once |
//! | `test_tool_with_task` | tasks-mrtr-composition | asks a name, then works 1 s: a task (`required`) |
//!
//! The tools from `test_tool_with_progress` on talk to their caller through the `caller` interface (contract 0.5.0, the
//! manifest's `[caller]` table): progress and log lines reach the caller as notifications, asks
//! as requests to the client (or an `InputRequiredResult`) once the operator grants them
//! (`[[caller.grant]]`). An ask the gateway refuses, or the caller cannot answer, is the
//! tool's error.
//!
//! It serves the suite's resources and prompts too (contract 0.6.0):
//!
//! | resource or prompt | scenario | contents |
//! |---|---|---|
//! | `test://static-text` | resources-read-text | a sentence, `text/plain` |
//! | `test://static-binary` | resources-read-binary | the 1x1 red PNG |
//! | `test://watched-resource` | resources-subscribe, -unsubscribe | a sentence |
//! | `test://template/{id}/data` | resources-templates-read | JSON with the id |
//! | `test_simple_prompt` | prompts-get-simple | one user message |
//! | `test_prompt_with_arguments` | prompts-get-with-args | both arguments in a message |
//! | `test_prompt_with_embedded_resource` | prompts-get-embedded-resource | a resource, then text |
//! | `test_prompt_with_image` | prompts-get-with-image | an image, then text |
//! | `test_input_required_result_prompt` | input-required-result-non-tool-request | asks a context (`user_context`), then one message with it |
//!
//! The suite calls the bare names; gatehouse names tools `gatehouse.conformance.<id>`, so the
//! operator maps them with `[mcp.aliases]` (the `conformance.toml` that
//! `gatehouse demo --export` writes does).

use std::time::Duration;

use gatehouse_sdk::caller::{self, LogLevel, Request};
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{
    Adapter, Call, CallContext, Completion, CompletionRef, Content, EmbeddedResource, Prompt,
    PromptMessage, ToolError, ToolOutput,
};
use serde::Deserialize;

/// A 1x1 red pixel, as PNG.
const RED_PIXEL_PNG: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The error `test_error_handling` always returns.
pub const ERROR_MESSAGE: &str = "This tool intentionally returns an error for testing";

struct Conformance;

impl Adapter for Conformance {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "test_simple_text" => Ok(ToolOutput::text(
                "This is a simple text response for testing.",
            )),
            "test_image_content" => {
                Ok(ToolOutput::new().with_content(Content::image(RED_PIXEL_PNG, "image/png")))
            }
            "test_audio_content" => {
                Ok(ToolOutput::new().with_content(Content::audio(silence_wav(), "audio/wav")))
            }
            "test_embedded_resource" => Ok(ToolOutput::new().with_content(Content::Resource(
                EmbeddedResource::text(
                    "test://embedded-resource",
                    "This is an embedded resource content.",
                )
                .with_mime_type("text/plain"),
            ))),
            "test_multiple_content_types" => Ok(ToolOutput::text("Multiple content types test:")
                .with_content(Content::image(RED_PIXEL_PNG, "image/png"))
                .with_content(Content::Resource(
                    EmbeddedResource::text(
                        "test://mixed-content-resource",
                        r#"{"test":"data","value":123}"#,
                    )
                    .with_mime_type("application/json"),
                ))),
            "test_error_handling" => Err(ToolError::internal("TEST_ERROR", ERROR_MESSAGE)),
            "json_schema_2020_12_tool" => Ok(ToolOutput::text(format!(
                "received: {}",
                call.args_value()?
            ))),
            "test_header_param" => {
                let args: RegionArgs = call.args()?;
                Ok(ToolOutput::text(format!("region: {}", args.region)))
            }
            "test_tool_with_progress" => {
                for step in [0.0, 50.0, 100.0] {
                    caller::progress(
                        step,
                        Some(100.0),
                        Some(&format!("Completed step {step} of 100")),
                    );
                }
                Ok(ToolOutput::text("Progress reported: 0, 50 and 100 of 100"))
            }
            "test_tool_with_logging" => {
                for line in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    caller::notify(LogLevel::Info, Some("conformance"), &json!(line));
                }
                Ok(ToolOutput::text("Tool with logging executed successfully"))
            }
            "test_sampling" => {
                #[derive(Deserialize)]
                struct Args {
                    prompt: String,
                }
                let args: Args = call.args()?;
                let answer = caller::ask(Request::sample("sample", &args.prompt, 100))?;
                let text = answer["content"]["text"].as_str().unwrap_or_default();
                Ok(ToolOutput::text(format!("LLM response: {text}")))
            }
            "test_elicitation" => {
                #[derive(Deserialize)]
                struct Args {
                    message: String,
                }
                let args: Args = call.args()?;
                let answer = caller::ask(Request::form(
                    "user_info",
                    &args.message,
                    json!({
                        "type": "object",
                        "properties": {
                            "username": { "type": "string", "description": "Your user name" },
                            "email": { "type": "string", "description": "Your email address" }
                        },
                        "required": ["username", "email"]
                    }),
                ))?;
                Ok(ToolOutput::text(format!("User response: {answer}")))
            }
            "test_elicitation_sep1034_defaults" => elicited(Request::form(
                "defaults",
                "Please review and update the form fields with defaults",
                sep1034_schema(),
            )),
            "test_elicitation_sep1330_enums" => elicited(Request::form(
                "enums",
                "Please choose from each list",
                sep1330_schema(),
            )),
            "test_input_required_result_multiple_inputs" => {
                let [name, greeting, roots] = asked_together()?;
                let name = name["content"]["name"].as_str().unwrap_or("unknown");
                let greeting = greeting["content"]["text"]
                    .as_str()
                    .unwrap_or("Hello there!");
                let roots = roots["roots"].as_array().map_or(0, Vec::len);
                Ok(ToolOutput::text(format!(
                    "Name: {name}; Greeting: {greeting}; Roots: {roots}"
                )))
            }
            "test_input_required_result_elicitation" | "test_streaming_elicitation" => {
                if call.capability() == "test_streaming_elicitation" {
                    caller::notify(LogLevel::Info, Some("conformance"), &json!("asking a name"));
                }
                let name = ask_name("user_name")?;
                Ok(ToolOutput::text(format!("Hello, {name}!")))
            }
            "test_input_required_result_sampling" => {
                let answer = caller::ask(Request::sample(
                    "sample_request",
                    "What is the capital of France?",
                    100,
                ))?;
                let text = answer["content"]["text"].as_str().unwrap_or_default();
                Ok(ToolOutput::text(format!("LLM response: {text}")))
            }
            "test_input_required_result_list_roots" => {
                let answer = caller::ask(Request::roots("roots"))?;
                let roots = answer["roots"].as_array().map_or(0, Vec::len);
                Ok(ToolOutput::text(format!("Roots: {roots}")))
            }
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let answer = caller::ask(Request::form(
                    "confirm",
                    "Confirm to go on",
                    json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }),
                ))?;
                Ok(ToolOutput::text(format!(
                    "state-ok: {}",
                    answer["content"]["ok"]
                )))
            }
            "test_input_required_result_multi_round" => {
                let name = ask_name("user_name")?;
                let answer = caller::ask(Request::form(
                    "favorite_color",
                    "What is your favorite color?",
                    json!({ "type": "object", "properties": { "color": { "type": "string" } }, "required": ["color"] }),
                ))?;
                let color = answer["content"]["color"].as_str().unwrap_or("none");
                Ok(ToolOutput::text(format!(
                    "Hello, {name}: your color is {color}"
                )))
            }
            "test_input_required_result_capabilities" => {
                let can = caller::can();
                let mut requests = Vec::new();
                if can.elicit_form {
                    requests.push(name_form("user_name"));
                }
                if can.sample {
                    requests.push(Request::sample("word", "Say one word.", 10));
                }
                let answers = caller::ask_all(requests);
                Ok(ToolOutput::text(format!(
                    "Answered: {}",
                    answers.iter().filter(|a| a.is_ok()).count()
                )))
            }
            "test_missing_capability" => {
                let answer = caller::ask(Request::sample("word", "Say one word.", 10))?;
                let text = answer["content"]["text"].as_str().unwrap_or_default();
                Ok(ToolOutput::text(format!("LLM response: {text}")))
            }
            "test_logging_tool" => {
                for line in ["first", "second", "third"] {
                    caller::notify(LogLevel::Info, Some("conformance"), &json!(line));
                }
                Ok(ToolOutput::text("Logged three lines"))
            }
            "greet" => {
                let args: NameArgs = call.args()?;
                Ok(ToolOutput::text(format!("Hello, {}!", args.name)))
            }
            "slow_compute" => {
                let args: ComputeArgs = call.args()?;
                std::thread::sleep(Duration::from_secs(args.seconds));
                Ok(ToolOutput::text(format!(
                    "Computed {} in {} s",
                    args.label, args.seconds
                )))
            }
            "failing_job" => {
                std::thread::sleep(Duration::from_secs(1));
                Err(ToolError::internal(
                    "JOB_FAILED",
                    "the job failed, as it always does",
                ))
            }
            "protocol_error_job" => {
                std::thread::sleep(Duration::from_secs(1));
                panic!("protocol_error_job crashes, as it always does")
            }
            "confirm_delete" => {
                #[derive(Deserialize)]
                struct Args {
                    filename: String,
                }
                let args: Args = call.args()?;
                // The lookup it stands for takes a while: past `[mcp] task_after_ms`, so a
                // client that takes tasks is asked on the task.
                std::thread::sleep(Duration::from_secs(1));
                let answer = caller::ask(confirm_form("confirm", &args.filename))?;
                Ok(ToolOutput::text(format!(
                    "{} {}",
                    if confirmed(&answer) {
                        "Deleted"
                    } else {
                        "Kept"
                    },
                    args.filename
                )))
            }
            "multi_input" => {
                std::thread::sleep(Duration::from_secs(1));
                let answers = caller::ask_all(vec![
                    confirm_form("first", "a.txt"),
                    confirm_form("second", "b.txt"),
                ]);
                let confirmed = answers
                    .iter()
                    .filter(|answer| answer.as_ref().is_ok_and(confirmed))
                    .count();
                Ok(ToolOutput::text(format!("Confirmed {confirmed} of 2")))
            }
            "test_tool_with_task" => {
                // Asked at once (an `InputRequiredResult` round), then a while of work on the
                // answer: the call goes on as a task.
                let name = ask_name("user_name")?;
                std::thread::sleep(Duration::from_secs(1));
                Ok(ToolOutput::text(format!(
                    "Hello, {name}! The task is done."
                )))
            }
            other => Err(ToolError::unknown_capability(other)),
        }
    }

    fn read_resource(_ctx: &CallContext, uri: &str) -> Result<Vec<EmbeddedResource>, ToolError> {
        let resource = match uri {
            "test://static-text" => {
                EmbeddedResource::text(uri, "This is the content of the static text resource.")
                    .with_mime_type("text/plain")
            }
            "test://static-binary" => {
                EmbeddedResource::binary(uri, RED_PIXEL_PNG).with_mime_type("image/png")
            }
            "test://watched-resource" => {
                EmbeddedResource::text(uri, "This resource is watched for changes.")
                    .with_mime_type("text/plain")
            }
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) => {
                    let data = json!({
                        "id": id,
                        "templateTest": true,
                        "data": format!("Data for ID: {id}"),
                    });
                    EmbeddedResource::text(uri, data.to_string()).with_mime_type("application/json")
                }
                None => {
                    return Err(ToolError::not_found(
                        "RESOURCE_NOT_FOUND",
                        format!("no resource at `{uri}`"),
                    ));
                }
            },
        };
        Ok(vec![resource])
    }

    fn get_prompt(_ctx: &CallContext, id: &str, args: &Value) -> Result<Prompt, ToolError> {
        let arg = |name: &str| args[name].as_str().unwrap_or_default().to_owned();
        let messages = match id {
            "test_simple_prompt" => vec![PromptMessage::user(Content::text(
                "This is a simple prompt for testing.",
            ))],
            "test_prompt_with_arguments" => vec![PromptMessage::user(Content::text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            )))],
            "test_prompt_with_embedded_resource" => vec![
                PromptMessage::user(Content::Resource(
                    EmbeddedResource::text(
                        arg("resourceUri"),
                        "Embedded resource content for testing.",
                    )
                    .with_mime_type("text/plain"),
                )),
                PromptMessage::user(Content::text("Please process the embedded resource above.")),
            ],
            "test_prompt_with_image" => vec![
                PromptMessage::user(Content::image(RED_PIXEL_PNG, "image/png")),
                PromptMessage::user(Content::text("Please analyze the image above.")),
            ],
            "test_input_required_result_prompt" => {
                let answer = caller::ask(Request::form(
                    "user_context",
                    "What context should the prompt use?",
                    json!({ "type": "object", "properties": { "context": { "type": "string" } }, "required": ["context"] }),
                ))?;
                let context = answer["content"]["context"].as_str().unwrap_or("none");
                vec![PromptMessage::user(Content::text(format!(
                    "Answer with this context in mind: {context}"
                )))]
            }
            other => {
                return Err(ToolError::not_found(
                    "PROMPT_NOT_FOUND",
                    format!("no prompt `{other}`"),
                ));
            }
        };
        Ok(Prompt::new(messages))
    }

    fn complete(
        _ctx: &CallContext,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        _context: &Value,
    ) -> Result<Completion, ToolError> {
        // Suggestions for the prompt's first argument, by prefix; nothing else.
        let known: &[&str] = match (reference, argument) {
            (CompletionRef::Prompt(id), "arg1") if id == "test_prompt_with_arguments" => {
                &["paris", "park", "parse"]
            }
            _ => &[],
        };
        Ok(Completion::of(
            (known.iter())
                .filter(|v| v.starts_with(value))
                .map(|v| (*v).to_owned())
                .collect(),
        ))
    }
}

/// `test_header_param`'s arguments.
#[derive(Deserialize)]
struct RegionArgs {
    region: String,
}

#[derive(Deserialize)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize)]
struct ComputeArgs {
    seconds: u64,
    #[serde(default)]
    label: String,
}

/// A form asking to confirm the deletion of `filename`, under `key`.
fn confirm_form(key: &str, filename: &str) -> Request {
    Request::form(
        key,
        &format!("Delete {filename}?"),
        json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } }, "required": ["confirm"] }),
    )
}

/// Whether a confirmation form was accepted with `confirm: true`.
fn confirmed(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"]["confirm"] == true
}

/// A form asking the user's name, under `key`.
fn name_form(key: &str) -> Request {
    Request::form(
        key,
        "What is your name?",
        json!({ "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] }),
    )
}

/// Asks the user's name, under `key`.
fn ask_name(key: &str) -> Result<String, ToolError> {
    let answer = caller::ask(name_form(key))?;
    Ok(answer["content"]["name"]
        .as_str()
        .unwrap_or("unknown")
        .to_owned())
}

/// Asks the form of `request`, and says what came back.
fn elicited(request: Request) -> Result<ToolOutput, ToolError> {
    let answer = caller::ask(request)?;
    Ok(ToolOutput::text(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"].as_str().unwrap_or("none"),
        answer.get("content").unwrap_or(&Value::Null)
    )))
}

/// A form (`user_name`), a sampling request (`greeting`) and the roots (`client_roots`), in
/// one `ask-all`: the caller gets the three together.
fn asked_together() -> Result<[Value; 3], ToolError> {
    let requests = vec![
        name_form("user_name"),
        Request::sample("greeting", "Write a one-line greeting.", 50),
        Request::roots("client_roots"),
    ];
    let mut answers = caller::ask_all(requests).into_iter();
    let mut next = || {
        answers
            .next()
            .unwrap_or_else(|| Err(caller::AskError::Failed("an answer is missing".to_owned())))
    };
    Ok([next()?, next()?, next()?])
}

/// The SEP-1034 form: one field of each type, each with its default.
fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "score": { "type": "number", "default": 95.5 },
            "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
            "verified": { "type": "boolean", "default": true }
        },
        "required": []
    })
}

/// The SEP-1330 form: single and multiple choice, titled and not, and the legacy
/// `enumNames`.
fn sep1330_schema() -> Value {
    let titled = |title: &str| {
        json!([
            { "const": "value1", "title": format!("First {title}") },
            { "const": "value2", "title": format!("Second {title}") },
            { "const": "value3", "title": format!("Third {title}") }
        ])
    };
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
            "titledSingle": { "type": "string", "oneOf": titled("Option") },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
            },
            "titledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": { "anyOf": titled("Choice") }
            }
        },
        "required": []
    })
}

/// 0.1 s of silence: a RIFF/WAVE file, PCM, mono, 8 kHz, 8 bits per sample.
fn silence_wav() -> Vec<u8> {
    const RATE: u32 = 8000;
    const SAMPLES: u32 = RATE / 10;
    let mut wav = Vec::with_capacity(44 + SAMPLES as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + SAMPLES).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&RATE.to_le_bytes()); // sample rate
    wav.extend_from_slice(&RATE.to_le_bytes()); // byte rate: 1 byte per sample
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&SAMPLES.to_le_bytes());
    // Unsigned 8-bit PCM: 128 is the zero line.
    wav.resize(44 + SAMPLES as usize, 0x80);
    wav
}

gatehouse_sdk::export_adapter!(Conformance);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::ErrorKind;
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::check_args;

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn call(capability: &str, args: &str) -> Result<ToolOutput, ToolError> {
        Conformance::invoke(&CallContext::default(), &Call::new(capability, args))
    }

    #[test]
    fn each_content_tool_returns_its_kind() {
        let text = call("test_simple_text", "{}").unwrap();
        assert_eq!(
            text.content,
            [Content::text("This is a simple text response for testing.")]
        );
        let image = call("test_image_content", "{}").unwrap();
        assert_eq!(image.content, [Content::image(RED_PIXEL_PNG, "image/png")]);
        let resource = call("test_embedded_resource", "{}").unwrap();
        let [Content::Resource(resource)] = resource.content.as_slice() else {
            panic!("{resource:?}");
        };
        assert_eq!(resource.uri, "test://embedded-resource");
        assert_eq!(resource.mime_type.as_deref(), Some("text/plain"));
        let mixed = call("test_multiple_content_types", "{}").unwrap();
        assert!(matches!(
            mixed.content.as_slice(),
            [Content::Text(_), Content::Image(_), Content::Resource(_)]
        ));
    }

    #[test]
    fn the_audio_is_a_well_formed_wav() {
        let out = call("test_audio_content", "{}").unwrap();
        let [Content::Audio(blob)] = out.content.as_slice() else {
            panic!("{out:?}");
        };
        assert_eq!(blob.mime_type, "audio/wav");
        let wav = &blob.data;
        assert_eq!((&wav[0..4], &wav[8..16]), (&b"RIFF"[..], &b"WAVEfmt "[..]));
        let riff_len = u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize;
        assert_eq!(riff_len + 8, wav.len());
        let data_len = u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize;
        assert_eq!((&wav[36..40], data_len + 44), (&b"data"[..], wav.len()));
    }

    #[test]
    fn the_error_tool_always_fails() {
        let err = call("test_error_handling", "{}").unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (ErrorKind::Internal, ERROR_MESSAGE)
        );
    }

    #[test]
    fn the_forms_have_the_shapes_their_scenarios_check() {
        let defaults = sep1034_schema();
        for (field, default) in [
            ("name", json!("John Doe")),
            ("age", json!(30)),
            ("score", json!(95.5)),
            ("status", json!("active")),
            ("verified", json!(true)),
        ] {
            assert_eq!(defaults["properties"][field]["default"], default, "{field}");
        }
        let enums = &sep1330_schema()["properties"];
        assert!(enums["untitledSingle"].get("oneOf").is_none());
        assert!(enums["titledSingle"].get("enum").is_none());
        assert_eq!(enums["titledSingle"]["oneOf"][1]["const"], "value2");
        assert_eq!(enums["legacyEnum"]["enumNames"][0], "Option One");
        assert!(enums["untitledMulti"]["items"].get("anyOf").is_none());
        assert!(enums["titledMulti"]["items"].get("enum").is_none());
    }

    #[test]
    fn without_a_caller_an_asking_tool_fails_saying_so_and_the_others_answer() {
        // Natively nobody can be asked, as in a call from the command line.
        for (tool, args) in [
            (
                "test_sampling",
                json!({ "prompt": "Test prompt for sampling" }),
            ),
            (
                "test_elicitation",
                json!({ "message": "Please provide your information" }),
            ),
            ("test_elicitation_sep1034_defaults", json!({})),
            ("test_elicitation_sep1330_enums", json!({})),
            ("test_input_required_result_multiple_inputs", json!({})),
        ] {
            let checked: Value = check_args(MANIFEST, tool, &args);
            let err = call(tool, &checked.to_string()).unwrap_err();
            assert_eq!(err.code, "CALLER_UNAVAILABLE", "{tool}");
        }
        let out = call("test_tool_with_logging", "{}").unwrap();
        assert_eq!(
            out.content,
            [Content::text("Tool with logging executed successfully")]
        );
        assert!(call("test_tool_with_progress", "{}").is_ok());
    }

    #[test]
    fn the_2020_12_schema_resolves_its_defs() {
        let args = json!({
            "name": "Ada",
            "address": { "street": "1 Main St", "city": "Springfield" },
            "contactMethod": "email",
            "email": "ada@example.com"
        });
        let checked: Value = check_args(MANIFEST, "json_schema_2020_12_tool", &args);
        let out = call("json_schema_2020_12_tool", &checked.to_string()).unwrap();
        assert_eq!(out.content, [Content::text(format!("received: {args}"))]);
        // if/then: a phone contact must carry the phone number.
        let phone_missing = json!({ "name": "Ada", "contactMethod": "phone", "email": "a@b.c" });
        let refused = gatehouse_sdk::testing::try_check_args::<Value>(
            MANIFEST,
            "json_schema_2020_12_tool",
            &phone_missing,
        );
        assert!(refused.is_err(), "{refused:?}");
    }

    #[test]
    fn the_header_tool_returns_its_region() {
        let args = json!({ "region": "eu-west-1" });
        let checked: Value = check_args(MANIFEST, "test_header_param", &args);
        let out = call("test_header_param", &checked.to_string()).unwrap();
        assert_eq!(out.content, [Content::text("region: eu-west-1")]);
    }
}
