//! Running the `gatehouse` command line from a test, one way per need:
//!
//! 1. in this process, from a plain `#[test]`: [`gatehouse`];
//! 2. in this process, from an async test: [`gatehouse_async`] (the command line starts its own
//!    runtime, so it runs on a blocking thread, off the test's);
//! 3. in a child process, when the test needs a real process (its stderr, its environment, its
//!    exit code after a refusal): [`gatehouse_output`], or [`gatehouse_child`] for the
//!    [`Command`] itself (`crate::gateway` starts `gatehouse serve` with it);
//! 4. serving in this process until the test process ends, reading what it prints:
//!    [`serve_in_process`].
//!
//! Each returns the exit code and what the command wrote to stdout (a child also its stderr).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Runs the command line in this process with `args` (without the program name): the exit code
/// and stdout. Not from an async test: use [`gatehouse_async`] there.
pub fn gatehouse<S: AsRef<str>>(args: &[S]) -> (u8, String) {
    relaunch_as_child();
    let args = std::iter::once("gatehouse").chain(args.iter().map(AsRef::as_ref));
    let mut out = Vec::new();
    let code = gatehouse_cli::run(args, &mut out);
    (code, String::from_utf8(out).expect("utf-8 output"))
}

/// [`gatehouse`] from an async test: on a blocking thread, since the command line starts its
/// own runtime.
pub async fn gatehouse_async<S: AsRef<str>>(args: &[S]) -> (u8, String) {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    tokio::task::spawn_blocking(move || gatehouse(&args))
        .await
        .expect("the command line does not panic")
}

/// A path as a command-line argument.
///
/// # Panics
/// If the path is not UTF-8 (the tests' temporary paths are).
pub fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

/// The environment variable that carries a child `gatehouse` process's arguments (JSON).
const CHILD_ARGS: &str = "GATEHOUSE_E2E_CHILD";

/// The child half of [`gatehouse_child`]: when this test process was started as a child, runs
/// the `gatehouse` binary's entry point (logging included) with the arguments it was given and
/// exits with its code; otherwise returns at once. The test binary calls it from one ignored
/// test named `gatehouse_child`.
pub fn run_gatehouse_child() {
    let Ok(args) = std::env::var(CHILD_ARGS) else {
        return;
    };
    let args: Vec<String> = serde_json::from_str(&args).expect("the child's arguments");
    relaunch_as_child();
    let code = gatehouse_cli::main_with(std::iter::once("gatehouse".to_owned()).chain(args));
    std::process::exit(i32::from(code));
}

/// The command line's own child processes (`pack` compiles in one) are `gatehouse` run the way
/// [`gatehouse_child`] runs it: this test binary is not `gatehouse`.
fn relaunch_as_child() {
    gatehouse_cli::relaunch_with(|args| gatehouse_child(&serde_json::json!(args)));
}

/// A command that runs `gatehouse` with `args` in a child process: this test binary again,
/// running only its `gatehouse_child` test (see [`run_gatehouse_child`]). A real process, so
/// tests can kill it (SIGKILL, SIGTERM) and start another on the same state.
pub fn gatehouse_child(args: &serde_json::Value) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    command
        .args([
            "gatehouse_child",
            "--exact",
            "--include-ignored",
            "--test-threads",
            "1",
            // The binary's own `eprintln!`s (its error messages) go to the real stderr, not to
            // the test harness's capture.
            "--nocapture",
        ])
        .env(CHILD_ARGS, args.to_string());
    command
}

/// Runs `gatehouse` with `args` in a child process with `env` set, to its end: the exit code,
/// and what it wrote to stdout (without the test harness's own lines before it) then stderr.
///
/// # Panics
/// If the process cannot start or was killed by a signal.
pub fn gatehouse_output<S: AsRef<str>>(args: &[S], env: &[(&str, &str)]) -> (i32, String) {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let mut command = gatehouse_child(&serde_json::json!(args));
    command.envs(env.iter().copied());
    child_output(command)
}

/// Runs `command` (from [`gatehouse_child`], set up as the test needs: its directory, its
/// environment) to its end: the exit code, and what it wrote to stdout (without the test
/// harness's own lines before it) then stderr.
///
/// # Panics
/// If the process cannot start or was killed by a signal.
pub fn child_output(mut command: Command) -> (i32, String) {
    let output = command.output().expect("the child process starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stdout = stdout
        .split_once("test gatehouse_child ... ")
        .map_or(&*stdout, |(_, own)| own);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let code = output
        .status
        .code()
        .unwrap_or_else(|| panic!("gatehouse {command:?} was killed: {stderr}"));
    (code, format!("{stdout}{stderr}"))
}

/// Collects what the command line writes, for a test reading it from another thread.
struct Lines(std::sync::mpsc::Sender<String>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts `gatehouse serve` with `args` (after `serve`) on a thread of this process, where it
/// serves until the test process ends, and reads what it prints until it serves (at most two
/// minutes): the MCP endpoint's URL, and the output.
///
/// # Panics
/// If it does not say it serves in time, or names no loopback endpoint.
pub fn serve_in_process(args: &[&str]) -> (String, String) {
    let args: Vec<String> = ["gatehouse", "serve"]
        .iter()
        .chain(args)
        .map(|a| (*a).to_owned())
        .collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || gatehouse_cli::run(args, &mut Lines(tx)));
    let mut output = String::new();
    while !output.contains("Ctrl-C stops the gateway.") {
        let chunk = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("serve did not start ({e}); output so far:\n{output}"));
        output.push_str(&chunk);
    }
    let url = output
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:") && w.ends_with("/mcp"))
        .unwrap_or_else(|| panic!("no endpoint in:\n{output}"))
        .to_owned();
    (url, output)
}
