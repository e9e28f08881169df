//! A result envelope as an MCP tool result: the content blocks and `structuredContent` as the
//! adapter returned them (after verification and obligations); `isError` unless the call
//! ended `ok`, with the error's code, message and remediation appended as a text block; and
//! the [`ToolResultEnvelope`] it is given (the caller's view, [`crate::caller_view`]) under
//! `_meta["gatehouse/result"]`.

use rmcp::ErrorData;
use rmcp::model::{self as mcp, CallToolResult, MetaObject};

use super::{REPLAY_OF_META, RESULT_META};
use crate::envelope::{Status, ToolResultEnvelope};
use crate::model::{ContentBlock, ResourceContents};

/// Maps a result envelope to MCP (see the module docs).
pub fn to_mcp(result: &ToolResultEnvelope) -> Result<CallToolResult, ErrorData> {
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
        content.push(mcp::ContentBlock::text(text));
    }
    let mut mcp = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    mcp.structured_content
        .clone_from(&result.structured_content);
    let envelope = serde_json::to_value(result).map_err(|e| {
        ErrorData::internal_error(format!("the result envelope does not serialize: {e}"), None)
    })?;
    let mut meta = MetaObject::new();
    meta.insert(RESULT_META.to_owned(), envelope);
    if let Some(original) = &result.replay_of {
        meta.insert(REPLAY_OF_META.to_owned(), original.clone().into());
    }
    mcp.meta = Some(meta);
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
