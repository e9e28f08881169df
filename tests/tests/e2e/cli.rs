//! The `gatehouse` CLI as a publisher and an operator use it: keygen, pack, inspect, verify,
//! call and demo, with their exit codes (0 ok, 1 refused or failed, 2 bad input).

use std::path::{Path, PathBuf};

use gatehouse_host::cli;
use gatehouse_tests::artifacts::{ECHO, WRONG_WORLD};

/// Runs the CLI in-process; returns (exit code, stdout).
pub(crate) fn gatehouse(args: &[&str]) -> (u8, String) {
    let mut out = Vec::new();
    let code = cli::run(
        std::iter::once("gatehouse").chain(args.iter().copied()),
        &mut out,
    );
    (code, String::from_utf8(out).expect("utf-8 output"))
}

pub(crate) fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

struct Publisher {
    dir: tempfile::TempDir,
}

impl Publisher {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (code, out) = gatehouse(&["keygen", "--key-id", "alice", "--out-dir", s(dir.path())]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("[[trust.publisher]]"),
            "keygen tells operators how to trust the key: {out}"
        );
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An operator config trusting alice for `scope`, cache off.
    fn config(&self, scope: &str) -> PathBuf {
        let public = std::fs::read_to_string(self.path("alice.pub.toml")).unwrap();
        let key = public
            .lines()
            .find_map(|l| l.strip_prefix("public_key = "))
            .expect("the public key file names public_key");
        let path = self.path("gatehouse.toml");
        // The state store in the test's directory, never the user's default one.
        let store = self.path("state.db");
        let text = format!(
            "[cache]\nenabled = false\n\n[store]\npath = {store:?}\n\n[[trust.publisher]]\nkey_id = \"alice\"\npublic_key = {key}\nadapters = [\"{scope}\"]\n\n[pipeline]\npolicy_default = \"allow\"\n\n[[pipeline.tool]]\ntools = \"*\"\ntenants = [\"*\"]\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    fn pack(&self, wasm: &str, manifest: &str, out: &str) -> (u8, String) {
        let key = self.path("alice.secret.toml");
        let output = self.path(out);
        gatehouse(&[
            "pack",
            wasm,
            "--manifest",
            manifest,
            "--key",
            s(&key),
            "-o",
            s(&output),
        ])
    }
}

#[test]
fn keygen_writes_a_private_secret_and_refuses_to_overwrite() {
    let publisher = Publisher::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(publisher.path("alice.secret.toml"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0);
    }
    let (code, _) = gatehouse(&[
        "keygen",
        "--key-id",
        "alice",
        "--out-dir",
        s(publisher.dir.path()),
    ]);
    assert_eq!(code, 2);
}

#[test]
fn pack_inspect_verify_call_round_trip() {
    let publisher = Publisher::new();
    let (code, out) = publisher.pack(ECHO.wasm, ECHO.manifest, "echo.signed.wasm");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("packed adapter gatehouse.echo 0.1.0 signed by `alice`"),
        "{out}"
    );
    let signed = publisher.path("echo.signed.wasm");

    let (code, out) = gatehouse(&["inspect", s(&signed)]);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["manifest"]["id"], "gatehouse.echo");
    assert_eq!(report["signature"]["key_id"], "alice");

    // Nobody trusts alice yet: refused, exit 1.
    let empty = publisher.path("empty.toml");
    std::fs::write(&empty, "[cache]\nenabled = false\n").unwrap();
    let (code, _) = gatehouse(&["verify", "--config", s(&empty), s(&signed)]);
    assert_eq!(code, 1);

    let config = publisher.config("gatehouse.*");
    let (code, out) = gatehouse(&["verify", "--config", s(&config), s(&signed)]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("ok: adapter gatehouse.echo 0.1.0, signed by trusted key `alice`"),
        "{out}"
    );

    let (code, out) = gatehouse(&[
        "call",
        "--config",
        s(&config),
        s(&signed),
        "echo",
        r#"{"message":"hi"}"#,
    ]);
    assert_eq!(code, 0, "{out}");
    let envelope: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(envelope["status"], "ok");
    assert_eq!(
        envelope["structured_content"],
        serde_json::json!({ "message": "hi", "length": 2 })
    );

    let (code, out) = gatehouse(&["call", "--config", s(&config), s(&signed), "nope"]);
    assert_eq!(code, 1);
    let envelope: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(envelope["outcome"], "UNKNOWN_CAPABILITY");

    let (code, out) = gatehouse(&[
        "call",
        "--config",
        s(&config),
        s(&signed),
        "echo",
        "{not json",
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
}

#[test]
fn verify_refuses_a_key_out_of_scope() {
    let publisher = Publisher::new();
    publisher.pack(ECHO.wasm, ECHO.manifest, "echo.signed.wasm");
    let config = publisher.config("alice.*");
    let (code, _) = gatehouse(&[
        "verify",
        "--config",
        s(&config),
        s(&publisher.path("echo.signed.wasm")),
    ]);
    assert_eq!(code, 1);
}

#[test]
fn pack_refuses_a_component_that_does_not_implement_the_declared_world() {
    let publisher = Publisher::new();
    let (code, out) = publisher.pack(WRONG_WORLD.wasm, WRONG_WORLD.manifest, "wrong.signed.wasm");
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        !publisher.path("wrong.signed.wasm").exists(),
        "nothing is written on refusal"
    );
}

#[test]
fn bad_inputs_exit_2() {
    let publisher = Publisher::new();
    let bad = publisher.path("bad.toml");
    std::fs::write(&bad, "[sandbox]\nfule = 1\n").unwrap();
    let (code, _) = gatehouse(&["verify", "--config", s(&bad), ECHO.wasm]);
    assert_eq!(code, 2, "a config typo is a usage error");
    let (code, _) = gatehouse(&["inspect", s(&publisher.path("missing.wasm"))]);
    assert_eq!(code, 2);
    let manifest = publisher.path("manifest.toml");
    std::fs::write(&manifest, "kind = \"adapter\"\nid = \"x\"\n").unwrap();
    let (code, _) = publisher.pack(ECHO.wasm, s(&manifest), "x.wasm");
    assert_eq!(code, 2, "an invalid manifest is bad input");
    let (code, _) = gatehouse(&["frobnicate"]);
    assert_eq!(code, 2);
}

#[test]
fn the_demo_runs_and_exports_files_the_cli_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = gatehouse(&["demo", "--export", s(dir.path())]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("gatehouse.echo.echo"), "{out}");
    assert!(out.contains("-> failed TOOL_ERROR"), "{out}");
    assert!(out.contains("-> rejected UNKNOWN_CAPABILITY"), "{out}");
    assert!(out.contains("-> rejected INVALID_ARGUMENTS"), "{out}");
    assert!(
        out.contains("refused: the component was modified after signing"),
        "{out}"
    );
    let config = dir.path().join("gatehouse.toml");
    let textkit = dir.path().join("textkit.signed.wasm");
    let (code, out) = gatehouse(&[
        "call",
        "--config",
        s(&config),
        s(&textkit),
        "word_stats",
        r#"{"text":"one two"}"#,
    ]);
    assert_eq!(code, 0, "{out}");
}

/// `gatehouse serve` with a config of `toml` (listening on any free port).
fn serve_with(toml: &str) -> (u8, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    std::fs::write(&config, format!("[mcp]\nlisten = \"127.0.0.1:0\"\n{toml}")).unwrap();
    gatehouse(&["serve", "--config", s(&config)])
}

#[test]
fn serve_refuses_to_start_when_no_caller_could_be_admitted() {
    let (code, out) = serve_with("");
    assert_eq!(code, 2, "{out}");
    assert!(out.is_empty(), "nothing is served: {out}");
}

#[test]
fn serve_names_a_missing_api_key_file() {
    let (code, out) =
        serve_with("[[mcp.api_key]]\ntenant = \"acme\"\nfile = \"/nonexistent/gatehouse.key\"\n");
    assert_eq!(code, 2, "{out}");
}

/// JavaScript and Python components pack, verify and inspect like Rust ones: the CLI does not
/// care which language built them.
#[test]
fn js_and_python_components_pack_verify_and_inspect_unchanged() {
    use gatehouse_tests::artifacts::{JS_GUARD, JS_ORDERS, PY_GUARD, PY_ORDERS};
    let publisher = Publisher::new();
    let config = publisher.config("example.*");
    for artifact in [JS_ORDERS, PY_ORDERS] {
        let out = format!("{}.signed.wasm", artifact.name);
        // `bytes()` says how to install the toolchain if the component was not built.
        assert!(!artifact.bytes().is_empty());
        let (code, said) = publisher.pack(artifact.wasm, artifact.manifest, &out);
        assert_eq!(code, 0, "{said}");
        let signed = publisher.path(&out);
        let (code, said) = gatehouse(&["verify", s(&signed), "--config", s(&config)]);
        assert_eq!(code, 0, "{said}");
        let id = artifact.manifest().id().to_owned();
        assert!(said.contains(&format!("ok: adapter {id} 0.1.0")), "{said}");
        let (code, said) = gatehouse(&["inspect", s(&signed)]);
        assert_eq!(code, 0, "{said}");
        assert!(said.contains(&id) && said.contains("get_order"), "{said}");
    }
    for artifact in [JS_GUARD, PY_GUARD] {
        let out = format!("{}.signed.wasm", artifact.name);
        assert!(!artifact.bytes().is_empty());
        let (code, said) = publisher.pack(artifact.wasm, artifact.manifest, &out);
        assert_eq!(code, 0, "{said}");
        let (code, said) = gatehouse(&["inspect", s(&publisher.path(&out))]);
        assert_eq!(code, 0, "{said}");
        assert!(said.contains(artifact.manifest().id()), "{said}");
        assert!(said.contains("config_schema"), "{said}");
    }
}
