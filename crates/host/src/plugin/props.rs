//! Fuzz targets for what a plugin file brings: the section reader, the signature block and
//! the manifest parser (run by [`crate::fuzz`]). Any bytes either parse or give a typed error,
//! and a signed component with any one byte changed never verifies.

use proptest::collection::vec;
use proptest::prelude::{Just, Strategy, any, prop_assert, prop_oneof};

use super::manifest::Manifest;
use super::sections::{self, MANIFEST_SECTION, SIGNATURE_SECTION};
use super::signature::SigningKey;
use super::trust::{PublisherConfig, TrustConfig, TrustStore};
use super::{inspect, pack, verify};
use crate::fuzz;

const MANIFEST: &str = r#"
    kind = "adapter"
    id = "fuzz.echo"
    version = "0.1.0"
    publisher = "fuzz"
    [[capability]]
    id = "echo"
    capability_class = "observe"
    approval_mode = "read_only"
    input_schema = { type = "object" }
"#;

/// A signed component (a payload section standing in for code, the manifest, the signature)
/// and a trust store that accepts it.
fn signed() -> (Vec<u8>, TrustStore) {
    let key = SigningKey::generate("fuzz-key").unwrap();
    let mut component = b"\0asm\x0d\x00\x01\x00".to_vec();
    sections::append_custom(&mut component, "payload", b"\x00\x61\x73\x6d some code");
    let manifest = Manifest::from_toml(MANIFEST).unwrap();
    let bytes = pack(&component, &manifest, &key).unwrap();
    let trust = TrustStore::new(&TrustConfig {
        publishers: vec![PublisherConfig {
            key_id: "fuzz-key".to_owned(),
            public_key: key.public_key().to_base64(),
            adapters: vec!["fuzz.*".parse().unwrap()],
            policies: Vec::new(),
        }],
    })
    .unwrap();
    (bytes, trust)
}

/// Bytes that reach past the header check: the component preamble, then sections with
/// plausible ids, sizes and names (ours among them), then raw noise.
fn component_like() -> impl Strategy<Value = Vec<u8>> {
    let name = prop_oneof![
        Just(MANIFEST_SECTION.to_owned()),
        Just(SIGNATURE_SECTION.to_owned()),
        "[a-z:]{0,12}",
    ];
    let section = (0_u8..16, name, vec(any::<u8>(), 0..64), any::<bool>()).prop_map(
        |(id, name, data, custom)| {
            let mut bytes = Vec::new();
            if custom {
                sections::append_custom(&mut bytes, &name, &data);
            } else {
                bytes.push(id);
                bytes.push(u8::try_from(data.len()).unwrap());
                bytes.extend(data);
            }
            bytes
        },
    );
    (vec(section, 0..6), vec(any::<u8>(), 0..16)).prop_map(|(sections, noise)| {
        let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
        bytes.extend(sections.concat());
        bytes.extend(noise);
        bytes
    })
}

#[test]
fn any_bytes_are_inspected_or_refused_without_panic() {
    let (_, trust) = signed();
    let bytes = prop_oneof![vec(any::<u8>(), 0..256), component_like()];
    fuzz::run("plugin bytes", bytes, |bytes| {
        let _ = inspect(&bytes);
        // Nothing that is not signed by the trusted key loads.
        prop_assert!(verify(&bytes, &trust).is_err());
        Ok(())
    });
}

#[test]
fn a_signed_component_with_any_byte_changed_never_verifies() {
    let (bytes, trust) = signed();
    verify(&bytes, &trust).expect("the unchanged component verifies");
    let flips = (0..bytes.len(), 1_u8..=255);
    fuzz::run("signed component, one byte flipped", flips, |(at, xor)| {
        let mut changed = bytes.clone();
        changed[at] ^= xor;
        prop_assert!(
            verify(&changed, &trust).is_err(),
            "byte {} ^ {:#04x} still verifies",
            at,
            xor
        );
        Ok(())
    });
}

#[test]
fn any_manifest_text_parses_or_gives_a_typed_error() {
    let valid = Manifest::from_toml(MANIFEST).unwrap().to_json();
    // Valid JSON with bytes changed, arbitrary bytes, and arbitrary TOML-ish text.
    let json = prop_oneof![
        vec(any::<u8>(), 0..256),
        (0..valid.len(), any::<u8>()).prop_map(move |(at, byte)| {
            let mut changed = valid.clone();
            changed[at] = byte;
            changed
        }),
    ];
    fuzz::run("manifest json", json, |bytes| {
        if let Ok(manifest) = Manifest::from_json(&bytes) {
            // What parses is valid and round-trips.
            prop_assert!(manifest.validate().is_ok());
            prop_assert!(Manifest::from_json(&manifest.to_json()).is_ok());
        }
        Ok(())
    });
    let toml = prop_oneof![
        ".{0,200}",
        (0..MANIFEST.len(), "[\\x00-\\x7f]{0,3}").prop_map(|(at, insert)| {
            let at = MANIFEST.floor_char_boundary(at);
            format!("{}{insert}{}", &MANIFEST[..at], &MANIFEST[at..])
        }),
    ];
    fuzz::run("manifest toml", toml, |text| {
        if let Ok(manifest) = Manifest::from_toml(&text) {
            prop_assert!(manifest.validate().is_ok());
        }
        Ok(())
    });
}
