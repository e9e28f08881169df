//! A small blocking HTTP client over `wasi:http`, the adapter's only way out.
//!
//! Every request goes through the host's egress gate, which checks it against the operator's
//! grants, injects credentials and adds tracing headers. So:
//! 1. build a [`Request`] (`Request::get(url)`, `.header(..)`, `.json(&body)?`, `.timeout(..)`);
//! 2. [`Request::send`] it and read the [`Response`] (`status()`, `json()`, `text()`);
//! 3. return its errors with `?` from [`Adapter::invoke`](crate::Adapter::invoke): an
//!    [`HttpError`] converts into the [`ToolError`] of the table below, so a refusal by the
//!    gateway reaches the caller as `EGRESS_DENIED` without a line of mapping code. Match on
//!    the [`HttpError`] first only where your adapter means something more specific.
//!
//! | [`HttpError`]                                      | code                  | kind          | retryable | remediation |
//! |----------------------------------------------------|-----------------------|---------------|-----------|-------------|
//! | [`Denied`](HttpError::Denied)                      | `EGRESS_DENIED`       | `unavailable` | no        | ask the operator to grant the destination, or use a URL it grants |
//! | [`Timeout`](HttpError::Timeout)                    | `UPSTREAM_TIMEOUT`    | `unavailable` | yes       | — |
//! | [`InvalidUrl`](HttpError::InvalidUrl), [`InvalidHeader`](HttpError::InvalidHeader) | `INVALID_REQUEST` | `validation` | no | — |
//! | [`Json`](HttpError::Json)                          | `INVALID_JSON`        | `upstream`    | no        | — |
//! | [`Tls`](HttpError::Tls)                            | `UPSTREAM_TLS_FAILED` | `upstream`    | no        | use the host name the certificate names, or ask the operator to trust its CA |
//! | [`Status`](HttpError::Status) 408, 425, 429, 5xx but 501 and 505, [`Transport`](HttpError::Transport) | `UPSTREAM_FAILED` | `upstream` | yes | — |
//! | [`Status`](HttpError::Status) any other, [`TooManyRedirects`](HttpError::TooManyRedirects) | `UPSTREAM_FAILED` | `upstream` | no | — |
//!
//! `retryable` is true only where the same request, sent again, can succeed: the gateway
//! refuses a denied request again, a 404 stays a 404 and a redirect loop loops again, while a
//! timeout, an overloaded or restarting upstream (see [`retryable_status`]) and a refused
//! connection can clear.
//!
//! The message is the [`HttpError`]'s `Display`, except for `EGRESS_DENIED`, whose message
//! does not repeat what the gateway refused (the host's audit log records the exact reason).
//! A `serde_json::Error` converts to `INVALID_JSON` like [`HttpError::Json`] (see
//! [`ToolError`]'s `From<serde_json::Error>`).
//!
//! Authors never handle credentials: do not set `Authorization` or `Cookie`, the gate strips
//! them and sends the operator's credential instead. Redirects (301, 302, 303, 307, 308) are
//! followed up to [`MAX_REDIRECTS`] times by sending a new request, which the gate checks like
//! the first; 303 (and 301/302 after a POST) turns into a GET without body.
//!
//! ```no_run
//! use gatehouse_sdk::http::Request;
//! use gatehouse_sdk::serde_json::Value;
//!
//! fn fetch_item() -> gatehouse_sdk::Result<Value> {
//!     let response = Request::get("https://api.example.com/v1/items/42").send()?;
//!     Ok(response.error_for_status()?.json()?)
//! }
//! ```

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::adapter::bindings::wasi::http::outgoing_handler;
use crate::adapter::bindings::wasi::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use crate::adapter::bindings::wasi::io::streams::{InputStream, StreamError};
use crate::error::ToolError;

/// Redirects followed before giving up; each is a new request through the gate.
pub const MAX_REDIRECTS: usize = 5;
/// Bytes written to the request body stream per `blocking-write-and-flush` (the WASI limit is
/// 4096 per call).
const WRITE_CHUNK: usize = 4096;
/// Bytes asked for per read of the response body.
const READ_CHUNK: u64 = 64 * 1024;

/// At most `max` bytes of `text`, trimmed, cut at a character boundary and marked with `…`:
/// what an error message quotes of an upstream's answer, so a large or hostile body does not
/// become a large error.
///
/// ```
/// assert_eq!(gatehouse_sdk::http::quote(" née ", 2), "n…");
/// ```
pub fn quote(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Why a request did not produce a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The gateway refused the request (no grant for the destination or method, a write
    /// method in a read-only call, a forbidden address, or a spent budget). The host records
    /// the exact reason; adapters report this as "not allowed".
    Denied,
    /// The URL is not `http(s)://host[:port][/path]`.
    InvalidUrl(String),
    /// A header name or value is invalid.
    InvalidHeader(String),
    /// The body could not be serialized, or the response is not the expected JSON.
    Json(String),
    /// The upstream did not answer in time.
    Timeout,
    /// The response status is an error (from [`Response::error_for_status`]).
    Status(u16),
    /// More than [`MAX_REDIRECTS`] redirects.
    TooManyRedirects,
    /// The TLS handshake with an `https` upstream failed: its certificate is not issued by a
    /// CA the gateway trusts or does not name the URL's host, or the peer does not speak TLS.
    /// Retrying will not help; the URL or the operator's trust settings must change.
    Tls(String),
    /// Any other transport failure, with the `wasi:http` error code.
    Transport(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Denied => f.write_str("the request was denied by the gateway's egress policy"),
            Self::InvalidUrl(url) => write!(f, "`{url}` is not an http(s) URL"),
            Self::InvalidHeader(name) => write!(f, "invalid header `{name}`"),
            Self::Json(e) => write!(f, "JSON: {e}"),
            Self::Timeout => f.write_str("the upstream did not answer in time"),
            Self::Status(status) => write!(f, "the upstream answered with status {status}"),
            Self::TooManyRedirects => write!(f, "more than {MAX_REDIRECTS} redirects"),
            Self::Tls(why) => write!(f, "TLS handshake with the upstream failed: {why}"),
            Self::Transport(code) => write!(f, "transport error: {code}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// The table in the [module docs](self): one exhaustive `match`, so a new [`HttpError`]
/// variant cannot ship without a code.
impl From<HttpError> for ToolError {
    fn from(error: HttpError) -> Self {
        match error {
            // The operator's grants decide; the same request meets the same refusal.
            HttpError::Denied => ToolError::unavailable(
                "EGRESS_DENIED",
                "the gateway does not allow this request (destination, method or budget)",
            )
            .retryable(false)
            .with_remediation("ask the operator to grant this destination, or use a URL it grants"),
            HttpError::Timeout => ToolError::unavailable("UPSTREAM_TIMEOUT", error.to_string()),
            HttpError::InvalidUrl(_) | HttpError::InvalidHeader(_) => {
                ToolError::validation("INVALID_REQUEST", error.to_string())
            }
            HttpError::Json(_) => ToolError::invalid_json(error.to_string()),
            HttpError::Tls(_) => ToolError::upstream("UPSTREAM_TLS_FAILED", error.to_string())
                .with_remediation(
                    "use the host name the service's certificate names, or ask the operator to \
                     trust its CA (`[egress] extra_root_certificates`)",
                ),
            HttpError::Status(status) => ToolError::upstream("UPSTREAM_FAILED", error.to_string())
                .retryable(retryable_status(status)),
            HttpError::TooManyRedirects => {
                ToolError::upstream("UPSTREAM_FAILED", error.to_string())
            }
            HttpError::Transport(_) => {
                ToolError::upstream("UPSTREAM_FAILED", error.to_string()).retryable(true)
            }
        }
    }
}

/// Whether an upstream answering `status` may answer differently to the same request later:
/// 408 (request timeout), 425 (too early), 429 (too many requests) and the 5xx statuses but
/// 501 (not implemented) and 505 (HTTP version not supported). Adapters mapping statuses
/// themselves use it to set [`ToolError::retryable`].
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 425 | 429)
        || ((500..600).contains(&status) && !matches!(status, 501 | 505))
}

impl From<ErrorCode> for HttpError {
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::HttpRequestDenied => Self::Denied,
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::HttpResponseTimeout => Self::Timeout,
            ErrorCode::TlsCertificateError => Self::Tls(
                "its certificate is not trusted by the gateway or does not name the host"
                    .to_owned(),
            ),
            ErrorCode::TlsProtocolError => {
                Self::Tls("protocol error (does the upstream speak TLS?)".to_owned())
            }
            ErrorCode::TlsAlertReceived(alert) => Self::Tls(format!(
                "the upstream sent alert {}",
                alert
                    .alert_message
                    .unwrap_or_else(|| format!("{:?}", alert.alert_id))
            )),
            other => Self::Transport(format!("{other:?}")),
        }
    }
}

/// An outgoing request. Build it, then [`send`](Request::send) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
    follow_redirects: bool,
}

/// A response with its whole body read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Request {
    /// A request with any method (uppercase, e.g. `"PATCH"`).
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
            follow_redirects: true,
        }
    }

    /// A GET request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A POST request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// A PUT request.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new("PUT", url)
    }

    /// A DELETE request.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new("DELETE", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets a raw body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets a JSON body and `content-type: application/json`.
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Result<Self, HttpError> {
        let body = serde_json::to_vec(value).map_err(|e| HttpError::Json(e.to_string()))?;
        Ok(self.header("content-type", "application/json").body(body))
    }

    /// Limits the wait for the response head (the gateway's per-call budget applies too).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Returns 3xx responses as they are instead of following them.
    pub fn no_redirects(mut self) -> Self {
        self.follow_redirects = false;
        self
    }

    /// Sends the request (following redirects unless disabled) and reads the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        let mut request = self;
        for _ in 0..=MAX_REDIRECTS {
            let response = request.send_once()?;
            let location = match response.status {
                301 | 302 | 303 | 307 | 308 if request.follow_redirects => {
                    response.header("location").map(str::to_owned)
                }
                _ => None,
            };
            let Some(location) = location else {
                return Ok(response);
            };
            request.url = resolve(&request.url, &location)?;
            if response.status == 303 || (response.status < 307 && request.method == "POST") {
                request.method = "GET".to_owned();
                request.body.clear();
                request
                    .headers
                    .retain(|(name, _)| !name.eq_ignore_ascii_case("content-type"));
            }
        }
        Err(HttpError::TooManyRedirects)
    }

    fn send_once(&self) -> Result<Response, HttpError> {
        let (status, headers, body) = self.begin()?;
        Ok(Response {
            status,
            headers,
            body: read_body(body)?,
        })
    }

    /// Sends the request once (no redirects followed) and returns as soon as the response's
    /// status and headers arrive: its body is read as it comes ([`Streaming::next_chunk`]).
    /// For a response that goes on while the adapter acts on what it said so far, such as an
    /// MCP server's event stream asking a question mid-call.
    pub fn send_streaming(self) -> Result<Streaming, HttpError> {
        let (status, headers, body) = self.begin()?;
        let stream = body
            .stream()
            .map_err(|()| HttpError::Transport("response body stream already taken".to_owned()))?;
        Ok(Streaming {
            status,
            headers,
            stream: Some(stream),
            body: Some(body),
        })
    }

    /// Sends the request once: the response's status, headers and unread body.
    fn begin(&self) -> Result<Head, HttpError> {
        let url = Url::parse(&self.url)?;
        let entries: Vec<(String, Vec<u8>)> = self.headers.clone();
        let headers =
            Fields::from_list(&entries).map_err(|e| HttpError::InvalidHeader(format!("{e:?}")))?;
        let outgoing = OutgoingRequest::new(headers);
        let invalid = |_| HttpError::InvalidUrl(self.url.clone());
        outgoing
            .set_method(&method(&self.method))
            .map_err(|()| HttpError::Transport(format!("invalid method `{}`", self.method)))?;
        outgoing.set_scheme(Some(&url.scheme)).map_err(invalid)?;
        outgoing
            .set_authority(Some(url.authority.as_str()))
            .map_err(invalid)?;
        outgoing
            .set_path_with_query(Some(url.path_and_query.as_str()))
            .map_err(invalid)?;
        let body = outgoing
            .body()
            .map_err(|()| HttpError::Transport("request body already taken".to_owned()))?;
        let options = self.timeout.map(|timeout| {
            let options = RequestOptions::new();
            let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
            // Setting a timeout the host does not support is not an error worth failing on.
            let _ignored = options.set_first_byte_timeout(Some(nanos));
            options
        });
        let future = outgoing_handler::handle(outgoing, options)?;
        // A request the gateway refuses is dropped unread, which fails the body write; the
        // response future then says why, so its error takes precedence.
        let written = write_body(body, &self.body);
        let response = loop {
            if let Some(result) = future.get() {
                break result
                    .map_err(|()| HttpError::Transport("response already taken".to_owned()))??;
            }
            future.subscribe().block();
        };
        written?;
        let status = response.status();
        let headers = response.headers().entries();
        let body = response
            .consume()
            .map_err(|()| HttpError::Transport("response body already taken".to_owned()))?;
        Ok((status, headers, body))
    }
}

fn method(text: &str) -> Method {
    match text {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_owned()),
    }
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), HttpError> {
    {
        let stream = body
            .write()
            .map_err(|()| HttpError::Transport("request body stream already taken".to_owned()))?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| stream_error(&e))?;
        }
    }
    OutgoingBody::finish(body, None)?;
    Ok(())
}

fn read_body(body: IncomingBody) -> Result<Vec<u8>, HttpError> {
    let mut out = Vec::new();
    {
        let stream = body
            .stream()
            .map_err(|()| HttpError::Transport("response body stream already taken".to_owned()))?;
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => out.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(e) => return Err(stream_error(&e)),
            }
        }
    }
    finish(body)?;
    Ok(out)
}

/// Ends a body read to its end: waits for its trailers (which the gate reports a refusal or
/// a spent budget through).
fn finish(body: IncomingBody) -> Result<(), HttpError> {
    let trailers = IncomingBody::finish(body);
    loop {
        if let Some(result) = trailers.get() {
            result.map_err(|()| HttpError::Transport("trailers already taken".to_owned()))??;
            break;
        }
        trailers.subscribe().block();
    }
    Ok(())
}

/// The first value of header `name` in `headers` (case-insensitive), if it is UTF-8.
fn header_in<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// A response's status, headers and unread body.
type Head = (u16, Vec<(String, Vec<u8>)>, IncomingBody);

/// A response whose body is read as it arrives ([`Request::send_streaming`]).
pub struct Streaming {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    // Dropped before `body` is finished: a body's stream is its child resource.
    stream: Option<InputStream>,
    body: Option<IncomingBody>,
}

impl Streaming {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The first value of header `name` (case-insensitive), if it is valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// The next bytes of the body, as soon as some arrive; `None` once it has ended.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        let Some(stream) = &self.stream else {
            return Ok(None);
        };
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => Ok(Some(chunk)),
            Err(StreamError::Closed) => {
                self.stream = None;
                match self.body.take() {
                    Some(body) => finish(body).map(|()| None),
                    None => Ok(None),
                }
            }
            Err(e) => Err(stream_error(&e)),
        }
    }

    /// The whole response: the rest of the body read to its end.
    pub fn into_response(mut self) -> Result<Response, HttpError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk()? {
            body.extend_from_slice(&chunk);
        }
        Ok(Response {
            status: self.status,
            headers: std::mem::take(&mut self.headers),
            body,
        })
    }
}

fn stream_error(error: &StreamError) -> HttpError {
    match error {
        StreamError::LastOperationFailed(e) => {
            match crate::adapter::bindings::wasi::http::types::http_error_code(e) {
                Some(code) => HttpError::from(code),
                None => HttpError::Transport(e.to_debug_string()),
            }
        }
        StreamError::Closed => HttpError::Transport("stream closed".to_owned()),
    }
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The first value of a header (case-insensitive name), if it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// All headers, in order.
    pub fn headers(&self) -> &[(String, Vec<u8>)] {
        &self.headers
    }

    /// The body.
    pub fn bytes(&self) -> &[u8] {
        &self.body
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| HttpError::Json(e.to_string()))
    }

    /// `Err(HttpError::Status)` for 4xx and 5xx statuses, the response otherwise.
    pub fn error_for_status(self) -> Result<Self, HttpError> {
        if self.status >= 400 {
            Err(HttpError::Status(self.status))
        } else {
            Ok(self)
        }
    }
}

/// The three parts `wasi:http` wants.
struct Url {
    scheme: Scheme,
    authority: String,
    path_and_query: String,
}

impl Url {
    fn parse(url: &str) -> Result<Self, HttpError> {
        let invalid = || HttpError::InvalidUrl(url.to_owned());
        let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            // An imported stdio MCP server, which the host's egress gate answers itself.
            "stdio" => Scheme::Other("stdio".to_owned()),
            _ => return Err(invalid()),
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.is_empty() {
            return Err(invalid());
        }
        let path_and_query = match path {
            "" => "/".to_owned(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.split('#').next().unwrap_or(p).to_owned(),
        };
        Ok(Self {
            scheme,
            authority: authority.to_owned(),
            path_and_query,
        })
    }
}

/// Resolves a `Location` against the URL that returned it (absolute, or absolute-path).
fn resolve(base: &str, location: &str) -> Result<String, HttpError> {
    if location.contains("://") {
        return Ok(location.to_owned());
    }
    let (scheme, rest) = base
        .split_once("://")
        .ok_or_else(|| HttpError::InvalidUrl(base.to_owned()))?;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    match location.strip_prefix("//") {
        Some(other) => Ok(format!("{scheme}://{other}")),
        None if location.starts_with('/') => Ok(format!("{scheme}://{authority}{location}")),
        None => Err(HttpError::InvalidUrl(location.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_redirect_locations() {
        let base = "http://127.0.0.1:8080/a/b?x=1";
        assert_eq!(resolve(base, "/c").unwrap(), "http://127.0.0.1:8080/c");
        assert_eq!(
            resolve(base, "http://169.254.169.254/latest").unwrap(),
            "http://169.254.169.254/latest"
        );
        assert_eq!(
            resolve(base, "//evil.example/x").unwrap(),
            "http://evil.example/x"
        );
        assert_eq!(
            resolve(base, "relative"),
            Err(HttpError::InvalidUrl("relative".to_owned()))
        );
    }

    /// The table in the module docs, row by row: adapters and the end-to-end tests rely on
    /// these codes.
    #[test]
    fn http_errors_convert_to_the_documented_tool_errors() {
        use crate::error::ErrorKind::{Unavailable, Upstream, Validation};
        let tls_fix = "use the host name the service's certificate names, or ask the operator \
                       to trust its CA (`[egress] extra_root_certificates`)";
        let cases = [
            (
                HttpError::Denied,
                Unavailable,
                "EGRESS_DENIED",
                "the gateway does not allow this request (destination, method or budget)",
                false,
                Some("ask the operator to grant this destination, or use a URL it grants"),
            ),
            (
                HttpError::Timeout,
                Unavailable,
                "UPSTREAM_TIMEOUT",
                "the upstream did not answer in time",
                true,
                None,
            ),
            (
                HttpError::InvalidUrl("ftp://x".into()),
                Validation,
                "INVALID_REQUEST",
                "`ftp://x` is not an http(s) URL",
                false,
                None,
            ),
            (
                HttpError::InvalidHeader("bad name".into()),
                Validation,
                "INVALID_REQUEST",
                "invalid header `bad name`",
                false,
                None,
            ),
            (
                HttpError::Json("expected value at line 1 column 1".into()),
                Upstream,
                "INVALID_JSON",
                "JSON: expected value at line 1 column 1",
                false,
                None,
            ),
            (
                HttpError::Tls("bad certificate".into()),
                Upstream,
                "UPSTREAM_TLS_FAILED",
                "TLS handshake with the upstream failed: bad certificate",
                false,
                Some(tls_fix),
            ),
            (
                HttpError::Status(502),
                Upstream,
                "UPSTREAM_FAILED",
                "the upstream answered with status 502",
                true,
                None,
            ),
            (
                HttpError::Status(404),
                Upstream,
                "UPSTREAM_FAILED",
                "the upstream answered with status 404",
                false,
                None,
            ),
            (
                HttpError::Status(429),
                Upstream,
                "UPSTREAM_FAILED",
                "the upstream answered with status 429",
                true,
                None,
            ),
            (
                HttpError::Status(501),
                Upstream,
                "UPSTREAM_FAILED",
                "the upstream answered with status 501",
                false,
                None,
            ),
            (
                HttpError::TooManyRedirects,
                Upstream,
                "UPSTREAM_FAILED",
                "more than 5 redirects",
                false,
                None,
            ),
            (
                HttpError::Transport("ConnectionRefused".into()),
                Upstream,
                "UPSTREAM_FAILED",
                "transport error: ConnectionRefused",
                true,
                None,
            ),
        ];
        for (http, kind, code, message, retryable, remediation) in cases {
            let mut expected = ToolError::new(kind, code, message).retryable(retryable);
            expected.remediation = remediation.map(str::to_owned);
            assert_eq!(ToolError::from(http.clone()), expected, "{http:?}");
        }
    }

    #[test]
    fn question_mark_converts_http_errors() {
        fn send() -> crate::Result<Response> {
            Ok(Request::get("ftp://example.com/").send()?)
        }
        let err = send().unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str(), err.message.as_str()),
            (
                crate::ErrorKind::Validation,
                "INVALID_REQUEST",
                "`ftp://example.com/` is not an http(s) URL"
            )
        );
    }

    #[test]
    fn errors_say_what_happened() {
        assert_eq!(
            HttpError::from(ErrorCode::HttpRequestDenied),
            HttpError::Denied
        );
        assert_eq!(
            HttpError::Denied.to_string(),
            "the request was denied by the gateway's egress policy"
        );
    }
}
