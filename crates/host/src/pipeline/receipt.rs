//! Gate 11's receipt (issue 58): with `[receipts] key`, every result carries a receipt signed
//! with the gateway's key ([`gatehouse_core::receipt`]): the call, its tool, the request's
//! digest, the verdict and outcome, the delivered result's digest, and its audit entry's place
//! and hash. The entry must exist to be named, so with receipts on every call's record is
//! committed before delivery (a read-only call's too: the price of a receipt), and is read back
//! by its call id.
//!
//! ```toml
//! [receipts]
//! key = "/etc/gatehouse/gateway-2026.secret.toml"   # from `gatehouse keygen --key-id gateway-2026`
//! ```

use std::path::PathBuf;

use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::keys::SigningKey;
use gatehouse_core::receipt::{Receipt, Statement, result_digest};
use gatehouse_store::{AuditQuery, Store};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `[receipts]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsConfig {
    /// The secret key file receipts are signed with (`gatehouse keygen`'s
    /// `<id>.secret.toml`); its public half (`<id>.pub.toml`) is what callers verify them
    /// with. Default: none, and results carry no receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

impl ReceiptsConfig {
    /// The signing key, if receipts are on.
    ///
    /// # Errors
    /// The key file cannot be read, naming it.
    pub fn signer(&self) -> Result<Option<SigningKey>, String> {
        self.key
            .as_ref()
            .map(|path| {
                SigningKey::from_file(path)
                    .map_err(|e| format!("[receipts] key {}: {e}", path.display()))
            })
            .transpose()
    }
}

/// The receipt for `result` of `call`, whose record the store committed; `None` (and a
/// warning) if its entry cannot be read back.
pub async fn issue(
    store: &dyn Store,
    key: &SigningKey,
    call: &ToolCallEnvelope,
    result: &ToolResultEnvelope,
) -> Option<Receipt> {
    let query = AuditQuery {
        tool_call_id: Some(call.tool_call_id.clone()),
        kind: Some("call".to_owned()),
        limit: 1,
        ..AuditQuery::default()
    };
    let entry = match store.audit(query).await {
        Ok(entries) => entries.into_iter().next()?,
        Err(error) => {
            tracing::warn!(%error, "the call's audit entry could not be read back: no receipt");
            return None;
        }
    };
    let statement = Statement {
        tool_call_id: call.tool_call_id.clone(),
        tool: result.capability_id.clone(),
        request: gatehouse_core::canonical::request_hash(
            &result.capability_id,
            &call.args,
            call.approval_mode_requested
                .map(|m| m.to_string())
                .as_deref(),
        ),
        decision: result.policy_decision.as_ref().map_or_else(
            || "none".to_owned(),
            |d| json(&d.verdict).as_str().unwrap_or_default().to_owned(),
        ),
        outcome: result.outcome.as_str().to_owned(),
        result: result_digest(
            &json(&result.status),
            &json(&result.content),
            &json(&result.structured_content),
            &json(&result.error),
        ),
        entry: (entry.seq, entry.chain, entry.link, entry.hash),
    };
    Some(Receipt::sign(key, statement, gatehouse_store::now_ms()))
}

/// A field of the envelope as it spells it.
fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
