//! The runner of the property-based fuzz targets (issue 9, item 9): the parsers and matchers
//! hostile input reaches (`plugin::props`, `egress::props`, `mcp::props`).
//!
//! A plain `cargo test` runs each target for proptest's default case count (256, or
//! `PROPTEST_CASES`), a few seconds in all. With `GATEHOUSE_FUZZ_SECS=<n>` each target instead
//! runs batches of fresh random cases until `n` seconds have passed, and prints how many it ran:
//!
//! ```text
//! GATEHOUSE_FUZZ_SECS=60 cargo test -p gatehouse-host --lib props -- --test-threads 1 --nocapture
//! ```
//!
//! Failures are not persisted to files: a crash found is fixed with a named regression test
//! next to the target.
//!
//! Beside these, five coverage-guided fuzz targets (issue 43, item 12; issue 57, item 6), one
//! per parser an attacker or a careless file reaches, each a thin function over the real
//! parser, in the crate that owns it:
//!
//! | target (test path)                 | file                                      | input |
//! |------------------------------------|-------------------------------------------|-------|
//! | `plugin::fuzz::manifest`           | `crates/host/src/plugin/fuzz.rs`          | a plugin manifest, JSON and TOML |
//! | `config::fuzz::serve_config`       | `crates/cli/src/config/fuzz.rs`           | `gatehouse.toml` as `gatehouse serve` reads it |
//! | `import::openapi::fuzz::document`  | `crates/cli/src/import/openapi/fuzz.rs`   | an OpenAPI document, JSON or YAML |
//! | `mcp::fuzz::request`               | `crates/server/src/mcp/fuzz.rs`           | the body of a POST to the MCP endpoint |
//! | `fuzz::masks`                      | `crates/guardrails/src/fuzz.rs`           | text and JSON the secrets finder masks |
//!
//! They are [bolero](https://docs.rs/bolero) targets with its libFuzzer engine, chosen because
//! it is the one that works here, on the pinned stable toolchain:
//! - it builds on stable Rust: cargo-bolero's libFuzzer build instruments with
//!   `-Cpasses=sancov-module` and `-Cllvm-args=-sanitizer-coverage-*`, stable codegen options;
//!   only its default AddressSanitizer needs nightly (`-Zsanitizer`), and leaving it out costs
//!   little here (our crates are safe Rust; a memory error in a dependency's unsafe code shows
//!   only if it crashes). cargo-afl would work too, but its targets are binaries with a `main`
//!   of their own, replayed under `cargo test` by a harness of ours, and it builds AFL++ from C
//!   sources on each machine first;
//! - a bolero target is an ordinary `#[test]`: under `cargo test` it replays the committed
//!   corpus (`__fuzz__/<target>/corpus/` beside its file) and a second of random input, so CI
//!   runs every target with no step of its own; built with the instrumentation, the same
//!   function is a libFuzzer target. No second binary, no harness to keep in step, and a
//!   target inside its crate reaches private parsers (the MCP endpoint's message reader and
//!   router) without widening the crate's API. A target in a `fuzz/` crate of its own would
//!   also be one more test binary linking wasmtime in every `cargo test --workspace`.
//!
//! bolero is pinned to 0.13.4, not the latest 0.13.7: bolero-generator-derive 0.13.5 pins
//! `indexmap = "=2.11.2"`, which wasmparser 0.254's `^2.14` excludes. `build-support/fuzz`
//! builds a target's library tests with cargo-bolero 0.13's flags and runs it as cargo-bolero
//! would (cargo-bolero itself also builds the package's other test targets, which cannot link
//! the instrumentation), under `nice -n 19`, until it has used the CPU time asked for; the
//! growing corpus and any crash stay under `target-fuzz/`:
//!
//! ```text
//! build-support/fuzz plugin::fuzz::manifest 3600    # one CPU-hour
//! build-support/fuzz --minimize plugin::fuzz::manifest
//! ```
//!
//! A crash found is minimized, fixed, and kept as a named regression test beside the target;
//! the corpus committed is a few minimized inputs per target, not the run's whole corpus.

use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Runs `test` on values of `strategy`: once for the default case count, or repeatedly for
/// `GATEHOUSE_FUZZ_SECS` seconds. Panics with proptest's minimal failing input on failure.
pub(crate) fn run<S: Strategy>(
    target: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let budget = std::env::var("GATEHOUSE_FUZZ_SECS")
        .ok()
        .map(|secs| match secs.parse::<u64>() {
            Ok(secs) => Duration::from_secs(secs),
            Err(_) => panic!("GATEHOUSE_FUZZ_SECS must be a number of seconds, not `{secs}`"),
        });
    let config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    let started = Instant::now();
    let mut cases = 0_u64;
    loop {
        // A new runner per batch draws a new random seed.
        let mut runner = TestRunner::new(config.clone());
        if let Err(failure) = runner.run(&strategy, &test) {
            panic!("{target}: {failure}");
        }
        cases += u64::from(config.cases);
        match budget {
            Some(budget) if started.elapsed() < budget => {}
            Some(_) => break,
            None => return,
        }
    }
    eprintln!(
        "fuzz {target}: {cases} cases in {:.1} s, no failure",
        started.elapsed().as_secs_f64()
    );
}
