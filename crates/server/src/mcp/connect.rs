//! How a call paused for a connection (`CONNECTION_REQUIRED`: the caller's own account at a
//! provider is not connected, [`crate::oauth`]) reaches the person behind the agent, in every
//! protocol version gatehouse serves. The pipeline gives the caller the start page's link
//! (`connect_url`); the client gets, by what it declared:
//!
//! | client | what it gets |
//! |---|---|
//! | asked for a task (2025-11-25 `params.task`, the 2026-07-28 tasks extension, an A2A message) | a task, `working` (A2A: `AUTH_REQUIRED`), its status message naming the link; it runs once the user connected ([`super::tasks`]) |
//! | 2026-07-28, URL elicitation | `InputRequiredResult` with a URL-mode elicitation of the link (no `requestState`: the retry is the same call again) |
//! | 2025-11-25, URL elicitation declared at `initialize` | the URL elicitation error (-32042) naming the link; once the user connected, `notifications/elicitation/complete` with its id on the caller's `GET` streams ([`super::watch`]) |
//! | anything else | the paused result; its text names the link and how to resume |
//!
//! The retry (with the same idempotency key) runs the call once the account is connected; a
//! retry before that pauses again with a new link.

use gatehouse_core::envelope::{OutcomeCode, ToolResultEnvelope};
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, InputRequiredResult};
use serde_json::{Value, json};

/// The key of the connection's URL elicitation in an `InputRequiredResult`'s `inputRequests`.
pub const CONNECT_INPUT: &str = "gatehouse_connect";

/// MCP 2025-11-25's URL elicitation required error.
const URL_ELICITATION_REQUIRED: i32 = -32042;

/// The URL elicitation of `result`'s link, if it is a call paused for a connection
/// ([`crate::oauth::elicitation_id`]).
fn elicitation(result: &ToolResultEnvelope) -> Option<(Value, String)> {
    if result.outcome != OutcomeCode::ConnectionRequired {
        return None;
    }
    let url = result.connect_url.as_deref()?;
    let message = format!(
        "`{}` acts as you upstream, and your account there is not connected. Open the link to connect it; the call then runs when it is made again.",
        result.capability_id
    );
    let elicitation = json!({
        "mode": "url",
        "elicitationId": crate::oauth::elicitation_id(url),
        "url": url,
        "message": message,
    });
    Some((elicitation, message))
}

/// 2026-07-28: the `InputRequiredResult` that asks the user to open the link, for a client
/// that declared URL elicitation.
pub fn input_required(result: &ToolResultEnvelope) -> Option<InputRequiredResult> {
    let (elicitation, _) = elicitation(result)?;
    let request = json!({ "method": "elicitation/create", "params": elicitation });
    Some(InputRequiredResult::new(
        Some(super::approvals::one(CONNECT_INPUT, request)),
        None,
    ))
}

/// 2025-11-25: the URL elicitation required error naming the link, for a client that declared
/// URL elicitation at `initialize`.
pub fn url_elicitation_error(result: &ToolResultEnvelope) -> Option<ErrorData> {
    let (elicitation, message) = elicitation(result)?;
    Some(ErrorData::new(
        ErrorCode(URL_ELICITATION_REQUIRED),
        message,
        Some(json!({ "elicitations": [elicitation] })),
    ))
}
