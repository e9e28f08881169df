//! Server-sent events (`text/event-stream`) read as JSON messages, for adapters whose
//! upstream answers with a stream: an MCP server's Streamable HTTP, an A2A agent's
//! `SendStreamingMessage`. Read a [`Streaming`](crate::http::Streaming) response chunk by
//! chunk into [`Events::push`], which gives each message once its event is whole; or a body
//! read whole with [`events`].
//!
//! ```
//! use gatehouse_sdk::sse::Events;
//!
//! let mut stream = Events::default();
//! assert!(stream.push(b"data: {\"step\":").is_empty());
//! assert_eq!(stream.push(b"1}\n\n")[0]["step"], 1);
//! ```

use serde_json::Value;

/// Whether a `content-type` header names an event stream.
pub fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| t.trim_start().starts_with("text/event-stream"))
}

/// An event stream read as it arrives: bytes in, the JSON messages of the events completed so
/// far out (an event ends at a blank line; a character cut between two reads waits for the
/// rest).
#[derive(Debug, Default)]
pub struct Events {
    pending: Vec<u8>,
}

impl Events {
    /// Takes the next `bytes` of the stream: the messages of the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Value> {
        self.pending.extend(bytes.iter().filter(|&&b| b != b'\r'));
        let Some(end) = self.pending.windows(2).rposition(|pair| pair == b"\n\n") else {
            return Vec::new();
        };
        let complete: Vec<u8> = self.pending.drain(..end + 2).collect();
        events(&String::from_utf8_lossy(&complete))
    }
}

/// The JSON messages of an SSE stream: the `data` of each event, joined by newlines, that
/// parses as JSON (priming events without data, and comments, are skipped).
pub fn events(stream: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in stream.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !data.is_empty() {
                if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                    messages.push(message);
                }
                data.clear();
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_messages_of_an_sse_stream() {
        let stream = "id: 0\nretry: 3000\ndata:\n\n: comment\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{}}\n";
        let messages = events(stream);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[1]["id"], 1);
    }

    #[test]
    fn an_event_stream_read_in_pieces_gives_each_message_once_it_is_whole() {
        let stream = "data: {\"id\":1,\r\ndata: \"x\":\"é\"}\r\n\r\ndata: {\"id\":2}\n\n";
        let bytes = stream.as_bytes();
        let mut events = Events::default();
        let mut messages = Vec::new();
        for piece in bytes.chunks(3) {
            messages.extend(events.push(piece));
        }
        assert_eq!(
            messages,
            [
                serde_json::json!({ "id": 1, "x": "é" }),
                serde_json::json!({ "id": 2 })
            ]
        );
    }

    #[test]
    fn names_an_event_stream() {
        assert!(is_event_stream(Some(" text/event-stream; charset=utf-8")));
        assert!(!is_event_stream(Some("application/json")));
        assert!(!is_event_stream(None));
    }
}
