//! `gatehouse.baseline`: the rules most deployments start from.
//!
//! In order, first match wins:
//! 1. **deny lists**: `deny` maps a tenant id (or `*`) to globs over
//!    `<adapter id>.<capability id>`; a match denies (`CAPABILITY_DENIED`);
//! 2. **destructive hours**: a call whose risk mode is `destructive` outside the UTC hours
//!    `[start, end)` of `destructive_hours` is denied (`OUTSIDE_DESTRUCTIVE_HOURS`); the time
//!    is the host's (`action.context.now_unix_ms`), so a recorded decision replays exactly;
//! 3. **amount thresholds**: `approval_thresholds` maps an argument name to the largest amount
//!    that runs unattended; above it the call needs approval (`AMOUNT_ABOVE_THRESHOLD`);
//! 4. otherwise allow.

use std::collections::BTreeMap;

use gatehouse_sdk::policy::glob_match;
use gatehouse_sdk::{Action, ApprovalMode, Decision, Policy};
use serde::Deserialize;

/// The operator's config; mirrors `config_schema` in `manifest.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    deny: BTreeMap<String, Vec<String>>,
    approval_thresholds: BTreeMap<String, f64>,
    destructive_hours: Option<Hours>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hours {
    start: u8,
    end: u8,
}

struct Baseline;

impl Policy for Baseline {
    type Config = Config;

    fn evaluate(action: &Action, config: &Config) -> Decision {
        let tool = action.tool();
        for (tenant, globs) in &config.deny {
            if (tenant == "*" || *tenant == action.tenant)
                && let Some(glob) = globs.iter().find(|g| glob_match(g, &tool))
            {
                return Decision::deny(
                    "CAPABILITY_DENIED",
                    format!(
                        "`{tool}` is denied for tenant `{}` by `{glob}`",
                        action.tenant
                    ),
                );
            }
        }
        if let Some(hours) = &config.destructive_hours
            && action.approval_mode_requested == ApprovalMode::Destructive
        {
            let hour = (action.context.now_unix_ms / 3_600_000 % 24) as u8;
            if !(hours.start <= hour && hour < hours.end) {
                return Decision::deny(
                    "OUTSIDE_DESTRUCTIVE_HOURS",
                    format!(
                        "destructive calls run only between {:02}:00 and {:02}:00 UTC; it is {hour:02}h",
                        hours.start, hours.end
                    ),
                );
            }
        }
        if !config.approval_thresholds.is_empty()
            && let Ok(args) = action.args_value()
        {
            for (name, limit) in &config.approval_thresholds {
                if let Some(amount) = args
                    .get(name)
                    .and_then(gatehouse_sdk::serde_json::Value::as_f64)
                    && amount > *limit
                {
                    return Decision::require_approval(
                        "AMOUNT_ABOVE_THRESHOLD",
                        format!("`{name}` = {amount} is above the unattended limit {limit}"),
                    );
                }
            }
        }
        Decision::allow()
    }
}

gatehouse_sdk::export_policy!(Baseline);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::policy::evaluate_with_config_json;
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::{CheckError, check_config, try_check_config};
    use gatehouse_sdk::{CapabilityClass, Verdict};

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    #[test]
    fn sample_configs_satisfy_the_schema_and_the_struct() {
        let config: Config = check_config(
            MANIFEST,
            &json!({
                "deny": { "*": ["*.delete_*"], "acme": ["acme.pay.*"] },
                "approval_thresholds": { "amount": 1000, "fee": 2.5 },
                "destructive_hours": { "start": 9, "end": 17 }
            }),
        );
        assert_eq!(config.deny["acme"], ["acme.pay.*"]);
        assert_eq!(config.approval_thresholds["fee"], 2.5);
        assert!(matches!(
            config.destructive_hours,
            Some(Hours { start: 9, end: 17 })
        ));
        let nothing: Config = check_config(MANIFEST, &json!({}));
        assert!(nothing.deny.is_empty() && nothing.destructive_hours.is_none());
    }

    #[test]
    fn the_schema_bounds_the_hours() {
        let err = try_check_config::<Config>(
            MANIFEST,
            &json!({ "destructive_hours": { "start": 9, "end": 25 } }),
        )
        .unwrap_err();
        assert_eq!(
            err,
            CheckError::Schema {
                schema: "config_schema".into(),
                field: "/destructive_hours/end".into(),
                message: "25 is greater than the maximum of 24".into(),
            }
        );
    }

    fn action(mode: ApprovalMode, args: &str) -> Action {
        let mut a = Action::new("acme.pay", "refund", CapabilityClass::Act, mode).with_args(args);
        a.tenant = "acme".to_owned();
        a
    }

    fn verdict(a: &Action, config: &str) -> Verdict {
        evaluate_with_config_json::<Baseline>(a, config).verdict
    }

    #[test]
    fn deny_lists_match_tenant_and_glob() {
        let a = action(ApprovalMode::Delegated, "{}");
        assert_eq!(
            verdict(&a, r#"{"deny":{"acme":["acme.pay.*"]}}"#),
            Verdict::Deny
        );
        assert_eq!(verdict(&a, r#"{"deny":{"*":["*.refund"]}}"#), Verdict::Deny);
        assert_eq!(verdict(&a, r#"{"deny":{"globex":["*"]}}"#), Verdict::Allow);
        assert_eq!(
            evaluate_with_config_json::<Baseline>(&a, r#"{"deny":{"*":["acme.*.refund"]}}"#),
            Decision::deny(
                "CAPABILITY_DENIED",
                "`acme.pay.refund` is denied for tenant `acme` by `acme.*.refund`"
            )
        );
    }

    #[test]
    fn thresholds_require_approval_above_the_limit() {
        let config = r#"{"approval_thresholds":{"amount":1000}}"#;
        let small = action(ApprovalMode::Delegated, r#"{"amount":1000}"#);
        let big = action(ApprovalMode::Delegated, r#"{"amount":1000.5}"#);
        assert_eq!(verdict(&small, config), Verdict::Allow);
        assert_eq!(verdict(&big, config), Verdict::RequireApproval);
    }

    #[test]
    fn destructive_only_inside_hours_using_host_time() {
        let config = r#"{"destructive_hours":{"start":9,"end":17}}"#;
        let mut a = action(ApprovalMode::Destructive, "{}");
        a.context.now_unix_ms = 10 * 3_600_000;
        assert_eq!(verdict(&a, config), Verdict::Allow);
        a.context.now_unix_ms = 20 * 3_600_000;
        assert_eq!(verdict(&a, config), Verdict::Deny);
        let mut lower = action(ApprovalMode::Delegated, "{}");
        lower.context.now_unix_ms = 20 * 3_600_000;
        assert_eq!(verdict(&lower, config), Verdict::Allow);
    }
}
