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
