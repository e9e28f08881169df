//! Coverage-guided fuzz target of the MCP endpoint's reading of a POST body (issue 43, item 12;
//! the engine, and how to run a target for hours: `gatehouse_host`'s `fuzz` module). A body
//! that is not UTF-8 gets the parse error first (`server.rs`); any other goes where
//! `McpServer` sends it, with the headers of a plain 2025-11-25 `tools/call`:
//! 1. the direct path (`Direct::call`): a call it takes is one rmcp reads the same (id,
//!    params, `_meta`) and a valid JSON-RPC 2.0 `tools/call` with an id and a tool name, so
//!    only a valid `tools/call` runs (as `direct.rs`'s tests and the e2e
//!    `any_body_posted_gets_a_documented_answer_and_only_valid_tools_calls_run` assert);
//! 2. the 2025-11-25 routing (`legacy::Asked::read`, what `Legacy::route` acts on): only a
//!    response to one of gatehouse's own elicitations is taken as an answer, and a `tasks/*`
//!    request's `params.taskId` is a string or the invalid-params error;
//! 3. rmcp's message parse (`ClientJsonRpcMessage`), which answers everything else.
//!
//! Never a panic on the way.

use http::Method;
use rmcp::ErrorData;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode};
use serde_json::Value;

use super::direct::tests::{direct, headers, plain_call, rmcp_reads};
use super::legacy::{Asked, OWN_ID, task_id};

/// One input: panics if an invariant above breaks.
fn target(body: &[u8]) {
    // The server refuses a body that is not UTF-8 before any of them (the crash this target
    // found: serde_json skips unread fields unchecked, so the direct path took a call with
    // invalid UTF-8 in one).
    if std::str::from_utf8(body).is_err() {
        return;
    }
    if let Some(call) = direct().call(&Method::POST, &headers(&plain_call()), body) {
        assert!(
            is_valid_tools_call(body),
            "the direct path took an invalid call"
        );
        assert_eq!(
            Some((call.id, call.params, call.meta)),
            rmcp_reads(body),
            "the direct path read a call rmcp reads differently"
        );
    }
    match Asked::read(body) {
        Asked::Answer { id, answer: _ } => assert!(id.starts_with(OWN_ID), "answer to {id}"),
        Asked::Request { method, params, .. } if method.starts_with("tasks/") => {
            match (task_id(&params), params.get("taskId")) {
                (Ok(id), Some(Value::String(given))) => assert_eq!(id, given),
                (Err(ErrorData { code, .. }), given) => {
                    assert_eq!(code, ErrorCode::INVALID_PARAMS);
                    assert!(!given.is_some_and(Value::is_string), "{given:?} refused");
                }
                (Ok(id), given) => panic!("task id {id} read from {given:?}"),
            }
        }
        Asked::Request { .. } | Asked::Pass => {}
    }
    let _ = serde_json::from_slice::<ClientJsonRpcMessage>(body);
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
