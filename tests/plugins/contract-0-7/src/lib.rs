//! `test.contract-0-7`: a policy module as a third party built it for the released contract
//! `gatehouse:plugin@0.7.0`, from the WIT as released (its `wit` links to
//! `wit/contract-0.7.0`), with wit-bindgen alone. Its action has the prior actions as records
//! and `sends` (0.7.0), and no `protocol` or `delegated-by` (0.8.0 added them); its `log`
//! import is `gatehouse:plugin/log@0.7.0`, which the host must link too.
//!
//! It logs a line and allows every call, with a reason `SEEN` naming each prior action's tool
//! and the labels it brought, and what the called tool sends.

wit_bindgen::generate!({
    path: "wit",
    world: "policy",
});

use gatehouse::plugin::log::{Level, log};
use gatehouse::plugin::types::{Reason, Verdict};

struct Contract07;

impl Guest for Contract07 {
    fn evaluate(action: Action, _config: String) -> Decision {
        log(Level::Info, "contract-0-7 evaluated");
        let context = &action.context;
        let prior: Vec<String> = (context.prior_actions.iter())
            .map(|prior| format!("{}:{}", prior.tool, prior.labels.join("+")))
            .collect();
        Decision {
            verdict: Verdict::Allow,
            effective_mode: None,
            reasons: vec![Reason {
                code: "SEEN".to_owned(),
                message: format!(
                    "prior={} sends={}",
                    prior.join(","),
                    context.sends.join(",")
                ),
            }],
            evidence_refs: Vec::new(),
            obligations: Vec::new(),
        }
    }
}

export!(Contract07);
