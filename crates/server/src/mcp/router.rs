//! The one front door: every POST to the endpoint, once its caller is identified, is checked,
//! read and classified here once, then answered by its protocol version's folder.
//!
//! 1. **HTTP checks**, the same for every version and method, before the body is read:
//!    `Host` in `[mcp] allowed_hosts` (DNS rebinding; 403), `Origin` absent or allowed
//!    ([`AllowedOrigins`]; 403), the method `POST`, or `GET` for a 2025-11-25 event stream
//!    (405: the gateway keeps no protocol state for a session, so there is nothing to `DELETE`;
//!    what it keeps of its calls, for rules over them, ends with its idle timeout), `Accept` naming
//!    both `application/json` and `text/event-stream` (a `GET`: the latter; 406),
//!    `Content-Type` `application/json` (415). They are checks, never path selectors: a
//!    request that passes them gets every feature its version and declared capabilities
//!    allow. A `GET` is answered by [`Router::listen`], without a body.
//! 2. **One message** ([`Message::read`]): not UTF-8 or not JSON, the parse error (-32700);
//!    not one JSON-RPC message, the invalid request (-32600); both HTTP 400, nothing runs. A
//!    notification gets 202 (a `notifications/cancelled` with an `Mcp-Session-Id` cancels
//!    that session's call first, if it runs here: [`super::v2025_11_25::session`]); a
//!    response, 202 if it answers a request of this gateway's (an elicitation of a held
//!    approval), else -32600.
//! 3. **The era** of a request ([`era`]): `initialize` (unless its own `_meta` makes it a
//!    2026-07-28 request, where the method is removed) and any request without self-contained
//!    metadata at a version with the handshake (the `MCP-Protocol-Version` header, else
//!    2025-03-26) go to [`super::v2025_11_25`]; `server/discover`, a request whose `_meta`
//!    carries `io.modelcontextprotocol/protocolVersion` and `.../clientCapabilities`, or one
//!    at 2026-07-28, to [`super::v2026_07_28`]. On the way, the version header and the
//!    request's own version must agree (-32020), an `initialize`'s header and its
//!    `protocolVersion` too (-32600), and an unknown version in the header alone is -32022;
//!    each HTTP 400.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, ProtocolVersion, RequestId};
use serde_json::Value;

use super::call::Gateway;
use super::caller::Caller;
use super::message::{Message, Params, Request, Unreadable};
use super::origins::AllowedOrigins;
use super::reply::{self, Body, Era, Failure};
use super::v2025_11_25::session::{OWN_ID, Session};
use super::v2026_07_28::held::Held;
use super::watch::Watchers;
use super::{v2025_11_25, v2026_07_28};
use crate::access_log::Note;
use crate::listener::AllowedHosts;

/// The front door: the HTTP checks, and what each version answers with.
#[derive(Debug)]
pub struct Router {
    hosts: AllowedHosts,
    origins: AllowedOrigins,
    session: Arc<Session>,
    held: Arc<Held>,
    watchers: Arc<Watchers>,
}

impl Router {
    /// With `[mcp] allowed_hosts`, the origins allowed (the loopback ones included where
    /// they apply), and how long a 2026-07-28 call waiting for its caller's answers is held
    /// (`[mcp] input_wait_ms`), and when a call that may run as a task goes on as one
    /// (`[mcp] task_after_ms`).
    pub fn new(
        allowed_hosts: &[String],
        allowed_origins: &[String],
        input_wait: Duration,
        task_after: Duration,
    ) -> Self {
        Self {
            hosts: AllowedHosts::new(allowed_hosts),
            origins: AllowedOrigins::new(allowed_origins),
            session: Arc::default(),
            held: Arc::new(Held::new(input_wait, task_after)),
            watchers: Arc::default(),
        }
    }

    /// Step 1 of the module docs: `Err` is the refusal.
    #[expect(
        clippy::result_large_err,
        reason = "the refusal is the response itself, answered at once; nothing carries it further"
    )]
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Response<Body>> {
        self.admits(headers)?;
        if method == Method::GET {
            let (_, sse) = accepts(headers);
            if !sse {
                return Err(reply::plain(
                    StatusCode::NOT_ACCEPTABLE,
                    "not_acceptable",
                    "a GET of the endpoint opens an event stream: the client must accept text/event-stream",
                ));
            }
            return Ok(());
        }
        if method != Method::POST {
            return Err(reply::method_not_allowed(
                "GET, POST",
                "the MCP endpoint takes POST, and GET for a 2025-11-25 event stream: the gateway keeps no protocol state for a session, so there is nothing to DELETE",
            ));
        }
        if accepts(headers) != (true, true) {
            return Err(reply::plain(
                StatusCode::NOT_ACCEPTABLE,
                "not_acceptable",
                "the client must accept both application/json and text/event-stream",
            ));
        }
        if !is_json(headers) {
            return Err(reply::plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the body must be application/json",
            ));
        }
        Ok(())
    }

    /// The first HTTP checks, for every path of the listener that runs calls (MCP's, A2A's):
    /// `Host` in `[mcp] allowed_hosts`, `Origin` absent or allowed. `Err` is the refusal.
    #[expect(
        clippy::result_large_err,
        reason = "the refusal is the response itself, answered at once; nothing carries it further"
    )]
    pub fn admits(&self, headers: &HeaderMap) -> Result<(), Response<Body>> {
        if !self.hosts.allows(headers) {
            return Err(reply::plain(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                "this endpoint does not answer that Host; an operator lists the names it answers in `[mcp] allowed_hosts`",
            ));
        }
        if !self.origins.allows(headers) {
            return Err(reply::plain(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                "this endpoint does not answer pages of that Origin; an operator lists them in `[mcp] allowed_origins`",
            ));
        }
        Ok(())
    }

    /// A `GET` of the endpoint (it passed [`Router::check`]): a 2025-11-25 caller's event
    /// stream of list changes and of the resources it subscribed to ([`super::watch`]), and,
    /// with `connected`, of the accounts it connects. A 2026-07-28 client listens with
    /// `subscriptions/listen` instead (405).
    pub fn listen(
        &self,
        gateway: &Gateway,
        caller: Caller,
        headers: &HeaderMap,
        connected: Option<tokio::sync::broadcast::Receiver<crate::oauth::Connected>>,
    ) -> Response<Body> {
        let modern = headers
            .get("mcp-protocol-version")
            .is_some_and(|version| version.as_bytes() == b"2026-07-28");
        if modern {
            return reply::method_not_allowed(
                "POST",
                "2026-07-28 has no GET stream: POST subscriptions/listen",
            );
        }
        v2025_11_25::listen(gateway, &self.session, &self.watchers, caller, connected)
    }

    /// This configuration was replaced (a reload): its open streams end ([`super::watch`]).
    pub fn retire(&self) {
        self.watchers.retire();
    }

    /// Steps 2 and 3 of the module docs, then the version's answer.
    pub async fn route(
        &self,
        gateway: &Gateway,
        caller: Caller,
        headers: &HeaderMap,
        body: &Bytes,
        note: &Note,
    ) -> Response<Body> {
        // JSON is UTF-8 (RFC 8259), and serde_json skips a key or value that nothing reads
        // without checking its bytes: unchecked, a `tools/call` carrying invalid UTF-8 in a
        // field nobody reads would run.
        if let Err(error) = std::str::from_utf8(body) {
            return reply::refused(None, &parse_error(&error.to_string()));
        }
        let request = match Message::read(body) {
            Ok(Message::Request(request)) => request,
            Ok(Message::Notification { method, params }) => {
                tracing::debug!(%method, "mcp notification");
                // 2025-11-25 cancellation: a call of this client's session, if one runs here.
                if method == "notifications/cancelled"
                    && let Some(session_id) = v2025_11_25::session_id(headers)
                {
                    self.session.cancelled(&caller, session_id, &params);
                }
                return reply::accepted();
            }
            Ok(Message::Response { id, answer }) => {
                let ours = matches!(&id, RequestId::String(own) if own.starts_with(OWN_ID));
                if ours {
                    // An answer that reaches another gateway changes nothing here.
                    self.session.answered(&caller, &id, answer);
                    return reply::accepted();
                }
                return reply::refused(
                    Some(&id),
                    &ErrorData::invalid_request(
                        "Invalid Request: this is not an answer to a request of this gateway's",
                        None,
                    ),
                );
            }
            Err(Unreadable::NotJson(error)) => return reply::refused(None, &parse_error(&error)),
            Err(Unreadable::NotJsonRpc) => {
                return reply::refused(
                    None,
                    &ErrorData::invalid_request(
                        "Invalid Request: the body is JSON but not a JSON-RPC 2.0 request, notification or response MCP knows",
                        None,
                    ),
                );
            }
            Err(Unreadable::Params(id, error)) => {
                let failure = Failure::from(ErrorData::invalid_params(error, None));
                return reply::error(&Era::Stateless, Some(&id), &failure);
            }
        };
        match era(headers, &request) {
            Err(error) => reply::refused(Some(&request.id), &error),
            Ok(Era::Handshake(version)) => {
                let session = v2025_11_25::session_id(headers).map(str::to_owned);
                let caller = caller.in_session(session);
                v2025_11_25::answer(
                    gateway,
                    &self.session,
                    version,
                    caller,
                    request,
                    headers,
                    note,
                )
                .await
            }
            Ok(Era::Stateless) => {
                let caller = caller.in_session(trace_session(headers, &request));
                let with = v2026_07_28::With {
                    held: &self.held,
                    watchers: &self.watchers,
                };
                v2026_07_28::answer(gateway, with, caller, request, headers, note).await
            }
        }
    }
}

/// A stateless request's session: the trace id of the W3C trace context it sends, in its
/// `_meta` (SEP-414) or else its `traceparent` header; none (the principal's window) without
/// a valid one.
fn trace_session(headers: &HeaderMap, request: &Request) -> Option<String> {
    let meta = request.meta().unwrap_or_default();
    let traceparent = meta
        .get_traceparent()
        .or_else(|| headers.get("traceparent")?.to_str().ok())?;
    gatehouse_core::ids::trace_id_of(traceparent).map(str::to_owned)
}

/// Step 3 of the module docs: the era of `request`, or why it is refused (with HTTP 400).
pub fn era(headers: &HeaderMap, request: &Request) -> Result<Era, ErrorData> {
    let header = match headers.get("mcp-protocol-version").map(|v| v.to_str()) {
        None => None,
        Some(Ok(header)) => Some(header),
        Some(Err(_)) => {
            return Err(ErrorData::invalid_request(
                "Invalid Request: the MCP-Protocol-Version header is not text",
                None,
            ));
        }
    };
    let meta = request.meta().unwrap_or_default();
    let own = meta.protocol_version();
    let known = |version: &str| {
        ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|known| known.as_str() == version)
    };
    if let Some(header) = header
        && own.is_none()
        && !known(header)
    {
        let requested = serde_json::from_value(Value::String(header.to_owned()))
            .unwrap_or(ProtocolVersion::V_2025_03_26);
        return Err(ErrorData::unsupported_protocol_version(
            requested,
            &v2026_07_28::supported(),
        ));
    }
    let self_contained = request.method == "server/discover"
        || meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty();
    // An `initialize` starts the handshake, unless it is a self-contained request of a
    // version without one (2026-07-28 removed the method: -32601 there).
    if request.method == "initialize"
        && !(self_contained && own.as_ref().is_some_and(|own| !own.has_initialize()))
    {
        let asked = match &request.params {
            Params::Other(params) => params.get("protocolVersion").and_then(Value::as_str),
            Params::Call(_) => None,
        };
        if let (Some(header), Some(asked)) = (header, asked)
            && header != asked
        {
            return Err(ErrorData::invalid_request(
                format!(
                    "Invalid Request: the MCP-Protocol-Version header ({header}) does not match initialize params.protocolVersion ({asked})"
                ),
                None,
            ));
        }
        return Ok(Era::Handshake(ProtocolVersion::LATEST_WITH_INITIALIZE));
    }
    match (&own, header) {
        (Some(own), None) => {
            return Err(ErrorData::header_mismatch(
                format!(
                    "the request's _meta names protocol version {own}, which requires the MCP-Protocol-Version header"
                ),
                None,
            ));
        }
        (Some(own), Some(header)) if header != own.as_str() => {
            return Err(ErrorData::header_mismatch(
                format!(
                    "the MCP-Protocol-Version header ({header}) does not match the request's _meta protocolVersion ({own})"
                ),
                None,
            ));
        }
        _ => {}
    }
    let version = own
        .or_else(|| header.and_then(|h| serde_json::from_value(Value::String(h.to_owned())).ok()))
        .unwrap_or(ProtocolVersion::V_2025_03_26);
    if self_contained || !version.has_initialize() {
        return Ok(Era::Stateless);
    }
    Ok(Era::Handshake(version))
}

fn parse_error(error: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::PARSE_ERROR,
        format!("Parse error: the body is not JSON: {error}"),
        None,
    )
}

/// Which of the two media types of Streamable HTTP `Accept` lists (their parameters aside):
/// `application/json`, `text/event-stream`.
fn accepts(headers: &HeaderMap) -> (bool, bool) {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(http::header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            continue;
        };
        for media in value.split(',') {
            let essence = media.split(';').next().unwrap_or_default().trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    (json, sse)
}

/// Whether the request says its body is `application/json`.
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::message::tests::request;

    fn with_version(version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(version) = version {
            headers.insert("mcp-protocol-version", version.parse().unwrap());
        }
        headers
    }

    fn meta(version: &str) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        })
    }

    /// (header, body, the era or the refusal's JSON-RPC code), one case a line.
    #[test]
    fn each_request_gets_its_era_or_its_refusal() {
        let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
        let list_with = |meta: Value| json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": meta } });
        let initialize = |version: &str| json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": version, "capabilities": {} } });
        let discover = |meta: Value| json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": { "_meta": meta } });
        let handshake = |v: &str| Ok(Era::Handshake(serde_json::from_value(json!(v)).unwrap()));
        let cases: Vec<(Option<&str>, Value, Result<Era, i32>)> = vec![
            (None, list.clone(), handshake("2025-03-26")),
            (Some("2025-11-25"), list.clone(), handshake("2025-11-25")),
            (Some("2025-06-18"), list.clone(), handshake("2025-06-18")),
            (Some("2026-07-28"), list.clone(), Ok(Era::Stateless)),
            (Some("2099-01-01"), list.clone(), Err(-32022)),
            (
                Some("2026-07-28"),
                list_with(meta("2026-07-28")),
                Ok(Era::Stateless),
            ),
            (None, list_with(meta("2026-07-28")), Err(-32020)),
            (
                Some("2025-11-25"),
                list_with(meta("2026-07-28")),
                Err(-32020),
            ),
            (
                Some("v999.0.0"),
                discover(meta("v999.0.0")),
                Ok(Era::Stateless),
            ),
            (Some("2026-07-28"), discover(json!({})), Ok(Era::Stateless)),
            (None, initialize("2025-11-25"), handshake("2025-11-25")),
            (
                Some("2025-11-25"),
                initialize("2025-11-25"),
                handshake("2025-11-25"),
            ),
            (Some("2025-06-18"), initialize("2025-11-25"), Err(-32600)),
            (None, initialize("2026-07-28"), handshake("2025-11-25")),
            // 2026-07-28 removed `initialize`: a self-contained one is answered -32601 there.
            (
                Some("2026-07-28"),
                json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": { "protocolVersion": "2026-07-28", "_meta": meta("2026-07-28") } }),
                Ok(Era::Stateless),
            ),
        ];
        for (header, body, expected) in cases {
            let got = era(&with_version(header), &request(&body));
            match (got, expected) {
                (Ok(got), Ok(expected)) => {
                    // An initialize's version is negotiated where it is answered.
                    if body["method"] != "initialize" || expected == Era::Stateless {
                        assert_eq!(got, expected, "{header:?} {body}");
                    }
                }
                (Err(error), Err(code)) => {
                    assert_eq!(error.code.0, code, "{header:?} {body}: {error:?}");
                }
                (got, expected) => panic!("{header:?} {body}: {got:?} where {expected:?}"),
            }
        }
    }

    #[test]
    fn accept_and_content_type_are_read_without_their_parameters() {
        let accept = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::ACCEPT, value.parse().unwrap());
            accepts(&headers) == (true, true)
        };
        assert!(accept("application/json, text/event-stream"));
        assert!(accept("text/event-stream;q=1, APPLICATION/JSON"));
        assert!(!accept("application/json"));
        assert!(!accept("*/*"));
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(is_json(&headers));
        headers.insert(http::header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!is_json(&headers));
    }
}
