//! The released contract `gatehouse:plugin@0.7.0`, adapted to the current one. Its policy
//! world lacks only what 0.8.0 added to the action: `context.protocol` and
//! `context.delegated-by`, which a 0.7.0 policy is not passed. Its decision carries the current
//! obligations.
//!
//! Its `adapter` world is the current one's but for the version, so a 0.7.0 adapter is
//! prepared against the current world, with its `log` and `caller` imports (`@0.7.0`, see
//! [`super::adapter_0_7`]) linked beside the current ones.

use super::LogLevel;
use super::adapter_0_7::gatehouse::plugin::log::Level as OldLevel;
use super::older::FromPrior;
use super::policy_0_7::gatehouse::plugin::types as old;
use super::types as wit;

super::older::older_policy!(masks(scan, identifiers) claims(claims, skills) sends(sends));

/// Since 0.7.0, a prior action is a record.
impl FromPrior for old::PriorAction {
    fn from_prior(prior: &wit::PriorAction) -> Self {
        Self {
            tool: prior.tool.clone(),
            tool_call_id: prior.tool_call_id.clone(),
            at_unix_ms: prior.at_unix_ms,
            labels: prior.labels.clone(),
        }
    }
}
