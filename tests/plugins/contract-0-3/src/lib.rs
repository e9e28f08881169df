//! `test.contract-0-3`: a policy module as a third party built it for the released contract
//! `gatehouse:plugin@0.3.0`, before the action carried `claims` and `context.skills`. Its WIT,
//! `wit/gatehouse.wit`, is the 0.3.0 file exactly as released (`git show
//! 3b70072:wit/gatehouse.wit`), kept here rather than taken from the host's frozen copy
//! (`wit/contract-0.3.0/`), so a slip in that copy cannot hide here. It is built with
//! wit-bindgen alone, not the SDK, which follows the current contract. The host must keep
//! loading it and carry out what it decides.
//!
//! It allows every call, with a reason `SEEN` saying what the action told it (tenant, tool,
//! caller, mode, and the arguments' size: not the arguments, which may hold a secret), logs a
//! line, and returns the two obligations 0.3.0 added:
//! `mask-identifiers` for order ids (`ord_` and digits, as `[ORDER]`) and `mask-secrets` for
//! JWTs.

wit_bindgen::generate!({
    path: "wit",
    world: "policy",
});

use gatehouse::plugin::log::{Level, log};
use gatehouse::plugin::types::{
    ApprovalMode, Identifier, Obligation, Reason, SecretKind, SecretScan, Verdict,
};

struct Contract03;

impl Guest for Contract03 {
    fn evaluate(action: Action, _config: String) -> Decision {
        log(Level::Info, "contract-0-3 evaluated");
        let mode = match action.approval_mode_requested {
            ApprovalMode::ReadOnly => "read_only",
            ApprovalMode::LocalWrite => "local_write",
            ApprovalMode::Network => "network",
            ApprovalMode::Delegated => "delegated",
            ApprovalMode::Destructive => "destructive",
        };
        let caller = action.principals.last().map_or("none", |p| p.id.as_str());
        Decision {
            verdict: Verdict::Allow,
            effective_mode: None,
            reasons: vec![Reason {
                code: "SEEN".to_owned(),
                message: format!(
                    "tenant={} tool={}.{} caller={caller} mode={mode} args_bytes={}",
                    action.tenant,
                    action.adapter_id,
                    action.capability_id,
                    action.args.len()
                ),
            }],
            evidence_refs: Vec::new(),
            obligations: vec![
                Obligation::MaskIdentifiers(vec![Identifier {
                    name: "order".to_owned(),
                    pattern: "ord_[0-9]+".to_owned(),
                }]),
                Obligation::MaskSecrets(SecretScan {
                    kinds: vec![SecretKind::Jwt],
                    fields: Vec::new(),
                }),
            ],
        }
    }
}

export!(Contract03);
