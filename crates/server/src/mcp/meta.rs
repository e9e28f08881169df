//! The `_meta` keys gatehouse reads from a `tools/call` request and writes on its result.

/// `_meta` key of the full [`ToolResultEnvelope`](gatehouse_core::envelope::ToolResultEnvelope) on
/// every `tools/call` result.
pub const RESULT_META: &str = "gatehouse/result";
/// `_meta` key a caller sets to pass the call's idempotency key.
pub const IDEMPOTENCY_KEY_META: &str = "gatehouse/idempotency_key";
/// `_meta` key a caller sets to ask for an approval mode (never above the tool's maximum).
pub const APPROVAL_MODE_META: &str = "gatehouse/approval_mode";
/// `_meta` key a caller sets to resume a call paused for approval that had no idempotency key.
pub const APPROVAL_ID_META: &str = "gatehouse/approval_id";
/// `_meta` key set on a result that is a replay: the id of the call whose result it is.
pub const REPLAY_OF_META: &str = "gatehouse/replay_of";
