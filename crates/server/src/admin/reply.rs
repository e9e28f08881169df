//! What every admin handler answers with: a JSON [`Reply`], or an [`ApiError`] with its status,
//! stable code and message; and the request's [`Query`] parameters, taken one by one so a
//! leftover is refused.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

/// A response of the admin API.
pub type Reply = Response<Full<Bytes>>;

/// A refused or failed request: its status, a stable code and a message saying what to do.
/// Sent as `{"error": code, "message": message}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code: `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`,
    /// `bad_request`, `refused`, `conflict`, `payload_too_large`, `unavailable`, `internal`,
    /// `forbidden_host`, `forbidden_origin`, `too_many_sign_ins`.
    pub code: &'static str,
    /// What went wrong and the fix.
    pub message: String,
    /// Seconds to wait before trying again (`Retry-After`), for a 429.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: not possible in the record's current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 503: the store is unavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// Any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The response that carries this error.
    pub fn reply(&self) -> Reply {
        let mut reply = json_reply(
            self.status,
            &json!({ "error": self.code, "message": self.message }),
        );
        if let Some(seconds) = self.retry_after {
            reply
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            reply.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
        }
        reply
    }
}

/// A JSON response.
pub fn json_reply(status: StatusCode, body: &Value) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body.to_string())));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    reply
}

/// A request's query parameters. Every handler takes the ones it knows out; any left over is
/// a 400, so a misspelt filter never silently matches everything.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Reads a request's query string; a parameter given twice is a 400.
    pub fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        for (i, (key, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(ApiError::bad_request(format!(
                    "query parameter `{key}` is given twice"
                )));
            }
        }
        Ok(Self(pairs))
    }

    /// Takes parameter `name` out.
    pub fn take(&mut self, name: &str) -> Option<String> {
        let index = self.0.iter().position(|(k, _)| k == name)?;
        Some(self.0.remove(index).1)
    }

    /// Takes parameter `name` out as a number.
    pub fn take_number<T: std::str::FromStr>(&mut self, name: &str) -> Result<Option<T>, ApiError> {
        self.take(name)
            .map(|v| {
                v.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "query parameter `{name}` = `{v}` is not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    /// Refuses any parameter not taken.
    pub fn none(&self) -> Result<(), ApiError> {
        match self.0.first() {
            None => Ok(()),
            Some((key, _)) => Err(ApiError::bad_request(format!(
                "unknown query parameter `{key}` (see docs/admin-openapi.yaml)"
            ))),
        }
    }
}
