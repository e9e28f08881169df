//! Signed receipts (issue 58, AARM's signed receipts): what the gateway decided and did about
//! one call, signed with its key, so the caller (an agent, or its person) can prove it later
//! without trusting the gateway's database.
//!
//! A receipt names the call, its tool, the digest of its request (as idempotency keys are
//! bound: [`request_hash`](crate::canonical::request_hash)), the policy verdict, the outcome,
//! the digest of the result as delivered ([`result_digest`]), and where the call's audit entry
//! is: its position in the log (`seq`), its chain and place in it (`chain`, `link`) and its
//! hash, which fixes the chain up to it. The signature (ed25519, domain-separated from
//! component and checkpoint signatures) covers the canonical JSON of every other field.
//!
//! `gatehouse receipt verify RECEIPT --key KEY [--audit EXPORT]` checks the signature, and,
//! given an audit export, that the export holds the entry as the receipt says, linked into its
//! chain.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::canonical_json;
use crate::keys::{PublicKey, SigningKey};

/// Domain separation: a receipt signature is never a component's or a checkpoint's.
const CONTEXT: &[u8] = b"gatehouse-receipt-v1\0";

/// The receipt format this gateway writes.
pub const VERSION: u32 = 1;

/// One call's signed receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// The receipt format: [`VERSION`].
    pub v: u32,
    /// The call.
    pub tool_call_id: String,
    /// The tool (after meta-tool resolution).
    pub tool: String,
    /// `sha256:` of the request: the tool, its arguments and the mode asked for.
    pub request: String,
    /// The policy verdict (`allow`, `deny`, `require_approval`), or `none` when the call
    /// stopped before the policy gate.
    pub decision: String,
    /// The outcome code.
    pub outcome: String,
    /// `sha256:` of the result as delivered ([`result_digest`]).
    pub result: String,
    /// The call's audit entry: its position in the log.
    pub seq: u64,
    /// Its chain.
    pub chain: u32,
    /// Its place in the chain.
    pub link: u64,
    /// Its hash: the chain's head when it was appended.
    pub hash: String,
    /// When the receipt was signed, unix ms.
    pub at_ms: u64,
    /// The signing key's id.
    pub key_id: String,
    /// ed25519 over the context tag and the canonical JSON of every other field, base64.
    pub signature: String,
}

/// What a receipt says, before it is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool: String,
    /// `sha256:` of the request.
    pub request: String,
    /// The policy verdict, or `none`.
    pub decision: String,
    /// The outcome code.
    pub outcome: String,
    /// `sha256:` of the result as delivered.
    pub result: String,
    /// The audit entry's position, chain, place in it, and hash.
    pub entry: (u64, u32, u64, String),
}

/// The digest of a result as its caller got it: `sha256:` of the canonical JSON of its
/// `status`, `content`, `structured_content` and `error` (absent ones as `null`), each as the
/// result envelope spells it.
pub fn result_digest(status: &Value, content: &Value, structured: &Value, error: &Value) -> String {
    let value = serde_json::json!({
        "status": status,
        "content": content,
        "structured_content": structured,
        "error": error,
    });
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(&value)))
    )
}

impl Receipt {
    /// A receipt read from JSON as it may arrive: a number it holds may have become a double
    /// on the way (`0.0`), as every number in protobuf's `Struct` does (A2A's metadata, where
    /// a task carries its call's result), and is read back as the integer it was. Its fields
    /// are integers that a double holds exactly (positions, milliseconds), so nothing changes.
    ///
    /// # Errors
    /// The JSON is not a receipt.
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        fn integral(value: Value) -> Value {
            match value {
                Value::Number(n) if !n.is_i64() && !n.is_u64() => match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && (0.0..9.007_199_254_740_992e15).contains(&f) =>
                    {
                        #[expect(
                            clippy::cast_possible_truncation,
                            clippy::cast_sign_loss,
                            reason = "a whole, non-negative double below 2^53"
                        )]
                        Value::from(f as u64)
                    }
                    _ => Value::Number(n),
                },
                other => other,
            }
        }
        let value = match value {
            Value::Object(fields) => Value::Object(
                fields
                    .into_iter()
                    .map(|(name, value)| (name, integral(value)))
                    .collect(),
            ),
            other => other,
        };
        serde_json::from_value(value)
    }

    /// Signs `statement` with `key` at `at_ms`.
    pub fn sign(key: &SigningKey, statement: Statement, at_ms: u64) -> Self {
        let Statement {
            tool_call_id,
            tool,
            request,
            decision,
            outcome,
            result,
            entry: (seq, chain, link, hash),
        } = statement;
        let mut receipt = Self {
            v: VERSION,
            tool_call_id,
            tool,
            request,
            decision,
            outcome,
            result,
            seq,
            chain,
            link,
            hash,
            at_ms,
            key_id: key.key_id.clone(),
            signature: String::new(),
        };
        receipt.signature = BASE64.encode(key.sign_message(CONTEXT, &receipt.message()));
        receipt
    }

    /// The signed bytes after the context tag: the canonical JSON of every field but the
    /// signature.
    fn message(&self) -> Vec<u8> {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(fields) = value.as_object_mut() {
            fields.remove("signature");
        }
        canonical_json(&value).into_bytes()
    }

    /// Whether `key` signed this receipt as it stands (and it names that key).
    pub fn verifies(&self, key: &PublicKey) -> bool {
        let Ok(signature) = BASE64.decode(&self.signature) else {
            return false;
        };
        let Ok(signature) = <[u8; 64]>::try_from(signature.as_slice()) else {
            return false;
        };
        self.v == VERSION
            && self.key_id == key.key_id
            && key.verifies_message(CONTEXT, &self.message(), &signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_whose_numbers_became_doubles_on_the_way_reads_and_verifies() {
        let key = SigningKey::generate("gw").unwrap();
        let statement = Statement {
            tool_call_id: "call_1".to_owned(),
            tool: "a.b".to_owned(),
            request: "sha256:00".to_owned(),
            decision: "allow".to_owned(),
            outcome: "OK".to_owned(),
            result: "sha256:11".to_owned(),
            entry: (42, 0, 7, "sha256:22".to_owned()),
        };
        let receipt = Receipt::sign(&key, statement, 1_796_029_200_500);
        // What protobuf's Struct makes of it: every number a double.
        let text = serde_json::to_string(&receipt).unwrap();
        let doubled = text
            .replace("\"seq\":42", "\"seq\":42.0")
            .replace("\"chain\":0", "\"chain\":0.0")
            .replace("\"at_ms\":1796029200500", "\"at_ms\":1.7960292005e12")
            .replace("\"v\":1", "\"v\":1.0");
        assert_ne!(doubled, text);
        let value: Value = serde_json::from_str(&doubled).unwrap();
        assert!(serde_json::from_value::<Receipt>(value.clone()).is_err());
        let read = Receipt::from_json(value).unwrap();
        assert_eq!(read, receipt);
        assert!(read.verifies(&key.public_key()));
        // A fraction is no integer: refused, not rounded.
        let value: Value =
            serde_json::from_str(&text.replace("\"seq\":42", "\"seq\":42.5")).unwrap();
        assert!(Receipt::from_json(value).is_err());
    }

    fn statement() -> Statement {
        Statement {
            tool_call_id: "call_1".into(),
            tool: "mail.send".into(),
            request: "sha256:aa".into(),
            decision: "allow".into(),
            outcome: "OK".into(),
            result: "sha256:bb".into(),
            entry: (7, 0, 7, "sha256:cc".into()),
        }
    }

    #[test]
    fn a_receipt_verifies_with_its_key_only_and_every_field_is_covered() {
        let key = SigningKey::generate("gw-1").unwrap();
        let receipt = Receipt::sign(&key, statement(), 1_000);
        assert!(receipt.verifies(&key.public_key()));
        assert!(!receipt.verifies(&SigningKey::generate("gw-1").unwrap().public_key()));
        let json = serde_json::to_value(&receipt).unwrap();
        for field in json
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "signature")
        {
            let mut tampered = json.clone();
            tampered[field] = match &json[field] {
                Value::String(s) => Value::String(format!("{s}x")),
                Value::Number(n) => Value::from(n.as_u64().unwrap() + 1),
                other => panic!("{field}: {other}"),
            };
            let tampered: Receipt = serde_json::from_value(tampered).unwrap();
            assert!(
                !tampered.verifies(&key.public_key()),
                "{field} is not covered"
            );
        }
    }

    #[test]
    fn the_result_digest_is_of_what_the_caller_got() {
        let ok = result_digest(
            &Value::from("ok"),
            &serde_json::json!([{"type": "text", "text": "hi"}]),
            &Value::Null,
            &Value::Null,
        );
        let other = result_digest(
            &Value::from("ok"),
            &serde_json::json!([{"type": "text", "text": "hj"}]),
            &Value::Null,
            &Value::Null,
        );
        assert!(ok.starts_with("sha256:") && ok != other);
    }
}
