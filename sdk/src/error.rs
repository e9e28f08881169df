//! [`ToolError`]: the structured failure an adapter reports to the caller.

use crate::wit;

/// What went wrong, from the caller's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The arguments are wrong; the model can correct them.
    Validation,
    /// The thing asked for does not exist.
    NotFound,
    /// The request conflicts with the current state.
    Conflict,
    /// The external system failed.
    Upstream,
    /// The external system is unavailable right now.
    Unavailable,
    /// The adapter itself failed.
    Internal,
}

impl ErrorKind {
    /// The WIT spelling, e.g. `"not-found"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Validation => "validation",
            ErrorKind::NotFound => "not-found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Upstream => "upstream",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }
}

/// A structured failure reported by an adapter.
///
/// Build one with the constructor for its kind, then refine it:
///
/// ```
/// use gatehouse_sdk::{ErrorKind, ToolError};
///
/// let err = ToolError::not_found("ORDER_NOT_FOUND", "no order 42")
///     .with_remediation("list orders with `list_orders` and retry with an existing id");
/// assert_eq!(err.kind, ErrorKind::NotFound);
/// assert!(!err.retryable);
/// ```
///
/// Every constructor sets `retryable` to `false` except [`ToolError::unavailable`], whose
/// meaning is "try again later"; change it with [`ToolError::retryable`].
///
/// `?` converts the errors an adapter meets most into a `ToolError`, so
/// `fn invoke(..) -> gatehouse_sdk::Result<ToolOutput>` rarely needs a `map_err`:
///
/// | from | code | kind | retryable |
/// |------|------|------|-----------|
/// | [`http::HttpError`](crate::http::HttpError) | see the table in [`http`](crate::http) | | |
/// | [`serde_json::Error`] | `INVALID_JSON` | `upstream` | no |
///
/// A `serde_json::Error` that reaches `?` is taken to be data the adapter read (usually the
/// upstream's body, e.g. `serde_json::from_value::<Order>(body)?`) that is not the JSON it
/// expected, exactly like [`HttpError::Json`](crate::http::HttpError::Json). The other two
/// JSON failures have their own codes and do not go through it: arguments that do not parse
/// are `INVALID_ARGUMENTS` ([`Call::args`](crate::Call::args)), and a result that cannot be
/// JSON is `OUTPUT_NOT_JSON` ([`ToolOutput::json`](crate::ToolOutput::json)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Machine-readable code, e.g. `ORDER_NOT_FOUND`.
    pub code: String,
    /// What happened, for people and models.
    pub message: String,
    /// Whether the same call may succeed if repeated unchanged.
    pub retryable: bool,
    /// What the caller can do about it.
    pub remediation: Option<String>,
}

impl ToolError {
    /// An error of `kind`, not retryable, without remediation.
    pub fn new(kind: ErrorKind, code: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            code: code.into(),
            message: message.into(),
            retryable: false,
            remediation: None,
        }
    }

    /// The arguments are wrong; the model can correct them.
    pub fn validation(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Validation, code, message)
    }

    /// The thing asked for does not exist.
    pub fn not_found(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, code, message)
    }

    /// The request conflicts with the current state.
    pub fn conflict(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, code, message)
    }

    /// The external system failed.
    pub fn upstream(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Upstream, code, message)
    }

    /// The external system is unavailable right now. Retryable by default.
    pub fn unavailable(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, code, message).retryable(true)
    }

    /// The adapter itself failed.
    pub fn internal(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, code, message)
    }

    /// The adapter has no capability called `name`: a validation error with code
    /// `UNKNOWN_CAPABILITY`. Return it from the fallback arm of a `match call.capability()`.
    pub fn unknown_capability(name: &str) -> Self {
        Self::validation(
            "UNKNOWN_CAPABILITY",
            format!("this adapter has no capability `{name}`"),
        )
        .with_remediation("call one of the capabilities listed in the adapter's manifest")
    }

    /// `INVALID_JSON`: a JSON document the adapter read is not what it expected.
    pub(crate) fn invalid_json(message: impl Into<String>) -> Self {
        Self::upstream("INVALID_JSON", message)
    }

    /// Sets whether the same call may succeed if repeated unchanged.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Says what the caller can do about it.
    pub fn with_remediation(mut self, remediation: impl Into<String>) -> Self {
        self.remediation = Some(remediation.into());
        self
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} error {}: {}",
            self.kind.as_str(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ToolError {}

/// See the table on [`ToolError`].
impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> Self {
        Self::invalid_json(format!("JSON: {error}"))
    }
}

impl From<wit::ErrorKind> for ErrorKind {
    fn from(kind: wit::ErrorKind) -> Self {
        match kind {
            wit::ErrorKind::Validation => ErrorKind::Validation,
            wit::ErrorKind::NotFound => ErrorKind::NotFound,
            wit::ErrorKind::Conflict => ErrorKind::Conflict,
            wit::ErrorKind::Upstream => ErrorKind::Upstream,
            wit::ErrorKind::Unavailable => ErrorKind::Unavailable,
            wit::ErrorKind::Internal => ErrorKind::Internal,
        }
    }
}

impl From<ErrorKind> for wit::ErrorKind {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::Validation => wit::ErrorKind::Validation,
            ErrorKind::NotFound => wit::ErrorKind::NotFound,
            ErrorKind::Conflict => wit::ErrorKind::Conflict,
            ErrorKind::Upstream => wit::ErrorKind::Upstream,
            ErrorKind::Unavailable => wit::ErrorKind::Unavailable,
            ErrorKind::Internal => wit::ErrorKind::Internal,
        }
    }
}

impl From<wit::ToolError> for ToolError {
    fn from(e: wit::ToolError) -> Self {
        let wit::ToolError {
            kind,
            code,
            message,
            retryable,
            remediation,
        } = e;
        ToolError {
            kind: kind.into(),
            code,
            message,
            retryable,
            remediation,
        }
    }
}

impl From<ToolError> for wit::ToolError {
    fn from(e: ToolError) -> Self {
        let ToolError {
            kind,
            code,
            message,
            retryable,
            remediation,
        } = e;
        wit::ToolError {
            kind: kind.into(),
            code,
            message,
            retryable,
            remediation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_set_kind_and_retryability() {
        let cases = [
            (
                ToolError::validation("C", "m"),
                ErrorKind::Validation,
                false,
            ),
            (ToolError::not_found("C", "m"), ErrorKind::NotFound, false),
            (ToolError::conflict("C", "m"), ErrorKind::Conflict, false),
            (ToolError::upstream("C", "m"), ErrorKind::Upstream, false),
            (
                ToolError::unavailable("C", "m"),
                ErrorKind::Unavailable,
                true,
            ),
            (ToolError::internal("C", "m"), ErrorKind::Internal, false),
        ];
        for (err, kind, retryable) in cases {
            assert_eq!((err.kind, err.retryable), (kind, retryable), "{err}");
            assert_eq!((err.code.as_str(), err.message.as_str()), ("C", "m"));
            assert_eq!(err.remediation, None);
        }
    }

    #[test]
    fn builders_refine_an_error() {
        let err = ToolError::upstream("HTTP_502", "bad gateway")
            .retryable(true)
            .with_remediation("retry in a minute");
        assert!(err.retryable);
        assert_eq!(err.remediation.as_deref(), Some("retry in a minute"));
        assert_eq!(err.to_string(), "upstream error HTTP_502: bad gateway");
    }

    #[test]
    fn unknown_capability_is_a_validation_error() {
        let err = ToolError::unknown_capability("frobnicate");
        assert_eq!(err.kind, ErrorKind::Validation);
        assert_eq!(err.code, "UNKNOWN_CAPABILITY");
        assert!(err.message.contains("`frobnicate`"), "{}", err.message);
        assert!(!err.retryable);
    }

    #[test]
    fn serde_json_errors_are_invalid_json_from_upstream() {
        fn parse(text: &str) -> crate::Result<u32> {
            Ok(serde_json::from_str(text)?)
        }
        assert_eq!(parse("7"), Ok(7));
        assert_eq!(
            parse("\"seven\""),
            Err(ToolError::upstream(
                "INVALID_JSON",
                "JSON: invalid type: string \"seven\", expected u32 at line 1 column 7"
            ))
        );
    }

    #[test]
    fn converts_to_wit_and_back() {
        let err = ToolError::conflict("STALE", "version moved").with_remediation("re-read");
        assert_eq!(ToolError::from(wit::ToolError::from(err.clone())), err);
    }
}
