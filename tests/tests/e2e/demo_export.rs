//! `gatehouse demo --export DIR`, as its README has a newcomer use it: `governed.toml` serves
//! the exported plugins; a write call over MCP, its key an argument, pauses for approval, is approved with
//! `gatehouse admin approvals approve` and the exported token, and its retry runs once; the
//! policies deny and mask; `gatehouse admin policy push` swaps baseline for its 0.2.0.

use gatehouse_tests::cli::{gatehouse_async, s};
use gatehouse_tests::free_port;
use gatehouse_tests::gateway::Serve;
use gatehouse_tests::mcp::{call, record};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exported_governed_config_pauses_a_write_that_runs_once_after_approval() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| s(&dir.path().join(name)).to_owned();
    let (code, out) = gatehouse_async(&["demo", "--export", s(dir.path())]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("governed.toml"), "{out}");
    let readme = std::fs::read_to_string(dir.path().join("README.md")).unwrap();
    assert!(readme.contains("gatehouse admin policy push baseline-0.2.0.signed.wasm"));
    assert!(
        readme.contains(r#""idempotency_key":"note-1""#) && !readme.contains("_meta"),
        "the README's walk needs no `_meta`"
    );

    // The exported config as is, but on free ports: the tests run side by side.
    let (mcp, admin) = (free_port(), free_port());
    let config = std::fs::read_to_string(dir.path().join("governed.toml"))
        .unwrap()
        .replace("127.0.0.1:8787", &format!("127.0.0.1:{mcp}"))
        .replace("127.0.0.1:8788", &format!("127.0.0.1:{admin}"));
    std::fs::write(dir.path().join("governed.toml"), config).unwrap();
    // Killed when the test ends, passed or not.
    let _gateway = Serve::config(d("governed.toml"))
        .adapter(d("echo.signed.wasm"))
        .adapter(d("textkit.signed.wasm"))
        .adapter(d("notes.signed.wasm"))
        .policy(d("baseline.signed.wasm"))
        .policy(d("redact.signed.wasm"))
        .wait_for(admin)
        .wait_for(mcp)
        .start()
        .await;

    let send = || {
        call(
            mcp,
            &[],
            "gatehouse.notes.send",
            // As the README has it: the key is an argument, no `_meta` needed.
            json!({ "to": "ops", "text": "deploy at 5", "idempotency_key": "note-1" }),
            json!({}),
        )
    };
    let paused = send().await;
    assert_eq!(record(&paused)["outcome"], "APPROVAL_REQUIRED", "{paused}");
    let id = record(&paused)["approval_id"].as_str().unwrap().to_owned();

    let admin_cli = |command: &[&str]| {
        let mut args: Vec<String> = ["admin"]
            .iter()
            .chain(command)
            .map(|a| (*a).to_owned())
            .collect();
        args.extend([
            "--server".to_owned(),
            format!("http://127.0.0.1:{admin}"),
            "--token-file".to_owned(),
            d("admin.token"),
        ]);
        async move { gatehouse_async(&args).await }
    };
    let (code, out) = admin_cli(&[
        "approvals",
        "approve",
        id.as_str(),
        "--reason",
        "looks right",
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("approved by demo-operator"), "{out}");

    let done = send().await;
    assert_eq!(record(&done)["outcome"], "OK", "{done}");
    assert_eq!(
        done["structuredContent"],
        json!({ "sent": true, "to": "ops", "idempotency_key": "note-1" })
    );
    let ran = record(&done)["tool_call_id"].clone();
    let again = send().await;
    assert_eq!(
        record(&again)["replay_of"],
        ran,
        "the second retry replays the first run: {again}"
    );

    let denied = call(
        mcp,
        &[],
        "gatehouse.textkit.render_badge",
        json!({ "label": "a", "value": "b" }),
        json!({}),
    )
    .await;
    assert_eq!(record(&denied)["outcome"], "POLICY_BLOCKED", "{denied}");
    let masked = call(
        mcp,
        &[],
        "gatehouse.echo.echo",
        json!({ "message": "mail ada@example.com" }),
        json!({}),
    )
    .await;
    assert!(
        !masked.to_string().contains("ada@example.com"),
        "redact masks the email: {masked}"
    );

    let (code, out) = admin_cli(&["policy", "push", &d("baseline-0.2.0.signed.wasm")]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("gatehouse.baseline") && out.contains("0.2.0"),
        "{out}"
    );
}
