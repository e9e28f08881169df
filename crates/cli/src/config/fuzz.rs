//! Coverage-guided fuzz target of the operator config (issue 43, item 12; the engine, and how
//! to run a target for hours: `gatehouse_host`'s `fuzz` module): any UTF-8 text read as
//! `gatehouse.toml` the way `gatehouse serve` reads it ([`ServeConfig::from_toml`]: the
//! server's tables taken out of one parsed document, the rest the library's [`HostConfig`]).
//!
//! Text is a config or an error message, never a panic; and the library's tables of a config
//! read back as themselves from the TOML gatehouse writes for them (`gatehouse demo --export`
//! writes `gatehouse.toml` with `toml::to_string_pretty`), whenever TOML can hold them.

use gatehouse_host::HostConfig;

use super::ServeConfig;

/// One input: panics if an invariant above breaks.
fn target(bytes: &[u8]) {
    // `gatehouse serve` reads the file as UTF-8 text first (`config::read`).
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(config) = ServeConfig::from_toml(text) else {
        return;
    };
    if let Ok(written) = toml::to_string_pretty(&config.host) {
        match HostConfig::from_toml(&written) {
            Ok(back) => assert_eq!(back, config.host, "written as:\n{written}"),
            Err(error) => {
                panic!("the config gatehouse writes does not read back: {error}\n{written}")
            }
        }
    }
}

/// The target: under `cargo test`, its corpus (`__fuzz__/config__fuzz__serve_config/corpus`)
/// and a second of random bytes; under `cargo bolero test config::fuzz::serve_config`,
/// libFuzzer.
#[test]
fn serve_config() {
    bolero::check!().for_each(target);
}
