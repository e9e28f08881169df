//! The answer as the call's result: 2xx is structured content, anything else a structured
//! error with the status.

use gatehouse_sdk::http::Response;
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{ErrorKind, ToolError, ToolOutput};

use crate::mapping::Mapping;

/// Bytes of an error answer the message quotes, at most.
const MAX_QUOTE: usize = 512;

/// `{ "status", "body" }` for a 2xx answer (the body parsed if it is JSON, else its text);
/// `HTTP_<status>` otherwise.
pub fn output(mapping: &Mapping, response: &Response) -> Result<ToolOutput, ToolError> {
    let status = response.status();
    if !(200..300).contains(&status) {
        return Err(error(mapping, response));
    }
    let json = response
        .header("content-type")
        .is_some_and(|t| t.contains("json"));
    let body = if response.bytes().is_empty() {
        Value::Null
    } else if json {
        response.json()?
    } else {
        Value::String(response.text())
    };
    ToolOutput::json(&json!({ "status": status, "body": body }))
}

fn error(mapping: &Mapping, response: &Response) -> ToolError {
    let status = response.status();
    let kind = match status {
        400 | 422 => ErrorKind::Validation,
        404 => ErrorKind::NotFound,
        409 => ErrorKind::Conflict,
        429 | 500.. => ErrorKind::Unavailable,
        _ => ErrorKind::Upstream,
    };
    let text = response.text();
    let mut end = text.len().min(MAX_QUOTE);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let error = ToolError::new(
        kind,
        format!("HTTP_{status}"),
        format!(
            "{} {} answered {status}: {}",
            mapping.method,
            mapping.url,
            text[..end].trim()
        ),
    )
    .retryable(gatehouse_sdk::http::retryable_status(status));
    match response.header("retry-after") {
        Some(after) => error.with_remediation(format!("retry after {after} (Retry-After)")),
        None => error,
    }
}
