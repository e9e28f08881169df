//! `gatehouse serve`: the host behind the MCP endpoint, and the config file it reads.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::drift::{self, ImportConfig};
use super::{ConfigArg, Failure, config_path, read_config, read_file, refused, usage};
use crate::admin::{AdminConfig, AdminServer};
use crate::config::{self, ConfigError, Document, HostConfig};
use crate::host::Host;
use crate::mcp::{McpConfig, McpServer, Serving};
use crate::state::checkpoint::Checkpointer;
use crate::state::sqlite::GatewayLock;
use crate::watch::{PolicyWatcher, WatchConfig};

/// The config file as `gatehouse serve` reads it: the library's tables ([`HostConfig`]) and
/// the server's own `[mcp]` table. Every other command reads the same file (ignoring `[mcp]`),
/// so one `gatehouse.toml` serves them all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeConfig {
    /// The library's tables.
    pub host: HostConfig,
    /// The MCP endpoint: listen address, API keys, allowed hosts and origins. Default:
    /// loopback, nobody admitted.
    pub mcp: McpConfig,
    /// The admin API (`[admin]`): runs only when the table is present.
    pub admin: Option<AdminConfig>,
    /// A directory of signed policy modules to install as they change (`[watch]`). Default:
    /// none.
    pub watch: Option<WatchConfig>,
    /// What start-up does about imported MCP adapters whose upstream changed (`[import]`).
    /// Default: nothing.
    pub import: ImportConfig,
}

impl ServeConfig {
    /// Reads a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        Self::from_toml(&config::read(path)?).map_err(|message| ConfigError::invalid(path, message))
    }

    /// Parses config text.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let mut document = Document::parse(text)?;
        let mcp = document.take("mcp")?;
        let admin = document.take("admin")?;
        let watch = document.take("watch")?;
        let import = document.take("import")?;
        Ok(Self {
            host: document.into_host_config()?,
            mcp,
            admin,
            watch,
            import,
        })
    }
}

/// The plugins `serve` installs: (label for messages, signed bytes, is a policy).
type Plugins = Vec<(String, Vec<u8>, bool)>;

/// Where `serve` reads its config and plugins: at start, and again on SIGHUP.
#[derive(Debug, Clone)]
struct Source {
    /// The config file, if any (else the built-in defaults).
    config: Option<PathBuf>,
    adapters: Vec<PathBuf>,
    policies: Vec<PathBuf>,
}

impl Source {
    fn read(&self) -> Result<(ServeConfig, Plugins), Failure> {
        let mut plugins: Plugins = Vec::new();
        for (paths, is_policy) in [(&self.adapters, false), (&self.policies, true)] {
            for path in paths {
                let bytes = read_file(path).map_err(usage)?;
                plugins.push((path.display().to_string(), bytes, is_policy));
            }
        }
        Ok((read_config(self.config.as_deref())?, plugins))
    }
}

/// A host with its plugins installed, and the MCP endpoint over it.
struct Started {
    host: Arc<Host>,
    mcp: McpConfig,
    server: McpServer,
    /// Each plugin installed: its id, and what serves and where it came from.
    loaded: Vec<(String, String)>,
    /// The admin API, if `[admin]` is configured: where it listens, and the server.
    admin: Option<(SocketAddr, AdminServer)>,
    /// The watched policy directory, if `[watch]` is configured.
    watch: Option<WatchConfig>,
}

/// Builds the host from `config`, installs `plugins` and builds the endpoint.
fn start(config: ServeConfig, plugins: &Plugins) -> Result<Started, Failure> {
    let ServeConfig {
        host: mut config,
        mcp,
        admin,
        watch,
        import: _,
    } = config;
    if mcp.api_keys.is_empty() && mcp.jwt.is_none() && mcp.anonymous_tenant.is_none() {
        return Err(usage(
            "no caller could be admitted: add `[[mcp.api_key]]` entries or `[mcp.jwt]` to the config (or \
             `[mcp] anonymous_tenant` for local use)",
        ));
    }
    if !mcp.listen.ip().is_loopback() {
        if mcp.anonymous_tenant.is_some() {
            tracing::warn!(listen = %mcp.listen, "anonymous callers are admitted on a non-loopback address");
        }
        if mcp.allowed_hosts == McpConfig::default().allowed_hosts {
            tracing::warn!(
                listen = %mcp.listen,
                "`[mcp] allowed_hosts` lists only loopback names: add the host names clients use, or they get 403"
            );
        }
    }
    // Paused results name the console's page for their approval, unless the config names
    // another place.
    if let Some(admin) = admin.as_ref().filter(|admin| admin.console)
        && config.store.approval_url.is_none()
    {
        config.store.approval_url = Some(format!("{}/#/approvals/{{id}}", admin.console_url()));
    }
    let host = Arc::new(Host::new(config).map_err(usage)?);
    let mut loaded = Vec::new();
    for (label, bytes, is_policy) in plugins {
        let installed = if *is_policy {
            host.install_policy(bytes)
        } else {
            host.install_adapter(bytes)
        };
        let plugin = installed.map_err(|e| refused(format!("{label}: refused: {e}")))?;
        loaded.push((
            plugin.id.clone(),
            format!(
                "{} {} ({}) from {label}",
                plugin.id, plugin.version, plugin.digest
            ),
        ));
    }
    let server = McpServer::new(Arc::clone(&host), &mcp).map_err(usage)?;
    let admin = admin
        .map(|admin| {
            AdminServer::new(Arc::clone(&host), &admin)
                .map(|server| (admin.listen, server))
                .map_err(usage)
        })
        .transpose()?;
    Ok(Started {
        host,
        mcp,
        server,
        loaded,
        admin,
        watch,
    })
}

pub(super) fn serve(
    adapters: &[PathBuf],
    policies: &[PathBuf],
    listen: Option<SocketAddr>,
    demo: bool,
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    // `serve --demo` has no file to reload.
    let source = (!demo).then(|| Source {
        config: config_path(config),
        adapters: adapters.to_vec(),
        policies: policies.to_vec(),
    });
    let (mut config, plugins) = match &source {
        Some(source) => source.read()?,
        None => demo_plugins()?,
    };
    if let Some(listen) = listen {
        config.mcp.listen = listen;
    }
    let (drift_check, grants) = (config.import.drift_check, config.host.egress.grants.clone());
    // One gateway per SQLite file (see `GatewayLock`), checked before anything is loaded.
    let _lock = match &config.host.store.url {
        Some(_) => None,
        None => Some(GatewayLock::take(&config.host.store).map_err(refused)?),
    };
    let checkpoints = config.host.store.checkpoints.clone();
    let Started {
        host,
        mcp,
        server,
        loaded,
        admin,
        watch,
    } = start(config, &plugins)?;
    // The manifests were verified as the adapters loaded.
    let manifests: Vec<_> = plugins
        .iter()
        .filter(|(_, _, is_policy)| !is_policy)
        .filter_map(|(_, bytes, _)| crate::plugin::inspect(bytes).ok()?.manifest)
        .collect();
    drift::check(drift_check, &manifests, &grants)?;
    // The admin API and the watcher act on this host: a reload cannot move them yet.
    let pinned = admin.is_some() || watch.is_some();
    drop(plugins);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        for line in restore(&host, loaded).await? {
            say!(out, "loaded {line}");
        }
        let checkpointer = Checkpointer::start(Arc::clone(host.store()), &checkpoints).map_err(usage)?;
        if checkpointer.is_some() {
            tracing::info!(every_entries = checkpoints.every_entries, every_seconds = checkpoints.every_seconds, "signing audit checkpoints");
        }
        // Before the port opens: a signal that arrives once clients can connect is handled.
        let (stop, mut hangups) = install_signals()
            .map_err(|e| usage(format!("cannot listen for signals: {e}")))?;
        server.refresh_keys().await.map_err(usage)?;
        let listener = tokio::net::TcpListener::bind(mcp.listen)
            .await
            .map_err(|e| usage(format!("cannot listen on {}: {e}", mcp.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| usage(format!("cannot listen on {}: {e}", mcp.listen)))?;
        let endpoint = format!("http://{addr}{}", mcp.path);
        say!(out, "gatehouse: serving MCP (Streamable HTTP) at {endpoint}");
        match &mcp.anonymous_tenant {
            Some(tenant) => {
                let tools = host.visible_tools(tenant);
                say!(out, "callers without an API key run as tenant `{tenant}`, which sees {} tool(s): {}", tools.len(), tools.join(", "));
            }
            None => {
                say!(out, "callers need one of the {} configured API key(s)", mcp.api_keys.len());
            }
        }
        say!(out, "try: npx @modelcontextprotocol/inspector, or");
        say!(
            out,
            "  curl -s {endpoint} -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' \\"
        );
        say!(
            out,
            "    -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}}'"
        );
        if let Some((listen, admin)) = admin {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| usage(format!("cannot listen on {listen} (`[admin] listen`): {e}")))?;
            let addr = listener
                .local_addr()
                .map_err(|e| usage(format!("cannot listen on {listen}: {e}")))?;
            if !addr.ip().is_loopback() {
                tracing::warn!(%addr, "the admin API speaks plain HTTP beyond loopback: put a TLS-terminating proxy in front of it");
            }
            say!(out, "gatehouse: admin API at http://{addr} ({} token(s); `gatehouse admin --server http://{addr} ...`)", admin.tokens());
            if let Some(console) = admin.console_url() {
                say!(out, "gatehouse: console at {console} (sign in with an admin token)");
            }
            tokio::spawn(admin.serve(listener, std::future::pending()));
        }
        let _watcher = watch.map(|watch| {
            say!(out, "gatehouse: installing policy modules from {} as they change", watch.policy_dir.display());
            let mut watcher = PolicyWatcher::start(
                Arc::clone(&host),
                watch.policy_dir,
                std::time::Duration::from_millis(watch.interval_ms.max(100)),
            );
            // The watcher logs and audits each event itself; drain them.
            tokio::spawn(async move { while watcher.next_event().await.is_some() {} })
        });
        // The endpoint (and the admin API, the watcher) hold the host; a reload replaces it.
        drop(host);
        say!(out, "Ctrl-C stops the gateway.");
        let _ = out.flush();
        let serving = Serving::new(server);
        let reloads = async {
            while hangups.next().await {
                if pinned {
                    tracing::warn!("SIGHUP: reload is not available while `[admin]` or `[watch]` is configured (they act on the running host); restart gatehouse to apply a new config");
                    continue;
                }
                reload(&serving, source.as_ref(), mcp.listen, listen).await;
            }
        };
        let cut = tokio::select! {
            cut = serving.serve(listener, stop.received()) => cut,
            () = reloads => unreachable!("the SIGHUP stream does not end"),
        };
        if let Some(checkpointer) = checkpointer {
            checkpointer.stop().await;
        }
        if cut == 0 {
            tracing::info!(unfinished_connections = cut, "gatehouse stopped: every call in flight finished");
        } else {
            tracing::warn!(unfinished_connections = cut, "gatehouse stopped: connections still open at `[mcp] drain_timeout_ms` were cut");
        }
        say!(out, "gatehouse: stopped");
        Ok(0)
    })
}

/// Applies the plugin changes the admin API made before a restart (the store's, on top of the
/// config's plugins: [`Host::restore_plugin_changes`] says the precedence), and logs where each
/// serving plugin comes from, one line each; returns the lines.
async fn restore(host: &Host, loaded: Vec<(String, String)>) -> Result<Vec<String>, Failure> {
    let mut sources = host.restore_plugin_changes().await.map_err(refused)?;
    let mut lines: Vec<String> = loaded
        .into_iter()
        .map(|(id, line)| sources.remove(&id).unwrap_or(line))
        .collect();
    // Plugins only the store has (pushed through the admin API, in no file).
    lines.extend(sources.into_values());
    for line in &lines {
        tracing::info!("serving {line}");
    }
    Ok(lines)
}

/// SIGHUP: reads the config file and the plugin files again and, if all of it loads, serves
/// new requests from the new host; requests in flight finish on the old one. Anything that
/// fails to load keeps the serving config, and the log says why. The listener stays where it
/// is (`[mcp] listen` takes a restart).
async fn reload(
    serving: &Serving,
    source: Option<&Source>,
    bound: SocketAddr,
    listen: Option<SocketAddr>,
) {
    let Some(source) = source.cloned() else {
        tracing::warn!("SIGHUP: `serve --demo` has no config file to reload");
        return;
    };
    let file = source.config.as_ref().map_or_else(
        || "(built-in defaults)".to_owned(),
        |p| p.display().to_string(),
    );
    let started = tokio::task::spawn_blocking(move || {
        let (mut config, plugins) = source.read()?;
        let wanted = listen.unwrap_or(config.mcp.listen);
        if wanted != bound {
            tracing::warn!(listen = %wanted, serving = %bound, "`[mcp] listen` changed: restart gatehouse to move the listener");
        }
        config.mcp.listen = bound;
        start(config, &plugins)
    })
    .await;
    match started {
        Ok(Ok(started)) => {
            if let Err(failure) = restore(&started.host, started.loaded.clone()).await {
                tracing::warn!(config = %file, error = %failure.message, "config reload failed; still serving the previous config");
                return;
            }
            serving.replace(started.server);
            tracing::info!(config = %file, plugins = started.loaded.len(), "config reloaded");
        }
        Ok(Err(failure)) => {
            tracing::warn!(config = %file, error = %failure.message, "config reload failed; still serving the previous config");
        }
        Err(error) => {
            tracing::warn!(config = %file, %error, "config reload failed; still serving the previous config");
        }
    }
}

/// The signals `serve` acts on, listened for from start: SIGTERM and SIGINT (Ctrl-C) stop it,
/// SIGHUP reloads (Unix only).
fn install_signals() -> std::io::Result<(Stop, Hangups)> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        Ok((
            Stop {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            },
            Hangups(signal(SignalKind::hangup())?),
        ))
    }
    #[cfg(not(unix))]
    Ok((Stop {}, Hangups {}))
}

/// SIGTERM or SIGINT.
struct Stop {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Stop {
    /// Completes on the first SIGTERM or SIGINT.
    async fn received(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.terminate.recv() => tracing::info!("SIGTERM: stopping"),
            _ = self.interrupt.recv() => tracing::info!("SIGINT: stopping"),
        }
        #[cfg(not(unix))]
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C; stop the process to end");
            std::future::pending::<()>().await;
        }
    }
}

/// SIGHUP.
struct Hangups(#[cfg(unix)] tokio::signal::unix::Signal);

impl Hangups {
    /// Completes with `true` on each SIGHUP.
    async fn next(&mut self) -> bool {
        #[cfg(unix)]
        return self.0.recv().await.is_some();
        #[cfg(not(unix))]
        std::future::pending().await
    }
}

#[cfg(feature = "demo")]
fn demo_plugins() -> Result<(ServeConfig, Plugins), Failure> {
    let demo = crate::demo::prepare().map_err(refused)?;
    let config = ServeConfig {
        host: demo.config,
        mcp: McpConfig {
            anonymous_tenant: Some("default".to_owned()),
            ..McpConfig::default()
        },
        // The admin API, when the operator gave it a token.
        admin: std::env::var_os(super::admin::TOKEN_ENV).map(|_| AdminConfig {
            tokens: vec![crate::admin::AdminTokenConfig {
                principal: "demo-operator".to_owned(),
                roles: vec![
                    crate::admin::Role::Approver,
                    crate::admin::Role::Operator,
                    crate::admin::Role::Auditor,
                ],
                env: Some(super::admin::TOKEN_ENV.to_owned()),
                file: None,
            }],
            ..AdminConfig::default()
        }),
        watch: None,
        import: ImportConfig::default(),
    };
    let plugins = demo
        .plugins
        .into_iter()
        .map(|(name, bytes)| (format!("demo plugin {name}"), bytes, false))
        .collect();
    Ok((config, plugins))
}

#[cfg(not(feature = "demo"))]
fn demo_plugins() -> Result<(ServeConfig, Plugins), Failure> {
    Err(usage(
        "this build has no demo plugins (build with `--features demo`)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_holds_the_library_tables_and_mcp() {
        let config = ServeConfig::from_toml(
            "[sandbox]\nfuel = 5\n\n[mcp]\nlisten = \"127.0.0.1:9999\"\nanonymous_tenant = \"t\"\n",
        )
        .unwrap();
        assert_eq!(config.host.sandbox.fuel, 5);
        assert_eq!(config.mcp.listen.port(), 9999);
        assert_eq!(config.mcp.anonymous_tenant.as_deref(), Some("t"));
        assert_eq!((config.admin, config.watch), (None, None));
        let config = ServeConfig::from_toml(
            "[admin]\n[[admin.token]]\nprincipal = \"ana\"\nroles = [\"approver\"]\nenv = \"T\"\n\n[watch]\npolicy_dir = \"/p\"\n",
        )
        .unwrap();
        let admin = config.admin.unwrap();
        assert_eq!(admin.listen.to_string(), "127.0.0.1:8788");
        assert_eq!(admin.tokens[0].roles, [crate::admin::Role::Approver]);
        assert_eq!(config.watch.unwrap().interval_ms, 2000);
        let err = ServeConfig::from_toml(
            "[admin]\n[[admin.token]]\nprincipal = \"a\"\nroles = [\"root\"]\n",
        )
        .unwrap_err();
        assert!(
            err.contains("line 4") && err.contains("unknown variant `root`"),
            "{err}"
        );
        // The library alone does not know `[mcp]`.
        let err = HostConfig::from_toml("[mcp]\nlisten = \"127.0.0.1:9999\"").unwrap_err();
        assert!(err.contains("unknown field `mcp`"), "{err}");
    }

    #[test]
    fn errors_name_the_line_and_key_in_either_part() {
        let err = ServeConfig::from_toml("[sandbox]\nfuel = 5\n\n[mcp]\nlisten = 7\n").unwrap_err();
        assert!(err.contains("line 5"), "{err}");
        let err = ServeConfig::from_toml("[mcp]\n\n[sandbox]\nfule = 5\n").unwrap_err();
        assert!(
            err.contains("line 4") && err.contains("unknown field `fule`"),
            "{err}"
        );
        let err = ServeConfig::from_toml("[sandbx]\n").unwrap_err();
        assert!(err.contains("unknown field `sandbx`"), "{err}");
    }
}
