//! A result envelope as an MCP tool result: the content blocks and `structuredContent` as the
//! adapter returned them (after verification and obligations); `isError` unless the call ended
//! `ok`, with the error's code, message and remediation appended as a text block; and the
//! [`ToolResultEnvelope`] it is given (the caller's view, [`gatehouse_host::caller_view`]) under
//! `_meta["gatehouse/result"]`.

use gatehouse_core::envelope::{Status, ToolResultEnvelope};
use gatehouse_core::model::{ContentBlock, ResourceContents};
use rmcp::ErrorData;
use rmcp::model::{self as mcp, CallToolResult, JsonRpcVersion2_0, MetaObject, RequestId};
use serde::Serialize;
use serde::ser::SerializeMap;

use super::meta::{REPLAY_OF_META, RESULT_META};

/// Maps a result envelope to MCP (see the module docs).
pub fn to_mcp(result: &ToolResultEnvelope) -> Result<CallToolResult, ErrorData> {
    let mut mcp = without_meta(result)?;
    // The same `_meta` as `response` writes, as the JSON object rmcp's type holds.
    let meta = serde_json::to_value(Meta(result))
        .and_then(serde_json::from_value::<MetaObject>)
        .map_err(|e| {
            ErrorData::internal_error(format!("the result envelope does not serialize: {e}"), None)
        })?;
    mcp.meta = Some(meta);
    Ok(mcp)
}

/// The JSON-RPC response to request `id` that rmcp's stateless JSON path sends a peer below
/// protocol 2026-07-28 for `result` (`to_mcp`, without `resultType`), serialized in one pass:
/// the envelope goes into `_meta` as it is, without a `serde_json::Value` of it in between.
pub fn response(id: &RequestId, result: &ToolResultEnvelope) -> Result<Vec<u8>, ErrorData> {
    let mut mcp = without_meta(result)?;
    mcp.result_type = None;
    let response = Response {
        jsonrpc: JsonRpcVersion2_0,
        id,
        result: Answer {
            mcp,
            meta: Meta(result),
        },
    };
    serde_json::to_vec(&response).map_err(|e| {
        ErrorData::internal_error(format!("the response does not serialize: {e}"), None)
    })
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: JsonRpcVersion2_0,
    id: &'a RequestId,
    result: Answer<'a>,
}

/// A tool result and its `_meta`.
#[derive(Serialize)]
struct Answer<'a> {
    #[serde(flatten)]
    mcp: CallToolResult,
    #[serde(rename = "_meta")]
    meta: Meta<'a>,
}

/// `_meta`: the envelope, and the call it replays.
struct Meta<'a>(&'a ToolResultEnvelope);

impl Serialize for Meta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Self(result) = self;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(RESULT_META, result)?;
        if let Some(original) = &result.replay_of {
            map.serialize_entry(REPLAY_OF_META, original)?;
        }
        map.end()
    }
}

/// The MCP result of `result`, without its `_meta`. A failure's text is its error; a replayed
/// failure's says it is a replay and how to run the call again, so a retry that meets the
/// first attempt's error is not taken for a new failure (a replayed success is the call's
/// result, as it was: its `_meta` says it is a replay).
fn without_meta(result: &ToolResultEnvelope) -> Result<CallToolResult, ErrorData> {
    let mut content = result
        .content
        .iter()
        .map(block)
        .collect::<Result<Vec<_>, _>>()?;
    let failed = result.status != Status::Ok;
    if failed && let Some(error) = &result.error {
        let mut text = format!("{}: {}", error.code, error.message);
        if let Some(remediation) = &error.remediation {
            text.push_str(&format!(" ({remediation})"));
        }
        if let Some(original) = &result.replay_of {
            text.push_str(&format!(
                " This is the result of an earlier call ({original}) with the same idempotency \
                 key, replayed: nothing ran again. To run the call again, send a new \
                 idempotency key."
            ));
        }
        content.push(mcp::ContentBlock::text(text));
    }
    let mut mcp = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    mcp.structured_content
        .clone_from(&result.structured_content);
    Ok(mcp)
}

fn block(block: &ContentBlock) -> Result<mcp::ContentBlock, ErrorData> {
    Ok(match block {
        ContentBlock::Text { text } => mcp::ContentBlock::text(text),
        ContentBlock::Image { data, mime_type } => mcp::ContentBlock::image(data, mime_type),
        ContentBlock::Audio { data, mime_type } => mcp::ContentBlock::audio(data, mime_type),
        ContentBlock::Resource { resource } => mcp::ContentBlock::resource(contents(resource)?),
    })
}

fn contents(resource: &ResourceContents) -> Result<mcp::ResourceContents, ErrorData> {
    let contents = match (&resource.text, &resource.blob) {
        (Some(text), _) => mcp::ResourceContents::TextResourceContents {
            uri: resource.uri.clone(),
            mime_type: resource.mime_type.clone(),
            text: text.clone(),
            meta: None,
        },
        (None, Some(blob)) => mcp::ResourceContents::BlobResourceContents {
            uri: resource.uri.clone(),
            mime_type: resource.mime_type.clone(),
            blob: blob.clone(),
            meta: None,
        },
        (None, None) => {
            return Err(ErrorData::internal_error(
                format!(
                    "the result does not map to MCP: embedded resource `{}` has neither text nor data",
                    resource.uri
                ),
                None,
            ));
        }
    };
    Ok(contents)
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResponse, ServerJsonRpcMessage, ServerResult};
    use serde_json::{Value, json};

    use super::*;
    use gatehouse_core::envelope::{OutcomeCode, ToolCallEnvelope};
    use gatehouse_core::model::{ErrorBody, ErrorKind};

    /// What rmcp's stateless JSON path sends a peer below 2026-07-28 for `result`.
    fn rmcp_sends(id: RequestId, result: &ToolResultEnvelope) -> Value {
        let mut answer = ServerResult::from(CallToolResponse::Complete(to_mcp(result).unwrap()));
        answer.strip_result_type_for_legacy_peer();
        serde_json::to_value(ServerJsonRpcMessage::response(answer, id)).unwrap()
    }

    #[test]
    fn the_direct_response_is_the_one_rmcp_sends() {
        let call = ToolCallEnvelope::new("acme", "echo.say", json!({ "text": "hi" }));
        let mut ok = ToolResultEnvelope::begin(&call);
        ok.content = vec![ContentBlock::Text {
            text: "hi \"there\"\n".into(),
        }];
        ok.structured_content = Some(json!({ "n": 1, "list": [true, null] }));
        let mut failed = ToolResultEnvelope::begin(&call);
        failed.status = Status::Failed;
        failed.outcome = OutcomeCode::ToolError;
        let mut error = ErrorBody::new(ErrorKind::Upstream, "UPSTREAM", "it broke", true);
        error.remediation = Some("try later".into());
        failed.error = Some(error);
        let mut replay = ok.clone();
        replay.replay_of = Some("call_0".into());
        for (id, result) in [
            (RequestId::Number(7), &ok),
            (RequestId::String("a-1".into()), &failed),
            (RequestId::Number(-1), &replay),
        ] {
            let ours: Value = serde_json::from_slice(&response(&id, result).unwrap()).unwrap();
            assert_eq!(ours, rmcp_sends(id, result));
            assert_eq!(
                ours["result"]["_meta"][RESULT_META]["outcome"],
                json!(result.outcome.as_str())
            );
            assert_eq!(ours["result"].get("resultType"), None, "{ours}");
        }
    }

    #[test]
    fn a_replayed_failure_says_it_is_a_replay_and_how_to_run_again() {
        let call = ToolCallEnvelope::new("acme", "a.b", json!({}));
        let mut failed = ToolResultEnvelope::begin(&call);
        failed.status = Status::Failed;
        failed.outcome = OutcomeCode::ToolError;
        failed.error = Some(ErrorBody::new(
            ErrorKind::Upstream,
            "UPSTREAM",
            "EACCES",
            false,
        ));
        let text = |result: &ToolResultEnvelope| {
            serde_json::to_value(without_meta(result).unwrap()).unwrap()["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(text(&failed), "UPSTREAM: EACCES");
        failed.replay_of = Some("call_1".into());
        let replayed = text(&failed);
        assert!(
            replayed.starts_with("UPSTREAM: EACCES This is the result of an earlier call (call_1)")
                && replayed.contains("send a new idempotency key"),
            "{replayed}"
        );
    }
}
