//! Which publisher keys the operator trusts, and for what.
//!
//! Trust is deny by default: with no `[[trust.publisher]]` entries, nothing loads. Each entry
//! names one key and the plugin ids it may publish, as globs, per kind:
//!
//! ```toml
//! [[trust.publisher]]
//! key_id = "acme-2026"
//! public_key = "3q2+7w..."      # base64, from the publisher's `<id>.pub.toml`
//! adapters = ["acme.*"]         # adapter ids this key may sign
//! policies = []                 # policy ids this key may sign (none)
//! ```

use gatehouse_core::model::Glob;
use serde::{Deserialize, Serialize};

use super::manifest::PluginKind;
use super::signature::{self, KeyError, PublicKey, SignedComponent};

/// The `[trust]` table of the operator config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    /// Trusted publisher keys. Default: none, so nothing loads.
    #[serde(default, rename = "publisher")]
    pub publishers: Vec<PublisherConfig>,
}

/// One trusted publisher key and its scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublisherConfig {
    /// The key id signatures carry.
    pub key_id: String,
    /// The ed25519 public key, base64.
    pub public_key: String,
    /// Globs of adapter ids this key may publish, e.g. `["acme.*"]`. Default: none.
    #[serde(default)]
    pub adapters: Vec<Glob>,
    /// Globs of policy ids this key may publish. Default: none.
    #[serde(default)]
    pub policies: Vec<Glob>,
}

/// Why the trust config is unusable.
#[derive(Debug, thiserror::Error)]
pub enum TrustConfigError {
    /// Bad key material.
    #[error("trust.publisher `{key_id}`: {source}")]
    Key {
        /// The entry.
        key_id: String,
        /// What is wrong with the key.
        source: KeyError,
    },
    /// Two entries share a key id.
    #[error("trust.publisher `{0}` is listed twice; key ids must be unique")]
    Duplicate(String),
}

/// Why a signed component is not trusted.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// Signed by a key the operator has not listed.
    #[error(
        "signed with unknown key `{key_id}`; trust it under [[trust.publisher]] in the operator config"
    )]
    UnknownKey {
        /// The key id in the signature.
        key_id: String,
    },
    /// The signature does not verify with the listed key.
    #[error(
        "the signature does not verify with trusted key `{key_id}` (signed with a different key under the same id, or corrupted)"
    )]
    BadSignature {
        /// The key id in the signature.
        key_id: String,
    },
    /// The key may not publish this plugin.
    #[error("key `{key_id}` may not publish {kind} `{id}`; its {kind} scope is {scope:?}")]
    OutOfScope {
        /// The key id.
        key_id: String,
        /// Adapter or policy.
        kind: PluginKind,
        /// The plugin id from the manifest.
        id: String,
        /// The globs the key may publish for that kind.
        scope: Vec<String>,
    },
}

/// A trusted key with its scope.
pub struct TrustedPublisher {
    key: PublicKey,
    adapters: Vec<Glob>,
    policies: Vec<Glob>,
}

/// The compiled trust config.
pub struct TrustStore {
    publishers: Vec<TrustedPublisher>,
}

impl std::fmt::Debug for TrustStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<_> = self.publishers.iter().map(|p| &p.key.key_id).collect();
        f.debug_struct("TrustStore")
            .field("publishers", &ids)
            .finish()
    }
}

impl TrustStore {
    /// Compiles the trust config, checking every key.
    pub fn new(config: &TrustConfig) -> Result<Self, TrustConfigError> {
        let mut publishers: Vec<TrustedPublisher> = Vec::new();
        for entry in &config.publishers {
            if publishers.iter().any(|p| p.key.key_id == entry.key_id) {
                return Err(TrustConfigError::Duplicate(entry.key_id.clone()));
            }
            let key =
                PublicKey::from_base64(&entry.key_id, &entry.public_key).map_err(|source| {
                    TrustConfigError::Key {
                        key_id: entry.key_id.clone(),
                        source,
                    }
                })?;
            publishers.push(TrustedPublisher {
                key,
                adapters: entry.adapters.clone(),
                policies: entry.policies.clone(),
            });
        }
        Ok(Self { publishers })
    }

    /// Finds the trusted key that made this signature and checks the signature with it.
    pub fn authenticate(&self, signed: &SignedComponent) -> Result<&TrustedPublisher, TrustError> {
        let key_id = &signed.block.key_id;
        let publisher = self
            .publishers
            .iter()
            .find(|p| &p.key.key_id == key_id)
            .ok_or_else(|| TrustError::UnknownKey {
                key_id: key_id.clone(),
            })?;
        if !signature::verifies(&publisher.key, &signed.digest, &signed.signature) {
            return Err(TrustError::BadSignature {
                key_id: key_id.clone(),
            });
        }
        Ok(publisher)
    }
}

impl TrustedPublisher {
    /// Checks that this key may publish `kind` `id`.
    pub fn authorize(&self, kind: PluginKind, id: &str) -> Result<(), TrustError> {
        let scope = match kind {
            PluginKind::Adapter => &self.adapters,
            PluginKind::Policy => &self.policies,
        };
        if scope.iter().any(|glob| glob.is_match(id)) {
            return Ok(());
        }
        Err(TrustError::OutOfScope {
            key_id: self.key.key_id.clone(),
            kind,
            id: id.to_owned(),
            scope: scope.iter().map(|glob| glob.as_str().to_owned()).collect(),
        })
    }
}
