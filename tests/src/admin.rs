//! A governed gateway with its admin API, for the tests of the admin API and of the console
//! that runs on it:
//!
//! 1. [`AdminGateway::start`] writes a config (echo and the ledger served, the policy probe
//!    bound, `gatehouse.redact` installed, approvers allowed to reveal sensitive arguments), an
//!    MCP key for the agent and one admin token per role ([`APPROVER`], [`AUDITOR`], [`OPERATOR`], and [`SELF_APPROVER`], the agent's own),
//!    and starts `gatehouse serve` on it ([`crate::gateway`]);
//! 2. the agent calls over MCP ([`AdminGateway::call`]), people use the admin API
//!    ([`AdminGateway::admin`], [`request`]) and `gatehouse admin` ([`AdminGateway::cli`]).

use std::path::PathBuf;

use bytes::Bytes;
use gatehouse_host::HostConfig;
use gatehouse_host::config::PolicyDefault;
use serde_json::Value;

use crate::artifacts::{ECHO, LEDGER, POLICY_PROBE, REDACT};
use crate::gateway::{Gateway, Serve};

/// The agent's MCP API key (tenant `default`, principal `agent:bot`).
pub const AGENT_KEY: &str = "agent-key-0b7e41";
/// The admin token of `usr_ops_ana`, an approver.
pub const APPROVER: &str = "approver-token-9c2d";
/// The admin token of `usr_audit`, an auditor.
pub const AUDITOR: &str = "auditor-token-51fa";
/// The admin token of `usr_ops_olaf`, an operator.
pub const OPERATOR: &str = "operator-token-77e3";
/// An approver token whose principal is the calling agent itself.
pub const SELF_APPROVER: &str = "self-approver-token-3a90";

/// A running `gatehouse serve` process with its admin listener, its MCP and admin ports, and
/// the directory holding its config (`gatehouse.toml`), token files (`PRINCIPAL.token`),
/// plugins and log (`stderr.log`); killed when dropped.
#[derive(Debug)]
pub struct AdminGateway {
    gateway: Gateway,
    /// The MCP port.
    pub mcp: u16,
    /// The admin API's port.
    pub admin: u16,
    dir: tempfile::TempDir,
    /// The SQLite store file.
    pub store: PathBuf,
}

impl AdminGateway {
    /// Serves echo and the ledger, with the policy probe (as `probe_version`) bound to `tools`
    /// with `probe_config` (and `gatehouse.redact` installed, bound only if `tweak` binds it);
    /// an MCP key for tenant `default` (principal `agent:bot`) and four admin tokens; `extra`
    /// is appended to the config.
    pub async fn start(tools: &str, probe_config: Value, probe_version: &str, extra: &str) -> Self {
        Self::start_with(tools, probe_config, probe_version, extra, |_| {}).await
    }

    /// [`AdminGateway::start`], with `tweak` applied to the host config first.
    pub async fn start_with(
        tools: &str,
        probe_config: Value,
        probe_version: &str,
        extra: &str,
        tweak: impl FnOnce(&mut HostConfig),
    ) -> Self {
        Self::start_logging(tools, probe_config, probe_version, extra, tweak, "warn").await
    }

    /// [`AdminGateway::start_with`], logging at `log` (`RUST_LOG`) to `stderr.log`.
    pub async fn start_logging(
        tools: &str,
        probe_config: Value,
        probe_version: &str,
        extra: &str,
        tweak: impl FnOnce(&mut HostConfig),
        log: &str,
    ) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("the gateway's directory is writable");
            path.display().to_string()
        };
        let mut host: HostConfig =
            crate::config(&["gatehouse.*", "test.*"], &["test.*", "gatehouse.*"]);
        host.pipeline.policy_default = PolicyDefault::Allow;
        host.pipeline
            .policies
            .push(crate::bind("test.policy-probe", tools, 0, probe_config));
        tweak(&mut host);
        let (mcp, admin) = (crate::free_port(), crate::free_port());
        let token = |principal: &str, roles: &str, value: &str| {
            format!(
                "[[admin.token]]\nprincipal = \"{principal}\"\nroles = {roles}\nfile = {:?}\n\n",
                file(&format!("{principal}.token"), value.as_bytes())
            )
        };
        let text = format!(
            "{}\n[mcp]\nlisten = \"127.0.0.1:{mcp}\"\n\n[[mcp.api_key]]\ntenant = \"default\"\nprincipal = \"agent:bot\"\nfile = {:?}\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\nreveal_sensitive = [\"approver\"]\n\n{}{}{}{}{extra}",
            toml::to_string(&host).expect("the host config serializes"),
            file("agent.key", AGENT_KEY.as_bytes()),
            token("usr_ops_ana", r#"["approver"]"#, APPROVER),
            token("usr_audit", r#"["auditor"]"#, AUDITOR),
            token("usr_ops_olaf", r#"["operator"]"#, OPERATOR),
            token("agent:bot", r#"["approver"]"#, SELF_APPROVER),
        );
        let gateway = Serve::config(file("gatehouse.toml", text.as_bytes()))
            .adapter(file("echo.wasm", &ECHO.signed()))
            .adapter(file("ledger.wasm", &LEDGER.signed()))
            .policy(file(
                "probe.wasm",
                &POLICY_PROBE.signed_as_version(probe_version),
            ))
            .policy(file("redact.wasm", &REDACT.signed()))
            .log(dir.path().join("stderr.log"))
            .env("RUST_LOG", log)
            .wait_for(admin)
            .wait_for(mcp)
            .start()
            .await;
        Self {
            gateway,
            mcp,
            admin,
            dir,
            store: host
                .store
                .path
                .clone()
                .expect("the test config names a store file"),
        }
    }

    /// The audit entry (as the admin API returns it, its record expanded) of the MCP call that
    /// returned `result`, read as the auditor: waits for a queued entry (a read-only call's is
    /// written after its result is delivered), at most five seconds.
    pub async fn audit_entry(&self, result: &Value) -> Value {
        let id = crate::mcp::record(result)["tool_call_id"]
            .as_str()
            .expect("the result names its call")
            .to_owned();
        for _ in 0..50 {
            let (status, body) = self
                .admin(
                    "GET",
                    &format!("/v1/audit?tool_call_id={id}"),
                    Some(AUDITOR),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{body}");
            if let Some(entry) = body["entries"].as_array().and_then(|e| e.first()) {
                return entry.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("call {id} never reached the audit log");
    }

    /// What it has logged so far (`stderr.log`).
    pub fn log(&self) -> String {
        self.gateway.log()
    }

    /// A file in its directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Kills the process and starts it again with the same config, files and store; its
    /// standard output goes to `stdout_file` in its directory.
    pub async fn restart(&mut self, stdout_file: &str) {
        let stdout = self.path(stdout_file);
        self.gateway.restart(&stdout).await;
    }

    /// The admin API's URL, for `gatehouse admin --server`.
    pub fn server(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin)
    }

    /// The MCP endpoint's URL.
    pub fn mcp_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.mcp)
    }

    /// One admin API request with `token` (or none): the status and the JSON (or text) body.
    pub async fn admin(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Bytes>,
    ) -> (u16, Value) {
        let (status, bytes) = request(self.admin, method, path, token, body).await;
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    /// `tools/call` over MCP as the agent, with `meta`: the JSON-RPC result.
    pub async fn call(&self, tool: &str, args: Value, meta: Value) -> Value {
        let bearer = format!("Bearer {AGENT_KEY}");
        crate::mcp::call(
            self.mcp,
            &[("authorization", bearer.as_str())],
            tool,
            args,
            meta,
        )
        .await
    }

    /// Runs `gatehouse admin ARGS` against it with the token in the file `token_file` of its
    /// directory (`usr_ops_ana.token`): the exit code and stdout.
    pub async fn cli(&self, token_file: &str, args: &[&str]) -> (u8, String) {
        let (server, token) = (self.server(), self.path(token_file));
        let mut all = vec!["admin"];
        all.extend_from_slice(args);
        all.extend(["--server", &server, "--token-file", crate::cli::s(&token)]);
        crate::cli::gatehouse_async(&all).await
    }
}

/// One request to the admin API on loopback port `port`, with `token` (or none) as the bearer
/// token: the status and the body.
pub async fn request(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Bytes>,
) -> (u16, Bytes) {
    let bearer = token.map(|token| format!("Bearer {token}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|bearer| ("authorization", bearer.as_str()))
        .collect();
    let (status, _, body) =
        crate::http(port, method, path, &headers, body.unwrap_or_default()).await;
    (status, body)
}
