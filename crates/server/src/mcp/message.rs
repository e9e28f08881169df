//! One JSON-RPC message, read once: the router's first step after the HTTP checks.
//!
//! A POST body is one JSON-RPC 2.0 message (batches are not part of Streamable HTTP):
//! - a **request**: `method` and an `id` (a number or a string), no `result` or `error` key;
//! - a **notification**: `method` and no `id` (a `null` id too, as rmcp's message model reads
//!   it), no `result` or `error` key;
//! - a **response**: an `id` and exactly one of `result` and `error`, no `method`: the client's
//!   answer to a request the gateway sent it.
//!
//! Anything else is the invalid-request error (-32600); what is not JSON, the parse error
//! (-32700). Both before anything runs.
//!
//! The params of `tools/call`, the one request on the hot path, are read straight into rmcp's
//! `CallToolRequestParams` with its `_meta` kept apart, plus the 2025-11-25 task augmentation
//! `task`, which rmcp does not model ([`Call`]); the params of every other method stay a JSON
//! object, read where its method is answered. Keys that nothing reads are still parsed as JSON
//! values ([`Unread`]), so a value JSON allows but the SDKs' models refuse (a number beyond the
//! range of a double) is refused here too. A test and the fuzz target `mcp::fuzz::request` hold
//! a `tools/call` read here to what rmcp's own message model reads from the same bytes.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequestParams, InputResponses, JsonObject, JsonRpcVersion2_0, RequestId,
    RequestMetaObject,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// A message the router read.
#[derive(Debug)]
pub enum Message {
    /// A request: it gets an answer.
    Request(Request),
    /// A notification: it gets 202 and no answer.
    Notification {
        /// The method, e.g. `notifications/initialized`.
        method: String,
        /// Its params (empty when absent or `null`).
        params: JsonObject,
    },
    /// The client's answer to a request of the gateway's: `result`, or `{"error": ...}`.
    Response {
        /// The id the gateway's request had.
        id: RequestId,
        /// The result, or the error as `{"error": ...}`.
        answer: Value,
    },
}

/// A request: its id, method and params.
#[derive(Debug)]
pub struct Request {
    /// The id the answer echoes.
    pub id: RequestId,
    /// The method, e.g. `tools/list`.
    pub method: String,
    /// Its params.
    pub params: Params,
}

/// A request's params.
#[derive(Debug)]
pub enum Params {
    /// `tools/call`'s, in rmcp's types.
    Call(Box<Call>),
    /// Any other method's: a JSON object (empty when absent or `null`).
    Other(JsonObject),
}

/// The params of a `tools/call`.
#[derive(Debug)]
pub struct Call {
    /// The call, as rmcp reads it (its `_meta` kept apart).
    pub params: CallToolRequestParams,
    /// The request's `_meta`.
    pub meta: RequestMetaObject,
    /// The 2025-11-25 task augmentation (`params.task`), if the client asked for a task.
    pub task: Option<TaskMetadata>,
}

/// `params.task` of a task-augmented request (2025-11-25).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct TaskMetadata {
    /// How long the client would like the task kept, in milliseconds.
    #[serde(default)]
    pub ttl: Option<u64>,
    #[serde(flatten)]
    _unread: Unread,
}

/// Why a body is not a message the gateway reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Not JSON (-32700).
    NotJson(String),
    /// JSON, but not one JSON-RPC 2.0 request, notification or response (-32600).
    NotJsonRpc,
    /// A request whose params do not read (-32602), with its id.
    Params(RequestId, String),
}

impl Request {
    /// The request's `_meta` (`params._meta`): empty when absent; `None` when it is not an
    /// object.
    pub fn meta(&self) -> Option<RequestMetaObject> {
        match &self.params {
            Params::Call(call) => Some(call.meta.clone()),
            Params::Other(params) => match params.get("_meta") {
                None | Some(Value::Null) => Some(RequestMetaObject::default()),
                Some(meta @ Value::Object(_)) => serde_json::from_value(meta.clone()).ok(),
                Some(_) => None,
            },
        }
    }
}

impl Message {
    /// Reads `body` (UTF-8, checked by the caller).
    pub fn read(body: &[u8]) -> Result<Self, Unreadable> {
        let envelope = match serde_json::from_slice::<Envelope<'_>>(body) {
            Ok(envelope) => envelope,
            Err(error) => {
                return Err(
                    match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                        Ok(_) => Unreadable::NotJsonRpc,
                        Err(_) => Unreadable::NotJson(error.to_string()),
                    },
                );
            }
        };
        let Envelope {
            jsonrpc: _,
            id,
            method,
            params,
            result,
            error,
            _unread: Unread,
        } = envelope;
        match (method, id, result.0, error.0) {
            (Some(method), Some(id), None, None) => {
                let params =
                    read_params(&method, params).map_err(|e| Unreadable::Params(id.clone(), e))?;
                Ok(Self::Request(Request {
                    id,
                    method: method.into_owned(),
                    params,
                }))
            }
            (Some(method), None, None, None) => {
                let params = match params.map(|raw| serde_json::from_str::<Value>(raw.get())) {
                    Some(Ok(Value::Object(params))) => params,
                    Some(Ok(Value::Null)) | None => JsonObject::new(),
                    Some(_) => return Err(Unreadable::NotJsonRpc),
                };
                Ok(Self::Notification {
                    method: method.into_owned(),
                    params,
                })
            }
            (None, Some(id), Some(result), None) if params.is_none() => {
                Ok(Self::Response { id, answer: result })
            }
            (None, Some(id), None, Some(error)) if params.is_none() => Ok(Self::Response {
                id,
                answer: serde_json::json!({ "error": error }),
            }),
            _ => Err(Unreadable::NotJsonRpc),
        }
    }
}

fn read_params(method: &str, params: Option<&RawValue>) -> Result<Params, String> {
    let text = params.map_or("null", RawValue::get);
    if method == "tools/call" {
        let CallWire {
            meta,
            name,
            arguments,
            input_responses,
            request_state,
            task,
            _unread: Unread,
        } = serde_json::from_str(text).map_err(|e| format!("tools/call params: {e}"))?;
        let mut params = CallToolRequestParams::new(name);
        params.arguments = arguments;
        params.input_responses = input_responses;
        params.request_state = request_state;
        return Ok(Params::Call(Box::new(Call {
            params,
            meta: meta.unwrap_or_default(),
            task,
        })));
    }
    match serde_json::from_str::<Value>(text).map_err(|e| format!("params: {e}"))? {
        Value::Object(params) => Ok(Params::Other(params)),
        Value::Null => Ok(Params::Other(JsonObject::new())),
        _ => Err("params must be an object".to_owned()),
    }
}

/// A JSON-RPC message as far as routing goes. Other keys are parsed and dropped ([`Unread`]).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[expect(
        dead_code,
        reason = "parsed to be checked: JSON-RPC 2.0 is the only version"
    )]
    jsonrpc: JsonRpcVersion2_0,
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    /// Whether the key is there, whatever its value (`null` included), and its value.
    #[serde(default)]
    result: Slot,
    #[serde(default)]
    error: Slot,
    #[serde(flatten)]
    _unread: Unread,
}

/// A key that may be absent, `null`, or a value: `Slot(None)` only when absent.
#[derive(Default)]
struct Slot(Option<Value>);

impl<'de> Deserialize<'de> for Slot {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| Self(Some(value)))
    }
}

/// `tools/call` params: the fields of rmcp's `CallToolRequestParams`, as it reads them, and the
/// 2025-11-25 task augmentation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallWire {
    #[serde(rename = "_meta", default)]
    meta: Option<RequestMetaObject>,
    name: Cow<'static, str>,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(default)]
    input_responses: Option<InputResponses>,
    #[serde(default)]
    request_state: Option<String>,
    #[serde(default)]
    task: Option<TaskMetadata>,
    #[serde(flatten)]
    _unread: Unread,
}

/// The keys of an object that nothing here reads, parsed as JSON values and dropped, as the
/// SDKs' models parse them: skipped instead, a value JSON allows but they refuse (a number
/// beyond the range of a double) would pass here. Found by the fuzz target
/// `mcp::fuzz::request`. Usually there are none, and it costs nothing.
#[derive(Debug, Clone, Copy, Default)]
struct Unread;

impl<'de> Deserialize<'de> for Unread {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = Unread;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Unread, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, Value>()?.is_some() {}
                Ok(Unread)
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// Also the MCP fuzz target's oracle (`super::fuzz`).
#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"gatehouse/idempotency_key":"k1"}}}"#;

    /// The request `body` is.
    pub(in crate::mcp) fn request(body: &Value) -> Request {
        match Message::read(body.to_string().as_bytes()).unwrap() {
            Message::Request(request) => request,
            other => panic!("not a request: {other:?}"),
        }
    }

    /// The `tools/call` read from `body`, if it is one.
    pub(in crate::mcp) fn call_in(
        body: &[u8],
    ) -> Option<(RequestId, CallToolRequestParams, RequestMetaObject)> {
        match Message::read(body).ok()? {
            Message::Request(Request {
                id,
                params: Params::Call(call),
                ..
            }) => Some((id, call.params, call.meta)),
            _ => None,
        }
    }

    /// What rmcp's message model reads from `body`: the call, if it is a `tools/call` request.
    pub(in crate::mcp) fn rmcp_reads(
        body: &[u8],
    ) -> Option<(RequestId, CallToolRequestParams, RequestMetaObject)> {
        use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta};
        let ClientJsonRpcMessage::Request(mut request) = serde_json::from_slice(body).ok()? else {
            return None;
        };
        let meta = std::mem::take(request.request.get_meta_mut());
        let ClientRequest::CallToolRequest(call) = request.request else {
            return None;
        };
        Some((request.id, call.params, meta))
    }

    #[test]
    fn a_tools_call_is_read_with_its_id_params_and_meta() {
        let (id, params, meta) = call_in(CALL.as_bytes()).expect("a call");
        assert_eq!(id, RequestId::Number(7));
        assert_eq!(params.name, "echo");
        assert_eq!(params.arguments.unwrap()["text"], serde_json::json!("hi"));
        assert_eq!(
            meta.get("gatehouse/idempotency_key"),
            Some(&serde_json::json!("k1"))
        );
    }

    #[test]
    fn a_tools_call_is_read_exactly_as_rmcp_reads_it() {
        let call =
            |rest: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call",{rest}}}"#);
        let named = |params: &str| call(&format!(r#""params":{{"name":"echo"{params}}}"#));
        let bodies = [
            CALL.to_owned(),
            named(""),
            named(r#","arguments":{"text":"hi","n":[1,{"k":null}]}"#),
            named(r#","arguments":null"#),
            named(r#","_meta":null"#),
            named(r#","_meta":{"progressToken":3,"x":{"y":1}}"#),
            named(r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}"#),
            named(r#","requestState":"s","unknown":true"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":"abc""#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1.0"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1e2"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1.5"#),
            // A number that a double holds as an integer is one (found by the fuzz target).
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1e-400"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":0.0"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":-7"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":9223372036854775808"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":[1]"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""2.0""#, r#""1.0""#),
            call(r#""params":{"name":"echo"}"#).replace(r#""jsonrpc":"2.0","#, ""),
            call(r#""params":{"name":"echo"},"result":null"#),
            call(r#""params":{"name":"echo"},"error":{"code":1,"message":"m"}"#),
            call(r#""params":{"name":"echo"},"extra":[1,2]"#),
            // A number beyond a double's range in a key nothing reads, at each level (found by
            // the fuzz target): rmcp parses every value and refuses it; within range, both take it.
            named(&format!(r#","unread":1{}"#, "0".repeat(400))),
            named(r#","unread":1e300"#),
            named(&format!(
                r#","task":{{"ttl":1,"unread":1{}}}"#,
                "0".repeat(400)
            )),
            named(r#","task":{"ttl":1,"unread":1e300}"#),
            call(&format!(
                r#""params":{{"name":"echo"}},"unread":1{}"#,
                "0".repeat(400)
            )),
            call(r#""params":{"name":"echo"},"unread":-1e300"#),
            format!(" \n{}\t", named("")),
            format!("{} x", named("")),
            format!("[{}]", named("")),
        ];
        let mut taken = 0;
        for body in &bodies {
            let ours = call_in(body.as_bytes());
            let theirs = rmcp_reads(body.as_bytes());
            // Where rmcp reads a call, the router reads the same one; where the router reads
            // one, it is a call rmcp reads.
            assert_eq!(ours, theirs, "{body}");
            taken += usize::from(ours.is_some());
        }
        // Both take the well-formed calls (not just agree on refusing everything).
        assert!(taken >= 12, "{taken}");
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let read = |body: &str| Message::read(body.as_bytes());
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Ok(Message::Request(Request { ref method, params: Params::Other(_), .. })) if method == "tools/list"
        ));
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification { ref method, .. }) if method == "notifications/initialized"
        ));
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":"e-1","result":{"action":"accept"}}"#),
            Ok(Message::Response { ref answer, .. }) if answer["action"] == "accept"
        ));
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":"e-1","error":{"code":1,"message":"no"}}"#),
            Ok(Message::Response { ref answer, .. }) if answer["error"]["code"] == 1
        ));
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#)
                .unwrap_err()
                .clone(),
            Unreadable::Params(
                RequestId::Number(1),
                "tools/call params: invalid type: integer `5`, expected a string at line 1 column 9"
                    .to_owned()
            )
        );
        for not_json_rpc in [
            r#"{"hello":1}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":5}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
            "5",
        ] {
            assert_eq!(
                read(not_json_rpc).unwrap_err(),
                Unreadable::NotJsonRpc,
                "{not_json_rpc}"
            );
        }
        assert!(matches!(read("{not json"), Err(Unreadable::NotJson(_))));
    }
}
