//! Coverage-guided fuzz target of the finder (issue 57, item 6; the engine, and how to run a
//! target for hours: `gatehouse_host`'s `fuzz` module). Agents write the arguments and
//! upstreams the results it reads, so any bytes are read as text and, when they parse, as
//! JSON, and masked with every kind of secret (`password` a named field):
//! 1. masking what was masked finds nothing and changes nothing (no mask makes a secret, no
//!    secret is left beside one), for text and for JSON, its keys included;
//! 2. masking JSON keeps its shape: every array item and object entry is still there (keys that
//!    mask alike included), in the same order.
//!
//! Never a panic on the way (a slice off a character boundary, in the search around a refused
//! match, would be one).

use serde_json::Value;

use super::{Masks, SecretKind};

fn all_kinds() -> Masks {
    Masks::new().secrets(&SecretKind::ALL, &["password".to_owned()])
}

/// One input: panics if an invariant above breaks.
fn target(bytes: &[u8]) {
    let masks = all_kinds();
    if let Ok(text) = std::str::from_utf8(bytes) {
        let mut once = text.to_owned();
        masks.mask_text(&mut once);
        let mut twice = once.clone();
        assert_eq!(
            masks.mask_text(&mut twice),
            Vec::<String>::new(),
            "{once:?}"
        );
        assert_eq!(twice, once, "masked again: {text:?}");
    }
    if let Ok(value) = serde_json::from_slice::<Value>(bytes) {
        let mut once = value.clone();
        masks.mask_value(&mut once, "");
        same_shape(&value, &once);
        let mut twice = once.clone();
        let (findings, _) = masks.mask_value(&mut twice, "");
        assert!(findings.is_empty(), "{once}: {findings:?}");
        assert_eq!(twice, once, "masked again: {value}");
    }
}

/// `masked` has the items and entries of `value`, in order.
fn same_shape(value: &Value, masked: &Value) {
    match (value, masked) {
        (Value::Array(items), Value::Array(masked_items)) => {
            assert_eq!(
                items.len(),
                masked_items.len(),
                "{value} masked as {masked}"
            );
            for (item, masked_item) in items.iter().zip(masked_items) {
                same_shape(item, masked_item);
            }
        }
        (Value::Object(map), Value::Object(masked_map)) => {
            assert_eq!(map.len(), masked_map.len(), "{value} masked as {masked}");
            for (item, masked_item) in map.values().zip(masked_map.values()) {
                same_shape(item, masked_item);
            }
        }
        (Value::String(_), Value::String(_)) => {}
        _ => assert_eq!(value, masked),
    }
}

/// The target: under `cargo test`, its corpus (`__fuzz__/fuzz__masks/corpus`) and a second of
/// random bytes; under `build-support/fuzz fuzz::masks`, libFuzzer.
#[test]
fn masks() {
    bolero::check!().for_each(target);
}
