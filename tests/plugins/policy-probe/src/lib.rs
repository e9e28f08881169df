//! `test.policy-probe`: a scripted policy for pipeline tests.
//!
//! Its config says what it does: answer `verdict` (default allow) with `effective_mode`, or
//! `behavior = "trap"` (panics) or `behavior = "loop"` (spins until fuel or the deadline stops
//! it). The verdict's reason names the version, so tests can see which version decided. With
//! `report_prior_actions = true` it adds a reason `PRIOR_ACTIONS` listing the action's
//! `prior-actions` (their tools), so tests can see what the host told it; with
//! `report_flows = true`, a reason `BROUGHT` naming each prior action that brought labels,
//! with them (`tool#call-id: label+label`, `; ` between), and a reason `SENDS` with the
//! action's `sends` (contract 0.7.0); with `report_origin = true`, reasons `PROTOCOL` (how the
//! call came), `DELEGATED_BY` (the call it was made on behalf of, or empty) and `CHAIN` (the
//! principals' ids, `>` between) (contract 0.8.0). With `reason_bytes = n` it adds a
//! reason `BIG` of `n` bytes; with `report_entropy = true` a reason `ENTROPY` with what its
//! wall clock and a randomly seeded hasher read.

use std::hint::black_box;

use gatehouse_sdk::{Action, ApprovalMode, Decision, Policy, Verdict};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    verdict: Option<Verdict>,
    effective_mode: Option<ApprovalMode>,
    behavior: Behavior,
    report_prior_actions: bool,
    report_flows: bool,
    report_origin: bool,
    reason_bytes: Option<usize>,
    report_entropy: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Behavior {
    #[default]
    Answer,
    Trap,
    Loop,
}

struct Probe;

impl Policy for Probe {
    type Config = Config;

    fn evaluate(action: &Action, config: &Config) -> Decision {
        match config.behavior {
            Behavior::Answer => {}
            Behavior::Trap => panic!("policy-probe: deliberate trap"),
            Behavior::Loop => spin(),
        }
        let mut decision = match config.verdict.unwrap_or(Verdict::Allow) {
            Verdict::Allow => Decision::allow(),
            Verdict::Deny => Decision::deny("PROBE_DENY", "scripted deny"),
            Verdict::RequireApproval => {
                Decision::require_approval("PROBE_APPROVAL", "scripted require-approval")
            }
            Verdict::Abstain => Decision::abstain(),
        };
        if let Some(mode) = config.effective_mode {
            decision = decision.with_effective_mode(mode);
        }
        if config.report_entropy {
            use std::hash::BuildHasher;
            let clock = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let random = std::collections::hash_map::RandomState::new().hash_one(1u8);
            decision = decision.with_reason("ENTROPY", format!("clock={clock} random={random}"));
        }
        if let Some(bytes) = config.reason_bytes {
            decision = decision.with_reason("BIG", "r".repeat(bytes));
        }
        if config.report_prior_actions {
            let tools: Vec<&str> = (action.context.prior_actions.iter())
                .map(|prior| prior.tool.as_str())
                .collect();
            decision = decision.with_reason("PRIOR_ACTIONS", tools.join(","));
        }
        if config.report_flows {
            let brought: Vec<String> = (action.context.prior_actions.iter())
                .filter(|prior| !prior.labels.is_empty())
                .map(|prior| {
                    let labels = prior.labels.join("+");
                    format!("{}#{}: {labels}", prior.tool, prior.tool_call_id)
                })
                .collect();
            decision = decision
                .with_reason("BROUGHT", brought.join("; "))
                .with_reason("SENDS", action.context.sends.join(","));
        }
        if config.report_origin {
            let chain: Vec<&str> = action.principals.iter().map(|p| p.id.as_str()).collect();
            let by = action.context.delegated_by.clone().unwrap_or_default();
            decision = decision
                .with_reason("PROTOCOL", action.context.protocol.clone())
                .with_reason("DELEGATED_BY", by)
                .with_reason("CHAIN", chain.join(">"));
        }
        decision
    }
}

fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

gatehouse_sdk::export_policy!(Probe);
