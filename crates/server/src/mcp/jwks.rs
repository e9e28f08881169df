//! The gateway's public keys, as a JWK Set (RFC 7517) at [`PATH`] on the MCP listener: the key
//! results' receipts are signed with (`[receipts] key`) and the key the A2A agent card is
//! signed with (`[mcp.a2a] key`), each an Ed25519 JWK under its key id (RFC 8037). A caller
//! verifies a receipt, and a peer the card (whose signature names this URL as its `jku`),
//! without being handed a key file.
//!
//! Public halves only, to anyone who asks: nothing here is a secret, so no identity is asked
//! for. A gateway with neither key publishes no set (404). Two keys under one id are refused
//! when the endpoint is built: a verifier picks a key by its id.

use gatehouse_core::agent_card::jwk;
use gatehouse_core::keys::PublicKey;
use serde_json::{Value, json};

/// Where the key set is served.
pub const PATH: &str = "/.well-known/jwks.json";

/// The key set of `keys` (each key once), or `None` if there are none. Two different keys
/// under one id are an error naming it.
pub fn key_set(keys: &[(&str, PublicKey)]) -> Result<Option<Value>, String> {
    let mut published: Vec<&(&str, PublicKey)> = Vec::new();
    for entry @ (role, key) in keys {
        match published.iter().find(|(_, seen)| seen.key_id == key.key_id) {
            Some((_, seen)) if seen.to_bytes() == key.to_bytes() => {}
            Some((other, _)) => {
                return Err(format!(
                    "{other} and {role} are different keys with one id, `{}`: a verifier picks \
                     a key by its id; make one of them with another (`gatehouse keygen \
                     --key-id ...`)",
                    key.key_id
                ));
            }
            None => published.push(entry),
        }
    }
    Ok((!published.is_empty()).then(|| {
        let keys: Vec<Value> = published.iter().map(|(_, key)| jwk(key)).collect();
        json!({ "keys": keys })
    }))
}

#[cfg(test)]
mod tests {
    use gatehouse_core::keys::SigningKey;

    use super::*;

    #[test]
    fn each_key_is_published_once_and_two_keys_under_one_id_are_refused() {
        let receipts = SigningKey::generate("gateway-2026").unwrap().public_key();
        let card = SigningKey::generate("card-2026").unwrap().public_key();
        assert_eq!(key_set(&[]).unwrap(), None);
        let set = key_set(&[
            ("[receipts] key", receipts.clone()),
            ("[mcp.a2a] key", card),
        ])
        .unwrap()
        .unwrap();
        let ids: Vec<&Value> = set["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| &k["kid"])
            .collect();
        assert_eq!(ids, [&json!("gateway-2026"), &json!("card-2026")]);
        // One key signing both is one entry.
        let same = key_set(&[
            ("[receipts] key", receipts.clone()),
            ("[mcp.a2a] key", receipts),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(same["keys"].as_array().unwrap().len(), 1);
        let twin = SigningKey::generate("gateway-2026").unwrap().public_key();
        let error = key_set(&[
            (
                "[receipts] key",
                SigningKey::generate("gateway-2026").unwrap().public_key(),
            ),
            ("[mcp.a2a] key", twin),
        ])
        .unwrap_err();
        assert!(
            error.starts_with(
                "[receipts] key and [mcp.a2a] key are different keys with one id, `gateway-2026`"
            ),
            "{error}"
        );
    }
}
