//! [`ToolOutput`] and its content blocks: what a successful call returns.

use serde::Serialize;
use serde_json::Value;

use crate::error::ToolError;
use crate::wit;

/// Binary content with its media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The bytes.
    pub data: Vec<u8>,
    /// Their media type, e.g. `image/png`.
    pub mime_type: String,
}

impl Blob {
    /// `data` of media type `mime_type`.
    pub fn new(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Blob {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }
}

/// An MCP embedded resource: text or binary contents behind a URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedResource {
    /// Where the resource lives.
    pub uri: String,
    /// Its media type, if known.
    pub mime_type: Option<String>,
    /// Its contents as text, for text resources.
    pub text: Option<String>,
    /// Its contents as bytes, for binary resources.
    pub data: Option<Vec<u8>>,
}

impl EmbeddedResource {
    /// A text resource.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        EmbeddedResource {
            uri: uri.into(),
            mime_type: None,
            text: Some(text.into()),
            data: None,
        }
    }

    /// A binary resource.
    pub fn binary(uri: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        EmbeddedResource {
            uri: uri.into(),
            mime_type: None,
            text: None,
            data: Some(data.into()),
        }
    }

    /// Sets the media type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// One MCP content block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Text for the model.
    Text(String),
    /// An image.
    Image(Blob),
    /// An audio clip.
    Audio(Blob),
    /// An embedded resource.
    Resource(EmbeddedResource),
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(text.into())
    }

    /// An image block, e.g. `Content::image(svg.into_bytes(), "image/svg+xml")`.
    pub fn image(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Content::Image(Blob::new(data, mime_type))
    }

    /// An audio block.
    pub fn audio(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Content::Audio(Blob::new(data, mime_type))
    }
}

/// A successful tool result.
///
/// ```
/// use gatehouse_sdk::{Content, ToolOutput};
/// use gatehouse_sdk::serde_json::json;
///
/// let out = ToolOutput::text("3 words")
///     .with_structured(json!({ "words": 3 }))
///     .with_content(Content::image(b"<svg/>".to_vec(), "image/svg+xml"))
///     .with_evidence("doc:42");
/// assert_eq!(out.content.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    /// Content blocks for the model, in order.
    pub content: Vec<Content>,
    /// The structured result; the host checks it against the capability's output schema.
    pub structured: Option<Value>,
    /// References to the evidence this result rests on (ids, payload hashes, source URIs).
    pub evidence_refs: Vec<String>,
}

impl ToolOutput {
    /// An output with no content, no structured result and no evidence.
    pub fn new() -> Self {
        Self::default()
    }

    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_content(Content::text(text))
    }

    /// `value` as the structured result, and the same JSON as a text block (MCP asks tools
    /// that return structured content to also return it serialized as text).
    ///
    /// Fails with an `internal` error, code `OUTPUT_NOT_JSON`, if `value` cannot be
    /// represented as JSON (for example a map with non-string keys).
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, ToolError> {
        let value = serde_json::to_value(value).map_err(|e| {
            ToolError::internal(
                "OUTPUT_NOT_JSON",
                format!("the adapter's result cannot be represented as JSON: {e}"),
            )
        })?;
        Ok(Self::text(value.to_string()).with_structured(value))
    }

    /// Appends a content block.
    pub fn with_content(mut self, content: Content) -> Self {
        self.content.push(content);
        self
    }

    /// Sets the structured result (replacing any earlier one).
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured = Some(value);
        self
    }

    /// Appends an evidence reference.
    pub fn with_evidence(mut self, evidence_ref: impl Into<String>) -> Self {
        self.evidence_refs.push(evidence_ref.into());
        self
    }
}

impl From<wit::Blob> for Blob {
    fn from(b: wit::Blob) -> Self {
        let wit::Blob { data, mime_type } = b;
        Blob { data, mime_type }
    }
}

impl From<Blob> for wit::Blob {
    fn from(b: Blob) -> Self {
        let Blob { data, mime_type } = b;
        wit::Blob { data, mime_type }
    }
}

impl From<wit::EmbeddedResource> for EmbeddedResource {
    fn from(r: wit::EmbeddedResource) -> Self {
        let wit::EmbeddedResource {
            uri,
            mime_type,
            text,
            data,
        } = r;
        EmbeddedResource {
            uri,
            mime_type,
            text,
            data,
        }
    }
}

impl From<EmbeddedResource> for wit::EmbeddedResource {
    fn from(r: EmbeddedResource) -> Self {
        let EmbeddedResource {
            uri,
            mime_type,
            text,
            data,
        } = r;
        wit::EmbeddedResource {
            uri,
            mime_type,
            text,
            data,
        }
    }
}

impl From<wit::Content> for Content {
    fn from(c: wit::Content) -> Self {
        match c {
            wit::Content::Text(text) => Content::Text(text),
            wit::Content::Image(blob) => Content::Image(blob.into()),
            wit::Content::Audio(blob) => Content::Audio(blob.into()),
            wit::Content::Resource(resource) => Content::Resource(resource.into()),
        }
    }
}

impl From<Content> for wit::Content {
    fn from(c: Content) -> Self {
        match c {
            Content::Text(text) => wit::Content::Text(text),
            Content::Image(blob) => wit::Content::Image(blob.into()),
            Content::Audio(blob) => wit::Content::Audio(blob.into()),
            Content::Resource(resource) => wit::Content::Resource(resource.into()),
        }
    }
}

impl From<ToolOutput> for wit::ToolOutput {
    fn from(out: ToolOutput) -> Self {
        let ToolOutput {
            content,
            structured,
            evidence_refs,
        } = out;
        wit::ToolOutput {
            content: content.into_iter().map(Into::into).collect(),
            // `Value`'s `Display` is its compact JSON and cannot fail.
            structured: structured.map(|value| value.to_string()),
            evidence_refs,
        }
    }
}

impl TryFrom<wit::ToolOutput> for ToolOutput {
    type Error = serde_json::Error;

    /// Fails if `structured` is not JSON.
    fn try_from(out: wit::ToolOutput) -> Result<Self, Self::Error> {
        let wit::ToolOutput {
            content,
            structured,
            evidence_refs,
        } = out;
        Ok(ToolOutput {
            content: content.into_iter().map(Into::into).collect(),
            structured: structured
                .as_deref()
                .map(serde_json::from_str)
                .transpose()?,
            evidence_refs,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn text_is_one_text_block() {
        let out = ToolOutput::text("hello");
        assert_eq!(out.content, vec![Content::Text("hello".into())]);
        assert_eq!(out.structured, None);
        assert!(out.evidence_refs.is_empty());
    }

    #[test]
    fn json_sets_structured_and_a_text_block_of_it() {
        #[derive(Serialize)]
        struct Stats {
            words: u32,
            longest: &'static str,
        }
        let out = ToolOutput::json(&Stats {
            words: 3,
            longest: "gate",
        })
        .unwrap();
        assert_eq!(
            out.structured,
            Some(json!({ "words": 3, "longest": "gate" }))
        );
        assert_eq!(
            out.content,
            vec![Content::Text(r#"{"words":3,"longest":"gate"}"#.into())]
        );
    }

    #[test]
    fn json_rejects_values_that_are_not_json() {
        let mut map = BTreeMap::new();
        map.insert((1, 2), "tuple keys are not JSON object keys");
        let err = ToolOutput::json(&map).unwrap_err();
        assert_eq!(
            (err.kind, err.code.as_str()),
            (ErrorKind::Internal, "OUTPUT_NOT_JSON")
        );
    }

    #[test]
    fn builders_append_in_order() {
        let out = ToolOutput::text("a")
            .with_content(Content::image(vec![1, 2], "image/png"))
            .with_content(Content::Resource(
                EmbeddedResource::text("file:///x", "x").with_mime_type("text/plain"),
            ))
            .with_evidence("e1")
            .with_evidence("e2");
        assert_eq!(out.content.len(), 3);
        assert_eq!(
            out.content[1],
            Content::Image(Blob::new(vec![1, 2], "image/png"))
        );
        assert_eq!(out.evidence_refs, ["e1", "e2"]);
    }

    #[test]
    fn converts_to_wit_and_back() {
        let out = ToolOutput::json(&json!({ "a": [1, 2] }))
            .unwrap()
            .with_content(Content::audio(vec![0], "audio/wav"))
            .with_content(Content::Resource(EmbeddedResource::binary("x:y", vec![9])))
            .with_evidence("e");
        let wit_out = wit::ToolOutput::from(out.clone());
        assert_eq!(wit_out.structured.as_deref(), Some(r#"{"a":[1,2]}"#));
        assert_eq!(ToolOutput::try_from(wit_out).unwrap(), out);
    }
}
