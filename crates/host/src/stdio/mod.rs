//! Stdio MCP servers behind the egress gate, each in a sandbox.
//!
//! Most MCP servers are programs that speak JSON-RPC on their standard streams. gatehouse
//! runs such a server for exactly one adapter: a signed `mcp-upstream` manifest written by
//! `gatehouse import mcp --stdio`, whose tools forward to `stdio://<adapter id>`. The adapter
//! is still the WebAssembly component, and its requests still leave through the egress gate,
//! which owns the `stdio://` transport: one path out, with the grant, budgets and record of
//! any other destination.
//!
//! Phases:
//! 1. **Request** ([`spec`], signed): the manifest's `[stdio]` table pins what runs: the
//!    program, its arguments and, for an npm or PyPI package, the version, the registry's
//!    integrity digest and a digest of the installed files ([`pin`]); it names the
//!    environment variables and directories the server asks for.
//! 2. **Grant** ([`config`], the operator's): a `[[stdio.server]]` entry per adapter: the
//!    directories and environment values it gets (each within what the manifest asks for), its
//!    limits, when it starts, and whether it may run bare where no sandbox can be made.
//! 3. **Load** ([`StdioServers::prepare`], once per adapter): the grant is checked against the
//!    request, secrets are read, the installed package is checked against its pin (a
//!    changed package is refused), under a root gateway the server's own user is checked to
//!    reach what its sandbox binds ([`reach`]), and the [`StdioServer`] is made, not started.
//! 4. **Run** ([`server`]): started on first use in the sandbox ([`sandbox`]), supervised,
//!    stopped when idle and at shutdown. A server whose adapter's egress grant names
//!    destinations gets the egress proxy in its sandbox ([`netns`], `crate::egress`), its
//!    only way out; any other has no network at all.

pub mod config;
pub mod hint;
pub mod netns;
pub mod pin;
pub mod reach;
pub mod sandbox;
pub mod server;
pub mod spec;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub use config::{EnvBinding, Isolate, ServerConfig, Start, StdioConfig};
pub use server::{
    Deadline, Listener, Network, Served, State, Status, StdioServer, Supervision, TOLD_QUEUE,
};
pub use spec::{DirGrant, DirMode, PackagePin, Registry, StdioSpec};

use sandbox::{Launch, Limits};
use spec::PACKAGE_PLACEHOLDER;

/// The URL scheme of a stdio server's destination: `stdio://<adapter id>`.
pub const SCHEME: &str = "stdio";

/// Why a stdio server cannot be made or did not answer. Each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StdioError {
    /// The operator's config has no entry for the adapter.
    #[error(
        "adapter `{adapter}` runs a stdio server, and the config grants none: add a \
         [[stdio.server]] entry with adapter = \"{adapter}\" (the import's config.toml has one)"
    )]
    NotGranted {
        /// The adapter.
        adapter: String,
    },
    /// The grant asks for more than the manifest requests, or cannot be read.
    #[error("[[stdio.server]] for `{adapter}`: {problem}")]
    Grant {
        /// The adapter.
        adapter: String,
        /// What is wrong and the fix.
        problem: String,
    },
    /// The installed package is missing or no longer matches its signed pin.
    #[error("stdio server of `{adapter}`: {reason}")]
    Package {
        /// The adapter.
        adapter: String,
        /// What was found and the fix.
        reason: String,
    },
    /// Under a root gateway, the user the server runs as cannot reach a path its sandbox
    /// binds (bubblewrap would fail with `Can't find source path`).
    #[error(
        "stdio server of `{adapter}` runs as its own user under a root gateway, and {reason}; \
         or set `uid` in its [[stdio.server]] entry to a user that can"
    )]
    Unreachable {
        /// The adapter.
        adapter: String,
        /// Which uid cannot reach which path, what is in the way, and the fix.
        reason: String,
    },
    /// The sandbox cannot be made on this host, and the grant does not allow running bare.
    #[error(
        "stdio server of `{adapter}` refused: {reason}; or, to run it without the sandbox, set \
         `bare = true` in its [[stdio.server]] entry"
    )]
    NoSandbox {
        /// The adapter.
        adapter: String,
        /// Why bubblewrap cannot run, and what to install.
        reason: String,
    },
    /// The process could not be started, or did not open its MCP session.
    #[error("stdio server of `{adapter}` did not start: {reason}")]
    Start {
        /// The adapter.
        adapter: String,
        /// What happened, with the end of its stderr.
        reason: String,
    },
    /// The process ended (crashed, was killed for a limit, hung, or wrote an oversized
    /// message) while it held the request.
    #[error("stdio server of `{adapter}` failed: {reason}; it is restarted, retry the call")]
    Crashed {
        /// The adapter.
        adapter: String,
        /// Why it ended.
        reason: String,
    },
    /// No answer within the request's deadline.
    #[error("stdio server of `{adapter}` did not answer in time")]
    Timeout {
        /// The adapter.
        adapter: String,
    },
    /// The caller cancelled the call while the server worked on it: the server was sent
    /// `notifications/cancelled`, and its answer is not awaited.
    #[error(
        "the caller cancelled the call; the stdio server of `{adapter}` was told \
         (`notifications/cancelled`)"
    )]
    Cancelled {
        /// The adapter.
        adapter: String,
    },
    /// Under `isolate = "tenant"`, every process of the pool served other tenants' calls until
    /// the deadline.
    #[error(
        "stdio server of `{adapter}` has all {pool} processes (`pool`) serving other tenants' \
         calls (`isolate = \"tenant\"`); retry later, or raise `pool` in its [[stdio.server]] \
         entry"
    )]
    PoolTaken {
        /// The adapter.
        adapter: String,
        /// The pool's size.
        pool: u32,
    },
    /// Every place for a request was taken until the deadline.
    #[error(
        "stdio server of `{adapter}` has {max} requests in flight (`max_in_flight`); retry later"
    )]
    Busy {
        /// The adapter.
        adapter: String,
        /// The bound.
        max: u32,
    },
    /// The process failed recently and waits out its backoff past the request's deadline.
    #[error("stdio server of `{adapter}` is restarting; retry in {retry_after_ms} ms")]
    Restarting {
        /// The adapter.
        adapter: String,
        /// How long until it starts again.
        retry_after_ms: u64,
    },
    /// The gateway is shutting down.
    #[error("stdio server of `{adapter}` is shut down with the gateway")]
    ShutDown {
        /// The adapter.
        adapter: String,
    },
}

impl StdioError {
    /// Whether the same request may succeed later (the server is restarted, or was busy).
    pub fn retryable(&self) -> bool {
        match self {
            Self::Crashed { .. }
            | Self::Timeout { .. }
            | Self::Busy { .. }
            | Self::PoolTaken { .. }
            | Self::Restarting { .. } => true,
            Self::NotGranted { .. }
            | Self::Grant { .. }
            | Self::Package { .. }
            | Self::Unreachable { .. }
            | Self::NoSandbox { .. }
            | Self::Start { .. }
            | Self::ShutDown { .. }
            | Self::Cancelled { .. } => false,
        }
    }
}

/// The stdio servers of one host: made at load, listed for operators, stopped at shutdown.
#[derive(Debug, Default)]
pub struct StdioServers {
    config: StdioConfig,
    servers: Mutex<Vec<StdioServer>>,
}

impl StdioServers {
    /// The servers the `[stdio]` table grants; none is made until its adapter loads.
    pub fn new(config: StdioConfig) -> Self {
        Self {
            config,
            servers: Mutex::default(),
        }
    }

    /// Load phase: the server of `adapter`, as its manifest's `spec` asks and its
    /// `[[stdio.server]]` entry grants, with its package checked against the pin, its session
    /// offering the server that its client can be asked `asks` ([`StdioServer::offering`]).
    /// Replaces the one a previous load of the adapter made (calls in flight keep theirs).
    pub fn prepare(
        &self,
        adapter: &str,
        spec: &StdioSpec,
        asks: &[crate::relay::AskKind],
    ) -> Result<StdioServer, StdioError> {
        let grant = self
            .config
            .server(adapter)
            .ok_or_else(|| StdioError::NotGranted {
                adapter: adapter.to_owned(),
            })?;
        let problem = |problem: String| StdioError::Grant {
            adapter: adapter.to_owned(),
            problem,
        };
        spec.validate().map_err(problem)?;
        if let Some(dir) = grant
            .dirs
            .iter()
            .find(|dir| !spec.dirs.iter().any(|asked| dir.within(asked)))
        {
            return Err(problem(format!(
                "directory `{}` is not within one the manifest asks for ({}); remove it or \
                 narrow it",
                String::from(dir.clone()),
                listed(spec.dirs.iter().map(|d| String::from(d.clone())))
            )));
        }
        let mut env = Vec::new();
        for (name, binding) in &grant.env {
            if !spec.env.contains(name) {
                return Err(problem(format!(
                    "env `{name}` is not one the manifest names ({}); remove it",
                    listed(spec.env.iter().cloned())
                )));
            }
            let value = match (&binding.value, &binding.env, &binding.file) {
                (Some(value), None, None) => value.clone(),
                (None, env, file) => gatehouse_core::secret::read(env.as_deref(), file.as_deref())
                    .map_err(|e| problem(format!("env `{name}`: {e}")))?
                    .expose()
                    .to_owned(),
                _ => {
                    return Err(problem(format!(
                        "env `{name}`: set exactly one of `value`, `env` and `file`"
                    )));
                }
            };
            env.push((name.clone(), value));
        }
        let package_dir = match &spec.package {
            Some(pin) => {
                let dir = pin.install_dir(&self.config.packages_dir());
                check_package(adapter, pin, &dir)?;
                Some(dir)
            }
            None => None,
        };
        let expand = |text: &str| match &package_dir {
            Some(dir) => text.replace(PACKAGE_PLACEHOLDER, &dir.display().to_string()),
            None => text.to_owned(),
        };
        let launch = Launch {
            program: expand(&spec.command).into(),
            args: spec.args.iter().map(|a| expand(a)).collect(),
            env,
            package_dir,
            pin: spec.package.clone(),
            dirs: grant.dirs.clone(),
            limits: Limits {
                memory_bytes: grant.memory_mib.saturating_mul(1 << 20),
                cpu_seconds: grant.cpu_seconds,
                processes: grant.processes,
                open_files: grant.open_files,
            },
            run_as: grant.run_as(),
            bwrap: self.config.bwrap.clone().unwrap_or_else(|| "bwrap".into()),
            bare: grant.bare,
        };
        if sandbox::is_root() {
            reach::check_launch(&launch).map_err(|reason| StdioError::Unreachable {
                adapter: adapter.to_owned(),
                reason,
            })?;
        }
        if !(1..=config::MAX_POOL).contains(&grant.pool) {
            return Err(problem(format!(
                "pool = {} is not between 1 and {}",
                grant.pool,
                config::MAX_POOL
            )));
        }
        let supervision = Supervision {
            pool: grant.pool,
            isolate: grant.isolate,
            max_in_flight: grant.max_in_flight,
            max_message_bytes: usize::try_from(grant.max_message_kib.saturating_mul(1024))
                .unwrap_or(usize::MAX),
            idle_stop: (grant.idle_stop_seconds > 0)
                .then(|| Duration::from_secs(grant.idle_stop_seconds)),
        };
        let server = StdioServer::new(adapter, launch, supervision).offering(asks);
        if grant.start == Start::AtStart
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let starting = server.clone();
            runtime.spawn(async move {
                if let Err(error) = starting.start().await {
                    tracing::warn!(%error, "stdio server did not start at load; the next call tries again");
                }
            });
        }
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        servers.retain(|s| s.adapter() != adapter);
        servers.push(server.clone());
        Ok(server)
    }

    /// Every server's state, by adapter id.
    pub fn statuses(&self) -> Vec<Status> {
        let servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        servers.iter().map(StdioServer::status).collect()
    }

    /// Stops every server's process.
    pub async fn shutdown(&self) {
        let servers: Vec<StdioServer> = self
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for server in servers {
            server.shutdown().await;
        }
    }
}

/// The installed package at `dir` against `pin`: present, and its files as pinned.
pub fn check_package(
    adapter: &str,
    pin: &PackagePin,
    dir: &std::path::Path,
) -> Result<(), StdioError> {
    let fail = |reason: String| StdioError::Package {
        adapter: adapter.to_owned(),
        reason,
    };
    if !dir.is_dir() {
        return Err(fail(format!(
            "{} {}@{} is not installed at {}; install it with `gatehouse import mcp --stdio` on \
             this host (with the same `[stdio] packages_dir`)",
            pin.registry.as_str(),
            pin.name,
            pin.version,
            dir.display()
        )));
    }
    let found = pin::tree_digest(dir).map_err(fail)?;
    if found != pin.digest {
        return Err(fail(format!(
            "the installed files of {} {}@{} at {} no longer match the signed pin (found {found}, \
             pinned {}): something changed them after the import; remove the directory and \
             import again, then review and sign",
            pin.registry.as_str(),
            pin.name,
            pin.version,
            dir.display(),
            pin.digest
        )));
    }
    Ok(())
}

fn listed(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
pub(crate) mod tests;
