//! The released contract `gatehouse:plugin@0.3.0`, adapted to the current one. 0.3.0 lacks
//! what 0.4.0 and 0.7.0 added to the action (`claims`, `context.skills` and `context.sends`),
//! which a 0.3.0 policy is not passed, and its prior actions are tool names; its decision
//! carries the same obligations as the current one's.
//!
//! Its `adapter` world has the current one's shape (see [`super::v0_2`]), so a 0.3.0 adapter
//! is prepared against the current world, with its `log` import, `gatehouse:plugin/log@0.3.0`,
//! linked beside the current one.

use super::LogLevel;
use super::policy_0_3::gatehouse::plugin::log::Level as OldLevel;
use super::policy_0_3::gatehouse::plugin::types as old;
use super::types as wit;

super::older::older_policy!(masks(scan, identifiers));
