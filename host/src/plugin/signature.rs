//! Publisher keys, signing and signature checks.
//!
//! A signature is ed25519 over the SHA-256 digest of the component *with its signature
//! section removed* (everything else, the manifest included, is covered), prefixed with a
//! domain-separation tag. The signature block is JSON in the `gatehouse:signature` section:
//!
//! ```json
//! { "algorithm": "ed25519", "key_id": "alice", "digest": "sha256:<hex>", "signature": "<base64>" }
//! ```
//!
//! Key files are small TOML documents written by `gatehouse keygen`: `<id>.secret.toml`
//! (`key_id`, `secret_key`) stays with the publisher; `<id>.pub.toml` (`key_id`, `public_key`)
//! goes to operators, who paste it into their trust config with a scope.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::sections::{self, SIGNATURE_SECTION, Section};

/// Domain separation: a gatehouse signature can never be mistaken for one over other data.
const SIGNING_CONTEXT: &[u8] = b"gatehouse-component-signature-v1\0";
const ALGORITHM: &str = "ed25519";

/// A SHA-256 digest of an unsigned component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ComponentDigest(pub [u8; 32]);

impl ComponentDigest {
    /// Digest of the given bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }
}

impl std::fmt::Display for ComponentDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

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

    /// Signs a component: removes any previous signature section, then appends a new one
    /// covering everything else.
    pub fn sign(&self, component: &[u8]) -> Result<Vec<u8>, sections::SectionError> {
        let list = sections::sections(component)?;
        let mut unsigned = sections::without(component, &list, &[SIGNATURE_SECTION]);
        let digest = ComponentDigest::of(&unsigned);
        let signature = self.key.sign(&signed_message(&digest));
        let block = SignatureBlock {
            algorithm: ALGORITHM.to_owned(),
            key_id: self.key_id.clone(),
            digest: digest.to_string(),
            signature: BASE64.encode(signature.to_bytes()),
        };
        let json = serde_json::to_vec(&block).expect("signature block serializes");
        sections::append_custom(&mut unsigned, SIGNATURE_SECTION, &json);
        Ok(unsigned)
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

    /// Whether `signature` is this key's signature of `digest`.
    pub fn verifies(&self, digest: &ComponentDigest, signature: &[u8; 64]) -> bool {
        let signature = ed25519_dalek::Signature::from_bytes(signature);
        // Strict verification: no small-order R or key, canonical S only (RFC 8032 leaves
        // room for malleable signatures that lax verifiers accept).
        self.key
            .verify_strict(&signed_message(digest), &signature)
            .is_ok()
    }
}

/// The signature block as stored in the component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureBlock {
    /// Always `ed25519`.
    pub algorithm: String,
    /// The signing key's id.
    pub key_id: String,
    /// Digest of the component without this section, `sha256:<hex>`.
    pub digest: String,
    /// The signature, base64.
    pub signature: String,
}

/// Why a component's signature is not acceptable.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// No signature section.
    #[error(
        "the component is unsigned (no `{SIGNATURE_SECTION}` section); sign it with `gatehouse pack --key`"
    )]
    Unsigned,
    /// More than one signature section.
    #[error("the component carries {0} signature sections; a signed component has exactly one")]
    Multiple(usize),
    /// The signature block cannot be read.
    #[error("the signature block is malformed: {0}")]
    Malformed(String),
    /// The digest in the block does not match the bytes: they changed after signing.
    #[error(
        "the component was modified after signing: its digest is {actual}, the signature covers {signed}"
    )]
    Tampered {
        /// Digest of the bytes as they are.
        actual: String,
        /// Digest the signature block claims.
        signed: String,
    },
}

/// A component's signature, read and checked for internal consistency (not yet for trust).
#[derive(Debug, Clone)]
pub struct SignedComponent {
    /// The signature block.
    pub block: SignatureBlock,
    /// Digest of the component without its signature section.
    pub digest: ComponentDigest,
    /// The raw signature.
    pub signature: [u8; 64],
}

/// Reads the signature of a component and checks that it covers these exact bytes.
pub fn read_signature(
    bytes: &[u8],
    list: &[Section<'_>],
) -> Result<SignedComponent, SignatureError> {
    let blocks = sections::custom(list, SIGNATURE_SECTION);
    let data = match blocks.as_slice() {
        [] => return Err(SignatureError::Unsigned),
        [one] => *one,
        many => return Err(SignatureError::Multiple(many.len())),
    };
    let block: SignatureBlock =
        serde_json::from_slice(data).map_err(|e| SignatureError::Malformed(e.to_string()))?;
    if block.algorithm != ALGORITHM {
        return Err(SignatureError::Malformed(format!(
            "algorithm `{}` is not supported (only `{ALGORITHM}`)",
            block.algorithm
        )));
    }
    let signature: [u8; 64] = BASE64
        .decode(&block.signature)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| {
            SignatureError::Malformed("`signature` is not 64 bytes of base64".to_owned())
        })?;
    let digest = ComponentDigest::of(&sections::without(bytes, list, &[SIGNATURE_SECTION]));
    if digest.to_string() != block.digest {
        return Err(SignatureError::Tampered {
            actual: digest.to_string(),
            signed: block.digest,
        });
    }
    Ok(SignedComponent {
        block,
        digest,
        signature,
    })
}

fn signed_message(digest: &ComponentDigest) -> Vec<u8> {
    [SIGNING_CONTEXT, &digest.0].concat()
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

    fn component() -> Vec<u8> {
        let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
        sections::append_custom(&mut bytes, "payload", b"some code");
        bytes
    }

    #[test]
    fn a_signature_verifies_and_survives_re_signing() {
        let key = SigningKey::generate("alice").unwrap();
        let signed = key.sign(&component()).unwrap();
        let resigned = key.sign(&signed).unwrap();
        assert_eq!(signed, resigned, "re-signing replaces the old signature");
        let list = sections::sections(&signed).unwrap();
        let sig = read_signature(&signed, &list).unwrap();
        assert_eq!(sig.block.key_id, "alice");
        assert!(key.public_key().verifies(&sig.digest, &sig.signature));
        let other = SigningKey::generate("alice").unwrap();
        assert!(!other.public_key().verifies(&sig.digest, &sig.signature));
    }

    #[test]
    fn detects_changed_bytes() {
        let key = SigningKey::generate("alice").unwrap();
        let mut signed = key.sign(&component()).unwrap();
        let at = signed.windows(4).position(|w| w == b"code").unwrap();
        signed[at] = b'C';
        let list = sections::sections(&signed).unwrap();
        assert!(matches!(
            read_signature(&signed, &list),
            Err(SignatureError::Tampered { .. })
        ));
    }

    #[test]
    fn unsigned_and_doubly_signed_are_refused() {
        let bytes = component();
        let list = sections::sections(&bytes).unwrap();
        assert!(matches!(
            read_signature(&bytes, &list),
            Err(SignatureError::Unsigned)
        ));
        let key = SigningKey::generate("a").unwrap();
        let mut twice = key.sign(&bytes).unwrap();
        sections::append_custom(&mut twice, SIGNATURE_SECTION, b"{}");
        let list = sections::sections(&twice).unwrap();
        assert!(matches!(
            read_signature(&twice, &list),
            Err(SignatureError::Multiple(2))
        ));
    }

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
}
