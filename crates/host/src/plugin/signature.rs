//! Component signatures: what a publisher's key signs and how a host checks it.
//!
//! A signature is ed25519 over the SHA-256 digest of the component *with its signature
//! section removed* (everything else, the manifest included, is covered), under a
//! domain-separation context ([`SIGNING_CONTEXT`]). The signature block is JSON in the
//! `gatehouse:signature` section:
//!
//! ```json
//! { "algorithm": "ed25519", "key_id": "alice", "digest": "sha256:<hex>", "signature": "<base64>" }
//! ```
//!
//! The keys and their files are `gatehouse-core`'s ([`SigningKey`], [`PublicKey`]).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

pub use gatehouse_core::keys::{KeyError, PublicKey, SigningKey};

use super::sections::{self, SIGNATURE_SECTION, Section};

/// Domain separation: a component signature can never be mistaken for one over other data.
pub const SIGNING_CONTEXT: &[u8] = b"gatehouse-component-signature-v1\0";
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

/// Signs a component with `key`: removes any previous signature section, then appends a new
/// one covering everything else.
pub fn sign(key: &SigningKey, component: &[u8]) -> Result<Vec<u8>, sections::SectionError> {
    let list = sections::sections(component)?;
    let mut unsigned = sections::without(component, &list, &[SIGNATURE_SECTION]);
    let digest = ComponentDigest::of(&unsigned);
    let signature = key.sign_message(SIGNING_CONTEXT, &digest.0);
    let block = SignatureBlock {
        algorithm: ALGORITHM.to_owned(),
        key_id: key.key_id.clone(),
        digest: digest.to_string(),
        signature: BASE64.encode(signature),
    };
    let json = serde_json::to_vec(&block).expect("signature block serializes");
    sections::append_custom(&mut unsigned, SIGNATURE_SECTION, &json);
    Ok(unsigned)
}

/// Whether `signature` is `key`'s signature of a component whose digest is `digest`.
pub fn verifies(key: &PublicKey, digest: &ComponentDigest, signature: &[u8; 64]) -> bool {
    key.verifies_message(SIGNING_CONTEXT, &digest.0, signature)
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
        let signed = sign(&key, &component()).unwrap();
        let resigned = sign(&key, &signed).unwrap();
        assert_eq!(signed, resigned, "re-signing replaces the old signature");
        let list = sections::sections(&signed).unwrap();
        let sig = read_signature(&signed, &list).unwrap();
        assert_eq!(sig.block.key_id, "alice");
        assert!(verifies(&key.public_key(), &sig.digest, &sig.signature));
        let other = SigningKey::generate("alice").unwrap();
        assert!(!verifies(&other.public_key(), &sig.digest, &sig.signature));
    }

    #[test]
    fn detects_changed_bytes() {
        let key = SigningKey::generate("alice").unwrap();
        let mut signed = sign(&key, &component()).unwrap();
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
        let mut twice = sign(&key, &bytes).unwrap();
        sections::append_custom(&mut twice, SIGNATURE_SECTION, b"{}");
        let list = sections::sections(&twice).unwrap();
        assert!(matches!(
            read_signature(&twice, &list),
            Err(SignatureError::Multiple(2))
        ));
    }
}
