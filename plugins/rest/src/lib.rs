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
        .retryable(gatehouse_sdk::http::retryable_status(status)));
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

#[cfg(test)]
mod tests {
    use gatehouse_sdk::ErrorKind;
    use gatehouse_sdk::testing::{CheckError, check_args, try_check_args};

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn call(capability: &str, args: &Value) -> Result<ToolOutput> {
        Rest::invoke(
            &CallContext::default(),
            &Call::new(capability, args.to_string()),
        )
    }

    #[test]
    fn sample_arguments_satisfy_the_schemas_and_structs() {
        let url = "https://api.example.com/v1/items/42";
        let get: GetArgs = check_args(MANIFEST, "get", &json!({ "url": url }));
        assert_eq!(get.url, url);
        let patch: SendArgs = check_args(
            MANIFEST,
            "send",
            &json!({ "url": url, "method": "PATCH", "body": { "qty": 2 } }),
        );
        assert_eq!(
            (patch.method.as_str(), patch.body),
            ("PATCH", Some(json!({ "qty": 2 })))
        );
        let delete: SendArgs =
            check_args(MANIFEST, "send", &json!({ "url": url, "method": "DELETE" }));
        assert_eq!((delete.method.as_str(), delete.body), ("DELETE", None));
    }

    #[test]
    fn the_schema_allows_only_write_methods_to_send() {
        let err = try_check_args::<SendArgs>(
            MANIFEST,
            "send",
            &json!({ "url": "https://api.example.com/", "method": "GET" }),
        )
        .unwrap_err();
        assert_eq!(
            err,
            CheckError::Schema {
                schema: "input_schema of `send`".into(),
                field: "/method".into(),
                message: r#""GET" is not one of "POST", "PUT" or 2 other candidates"#.into(),
            }
        );
    }

    /// The host's schema check comes first; the adapter refuses a read method on its own too.
    #[test]
    fn send_refuses_a_read_method_before_any_request() {
        let err = call(
            "send",
            &json!({ "url": "https://api.example.com/", "method": "GET" }),
        )
        .unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str(), err.message.as_str()),
            (
                ErrorKind::Validation,
                "INVALID_METHOD",
                "`GET` is not POST, PUT, PATCH or DELETE"
            )
        );
    }

    /// Client errors reach the caller through `?` with the SDK's codes; a URL that is not
    /// http(s) fails before anything leaves the component, so this runs natively.
    #[test]
    fn client_errors_become_tool_errors() {
        for (capability, args) in [
            ("get", json!({ "url": "ftp://files.example.com/a" })),
            (
                "send",
                json!({ "url": "ftp://files.example.com/a", "method": "PUT", "body": [1] }),
            ),
        ] {
            let err = call(capability, &args).unwrap_err();
            assert_eq!(
                err,
                ToolError::validation(
                    "INVALID_REQUEST",
                    "`ftp://files.example.com/a` is not an http(s) URL"
                ),
                "{capability}"
            );
        }
    }

    #[test]
    fn unknown_capability() {
        let err = call("patch", &json!({})).unwrap_err();
        assert_eq!(err.code, "UNKNOWN_CAPABILITY");
    }
}
