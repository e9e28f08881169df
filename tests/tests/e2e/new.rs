//! `gatehouse new`: the projects it writes build to components, pack and sign with their own
//! development key, load into a host through their own `gatehouse.toml` and answer calls; and
//! their own `cargo test` passes.
//!
//! The nested cargo runs as `build-support` runs it (the same `$CARGO`, no outer
//! `RUSTFLAGS` or wrappers, a target directory of its own: `target/new-projects`, shared by
//! the generated projects so their dependencies compile once), offline, from a copy of the
//! workspace's `Cargo.lock`: the same dependency versions the workspace already fetched.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gatehouse_build_support::nested_cargo;
use gatehouse_cli::ServeConfig;
use gatehouse_host::{Host, ToolCallEnvelope};
use serde_json::json;

use gatehouse_tests::cli::{gatehouse, s};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_owned()
}

/// Runs `cargo ARGS` in the generated project `dir`, as build-support runs a nested cargo.
fn cargo(dir: &Path, args: &[&str]) {
    let root = workspace();
    let mut command = nested_cargo(&root.join("target").join("new-projects"));
    command.current_dir(dir).args(args).arg("--offline");
    let status = command.status().expect("cargo runs");
    assert!(
        status.success(),
        "cargo {args:?} in {} failed",
        dir.display()
    );
}

/// `gatehouse new KIND NAME --lang LANG` into `parent/NAME`, against this checkout's SDK
/// (`sdk`, e.g. `sdk-js`): the project's directory.
fn generate(parent: &Path, kind: &str, name: &str, lang: &str, sdk: &str) -> PathBuf {
    let dir = parent.join(name);
    let sdk = workspace().join(sdk);
    let (code, out) = gatehouse(&[
        "new",
        kind,
        name,
        "--lang",
        lang,
        "--publisher",
        "acme",
        "--dir",
        s(&dir),
        "--sdk",
        s(&sdk),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("wrote {kind} `acme.{name}`")),
        "{out}"
    );
    dir
}

/// Packs `wasm` with the manifest and development key of the project in `dir`, as its
/// build.sh does: the signed component (also written to `dir/NAME.signed.wasm`).
fn pack(dir: &Path, wasm: &Path, name: &str) -> Vec<u8> {
    let signed = dir.join(format!("{name}.signed.wasm"));
    let key = dir.join(format!("keys/acme-{name}-dev.secret.toml"));
    let (code, out) = gatehouse(&[
        "pack",
        s(wasm),
        "--manifest",
        s(&dir.join("manifest.toml")),
        "--key",
        s(&key),
        "-o",
        s(&signed),
    ]);
    assert_eq!(code, 0, "{out}");
    std::fs::read(&signed).unwrap()
}

/// A generated Rust project in `parent/NAME`, its own tests run, built for wasm32-wasip2 and
/// packed: its directory and the signed component.
fn make(parent: &Path, kind: &str, name: &str) -> (PathBuf, Vec<u8>) {
    let root = workspace();
    let dir = generate(parent, kind, name, "rust", "sdk");
    // The workspace's pinned toolchain and dependency versions (see the module docs).
    for file in ["Cargo.lock", "rust-toolchain.toml"] {
        std::fs::copy(root.join(file), dir.join(file)).unwrap();
    }
    cargo(&dir, &["test", "--quiet"]);
    cargo(&dir, &["build", "--release", "--target", "wasm32-wasip2"]);
    let wasm = root.join(format!(
        "target/new-projects/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    ));
    let signed = pack(&dir, &wasm, name);
    (dir, signed)
}

#[test]
fn new_rust_projects_build_test_pack_and_serve() {
    let parent = tempfile::tempdir().unwrap();
    let (adapter_dir, adapter) = make(parent.path(), "adapter", "greeter");
    let (policy_dir, policy) = make(parent.path(), "policy", "deny-list");
    serves(&adapter_dir, &adapter, &policy_dir, &policy);
}

/// The generated adapter answers through its own config, as its README says; the generated
/// policy, bound by its own config, allows it, then denies it once configured to.
fn serves(adapter_dir: &Path, adapter: &[u8], policy_dir: &Path, policy: &[u8]) {
    // The adapter, through its own config, as its README says.
    let config = adapter_dir.join("gatehouse.toml");
    let signed = adapter_dir.join("greeter.signed.wasm");
    let (code, out) = gatehouse(&["verify", "--config", s(&config), s(&signed)]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = gatehouse(&[
        "call",
        "--config",
        s(&config),
        s(&signed),
        "greet",
        r#"{"name":"Ada"}"#,
    ]);
    assert_eq!(code, 0, "{out}");
    let envelope: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        envelope["structured_content"],
        json!({ "greeting": "Hello, Ada!" })
    );

    // The policy, through its config, in front of the adapter (whose key it is told to trust).
    let adapter_config = ServeConfig::from_file(&config).unwrap().host;
    let mut host_config = ServeConfig::from_file(&policy_dir.join("gatehouse.toml"))
        .unwrap()
        .host;
    host_config
        .trust
        .publishers
        .extend(adapter_config.trust.publishers);
    let host = Host::new(host_config).unwrap();
    host.install_adapter(adapter).unwrap();
    host.install_policy(policy).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let greet = || {
        runtime.block_on(host.call(ToolCallEnvelope::new(
            "default",
            "acme.greeter.greet",
            json!({ "name": "Ada" }),
        )))
    };
    let allowed = greet();
    assert_eq!(
        allowed.outcome.to_string(),
        "OK",
        "{}",
        serde_json::to_string(&allowed).unwrap()
    );
    host.set_policy_config("acme.deny-list", &json!({ "deny": ["acme.greeter.*"] }))
        .unwrap();
    let denied = greet();
    assert_eq!(
        denied.outcome.to_string(),
        "POLICY_BLOCKED",
        "{}",
        serde_json::to_string(&denied).unwrap()
    );
}

/// JavaScript and Python projects build with the repository's pinned toolchains (installed by
/// `build-support/toolchains`), as their build.sh does, and serve like the Rust ones.
#[test]
fn new_js_and_python_projects_build_pack_and_serve() {
    let root = workspace();
    let install = "run `build-support/toolchains` in the repository to install the pinned \
                   JavaScript and Python toolchains (it needs Node.js 20+ and Python 3.10+)";
    let parent = tempfile::tempdir().unwrap();
    let mut builds = Vec::new();
    let node_ready = root
        .join("sdk-js/node_modules/@bytecodealliance/componentize-js")
        .exists();
    assert!(node_ready, "the JavaScript toolchain is missing: {install}");
    let python = root.join("sdk-py/.venv/bin/python");
    assert!(
        python.exists(),
        "the Python toolchain is missing: {install}"
    );
    // The SDK's build script of `lang`, as the project's build.sh runs it.
    let sdk_build = |lang: &str| {
        if lang == "js" {
            let mut command = Command::new("node");
            command.arg(root.join("sdk-js/build.mjs"));
            command
        } else {
            let mut command = Command::new(&python);
            command
                .arg(root.join("sdk-py/build.py"))
                .env("PYTHONDONTWRITEBYTECODE", "1");
            command
        }
    };
    for (lang, sdk, source) in [
        ("js", "sdk-js", "index.js"),
        ("python", "sdk-py", "src/app.py"),
    ] {
        let parent = parent.path().join(lang);
        for (kind, name) in [("adapter", "greeter"), ("policy", "deny-list")] {
            let dir = generate(&parent, kind, name, lang, sdk);
            let wasm = dir.join(format!("{name}.wasm"));
            // All four at once: each build is one process, mostly single-threaded.
            let child = sdk_build(lang)
                .arg(dir.join(source))
                .args(["--world", kind, "--out"])
                .arg(&wasm)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            builds.push((lang, name, dir, wasm, child));
        }
    }
    let mut built = Vec::new();
    for (lang, name, dir, wasm, child) in builds {
        let done = child.wait_with_output().unwrap();
        assert!(
            done.status.success(),
            "building the {lang} `{name}` failed:\n{}{}",
            String::from_utf8_lossy(&done.stdout),
            String::from_utf8_lossy(&done.stderr)
        );
        let signed = pack(&dir, &wasm, name);
        built.push((dir, signed));
    }
    for pair in built.chunks(2) {
        let [(adapter_dir, adapter), (policy_dir, policy)] = pair else {
            unreachable!("an adapter and a policy per language")
        };
        serves(adapter_dir, adapter, policy_dir, policy);
    }
}

#[test]
fn new_refuses_a_bad_name_a_used_directory_and_an_unknown_language() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("x");
    for name in ["Orders", "9lives", "a.b", "", "under_score"] {
        let (code, out) = gatehouse(&["new", "adapter", name, "--dir", s(&dir)]);
        assert_eq!((code, out.as_str()), (2, ""), "{name}");
    }
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep.txt"), "mine").unwrap();
    let (code, _) = gatehouse(&["new", "adapter", "orders", "--dir", s(&dir)]);
    assert_eq!(code, 2);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "nothing written"
    );
    let (code, _) = gatehouse(&["new", "adapter", "orders", "--lang", "cobol"]);
    assert_eq!(code, 2);
    let elsewhere = parent.path().join("y");
    let (code, _) = gatehouse(&[
        "new",
        "adapter",
        "orders",
        "--dir",
        s(&elsewhere),
        "--sdk",
        s(parent.path()),
    ]);
    assert_eq!(code, 2, "--sdk must name the gatehouse-sdk crate");
}
