//! The vault: envelope encryption of what the store keeps for a user's connection (their
//! tokens) and for a flow under way (its PKCE verifier).
//!
//! Each sealed value gets a data key of its own (256 random bits); the value is sealed with it
//! (AES-256-GCM, `ring`), and the data key is sealed with the vault key the operator provides
//! (`[oauth] vault_key_file`). Both seals take the same associated data, which names what the
//! value belongs to (tenant, principal, provider, resource; for a flow, its state's hash too):
//! a sealed value copied to another principal's row does not open, nor does one sealed under
//! another vault key. The store sees the envelope only: one base64 text,
//! `version | key nonce | sealed data key | value nonce | sealed value`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// The envelope's version byte.
const VERSION: u8 = 1;
/// A key's length: AES-256.
const KEY_LEN: usize = 32;
/// A seal's tag length (AES-GCM).
const TAG_LEN: usize = 16;

/// The vault key, loaded.
pub struct Vault {
    key: LessSafeKey,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault")
    }
}

/// Why a sealed value did not open: never more than that (which part failed tells an attacker
/// nothing useful, and the caller's answer is the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a sealed value does not open: it was sealed for another owner, under another vault key, or altered"
)]
pub struct Unopened;

impl Vault {
    /// The vault over `key` (32 bytes).
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        Self { key: sealer(key) }
    }

    /// The vault over the key in `path`, `[oauth] vault_key_file`: at least 32 bytes (or 64
    /// hex digits), made with mode 0600 if the file does not exist, as the gateway's other
    /// keys are ([`gatehouse_core::secret::key_file`]). The AES key is its SHA-256, under the
    /// vault's own label.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        use sha2::Digest as _;
        let material = gatehouse_core::secret::key_file(Some(path), "`[oauth] vault_key_file`")?;
        let mut hasher = sha2::Sha256::new();
        hasher.update(b"gatehouse.vault-key.v1");
        hasher.update(&material);
        Ok(Self::new(&hasher.finalize().into()))
    }

    /// `value`, sealed for the owner `aad` names.
    pub fn seal(&self, value: &[u8], aad: &[u8]) -> String {
        let data_key: [u8; KEY_LEN] = random();
        let mut out = vec![VERSION];
        seal_into(&self.key, &data_key, aad, &mut out);
        seal_into(&sealer(&data_key), value, aad, &mut out);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// A value [`Vault::seal`] sealed for the owner `aad` names.
    pub fn open(&self, sealed: &str, aad: &[u8]) -> Result<Vec<u8>, Unopened> {
        let bytes = URL_SAFE_NO_PAD.decode(sealed).map_err(|_| Unopened)?;
        let (&version, rest) = bytes.split_first().ok_or(Unopened)?;
        if version != VERSION || rest.len() < 2 * (NONCE_LEN + TAG_LEN) + KEY_LEN {
            return Err(Unopened);
        }
        let (wrapped, value) = rest.split_at(NONCE_LEN + KEY_LEN + TAG_LEN);
        let data_key = open_from(&self.key, wrapped, aad)?;
        let data_key: [u8; KEY_LEN] = data_key.as_slice().try_into().map_err(|_| Unopened)?;
        open_from(&sealer(&data_key), value, aad)
    }
}

/// What a connection's seal is bound to.
pub fn connection_aad(tenant: &str, principal: &str, provider: &str, resource: &str) -> Vec<u8> {
    bound(&[
        b"connection",
        tenant.as_bytes(),
        principal.as_bytes(),
        provider.as_bytes(),
        resource.as_bytes(),
    ])
}

/// What a flow's verifier's seal is bound to.
pub fn flow_aad(state_hash: &str, tenant: &str, principal: &str, provider: &str) -> Vec<u8> {
    bound(&[
        b"flow",
        state_hash.as_bytes(),
        tenant.as_bytes(),
        principal.as_bytes(),
        provider.as_bytes(),
    ])
}

/// Length-prefixed parts under the vault's domain, so no two lists of parts are the same bytes.
fn bound(parts: &[&[u8]]) -> Vec<u8> {
    let mut aad = b"gatehouse.vault.v1".to_vec();
    for part in parts {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part);
    }
    aad
}

fn sealer(key: &[u8; KEY_LEN]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key is an AES-256 key"))
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes
}

/// Appends `nonce | sealed value | tag` of `value` under `key`. A random nonce per seal: each
/// data key seals one value, and the vault key seals one data key per value (2^-32 collision
/// odds at 2^32 values under one vault key, NIST's bound for random GCM nonces).
fn seal_into(key: &LessSafeKey, value: &[u8], aad: &[u8], out: &mut Vec<u8>) {
    let nonce: [u8; NONCE_LEN] = random();
    let mut sealed = value.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad),
        &mut sealed,
    )
    .expect("AES-GCM seals any value this small");
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
}

fn open_from(key: &LessSafeKey, part: &[u8], aad: &[u8]) -> Result<Vec<u8>, Unopened> {
    let (nonce, sealed) = part.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unopened)?;
    let mut sealed = sealed.to_vec();
    let opened = key
        .open_in_place(nonce, Aad::from(aad), &mut sealed)
        .map_err(|_| Unopened)?;
    Ok(opened.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_opens_only_for_its_owner_and_key() {
        let vault = Vault::new(&[7; KEY_LEN]);
        let alice = connection_aad("acme", "user:alice", "github", "");
        let bob = connection_aad("acme", "user:bob", "github", "");
        let sealed = vault.seal(b"gho_secret", &alice);
        assert_eq!(vault.open(&sealed, &alice).unwrap(), b"gho_secret");
        assert!(!sealed.contains("gho_secret"));
        assert_eq!(
            vault.open(&sealed, &bob),
            Err(Unopened),
            "copied to bob's row"
        );
        let other = connection_aad("globex", "user:alice", "github", "");
        assert_eq!(vault.open(&sealed, &other), Err(Unopened), "another tenant");
        assert_eq!(
            Vault::new(&[8; KEY_LEN]).open(&sealed, &alice),
            Err(Unopened),
            "another vault key"
        );
        // Two seals of one value differ (fresh data key and nonces).
        assert_ne!(vault.seal(b"gho_secret", &alice), sealed);
    }

    #[test]
    fn an_altered_or_truncated_envelope_does_not_open() {
        let vault = Vault::new(&[7; KEY_LEN]);
        let aad = connection_aad("acme", "u", "p", "r");
        let sealed = vault.seal(b"token", &aad);
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
        for at in [0, 1, 20, bytes.len() - 1] {
            bytes[at] ^= 1;
            assert_eq!(
                vault.open(&URL_SAFE_NO_PAD.encode(&bytes), &aad),
                Err(Unopened)
            );
            bytes[at] ^= 1;
        }
        for len in [0, 1, 40, bytes.len() - 1] {
            assert_eq!(
                vault.open(&URL_SAFE_NO_PAD.encode(&bytes[..len]), &aad),
                Err(Unopened)
            );
        }
        assert_eq!(vault.open("not base64!", &aad), Err(Unopened));
    }

    #[test]
    fn owners_that_differ_only_in_where_a_part_ends_are_different_owners() {
        assert_ne!(
            connection_aad("ab", "c", "p", ""),
            connection_aad("a", "bc", "p", "")
        );
    }
}
