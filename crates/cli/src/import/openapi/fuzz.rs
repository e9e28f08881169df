//! Coverage-guided fuzz target of `gatehouse import openapi` (issue 43, item 12; the engine, and
//! how to run a target for hours: `gatehouse_host`'s `fuzz` module): any UTF-8 text imported as
//! an OpenAPI document, JSON or YAML, within the importer's own bounds (`MAX_SCHEMA_VALUES`,
//! `MAX_IMPORT_VALUES`).
//!
//! A document is an `ImportError` or an import whose written files read back, as
//! `tests.rs`'s `the_written_files_read_back` asserts of the petstore: `manifest.toml` as the
//! same manifest, `config.toml` as operator config holding the same egress grant.

use gatehouse_host::plugin::manifest::Manifest;

use super::super::{Options, output};
use super::import;

/// One input: panics if an invariant above breaks.
fn target(bytes: &[u8]) {
    // The command reads the document as UTF-8 text first.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(import) = import(text, None, &Options::new("fuzz.api")) else {
        return;
    };
    // Writing may refuse with a typed error; what it writes must read back.
    if let Ok(written) = output::manifest_toml(&import, "fuzz.json") {
        match Manifest::from_toml(&written) {
            Ok(back) => assert_eq!(back, Manifest::Adapter(import.manifest.clone())),
            Err(error) => panic!("the manifest written does not read back: {error}\n{written}"),
        }
    }
    let config = output::config_toml(&import);
    match crate::ServeConfig::from_toml(&config) {
        Ok(back) => assert_eq!(back.host.egress.grants, import.grants.as_slice()),
        Err(error) => panic!("the config written does not read back: {error}\n{config}"),
    }
}

/// The target: under `cargo test`, its corpus (`__fuzz__/import__openapi__fuzz__document/corpus`)
/// and a second of random bytes; under `cargo bolero test import::openapi::fuzz::document`,
/// libFuzzer.
#[test]
fn document() {
    bolero::check!().for_each(target);
}
