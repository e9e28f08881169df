//! The MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned in
//! `tests/conformance/package.json` and installed by `build-support/toolchains`) against a real
//! `gatehouse serve` on loopback, serving the first-party `conformance` adapter with the
//! `conformance.toml` that `gatehouse demo --export` writes. Every scenario below must pass; a
//! failing one is reported with the suite's own output and the gateway's log.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gatehouse_tests::cli::{gatehouse_async, s};
use gatehouse_tests::free_port;
use gatehouse_tests::gateway::Serve;

/// The suite's scenarios for an MCP server that serves tools; the ones about prompts,
/// resources, sampling and elicitation test what gatehouse does not offer.
const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "json-schema-2020-12",
    "dns-rebinding-protection",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_conformance_suite_passes_against_gatehouse_serve() {
    let suite =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/node_modules/.bin/conformance");
    assert!(
        suite.exists(),
        "the MCP conformance suite is not installed ({}): run build-support/toolchains in the repository (it needs Node.js 20+ and npm)",
        suite.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = gatehouse_async(&["demo", "--export", s(dir.path())]).await;
    assert_eq!(code, 0, "{out}");
    let port = free_port();
    let gateway = Serve::config(dir.path().join("conformance.toml"))
        .adapter(dir.path().join("conformance.signed.wasm"))
        .listen(port)
        .start()
        .await;
    let url = format!("{}/mcp", gateway.url());

    let mut failed = Vec::new();
    for scenario in SCENARIOS {
        let (suite, url) = (suite.clone(), url.clone());
        let output = tokio::task::spawn_blocking(move || run(&suite, &url, scenario))
            .await
            .unwrap();
        if !output.status.success() {
            failed.push(format!(
                "{scenario} ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} conformance scenarios failed against {url}:\n{}\ngatehouse serve's log:\n{}",
        failed.len(),
        SCENARIOS.len(),
        failed.join("\n"),
        gateway.log()
    );
}

/// Runs one scenario of the suite against `url`, killing it after 120 s.
fn run(suite: &Path, url: &str, scenario: &str) -> Output {
    let mut child = Command::new(suite)
        .args(["server", "--url", url, "--scenario", scenario])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", suite.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("scenario {scenario} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}
