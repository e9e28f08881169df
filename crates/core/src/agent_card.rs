//! A2A agent-card signatures (A2A 1.0 §8.4): a JWS whose payload is the card's RFC 8785
//! form, as a verifier computes it (without `signatures`, and without empty strings, lists and
//! objects, which the protocol's JSON leaves out), in the JSON serialization with a detached
//! payload: `{"protected", "signature"}`. gatehouse signs its own card with EdDSA ([`sign`])
//! and verifies an imported agent's ([`verify`]); Ed25519 is the one algorithm it takes.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use serde_json::{Map, Value, json};

use crate::canonical::canonical_json;
use crate::keys::{PublicKey, SigningKey};

/// The signature of `card` with `key`: `{"protected", "signature"}`, the protected header
/// `{"alg": "EdDSA", "typ": "JOSE", "kid": <the key's id>}`, and `jku`, the URL of a key set
/// that serves the key's public half ([`jwk`]) under that id, if given.
pub fn sign(card: &Value, key: &SigningKey, jku: Option<&str>) -> Value {
    let mut header = json!({ "alg": "EdDSA", "typ": "JOSE", "kid": key.key_id });
    if let Some(jku) = jku {
        header["jku"] = json!(jku);
    }
    let protected = B64URL.encode(canonical_json(&header).as_bytes());
    let signature = key.sign_message(b"", signing_input(card, &protected).as_bytes());
    json!({ "protected": protected, "signature": B64URL.encode(signature) })
}

/// The protected header of `signature` (one entry of a card's `signatures`), decoded.
pub fn header(signature: &Value) -> Result<Map<String, Value>, String> {
    let protected = signature["protected"]
        .as_str()
        .ok_or("the signature has no `protected` header")?;
    let bytes = B64URL
        .decode(protected.trim_end_matches('='))
        .map_err(|e| format!("its protected header is not base64url: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("its protected header is not JSON: {e}"))
}

/// Checks that `signature` is `key`'s EdDSA signature of `card`, as it is now.
pub fn verify(card: &Value, signature: &Value, key: &PublicKey) -> Result<(), String> {
    let alg = header(signature)?
        .get("alg")
        .cloned()
        .unwrap_or(Value::Null);
    if alg != "EdDSA" {
        return Err(format!(
            "it is signed with {alg}; gatehouse verifies EdDSA (Ed25519) card signatures"
        ));
    }
    let protected = signature["protected"].as_str().unwrap_or_default();
    let bytes = (signature["signature"].as_str())
        .and_then(|s| B64URL.decode(s.trim_end_matches('=')).ok())
        .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok())
        .ok_or("its `signature` is not 64 bytes of base64url")?;
    if key.verifies_message(b"", signing_input(card, protected).as_bytes(), &bytes) {
        Ok(())
    } else {
        Err(format!(
            "its signature does not verify with key `{}`: the card changed since it was \
             signed, or another key signed it",
            key.key_id
        ))
    }
}

/// The Ed25519 public key of a JWK (`{"kty": "OKP", "crv": "Ed25519", "x": ...}`), under
/// `key_id`.
pub fn jwk_key(key_id: &str, jwk: &Value) -> Result<PublicKey, String> {
    if jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" {
        return Err(format!(
            "not an Ed25519 key (kty {}, crv {}); gatehouse verifies EdDSA (Ed25519) signatures",
            jwk["kty"], jwk["crv"]
        ));
    }
    let x = (jwk["x"].as_str())
        .and_then(|x| B64URL.decode(x.trim_end_matches('=')).ok())
        .ok_or("its `x` is not base64url")?;
    let standard = base64::engine::general_purpose::STANDARD.encode(x);
    PublicKey::from_base64(key_id, &standard).map_err(|e| e.to_string())
}

/// `key` as a JWK (RFC 8037), as a key set serves it: `{"kty": "OKP", "crv": "Ed25519", "x",
/// "kid", "alg": "EdDSA", "use": "sig"}`. [`jwk_key`] reads it back.
pub fn jwk(key: &PublicKey) -> Value {
    json!({
        "kty": "OKP",
        "crv": "Ed25519",
        "x": B64URL.encode(key.to_bytes()),
        "kid": key.key_id,
        "alg": "EdDSA",
        "use": "sig",
    })
}

/// The Ed25519 key `kid` of the JWK Set `set` (`{"keys": [...]}`, as a signature's `jku` or
/// a gateway's `/.well-known/jwks.json` serves it).
pub fn key_in_set(set: &Value, kid: &str) -> Result<PublicKey, String> {
    let keys = set["keys"]
        .as_array()
        .ok_or("it is not a key set (`{\"keys\": [...]}`)")?;
    let jwk = (keys.iter().find(|k| k["kid"] == kid))
        .ok_or_else(|| format!("the key set has no key `{kid}`"))?;
    jwk_key(kid, jwk).map_err(|e| format!("key `{kid}`: {e}"))
}

/// `protected.payload`, what the signature signs.
fn signing_input(card: &Value, protected: &str) -> String {
    let mut unsigned = card.clone();
    if let Some(card) = unsigned.as_object_mut() {
        card.remove("signatures");
    }
    let payload = canonical_json(&without_empty(unsigned).unwrap_or_else(|| json!({})));
    format!("{protected}.{}", B64URL.encode(payload.as_bytes()))
}

/// `value` without its empty strings, lists and objects, at every level (`None` if nothing is
/// left).
fn without_empty(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let kept: Map<String, Value> = (map.into_iter())
                .filter_map(|(key, value)| without_empty(value).map(|value| (key, value)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items.into_iter().filter_map(without_empty).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::String(text) if text.is_empty() => None,
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_payload_leaves_out_what_the_wire_leaves_out() {
        let card = json!({ "name": "g", "description": "", "skills": [{ "id": "a", "tags": [] }],
                           "capabilities": { "streaming": false }, "signatures": [{}] });
        let mut unsigned = card.clone();
        unsigned.as_object_mut().unwrap().remove("signatures");
        assert_eq!(
            without_empty(unsigned),
            Some(
                json!({ "name": "g", "skills": [{ "id": "a" }], "capabilities": { "streaming": false } })
            )
        );
        assert_eq!(without_empty(json!({ "a": [{ "b": "" }] })), None);
    }

    #[test]
    fn a_signature_verifies_until_the_card_changes() {
        let key = SigningKey::generate("desk").unwrap();
        let mut card = json!({ "name": "g", "skills": [{ "id": "a" }] });
        let signature = sign(&card, &key, Some("https://g.example/.well-known/jwks.json"));
        card["signatures"] = json!([signature]);
        // Signatures and empty fields are not signed.
        card["description"] = json!("");
        assert_eq!(verify(&card, &signature, &key.public_key()), Ok(()));
        assert_eq!(header(&signature).unwrap()["kid"], "desk");
        assert_eq!(
            header(&signature).unwrap()["jku"],
            "https://g.example/.well-known/jwks.json"
        );
        card["name"] = json!("h");
        let error = verify(&card, &signature, &key.public_key()).unwrap_err();
        assert!(error.contains("does not verify with key `desk`"), "{error}");
        let other = SigningKey::generate("other").unwrap();
        card["name"] = json!("g");
        assert!(verify(&card, &signature, &other.public_key()).is_err());
        let forged = json!({ "protected": B64URL.encode(br#"{"alg":"none"}"#), "signature": "" });
        let error = verify(&card, &forged, &key.public_key()).unwrap_err();
        assert!(error.contains("signed with \"none\""), "{error}");
        let public = key.public_key();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(public.to_base64())
            .unwrap();
        let jwk = json!({ "kty": "OKP", "crv": "Ed25519", "x": B64URL.encode(&raw) });
        assert_eq!(
            jwk_key("desk", &jwk).unwrap().to_base64(),
            public.to_base64()
        );
        // The JWK a key set serves is the key, under its id.
        let served = super::jwk(&public);
        assert_eq!(served["x"], jwk["x"]);
        assert_eq!(served["kid"], "desk");
        assert_eq!(
            jwk_key("desk", &served).unwrap().to_base64(),
            public.to_base64()
        );
        assert!(jwk_key("desk", &json!({ "kty": "EC", "crv": "P-256" })).is_err());
    }
}
