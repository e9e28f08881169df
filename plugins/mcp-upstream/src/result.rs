//! The upstream's results as the adapter's: a `tools/call` result's content blocks and
//! `structuredContent` as they came, `isError` as the structured error `UPSTREAM_TOOL_ERROR`;
//! a `resources/read` result's contents; a `prompts/get` result's messages; a
//! `completion/complete` result's values. What is not of MCP's shape is `UPSTREAM_NOT_MCP`.

use base64::Engine as _;
use gatehouse_sdk::serde_json::Value;
use gatehouse_sdk::{
    Completion, Content, EmbeddedResource, Prompt, PromptMessage, Role, ToolError, ToolOutput,
};

use crate::mapping::Mapping;
use crate::rpc::quote;

/// The call's result from the upstream's `tools/call` `result`.
pub fn output(mapping: &Mapping, result: &Value) -> Result<ToolOutput, ToolError> {
    let malformed = |why: &str| {
        ToolError::upstream(
            "UPSTREAM_NOT_MCP",
            format!(
                "the MCP server at {} answered `tools/call` of `{}` with a result that is not \
                 an MCP tool result: {why}",
                mapping.url, mapping.tool
            ),
        )
    };
    let Some(blocks) = result["content"].as_array() else {
        return Err(malformed("`content` is not a list"));
    };
    let mut output = ToolOutput::new();
    for (i, block) in blocks.iter().enumerate() {
        output = output.with_content(
            content(block).map_err(|why| malformed(&format!("content[{i}]: {why}")))?,
        );
    }
    if result["isError"] == Value::Bool(true) {
        let said: Vec<&str> = output
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return Err(ToolError::upstream(
            "UPSTREAM_TOOL_ERROR",
            format!(
                "the upstream tool `{}` reported an error: {}",
                mapping.tool,
                quote(&said.join("\n"))
            ),
        ));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        output = output.with_structured(structured.clone());
    }
    Ok(output)
}

/// An answer to `method` that is not of MCP's shape.
fn not_mcp(mapping: &Mapping, method: &str, why: &str) -> ToolError {
    ToolError::upstream(
        "UPSTREAM_NOT_MCP",
        format!(
            "the MCP server at {} answered `{method}` with a result that is not MCP's: {why}",
            mapping.url
        ),
    )
}

/// A `resources/read` result's contents, each a resource (text or a base64 `blob`).
pub fn contents(mapping: &Mapping, result: &Value) -> Result<Vec<EmbeddedResource>, ToolError> {
    let Some(contents) = result["contents"].as_array() else {
        return Err(not_mcp(
            mapping,
            "resources/read",
            "`contents` is not a list",
        ));
    };
    (contents.iter().enumerate())
        .map(|(i, contents)| {
            resource(contents)
                .map_err(|why| not_mcp(mapping, "resources/read", &format!("contents[{i}]: {why}")))
        })
        .collect()
}

/// A `prompts/get` result as a prompt: its description and messages.
pub fn prompt(mapping: &Mapping, result: &Value) -> Result<Prompt, ToolError> {
    let Some(messages) = result["messages"].as_array() else {
        return Err(not_mcp(mapping, "prompts/get", "`messages` is not a list"));
    };
    let messages = (messages.iter().enumerate())
        .map(|(i, message)| {
            let role = match message["role"].as_str() {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                other => {
                    return Err(not_mcp(
                        mapping,
                        "prompts/get",
                        &format!("messages[{i}]: unknown role {other:?}"),
                    ));
                }
            };
            let content = content(&message["content"])
                .map_err(|why| not_mcp(mapping, "prompts/get", &format!("messages[{i}]: {why}")))?;
            Ok(PromptMessage { role, content })
        })
        .collect::<Result<_, _>>()?;
    Ok(Prompt {
        description: result["description"].as_str().map(str::to_owned),
        messages,
    })
}

/// A `completion/complete` result's values (strings only).
pub fn completion(mapping: &Mapping, result: &Value) -> Result<Completion, ToolError> {
    let completion = &result["completion"];
    let Some(values) = completion["values"].as_array() else {
        return Err(not_mcp(
            mapping,
            "completion/complete",
            "`completion.values` is not a list",
        ));
    };
    Ok(Completion {
        values: values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        total: completion["total"]
            .as_u64()
            .and_then(|t| u32::try_from(t).ok()),
        has_more: completion["hasMore"].as_bool().unwrap_or(false),
    })
}

/// MCP resource contents: a URI, and text or a base64 `blob`.
fn resource(contents: &Value) -> Result<EmbeddedResource, String> {
    let uri = (contents["uri"].as_str()).ok_or("`resource.uri` is not a string")?;
    let mut embedded = match (contents["text"].as_str(), contents["blob"].as_str()) {
        (Some(text), _) => EmbeddedResource::text(uri, text),
        (None, Some(blob)) => EmbeddedResource::binary(
            uri,
            base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|e| format!("`resource.blob` is not base64: {e}"))?,
        ),
        (None, None) => return Err("`resource` has neither `text` nor `blob`".to_owned()),
    };
    embedded.mime_type = contents["mimeType"].as_str().map(str::to_owned);
    Ok(embedded)
}

/// One MCP content block. A `resource_link` becomes a resource with its URI and no contents.
fn content(block: &Value) -> Result<Content, String> {
    let text = |field: &str| {
        block[field]
            .as_str()
            .ok_or_else(|| format!("`{field}` is not a string"))
    };
    let bytes = |field: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(text(field)?)
            .map_err(|e| format!("`{field}` is not base64: {e}"))
    };
    match block["type"].as_str() {
        Some("text") => Ok(Content::text(text("text")?)),
        Some("image") => Ok(Content::image(bytes("data")?, text("mimeType")?)),
        Some("audio") => Ok(Content::audio(bytes("data")?, text("mimeType")?)),
        Some("resource") => resource(&block["resource"]).map(Content::Resource),
        Some("resource_link") => Ok(Content::Resource(EmbeddedResource {
            uri: text("uri")?.to_owned(),
            mime_type: block["mimeType"].as_str().map(str::to_owned),
            text: None,
            data: None,
        })),
        other => Err(format!("unknown content type {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_sdk::ErrorKind;
    use gatehouse_sdk::serde_json::json;

    use super::*;

    fn mapping() -> Mapping {
        Mapping {
            url: "http://127.0.0.1:1/mcp".into(),
            tool: "forecast".into(),
            prompt: String::new(),
            uri: String::new(),
            protocol: "2026-07-28".into(),
            task: String::new(),
            digest: "sha256:00".into(),
        }
    }

    #[test]
    fn delivers_content_and_structured_content() {
        let out = output(
            &mapping(),
            &json!({
                "content": [
                    { "type": "text", "text": "sunny" },
                    { "type": "image", "data": "iVBO", "mimeType": "image/png" },
                    { "type": "resource", "resource": { "uri": "file:///a", "text": "a", "mimeType": "text/plain" } },
                ],
                "structuredContent": { "sky": "clear" },
            }),
        )
        .unwrap();
        assert_eq!(
            out.content,
            [
                Content::text("sunny"),
                Content::image(vec![0x89, 0x50, 0x4e], "image/png"),
                Content::Resource(
                    EmbeddedResource::text("file:///a", "a").with_mime_type("text/plain")
                ),
            ]
        );
        assert_eq!(out.structured, Some(json!({ "sky": "clear" })));
    }

    #[test]
    fn an_is_error_result_is_the_structured_error() {
        let err = output(
            &mapping(),
            &json!({ "content": [{ "type": "text", "text": "no such city" }], "isError": true }),
        )
        .unwrap_err();
        assert_eq!(
            (
                err.kind,
                err.code.as_str(),
                err.message.as_str(),
                err.retryable
            ),
            (
                ErrorKind::Upstream,
                "UPSTREAM_TOOL_ERROR",
                "the upstream tool `forecast` reported an error: no such city",
                false
            )
        );
    }

    #[test]
    fn a_result_without_content_is_not_mcp() {
        let err = output(&mapping(), &json!({ "answer": 42 })).unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.message.as_str()),
            (
                "UPSTREAM_NOT_MCP",
                "the MCP server at http://127.0.0.1:1/mcp answered `tools/call` of `forecast` \
                 with a result that is not an MCP tool result: `content` is not a list"
            )
        );
        let err = output(&mapping(), &json!({ "content": [{ "type": "video" }] })).unwrap_err();
        assert!(
            err.message
                .ends_with("content[0]: unknown content type Some(\"video\")"),
            "{}",
            err.message
        );
    }

    #[test]
    fn reads_contents_prompts_and_completions() {
        let contents = contents(
            &mapping(),
            &json!({ "contents": [
                { "uri": "docs://a", "mimeType": "text/plain", "text": "hello" },
                { "uri": "docs://b", "blob": "iVBO" },
            ] }),
        )
        .unwrap();
        assert_eq!(
            contents,
            [
                EmbeddedResource::text("docs://a", "hello").with_mime_type("text/plain"),
                EmbeddedResource::binary("docs://b", vec![0x89, 0x50, 0x4e]),
            ]
        );
        let err = contents_error(&json!({ "contents": [{ "uri": "docs://a" }] }));
        assert!(
            err.ends_with("contents[0]: `resource` has neither `text` nor `blob`"),
            "{err}"
        );

        let prompt = prompt(
            &mapping(),
            &json!({ "description": "d", "messages": [
                { "role": "assistant", "content": { "type": "text", "text": "hi" } },
            ] }),
        )
        .unwrap();
        assert_eq!(prompt.description.as_deref(), Some("d"));
        assert_eq!(
            prompt.messages,
            [PromptMessage::assistant(Content::text("hi"))]
        );
        let err = super::prompt(
            &mapping(),
            &json!({ "messages": [{ "role": "system", "content": { "type": "text", "text": "x" } }] }),
        )
        .unwrap_err();
        assert!(
            err.message
                .ends_with("messages[0]: unknown role Some(\"system\")"),
            "{}",
            err.message
        );

        let completion = completion(
            &mapping(),
            &json!({ "completion": { "values": ["a", 1, "b"], "total": 9, "hasMore": true } }),
        )
        .unwrap();
        assert_eq!(
            (completion.values, completion.total, completion.has_more),
            (vec!["a".to_owned(), "b".to_owned()], Some(9), true)
        );
    }

    fn contents_error(result: &Value) -> String {
        contents(&mapping(), result).unwrap_err().message
    }
}
