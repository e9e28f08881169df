//! `gatehouse pack`'s look at the code, in a child process within bounds (issue 57, item 7).
//!
//! Packing compiles the component, to check that it implements its manifest's world and to ask
//! it which capability ids it handles ([`handles::examine`]). wasmtime bounds what a component
//! does when it runs (fuel, deadlines, memory), not Cranelift's compiling of it, and a component
//! can be made to take minutes and gigabytes to compile; wasmtime's authors advise compiling
//! untrusted code in a process of its own. So:
//! 1. the component is written to a temporary file, and `gatehouse` runs again as a child with
//!    the hidden command [`WORKER`] (the program itself, or what an embedder set with
//!    [`crate::relaunch_with`]), which examines it and writes what it found, as JSON, to a
//!    second file;
//! 2. the parent looks at the child every [`POLL`]: past the time bound, or with more resident
//!    memory than the memory bound (`VmRSS`, what it holds in RAM), the child is killed.
//!
//! Not `RLIMIT_DATA` in the child: it counts address space reserved and never touched (the
//! allocator's arenas, wasmtime's instance pool), a gigabyte before the first compile.
//!
//! A child killed for either bound is a refusal that names the bound and the variable that
//! raises it:
//!
//! | variable | bound | default |
//! |---|---|---|
//! | `GATEHOUSE_COMPILE_SECONDS` | wall-clock time of the child, seconds | 300 |
//! | `GATEHOUSE_COMPILE_MIB` | resident memory of the child, MiB | 2048 |
//!
//! The defaults are well above what real components take: a 19 MB Python component, compiled
//! and asked here (2 cores, busy), took 33 s and 475 MiB.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use gatehouse_host::plugin::handles;
use gatehouse_host::plugin::manifest::PluginKind;
use serde::{Deserialize, Serialize};

/// The hidden command the child runs: `gatehouse __examine --kind KIND COMPONENT OUT`.
pub(crate) const WORKER: &str = "__examine";

/// The variable of the time bound.
const SECONDS_VAR: &str = "GATEHOUSE_COMPILE_SECONDS";
/// The variable of the memory bound.
const MIB_VAR: &str = "GATEHOUSE_COMPILE_MIB";
/// Default time bound: nine times what the largest real component took (module docs).
const SECONDS: u64 = 300;
/// Default memory bound: four times what the largest real component took (module docs).
const MIB: u64 = 2048;
/// How often the parent looks at the child: a compile allocates far less than the memory
/// bound in this time.
const POLL: Duration = Duration::from_millis(20);

/// What the child found, as it writes it for the parent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Examined {
    /// The component implements its world; the ids its code handles, if it says.
    Handles(Option<Vec<String>>),
    /// Why it does not (it does not compile, or implements another world).
    Refused(String),
}

/// The world of the component the child examines, as its command line spells it.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Kind {
    /// World `adapter`.
    Adapter,
    /// World `policy`.
    Policy,
}

impl From<Kind> for PluginKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Adapter => Self::Adapter,
            Kind::Policy => Self::Policy,
        }
    }
}

/// The bounds of the child's time and memory.
pub(crate) struct Bounds {
    seconds: u64,
    mib: u64,
}

impl Bounds {
    /// The bounds the environment sets ([`SECONDS_VAR`], [`MIB_VAR`]), or the defaults.
    ///
    /// # Errors
    /// A message naming the variable, when it is not a whole number above 0.
    pub(crate) fn from_env() -> Result<Self, String> {
        let read = |var: &str, default: u64| match std::env::var(var) {
            Err(_) => Ok(default),
            Ok(text) => match text.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "{var} must be a whole number above 0, not `{text}` (unset, it is {default})"
                )),
            },
        };
        Ok(Self {
            seconds: read(SECONDS_VAR, SECONDS)?,
            mib: read(MIB_VAR, MIB)?,
        })
    }
}

/// [`handles::examine`] in a child process within `bounds`: the ids the code handles (or
/// `None`), or why the component is refused. `name` names the component in messages.
pub(crate) fn examine(
    component: &[u8],
    kind: PluginKind,
    name: &str,
    bounds: &Bounds,
) -> Result<Option<Vec<String>>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let (input, output, errors) = (
        dir.path().join("component.wasm"),
        dir.path().join("examined.json"),
        dir.path().join("stderr"),
    );
    std::fs::write(&input, component).map_err(|e| format!("{}: {e}", input.display()))?;
    let stderr =
        std::fs::File::create(&errors).map_err(|e| format!("{}: {e}", errors.display()))?;
    let args = [
        WORKER.to_owned(),
        "--kind".to_owned(),
        kind.to_string(),
        path_arg(&input)?,
        path_arg(&output)?,
    ];
    let mut child = crate::relaunch(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start `gatehouse {WORKER}` to compile {name}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(bounds.seconds);
    let limit = bounds.mib * 1024 * 1024;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| format!("waiting for the compile of {name}: {e}"))?
        {
            break status;
        }
        let over = if Instant::now() >= deadline {
            Some(format!(
                "compiling {name} took longer than {} s, and was stopped; a component this slow \
                 to compile is refused. If it is genuine, raise the bound: {SECONDS_VAR}=<seconds>",
                bounds.seconds
            ))
        } else {
            resident(child.id())
                .filter(|bytes| *bytes > limit)
                .map(|bytes| {
                    format!(
                        "compiling {name} took more than {} MiB of memory ({} MiB), and was \
                     stopped; a component this costly to compile is refused. If it is genuine, \
                     raise the bound: {MIB_VAR}=<MiB>",
                        bounds.mib,
                        bytes / (1024 * 1024)
                    )
                })
        };
        if let Some(refusal) = over {
            // Killed and reaped: nothing of it keeps running.
            let _ = child.kill();
            let _ = child.wait();
            return Err(refusal);
        }
        std::thread::sleep(POLL);
    };
    match std::fs::read(&output)
        .ok()
        .and_then(|json| serde_json::from_slice::<Examined>(&json).ok())
    {
        Some(Examined::Handles(handles)) => Ok(handles),
        Some(Examined::Refused(reason)) => Err(reason),
        None => {
            let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
            let said = stderr
                .lines()
                .rev()
                .find(|line| !line.trim().is_empty())
                .unwrap_or("nothing");
            Err(format!(
                "the compile of {name} failed ({status}; it said: {said})"
            ))
        }
    }
}

/// The resident memory of process `pid`, in bytes (`VmRSS` in `/proc/PID/status`), while it
/// runs.
fn resident(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

fn path_arg(path: &Path) -> Result<String, String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: the temporary path is not UTF-8", path.display()))
}

/// The child's side ([`WORKER`]): examines the component in `input`, and writes what it found
/// to `output`.
pub(crate) fn worker(kind: PluginKind, input: &Path, output: &Path) -> Result<u8, String> {
    let component = std::fs::read(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let examined = match handles::examine(&component, kind) {
        Ok(handles) => Examined::Handles(handles),
        Err(reason) => Examined::Refused(reason),
    };
    let json = serde_json::to_vec(&examined).expect("what was found serializes");
    std::fs::write(output, json).map_err(|e| format!("{}: {e}", output.display()))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_memory_of_a_running_process_is_read_and_of_no_process_none() {
        let bytes = resident(std::process::id()).expect("this process runs");
        assert!(bytes > 1024 * 1024, "{bytes} bytes");
        assert_eq!(bytes % 1024, 0, "read in KiB");
        assert_eq!(resident(u32::MAX), None);
    }
}
