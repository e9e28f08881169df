//! What a call delivers to its caller: MCP-shaped content blocks, and the error body of a
//! failed call.

use serde::{Deserialize, Serialize};

/// One MCP content block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64.
    Image {
        /// Base64 data.
        data: String,
        /// Media type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio, base64.
    Audio {
        /// Base64 data.
        data: String,
        /// Media type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// An embedded resource.
    Resource {
        /// Its contents.
        resource: ResourceContents,
    },
}

/// MCP resource contents: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceContents {
    /// The resource URI.
    pub uri: String,
    /// Media type.
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary contents, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// What kind of failure, for clients deciding what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Bad arguments; the model can correct them.
    Validation,
    /// Not found.
    NotFound,
    /// Conflicts with current state.
    Conflict,
    /// The external system failed.
    Upstream,
    /// Temporarily unavailable.
    Unavailable,
    /// Ran out of a time or fuel budget.
    Timeout,
    /// Exceeded a resource limit.
    Limit,
    /// Refused by policy or a host invariant.
    Policy,
    /// Internal failure.
    Internal,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Kind of failure.
    pub kind: ErrorKind,
    /// Machine-readable code: the outcome code, or the adapter's own code for `TOOL_ERROR`.
    pub code: String,
    /// For people.
    pub message: String,
    /// Whether the same call may succeed if retried.
    pub retryable: bool,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

impl ErrorBody {
    /// An error body; `code` is an outcome code's wire name or an adapter's own code.
    pub fn new(
        kind: ErrorKind,
        code: impl Into<String>,
        message: impl Into<String>,
        retryable: bool,
    ) -> Self {
        Self {
            kind,
            code: code.into(),
            message: message.into(),
            retryable,
            remediation: None,
        }
    }

    /// With a remediation hint.
    pub fn with_remediation(mut self, remediation: impl Into<String>) -> Self {
        self.remediation = Some(remediation.into());
        self
    }
}
