//! Signed checkpoints of the audit chain: what makes the log hold against someone who can write the
//! database but does not hold the operator's key (docs/architecture.md, section 8).
//!
//! A checkpoint is a chain's head (`seq`, `hash`) and the time, signed with an ed25519 key in the
//! `gatehouse keygen` file format (`[store.checkpoints] key`). A log of several chains (`[store]
//! chains`) gets a checkpoint per chain head: each names its entry by its position in the log,
//! whose hash fixes the chain up to it. Per gateway:
//! 1. **watch** (every second at most): the `Checkpointer` (`crate::checkpointer`) checks the whole
//!    log at its first look, then reads each chain's entries appended since the head it checked and
//!    checks their links and hashes ([`crate::audit::Chains`], from that head on), so it only ever
//!    signs a head that extends the previous one;
//! 2. **sign** a chain's head when `every_entries` entries were appended to it since its last
//!    checkpoint, or `every_seconds` passed with at least one, and once more at shutdown: the
//!    checkpoint is stored (table `audit_checkpoints`, `gatehouse audit checkpoints`, `GET
//!    /v1/audit/checkpoints`) and pushed to the sinks: a JSON-lines `file` and an HTTP `url` (POST,
//!    one checkpoint as JSON), both meant to be out of the database writers' reach;
//! 3. **verify** (`gatehouse audit verify --checkpoints FILE`): each checkpoint's signature is
//!    checked with the public key, then the log must still hold its hash at its position
//!    (`crate::verify`). An edited entry breaks the chain; a rewritten and re-chained prefix
//!    changes a checkpointed hash; a truncated log ends before a checkpoint.
//!
//! Entries after the last checkpoint are protected by the chain alone; shutdown signs one last
//! checkpoint so a stopped gateway leaves none unsigned. Without `key`, nothing is signed.
//!
//! This module is the checkpoint itself, its settings and its signature; the signer is
//! `checkpointer`, and `verify` checks a log against checkpoints.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use gatehouse_core::keys::{KeyError, PublicKey, SigningKey};
use serde::{Deserialize, Serialize};

/// Domain separation: a checkpoint signature is never a component signature, nor the reverse.
const CONTEXT: &[u8] = b"gatehouse-audit-checkpoint-v1\0";

/// `[store.checkpoints]`: signing the audit chains' heads. Off unless `key` is set.
///
/// ```toml
/// [store.checkpoints]
/// key = "/etc/gatehouse/audit-2026.secret.toml"      # from `gatehouse keygen --key-id audit-2026`
/// public_key = "/etc/gatehouse/audit-2026.pub.toml"  # for `gatehouse audit verify --checkpoints`
/// every_entries = 1000
/// every_seconds = 60
/// file = "/var/log/gatehouse/checkpoints.jsonl" # where the database's writers cannot write
/// # url = "https://audit.internal/checkpoints"  # POSTed, one checkpoint per request
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointConfig {
    /// The secret key file the gateway signs with (`gatehouse keygen`'s `<id>.secret.toml`).
    /// Default: none, and no checkpoints are signed.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// The public key file `gatehouse audit verify --checkpoints` checks signatures with when
    /// `--public-key` is not given. Default: the public half of `key`.
    #[serde(default)]
    pub public_key: Option<PathBuf>,
    /// Sign a chain's head after this many new entries in it. Default: 1000.
    #[serde(default = "defaults::every_entries")]
    pub every_entries: u64,
    /// Sign a chain's head when this many seconds passed since its last checkpoint and an
    /// entry was appended to it. Default: 60.
    #[serde(default = "defaults::every_seconds")]
    pub every_seconds: u64,
    /// Append each checkpoint to this file as a JSON line. Default: none.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// POST each checkpoint as JSON to this `http://` URL; one that fails is sent again with
    /// the next. Default: none.
    #[serde(default)]
    pub url: Option<String>,
}

mod defaults {
    pub fn every_entries() -> u64 {
        1000
    }

    pub fn every_seconds() -> u64 {
        60
    }
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            key: None,
            public_key: None,
            every_entries: defaults::every_entries(),
            every_seconds: defaults::every_seconds(),
            file: None,
            url: None,
        }
    }
}

impl CheckpointConfig {
    /// The key `verify` checks signatures with: `public_key`, else the public half of `key`.
    pub fn verifying_key(&self) -> Result<Option<PublicKey>, KeyError> {
        match (&self.public_key, &self.key) {
            (Some(path), _) => PublicKey::from_file(path).map(Some),
            (None, Some(path)) => Ok(Some(SigningKey::from_file(path)?.public_key())),
            (None, None) => Ok(None),
        }
    }
}

/// One signed head of an audit chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The entry signed: its chain's head then (its position in the log).
    pub seq: u64,
    /// Its hash.
    pub hash: String,
    /// When it was signed, unix ms.
    pub at_ms: u64,
    /// The signing key's id.
    pub key_id: String,
    /// ed25519 over the context tag and `seq`, `hash`, `at_ms` (see [`Checkpoint::message`]),
    /// base64.
    pub signature: String,
}

impl Checkpoint {
    /// Signs the head `seq`/`hash` at `at_ms`.
    pub fn sign(key: &SigningKey, seq: u64, hash: &str, at_ms: u64) -> Self {
        let signature = key.sign_message(CONTEXT, &Self::message(seq, hash, at_ms));
        Self {
            seq,
            hash: hash.to_owned(),
            at_ms,
            key_id: key.key_id.clone(),
            signature: BASE64.encode(signature),
        }
    }

    /// The signed bytes after the context tag: `seq`, `hash` and `at_ms`, one per line.
    fn message(seq: u64, hash: &str, at_ms: u64) -> Vec<u8> {
        format!("{seq}\n{hash}\n{at_ms}").into_bytes()
    }

    /// Whether `key` signed this checkpoint (and it names that key).
    pub fn verifies(&self, key: &PublicKey) -> bool {
        let Ok(signature) = BASE64.decode(&self.signature) else {
            return false;
        };
        let Ok(signature) = <[u8; 64]>::try_from(signature.as_slice()) else {
            return false;
        };
        self.key_id == key.key_id
            && key.verifies_message(
                CONTEXT,
                &Self::message(self.seq, &self.hash, self.at_ms),
                &signature,
            )
    }

    /// Reads a JSON-lines file of checkpoints (what the file sink and `gatehouse audit
    /// checkpoints` write); blank lines are skipped; errors name the line.
    pub fn read_lines(path: &Path) -> Result<Vec<Self>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(index, line)| {
                serde_json::from_str(line).map_err(|e| {
                    format!(
                        "{} line {}: not a checkpoint ({e}); expected one JSON object per line with seq, hash, at_ms, key_id and signature",
                        path.display(),
                        index + 1
                    )
                })
            })
            .collect()
    }
}

impl Checkpoint {
    /// How messages name the checkpoint at `index` (from 0) of a file.
    pub fn name(&self, index: usize) -> String {
        format!(
            "checkpoint {} (entry {}, signed at {} ms by `{}`)",
            index + 1,
            self.seq,
            self.at_ms,
            self.key_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_verifies_with_its_key_only_and_covers_every_field() {
        let key = SigningKey::generate("audit-1").unwrap();
        let checkpoint = Checkpoint::sign(&key, 7, "sha256:aa", 1000);
        assert!(checkpoint.verifies(&key.public_key()));
        let other = SigningKey::generate("audit-1").unwrap();
        assert!(!checkpoint.verifies(&other.public_key()));
        for tampered in [
            Checkpoint {
                seq: 8,
                ..checkpoint.clone()
            },
            Checkpoint {
                hash: "sha256:ab".to_owned(),
                ..checkpoint.clone()
            },
            Checkpoint {
                at_ms: 1001,
                ..checkpoint.clone()
            },
        ] {
            assert!(!tampered.verifies(&key.public_key()), "{tampered:?}");
        }
    }
}
