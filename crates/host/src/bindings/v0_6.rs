//! The released contract `gatehouse:plugin@0.6.0`, adapted to the current one; its policy
//! world is 0.4.0's and 0.5.0's too, but for the version. It lacks only what 0.7.0 added to
//! the action: `context.sends`, which a 0.6.0 policy is not passed, and the prior actions as
//! records, which reach it as their tool names. Its decision carries the current obligations.
//!
//! Its `adapter` world is the current one's but for the version, so a 0.6.0 adapter is
//! prepared against the current world, with its `log` and `caller` imports (`@0.6.0`, see
//! [`super::adapter_0_6`]) linked beside the current ones.

use super::LogLevel;
use super::adapter_0_6::gatehouse::plugin::log::Level as OldLevel;
use super::policy_0_6::gatehouse::plugin::types as old;
use super::types as wit;

super::older::older_policy!(masks(scan, identifiers) claims(claims, skills));
