//! `gatehouse serve` as a child process, as an operator runs it:
//!
//! 1. [`Serve`] says what to start: the config file, plugins, `--listen`, more arguments, the
//!    environment, where its stderr goes, and which ports to wait for;
//! 2. [`Serve::start`] starts it and waits until every port listens, failing with the process's
//!    log if it exits first or does not listen within 30 s ([`Serve::try_start`] returns that
//!    log instead, for tests of a refused start); [`Serve::exit`] is for a config it must
//!    refuse: it waits for the exit;
//! 3. the running [`Gateway`] answers on its port, reads its log, takes signals, restarts, and
//!    is killed (SIGKILL) when dropped, passed or not.
//!
//! [`write_config`] writes the config file most of them serve: a host config plus an `[mcp]`
//! table admitting anonymous callers; [`write_rest_config`] and [`rest_and_echo`] are the
//! gateway the operations tests run (`gatehouse.rest` writing to a loopback upstream, and echo).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gatehouse_host::HostConfig;
use serde_json::{Value, json};

use crate::artifacts::{ECHO, REST};
use crate::cli::gatehouse_child;
use crate::upstream::Upstream;

/// How long a gateway may take to listen on each of its ports.
const START: Duration = Duration::from_secs(30);
/// How often a waiting test looks again.
const POLL: Duration = Duration::from_millis(50);

/// What to start: `gatehouse serve` with its arguments, environment and ports.
#[derive(Debug, Clone)]
pub struct Serve {
    args: Vec<String>,
    env: Vec<(String, String)>,
    ports: Vec<u16>,
    log: Option<PathBuf>,
    stdout: Option<PathBuf>,
}

impl Serve {
    /// `gatehouse serve --config CONFIG`.
    pub fn config(config: impl AsRef<Path>) -> Self {
        Self::command(["serve", "--config", &config.as_ref().display().to_string()])
    }

    /// `gatehouse` with exactly `args` (`serve` first), for a config that names its own
    /// listeners: say which to wait for with [`Serve::wait_for`].
    pub fn command<I: IntoIterator<Item = S>, S: AsRef<str>>(args: I) -> Self {
        Self {
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            env: Vec::new(),
            ports: Vec::new(),
            log: None,
            stdout: None,
        }
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<str>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// `--adapter PATH` (a file, or an `oci://` reference).
    pub fn adapter(self, path: impl AsRef<Path>) -> Self {
        self.arg("--adapter")
            .arg(path.as_ref().display().to_string())
    }

    /// `--policy PATH`.
    pub fn policy(self, path: impl AsRef<Path>) -> Self {
        self.arg("--policy")
            .arg(path.as_ref().display().to_string())
    }

    /// `--listen 127.0.0.1:PORT` (the MCP listener), and waits for it.
    pub fn listen(self, port: u16) -> Self {
        self.arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .wait_for(port)
    }

    /// Waits for a loopback port the config names (the admin listener, or `[mcp] listen`).
    /// The first port waited for is [`Gateway::port`].
    pub fn wait_for(mut self, port: u16) -> Self {
        self.ports.push(port);
        self
    }

    /// Sets an environment variable of the process.
    pub fn env(mut self, name: &str, value: impl AsRef<str>) -> Self {
        self.env.push((name.to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Its stderr (its log) goes to this file; by default, to a file in a temporary directory
    /// the [`Gateway`] owns.
    pub fn log(mut self, path: impl AsRef<Path>) -> Self {
        self.log = Some(path.as_ref().to_owned());
        self
    }

    /// Its stdout goes to this file; by default, nowhere.
    pub fn stdout(mut self, path: impl AsRef<Path>) -> Self {
        self.stdout = Some(path.as_ref().to_owned());
        self
    }

    /// Starts it and waits until it listens on every port.
    ///
    /// # Panics
    /// If it exits first, or a port does not listen within 30 s, with its log.
    pub async fn start(self) -> Gateway {
        let args = self.args.clone();
        self.try_start()
            .await
            .unwrap_or_else(|log| panic!("gatehouse {args:?} did not start: {log}"))
    }

    /// [`Serve::start`], for a start that may be refused: `Err` with its log if it exits
    /// instead of listening, or does not listen within 30 s (it is killed then).
    pub async fn try_start(self) -> Result<Gateway, String> {
        let (log, logs) = match &self.log {
            Some(path) => (path.clone(), None),
            None => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                (dir.path().join("stderr.log"), Some(dir))
            }
        };
        let mut gateway = Gateway {
            child: spawn(&self, File::create(&log).expect("the log file")),
            serve: self,
            log,
            _logs: logs,
        };
        for port in gateway.serve.ports.clone() {
            let start = Instant::now();
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                if let Some(status) = gateway.child.try_wait().expect("the child's status") {
                    return Err(format!("exited ({status}): {}", gateway.log()));
                }
                if start.elapsed() > START {
                    return Err(format!(
                        "not listening on {port} after {START:?}: {}",
                        gateway.log()
                    ));
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(gateway)
    }

    /// Starts it for a config it must refuse, and waits (at most `within`) for it to exit by
    /// itself: its exit code and its log (stderr).
    ///
    /// # Panics
    /// If it is still running after `within` (it accepted the config; it is killed).
    pub fn exit(self, within: Duration) -> (Option<i32>, String) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = self
            .log
            .clone()
            .unwrap_or_else(|| dir.path().join("stderr.log"));
        let mut child = spawn(&self, File::create(&log).expect("the log file"));
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("the child's status") {
                break status;
            }
            if start.elapsed() > within {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "gatehouse {:?} still runs after {within:?}: it accepted the config: {}",
                    self.args,
                    read()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code(), read())
    }
}

fn spawn(serve: &Serve, log: File) -> Child {
    let stdout = match &serve.stdout {
        Some(path) => Stdio::from(File::create(path).expect("the stdout file")),
        None => Stdio::null(),
    };
    gatehouse_child(&json!(serve.args))
        .envs(serve.env.iter().map(|(k, v)| (k, v)))
        .stdout(stdout)
        .stderr(log)
        .spawn()
        .expect("the gateway process starts")
}

/// A running `gatehouse serve` process; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    serve: Serve,
    log: PathBuf,
    _logs: Option<tempfile::TempDir>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Gateway {
    /// The first port it was waited for on.
    ///
    /// # Panics
    /// If it was started without a port to wait for.
    pub fn port(&self) -> u16 {
        *self
            .serve
            .ports
            .first()
            .expect("the gateway was started with a port to wait for")
    }

    /// `http://127.0.0.1:PORT` of [`Gateway::port`].
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// Its log (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every JSON line of its log so far (`--log-format json`; other lines are skipped).
    pub fn json_logs(&self) -> Vec<Value> {
        self.log()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The lines of its log that are not JSON.
    pub fn non_json_lines(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| !line.trim().is_empty())
            .filter(|line| serde_json::from_str::<Value>(line).is_err())
            .map(str::to_owned)
            .collect()
    }

    /// Waits (at most `within`) until its log contains `text`.
    pub async fn logged(&self, text: &str, within: Duration) {
        let start = Instant::now();
        while !self.log().contains(text) {
            assert!(
                start.elapsed() < within,
                "no {text:?} in the log after {within:?}: {}",
                self.log()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits (at most `within`) for a JSON log line whose message contains `text`.
    pub async fn logged_message(&self, text: &str, within: Duration) -> Value {
        self.logged_where(
            |l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(text))
            },
            within,
        )
        .await
    }

    /// Waits (at most `within`) for a JSON log line `matches` accepts.
    pub async fn logged_where(&self, matches: impl Fn(&Value) -> bool, within: Duration) -> Value {
        let start = Instant::now();
        loop {
            if let Some(line) = self.json_logs().into_iter().find(|l| matches(l)) {
                return line;
            }
            assert!(
                start.elapsed() < within,
                "no such log line after {within:?} in {:#?}",
                self.json_logs()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends `signal` (`TERM`, `INT`, `HUP`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal}");
    }

    /// Waits (at most `within`) for the process to exit: its status.
    pub async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                return status;
            }
            assert!(
                start.elapsed() < within,
                "still running after {within:?}: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, and waits (at most 30 s) for a successful exit: queued audit records are
    /// written first.
    pub async fn stop(mut self) {
        self.signal("TERM");
        let status = self.exit_status(START).await;
        assert!(status.success(), "{status}: {}", self.log());
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the process and starts the same command again, on the same config, files and
    /// ports, its stdout into `stdout` (its log goes on in the same file); waits until it
    /// listens.
    pub async fn restart(&mut self, stdout: &Path) {
        self.kill();
        self.serve.stdout = Some(stdout.to_owned());
        let log = File::options()
            .append(true)
            .open(&self.log)
            .expect("the log file");
        self.child = spawn(&self.serve, log);
        for &port in &self.serve.ports {
            assert!(
                crate::listening(port).await,
                "the restarted gateway did not start listening on {port}: {}",
                self.log()
            );
        }
    }
}

/// Writes the config file of a gateway serving `host`'s tables plus an `[mcp]` table admitting
/// callers without a key as tenant `default`, with `mcp` (more keys of `[mcp]`, then tables)
/// An `[[mcp.api_key]]` entry for `tenant` and `principal`, its key `value` written to a file
/// in `dir`: the entry's TOML, to put in a config.
///
/// # Panics
/// If the file cannot be written.
pub fn api_key(dir: &Path, tenant: &str, principal: &str, value: &str) -> String {
    let path = dir.join(format!("{principal}.key"));
    std::fs::write(&path, value).expect("the test's directory is writable");
    format!(
        "[[mcp.api_key]]\ntenant = \"{tenant}\"\nprincipal = \"{principal}\"\nfile = {:?}\n\n",
        path.display().to_string()
    )
}

/// appended.
pub fn write_config(path: &Path, host: &HostConfig, mcp: &str) {
    let text = format!(
        "{}\n[mcp]\nanonymous_tenant = \"default\"\n{mcp}",
        toml::to_string(host).expect("the host config serializes")
    );
    std::fs::write(path, text).expect("the config file is writable");
}

/// Writes [`write_config`]'s file for [`crate::host::rest_config`]`(upstream)` (the rest adapter
/// granted the upstream), tools matching `tools` visible to callers without a key, and `mcp`
/// appended to `[mcp]`.
pub fn write_rest_config(path: &Path, upstream: &Upstream, tools: &str, mcp: &str) {
    let mut host = crate::host::rest_config(upstream);
    host.pipeline.tools = vec![crate::grant(tools, &["default"])];
    write_config(path, &host, mcp);
}

/// `gatehouse serve --config CONFIG` with `gatehouse.rest` and `gatehouse.echo` (signed into
/// `dir`), on a free port, `--log-format json` at `RUST_LOG=info`: add arguments and
/// variables, then [`Serve::start`] it.
pub fn rest_and_echo(dir: &Path, config: &Path) -> Serve {
    let (rest, echo) = (dir.join("rest.wasm"), dir.join("echo.wasm"));
    std::fs::write(&rest, REST.signed()).expect("the test's directory is writable");
    std::fs::write(&echo, ECHO.signed()).expect("the test's directory is writable");
    Serve::config(config)
        .adapter(&rest)
        .adapter(&echo)
        .listen(crate::free_port())
        .arg("--log-format")
        .arg("json")
        .env("RUST_LOG", "info")
}
