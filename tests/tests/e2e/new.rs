//! An author with only the `gatehouse` binary: `gatehouse new`, then the project's own test,
//! then `gatehouse build`, then `gatehouse serve` and an MCP call, in Rust, JavaScript and
//! Python. Each runs in a temporary directory with `HOME` (and the cache) there, and no path
//! into this repository: the SDK comes from the binary (vendored for Rust; installed with its
//! pinned toolchain into the temporary cache, from the registries, for JavaScript and Python).
//!
//! Two things are shared with the workspace, for time only, neither a source of the SDK: the
//! Rust projects compile into `target/new-projects` (so their dependencies compile once),
//! offline, from a copy of the workspace's `Cargo.lock` (the versions it already fetched).
//! `gatehouse` itself, for the projects' `test.sh`, is this test binary behind a shim
//! (`gatehouse_tests::cli::gatehouse_child`).

use std::path::{Path, PathBuf};
use std::process::Command;

use gatehouse_build_support::nested_cargo;
use serde_json::json;

use gatehouse_tests::cli::{gatehouse, gatehouse_output, s, serve_in_process};
use gatehouse_tests::mcp::{client, rmcp_call, texts};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_owned()
}

/// A new author's machine: a home of its own, and `gatehouse` on `PATH`.
struct Author {
    home: tempfile::TempDir,
}

impl Author {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        // `gatehouse ARGS...`: this test binary, running the command line (see the module docs).
        let shim = format!(
            "#!/bin/sh\nGATEHOUSE_E2E_CHILD=\"$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\")\" \\\n  exec {} gatehouse_child --exact --include-ignored --test-threads 1 --nocapture --quiet\n",
            std::env::current_exe().unwrap().display()
        );
        let path = bin.join("gatehouse");
        std::fs::write(&path, shim).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { home }
    }

    fn dir(&self) -> &Path {
        self.home.path()
    }

    /// The environment: `HOME` and the cache here, the shim first on `PATH`, the Rust
    /// toolchain where rustup put it (not under this `HOME`), and the shared target directory.
    fn env(&self) -> Vec<(String, String)> {
        let real_home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
        let cargo_home =
            std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{real_home}/.cargo"));
        let rustup_home =
            std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{real_home}/.rustup"));
        let path = format!(
            "{}:{cargo_home}/bin:{}",
            self.dir().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        vec![
            ("HOME".to_owned(), s(self.dir()).to_owned()),
            (
                "XDG_CACHE_HOME".to_owned(),
                s(&self.dir().join(".cache")).to_owned(),
            ),
            ("PATH".to_owned(), path),
            ("CARGO_HOME".to_owned(), cargo_home),
            ("RUSTUP_HOME".to_owned(), rustup_home),
            (
                "CARGO_TARGET_DIR".to_owned(),
                s(&workspace().join("target/new-projects")).to_owned(),
            ),
            ("CARGO_NET_OFFLINE".to_owned(), "true".to_owned()),
        ]
    }

    /// `gatehouse ARGS` in this environment: the exit code and output.
    fn gatehouse(&self, args: &[&str]) -> (i32, String) {
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        gatehouse_output(args, &env)
    }

    /// Runs `program ARGS` in `dir` in this environment; panics with its output on failure.
    fn run(&self, dir: &Path, program: &str, args: &[&str]) -> String {
        let output = Command::new(program)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.env())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.status.success(),
            "{program} {args:?} in {}:\n{text}",
            dir.display()
        );
        text
    }

    /// `gatehouse new KIND NAME --lang LANG` here: the project's directory.
    fn new_project(&self, kind: &str, name: &str, lang: &str) -> PathBuf {
        let dir = self.dir().join(lang).join(name);
        let (code, out) = self.gatehouse(&[
            "new",
            kind,
            name,
            "--lang",
            lang,
            "--publisher",
            "acme",
            "--dir",
            s(&dir),
        ]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains(&format!("wrote {kind} `acme.{name}`")),
            "{out}"
        );
        assert!(
            !std::fs::read_to_string(dir.join("README.md"))
                .unwrap()
                .contains(s(&workspace()))
        );
        dir
    }

    /// The project's own test: `cargo test` (Rust, offline from the workspace's lock, see the
    /// module docs), or `sh test.sh` (which builds it with `gatehouse build`); then
    /// `gatehouse build` for a Rust project. The signed component.
    fn test_and_build(&self, dir: &Path, lang: &str, name: &str) -> PathBuf {
        if lang == "rust" {
            for file in ["Cargo.lock", "rust-toolchain.toml"] {
                std::fs::copy(workspace().join(file), dir.join(file)).unwrap();
            }
            // As build-support runs a nested cargo: none of the outer build's flags.
            let status = nested_cargo(&workspace().join("target/new-projects"))
                .args(["test", "--quiet", "--offline"])
                .current_dir(dir)
                .env("HOME", self.dir())
                .status()
                .unwrap();
            assert!(status.success(), "cargo test in {}", dir.display());
            let (code, out) = self.gatehouse(&["build", "--dir", s(dir)]);
            assert_eq!(code, 0, "{out}");
            assert!(out.contains("next:"), "{out}");
        } else {
            let out = self.run(dir, "sh", &["test.sh"]);
            assert!(out.contains("ok: acme."), "{out}");
        }
        let signed = dir.join(format!("{name}.signed.wasm"));
        assert!(signed.is_file(), "{}", signed.display());
        signed
    }
}

/// One language, as its author meets it: an adapter and a policy module, each made, tested
/// and built; the adapter served and called over MCP; the policy deciding through
/// `gatehouse call`, alone and in front of the adapter.
fn author_in(lang: &str) {
    let author = Author::new();
    let adapter_dir = author.new_project("adapter", "greeter", lang);
    let adapter = author.test_and_build(&adapter_dir, lang, "greeter");
    drift(&author, &adapter_dir, &adapter, lang);
    if lang != "rust" {
        a_handler_that_throws_fails_test_sh_saying_why(&author, lang);
    }
    let policy_dir = author.new_project("policy", "deny-list", lang);
    let policy = author.test_and_build(&policy_dir, lang, "deny-list");
    if lang != "rust" {
        let cache = author.dir().join(".cache/gatehouse/sdk");
        assert!(cache.is_dir(), "the toolchain went to the author's cache");
    }

    // Served through its own config, called over MCP as an agent would.
    let config = adapter_dir.join("gatehouse.toml");
    let (url, _) = serve_in_process(&[
        "--config",
        s(&config),
        "--adapter",
        s(&adapter),
        "--listen",
        "127.0.0.1:0",
    ]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = client(&url, None).await;
        let (result, record) = rmcp_call(
            &client,
            "acme.greeter.greet",
            json!({ "name": "Ada" }),
            json!({}),
        )
        .await;
        assert_eq!(record["outcome"], "OK", "{record}");
        assert!(texts(&result).join("").contains("Hello, Ada!"));
    });

    // The policy in front of the adapter: its config trusts the adapter's key too.
    let policy_config = policy_dir.join("gatehouse.toml");
    let adapter_key = std::fs::read_to_string(&config).unwrap();
    let trust = adapter_key
        .split("[[trust.publisher]]")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap();
    let mut text = std::fs::read_to_string(&policy_config).unwrap();
    text.push_str(&format!("\n[[trust.publisher]]{trust}\n"));
    std::fs::write(&policy_config, text).unwrap();
    let call = |capability: &str| {
        author.gatehouse(&[
            "call",
            "--config",
            s(&policy_config),
            "--policy",
            s(&policy),
            s(&adapter),
            capability,
            r#"{"name":"Ada"}"#,
        ])
    };
    let (code, out) = call("greet");
    assert_eq!(code, 0, "allowed: {out}");
    assert!(out.contains("Hello, Ada!"), "{out}");
}

/// A handler that throws at call time (a misspelt name) still builds; `sh test.sh` fails
/// naming the check, and prints what the call answered: the handler's error.
fn a_handler_that_throws_fails_test_sh_saying_why(author: &Author, lang: &str) {
    let dir = author.new_project("adapter", "thrower", lang);
    let (file, right, wrong, error) = match lang {
        "js" => (
            "index.js",
            "`Hello, ${name}!`",
            "`Hello, ${nme}!`",
            "nme is not defined",
        ),
        _ => ("src/app.py", "args['name']", "args['nme']", "nme"),
    };
    let source = dir.join(file);
    let code = std::fs::read_to_string(&source).unwrap();
    assert!(code.contains(right), "{code}");
    std::fs::write(&source, code.replace(right, wrong)).unwrap();
    let output = Command::new("sh")
        .arg("test.sh")
        .current_dir(&dir)
        .env_clear()
        .envs(author.env())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{said}");
    assert!(
        said.contains("FAILED: gatehouse call --config gatehouse.toml thrower.signed.wasm greet")
            && said.contains("expected Hello, Ada! in its output, which was:")
            && said.contains(error),
        "{said}"
    );
}

/// Manifest/code drift, caught before serving: a manifest capability the code does not
/// handle is refused at pack (a typo names the nearest id, both ways to fix it) and, in a component signed anyway,
/// at verify; code that handles an id the manifest lacks is a warning.
fn drift(author: &Author, dir: &Path, signed: &Path, lang: &str) {
    let manifest = dir.join("manifest.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        original.replace("id = \"greet\"", "id = \"greeet\""),
    )
    .unwrap();
    let key = dir.join("keys/acme-greeter-dev.secret.toml");
    let (code, out) = if lang == "rust" {
        author.gatehouse(&["build", "--dir", s(dir)])
    } else {
        let wasm = dir.join("greeter.wasm");
        let args = [
            "pack",
            s(&wasm),
            "--manifest",
            s(&manifest),
            "--key",
            s(&key),
            "-o",
            "/dev/null",
        ];
        author.gatehouse(&args)
    };
    assert_eq!(code, 1, "{out}");
    let expected = format!(
        "capability `greeet` in {0} is not handled by the code, which handles greet: the code's \
         `greet` is not declared. Rename it to `greeet` in the code, or, if the manifest is \
         misspelled, rename the capability to `greet` in {0}",
        manifest.display()
    );
    assert!(out.contains(&expected), "{out}\nexpected: {expected}");
    std::fs::write(&manifest, &original).unwrap();

    // A component signed with such a manifest anyway (not by `gatehouse pack`): refused by
    // `verify`, as by load, from the ids the build recorded.
    use gatehouse_host::plugin::{sections, signature};
    let bytes = std::fs::read(signed).unwrap();
    let list = sections::sections(&bytes).unwrap();
    let mut unsigned = sections::without(
        &bytes,
        &list,
        &[sections::MANIFEST_SECTION, sections::SIGNATURE_SECTION],
    );
    let manifest_json = gatehouse_host::plugin::manifest::Manifest::from_toml(&original)
        .unwrap()
        .to_json();
    let mut drifted: serde_json::Value = serde_json::from_slice(&manifest_json).unwrap();
    drifted["capability"][0]["id"] = "greeet".into();
    let drifted = drifted.to_string();
    sections::append_custom(
        &mut unsigned,
        sections::MANIFEST_SECTION,
        drifted.as_bytes(),
    );
    let dev_key = signature::SigningKey::from_file(&key).unwrap();
    let forged = dir.join("drifted.signed.wasm");
    std::fs::write(&forged, signature::sign(&dev_key, &unsigned).unwrap()).unwrap();
    let config = dir.join("gatehouse.toml");
    let (code, out) = author.gatehouse(&["verify", "--config", s(&config), s(&forged)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "capability `greeet` in the manifest of `acme.greeter` is not handled by the code, \
             which handles greet: the code's `greet` is not declared. Rename it to `greeet` in \
             the code, or, if the manifest is misspelled, rename the capability to `greet` in \
             the manifest of `acme.greeter`"
        ),
        "{out}"
    );

    // The other way (Rust, where the list is one line): a warning, and the build goes on.
    if lang == "rust" {
        let source = dir.join("src/lib.rs");
        let code_text = std::fs::read_to_string(&source).unwrap();
        let two = code_text.replace("&[\"greet\"]", "&[\"greet\", \"wave\"]");
        assert_ne!(two, code_text);
        std::fs::write(&source, two).unwrap();
        let (code, out) = author.gatehouse(&["build", "--dir", s(dir)]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains(&format!(
                "warning: the code handles `wave`, which {} does not declare",
                manifest.display()
            )),
            "{out}"
        );
        std::fs::write(&source, code_text).unwrap();
        let (code, out) = author.gatehouse(&["build", "--dir", s(dir)]);
        assert_eq!(code, 0, "{out}");
    }
}

#[test]
fn a_rust_author_needs_only_the_binary() {
    author_in("rust");
}

#[test]
fn a_javascript_author_needs_only_the_binary() {
    author_in("js");
}

#[test]
fn a_python_author_needs_only_the_binary() {
    author_in("python");
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
