//! Shared fixtures for the end-to-end tests and the benches, one module per concern:
//!
//! - here: the components built from source by `build.rs` ([`artifacts`]), a test publisher
//!   key, operator configs that trust it, store files, and loopback HTTP ([`http`],
//!   [`free_port`], [`listening`]);
//! - [`host`]: building a `Host` (trust, egress grants, settings, plugins);
//! - [`state`]: calls with effects, approvals, and store files for the audit tests;
//! - [`cli`]: running the `gatehouse` command line, in this process or as a child;
//! - [`gateway`]: `gatehouse serve` child processes, killed when dropped;
//! - [`admin`]: a governed gateway with its admin API and a token per role;
//! - [`mcp`]: MCP clients (raw JSON-RPC and rmcp) and an in-process MCP server;
//! - [`upstream`], [`mcp_upstream`]: loopback HTTP and MCP servers the plugins call;
//!   [`a2a_peer`]: an A2A agent written with the official A2A SDK, for the same;
//! - [`postgres`], [`registry`], [`browser`]: a real PostgreSQL, OCI registry and Chromium;
//! - [`load`]: the load benches' server processes and MCP clients.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use gatehouse_host::config::PublisherConfig;
use gatehouse_host::config::{Glob, PolicyBinding, PolicyDefault, Tenants, ToolGrant};
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_host::{Host, HostConfig, ToolCallEnvelope, ToolResultEnvelope};

pub mod a2a_peer;
pub mod admin;
pub mod agent;
pub mod browser;
pub mod cli;
pub mod gateway;
pub mod host;
pub mod load;
pub mod mcp;
pub mod mcp_upstream;
pub mod oauth;
pub mod postgres;
pub mod registry;
pub mod relay;
pub mod state;
pub mod stdio;
pub mod upstream;

/// The `gatehouse` binary's allocator (see `host/src/main.rs`), so the gateways the tests and
/// benches start as child processes of their own binary run as the shipped one does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A component built from source, and its manifest file.
#[derive(Debug, Clone, Copy)]
pub struct Artifact {
    /// Package name.
    pub name: &'static str,
    /// Path of the unsigned `.wasm` component.
    pub wasm: &'static str,
    /// Path of its `manifest.toml`.
    pub manifest: &'static str,
    /// Why it was not built (a JavaScript or Python toolchain not installed, or a failed
    /// build), for the tests that need it to say.
    pub missing: Option<&'static str>,
}

/// The components, named after their packages.
pub mod artifacts {
    use super::Artifact;
    include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
}

impl Artifact {
    /// The raw component bytes.
    ///
    /// # Panics
    /// If it was not built, with the reason (and how to install a missing toolchain).
    pub fn bytes(&self) -> Vec<u8> {
        if let Some(why) = self.missing {
            panic!("{why}");
        }
        std::fs::read(self.wasm).unwrap_or_else(|e| panic!("{}: {e}", self.wasm))
    }

    /// The parsed manifest.
    pub fn manifest(&self) -> Manifest {
        Manifest::from_file(self.manifest.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", self.manifest))
    }

    /// The component with its manifest embedded, signed by [`publisher`].
    pub fn signed(&self) -> Vec<u8> {
        self.signed_by(publisher())
    }

    /// The component with its manifest embedded, signed by [`publisher`], as version
    /// `version` (a hot swap's new or old version).
    pub fn signed_as_version(&self, version: &str) -> Vec<u8> {
        let mut manifest = self.manifest();
        match &mut manifest {
            Manifest::Adapter(adapter) => adapter.version = version.to_owned(),
            Manifest::Policy(policy) => policy.version = version.to_owned(),
        }
        gatehouse_host::plugin::pack(&self.bytes(), &manifest, publisher())
            .expect("a built component packs")
    }

    /// The component with its manifest embedded, signed by `key`.
    pub fn signed_by(&self, key: &SigningKey) -> Vec<u8> {
        gatehouse_host::plugin::pack(&self.bytes(), &self.manifest(), key)
            .expect("a built component packs")
    }
}

/// The test publisher: one key per test process.
pub fn publisher() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::generate("test-publisher").expect("randomness"))
}

/// This test process's own directory, `<temp>/gatehouse-tests/<pid>`, for what lives as long
/// as the process (state stores, the token file, a compile cache). A static is never dropped,
/// so a `TempDir` held in one cannot remove itself when the process ends (one here once left a
/// gigabyte or more behind per run); instead each process removes the directories of processes
/// that have ended.
pub fn process_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::env::temp_dir().join("gatehouse-tests");
        remove_ended(&root);
        let dir = root.join(std::process::id().to_string());
        // Left by an ended process whose id this one reuses.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    })
}

/// A fresh state store file for one host, in [`process_dir`].
pub fn store_path() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    process_dir().join(format!("store-{n}.db"))
}

/// Removes the directories under `root` named for processes that no longer run (where
/// `/proc` says which do; elsewhere, none).
fn remove_ended(root: &Path) {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let pid = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok());
        if pid.is_some_and(|pid| !proc.join(pid.to_string()).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A number no other call of this process returned.
pub fn unique() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An operator config trusting [`publisher`] for adapters matching `adapters` and policies
/// matching `policies`, with the compile cache off, a fresh state store, and budgets small
/// enough that hostile plugins are stopped quickly. Every tool is visible to every tenant and, with no policy
/// bound, calls are allowed (`policy_default = "allow"`), so tests of other gates need no
/// policy; pipeline tests set both explicitly.
pub fn config(adapters: &[&str], policies: &[&str]) -> HostConfig {
    let mut config = HostConfig::default();
    config.cache.enabled = false;
    config.store.path = Some(store_path());
    config.sandbox.fuel = 200_000_000;
    config.sandbox.timeout_ms = 2_000;
    config.sandbox.memory_mib = 32;
    config.sandbox.max_output_kib = 256;
    config.sandbox.max_concurrent_calls = 16;
    config
        .trust
        .publishers
        .push(trust(publisher(), adapters, policies));
    config.pipeline.policy_default = PolicyDefault::Allow;
    config.pipeline.tools.push(ToolGrant {
        tools: glob("*"),
        tenants: Tenants::all(),
        arg_constraints: Default::default(),
    });
    config
}

/// Calls `gatehouse.echo.echo` with `message`, as tenant `default` (the call most tests use to
/// show a host still serves).
pub async fn echo(host: &Host, message: &str) -> ToolResultEnvelope {
    host.call(ToolCallEnvelope::new(
        "default",
        "gatehouse.echo.echo",
        serde_json::json!({ "message": message }),
    ))
    .await
}

/// The audit entries of call `tool_call_id`, waiting up to 5 s for one: a call that is not
/// write-class may be recorded just after it is delivered.
pub async fn audit_entries(host: &Host, tool_call_id: &str) -> Vec<gatehouse_store::AuditEntry> {
    for _ in 0..100 {
        let entries = host
            .audit(gatehouse_store::AuditQuery {
                tool_call_id: Some(tool_call_id.to_owned()),
                ..Default::default()
            })
            .await
            .expect("the audit log reads");
        if !entries.is_empty() {
            return entries;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{tool_call_id} is not in the audit log");
}

/// The full audit record (`call`, `action`, `result`) of call `tool_call_id`, waiting for it
/// as [`audit_entries`] does.
pub async fn audit_record(host: &Host, tool_call_id: &str) -> serde_json::Value {
    audit_entries(host, tool_call_id).await[0].expanded()["record"].take()
}

/// The credential the egress tests bind to their upstreams.
pub const TOKEN: &str = "e2e-secret-token-7f3a";

/// A file holding [`TOKEN`] for the whole test process, in [`process_dir`] (the path, as a
/// string for configs).
pub fn token_file() -> String {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let file = process_dir().join("token");
        std::fs::write(&file, TOKEN).expect("the token file is writable");
        file
    })
    .display()
    .to_string()
}

/// A glob from a literal the test wrote.
pub fn glob(text: &str) -> Glob {
    Glob::new(text).unwrap_or_else(|e| panic!("{e}"))
}

/// A grant of `tools` (a glob) to `tenants`, with no argument constraints.
pub fn grant(tools: &str, tenants: &[&str]) -> ToolGrant {
    ToolGrant {
        tools: glob(tools),
        tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
        arg_constraints: Default::default(),
    }
}

/// A binding of policy `module` to `tools` (a glob), for every tenant, at `order`.
pub fn bind(module: &str, tools: &str, order: i32, config: serde_json::Value) -> PolicyBinding {
    PolicyBinding {
        module: module.to_owned(),
        tenants: Tenants::all(),
        tools: vec![glob(tools)],
        order,
        config,
        mode: gatehouse_host::config::BindingMode::Enforce,
    }
}

/// A `[[trust.publisher]]` entry for `key`.
pub fn trust(key: &SigningKey, adapters: &[&str], policies: &[&str]) -> PublisherConfig {
    PublisherConfig {
        key_id: key.key_id.clone(),
        public_key: key.public_key().to_base64(),
        adapters: adapters.iter().map(|s| glob(s)).collect(),
        policies: policies.iter().map(|s| glob(s)).collect(),
    }
}

/// The value after `name` on the command line (a bench's `-- --seconds 3`).
pub fn flag(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

/// The first line `child` writes to its piped standard output (taken), or an empty string
/// if none comes within `within`: a server's "ready" line.
pub fn first_line(child: &mut std::process::Child, within: std::time::Duration) -> String {
    use std::io::BufRead as _;
    let stdout = child.stdout.take().expect("standard output is piped");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    receiver.recv_timeout(within).unwrap_or_default()
}

/// A loopback port nothing listens on now, for a server a test starts on it.
///
/// It is taken below Linux's ephemeral range (32768 and up), in turn from a start drawn per
/// process, and checked bindable. A port the kernel hands out for `:0` could be handed out
/// again, to another test's `free_port` or to an outgoing connection's source port, before
/// the server binds it; CI saw "Address already in use" that way. Here no outgoing connection
/// takes one, and no other call of this process gets it until the range wraps.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7_919) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port =
            u16::try_from(LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN).expect("below 32000");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOW}-{}", LOW + SPAN - 1)
}

/// Waits until something accepts connections on loopback `port`, at most 30 s; whether it did.
pub async fn listening(port: u16) -> bool {
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// One HTTP/1.1 request to loopback port `port`, with `headers` (and `Host`, unless they set
/// it): the status, headers and body.
pub async fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<bytes::Bytes>,
) -> (u16, hyper::HeaderMap, bytes::Bytes) {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::builder().method(method).uri(path);
    if !headers.iter().any(|(name, _)| *name == "host") {
        request = request.header("host", format!("127.0.0.1:{port}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(
            request
                .body(http_body_util::Full::new(body.into()))
                .unwrap(),
        )
        .await
        .unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, body)
}

/// Awaits every task, in order: their results.
///
/// # Panics
/// If a task panicked.
pub async fn join_all<T: Send + 'static>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        out.push(task.await.expect("the task does not panic"));
    }
    out
}

/// GitHub's published OpenAPI description of api.github.com (`@octokit/openapi`, pinned in
/// `tests/openapi/package.json`), as installed by `build-support/toolchains`.
///
/// # Panics
/// If it is not installed, saying how to install it.
pub fn github_openapi() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("openapi/node_modules/@octokit/openapi/generated/api.github.com.json");
    assert!(
        path.exists(),
        "{} is missing: run build-support/toolchains (it installs the pinned @octokit/openapi \
         into tests/openapi/node_modules; needs Node.js 20+ with npm)",
        path.display()
    );
    path
}
