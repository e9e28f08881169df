//! A peer agent on loopback, built with the official A2A SDK (`tests/clients/a2a_peer.py`):
//! "Room desk", the A2A agent the `gatehouse import a2a` tests put behind gatehouse. Its
//! skills and options are in that file's docstring. [`Peer::start`] runs it; what reached it is
//! read from its log ([`Peer::requests`], [`Peer::effects`], [`Peer::cancelled`]).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::agent::clients;

/// How long the peer may take to start.
const START: Duration = Duration::from_secs(60);

/// A running peer agent; killed when dropped.
pub struct Peer {
    child: Child,
    /// Its base URL, `http://127.0.0.1:PORT` (its card is at `/.well-known/agent-card.json`).
    pub url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    /// Starts the peer with `options` (`--sign-key`, `--extended-token`, `--gateway`, ...) on
    /// a free port, and waits until it listens.
    ///
    /// # Panics
    /// If the SDK is not installed, or the peer does not start within a minute.
    pub fn start(options: &[&str]) -> Self {
        let python = clients().join(".venv/bin/python");
        assert!(
            python.exists(),
            "the A2A Python SDK is not installed: run build-support/toolchains"
        );
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("peer.log");
        let mut child = Command::new(python)
            .arg(clients().join("a2a_peer.py"))
            .args(["--port", "0", "--log"])
            .arg(&log)
            .args(options)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the peer starts");
        let line = crate::first_line(&mut child, START);
        let Ok(ready) = serde_json::from_str::<Value>(&line) else {
            let _ = child.kill();
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            panic!("the peer did not start: {line}\n{stderr}");
        };
        let url = ready["url"].as_str().expect("it says its URL").to_owned();
        Self {
            child,
            url,
            log,
            _dir: dir,
        }
    }

    /// Every line of its log so far.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }

    /// The JSON-RPC requests of `method` it received, in order.
    pub fn requests(&self, method: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|line| line["method"] == method)
            .collect()
    }

    /// The bookings it made: `{"effect", "messageId", "text"}` each.
    pub fn effects(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|line| line.get("effect").is_some())
            .collect()
    }

    /// The ids of the tasks it cancelled.
    pub fn cancelled(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter_map(|line| line["cancelled"].as_str().map(str::to_owned))
            .collect()
    }

    /// Changes its card: the `echo` skill's description (`POST /test/drift`).
    pub fn drift(&self) {
        let address = self.url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(
            stream,
            "POST /test/drift HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    }
}
