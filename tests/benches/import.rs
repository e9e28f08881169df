//! `gatehouse import openapi`, parse to TOML manifest (inline the refs, build and check the
//! manifest, write it as TOML), on two documents:
//! 1. a generated one with 2,000 operations (1,000 paths, each a GET with a path and a query
//!    parameter and a POST with a JSON body whose schema is a `$ref` with a nested `$ref`);
//!    issue 26's target is under 2 s;
//! 2. GitHub's published description of api.github.com (`@octokit/openapi`, pinned in
//!    `tests/openapi/package.json`, installed by `build-support/toolchains`; 13 MB, 1,223
//!    operations); issue 43's target is under 10 s, with at least 800 capabilities (the test
//!    `import::githubs_published_description_imports` checks the count).
//!
//! The bench prints the time of each run and the median, and says whether each target holds.
//!
//! Run: `cargo bench -p gatehouse-tests --bench import` (`-- --runs N`, default 5).

use std::time::{Duration, Instant};

use gatehouse_cli::import::Options;
use gatehouse_cli::import::openapi;
use gatehouse_cli::import::output::manifest_toml;
use serde_json::{Map, Value, json};

/// Issue 26's target for 2,000 generated operations.
const TARGET: Duration = Duration::from_secs(2);
/// Issue 43's target for GitHub's description.
const GITHUB_TARGET: Duration = Duration::from_secs(10);

fn main() {
    let runs: usize = gatehouse_tests::flag("--runs").map_or(5, |n| n.parse().expect("--runs N"));
    let generated = document(1000).to_string();
    bench("2,000 generated operations", &generated, runs, TARGET, 2000);
    let github = std::fs::read_to_string(gatehouse_tests::github_openapi())
        .expect("GitHub's description reads");
    bench("GitHub's description", &github, runs, GITHUB_TARGET, 800);
}

/// Imports `spec` `runs` times, printing each run and the median against `target`; every
/// run must yield at least `capabilities`.
fn bench(what: &str, spec: &str, runs: usize, target: Duration, capabilities: usize) {
    let mut times = Vec::new();
    for run in 1..=runs {
        let start = Instant::now();
        let import = openapi::import(spec, None, &Options::new("bench.api")).expect("imports");
        let toml = manifest_toml(&import, "bench").expect("writes");
        let took = start.elapsed();
        assert!(import.manifest.capabilities.len() >= capabilities);
        println!(
            "{what}, run {run}: {} capabilities ({} skipped), {} KiB of manifest, {:.0} ms",
            import.manifest.capabilities.len(),
            import.skipped.len(),
            toml.len() / 1024,
            took.as_secs_f64() * 1000.0
        );
        times.push(took);
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "import openapi, {what}: median {:.0} ms (target < {} ms: {})",
        median.as_secs_f64() * 1000.0,
        target.as_millis(),
        if median < target { "met" } else { "MISSED" }
    );
}

/// An OpenAPI 3.0 document with `paths` paths of two operations each.
fn document(paths: usize) -> Value {
    let mut items = Map::new();
    for i in 0..paths {
        items.insert(
            format!("/things{i}/{{id}}"),
            json!({
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } }],
                "get": {
                    "operationId": format!("getThing{i}"),
                    "summary": "Get a thing.",
                    "parameters": [{ "name": "fields", "in": "query", "schema": { "type": "array", "items": { "type": "string" } } }],
                },
                "post": {
                    "operationId": format!("updateThing{i}"),
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Thing" } } } },
                },
            }),
        );
    }
    json!({
        "openapi": "3.0.3",
        "info": { "title": "bench", "version": "1" },
        "servers": [{ "url": "https://api.example.com/v1" }],
        "components": { "schemas": {
            "Thing": { "type": "object", "properties": { "name": { "type": "string", "nullable": true }, "owner": { "$ref": "#/components/schemas/Owner" } } },
            "Owner": { "type": "object", "properties": { "email": { "type": "string", "format": "email" } } },
        } },
        "paths": items,
    })
}
