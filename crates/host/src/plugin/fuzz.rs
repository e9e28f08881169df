//! Coverage-guided fuzz target of the manifest parser (issue 43, item 12; the engine, and how to
//! run a target for hours: [`crate::fuzz`]). Any bytes are read as a JSON manifest (the form
//! embedded in components) and, when they are UTF-8, as a TOML manifest (the file a publisher
//! writes). Each reading is a `ManifestError` or a manifest that validates and reads back as
//! itself from both forms gatehouse writes ([`Manifest::to_json`], and [`Manifest::to_toml`]
//! whenever TOML can hold it), as `props.rs` asserts of its generated inputs.

use super::manifest::Manifest;

/// One input: panics if an invariant above breaks.
fn target(bytes: &[u8]) {
    if let Ok(manifest) = Manifest::from_json(bytes) {
        reads_back(&manifest);
    }
    if let Ok(text) = std::str::from_utf8(bytes)
        && let Ok(manifest) = Manifest::from_toml(text)
    {
        reads_back(&manifest);
    }
}

/// A manifest that parsed validates, and reads back as itself from its JSON and TOML forms.
fn reads_back(manifest: &Manifest) {
    if let Err(error) = manifest.validate() {
        panic!("a parsed manifest does not validate: {error}");
    }
    let json = manifest.to_json();
    match Manifest::from_json(&json) {
        Ok(back) => assert_eq!(
            &back,
            manifest,
            "JSON form: {}",
            String::from_utf8_lossy(&json)
        ),
        Err(error) => panic!("the JSON form does not read back: {error}"),
    }
    // `to_toml` may refuse (a typed error: a value TOML cannot hold outside a schema); what it
    // writes must read back.
    if let Ok(toml) = manifest.to_toml() {
        match Manifest::from_toml(&toml) {
            Ok(back) => assert_eq!(&back, manifest, "TOML form: {toml}"),
            Err(error) => panic!("the TOML form does not read back: {error}\n{toml}"),
        }
    }
}

/// The target: under `cargo test`, its corpus (`__fuzz__/plugin__fuzz__manifest/corpus`) and a
/// second of random bytes; under `cargo bolero test plugin::fuzz::manifest`, libFuzzer.
#[test]
fn manifest() {
    bolero::check!().for_each(target);
}
