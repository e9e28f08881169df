//! The released contract `gatehouse:plugin@0.3.0`, adapted to the current one. 0.3.0 lacks
//! only what 0.4.0 added to the action, `claims` and `context.skills`, which a 0.3.0 policy is
//! not passed; its decision carries the same obligations as the current one's.
//!
//! Its `adapter` world has the current one's shape (see [`super::v0_2`]), so a 0.3.0 adapter
//! is prepared against the current world, with its `log` import, `gatehouse:plugin/log@0.3.0`,
//! linked beside the current one.

use super::LogLevel;
use super::policy_0_3::gatehouse::plugin::log::Level as OldLevel;
use super::policy_0_3::gatehouse::plugin::types as old;
use super::types as wit;

super::older::older_policy! {
    old::Obligation::MaskSecrets(scan) => wit::Obligation::MaskSecrets(wit::SecretScan {
        kinds: (scan.kinds.into_iter())
            .map(|kind| match kind {
                old::SecretKind::PrivateKey => wit::SecretKind::PrivateKey,
                old::SecretKind::CloudAccessKey => wit::SecretKind::CloudAccessKey,
                old::SecretKind::BearerToken => wit::SecretKind::BearerToken,
                old::SecretKind::Jwt => wit::SecretKind::Jwt,
                old::SecretKind::HighEntropy => wit::SecretKind::HighEntropy,
            })
            .collect(),
        fields: scan.fields,
    }),
    old::Obligation::MaskIdentifiers(identifiers) => wit::Obligation::MaskIdentifiers(
        (identifiers.into_iter())
            .map(|i| wit::Identifier {
                name: i.name,
                pattern: i.pattern,
            })
            .collect(),
    ),
}
