//! `gatehouse import openapi` on a generated document with 2,000 operations (1,000 paths,
//! each a GET with a path and a query parameter and a POST with a JSON body whose schema is a
//! `$ref` with a nested `$ref`): parse, inline the refs, build and check the manifest, write
//! it as TOML. Issue 26's target is under 2 s; the bench prints the time of each run and the
//! median, and says whether the target holds.
//!
//! Run: `cargo bench -p gatehouse-tests --bench import` (`-- --runs N`, default 5).

use std::time::{Duration, Instant};

use gatehouse_cli::import::Options;
use gatehouse_cli::import::openapi;
use gatehouse_cli::import::output::manifest_toml;
use serde_json::{Map, Value, json};

/// Issue 26's target for 2,000 operations.
const TARGET: Duration = Duration::from_secs(2);

fn main() {
    let runs: usize = gatehouse_tests::flag("--runs").map_or(5, |n| n.parse().expect("--runs N"));
    let spec = document(1000).to_string();
    let mut times = Vec::new();
    for run in 1..=runs {
        let start = Instant::now();
        let import = openapi::import(&spec, None, &Options::new("bench.api")).expect("imports");
        let toml = manifest_toml(&import, "bench").expect("writes");
        let took = start.elapsed();
        assert_eq!(import.manifest.capabilities.len(), 2000);
        println!(
            "run {run}: {} operations, {} KiB of manifest, {:.0} ms",
            import.manifest.capabilities.len(),
            toml.len() / 1024,
            took.as_secs_f64() * 1000.0
        );
        times.push(took);
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "import openapi, 2,000 operations: median {:.0} ms (target < {} ms: {})",
        median.as_secs_f64() * 1000.0,
        TARGET.as_millis(),
        if median < TARGET { "met" } else { "MISSED" }
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
