//! `gatehouse.rest`: read and write JSON resources of a REST service.
//!
//! 1. `get` (observe, read-only): `{ "url" }` -> GET, `{ "status", "body" }` out.
//! 2. `send` (act, network): `{ "url", "method", "body"? }` -> POST/PUT/PATCH/DELETE with a
//!    JSON body, `{ "status", "body" }` out.
//!
//! Every request goes through `gatehouse_sdk::http`, so the host's egress gate decides where
//! it may go and adds the operator's credential; this code never sees one. A refused request
//! is reported as the tool error `EGRESS_DENIED`; an upstream error status as `UPSTREAM_<status>`.

use gatehouse_sdk::http::{HttpError, Request, Response};
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};
use serde::Deserialize;

/// Arguments of `get`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    url: String,
}

/// Arguments of `send`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    url: String,
    method: String,
    #[serde(default)]
    body: Option<Value>,
}

struct Rest;

impl Adapter for Rest {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "get" => {
                let args: GetArgs = call.args()?;
                let request = Request::get(&args.url).header("accept", "application/json");
                output(request.send())
            }
            "send" => {
                let args: SendArgs = call.args()?;
                if !matches!(args.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE") {
                    return Err(ToolError::validation(
                        "INVALID_METHOD",
                        format!("`{}` is not POST, PUT, PATCH or DELETE", args.method),
                    ));
                }
                let mut request =
                    Request::new(&args.method, &args.url).header("accept", "application/json");
                if let Some(body) = &args.body {
                    request = request.json(body).map_err(|e| to_tool_error(&e))?;
                }
                output(request.send())
            }
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn output(response: Result<Response, HttpError>) -> Result<ToolOutput, ToolError> {
    let response = response.map_err(|e| to_tool_error(&e))?;
    let status = response.status();
    if status >= 400 {
        return Err(ToolError::upstream(
            format!("UPSTREAM_{status}"),
            format!("the service answered {status}: {}", response.text()),
        )
        .retryable(status >= 500));
    }
    let body = if response.bytes().is_empty() {
        Value::Null
    } else {
        response.json().map_err(|e| to_tool_error(&e))?
    };
    Ok(ToolOutput::text(format!("{status}"))
        .with_structured(json!({ "status": status, "body": body })))
}

fn to_tool_error(error: &HttpError) -> ToolError {
    match error {
        HttpError::Denied => ToolError::unavailable(
            "EGRESS_DENIED",
            "the gateway does not allow this request (destination, method or budget)",
        )
        .with_remediation("ask the operator to grant this destination, or use a URL it grants"),
        HttpError::Timeout => {
            ToolError::unavailable("UPSTREAM_TIMEOUT", error.to_string()).retryable(true)
        }
        HttpError::InvalidUrl(_) | HttpError::InvalidHeader(_) => {
            ToolError::validation("INVALID_REQUEST", error.to_string())
        }
        HttpError::Json(_) => ToolError::upstream("INVALID_JSON", error.to_string()),
        HttpError::Tls(_) => ToolError::upstream("UPSTREAM_TLS_FAILED", error.to_string())
            .with_remediation(
                "use the host name the service's certificate names, or ask the operator to \
                 trust its CA (`[egress] extra_root_certificates`)",
            ),
        HttpError::Status(_) | HttpError::TooManyRedirects | HttpError::Transport(_) => {
            ToolError::upstream("UPSTREAM_FAILED", error.to_string()).retryable(true)
        }
    }
}

gatehouse_sdk::export_adapter!(Rest);
