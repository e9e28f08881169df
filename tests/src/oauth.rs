//! The real parts of the per-user OAuth tests (issue 60): a certified OpenID provider on
//! loopback (`oidc-provider` from npm, `tests/clients/oidc_provider.mjs`) and an MCP server
//! written with the official Python SDK that checks every bearer token against the provider's
//! keys and records who called (`tests/clients/oauth_upstream.py`). Their options and logs are
//! in those files' headers; what each saw is read from its log.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::agent::clients;

/// How long a server may take to start.
const START: Duration = Duration::from_secs(60);

/// A process that printed `listening URL` when ready; killed when dropped.
struct Listening {
    child: Child,
    url: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command`, its standard error into the file `stderr`, and waits for its ready line.
fn listening(mut command: Command, what: &str, stderr: &Path) -> Listening {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).expect("a file for its standard error"))
        .spawn()
        .unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let line = crate::first_line(&mut child, START);
    let Some(url) = line.trim().strip_prefix("listening ") else {
        let _ = child.kill();
        let _ = child.wait();
        let stderr = std::fs::read_to_string(stderr).unwrap_or_default();
        panic!("{what} did not start: {line}\n{stderr}");
    };
    Listening {
        url: url.to_owned(),
        child,
    }
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The authorization server.
pub struct Provider {
    server: Listening,
    log: PathBuf,
    /// Its command line after `--port`, to start it again ([`Provider::restart`]).
    args: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Provider {
    /// Starts `oidc-provider` with one client, `client_id`:`secret`, whose redirect URI is the
    /// loopback `/oauth/callback` on any port, and `options` (`--access-ttl`, ...).
    ///
    /// # Panics
    /// If Node's packages are not installed (`build-support/toolchains`), or it does not start.
    pub fn start(client_id: &str, secret: &str, options: &[&str]) -> Self {
        let script = clients().join("oidc_provider.mjs");
        assert!(
            clients().join("node_modules/oidc-provider").exists(),
            "oidc-provider is not installed: run build-support/toolchains"
        );
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("provider.log");
        let mut args = vec![
            script.display().to_string(),
            "--log".to_owned(),
            log.display().to_string(),
            "--client".to_owned(),
            format!("{client_id}:{secret}:http://127.0.0.1/oauth/callback"),
        ];
        args.extend(options.iter().map(|o| (*o).to_owned()));
        let server = Self::run(&args, "0", dir.path());
        Self {
            server,
            log,
            args,
            _dir: dir,
        }
    }

    fn run(args: &[String], port: &str, dir: &Path) -> Listening {
        let mut command = Command::new("node");
        command
            .arg(&args[0])
            .args(["--port", port])
            .args(&args[1..]);
        listening(command, "the OpenID provider", &dir.join("provider.err"))
    }

    /// Stops it and starts it again on the same port: it forgets every grant and token it
    /// issued (its store is in memory), and signs with new keys.
    pub fn restart(&mut self) {
        let port = self.server.url.rsplit(':').next().unwrap_or("0").to_owned();
        let _ = self.server.child.kill();
        let _ = self.server.child.wait();
        self.server = Self::run(&self.args, &port, self._dir.path());
    }

    /// Its issuer, `http://127.0.0.1:PORT`.
    pub fn issuer(&self) -> &str {
        &self.server.url
    }

    /// An access token for `resource` with subject `sub`, by token exchange (RFC 8693) with a
    /// subject token signed with the provider's `--exchange-trust-secret` `trust`, as client
    /// `client_id`:`secret`: what an operator's own import uses.
    ///
    /// # Panics
    /// If the provider does not give one.
    pub fn exchange(&self, client: (&str, &str), trust: &str, sub: &str, resource: &str) -> String {
        let script = r#"
import sys, time, jwt, requests
issuer, client, secret, trust, sub, resource = sys.argv[1:7]
meta = requests.get(issuer + "/.well-known/openid-configuration", timeout=10).json()
subject = jwt.encode({"sub": sub, "exp": int(time.time()) + 300}, trust, algorithm="HS256")
answer = requests.post(meta["token_endpoint"], auth=(client, secret), timeout=10, data={
    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
    "subject_token": subject,
    "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
    "resource": resource,
})
answer.raise_for_status()
print(answer.json()["access_token"])
"#;
        let output = Command::new(clients().join(".venv/bin/python"))
            .args([
                "-c",
                script,
                self.issuer(),
                client.0,
                client.1,
                trust,
                sub,
                resource,
            ])
            .output()
            .expect("python runs");
        assert!(
            output.status.success(),
            "token exchange failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// What it wrote to its standard error (for a failing test's message).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("provider.err")).unwrap_or_default()
    }

    /// What it logged: token issued, refresh, revocation, error.
    pub fn events(&self) -> Vec<Value> {
        log_lines(&self.log)
    }
}

/// The upstream MCP server that wants each user's own token.
pub struct Upstream {
    server: Listening,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Upstream {
    /// Starts it, trusting tokens of `issuer` issued for its own URL.
    ///
    /// # Panics
    /// If the Python SDK is not installed, or it does not start.
    pub fn start(issuer: &str) -> Self {
        let python = clients().join(".venv/bin/python");
        assert!(
            python.exists(),
            "the MCP Python SDK is not installed: run build-support/toolchains"
        );
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("upstream.log");
        let mut command = Command::new(python);
        command
            .arg(clients().join("oauth_upstream.py"))
            .args(["--port", "0", "--issuer", issuer, "--log"])
            .arg(&log);
        Self {
            server: listening(
                command,
                "the OAuth MCP upstream",
                &dir.path().join("upstream.err"),
            ),
            log,
            _dir: dir,
        }
    }

    /// Its MCP endpoint, `http://127.0.0.1:PORT/mcp` (the tokens' resource).
    pub fn url(&self) -> &str {
        &self.server.url
    }

    /// The tool calls that reached it: `(tool, sub)`, in order.
    pub fn calls(&self) -> Vec<(String, String)> {
        log_lines(&self.log)
            .iter()
            .filter(|e| e["event"] == "call")
            .map(|e| {
                (
                    e["tool"].as_str().unwrap_or_default().to_owned(),
                    e["sub"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Everything it logged.
    pub fn events(&self) -> Vec<Value> {
        log_lines(&self.log)
    }
}
