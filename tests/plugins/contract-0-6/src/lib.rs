//! `test.contract-0-6`: a policy module as a third party built it for the released contract
//! `gatehouse:plugin@0.6.0`, from the WIT as released (its `wit` links to
//! `wit/contract-0.6.0`), with wit-bindgen alone. Its action's `prior-actions` are tool names
//! (0.7.0 made them records) and it has no `sends`; its `log` import is
//! `gatehouse:plugin/log@0.6.0`, which the host must link too.
//!
//! It logs a line and allows every call, with a reason `SEEN` naming the prior actions' tools,
//! the session's labels, and the claims' roles and the skills (which 0.4.0 added).

wit_bindgen::generate!({
    path: "wit",
    world: "policy",
});

use gatehouse::plugin::log::{Level, log};
use gatehouse::plugin::types::{Reason, Verdict};

struct Contract06;

impl Guest for Contract06 {
    fn evaluate(action: Action, _config: String) -> Decision {
        log(Level::Info, "contract-0-6 evaluated");
        let context = &action.context;
        Decision {
            verdict: Verdict::Allow,
            effective_mode: None,
            reasons: vec![Reason {
                code: "SEEN".to_owned(),
                message: format!(
                    "prior={} labels={} roles={} skills={}",
                    context.prior_actions.join(","),
                    context.data_classification.join(","),
                    action.claims.roles.join(","),
                    context.skills.join(","),
                ),
            }],
            evidence_refs: Vec::new(),
            obligations: Vec::new(),
        }
    }
}

export!(Contract06);
