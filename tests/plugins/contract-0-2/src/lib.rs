//! `test.contract-0-2`: a policy module as a third party built it for the released contract
//! `gatehouse:plugin@0.2.0` (its `wit` links to the host's frozen copy), before the obligations
//! `mask-secrets` and `mask-identifiers` (0.3.0) and the action's `claims` and
//! `context.skills` (0.4.0). Built with wit-bindgen alone, not the SDK, which follows the
//! current contract. (The JavaScript and Python SDKs built for 0.2.0 until they moved to 0.6.0;
//! this keeps 0.2.0 loading under test.)
//!
//! It allows every call, with a reason `SEEN` saying what the action told it (tenant, tool and
//! mode), logs a line, and asks the host to mask e-mail addresses (`mask-pii`, which 0.2.0
//! has).

wit_bindgen::generate!({
    path: "wit",
    world: "policy",
});

use gatehouse::plugin::log::{Level, log};
use gatehouse::plugin::types::{ApprovalMode, Obligation, PiiKind, Reason, Verdict};

struct Contract02;

impl Guest for Contract02 {
    fn evaluate(action: Action, _config: String) -> Decision {
        log(Level::Info, "contract-0-2 evaluated");
        let mode = match action.approval_mode_requested {
            ApprovalMode::ReadOnly => "read_only",
            ApprovalMode::LocalWrite => "local_write",
            ApprovalMode::Network => "network",
            ApprovalMode::Delegated => "delegated",
            ApprovalMode::Destructive => "destructive",
        };
        Decision {
            verdict: Verdict::Allow,
            effective_mode: None,
            reasons: vec![Reason {
                code: "SEEN".to_owned(),
                message: format!(
                    "tenant={} tool={}.{} mode={mode}",
                    action.tenant, action.adapter_id, action.capability_id
                ),
            }],
            evidence_refs: Vec::new(),
            obligations: vec![Obligation::MaskPii(vec![PiiKind::Email])],
        }
    }
}

export!(Contract02);
