//! `test.contract-0-4`: a policy module as a third party built it for the released contract
//! `gatehouse:plugin@0.4.0`, from the WIT as released (its `wit` links to
//! `wit/contract-0.4.0`), with wit-bindgen alone. Its world is the current one's but for its
//! version; its `log` import is `gatehouse:plugin/log@0.4.0`, which the host must link too.
//!
//! It logs a line and allows every call, with a reason `SEEN` naming the tenant and the
//! roles of the action's `claims` (which 0.4.0 added).

wit_bindgen::generate!({
    path: "wit",
    world: "policy",
});

use gatehouse::plugin::log::{Level, log};
use gatehouse::plugin::types::{Reason, Verdict};

struct Contract04;

impl Guest for Contract04 {
    fn evaluate(action: Action, _config: String) -> Decision {
        log(Level::Info, "contract-0-4 evaluated");
        Decision {
            verdict: Verdict::Allow,
            effective_mode: None,
            reasons: vec![Reason {
                code: "SEEN".to_owned(),
                message: format!(
                    "tenant={} roles={}",
                    action.tenant,
                    action.claims.roles.join(",")
                ),
            }],
            evidence_refs: Vec::new(),
            obligations: Vec::new(),
        }
    }
}

export!(Contract04);
