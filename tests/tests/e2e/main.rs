//! The end-to-end tests, one binary (each test binary links wasmtime: one link instead of
//! eleven). Real components built from source by `build.rs`, driven through the host, the
//! command line and the MCP server, against loopback upstreams.

mod a2a;
mod a2a_peers;
mod adapters;
mod admin;
mod agents;
mod audit;
mod cache;
mod caller;
mod capacity;
mod cedar;
mod cli;
mod conformance;
mod console;
mod content;
mod crates;
mod demo_export;
mod egress;
mod guardrails;
mod hostile;
mod import;
mod jwt;
mod languages;
mod mcp;
mod new;
mod oauth;
mod ops;
mod pipeline;
mod postgres;
mod quick_start;
mod registry;
mod sessions;
mod signing;
mod state;
mod stdio;
mod swap;
mod tls;

/// A child `gatehouse` process started by a test (`gatehouse_tests::cli::gatehouse_child`).
#[test]
#[ignore = "started as a child process by the tests that need a real gatehouse process"]
fn gatehouse_child() {
    gatehouse_tests::cli::run_gatehouse_child();
}
