//! The official MCP SDKs' agent hosts (`tests/clients/agent.py`, `agent.mjs`) as child
//! processes: [`python`] and [`typescript`] start one against an endpoint, and the running
//! [`Agent`] hands the test each JSON line it prints ([`Agent::next`]).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// How long an agent may take to print its next line.
pub const LINE: Duration = Duration::from_secs(90);

/// `tests/clients`, where the agents and their pinned SDKs are.
pub fn clients() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// The Python SDK's agent calling `tool` with `args` at `url` as `token`, speaking `version`,
/// with `options` (see `agent.py --help`).
pub fn python(
    url: &str,
    version: &str,
    token: &str,
    tool: &str,
    args: &Value,
    options: &[&str],
) -> Agent {
    let python = clients().join(".venv/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is not installed: run build-support/toolchains"
    );
    let mut command = Command::new(python);
    command.arg(clients().join("agent.py"));
    Agent::start(command, url, version, token, tool, args, options)
}

/// The TypeScript SDKs' agent (`sdk` v1 or v2), as [`python`].
pub fn typescript(
    sdk: &str,
    url: &str,
    version: &str,
    token: &str,
    tool: &str,
    args: &Value,
    options: &[&str],
) -> Agent {
    assert!(
        clients()
            .join("node_modules/@modelcontextprotocol/client")
            .exists(),
        "the MCP TypeScript SDKs are not installed: run build-support/toolchains"
    );
    let mut command = Command::new("node");
    command
        .arg(clients().join("agent.mjs"))
        .args(["--sdk", sdk]);
    Agent::start(command, url, version, token, tool, args, options)
}

/// A running agent and what it printed so far; killed when dropped.
pub struct Agent {
    child: Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    seen: Vec<Value>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    fn start(
        mut command: Command,
        url: &str,
        version: &str,
        token: &str,
        tool: &str,
        args: &Value,
        options: &[&str],
    ) -> Self {
        command
            .arg(url)
            .arg(version)
            .arg(tool)
            .arg(args.to_string())
            .args(["--token", token])
            .args(options)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the client starts");
        // Its output is read by threads of its own: a line at a time for the test, stderr whole
        // for a failure's message.
        let (lines, receiver) = tokio::sync::mpsc::unbounded_channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut pipe, text) = (child.stderr.take().expect("piped"), Arc::clone(&stderr));
        std::thread::spawn(move || {
            let mut all = String::new();
            let _ = pipe.read_to_string(&mut all);
            text.lock().unwrap().push_str(&all);
        });
        Self {
            child,
            lines: receiver,
            stderr,
            seen: Vec::new(),
        }
    }

    /// The next line of `event`, skipping others.
    ///
    /// # Panics
    /// If the client ends first, or prints nothing more within [`LINE`], with all it printed.
    pub async fn next(&mut self, event: &str) -> Value {
        loop {
            let line = tokio::time::timeout(LINE, self.lines.recv()).await;
            match line {
                Ok(Some(line)) => {
                    let value: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|_| json!({ "event": "text", "text": line }));
                    self.seen.push(value.clone());
                    if value["event"] == event {
                        return value;
                    }
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    // The stderr thread ends with the process.
                    std::thread::sleep(Duration::from_millis(100));
                    panic!(
                        "the client printed no `{event}` line; it printed {:#?}\nstderr: {}",
                        self.seen,
                        self.stderr.lock().unwrap()
                    );
                }
            }
        }
    }

    /// Waits for the client's exit: its status.
    pub async fn exit(mut self) -> i32 {
        let deadline = std::time::Instant::now() + LINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("the client ran") {
                return status.code().unwrap_or(-1);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the client did not end; it printed {:#?}",
                self.seen
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The official A2A SDK's peer agent (`tests/clients/a2a_agent.py`) at the agent whose card is
/// under `base`, as `key` (none: without credentials), doing `action` (see its docs): the JSON
/// lines it printed. It resolves the card and makes its client from it each time, as a peer
/// agent does.
///
/// # Panics
/// If the SDK is not installed, or the agent fails without printing.
pub async fn a2a(base: &str, key: Option<&str>, action: &[&str]) -> Vec<Value> {
    let python = clients().join(".venv/bin/python");
    assert!(
        python.exists(),
        "the A2A Python SDK is not installed: run build-support/toolchains"
    );
    let mut command = tokio::process::Command::new(python);
    command.arg(clients().join("a2a_agent.py")).arg(base);
    if let Some(key) = key {
        command.args(["--key", key]);
    }
    let output = tokio::time::timeout(LINE, command.args(action).output())
        .await
        .expect("the A2A agent finishes in time")
        .expect("the A2A agent starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(
        output.status.success() && !lines.is_empty(),
        "a2a_agent.py {action:?}: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    lines
}
