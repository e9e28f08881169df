//! Ed25519 keys and the messages they sign: a publisher's key signs components (the component
//! format, its signature section and digest, is `gatehouse-host`'s `plugin::signature`), an
//! operator's key signs the audit log's checkpoints (`gatehouse-store`). Every signature is
//! over a domain-separation context the caller names, then the message, and is verified
//! strictly (no small-order keys, canonical `S` only).
//!
//! Key files are small TOML documents written by `gatehouse keygen`: `<id>.secret.toml`
//! (`key_id`, `secret_key`) stays with the publisher; `<id>.pub.toml` (`key_id`, `public_key`)
//! goes to operators, who paste it into their trust config with a scope.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer as _;
use serde::{Deserialize, Serialize};

/// Errors about keys and key files.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The key file is not of the documented form.
    #[error(
        "{path}: not a gatehouse key file ({message}); expected TOML with `key_id` and `{field}` as written by `gatehouse keygen`"
    )]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
        /// `secret_key` or `public_key`.
        field: &'static str,
    },
    /// The key material is not a valid ed25519 key.
    #[error("key `{key_id}`: {message}")]
    Material {
        /// The key id.
        key_id: String,
        /// What is wrong.
        message: String,
    },
}

/// A publisher's signing key.
pub struct SigningKey {
    /// Identifier the signature carries, e.g. `alice-2026`.
    pub key_id: String,
    key: ed25519_dalek::SigningKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// A publisher's public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// Identifier signatures name.
    pub key_id: String,
    key: ed25519_dalek::VerifyingKey,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretKeyFile {
    key_id: String,
    secret_key: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublicKeyFile {
    key_id: String,
    public_key: String,
}

impl SigningKey {
    /// A fresh random key.
    pub fn generate(key_id: &str) -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Material {
            key_id: key_id.to_owned(),
            message: format!("no randomness from the OS: {e}"),
        })?;
        Ok(Self {
            key_id: key_id.to_owned(),
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        })
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            key_id: self.key_id.clone(),
            key: self.key.verifying_key(),
        }
    }

    /// The secret key file's text.
    pub fn to_toml(&self) -> String {
        let file = SecretKeyFile {
            key_id: self.key_id.clone(),
            secret_key: BASE64.encode(self.key.to_bytes()),
        };
        format!(
            "# gatehouse publisher SECRET key. Keep it private; sign with `gatehouse pack --key`.\n{}",
            toml::to_string(&file).expect("key file serializes")
        )
    }

    /// Reads a key file written by [`SigningKey::to_toml`].
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let text = read(path)?;
        let format = |message: String| KeyError::Format {
            path: path.display().to_string(),
            message,
            field: "secret_key",
        };
        let file: SecretKeyFile =
            toml::from_str(&text).map_err(|e| format(e.message().to_owned()))?;
        let bytes: [u8; 32] = decode_32(&file.secret_key).map_err(format)?;
        Ok(Self {
            key_id: file.key_id,
            key: ed25519_dalek::SigningKey::from_bytes(&bytes),
        })
    }

    /// Signs `message` under a domain-separation `context` of the caller's (never the
    /// component signature's): the audit log's checkpoints are signed with an operator key in
    /// this file format.
    pub fn sign_message(&self, context: &[u8], message: &[u8]) -> [u8; 64] {
        let mut signed = context.to_vec();
        signed.extend_from_slice(message);
        self.key.sign(&signed).to_bytes()
    }
}

impl PublicKey {
    /// Parses a base64 public key.
    pub fn from_base64(key_id: &str, base64: &str) -> Result<Self, KeyError> {
        let material = |message: String| KeyError::Material {
            key_id: key_id.to_owned(),
            message,
        };
        let bytes = decode_32(base64).map_err(material)?;
        let key = ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map_err(|e| material(format!("not an ed25519 public key: {e}")))?;
        // A small-order key "verifies" signatures nobody made (R = identity, S = 0 for any
        // message): refuse it where it is configured.
        if key.is_weak() {
            return Err(material(
                "a weak (small-order) ed25519 public key, which would accept forged signatures; \
                 generate a real key pair with `gatehouse keygen`"
                    .to_owned(),
            ));
        }
        Ok(Self {
            key_id: key_id.to_owned(),
            key,
        })
    }

    /// Reads a public key file written by `gatehouse keygen`.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let text = read(path)?;
        let file: PublicKeyFile = toml::from_str(&text).map_err(|e| KeyError::Format {
            path: path.display().to_string(),
            message: e.message().to_owned(),
            field: "public_key",
        })?;
        Self::from_base64(&file.key_id, &file.public_key)
    }

    /// The base64 form used in key files and trust config.
    pub fn to_base64(&self) -> String {
        BASE64.encode(self.key.as_bytes())
    }

    /// The key's 32 bytes, as Ed25519 has them (a JWK's `x`, RFC 8037).
    pub fn to_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The public key file's text.
    pub fn to_toml(&self) -> String {
        let file = PublicKeyFile {
            key_id: self.key_id.clone(),
            public_key: self.to_base64(),
        };
        format!(
            "# gatehouse publisher public key. Operators trust it under [[trust.publisher]] \
             with a scope (adapters = [...], policies = [...]).\n{}",
            toml::to_string(&file).expect("key file serializes")
        )
    }

    /// Whether `signature` is this key's [`SigningKey::sign_message`] of `message` under
    /// `context` (strict verification, as for components).
    pub fn verifies_message(&self, context: &[u8], message: &[u8], signature: &[u8; 64]) -> bool {
        let mut signed = context.to_vec();
        signed.extend_from_slice(message);
        self.key
            .verify_strict(&signed, &ed25519_dalek::Signature::from_bytes(signature))
            .is_ok()
    }
}

fn decode_32(text: &str) -> Result<[u8; 32], String> {
    let bytes = BASE64
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("expected 32 bytes, found {}", b.len()))
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::generate("bob").unwrap();
        let secret = dir.path().join("bob.secret.toml");
        let public = dir.path().join("bob.pub.toml");
        std::fs::write(&secret, key.to_toml()).unwrap();
        std::fs::write(&public, key.public_key().to_toml()).unwrap();
        assert_eq!(
            SigningKey::from_file(&secret).unwrap().public_key(),
            key.public_key()
        );
        assert_eq!(PublicKey::from_file(&public).unwrap(), key.public_key());
        std::fs::write(&public, "key_id = \"bob\"\npublic_key = \"short\"").unwrap();
        let err = PublicKey::from_file(&public).unwrap_err().to_string();
        assert!(
            err.contains("not base64") || err.contains("expected 32 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_message_signature_verifies_under_its_context_only() {
        let key = SigningKey::generate("ops").unwrap();
        let signature = key.sign_message(b"ctx-a\0", b"message");
        let public = key.public_key();
        assert!(public.verifies_message(b"ctx-a\0", b"message", &signature));
        assert!(!public.verifies_message(b"ctx-b\0", b"message", &signature));
        assert!(!public.verifies_message(b"ctx-a\0", b"massage", &signature));
        let other = SigningKey::generate("ops").unwrap().public_key();
        assert!(!other.verifies_message(b"ctx-a\0", b"message", &signature));
    }
}
