//! The `gatehouse` CLI as a publisher and an operator use it: keygen, pack, inspect, verify,
//! call and demo, with their exit codes (0 ok, 1 refused or failed, 2 bad input).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gatehouse_tests::artifacts::{ECHO, POLICY_PROBE, WRONG_WORLD};
use gatehouse_tests::cli::{gatehouse, gatehouse_output, s};
use gatehouse_tests::gateway::Serve;

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

/// `gatehouse call --policy`: one call of an adapter through a policy module, as the config
/// binds it (here scripted to allow, deny or require approval), with the exact outcome and
/// exit code; and the policy module called alone, deciding for a tool without running one.
#[test]
fn call_through_a_policy_allows_denies_and_asks_for_approval() {
    let publisher = Publisher::new();
    let (code, out) = publisher.pack(ECHO.wasm, ECHO.manifest, "echo.signed.wasm");
    assert_eq!(code, 0, "{out}");
    let (code, out) = publisher.pack(
        POLICY_PROBE.wasm,
        POLICY_PROBE.manifest,
        "probe.signed.wasm",
    );
    assert_eq!(code, 0, "{out}");
    let (echo, probe) = (
        publisher.path("echo.signed.wasm"),
        publisher.path("probe.signed.wasm"),
    );
    let base = std::fs::read_to_string(publisher.config("gatehouse.*"))
        .unwrap()
        .replace(
            "adapters = [\"gatehouse.*\"]",
            "adapters = [\"gatehouse.*\"]\npolicies = [\"test.*\"]",
        )
        .replace("policy_default = \"allow\"", "policy_default = \"deny\"");
    let config = publisher.path("governed.toml");
    let call_as = |verdict: &str| {
        let binding = format!(
            "\n[[pipeline.policy]]\nmodule = \"test.policy-probe\"\nconfig = {{ verdict = \"{verdict}\" }}\n"
        );
        std::fs::write(&config, format!("{base}{binding}")).unwrap();
        let (code, out) = gatehouse(&[
            "call",
            "--config",
            s(&config),
            "--policy",
            s(&probe),
            s(&echo),
            "echo",
            r#"{"message":"hi"}"#,
        ]);
        let envelope: serde_json::Value = serde_json::from_str(&out).unwrap();
        (
            code,
            envelope["outcome"].as_str().unwrap_or_default().to_owned(),
            envelope,
        )
    };
    let (code, outcome, envelope) = call_as("allow");
    assert_eq!((code, outcome.as_str()), (0, "OK"), "{envelope}");
    assert_eq!(envelope["structured_content"]["message"], "hi");
    let (code, outcome, envelope) = call_as("deny");
    assert_eq!(
        (code, outcome.as_str()),
        (1, "POLICY_BLOCKED"),
        "{envelope}"
    );
    let (code, outcome, envelope) = call_as("require_approval");
    assert_eq!(
        (code, outcome.as_str()),
        (1, "APPROVAL_REQUIRED"),
        "{envelope}"
    );

    // Without `--policy`, the binding names a module nobody installed: the default decides.
    let (code, out) = gatehouse(&["call", "--config", s(&config), s(&echo), "echo"]);
    assert_eq!(code, 1, "{out}");

    // The policy module alone: its decision for a call of a tool, nothing run.
    let (code, out) = gatehouse(&[
        "call",
        "--config",
        s(&config),
        s(&probe),
        "acme.orders.delete_order",
        "{}",
        "--class",
        "act",
    ]);
    assert_eq!(code, 1, "{out}");
    let decision: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(decision["verdict"], "require_approval", "{decision}");
    assert_eq!(decision["modules"][0]["module_id"], "test.policy-probe");
    let (code, out) = gatehouse(&["call", "--config", s(&config), s(&probe), "no-dot", "{}"]);
    assert_eq!((code, out.as_str()), (2, ""));
}

/// Each mistake an author makes in a manifest, refused by `pack` (as by `verify` and load)
/// with the exact message: where it is, what is wrong, and the nearest right name.
#[test]
fn pack_names_each_manifest_mistake_where_it_is() {
    let publisher = Publisher::new();
    let original = std::fs::read_to_string(ECHO.manifest).unwrap();
    let manifest = publisher.path("manifest.toml");
    let cases: [(&str, String, &str); 6] = [
        (
            "a type name with a typo",
            original.replace(
                "message = { type = \"string\", description",
                "message = { type = \"strng\", description",
            ),
            "line 13, column 1: manifest field `capability[0].input_schema`: is not a valid JSON \
             Schema (2020-12): at `/properties/message/type`, `strng` is not a type (one of \
             string, number, integer, boolean, object, array, null); did you mean `string`?",
        ),
        (
            "a method with a typo",
            format!(
                "{original}\n[[egress]]\nurl = \"https://api.example.com/\"\nmethods = [\"GTE\"]\n"
            ),
            "line 22, column 1: manifest field `egress[0].methods`: `GTE` is not an HTTP method \
             the egress gate sends (one of GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE, TRACE); \
             did you mean `GET`?",
        ),
        (
            "a table name with a typo",
            original.replace("[[capability]]", "[[capabilty]]"),
            "line 7, column 1: unknown field `capabilty`, expected one of `id`, `version`, \
             `publisher`, `description`, `egress`, `stdio`, `caller`, `capabilities`, \
             `capability`, `resource`, `resources`, `resource_template`, `resource_templates`, \
             `prompt`, `prompts`; did you mean `capability`?",
        ),
        (
            "a field with a typo",
            original.replace("title = \"Echo\"", "titel = \"Echo\""),
            "unknown field `titel`, expected one of `id`, `title`, `description`, \
             `capability_class`, `approval_mode`, `input_schema`, `output_schema`, \
             `evidence_keys`, `idempotency`, `approval_gate`, `rollback`, `annotations`, \
             `sensitive`, `upstream`, `client_capabilities`, `task_support`, `produces`, \
             `sends`; did you mean `title`?",
        ),
        (
            "a kind with a typo",
            original.replace("kind = \"adapter\"", "kind = \"adaptor\""),
            "unknown variant `adaptor` of `kind`, expected one of `adapter`, `policy`; did you \
             mean `adapter`?",
        ),
        (
            "a version that is not one",
            original.replace("version = \"0.1.0\"", "version = \"one\""),
            "line 3, column 1: manifest field `version`: `one` is not a semantic version like \
             `1.2.0`",
        ),
    ];
    let key = publisher.path("alice.secret.toml");
    let bad = publisher.path("bad.wasm");
    // `gatehouse pack` of the echo component with `text` as its manifest.
    let pack = |text: &str| {
        std::fs::write(&manifest, text).unwrap();
        let args = [
            "pack",
            ECHO.wasm,
            "--manifest",
            s(&manifest),
            "--key",
            s(&key),
            "-o",
            s(&bad),
        ];
        gatehouse_output(&args, &[])
    };
    for (what, text, expected) in cases {
        let (code, out) = pack(&text);
        assert_eq!(code, 2, "{what}: {out}");
        assert!(
            out.contains(&format!("error: {}: ", manifest.display())) && out.contains(expected),
            "{what}:\n{out}\nexpected:\n{expected}"
        );
        assert!(!out.contains("not valid TOML"), "{what}: {out}");
        assert!(!bad.exists(), "{what}: nothing written");
    }
    // TOML that is not TOML says so, with the place.
    let (code, out) = pack(&format!("{original}x = [1,\n"));
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("the manifest is not valid TOML: TOML parse error at line 19"),
        "{out}"
    );

    // A component packed elsewhere with such a manifest: `verify` refuses it as load does.
    let mut value: serde_json::Value = serde_json::from_slice(&ECHO.manifest().to_json()).unwrap();
    let capabilities = value
        .as_object_mut()
        .and_then(|m| m.values_mut().find(|v| v.is_array()))
        .expect("the capability list");
    capabilities[0]["input_schema"]["properties"]["message"]["type"] = "strng".into();
    let json = serde_json::to_vec(&value).unwrap();
    let mut bytes = ECHO.bytes();
    gatehouse_host::plugin::sections::append_custom(
        &mut bytes,
        gatehouse_host::plugin::sections::MANIFEST_SECTION,
        &json,
    );
    let alice = gatehouse_host::plugin::signature::SigningKey::from_file(&key).unwrap();
    let signed = gatehouse_host::plugin::signature::sign(&alice, &bytes).unwrap();
    let component = publisher.path("strng.signed.wasm");
    std::fs::write(&component, signed).unwrap();
    let config = publisher.config("gatehouse.*");
    let (code, out) = gatehouse_output(&["verify", "--config", s(&config), s(&component)], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("manifest field `capability[0].input_schema`: is not a valid JSON Schema (2020-12): at `/properties/message/type`, `strng` is not a type"),
        "{out}"
    );
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

/// `pack` compiles the code in a child process within bounds of time and memory
/// (`GATEHOUSE_COMPILE_SECONDS`, `GATEHOUSE_COMPILE_MIB`): the Python component, which takes
/// about 20 s of CPU and 475 MiB to compile and ask, is refused under bounds lowered below
/// that, naming the bound passed and the variable that raises it, and nothing is written. A
/// bound that is not a number is bad usage.
#[test]
fn pack_stops_a_compile_past_its_time_or_memory_bound() {
    use gatehouse_tests::artifacts::PY_ORDERS;
    // `bytes()` says how to install the toolchain if the component was not built.
    assert!(!PY_ORDERS.bytes().is_empty());
    let publisher = Publisher::new();
    let key = publisher.path("alice.secret.toml");
    let output = publisher.path("orders.signed.wasm");
    let pack = |env: &[(&str, &str)]| {
        gatehouse_output(
            &[
                "pack",
                PY_ORDERS.wasm,
                "--manifest",
                PY_ORDERS.manifest,
                "--key",
                s(&key),
                "-o",
                s(&output),
            ],
            env,
        )
    };
    for (var, bound, says) in [
        (
            "GATEHOUSE_COMPILE_SECONDS",
            "1",
            "took longer than 1 s, and was stopped",
        ),
        (
            "GATEHOUSE_COMPILE_MIB",
            "200",
            "took more than 200 MiB of memory",
        ),
    ] {
        let (code, out) = pack(&[(var, bound)]);
        assert_eq!(code, 1, "{var}={bound}: {out}");
        assert!(out.contains(says), "{var}={bound}: {out}");
        assert!(
            out.contains(&format!("raise the bound: {var}=<")),
            "{var}={bound}: {out}"
        );
        assert!(
            !output.exists(),
            "{var}={bound}: a signed component was written"
        );
    }
    let (code, out) = pack(&[("GATEHOUSE_COMPILE_MIB", "lots")]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("GATEHOUSE_COMPILE_MIB must be a whole number above 0, not `lots`"),
        "{out}"
    );
    assert!(!output.exists());
}

/// `gatehouse serve` in a child process with the library tables of `host`, then `more`, in
/// `dir/gatehouse.toml`, and `--policy` for each of `policies`: a config it refuses, so it
/// exits. Returns its exit code and stderr; kills it and fails if it is still up after a
/// minute (it accepted the config).
fn serve_refuses(
    dir: &Path,
    host: &gatehouse_host::HostConfig,
    more: &str,
    policies: &[&gatehouse_tests::Artifact],
) -> (Option<i32>, String) {
    let config = dir.join("gatehouse.toml");
    std::fs::write(
        &config,
        format!("{}\n{more}", toml::to_string(host).unwrap()),
    )
    .unwrap();
    let mut serve = Serve::config(&config);
    for (n, policy) in policies.iter().enumerate() {
        let file = dir.join(format!("policy-{n}.wasm"));
        std::fs::write(&file, policy.signed()).unwrap();
        serve = serve.policy(&file);
    }
    serve
        .log(dir.join("stderr.log"))
        .exit(Duration::from_secs(60))
}

/// The tables `[mcp]` needs to get past "no caller could be admitted", on a free port.
const ANONYMOUS: &str = "[mcp]\nlisten = \"127.0.0.1:0\"\nanonymous_tenant = \"default\"\n";

#[test]
fn a_typo_in_a_table_name_lists_every_valid_table() {
    let dir = tempfile::tempdir().unwrap();
    let host = gatehouse_tests::config(&["*"], &[]);
    let (code, stderr) = serve_refuses(
        dir.path(),
        &host,
        &format!("{ANONYMOUS}[mpc]\nx = 1\n"),
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "unknown field `mpc`, expected one of `sandbox`, `cache`, `trust`, `egress`, \
             `pipeline`, `store`, `stdio`, `caller`, `mcp`, `admin`, `watch`, `import`"
        ),
        "{stderr}"
    );
}

#[test]
fn an_admin_token_equal_to_an_api_key_is_refused_naming_both_entries_not_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "shared-secret-4b1d";
    let (key, token) = (dir.path().join("agent.key"), dir.path().join("admin.token"));
    std::fs::write(&key, secret).unwrap();
    std::fs::write(&token, format!("{secret}\n")).unwrap();
    let host = gatehouse_tests::config(&["*"], &[]);
    let more = format!(
        "[mcp]\nlisten = \"127.0.0.1:0\"\n\n[[mcp.api_key]]\ntenant = \"other\"\nenv = \"PATH\"\n\n\
         [[mcp.api_key]]\ntenant = \"acme\"\nprincipal = \"agent:bot\"\nfile = {key:?}\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\n[[admin.token]]\nprincipal = \"usr_ops\"\n\
         roles = [\"operator\"]\nfile = {token:?}\n"
    );
    let (code, stderr) = serve_refuses(dir.path(), &host, &more, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    let config = dir.path().join("gatehouse.toml");
    assert!(
        stderr.contains(&format!(
            "error: {}: `[[admin.token]]` #1 (principal `usr_ops`) has the same value as \
             `[[mcp.api_key]]` #2 (tenant `acme`): the agent holding that API key could act as \
             the operator; give the admin token a value of its own",
            config.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains(secret), "{stderr}");
}

#[test]
fn a_token_file_error_counts_entries_from_1_and_names_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let (good, missing) = (dir.path().join("a.token"), dir.path().join("b.token"));
    std::fs::write(&good, "token-a-91f2").unwrap();
    let host = gatehouse_tests::config(&["*"], &[]);
    let more = format!(
        "{ANONYMOUS}\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[[admin.token]]\nprincipal = \"usr_a\"\n\
         roles = [\"auditor\"]\nfile = {good:?}\n\n[[admin.token]]\nprincipal = \"usr_b\"\n\
         roles = [\"auditor\"]\nfile = {missing:?}\n"
    );
    let (code, stderr) = serve_refuses(dir.path(), &host, &more, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: {}: `[[admin.token]]` #2 (principal `usr_b`): cannot read `{}`",
            dir.path().join("gatehouse.toml").display(),
            missing.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_policy_config_error_exits_2_naming_the_misspelled_key() {
    use gatehouse_host::config::PolicyBinding;
    use gatehouse_tests::artifacts::BASELINE;
    let dir = tempfile::tempdir().unwrap();
    let mut host = gatehouse_tests::config(&["*"], &["gatehouse.baseline"]);
    host.pipeline.policies.push(
        serde_json::from_value::<PolicyBinding>(serde_json::json!({
            "module": "gatehouse.baseline",
            "config": { "approval_tresholds": { "amount": 100 } },
        }))
        .unwrap(),
    );
    let (code, stderr) = serve_refuses(dir.path(), &host, ANONYMOUS, &[&BASELINE]);
    assert_eq!(code, Some(2), "a config error is a usage error: {stderr}");
    assert!(
        stderr.contains(&format!(
            "error: {}: the config of [[pipeline.policy]] binding #1 for `gatehouse.baseline` \
             does not match the module's config_schema: at `config.approval_tresholds`: ",
            dir.path().join("gatehouse.toml").display()
        )),
        "{stderr}"
    );
}
