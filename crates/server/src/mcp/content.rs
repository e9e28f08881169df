//! Resources, prompts and completion, shared by every protocol version: the listings show what
//! the caller's tenant may see; `resources/read` and `prompts/get` are governed calls through
//! the pipeline ([`Operation::ReadResource`], [`Operation::GetPrompt`]: the same gates, in the
//! same order, as a `tools/call`, and an audit record); `completion/complete` asks the adapter
//! that serves the prompt or template. Each version's folder adds its own wire details (the
//! caching hints of 2026-07-28).
//!
//! Names: a resource is listed by its URI (with the manifest's `name`); a prompt by its
//! gatehouse name `<adapter id>.<id>`, or its `[mcp.aliases]` alias, as a tool is.

use gatehouse_core::envelope::{
    OutcomeCode, Protocol, Status, ToolCallEnvelope, ToolResultEnvelope,
};
use gatehouse_core::model::{ContentBlock, Operation};
use gatehouse_host::CompletionRef;
use rmcp::ErrorData;
use serde_json::{Map, Value, json};

use super::call::{Gateway, mcp_span};
use super::caller::Caller;
use super::reply::Answer;

impl Gateway {
    /// `resources/list`: the resources `caller`'s tenant may read.
    pub fn resource_list(&self, caller: &Caller) -> Value {
        let resources: Vec<Value> = (self.host().resource_catalog(&caller.tenant).into_iter())
            .map(|listed| {
                let resource = listed.entry;
                let mut entry = json!({ "uri": resource.uri, "name": resource.name() });
                put(&mut entry, "title", resource.title.as_deref());
                put(&mut entry, "description", non_empty(&resource.description));
                put(&mut entry, "mimeType", resource.mime_type.as_deref());
                if let Some(size) = resource.size {
                    entry["size"] = json!(size);
                }
                entry
            })
            .collect();
        json!({ "resources": resources })
    }

    /// `resources/templates/list`: the resource templates `caller`'s tenant may read.
    pub fn template_list(&self, caller: &Caller) -> Value {
        let templates: Vec<Value> = (self.host().template_catalog(&caller.tenant).into_iter())
            .map(|listed| {
                let template = listed.entry;
                let mut entry =
                    json!({ "uriTemplate": template.uri_template, "name": template.name() });
                put(&mut entry, "title", template.title.as_deref());
                put(&mut entry, "description", non_empty(&template.description));
                put(&mut entry, "mimeType", template.mime_type.as_deref());
                entry
            })
            .collect();
        json!({ "resourceTemplates": templates })
    }

    /// `prompts/list`: the prompts `caller`'s tenant may fill in.
    pub fn prompt_list(&self, caller: &Caller) -> Value {
        let prompts: Vec<Value> = (self.host().prompt_catalog(&caller.tenant).into_iter())
            .map(|listed| {
                let prompt = listed.entry;
                let mut entry = json!({ "name": self.aliases().listed_name(listed.name) });
                put(&mut entry, "title", prompt.title.as_deref());
                put(&mut entry, "description", non_empty(&prompt.description));
                let arguments: Vec<Value> = (prompt.arguments.iter())
                    .map(|argument| {
                        let mut entry = json!({ "name": argument.name });
                        put(&mut entry, "title", argument.title.as_deref());
                        put(&mut entry, "description", argument.description.as_deref());
                        if argument.required {
                            entry["required"] = json!(true);
                        }
                        entry
                    })
                    .collect();
                if !arguments.is_empty() {
                    entry["arguments"] = json!(arguments);
                }
                entry
            })
            .collect();
        json!({ "prompts": prompts })
    }

    /// `resources/read`: the resource at `params.uri`, read through the pipeline. A URI no
    /// resource the caller may see is at is -32602 with `data.uri` (SEP-2164), and nothing
    /// runs.
    pub async fn read_resource(&self, caller: &Caller, params: &Map<String, Value>) -> Answer {
        let uri = (params.get("uri").and_then(Value::as_str))
            .ok_or_else(|| ErrorData::invalid_params("params.uri must be a string", None))?;
        let not_found = || {
            ErrorData::invalid_params(
                format!("resource not found: {uri}"),
                Some(json!({ "uri": uri })),
            )
        };
        let (name, args) = (self.host().resource_at(&caller.tenant, uri)).ok_or_else(not_found)?;
        let result = self
            .governed(caller, &name, Operation::ReadResource, args)
            .await;
        if result.outcome == OutcomeCode::UnknownCapability {
            return Err(not_found().into());
        }
        refused(&result)?;
        let contents: Vec<Value> = (result.content.into_iter())
            .filter_map(|block| match block {
                ContentBlock::Resource { resource } => serde_json::to_value(resource).ok(),
                _ => None,
            })
            .collect();
        if contents.is_empty() {
            // MCP: never an empty `contents` for a read that found its resource.
            return Err(ErrorData::internal_error(
                format!("the adapter read no contents at {uri}"),
                Some(json!({ "uri": uri })),
            )
            .into());
        }
        Ok(json!({ "contents": contents }))
    }

    /// `prompts/get`: prompt `params.name` (a gatehouse name or an alias) filled in with
    /// `params.arguments` through the pipeline.
    pub async fn get_prompt(&self, caller: &Caller, params: &Map<String, Value>) -> Answer {
        let (asked, call) = self.prompt_call(caller, params)?;
        let result = self.run(call, mcp_span(&asked, None), None, None).await;
        prompt(&asked, result)
    }

    /// The governed call of a `prompts/get` (`params`: its `name`, as asked, and its
    /// `arguments`), and the name as asked.
    pub fn prompt_call(
        &self,
        caller: &Caller,
        params: &Map<String, Value>,
    ) -> Result<(String, ToolCallEnvelope), ErrorData> {
        let asked = (params.get("name").and_then(Value::as_str))
            .ok_or_else(|| ErrorData::invalid_params("params.name must be a string", None))?;
        let name = self.aliases().tool(asked).unwrap_or(asked).to_owned();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(args @ Value::Object(_)) => args.clone(),
            Some(_) => {
                return Err(ErrorData::invalid_params(
                    "params.arguments must be an object of strings",
                    None,
                ));
            }
        };
        Ok((
            asked.to_owned(),
            envelope(caller, &name, Operation::GetPrompt, args),
        ))
    }

    /// `completion/complete`: suggestions for an argument of a prompt (`ref/prompt`, by its
    /// name or alias) or a parameter of a resource template (`ref/resource`, by its URI
    /// template) the caller may see, from the adapter that serves it.
    pub async fn complete(&self, caller: &Caller, params: &Map<String, Value>) -> Answer {
        let invalid = |message: &'static str| ErrorData::invalid_params(message, None);
        let reference = params
            .get("ref")
            .ok_or_else(|| invalid("params.ref must be a ref/prompt or a ref/resource"))?;
        let reference = match reference["type"].as_str() {
            Some("ref/prompt") => {
                let name = (reference["name"].as_str())
                    .ok_or_else(|| invalid("params.ref.name must be a string"))?;
                CompletionRef::Prompt(self.aliases().tool(name).unwrap_or(name).to_owned())
            }
            Some("ref/resource") => CompletionRef::Resource(
                (reference["uri"].as_str())
                    .ok_or_else(|| invalid("params.ref.uri must be a string"))?
                    .to_owned(),
            ),
            _ => return Err(invalid("params.ref.type must be ref/prompt or ref/resource").into()),
        };
        let argument = params.get("argument").unwrap_or(&Value::Null);
        let (Some(name), Some(value)) = (argument["name"].as_str(), argument["value"].as_str())
        else {
            return Err(invalid("params.argument must have a string name and value").into());
        };
        let context = params
            .get("context")
            .and_then(|context| context.get("arguments"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let completion = self
            .host()
            .complete(&caller.tenant, &reference, name, value, &context)
            .await
            .ok_or_else(|| invalid("no such prompt or resource template"))?;
        let mut values = json!({ "values": completion.values, "hasMore": completion.has_more });
        if let Some(total) = completion.total {
            values["total"] = json!(total);
        }
        Ok(json!({ "completion": values }))
    }

    /// A resource read or prompt fill-in of `name` for `caller`, through the pipeline.
    async fn governed(
        &self,
        caller: &Caller,
        name: &str,
        operation: Operation,
        args: Value,
    ) -> ToolResultEnvelope {
        let call = envelope(caller, name, operation, args);
        self.run(call, mcp_span(name, None), None, None).await
    }
}

/// `caller`'s call of `operation` on `name` with `args`.
fn envelope(caller: &Caller, name: &str, operation: Operation, args: Value) -> ToolCallEnvelope {
    caller
        .envelope(Protocol::Mcp, name, args)
        .with_operation(operation)
}

/// A `prompts/get` of `asked` whose governed call ended with `result`: the prompt's messages;
/// an unknown prompt is -32602, a refusal the error [`refused`] makes of it.
pub fn prompt(asked: &str, result: ToolResultEnvelope) -> Answer {
    if result.outcome == OutcomeCode::UnknownCapability {
        return Err(ErrorData::invalid_params(format!("unknown prompt: {asked}"), None).into());
    }
    refused(&result)?;
    let structured = result.structured_content.unwrap_or_default();
    let roles = structured["roles"].as_array().cloned().unwrap_or_default();
    let messages: Vec<Value> = (roles.into_iter().zip(result.content))
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect();
    let mut answer = json!({ "messages": messages });
    if let Some(description) = structured["description"].as_str() {
        answer["description"] = json!(description);
    }
    Ok(answer)
}

/// A read or fill-in that did not end `ok`, as a JSON-RPC error: -32602 for arguments the
/// gates refused, -32603 otherwise, with the outcome and the error's code and remediation in
/// `data`, as the caller's view of the result says them.
fn refused(result: &ToolResultEnvelope) -> Result<(), ErrorData> {
    if result.status == Status::Ok {
        return Ok(());
    }
    let (message, code, remediation) = match &result.error {
        Some(error) => (
            error.message.clone(),
            error.code.clone(),
            error.remediation.clone(),
        ),
        None => (
            format!("the request ended {:?}", result.status),
            String::new(),
            None,
        ),
    };
    let data = json!({ "outcome": result.outcome, "code": code, "remediation": remediation });
    Err(if result.outcome == OutcomeCode::InvalidArguments {
        ErrorData::invalid_params(message, Some(data))
    } else {
        ErrorData::internal_error(message, Some(data))
    })
}

fn put(entry: &mut Value, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        entry[key] = json!(value);
    }
}

fn non_empty(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}
