//! Test plugin: sends the requests in its arguments through `gatehouse_sdk::http` and
//! reports each outcome, plus what it could see of the host's environment (nothing).
//!
//! Arguments: `{ "requests": [{ "method", "url", "headers": [[name, value]], "body" }],
//! "repeat": n }`; each request is sent `repeat` times (default 1), stopping at the first
//! error. Output: `{ "results": [{ "status", "body", "headers" } | { "error" }], "env": [..] }`.

use gatehouse_sdk::http::{HttpError, Request};
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct ProbeArgs {
    requests: Vec<ProbeRequest>,
    #[serde(default)]
    repeat: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct ProbeRequest {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: Option<String>,
}

struct Probe;

impl Adapter for Probe {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "read" | "write" => Ok(probe(&call.args()?)),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

fn probe(args: &ProbeArgs) -> ToolOutput {
    let mut results = Vec::new();
    'all: for spec in &args.requests {
        for _ in 0..args.repeat.unwrap_or(1) {
            let mut request = Request::new(&spec.method, &spec.url);
            for (name, value) in &spec.headers {
                request = request.header(name, value.as_bytes());
            }
            if let Some(body) = &spec.body {
                request = request.body(body.as_bytes());
            }
            match request.send() {
                Ok(response) => results.push(json!({
                    "status": response.status(),
                    "body": response.text(),
                    "headers": response
                        .headers()
                        .iter()
                        .map(|(n, v)| json!([n, String::from_utf8_lossy(v)]))
                        .collect::<Vec<_>>(),
                })),
                Err(error) => {
                    results.push(json!({ "error": error_name(&error) }));
                    break 'all;
                }
            }
        }
    }
    let env: Vec<Value> = std::env::vars().map(|(k, v)| json!([k, v])).collect();
    ToolOutput::new().with_structured(json!({ "results": results, "env": env }))
}

fn error_name(error: &HttpError) -> String {
    match error {
        HttpError::Denied => "denied".to_owned(),
        other => other.to_string(),
    }
}

gatehouse_sdk::export_adapter!(Probe);
