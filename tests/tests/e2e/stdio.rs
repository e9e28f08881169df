//! `gatehouse import mcp --stdio` end to end: real stdio MCP servers from npm
//! (`@modelcontextprotocol/server-filesystem`) and PyPI (`mcp-server-time`), pinned and installed
//! by the import, signed with the generic `mcp-upstream` component built from source, served by
//! a `gatehouse serve` process in bubblewrap's sandbox and called over MCP; and a hostile server
//! (`tests/stdio/hostile.py`) whose every attempt to leave its sandbox fails while the gateway
//! keeps serving, and which, granted one destination, reaches it only through its egress
//! proxy.

use std::future::Future;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_tests::admin::request;
use gatehouse_tests::artifacts::MCP_UPSTREAM;
use gatehouse_tests::browser::Browser;
use gatehouse_tests::mcp::{Client, mcp_post, rmcp_call, texts, tool_names};
use gatehouse_tests::stdio::{FILESYSTEM, MEMORY, TIME, open_dir};
use gatehouse_tests::upstream::Upstream;
use serde_json::{Value, json};

use crate::import::{Imported, TOKEN_ENV, UPSTREAM_TOKEN, checking_drift, gatehouse, key_file};

/// Imports the stdio server `command` as `id` into `dir/out`, signed, with `flags` before
/// `--`: the exit code and output, the output directory and the key it is signed with.
fn import(
    dir: &Path,
    id: &str,
    flags: &[&str],
    command: &[&str],
) -> (i32, String, PathBuf, SigningKey) {
    let (signing, key) = key_file(dir);
    let out = dir.join("out");
    let packages = dir.join("packages");
    let mut args = vec![
        "import".to_owned(),
        "mcp".to_owned(),
        "--stdio".to_owned(),
        "--id".to_owned(),
        id.to_owned(),
        "--out".to_owned(),
        out.display().to_string(),
        "--packages-dir".to_owned(),
        packages.display().to_string(),
        "--key".to_owned(),
        key.display().to_string(),
        "--component".to_owned(),
        MCP_UPSTREAM.wasm.to_owned(),
    ];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    args.push("--".to_owned());
    args.extend(command.iter().map(|c| (*c).to_owned()));
    let (code, text) = gatehouse(&args.iter().map(String::as_str).collect::<Vec<_>>());
    (code, text, out, signing)
}

/// Imports the Python stdio server `tests/stdio/<script>` (run by the system's Python, its
/// directory granted read-only) as `id` into `dir/out`: the output directory, the key it is
/// signed with, and the script's path.
fn import_script(dir: &Path, id: &str, script: &str) -> (PathBuf, SigningKey, PathBuf) {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio");
    let script = scripts.join(script);
    let (code, printed, out, key) = import(
        dir,
        id,
        &["--dir", &format!("{}:ro", scripts.display())],
        &["/usr/bin/python3", script.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{printed}");
    (out, key, script)
}

/// How long the console may take to show something.
const SOON: Duration = Duration::from_secs(10);

/// An operator's admin token (to list what is served).
const OPERATOR: &str = "operator-token-stdio-5d1e";

/// The one stdio server `gatehouse admin plugins` lists.
async fn stdio_status(gateway: &Imported) -> Value {
    let (status, body) = request(gateway.admin, "GET", "/v1/plugins", Some(OPERATOR), None).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 200, "{body}");
    let servers = body["stdio"].as_array().expect("a stdio list");
    assert_eq!(servers.len(), 1, "{body}");
    servers[0].clone()
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    texts(result).join("")
}

/// Calls `<adapter>.<tool>`: the result's text and the call record.
async fn call_tool(client: &Client, adapter: &str, tool: &str, args: Value) -> (String, Value) {
    let (result, record) = rmcp_call(client, &format!("{adapter}.{tool}"), args, json!({})).await;
    (text_of(&result), record)
}

/// npm's filesystem server: imported pinned, served sandboxed over one directory; a read, and
/// a write that waits for approval and runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_npm_server_is_pinned_sandboxed_and_governed() {
    let dir = open_dir();
    let docs = open_dir();
    std::fs::set_permissions(docs.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(docs.path().join("hello.txt"), "hello from the docs").unwrap();
    let docs_dir = docs.path().display().to_string();
    let id = "test.fs";
    let (code, printed, out, key) = import(
        dir.path(),
        id,
        &["--dir", &format!("{docs_dir}:rw")],
        &["npx", "-y", FILESYSTEM, &docs_dir],
    );
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("read_text_file"), "{printed}");
    // The user the server runs as under a root gateway, and where it may write, are said.
    let uid = gatehouse_host::stdio::ServerConfig::new(id).run_as();
    assert!(
        printed.contains(&format!(
            "stdio server of `test.fs`: under a root gateway it runs as uid {uid} (gid {uid}, \
             `[[stdio.server]] uid`); it writes only in the directories granted `rw` \
             ({docs_dir}), which uid {uid} must be able to write"
        )),
        "{printed}"
    );
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    for pinned in [
        "[stdio]",
        "registry = \"npm\"",
        "name = \"@modelcontextprotocol/server-filesystem\"",
        "version = \"2026.8.31\"",
        "integrity = \"sha512-",
        "digest = \"sha256:",
        "url = \"stdio://test.fs\"",
    ] {
        assert!(manifest.contains(pinned), "{pinned}\n{manifest}");
    }
    // Nothing the gateway does not own: no egress request, no grant.
    assert!(!manifest.contains("[[egress]]"), "{manifest}");
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(config.contains("[[stdio.server]]"), "{config}");
    assert!(!config.contains("[[egress.grant]]"), "{config}");

    let operator = dir.path().join("operator.token");
    std::fs::write(&operator, OPERATOR).unwrap();
    let extra = format!(
        "[[admin.token]]\nprincipal = \"usr_ops_olu\"\nroles = [\"operator\"]\nfile = {:?}\n",
        operator.display().to_string()
    );
    let gateway = Imported::start_with(&out, id, &key, ("UNUSED", ""), &extra).await;
    let client = gateway.client().await;
    let tools = tool_names(&client).await;
    assert!(
        tools.contains(&"test.fs.read_text_file".to_owned()),
        "{tools:?}"
    );
    // Loaded, not started: a server starts on its first call.
    assert_eq!(stdio_status(&gateway).await["state"], "stopped");

    let hello = format!("{docs_dir}/hello.txt");
    let (result, record) = rmcp_call(
        &client,
        "test.fs.read_text_file",
        json!({ "path": hello }),
        json!({}),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{record}");
    assert_eq!(text_of(&result), "hello from the docs");
    let status = stdio_status(&gateway).await;
    assert_eq!(
        (&status["state"], &status["restarts"], &status["bare"]),
        (&json!("running"), &json!(0), &json!(false)),
        "{status}"
    );
    assert!(status["pid"].is_u64(), "{status}");
    // The tests run as root: the server runs as its own user, as `admin plugins` says.
    assert_eq!(status["uid"], json!(uid), "{status}");
    // The memory limit that applied (`memory_mib = 2048`, the import's default), and whose
    // calls its process serves.
    assert_eq!(
        (&status["memory"], &status["isolate"]),
        (
            &json!({ "process_bytes": 2u64 << 30, "file_bytes": 2u64 << 30, "tmpfs_bytes": 1u64 << 30 }),
            &json!("shared")
        ),
        "{status}"
    );
    assert_eq!(
        status["pids"],
        json!([status["pid"]]),
        "a pool of one: {status}"
    );
    // The console shows the same.
    let browser = Browser::start(1280, 900).await;
    let console = format!("http://127.0.0.1:{}/console/", gateway.admin);
    browser.client.goto(&console).await.unwrap();
    browser.type_into("#token", OPERATOR).await;
    browser.click("#signin-submit").await;
    browser.wait("#who:not([hidden])", SOON).await;
    browser
        .client
        .goto(&format!("{console}#/plugins"))
        .await
        .unwrap();
    let row = "#stdio tr[data-adapter='test.fs']";
    browser
        .wait_text(&format!("{row} td[data-label=State]"), "running", SOON)
        .await;
    let process = browser.text(&format!("{row} td[data-label=Process]")).await;
    assert_eq!(process, status["pid"].to_string());
    let user = browser.text(&format!("{row} td[data-label=User]")).await;
    assert_eq!(user, format!("uid {uid}"));
    let runs = browser.text(&format!("{row} td[data-label=Runs]")).await;
    assert!(runs.contains("server-filesystem@2026.8.31"), "{runs}");
    drop(browser);
    assert!(
        status["command"][1]
            .as_str()
            .is_some_and(|c| c.contains("server-filesystem@2026.8.31/node_modules/")),
        "what runs is the pinned install: {status}"
    );
    // The server's own check and the sandbox: outside its directory there is nothing.
    let (result, _) = rmcp_call(
        &client,
        "test.fs.read_text_file",
        json!({ "path": "/etc/shadow" }),
        json!({}),
    )
    .await;
    assert_eq!(result.is_error, Some(true), "{}", text_of(&result));

    // A write: destructive in the server's annotations, so it waits for a person.
    let note = docs.path().join("note.txt");
    let args = json!({ "path": note, "content": "written once", "idempotency_key": "note-1" });
    let (_, paused) = rmcp_call(&client, "test.fs.write_file", args.clone(), json!({})).await;
    assert_eq!(paused["outcome"], "APPROVAL_REQUIRED", "{paused}");
    assert!(!note.exists(), "nothing ran before the approval");
    let approval = paused["approval_id"].as_str().expect("an approval id");
    assert_eq!(gateway.approve(approval).await, 200);
    let (_, done) = rmcp_call(&client, "test.fs.write_file", args.clone(), json!({})).await;
    assert_eq!(done["outcome"], "OK", "{done}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "written once");
    std::fs::write(&note, "changed by the operator").unwrap();
    let (result, replay) = rmcp_call(&client, "test.fs.write_file", args, json!({})).await;
    assert_eq!(replay["outcome"], "OK", "{replay}");
    assert_eq!(
        result.meta.as_ref().unwrap()["gatehouse/replay_of"],
        done["tool_call_id"]
    );
    assert_eq!(
        std::fs::read_to_string(&note).unwrap(),
        "changed by the operator",
        "the replay wrote nothing"
    );

    // Drift: the pinned package changed on disk is refused at start.
    let packages = dir.path().join("packages");
    let installed = packages
        .join("npm")
        .join("@modelcontextprotocol+server-filesystem@2026.8.31");
    assert!(installed.is_dir(), "{}", installed.display());
    std::fs::write(installed.join("planted.js"), "// not what was reviewed").unwrap();
    let (code, checked) = gatehouse(&["import", "mcp", "--check", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{checked}");
    assert!(
        checked.contains("no longer match the signed pin"),
        "{checked}"
    );
    // And a gateway refuses to start with it.
    drop(client);
    drop(gateway);
    let wasm = out.join(format!("{id}.wasm"));
    let (started, _dir) = checking_drift(&out, &key, &wasm, "off").await;
    let Err(refused) = started else {
        panic!("a gateway served a changed package");
    };
    assert!(
        refused.contains("no longer match the signed pin"),
        "{refused}"
    );
}

/// npm's memory server imported with no directory to write, as a new operator would: its
/// first write fails in the sandbox (it writes beside its code, which the sandbox shows
/// read-only), and the answer keeps the server's error and says why and what to grant. A
/// retry with the same key says it replays that failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_sandbox_refuses_says_what_to_grant() {
    let dir = open_dir();
    let id = "test.memory";
    let (code, printed, out, key) = import(dir.path(), id, &[], &["npx", "-y", MEMORY]);
    assert_eq!(code, 0, "{printed}");
    let gateway = Imported::start_with(&out, id, &key, ("UNUSED", ""), "").await;
    let client = gateway.client().await;
    let args = json!({
        "entities": [{ "name": "ada", "entityType": "person", "observations": ["wrote a program"] }],
        "idempotency_key": "memory-1",
    });
    let tool = "test.memory.create_entities";
    let (result, failed) = rmcp_call(&client, tool, args.clone(), json!({})).await;
    assert_eq!(failed["outcome"], "TOOL_ERROR", "{failed}");
    assert_eq!(result.is_error, Some(true), "{failed}");
    let text = text_of(&result);
    let uid = gatehouse_host::stdio::ServerConfig::new(id).run_as();
    for said in [
        // The server's own words.
        "EROFS",
        // The gateway's.
        "gatehouse: the sandbox lets the server write only in the directories granted to it \
         read-write (none)",
        &format!("Grant one that uid {uid} can write (`--dir PATH:rw` at import"),
        "`--env`",
    ] {
        assert!(text.contains(said), "{said} in {text}");
    }
    let (result, _) = rmcp_call(&client, tool, args, json!({})).await;
    let text = text_of(&result);
    assert!(
        text.contains("This is the result of an earlier call")
            && text.contains("send a new idempotency key"),
        "{text}"
    );
}

/// A server whose tool list changed since the import is drift: `--check` exits 1 and names
/// the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_drift() {
    let dir = open_dir();
    let scripts = open_dir();
    let script = scripts.path().join("server.py");
    let original =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio/hostile.py"))
            .unwrap();
    std::fs::write(&script, &original).unwrap();
    let (code, printed, out, key) = import(
        dir.path(),
        "test.drifting",
        &["--dir", &format!("{}:ro", scripts.path().display())],
        &["/usr/bin/python3", script.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{printed}");
    let (code, same) = gatehouse(&["import", "mcp", "--check", out.to_str().unwrap()]);
    assert_eq!(
        (code, same.trim()),
        (0, "no drift: the 14 imported tools are as pinned")
    );
    // `echo` gone, `exfiltrate` new.
    std::fs::write(
        &script,
        original.replace("TOOLS = [\"echo\",", "TOOLS = [\"exfiltrate\","),
    )
    .unwrap();
    let (code, drift) = gatehouse(&["import", "mcp", "--check", out.to_str().unwrap()]);
    assert_eq!(code, 1, "{drift}");
    assert!(drift.contains("added: exfiltrate"), "{drift}");
    assert!(drift.contains("removed: echo"), "{drift}");
    assert!(
        drift.contains("drift: the stdio server of `test.drifting` changed"),
        "{drift}"
    );
    // The start-up check asks the server through the egress gate, as for an HTTP server.
    let wasm = out.join("test.drifting.wasm");
    let (started, _dir) = checking_drift(&out, &key, &wasm, "refuse").await;
    let Err(refused) = started else {
        panic!("a gateway served a drifted import");
    };
    assert!(
        refused.contains(
            "adapter `test.drifting`: the MCP server at stdio://test.drifting no longer lists echo"
        ),
        "{refused}"
    );
    let (started, _dir) = checking_drift(&out, &key, &wasm, "warn").await;
    assert!(started.is_ok(), "{:?}", started.err());
}

/// PyPI's time server: installed into a virtual environment, pinned, listed and called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pypi_server_is_pinned_and_called() {
    let dir = open_dir();
    let id = "test.time";
    let (code, printed, out, key) = import(dir.path(), id, &[], &["uvx", TIME]);
    assert_eq!(code, 0, "{printed}");
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    for pinned in [
        "registry = \"pypi\"",
        "name = \"mcp-server-time\"",
        "version = \"2026.10.19\"",
        "integrity = \"sha256:",
    ] {
        assert!(manifest.contains(pinned), "{pinned}\n{manifest}");
    }
    // The first call starts the Python server (an interpreter importing its packages) within
    // its deadline: the tests' 2 s is tight for that on a busy machine, as for any
    // interpreter-based plugin, so it gets its own.
    let deadline = format!("[[sandbox.plugin]]\nid = \"{id}\"\ntimeout_ms = 15000\n");
    let gateway = Imported::start_with(&out, id, &key, ("UNUSED", ""), &deadline).await;
    let client = gateway.client().await;
    let (result, record) = rmcp_call(
        &client,
        "test.time.get_current_time",
        json!({ "timezone": "UTC" }),
        json!({}),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{record}");
    let answer: Value = serde_json::from_str(&text_of(&result)).unwrap();
    assert_eq!(answer["timezone"], "UTC", "{answer}");
}

/// A server that attacks its sandbox: every attempt fails, and the gateway keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_stays_in_its_sandbox() {
    let dir = open_dir();
    let id = "test.hostile";
    let (out, key, script) = import_script(dir.path(), id, "hostile.py");
    // Tight limits for the bombs, and a short call budget for the hang.
    let snippet = out.join("config.toml");
    let mut text = std::fs::read_to_string(&snippet).unwrap();
    for (default, tight) in [
        ("memory_mib = 2048", "memory_mib = 256"),
        ("processes = 64", "processes = 16"),
    ] {
        assert!(text.contains(default), "{default}: {text}");
        text = text.replace(default, tight);
    }
    std::fs::write(&snippet, text).unwrap();
    let gateway = Imported::start(&out, id, &key).await;
    let client = gateway.client().await;
    let call = |tool: &'static str, args: Value| call_tool(&client, "test.hostile", tool, args);
    let still_serving = || async {
        let (text, record) = call("echo", json!({ "text": "still here" })).await;
        assert_eq!(text, "echo still here", "{record}");
    };
    still_serving().await;

    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    for path in [
        "/etc/shadow".to_owned(),
        format!("{home}/.bash_history"),
        out.join(format!("{id}.wasm")).display().to_string(),
        gateway.config_path().display().to_string(),
    ] {
        let (text, record) = call("read", json!({ "path": path })).await;
        assert!(
            text.starts_with("refused: No such file"),
            "{path}: {text} {record}"
        );
    }
    let (text, _) = call("read", json!({ "path": script })).await;
    assert!(
        text.starts_with("read "),
        "its own granted directory: {text}"
    );

    // Exactly the sandbox's own variables (none granted; bubblewrap sets PWD); Python adds
    // LC_CTYPE itself when it finds the C locale (PEP 538).
    let (text, _) = call("env", json!({})).await;
    assert_eq!(
        text.replace("LC_CTYPE ", ""),
        "HOME PATH PWD TMPDIR",
        "exactly the granted environment"
    );

    for port in [gateway.mcp, gateway.admin] {
        let (text, _) = call("connect", json!({ "port": port })).await;
        assert!(text.starts_with("refused"), "port {port}: {text}");
    }
    let (text, _) = call("dns", json!({ "name": "registry.npmjs.org" })).await;
    assert!(text.starts_with("refused"), "{text}");

    let (text, _) = call("forkbomb", json!({})).await;
    let forked: u32 = text.trim_start_matches("forked ").parse().unwrap();
    assert!(forked < 16, "{text}");
    still_serving().await;
    let (text, _) = call("membomb", json!({})).await;
    assert!(text.starts_with("refused: MemoryError"), "{text}");
    still_serving().await;
    // Shared memory and tmpfs files count against `memory_mib` too: the address space of
    // each process, and half of it for each of /tmp and /dev/shm; the root and /dev are
    // read-only.
    let (text, _) = call("shared", json!({ "mib": 1024 })).await;
    assert_eq!(text, "refused: Cannot allocate memory");
    for tmpfs in ["/tmp/hoard", "/dev/shm/hoard"] {
        let (text, _) = call("fill", json!({ "path": tmpfs, "mib": 1024 })).await;
        let written: u32 = text
            .strip_prefix("refused after ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{tmpfs}: {text}"));
        assert!(written <= 128, "{tmpfs}: {text}");
    }
    for path in ["/hoard", "/dev/hoard"] {
        let (text, _) = call("fill", json!({ "path": path, "mib": 1 })).await;
        assert_eq!(text, "refused after 0 MiB: Read-only file system", "{path}");
    }
    still_serving().await;
    // No descriptor of the gateway's: only its standard streams.
    let (text, _) = call("fds", json!({})).await;
    assert_eq!(text, "0 1 2");

    // Megabytes on stdout without a newline: refused, the process restarted.
    let (text, record) = call("flood", json!({})).await;
    assert_eq!(record["outcome"], "TOOL_ERROR", "{text} {record}");
    assert_eq!(record["error"]["retryable"], true, "{record}");
    retry_until_serving(&call).await;

    // Hanging: the call fails at its time budget, retryable; the process is restarted after
    // a missed ping.
    let (text, record) = call("hang", json!({})).await;
    assert_eq!(record["outcome"], "TOOL_TIMEOUT", "{text} {record}");
    assert_eq!(record["error"]["retryable"], true, "{record}");
    retry_until_serving(&call).await;
}

/// A server granted one destination (`--net`, with a `--header` credential) reaches it only
/// through its egress proxy, which injects the credential; another port of the same loopback
/// is refused with the gate's reason and sees nothing. Without a grant, a fetch finds no
/// network at all (the hostile test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_server_reaches_its_destination_only_through_the_proxy() {
    let upstream = Upstream::start().await;
    let other = Upstream::start().await;
    let dir = open_dir();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio");
    let script = scripts.join("hostile.py");
    let id = "test.netted";
    let (code, printed, out, key) = import(
        dir.path(),
        id,
        &[
            "--dir",
            &format!("{}:ro", scripts.display()),
            "--net",
            &upstream.url("/api/"),
            "--header",
            &format!("Authorization: Bearer ${{{TOKEN_ENV}}}"),
        ],
        &["/usr/bin/python3", script.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{printed}");
    let snippet = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(snippet.contains("[[egress.grant]]"), "{snippet}");
    let gateway = Imported::start(&out, id, &key).await;
    let client = gateway.client().await;
    let call = |tool: &'static str, args: Value| call_tool(&client, "test.netted", tool, args);

    let (text, record) = call("fetch", json!({ "url": upstream.url("/api/items") })).await;
    assert!(text.starts_with("200 "), "{text} {record}");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].path, "/api/items");
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {UPSTREAM_TOKEN}").as_str(),
        "the credential, injected by the gate"
    );
    let (text, _) = call("env", json!({})).await;
    assert!(
        text.contains("HTTP_PROXY") && !text.contains(TOKEN_ENV),
        "the proxy, and never the secret: {text}"
    );

    let (text, _) = call("fetch", json!({ "url": other.url("/api/items") })).await;
    assert!(
        text.starts_with("403 no_matching_grant: no egress grant for this adapter covers"),
        "{text}"
    );
    let (text, _) = call("connect", json!({ "port": upstream.port })).await;
    assert!(
        text.starts_with("refused"),
        "no way around the proxy: {text}"
    );
    let (text, _) = call("dns", json!({ "name": "registry.npmjs.org" })).await;
    assert!(text.starts_with("refused"), "{text}");
    assert!(other.seen().is_empty());
    assert_eq!(upstream.seen().len(), 1);
    // No descriptor of the gateway's (nor the pipes its proxy was put in with): only its
    // standard streams.
    let (text, _) = call("fds", json!({})).await;
    assert_eq!(text, "0 1 2");
}

/// Calls echo until it answers (a restarted server waits out its backoff).
async fn retry_until_serving<F, Fut>(call: &F)
where
    F: Fn(&'static str, Value) -> Fut,
    Fut: Future<Output = (String, Value)>,
{
    let started = std::time::Instant::now();
    loop {
        let (text, record) = call("echo", json!({ "text": "back" })).await;
        if text == "echo back" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{text} {record}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `tests/stdio/server.js` packed with `npm pack` as npm package `name` at `version` (written
/// as given into its `package.json`) in a directory of its own under `dir`: the `npx` spec
/// that installs it, `name@file:TARBALL`, so no registry is asked.
fn npm_package(dir: &Path, name: &str, version: &str) -> String {
    let source = dir.join(format!("src-{}", version.replace('/', "_")));
    let packed = dir.join(format!("tgz-{}", version.replace('/', "_")));
    std::fs::create_dir_all(&source).unwrap();
    std::fs::create_dir_all(&packed).unwrap();
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio/server.js");
    std::fs::copy(server, source.join("server.js")).unwrap();
    let manifest = json!({ "name": name, "version": version, "bin": { name: "server.js" } });
    std::fs::write(source.join("package.json"), manifest.to_string()).unwrap();
    let output = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&packed)
        .current_dir(&source)
        .output()
        .expect("npm (Node.js 20+) runs the stdio tests");
    assert!(output.status.success(), "npm pack: {output:?}");
    let tarball = std::fs::read_dir(&packed).unwrap().next().unwrap().unwrap();
    format!("{name}@file:{}", tarball.path().display())
}

/// A wheel of `tests/stdio/hostile.py` as PyPI package `name` whose metadata says `version`
/// (`tests/stdio/wheel.py`): the `uvx --from` requirement that installs it from the file.
fn pypi_wheel(dir: &Path, name: &str, version: &str) -> String {
    let stdio = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio");
    let output = std::process::Command::new("/usr/bin/python3")
        .arg(stdio.join("wheel.py"))
        .args([
            dir,
            Path::new(name),
            Path::new(version),
            &stdio.join("hostile.py"),
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "wheel.py: {output:?}");
    let wheel = String::from_utf8(output.stdout).unwrap();
    format!("{name} @ file://{}", wheel.trim())
}

/// A directory beside `packages_dir` holding one file, and what it holds.
fn victim(dir: &Path) -> (PathBuf, Vec<String>) {
    let victim = dir.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "the operator's").unwrap();
    (victim.clone(), listing(&victim))
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// An npm package whose `package.json` version climbs out of `packages_dir`
/// (`1.0.0/../../../victim`, beside an earlier install of 1.0.0 it climbs through) is refused
/// before any file operation: the directory it aims at keeps its file, nothing is written
/// outside `packages_dir`, and the earlier import is as it was.
#[test]
fn an_npm_version_that_leaves_packages_dir_is_refused() {
    let dir = open_dir();
    let (victim, before) = victim(dir.path());
    let benign = npm_package(dir.path(), "echo-server", "1.0.0");
    let (code, printed, out, _) = import(dir.path(), "test.echo", &[], &["npx", "-y", &benign]);
    assert_eq!(code, 0, "{printed}");
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    assert!(manifest.contains("version = \"1.0.0\""), "{manifest}");
    let packages = dir.path().join("packages");
    let installed = listing(&packages.join("npm"));
    assert_eq!(installed, ["echo-server@1.0.0"]);

    let hostile = npm_package(dir.path(), "echo-server", "1.0.0/../../../victim");
    let (code, printed, _, _) = import(dir.path(), "test.echo", &[], &["npx", "-y", &hostile]);
    assert_eq!(
        listing(&victim),
        before,
        "nothing outside packages_dir changed: {printed}"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("keep.txt")).unwrap(),
        "the operator's"
    );
    assert_eq!(code, 2, "{printed}");
    assert!(
        printed.contains(
            "npm package `echo-server`: version `1.0.0/../../../victim` is not a semantic version"
        ),
        "{printed}"
    );
    assert_eq!(listing(&packages.join("npm")), installed, "no staging left");
    assert_eq!(
        std::fs::read_to_string(out.join("manifest.toml")).unwrap(),
        manifest,
        "the earlier import is kept"
    );
}

/// A wheel whose metadata version climbs out of `packages_dir` is refused after pip's dry
/// run, before the virtual environment is made: nothing is written outside `packages_dir`.
#[test]
fn a_pypi_version_that_leaves_packages_dir_is_refused() {
    let dir = open_dir();
    let (victim, before) = victim(dir.path());
    let wheels = dir.path().join("wheels");
    std::fs::create_dir(&wheels).unwrap();
    let hostile = pypi_wheel(&wheels, "echo-srv", "1.0/../../../victim");
    let (code, printed, out, _) = import(
        dir.path(),
        "test.echo",
        &[],
        &["uvx", "--from", &hostile, "echo-srv"],
    );
    assert_eq!(
        listing(&victim),
        before,
        "nothing outside packages_dir changed: {printed}"
    );
    assert_eq!(code, 2, "{printed}");
    assert!(
        printed.contains(
            "PyPI package `echo-srv`: version `1.0/../../../victim` is not a PEP 440 version"
        ),
        "{printed}"
    );
    assert!(!out.exists(), "nothing written");
    let pypi = dir.path().join("packages/pypi");
    assert!(
        listing(&pypi).is_empty(),
        "no staging left: {:?}",
        listing(&pypi)
    );
}

/// An argument holding a newline stays an argument: `manifest.toml`'s opening comment shows
/// it escaped, and nothing after the newline is read back as TOML into the signed manifest.
#[test]
fn a_newline_in_an_argument_adds_nothing_to_the_signed_manifest() {
    let dir = open_dir();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio");
    let script = scripts.join("hostile.py");
    // The comment goes on with `.`: a `#` keeps what follows the injected line a comment.
    let injected = "hi\negress = [{ url = \"https://evil.example/\", methods = [\"POST\"] }]\n#";
    let (code, printed, out, _) = import(
        dir.path(),
        "test.injected",
        &["--dir", &format!("{}:ro", scripts.display())],
        &["/usr/bin/python3", script.to_str().unwrap(), injected],
    );
    assert_eq!(code, 0, "{printed}");
    let text = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.ends_with(
            r#" hi\negress = [{ url = "https://evil.example/", methods = ["POST"] }]\n#."#
        ),
        "{text}"
    );
    let wasm = std::fs::read(out.join("test.injected.wasm")).unwrap();
    let signed = gatehouse_host::plugin::inspect(&wasm).unwrap();
    let Some(gatehouse_host::plugin::manifest::Manifest::Adapter(manifest)) = signed.manifest
    else {
        panic!("no adapter manifest: {:?}", signed.manifest_error);
    };
    assert!(manifest.egress.is_empty(), "{:?}", manifest.egress);
    let stdio = manifest.stdio.expect("the [stdio] table");
    assert_eq!(stdio.args, [script.to_str().unwrap(), injected]);
}

/// Under a root gateway a server runs as a user of its own, which must reach what its sandbox
/// shows it. A packages directory under a private parent (a 0700 temporary directory) is
/// named at import, with the uid, the directory in the way and the fix, before anything is
/// installed; a granted directory whose parent turned private after the import is named when
/// the gateway starts, and the fix the message gives lets it start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_the_servers_user_cannot_reach_is_named_with_the_fix() {
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(
        std::fs::metadata("/proc/self").unwrap().uid(),
        0,
        "this test runs as root, as CI does: a root gateway runs its servers as other users"
    );
    let private = tempfile::tempdir().unwrap();
    let dir = private.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let id = "test.private";
    let uid = gatehouse_host::stdio::ServerConfig::new(id).run_as();
    let package = npm_package(dir, "echo-server", "1.0.0");
    let (code, printed, out, _) = import(dir, id, &[], &["npx", "-y", &package]);
    assert_eq!(code, 2, "{printed}");
    let packages = dir.join("packages");
    assert!(
        printed.contains(&format!(
            "uid {uid} cannot read {}: {} (mode 0700, owner uid 0, gid 0) does not let it \
             through; `chmod o+x {}`",
            packages.display(),
            dir.display(),
            dir.display()
        )),
        "{printed}"
    );
    assert!(printed.contains("--packages-dir"), "{printed}");
    assert!(!packages.join("npm").exists(), "nothing installed");
    assert!(!out.exists(), "nothing written");

    // At start: a granted directory whose parent is closed after the import.
    let dir = open_dir();
    let parent = dir.path().join("srv");
    let docs = parent.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("stdio");
    let script = scripts.join("hostile.py");
    let (code, printed, out, key) = import(
        dir.path(),
        id,
        &[
            "--dir",
            &format!("{}:ro", docs.display()),
            "--dir",
            &format!("{}:ro", scripts.display()),
        ],
        &["/usr/bin/python3", script.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{printed}");
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
    let wasm = out.join(format!("{id}.wasm"));
    let (started, _config) = checking_drift(&out, &key, &wasm, "off").await;
    let Err(refused) = started else {
        panic!("a gateway started a server whose directory its user cannot reach");
    };
    assert!(
        refused.contains(&format!(
            "stdio server of `{id}` runs as its own user under a root gateway, and uid {uid} \
             cannot read {}: {} (mode 0700, owner uid 0, gid 0) does not let it through; \
             `chmod o+x {}`",
            docs.display(),
            parent.display(),
            parent.display()
        )),
        "{refused}"
    );
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o701)).unwrap();
    let (started, _config) = checking_drift(&out, &key, &wasm, "off").await;
    assert!(started.is_ok(), "{:?}", started.err());
}

/// npm's "everything" server, which offers every feature of the protocol.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// Runs `tests/clients/survey.py` (the official MCP Python SDK) with `plan` and `target`
/// (`--url ...` or `--stdio ...`): what it saw, with the times a dynamic resource says it
/// was made at blanked (they differ between two reads).
async fn survey(plan: &Value, target: Vec<String>) -> Value {
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let python = clients.join(".venv/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is not installed: run build-support/toolchains"
    );
    let mut command = std::process::Command::new(python);
    command
        .arg(clients.join("survey.py"))
        .arg(plan.to_string())
        .args(target);
    let output = tokio::task::spawn_blocking(move || command.output().expect("python runs"))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let times = regex::Regex::new(r"created at [0-9:]+ ?[AP]?M?").unwrap();
    serde_json::from_str(&times.replace_all(&text, "created at <time>"))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A real server behind gatehouse: npm's everything server, imported over stdio (served in the
/// sandbox) and over Streamable HTTP (the same package, run by the test), surveyed by the
/// official Python SDK directly and through the gateway in both protocol versions. Its
/// resources, templates, prompts, reads, fill-ins and completions are the same either way (the
/// gateway names a prompt `<adapter id>.<name>`); so are its tools' calls: the progress of a
/// long operation, and a sampling request and an elicitation (tools the server offers only to
/// a client that can be asked), each answered by the client's own handler, under the
/// operator's `[[caller.grant]]`. Through the gateway the elicitation is answered after 4.5 s,
/// longer than the call's egress budget (4 s) and its sandbox budget (2 s): neither runs while
/// the caller answers, so the upstream's response is not cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_everything_server_works_the_same_through_gatehouse() {
    let dir = open_dir();
    let id = "test.every";
    let (code, printed, out, key) =
        import(dir.path(), id, &[], &["npx", "-y", EVERYTHING, "stdio"]);
    assert_eq!(code, 0, "{printed}");
    let plan = json!({
        "reads": ["demo://resource/static/document/architecture.md", "demo://resource/dynamic/text/7"],
        "gets": [
            { "name": "simple-prompt" },
            { "name": "args-prompt", "arguments": { "city": "Paris", "state": "TX" } },
            { "name": "resource-prompt", "arguments": { "resourceType": "Text", "resourceId": "3" } },
        ],
        "completions": [
            { "ref": { "type": "ref/prompt", "name": "completable-prompt" }, "argument": { "name": "department", "value": "E" } },
        ],
        "calls": [
            { "name": "trigger-long-running-operation", "arguments": { "duration": 1, "steps": 2 } },
            { "name": "trigger-sampling-request", "arguments": { "prompt": "say hi", "maxTokens": 20 }, "key": true },
            { "name": "trigger-elicitation-request", "arguments": {}, "key": true },
        ],
    });
    let direct = survey(
        &plan,
        ["--stdio", "npx", "-y", EVERYTHING, "stdio"]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert!(
        direct["resources"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
            && direct["completions"] == json!([["Engineering"]])
            && direct["calls"]["trigger-long-running-operation"]["progress"]
                == json!([[1.0, 2.0], [2.0, 2.0]])
            && direct["calls"]["trigger-sampling-request"]["asked"]
                == json!(["sampling/createMessage"])
            && direct["calls"]["trigger-elicitation-request"]["asked"]
                == json!(["elicitation/create"]),
        "{direct}"
    );
    let gateway = Imported::start_with(&out, id, &key, ("UNUSED", ""), &asks(id)).await;
    same_through(&plan, gateway.mcp, id, &direct).await;
    drop(gateway);

    // The same package over Streamable HTTP, from the directory the stdio import installed it
    // into: imported from its URL, served, surveyed the same way.
    let script = find(
        &dir.path().join("packages"),
        "server-everything/dist/index.js",
    )
    .expect("the stdio import installed the package");
    let port = gatehouse_tests::free_port();
    let server = Killed(
        std::process::Command::new("node")
            .arg(&script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node runs"),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let http_dir = open_dir();
    let (http_key, http_key_path) = key_file(http_dir.path());
    let http_out = http_dir.path().join("out");
    let http_id = "test.everyhttp";
    let (code, printed) = gatehouse(&[
        "import",
        "mcp",
        &url,
        "--id",
        http_id,
        "--out",
        s(&http_out),
        "--key",
        s(&http_key_path),
        "--component",
        MCP_UPSTREAM.wasm,
    ]);
    assert_eq!(code, 0, "{printed}");
    let direct = survey(&plan, ["--url", url.as_str()].map(str::to_owned).to_vec()).await;
    let gateway = Imported::start_with(
        &http_out,
        http_id,
        &http_key,
        ("UNUSED", ""),
        &asks(http_id),
    )
    .await;
    same_through(&plan, gateway.mcp, http_id, &direct).await;
    drop(server);
}

/// A tool the server runs only as a task (2025-11-25's `taskSupport: "required"`: the
/// everything server's `simulate-research-query`, four stages of a second) works through
/// gatehouse for a client that knows nothing of tasks: the import marks it, and the adapter
/// calls it as a task and waits for its result within the call. The task's question (the
/// query is ambiguous), which the server sends on the stream of `tasks/result`, reaches the
/// client's elicitation handler under the operator's grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_server_runs_only_as_a_task_works_through_gatehouse() {
    let dir = open_dir();
    let id = "test.tasks";
    let (code, printed, out, key) = import(
        dir.path(),
        id,
        &["--include", "simulate-research-query"],
        &["npx", "-y", EVERYTHING, "stdio"],
    );
    assert_eq!(code, 0, "{printed}");
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    for marked in ["task = \"required\"", "task_support = \"optional\""] {
        assert!(manifest.contains(marked), "{marked}\n{manifest}");
    }
    // The task takes four seconds: more than the tests' default budgets.
    let extra = format!(
        "{}[[sandbox.plugin]]\nid = \"{id}\"\ntimeout_ms = 20000\n",
        asks(id)
    );
    let gateway = Imported::start_tuned(&out, id, &key, ("UNUSED", ""), &extra, |host| {
        host.egress.max_total_ms = 20_000;
    })
    .await;
    let lines = crate::import::typescript_agent(
        gateway.mcp,
        "2025-11-25",
        &format!("{id}.simulate-research-query"),
        // Not read-only: a write-class call, which takes a key.
        &json!({ "topic": "python", "ambiguous": true, "idempotency_key": "research-1" }),
        &[],
    )
    .await;
    let asked: Vec<_> = lines
        .iter()
        .filter(|l| l["event"] == "elicitation")
        .collect();
    assert_eq!(asked.len(), 1, "{lines:#?}");
    assert!(
        (asked[0]["params"]["message"].as_str())
            .is_some_and(|m| m.contains("could have multiple interpretations")),
        "{lines:#?}"
    );
    let result = (lines.iter().find(|l| l["event"] == "result"))
        .unwrap_or_else(|| panic!("no result: {lines:#?}"));
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("# Research Report: python") && text.contains("input_required"),
        "{lines:#?}"
    );
}

/// A cancelled call cancels the upstream task it waits on: the caller (the TypeScript SDK)
/// times out its request, and the server, whose tool runs only as a task, hears `tasks/cancel`
/// for it (the one request the egress gate still lets out after a cancellation) instead of
/// working on for nobody; the next call is served by the same process, which says what it
/// heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_cancels_the_upstream_task_it_waits_on() {
    let dir = open_dir();
    let id = "test.tasker";
    let (out, key, _) = import_script(dir.path(), id, "tasker.py");
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    assert!(manifest.contains("task = \"required\""), "{manifest}");
    // Time enough that only the cancellation ends the call.
    let deadline = format!("[[sandbox.plugin]]\nid = \"{id}\"\ntimeout_ms = 15000\n");
    let gateway = Imported::start_with(&out, id, &key, ("UNUSED", ""), &deadline).await;
    let client = gateway.client().await;
    assert_eq!(heard(&client, id).await, json!([]));

    let started = std::time::Instant::now();
    let lines = crate::import::typescript_agent(
        gateway.mcp,
        "2025-11-25",
        &format!("{id}.slow"),
        &json!({ "seconds": 30 }),
        &["--timeout", "1500", "--linger", "1000"],
    )
    .await;
    let errors: Vec<_> = lines.iter().filter(|l| l["event"] == "error").collect();
    assert_eq!(errors.len(), 1, "the request timed out: {lines:#?}");
    let told = heard_within(&client, id, 1, started).await;
    assert_eq!(
        told,
        json!([{ "method": "tasks/cancel", "taskId": "task-1" }]),
        "{lines:#?}"
    );
}

/// The operator's grant: adapter `id`'s server may ask the caller for elicitation and sampling.
fn asks(id: &str) -> String {
    format!("[[caller.grant]]\nadapter = \"{id}\"\nask = [\"elicitation\", \"sampling\"]\n")
}

/// Surveys gatehouse on port `mcp`, serving adapter `id`, in both protocol versions: each the
/// same as `direct`.
async fn same_through(plan: &Value, mcp: u16, id: &str, direct: &Value) {
    for version in ["2025-11-25", "2026-07-28"] {
        let url = format!("http://127.0.0.1:{mcp}/mcp");
        let prefix = format!("{id}.");
        let args = [
            "--prefix",
            &prefix,
            "--url",
            &url,
            "--version",
            version,
            "--answer-after",
            "4500",
            "--token",
        ];
        let mut args: Vec<String> = args.map(str::to_owned).to_vec();
        args.push(crate::import::AGENT_KEY.to_owned());
        let through = survey(plan, args).await;
        assert_eq!(&through, direct, "{id}, {version}");
    }
}

/// A child process, killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first file under `dir` whose path ends with `suffix`.
fn find(dir: &Path, suffix: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.ends_with(suffix) {
            return Some(path);
        }
        if entry
            .file_type()
            .is_ok_and(|t| t.is_dir() && !t.is_symlink())
            && let Some(found) = find(&path, suffix)
        {
            return Some(found);
        }
    }
    None
}

fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The id the patient server (`tests/stdio/patient.py`) is imported as.
const PATIENT: &str = "test.patient";

/// The patient server imported into `dir`, served, and a client of the gateway; the server has
/// heard nothing yet.
async fn patient(dir: &Path) -> (Imported, Client) {
    let (out, key, _) = import_script(dir, PATIENT, "patient.py");
    let gateway = Imported::start(&out, PATIENT, &key).await;
    let client = gateway.client().await;
    assert_eq!(heard(&client, PATIENT).await, json!([]));
    (gateway, client)
}

/// What the patient server imported as `id` heard: the
/// cancellations it received, asked through `client`.
async fn heard(client: &Client, id: &str) -> Value {
    let (text, record) = call_tool(client, id, "heard", json!({})).await;
    serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{e}: {text} {record}"))
}

/// The cancellations the patient server heard once it heard `count` (within 5 s of `since`).
async fn heard_within(client: &Client, id: &str, count: usize, since: std::time::Instant) -> Value {
    loop {
        let told = heard(client, id).await;
        if told.as_array().is_some_and(|t| t.len() >= count) {
            assert!(
                since.elapsed() < Duration::from_secs(5),
                "{:?}",
                since.elapsed()
            );
            return told;
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the server heard no cancellation: {told}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A 2026-07-28 client that closes its request's stream cancels the call it waited on (that is
/// how the version cancels: nothing else is sent): the imported stdio server gets
/// `notifications/cancelled` for its request, within a second, instead of working on for
/// nobody; the next call is served by the same process, which says what it heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_cancels_the_call_and_the_server_hears_it() {
    use std::io::Write as _;

    let dir = open_dir();
    let id = PATIENT;
    let (gateway, client) = patient(dir.path()).await;

    // A tool that would take 30 s, called at 2026-07-28, its connection closed after 1 s.
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "test.patient.wait",
            "arguments": { "seconds": 30 },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
         Mcp-Name: test.patient.wait\r\nContent-Length: {length}\r\n\r\n{body}",
        port = gateway.mcp,
        token = crate::import::AGENT_KEY,
        length = body.len(),
    );
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", gateway.mcp)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(stream);

    let told = heard_within(&client, id, 1, std::time::Instant::now()).await;
    assert_eq!(told.as_array().map(Vec::len), Some(1), "{told}");
    assert_eq!(told[0]["reason"], "the caller cancelled the call", "{told}");
    assert!(told[0]["requestId"].is_u64(), "the host's own id: {told}");
}

/// A 2025-11-25 client cancels a request with `notifications/cancelled`, which names the
/// request by its id; `initialize` names the client's session (`Mcp-Session-Id`), so the
/// gateway cancels the call of that id in that session only: the imported stdio server hears
/// it within a second, whether the call streams (the official TypeScript SDKs, v1 and v2,
/// which send it when a request times out) or is answered in one piece (a client that
/// declared nothing). The same id from another session of the same caller cancels nothing:
/// the call runs to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_that_cancels_a_request_cancels_the_call_and_the_server_hears_it() {
    let dir = open_dir();
    let id = PATIENT;
    let (gateway, client) = patient(dir.path()).await;

    // Each `initialize` names a session of its own.
    let bearer = format!("Bearer {}", crate::import::AGENT_KEY);
    let session = || async {
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": { "name": "raw", "version": "1" },
            },
        });
        let (status, headers, body) = mcp_post(
            gateway.mcp,
            "/mcp",
            &[("authorization", &bearer)],
            initialize.to_string(),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        (headers.get("mcp-session-id"))
            .and_then(|name| name.to_str().ok())
            .unwrap_or_else(|| panic!("no Mcp-Session-Id: {headers:?}"))
            .to_owned()
    };
    let (mine, other) = (session().await, session().await);
    assert_ne!(mine, other);

    // A call of `seconds` as request 5 in session `mine`, and after half a second a
    // cancellation of request 5 from session `from`: the call's answer.
    let cancelled_from = |from: String, seconds: u64| {
        let (port, bearer, mine) = (gateway.mcp, bearer.clone(), mine.clone());
        async move {
            let call = tokio::spawn({
                let (bearer, mine) = (bearer.clone(), mine.clone());
                async move {
                    let body = json!({
                        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
                        "params": {
                            "name": "test.patient.wait", "arguments": { "seconds": seconds },
                        },
                    });
                    let headers = [
                        ("authorization", bearer.as_str()),
                        ("mcp-session-id", &mine),
                    ];
                    mcp_post(port, "/mcp", &headers, body.to_string()).await
                }
            });
            tokio::time::sleep(Duration::from_millis(500)).await;
            let cancel = json!({
                "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": { "requestId": 5, "reason": "changed my mind" },
            });
            let headers = [
                ("authorization", bearer.as_str()),
                ("mcp-session-id", &from),
            ];
            let (status, _, body) = mcp_post(port, "/mcp", &headers, cancel.to_string()).await;
            assert_eq!(status, 202, "{body}");
            let (status, _, body) = call.await.unwrap();
            assert_eq!(status, 200, "{body}");
            body
        }
    };

    // From another session of the same caller: the call runs to its end.
    let body = cancelled_from(other.clone(), 2).await;
    assert!(
        body.contains("waited 2.0 s"),
        "the call ran to its end: {body}"
    );
    assert_eq!(heard(&client, id).await, json!([]));

    // From its own: the call (one that wants nothing told, answered in one piece) ends at
    // once, and the server hears of it.
    let started = std::time::Instant::now();
    let body = cancelled_from(mine.clone(), 30).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(!body.contains("waited"), "{body}");
    let told = heard_within(&client, id, 1, started).await;
    assert_eq!(told.as_array().map(Vec::len), Some(1), "{told}");
    assert_eq!(told[0]["reason"], "the caller cancelled the call", "{told}");

    // The SDKs' own cancellation: a request that times out after 1.5 s.
    for (n, sdk) in ["v1", "v2"].into_iter().enumerate() {
        let started = std::time::Instant::now();
        let lines = crate::import::typescript_agent(
            gateway.mcp,
            "2025-11-25",
            "test.patient.wait",
            &json!({ "seconds": 30 }),
            &["--sdk", sdk, "--timeout", "1500", "--linger", "1000"],
        )
        .await;
        let errors: Vec<_> = lines.iter().filter(|l| l["event"] == "error").collect();
        assert_eq!(errors.len(), 1, "{sdk}: the request timed out: {lines:#?}");
        let told = heard_within(&client, id, n + 2, started).await;
        assert_eq!(told.as_array().map(Vec::len), Some(n + 2), "{sdk}: {told}");
        assert_eq!(
            told[n + 1]["reason"],
            "the caller cancelled the call",
            "{sdk}: {told}"
        );
    }
}
