//! Coverage-guided fuzz target of the MCP endpoint's reading of a POST body (issue 43, item 12;
//! the engine, and how to run a target for hours: `gatehouse_host`'s `fuzz` module). A body
//! that is not UTF-8 gets the parse error first (`router.rs`); any other is read once
//! ([`Message::read`]) and classified ([`router::era`], the 2026-07-28 header checks):
//! 1. a `tools/call` read is a valid JSON-RPC 2.0 `tools/call` with an id and a tool name, and
//!    one rmcp's message model reads the same (id, params, `_meta`), so only a valid
//!    `tools/call` runs (as `message.rs`'s tests and the e2e
//!    `any_body_posted_gets_a_documented_answer_and_only_valid_tools_calls_run` assert);
//! 2. a `tasks/*` request's `params.taskId` is a string or the invalid-params error;
//! 3. the era and the header checks decide without a panic, with 2025-11-25 and 2026-07-28
//!    headers alike.
//!
//! Never a panic on the way.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use serde_json::Value;

use super::message::tests::{call_in, rmcp_reads};
use super::message::{Message, Params};
use super::router::era;
use super::v2025_11_25::task_id;
use super::v2026_07_28::headers;

/// One input: panics if an invariant above breaks.
fn target(body: &[u8]) {
    if std::str::from_utf8(body).is_err() {
        return;
    }
    if let Some(call) = call_in(body) {
        assert!(is_valid_tools_call(body), "an invalid call was read");
        assert_eq!(
            Some(call),
            rmcp_reads(body),
            "a call was read that rmcp reads differently"
        );
    }
    let Ok(Message::Request(request)) = Message::read(body) else {
        return;
    };
    if let Params::Other(params) = &request.params
        && request.method.starts_with("tasks/")
    {
        match (task_id(params), params.get("taskId")) {
            (Ok(id), Some(Value::String(given))) => assert_eq!(id, given),
            (Err(ErrorData { code, .. }), given) => {
                assert_eq!(code, ErrorCode::INVALID_PARAMS);
                assert!(!given.is_some_and(Value::is_string), "{given:?} refused");
            }
            (Ok(id), given) => panic!("task id {id} read from {given:?}"),
        }
    }
    for version in ["2025-11-25", "2026-07-28"] {
        let mut with = http::HeaderMap::new();
        with.insert(
            "mcp-protocol-version",
            http::HeaderValue::from_static(version),
        );
        with.insert("mcp-method", http::HeaderValue::from_static("tools/call"));
        let _ = era(&with, &request);
        let _ = headers::check(&with, &request, |_| None);
    }
}

/// Whether `body` is a `tools/call` the gateway may run: a JSON-RPC 2.0 request object with an
/// id (a string, or a number without a fractional part as a double holds it: `1.0` and `1e2`
/// are ids 1 and 100 to rmcp, as to a JavaScript client, and `1e-400` is 0), that method, and
/// params naming a tool. Read as plain JSON, independently of the parsers under test.
fn is_valid_tools_call(body: &[u8]) -> bool {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    request.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && request.get("method").and_then(Value::as_str) == Some("tools/call")
        && request
            .get("id")
            .is_some_and(|id| id.is_string() || id.as_f64().is_some_and(|n| n.fract() == 0.0))
        && request
            .get("params")
            .and_then(|params| params.get("name"))
            .is_some_and(Value::is_string)
}

/// The target: under `cargo test`, its corpus (`__fuzz__/mcp__fuzz__request/corpus`) and a
/// second of random bytes; under `cargo bolero test mcp::fuzz::request`, libFuzzer.
#[test]
fn request() {
    bolero::check!().for_each(target);
}
