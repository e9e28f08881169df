//! The MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned with the Node.js 22
//! it needs in `tests/conformance/package.json` and installed by `build-support/toolchains`)
//! against a real `gatehouse serve` on loopback, serving the first-party `conformance` adapter
//! with the `conformance.toml` that `gatehouse demo --export` writes. Each scenario below runs on
//! the wire of its protocol version (2025-11-25: `initialize` and a session; 2026-07-28:
//! stateless) and must pass: none of its checks failed, and at least one of its own passed (the
//! suite passes a scenario whose fixture is missing with warnings only; that is not a pass
//! here). A failing one is reported with the suite's own output and the gateway's log.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gatehouse_tests::cli::{gatehouse_async, s};
use gatehouse_tests::free_port;
use gatehouse_tests::gateway::Serve;
use serde_json::Value;

/// The protocol versions whose wires the scenarios run on.
const VERSIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// The scenarios run on both wires.
const ON_BOTH: &[&str] = &[
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    "dns-rebinding-protection",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "completion-complete",
];

/// The scenarios run on one wire, by its version, and the tasks extension's (`extension`: the
/// suite runs them without a version). Not here, by what they need:
/// - the tasks extension's status notifications (`tasks-status-notifications`, optional: the
///   gateway's `subscriptions/listen` streams carry list changes and resource updates, not
///   task statuses, so the suite skips its checks);
/// - SSE polling (`server-sse-polling`): the gateway's event streams are not resumable, so the
///   suite passes it with notes only, and the judge below counts that as no pass.
///
/// `server-session-lifecycle` runs on the session `initialize` names (`Mcp-Session-Id`); the
/// gateway keeps no session state, so it answers `DELETE` 405, which the suite accepts.
const ON_ONE: &[(&str, &[&str])] = &[
    (
        "2025-11-25",
        &[
            "server-initialize",
            "server-session-lifecycle",
            "server-sse-multiple-streams",
            "ping",
            "logging-set-level",
            "tools-call-with-logging",
            "tools-call-sampling",
            "tools-call-elicitation",
            "elicitation-sep1034-defaults",
            "elicitation-sep1330-enums",
            "resources-subscribe",
            "resources-unsubscribe",
        ],
    ),
    (
        "2026-07-28",
        &[
            "server-sse-multiple-streams",
            "http-header-validation",
            "http-custom-header-server-validation",
            "input-required-result-unsupported-methods",
            "input-required-result-validate-input",
            "input-required-result-basic-elicitation",
            "input-required-result-basic-sampling",
            "input-required-result-basic-list-roots",
            "input-required-result-request-state",
            "input-required-result-multiple-input-requests",
            "input-required-result-multi-round",
            "input-required-result-missing-input-response",
            "input-required-result-result-type",
            "input-required-result-tampered-state",
            "input-required-result-capability-check",
            "input-required-result-ignore-extra-params",
            "input-required-result-non-tool-request",
            "server-stateless",
            "sep-2164-resource-not-found",
            "caching",
        ],
    ),
    (
        "extension",
        &[
            "tasks-lifecycle",
            "tasks-capability-negotiation",
            "tasks-wire-fields",
            "tasks-request-state-removal",
            "tasks-mrtr-input",
            "tasks-request-headers",
            "tasks-dispatch-and-envelope",
            "tasks-required-task-error",
            "tasks-mrtr-composition",
        ],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_conformance_suite_passes_against_gatehouse_serve() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/node_modules/.bin");
    assert!(
        bin.join("conformance").exists() && bin.join("node").exists(),
        "the MCP conformance suite or its Node.js is not installed ({}): run build-support/toolchains in the repository (it needs npm)",
        bin.display()
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
    let runs: Vec<(&str, &str)> = VERSIONS
        .iter()
        .flat_map(|version| ON_BOTH.iter().map(move |scenario| (*version, *scenario)))
        .chain(ON_ONE.iter().flat_map(|(version, scenarios)| {
            scenarios.iter().map(move |scenario| (*version, *scenario))
        }))
        .collect();
    for (n, (version, scenario)) in runs.iter().copied().enumerate() {
        let results = dir.path().join(format!("results-{n}"));
        let (bin, url, out) = (bin.clone(), url.clone(), results.clone());
        let output = tokio::task::spawn_blocking(move || run(&bin, &url, version, scenario, &out))
            .await
            .unwrap();
        if let Err(why) = judge(&output, &results) {
            failed.push(format!(
                "{scenario} on {version}: {why}\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} conformance scenarios failed against {url}:\n{}\ngatehouse serve's log:\n{}",
        failed.len(),
        runs.len(),
        failed.join("\n"),
        gateway.log()
    );
}

/// Runs one scenario of the suite on `version`'s wire against `url`, its checks written under
/// `out`, killing it after 120 s. The suite's Node.js (22) comes first on `PATH`.
fn run(bin: &Path, url: &str, version: &str, scenario: &str, out: &Path) -> Output {
    let path = std::env::join_paths(std::iter::once(bin.to_owned()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut command = Command::new(bin.join("conformance"));
    command.args(["server", "--url", url, "--scenario", scenario]);
    if version != "extension" {
        command.args(["--spec-version", version]);
    }
    let mut child = command
        .args(["-o", s(out)])
        .env("PATH", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run the conformance suite in {}: {e}", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("scenario {scenario} on {version} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A scenario passed: the suite exited 0, and of the checks it wrote (`out/*/checks.json`) none
/// failed and one of the scenario's own (not the `wire-schema-valid` every scenario gets)
/// succeeded.
fn judge(output: &Output, out: &Path) -> Result<(), String> {
    if !output.status.success() {
        return Err(format!("the suite exited {}", output.status));
    }
    let files: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(|e| format!("no results in {}: {e}", out.display()))?
        .map(|entry| entry.unwrap().path().join("checks.json"))
        .collect();
    let [file] = files.as_slice() else {
        return Err(format!("expected one result, found {files:?}"));
    };
    let checks: Vec<Value> = serde_json::from_slice(&std::fs::read(file).unwrap())
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let status = |check: &Value| check["status"].as_str().unwrap_or_default().to_owned();
    if let Some(bad) = checks.iter().find(|c| status(c) == "FAILURE") {
        return Err(format!(
            "check {} failed: {}",
            bad["id"], bad["errorMessage"]
        ));
    }
    if !checks
        .iter()
        .any(|c| c["id"] != "wire-schema-valid" && status(c) == "SUCCESS")
    {
        return Err(format!(
            "none of its own checks succeeded (a missing fixture?): {checks:#?}"
        ));
    }
    Ok(())
}
