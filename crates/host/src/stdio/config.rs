//! The grant: the operator's `[stdio]` table. No `[[stdio.server]]` entry: no process is ever
//! started. Each entry names an adapter whose signed manifest has a `[stdio]` table
//! ([`super::spec`]) and grants it a subset of what that table asks for.
//!
//! ```toml
//! [stdio]
//! # packages_dir = "/srv/gatehouse/stdio"   # default: /var/lib/gatehouse/stdio for a root
//! #                                          # gateway, else $XDG_DATA_HOME/gatehouse/stdio
//! # bwrap = "/usr/bin/bwrap"                     # default: `bwrap` on PATH
//!
//! [[stdio.server]]
//! adapter = "acme.fs"                # its tools call `stdio://acme.fs`
//! dirs = ["/srv/docs:rw"]            # default: none; each within what the manifest asks for
//! env = { LOG_LEVEL = { value = "info" }, API_TOKEN = { env = "ACME_TOKEN" } }
//! start = "first_use"                # or "at_start"
//! idle_stop_seconds = 300            # 0: never stopped for idleness
//! max_in_flight = 16                 # calls sent to a process and not yet answered
//! pool = 1                           # processes at most; more start only while all are busy
//! isolate = "shared"                 # or "tenant": a process serves one tenant's calls only
//! max_message_kib = 4096             # a longer stdout message restarts the process
//! memory_mib = 2048                  # address space and file size per process (RLIMIT_AS,
//!                                    # RLIMIT_FSIZE); /tmp and /dev/shm get half each
//! cpu_seconds = 600                  # CPU time per process (RLIMIT_CPU)
//! processes = 64                     # processes and threads of its user (RLIMIT_NPROC)
//! open_files = 256                   # per process (RLIMIT_NOFILE)
//! # uid = 61000                      # the user it runs as when the gateway is root
//! # bare = true                      # run without the sandbox where it cannot be made
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::spec::DirGrant;

/// The `[stdio]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    /// Where packages pinned by `[stdio.package]` are installed (by `gatehouse import mcp
    /// --stdio`) and checked. Default: `$XDG_DATA_HOME/gatehouse/stdio`, else
    /// `~/.local/share/gatehouse/stdio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages_dir: Option<PathBuf>,
    /// The bubblewrap program. Default: `bwrap`, found on `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<PathBuf>,
    /// The servers the gateway may start. Default: none.
    #[serde(default, rename = "server", skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<ServerConfig>,
}

/// When a server's process is started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// At the first call of one of its tools (the default).
    #[default]
    FirstUse,
    /// When the adapter is loaded; a server that fails to start then fails the load.
    AtStart,
}

/// Which calls one process of a server may serve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolate {
    /// Every tenant's (the default): one process serves the calls of every tenant, so it
    /// sees every tenant's arguments and may keep them (in memory, in its `/tmp`), and a
    /// request it sends through its egress proxy while serving calls of more than one
    /// tenant is refused, since no one call can be charged with it.
    #[default]
    Shared,
    /// One tenant's: each process of the pool is started for one tenant and serves no
    /// other's calls; another tenant's call takes an empty place of the pool, or replaces a
    /// process of another tenant that holds no call, or waits for one within its deadline.
    Tenant,
}

/// One value of the server's environment: a fixed value, or a secret from the gateway's
/// environment or a file (read at load, never shown to an agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvBinding {
    /// A fixed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The gateway's environment variable holding the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// A file holding the value (trimmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

/// One `[[stdio.server]]` entry. Every limit's default is written on its field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The adapter whose manifest's `[stdio]` table says what runs; its grant names
    /// `stdio://<adapter>`.
    pub adapter: String,
    /// Directories the server sees, each within one its manifest asks for, no wider. Default:
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<DirGrant>,
    /// The value of each environment variable its manifest names; a name left unbound is not
    /// set. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, EnvBinding>,
    /// When the process starts. Default: at first use.
    #[serde(default)]
    pub start: Start,
    /// Seconds without a call after which the process is stopped (started again at the next
    /// call); 0: never. Default: 300.
    #[serde(default = "default_idle")]
    pub idle_stop_seconds: u64,
    /// Calls sent to one process and not yet answered, at most; a call past it waits for a
    /// place within its deadline. Default: 16.
    #[serde(default = "default_in_flight")]
    pub max_in_flight: u32,
    /// Processes of the server at most, 1 to [`MAX_POOL`]: a call goes to a process holding
    /// no call; a further one is started only while every running one holds calls, so a
    /// server called by one caller at a time keeps one process. Each has its own sandbox,
    /// limits and MCP session. Default: 1.
    #[serde(default = "default_pool")]
    pub pool: u32,
    /// Whose calls one process serves: `shared` (every tenant's) or `tenant` (one tenant's;
    /// the pool's processes are shared out among tenants, so give it a `pool` of about the
    /// tenants that call it at once). Default: `shared`.
    #[serde(default)]
    pub isolate: Isolate,
    /// The longest message (one line of stdout) accepted, in KiB: a longer one is refused and
    /// the process restarted. Default: 4096 (4 MiB).
    #[serde(default = "default_message_kib")]
    pub max_message_kib: u64,
    /// Memory per process, in MiB: its address space (`RLIMIT_AS`: heap, shared mappings
    /// and a runtime's reserved address space, so Node needs about 1536) and the size of each
    /// file it writes (`RLIMIT_FSIZE`, a `memfd` included); the sandbox's `/tmp` and
    /// `/dev/shm` get half of it each. A limit per process, not per server (no cgroup): a
    /// server that forks may hold `processes` times it. Default: 2048.
    #[serde(default = "default_memory_mib")]
    pub memory_mib: u64,
    /// CPU time per process, in seconds (`RLIMIT_CPU`); a process past it is killed and
    /// restarted. Default: 600.
    #[serde(default = "default_cpu_seconds")]
    pub cpu_seconds: u64,
    /// Processes and threads of the user the server runs as (`RLIMIT_NPROC`). Default: 64.
    #[serde(default = "default_processes")]
    pub processes: u64,
    /// Open files per process (`RLIMIT_NOFILE`). Default: 256.
    #[serde(default = "default_open_files")]
    pub open_files: u64,
    /// The user (and group) id the server runs as when the gateway runs as root, so its
    /// process limit counts its own processes only and it owns none of root's files. It must
    /// reach the program, the package and the granted directories: checked at load
    /// ([`super::reach`]), naming the path in the way and the fix. Default: 60000 plus a
    /// number from the adapter id (60000-64999); written by the import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Run the server without the sandbox where bubblewrap cannot make one (no bubblewrap,
    /// no user namespaces). Default: false: the server is refused, saying why. The limits
    /// and the environment still apply; the file system and the network do not.
    #[serde(default)]
    pub bare: bool,
}

fn default_idle() -> u64 {
    300
}
fn default_in_flight() -> u32 {
    16
}
fn default_pool() -> u32 {
    1
}

/// The largest pool of one server.
pub const MAX_POOL: u32 = 16;
fn default_message_kib() -> u64 {
    4096
}
/// Node reserves about 750 MiB of address space before it runs anything and needs about
/// 1.5 GiB for a few hundred MiB of heap (its allocator's arenas count); 2 GiB leaves room.
fn default_memory_mib() -> u64 {
    2048
}
fn default_cpu_seconds() -> u64 {
    600
}
fn default_processes() -> u64 {
    64
}
fn default_open_files() -> u64 {
    256
}

impl ServerConfig {
    /// An entry for `adapter` with every default.
    pub fn new(adapter: impl Into<String>) -> Self {
        Self {
            adapter: adapter.into(),
            dirs: Vec::new(),
            env: BTreeMap::new(),
            start: Start::FirstUse,
            idle_stop_seconds: default_idle(),
            max_in_flight: default_in_flight(),
            pool: default_pool(),
            isolate: Isolate::Shared,
            max_message_kib: default_message_kib(),
            memory_mib: default_memory_mib(),
            cpu_seconds: default_cpu_seconds(),
            processes: default_processes(),
            open_files: default_open_files(),
            uid: None,
            bare: false,
        }
    }

    /// The uid the server runs as under a root gateway: `uid`, or 60000 plus a number from
    /// the adapter id (so two servers rarely share one, and each keeps its number).
    pub fn run_as(&self) -> u32 {
        self.uid.unwrap_or_else(|| {
            let hash = self.adapter.bytes().fold(0x811c_9dc5_u32, |h, b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            });
            60_000 + hash % 5_000
        })
    }
}

impl StdioConfig {
    /// The entry for `adapter`, if any.
    pub fn server(&self, adapter: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.adapter == adapter)
    }

    /// The packages directory: `packages_dir`, else the user's data directory.
    pub fn packages_dir(&self) -> PathBuf {
        if let Some(dir) = &self.packages_dir {
            return dir.clone();
        }
        // A root gateway runs its servers as users of their own, who cannot reach root's home.
        if super::sandbox::is_root() {
            return PathBuf::from("/var/lib/gatehouse/stdio");
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share"))
            })
            .unwrap_or_else(|| PathBuf::from("."));
        data.join("gatehouse").join("stdio")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_with_only_its_adapter_takes_every_written_default() {
        let config: StdioConfig = toml::from_str("[[server]]\nadapter = \"acme.fs\"\n").unwrap();
        assert_eq!(config.servers, [ServerConfig::new("acme.fs")]);
        let server = &config.servers[0];
        assert_eq!(
            (
                server.idle_stop_seconds,
                server.max_in_flight,
                server.pool,
                server.isolate,
                server.max_message_kib,
                server.memory_mib,
                server.cpu_seconds,
                server.processes,
                server.open_files,
                server.bare,
            ),
            (300, 16, 1, Isolate::Shared, 4096, 2048, 600, 64, 256, false)
        );
        assert!((60_000..65_000).contains(&server.run_as()));
        assert_eq!(server.run_as(), ServerConfig::new("acme.fs").run_as());
    }

    #[test]
    fn rejects_unknown_keys() {
        let err = toml::from_str::<StdioConfig>("[[server]]\nadapter = \"a\"\nnetwork = true\n")
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `network`"), "{err}");
    }
}
