//! `gatehouse.rest`: read and write JSON resources of a REST service.
//!
//! 1. `get` (observe, read-only): `{ "url" }` -> GET, `{ "status", "body" }` out.
//! 2. `send` (act, network): `{ "url", "method", "body"? }` -> POST/PUT/PATCH/DELETE with a
//!    JSON body, `{ "status", "body" }` out.
//!
//! Every request goes through `gatehouse_sdk::http`, so the host's egress gate decides where
//! it may go and adds the operator's credential; this code never sees one. Client errors reach
//! the caller through `?` as the SDK maps them (a refused request is `EGRESS_DENIED`, a
//! certificate the gateway does not trust `UPSTREAM_TLS_FAILED`; the table is in
//! `gatehouse_sdk::http`); an upstream error status is `UPSTREAM_<status>`.

use gatehouse_sdk::http::{Request, Response};
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{Adapter, Call, CallContext, Result, ToolError, ToolOutput};
use serde::Deserialize;

/// Arguments of `get`; mirrors its input schema in `manifest.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    url: String,
}

/// Arguments of `send`; mirrors its input schema in `manifest.toml`.
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
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
        match call.capability() {
            "get" => {
                let args: GetArgs = call.args()?;
                let request = Request::get(&args.url).header("accept", "application/json");
                output(&request.send()?)
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
                    request = request.json(body)?;
                }
                output(&request.send()?)
            }
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

/// `{ "status", "body" }`, or `UPSTREAM_<status>` for an error status.
fn output(response: &Response) -> Result<ToolOutput> {
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
        response.json()?
    };
    Ok(ToolOutput::text(format!("{status}"))
        .with_structured(json!({ "status": status, "body": body })))
}

gatehouse_sdk::export_adapter!(Rest);
