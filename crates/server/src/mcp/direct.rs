//! `tools/call` answered directly: the common request (a plain stateless `tools/call` from a
//! client below protocol 2026-07-28) parsed with rmcp's own message types and answered by the
//! same handler code, without starting rmcp's per-request service (a serve loop task, a
//! handler task, channels and cancellation tokens per request: a profile of the server under
//! load charged them about as much CPU as the sandboxed call).
//!
//! The direct path never answers anything rmcp would answer differently: it takes a request
//! only when every check rmcp makes on it is one repeated here and passed, and declines the
//! rest (any `Origin`, `Accept` with parameters, protocol 2026-07-28 headers or `_meta`, any
//! other method or message), which rmcp then answers as before. It never refuses a request: a
//! refusal is always rmcp's. The checks repeated:
//! - `Host` is present, a valid authority and in `[mcp] allowed_hosts` (a listed name without
//!   a port allows any port; an empty list allows any host): rmcp's DNS-rebinding check;
//! - no `Origin` header (rmcp's origin check passes requests without one);
//! - `Accept` names both `application/json` and `text/event-stream`;
//! - `Content-Type` is `application/json` (checked by the caller);
//! - `MCP-Protocol-Version` is absent or a version rmcp knows that predates per-request
//!   metadata and the SEP-2243 standard headers (2026-07-28), and the request's `_meta` names
//!   no protocol version: rmcp's stateless path then checks nothing else;
//! - the body is one JSON-RPC request for `tools/call`, read as rmcp reads it into a
//!   `ClientJsonRpcMessage`: `jsonrpc` is `"2.0"`, `id` a number or string, no `result` or
//!   `error` key, and `params` the fields of rmcp's `CallToolRequestParams` (with its `_meta`
//!   kept apart), plus the 2025-11-25 task augmentation `task`, which rmcp does not read.
//!   The body is parsed straight into those types: rmcp's own parse buffers the message
//!   twice over for its untagged enums and flattened fields, which a profile under load
//!   charged about 8 us per call. Keys none of those types read are parsed as JSON values
//!   all the same ([`Unread`]), since rmcp's buffering parses every value: a number beyond
//!   the range of a double is an error there, where a skipped value would not be. A test and
//!   the fuzz target `mcp::fuzz::request` hold the two parses to the same answers.
//!
//! [`Direct::checks`] are the same checks for the other 2025-11-25 requests gatehouse answers
//! itself ([`super::legacy`]: the `tasks/*` methods, the answers to its elicitations).
//!
//! The answer is the one rmcp's stateless JSON path sends: HTTP 200, `application/json`, the
//! handler's error as one [`ServerJsonRpcMessage`](rmcp::model::ServerJsonRpcMessage), or its
//! result in the shape before 2026-07-28 (no `resultType`), as rmcp sends it to those peers,
//! written in one pass by [`super::result::response`].

use std::borrow::Cow;

use http::{HeaderMap, Method};
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, InputResponses, JsonObject, JsonRpcVersion2_0,
    ProtocolVersion, RequestId, RequestMetaObject,
};
use serde::Deserialize;

use crate::listener::AllowedHosts;

/// The `[mcp] allowed_hosts`, as the direct path checks them.
#[derive(Debug, Clone)]
pub struct Direct {
    hosts: AllowedHosts,
}

/// A `tools/call` the direct path answers.
#[derive(Debug)]
pub struct DirectCall {
    pub id: RequestId,
    pub params: CallToolRequestParams,
    /// The request's `_meta` (rmcp keeps it apart from the params).
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

impl Direct {
    /// `allowed_hosts` as configured; an entry that is neither a host nor `host:port` matches
    /// nothing.
    pub fn new(allowed_hosts: &[String]) -> Self {
        Self {
            hosts: AllowedHosts::new(allowed_hosts),
        }
    }

    /// The `tools/call` in this request, if the direct path answers it (see the module docs);
    /// `None`: rmcp answers it.
    pub fn call(&self, method: &Method, headers: &HeaderMap, body: &[u8]) -> Option<DirectCall> {
        if !self.checks(method, headers) {
            return None;
        }
        let Request {
            jsonrpc: _,
            id,
            method: _,
            params,
            result: Key(false),
            error: Key(false),
            _unread: Unread,
        } = serde_json::from_slice(body).ok()?
        else {
            return None;
        };
        let Params {
            meta,
            name,
            arguments,
            input_responses,
            request_state,
            task,
            _unread: Unread,
        } = params;
        let meta = meta.unwrap_or_default();
        if meta.protocol_version().is_some() {
            return None;
        }
        let mut params = CallToolRequestParams::new(name);
        params.arguments = arguments;
        params.input_responses = input_responses;
        params.request_state = request_state;
        Some(DirectCall {
            id,
            params,
            meta,
            task,
        })
    }

    /// Whether a request passes every check rmcp's stateless path makes before it reads the
    /// body (see the module docs), for a client below 2026-07-28.
    pub fn checks(&self, method: &Method, headers: &HeaderMap) -> bool {
        method == Method::POST
            && !headers.contains_key(http::header::ORIGIN)
            && self.hosts.allows(headers)
            && accepts_json_and_sse(headers)
            && legacy_protocol(headers)
    }
}

/// A `tools/call` request, in rmcp's types. Other keys are ignored, as rmcp ignores them.
#[derive(Deserialize)]
struct Request {
    #[expect(
        dead_code,
        reason = "parsed to be checked: rmcp takes no other version"
    )]
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[expect(dead_code, reason = "parsed to be checked: only `tools/call` is taken")]
    method: CallToolRequestMethod,
    params: Params,
    /// rmcp refuses a request that also has a `result` or an `error`, whatever its value.
    #[serde(default)]
    result: Key,
    #[serde(default)]
    error: Key,
    #[serde(flatten)]
    _unread: Unread,
}

/// The keys of an object that nothing here reads, parsed as JSON values and dropped, as rmcp
/// parses them (it buffers every value of a message): skipped instead, a value JSON allows
/// but rmcp refuses (a number beyond the range of a double) would pass here. Found by the
/// fuzz target `mcp::fuzz::request`. Usually there are none, and it costs nothing.
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
                while map
                    .next_entry::<serde::de::IgnoredAny, serde_json::Value>()?
                    .is_some()
                {}
                Ok(Unread)
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// `tools/call` params: the fields of rmcp's `CallToolRequestParams`, as it reads them, and the
/// 2025-11-25 task augmentation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
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

/// Whether a key is present, whatever its value (`null` included).
#[derive(Default)]
struct Key(bool);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer).map(|_| Self(true))
    }
}

/// `Accept` lists both media types of Streamable HTTP, without parameters (a quality weight
/// could exclude one: rmcp decides those).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(http::header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for media in value.split(',') {
            let media = media.trim();
            if media.contains([';', '"']) {
                return false;
            }
            json |= media.eq_ignore_ascii_case("application/json");
            sse |= media.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// `MCP-Protocol-Version` is absent, or one value naming a known version before 2026-07-28.
fn legacy_protocol(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all("mcp-protocol-version").iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => value.to_str().is_ok_and(|version| {
            version < ProtocolVersion::V_2026_07_28.as_str()
                && ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|known| known.as_str() == version)
        }),
        (Some(_), Some(_)) => false,
    }
}

/// Also the MCP fuzz target's fixtures and oracle (`super::fuzz`).
#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"gatehouse/idempotency_key":"k1"}}}"#;

    pub(in crate::mcp) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    pub(in crate::mcp) fn plain_call() -> Vec<(&'static str, &'static str)> {
        vec![
            ("host", "127.0.0.1:8080"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ]
    }

    pub(in crate::mcp) fn direct() -> Direct {
        Direct::new(&[
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ])
    }

    /// With header `name` set to `value` (`None`: removed), does the direct path take the call?
    fn takes(name: &'static str, value: Option<&str>) -> bool {
        let mut headers = headers(&plain_call());
        headers.remove(name);
        if let Some(value) = value {
            headers.insert(name, http::HeaderValue::from_str(value).unwrap());
        }
        direct()
            .call(&Method::POST, &headers, CALL.as_bytes())
            .is_some()
    }

    #[test]
    fn a_plain_tools_call_is_taken_with_its_id_params_and_meta() {
        let call = direct()
            .call(&Method::POST, &headers(&plain_call()), CALL.as_bytes())
            .expect("taken");
        assert_eq!(call.id, RequestId::Number(7));
        assert_eq!(call.params.name, "echo");
        assert_eq!(
            call.params.arguments.unwrap()["text"],
            serde_json::json!("hi")
        );
        let key = call
            .params
            .meta
            .as_ref()
            .and_then(|meta| meta.get("gatehouse/idempotency_key"))
            .or_else(|| call.meta.get("gatehouse/idempotency_key"));
        assert_eq!(key, Some(&serde_json::json!("k1")));
    }

    #[test]
    fn hosts_are_checked_like_rmcp_and_anything_else_is_declined() {
        assert!(takes("host", Some("localhost")));
        assert!(takes("host", Some("LOCALHOST:1")));
        assert!(takes("host", Some("[::1]:9")));
        assert!(!takes("host", Some("evil.example")));
        assert!(!takes("host", Some("127.0.0.1.evil.example")));
        assert!(!takes("host", Some("not a host")));
        assert!(!takes("host", None));
        let ported = Direct::new(&["gw.example:443".to_owned()]);
        let with_host = |host: &str| {
            let mut headers = headers(&plain_call());
            headers.insert("host", http::HeaderValue::from_str(host).unwrap());
            ported
                .call(&Method::POST, &headers, CALL.as_bytes())
                .is_some()
        };
        assert!(with_host("gw.example:443"));
        assert!(!with_host("gw.example:8443"));
        assert!(!with_host("gw.example"));
        let any = Direct::new(&[]);
        assert!(
            any.call(&Method::POST, &headers(&plain_call()), CALL.as_bytes())
                .is_some()
        );
    }

    #[test]
    fn origins_weighted_accepts_and_per_request_protocols_are_left_to_rmcp() {
        assert!(!takes("origin", Some("http://localhost:3000")));
        assert!(!takes("accept", Some("application/json")));
        assert!(!takes(
            "accept",
            Some("application/json;q=1, text/event-stream")
        ));
        assert!(!takes("accept", None));
        assert!(takes("accept", Some("text/event-stream,APPLICATION/JSON")));
        assert!(takes("mcp-protocol-version", None));
        assert!(takes("mcp-protocol-version", Some("2025-03-26")));
        assert!(!takes("mcp-protocol-version", Some("2026-07-28")));
        assert!(!takes("mcp-protocol-version", Some("2099-01-01")));
        assert!(!takes("mcp-protocol-version", Some("2025-11-26")));
        let per_request = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(
            direct()
                .call(
                    &Method::POST,
                    &headers(&plain_call()),
                    per_request.as_bytes()
                )
                .is_none()
        );
    }

    /// What rmcp's stateless path reads from `body`: the call, if it is a `tools/call`
    /// request without a per-request protocol version.
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
        meta.protocol_version()
            .is_none()
            .then_some((request.id, call.params, meta))
    }

    #[test]
    fn the_body_is_read_exactly_as_rmcp_reads_it() {
        let d = direct();
        let h = headers(&plain_call());
        let call =
            |rest: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call",{rest}}}"#);
        let named = |params: &str| call(&format!(r#""params":{{"name":"echo"{params}}}"#));
        let bodies = [
            CALL.to_owned(),
            named(""),
            named(r#","arguments":{"text":"hi","n":[1,{"k":null}]}"#),
            named(r#","arguments":null"#),
            named(r#","arguments":[]"#),
            named(r#","_meta":null"#),
            named(r#","_meta":5"#),
            named(r#","_meta":{"progressToken":3,"x":{"y":1}}"#),
            named(r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}"#),
            named(r#","_meta":{"io.modelcontextprotocol/protocolVersion":7}"#),
            named(r#","_meta":{},"_meta":{}"#),
            named(r#","requestState":"s","unknown":true"#),
            named(r#","name":"again""#),
            call(r#""params":{"name":5}"#),
            call(r#""params":{}"#),
            call(r#""params":null"#),
            call(r#""params":[]"#),
            call(r#""params":{"name":"echo"},"result":null"#),
            call(r#""params":{"name":"echo"},"error":{"code":1,"message":"m"}"#),
            call(r#""params":{"name":"echo"},"extra":[1,2]"#),
            call(r#""params":{"name":"echo"},"method":"tools/call""#),
            call(r#""params":{"name":"echo"},"id":2"#),
            call(r#""params":{"name":"echo"},"jsonrpc":"2.0""#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":"abc""#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1.0"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1e2"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1.5"#),
            // A number that a double holds as an integer is one (found by the fuzz target).
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":1e-400"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":0.0"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":-7"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":9223372036854775808"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":null"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1"#, r#""id":[1]"#),
            call(r#""params":{"name":"echo"}"#).replace(r#""id":1,"#, ""),
            call(r#""params":{"name":"echo"}"#).replace(r#""2.0""#, r#""1.0""#),
            call(r#""params":{"name":"echo"}"#).replace(r#""jsonrpc":"2.0","#, ""),
            call(r#""params":{"name":"echo"}"#).replace("tools/call", "tools/list"),
            call(r#""params":{"name":"echo"}"#).replace("tools/call", "Tools/Call"),
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
            let ours = d
                .call(&Method::POST, &h, body.as_bytes())
                .map(|call| (call.id, call.params, call.meta));
            assert_eq!(ours, rmcp_reads(body.as_bytes()), "{body}");
            taken += usize::from(ours.is_some());
        }
        // Both take the well-formed calls (not just agree on refusing everything).
        assert!(taken >= 12, "{taken}");
    }

    #[test]
    fn only_a_posted_tools_call_request_is_taken() {
        let d = direct();
        let h = headers(&plain_call());
        assert!(d.call(&Method::GET, &h, CALL.as_bytes()).is_none());
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call""#,
            "",
        ] {
            assert!(
                d.call(&Method::POST, &h, body.as_bytes()).is_none(),
                "{body}"
            );
        }
    }
}
