//! The released contract `gatehouse:plugin@0.2.0`, adapted to the current one. 0.2.0 lacks
//! what 0.3.0 and 0.4.0 added: the obligations `mask-secrets` and `mask-identifiers` (which a
//! 0.2.0 module never returns), `action.claims` and `action-context.skills` (which it is not
//! passed), so a 0.2.0 policy's action and decision convert field by field.
//!
//! Its `adapter` world has the current one's shape: component types are structural (records by
//! field names and types, variants and enums by case names), so a 0.2.0 adapter is prepared
//! against the current world as it is, with only its `log` import, `gatehouse:plugin/log@0.2.0`,
//! linked beside the current one. The same holds for 0.3.0 ([`super::v0_3`]).

use super::LogLevel;
use super::policy_0_2::gatehouse::plugin::log::Level as OldLevel;
use super::policy_0_2::gatehouse::plugin::types as old;
use super::types as wit;

super::older::older_policy!();
