//! How the endpoint answers, in one place: a JSON-RPC message as JSON, an event stream of
//! messages, HTTP refusals with a plain JSON body, and 202 for what needs no answer.
//!
//! The HTTP status of a JSON-RPC error depends on the era of the request ([`Era`]): a client of
//! the initialize handshake (2025-11-25 and before) reads JSON-RPC errors only from a 2xx
//! answer, so every error is 200; a 2026-07-28 request gets the status the specification maps
//! its code to (SEP-2243 and SEP-2575: -32020, -32021, -32022 and a malformed `_meta` 400,
//! -32601 404, the rest 200).

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::{Value, json};

/// A response body.
pub type Body = BoxBody<Bytes, Infallible>;

/// Which protocol line a request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// The initialize handshake: 2025-11-25 and the versions before it, at this version.
    Handshake(rmcp::model::ProtocolVersion),
    /// Self-contained requests: 2026-07-28.
    Stateless,
}

/// What a request ends in: a JSON-RPC result or error.
pub type Answer = Result<Value, Failure>;

/// A JSON-RPC error, and whether it comes from a malformed request `_meta` (a 400 on
/// 2026-07-28, where other invalid params are 200).
#[derive(Debug)]
pub struct Failure {
    /// The error.
    pub error: ErrorData,
    /// The request's `_meta` is missing or malformed.
    pub malformed_meta: bool,
}

impl From<ErrorData> for Failure {
    fn from(error: ErrorData) -> Self {
        Self {
            error,
            malformed_meta: false,
        }
    }
}

impl Failure {
    /// An error about the request's `_meta` itself (-32602, a 400 on 2026-07-28).
    pub fn meta(message: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        Self {
            error: ErrorData::invalid_params(message, None),
            malformed_meta: true,
        }
    }

    /// The method is not one this endpoint answers (-32601).
    pub fn no_method(method: &str) -> Self {
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
            None,
        )
        .into()
    }
}

/// The answer to request `id` as one JSON message, with the status its era gives it.
pub fn answer(era: &Era, id: &RequestId, answer: Answer) -> Response<Body> {
    match answer {
        Ok(result) => json(
            StatusCode::OK,
            &json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        ),
        Err(failure) => error(era, Some(id), &failure),
    }
}

/// A JSON-RPC error, with the status its era gives it.
pub fn error(era: &Era, id: Option<&RequestId>, failure: &Failure) -> Response<Body> {
    let status = match era {
        Era::Handshake(_) => StatusCode::OK,
        Era::Stateless => status_of(failure),
    };
    json(
        status,
        &json!({ "jsonrpc": "2.0", "id": id, "error": failure.error }),
    )
}

/// The HTTP status of a 2026-07-28 error.
fn status_of(failure: &Failure) -> StatusCode {
    match failure.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS if failure.malformed_meta => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A JSON-RPC error refusing the request before any era applies (the parse error, an invalid
/// request, a header that disagrees with the body), with HTTP 400.
pub fn refused(id: Option<&RequestId>, error: &ErrorData) -> Response<Body> {
    json(
        StatusCode::BAD_REQUEST,
        &json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    )
}

/// `body` as `application/json` with `status`.
pub fn json(status: StatusCode, body: &Value) -> Response<Body> {
    bytes(status, Bytes::from(body.to_string()))
}

/// `body` (JSON already) as `application/json` with `status`.
pub fn bytes(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// An HTTP refusal with a plain JSON body `{"error": code, "message": ...}`.
pub fn plain(status: StatusCode, code: &str, message: impl Into<String>) -> Response<Body> {
    json(status, &json!({ "error": code, "message": message.into() }))
}

/// 405: `message` as a plain refusal (`method_not_allowed`), and `Allow: allow`.
pub fn method_not_allowed(allow: &'static str, message: impl Into<String>) -> Response<Body> {
    let mut refused = plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        message,
    );
    refused
        .headers_mut()
        .insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    refused
}

/// 202 Accepted, empty: a notification, or a response the client posted.
pub fn accepted() -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// An event stream: each message sent on `sender` is one server-sent event, until the sender
/// is dropped.
pub fn events() -> (tokio::sync::mpsc::Sender<Bytes>, Response<Body>) {
    let (sender, events) = tokio::sync::mpsc::channel::<Bytes>(16);
    let mut response = Response::new(Events(events).boxed());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    (sender, response)
}

/// One server-sent event holding a JSON-RPC message.
pub fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// The body of [`events`].
struct Events(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(context)
            .map(|event| event.map(|bytes| Ok(http_body::Frame::data(bytes))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_one_data_line() {
        let event = event(&json!({"a": "b\nc"}));
        let text = std::str::from_utf8(&event).unwrap();
        assert_eq!(text, "event: message\ndata: {\"a\":\"b\\nc\"}\n\n");
    }

    #[test]
    fn a_2026_error_has_the_status_its_code_maps_to_and_a_handshake_error_200() {
        let cases = [
            (ErrorData::header_mismatch("m", None), false, 400),
            (
                ErrorData::new(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, "m", None),
                false,
                400,
            ),
            (
                ErrorData::new(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, "m", None),
                false,
                400,
            ),
            (ErrorData::invalid_params("m", None), true, 400),
            (ErrorData::invalid_params("m", None), false, 200),
            (
                ErrorData::new(ErrorCode::METHOD_NOT_FOUND, "m", None),
                false,
                404,
            ),
            (ErrorData::internal_error("m", None), false, 200),
        ];
        for (error, malformed_meta, status) in cases {
            let failure = Failure {
                error,
                malformed_meta,
            };
            let id = RequestId::Number(3);
            assert_eq!(
                super::error(&Era::Stateless, Some(&id), &failure).status(),
                status,
                "{failure:?}"
            );
            let handshake = Era::Handshake(rmcp::model::ProtocolVersion::V_2025_11_25);
            assert_eq!(super::error(&handshake, Some(&id), &failure).status(), 200);
        }
    }
}
