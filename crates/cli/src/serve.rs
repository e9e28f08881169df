//! `gatehouse serve`: the host behind the MCP endpoint, and the config file it reads.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gatehouse_host::Host;
use gatehouse_host::InstallError;
use gatehouse_host::error::{FloorError, PolicyError};
use gatehouse_host::oci::{OciRef, Registries, Tags};
use gatehouse_host::plugin::manifest::PluginKind;
use gatehouse_host::watch::{FollowedTag, PolicyWatcher, TagWatcher, WatchConfig};
use gatehouse_server::admin::{AdminConfig, AdminServer};
use gatehouse_server::mcp::{McpConfig, McpServer, Serving};
use gatehouse_store::Checkpointer;
use gatehouse_store::sqlite::GatewayLock;

use gatehouse_host::plugin::read_file;

use crate::config::{ConfigArg, PluginSources, ServeConfig, config_path, read_config};
use crate::drift;
use crate::exit::{Failure, refused, usage};

/// A plugin `serve` installs.
struct Plugin {
    /// Where it came from, for messages: a file, or the pinned `oci://` reference.
    label: String,
    /// The signed component.
    bytes: Vec<u8>,
    is_policy: bool,
    /// The pinned reference it was pulled from, if from a registry: its records cite it.
    source: Option<String>,
    /// The tag it was pulled by, if any: `[oci] watch_seconds` follows it.
    tag: Option<OciRef>,
}

type Plugins = Vec<Plugin>;

/// Where `serve` reads its config and plugins: at start, and again on SIGHUP.
#[derive(Debug, Clone)]
struct Source {
    /// The config file, if any (else the built-in defaults).
    config: Option<PathBuf>,
    /// Files and `oci://` references.
    adapters: Vec<String>,
    policies: Vec<String>,
}

impl Source {
    /// Reads the config, then each plugin: a file, or a reference pulled with the config's
    /// `[oci]` settings (a tag only where they allow it, resolved to a digest; from the cache
    /// when the registry cannot be reached).
    fn read(&self) -> Result<(ServeConfig, Plugins), Failure> {
        let config = read_config(self.config.as_deref())?;
        let registries = Registries::new(&config.oci, &config.host.cache.resolved_dir());
        // The config's files are relative to the config file.
        let in_config =
            |sources: &[String]| PluginSources::resolve(sources, self.config.as_deref());
        let adapters = [self.adapters.clone(), in_config(&config.plugins.adapters)].concat();
        let policies = [self.policies.clone(), in_config(&config.plugins.policies)].concat();
        let mut plugins: Plugins = Vec::new();
        for (sources, is_policy) in [(&adapters, false), (&policies, true)] {
            for source in sources {
                plugins.push(if OciRef::is_oci(source) {
                    let reference: OciRef = source.parse().map_err(usage)?;
                    let pulled = registries
                        .pull_blocking(&reference, Tags::AsConfigured)
                        .map_err(refused)?;
                    tracing::info!(reference = %reference, pinned = %pulled.pinned, cached = pulled.from_cache, "pulled");
                    Plugin {
                        label: pulled.pinned.to_string(),
                        bytes: pulled.bytes,
                        is_policy,
                        source: Some(pulled.pinned.to_string()),
                        tag: reference.digest().is_none().then_some(reference),
                    }
                } else {
                    Plugin {
                        label: source.clone(),
                        bytes: read_file(Path::new(source)).map_err(usage)?,
                        is_policy,
                        source: None,
                        tag: None,
                    }
                });
            }
        }
        Ok((config, plugins))
    }
}

/// A plugin `start` installed.
#[derive(Debug, Clone)]
struct Loaded {
    kind: PluginKind,
    id: String,
    /// What serves and where it came from.
    line: String,
}

/// The principal of the audit entry of a downgrade `--allow-downgrade` allowed.
const ALLOWED_BY: &str = "serve --allow-downgrade";

/// A host with its plugins installed, and the MCP endpoint over it.
struct Started {
    host: Arc<Host>,
    mcp: McpConfig,
    server: McpServer,
    /// Each plugin installed, in the order of the plugins `start` was given.
    loaded: Vec<Loaded>,
    /// The admin API, if `[admin]` is configured: its bound socket (not listening yet), and the
    /// server.
    admin: Option<(tokio::net::TcpSocket, AdminServer)>,
    /// The watched policy directory, if `[watch]` is configured.
    watch: Option<WatchConfig>,
}

/// Builds the host from `config` (read from `file`, if any), installs `plugins` and builds the
/// endpoint.
fn start(config: ServeConfig, plugins: &Plugins, file: Option<&Path>) -> Result<Started, Failure> {
    // Errors about entries of the file name the file.
    let in_file = |error: String| match file {
        Some(file) => usage(format!("{}: {error}", file.display())),
        None => usage(error),
    };
    let ServeConfig {
        host: mut config,
        mut mcp,
        admin,
        watch,
        import: _,
        oci,
        plugins: _,
        oauth,
    } = config;
    let registries = Registries::new(&oci, &config.cache.resolved_dir());
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
    // The admin socket is bound first, so what names its address (the console's URL, the
    // approval links in paused results) names the bound port, `listen = "...:0"` included. It
    // listens only once the gateway has started (start-up checks included): nobody connects to
    // a gateway that is not ready.
    let admin = admin
        .map(|mut admin| {
            let refused = |e: std::io::Error| {
                usage(format!(
                    "cannot listen on {} (`[admin] listen`): {e}",
                    admin.listen
                ))
            };
            let socket = if admin.listen.is_ipv4() {
                tokio::net::TcpSocket::new_v4()
            } else {
                tokio::net::TcpSocket::new_v6()
            }
            .map_err(refused)?;
            socket
                .set_reuseaddr(true)
                .and_then(|()| socket.bind(admin.listen))
                .map_err(refused)?;
            admin.listen = socket.local_addr().map_err(refused)?;
            Ok::<_, Failure>((admin, socket))
        })
        .transpose()?;
    // Paused results name the console's page for their approval, unless the config names
    // another place.
    if let Some((admin, _)) = admin.as_ref().filter(|(admin, _)| admin.console)
        && config.store.approval_url.is_none()
    {
        config.store.approval_url = Some(format!("{}/#/approvals/{{id}}", admin.console_url()));
    }
    // Request states outlive a restart: their key is kept beside the store's file.
    if mcp.request_state_key_file.is_none() {
        mcp.request_state_key_file = Some(
            config
                .store
                .resolved_path()
                .with_file_name("request-state.key"),
        );
    }
    let oauth_grants: Vec<(String, String)> = (config.egress.grants.iter())
        .flat_map(|grant| {
            (grant.credentials.values())
                .filter_map(|credential| credential.oauth.clone())
                .map(|provider| (grant.adapter.clone(), provider))
        })
        .collect();
    let default_vault_key = config.store.resolved_path().with_file_name("vault.key");
    let mut host = Host::new(config).map_err(usage)?;
    // Each user's own accounts: one broker for the pipeline (their tokens) and the MCP
    // listener (the pages that connect them).
    let broker = oauth
        .map(|oauth| {
            let origin = gatehouse_server::mcp::server::public_origin(&mcp)
                .map_err(|e| in_file(e.to_string()))?;
            gatehouse_server::oauth::Broker::new(
                &oauth,
                Arc::clone(host.store()),
                host.tls().clone(),
                &origin,
                &default_vault_key,
            )
            .map(Arc::new)
            .map_err(|e| in_file(e.to_string()))
        })
        .transpose()?;
    for (adapter, provider) in &oauth_grants {
        if !broker.as_ref().is_some_and(|b| b.has_provider(provider)) {
            return Err(in_file(format!(
                "an `[[egress.grant]]` of `{adapter}` sends each caller's `oauth = \"{provider}\"` token, and no `[[oauth.provider]]` has id `{provider}`; add it"
            )));
        }
    }
    if let Some(broker) = &broker {
        host.set_accounts(Arc::clone(broker) as Arc<dyn gatehouse_host::accounts::Accounts>);
    }
    let host = Arc::new(host);
    let mut loaded = Vec::new();
    for Plugin {
        label,
        bytes,
        is_policy,
        source,
        ..
    } in plugins
    {
        // As `install_policy` and `install_adapter`, citing where it came from.
        let installed = if *is_policy {
            (host.load_policy(bytes).map_err(InstallError::from))
                .and_then(|policy| host.serve_policy(policy.with_source(source.clone())))
        } else {
            (host.load_adapter(bytes).map_err(InstallError::from))
                .and_then(|adapter| host.serve_adapter(adapter.with_source(source.clone())))
        };
        let plugin = installed.map_err(|e| match e {
            // The plugin is fine; the operator's binding config is not: a config error.
            InstallError::Policy(PolicyError::Config { .. }) => in_file(e.to_string()),
            e => refused(format!("{label}: refused: {e}")),
        })?;
        loaded.push(Loaded {
            kind: if *is_policy {
                PluginKind::Policy
            } else {
                PluginKind::Adapter
            },
            id: plugin.id.clone(),
            line: format!(
                "{} {} ({}) from {label}",
                plugin.id, plugin.version, plugin.digest
            ),
        });
    }
    let mut server = McpServer::new(Arc::clone(&host), &mcp).map_err(|e| in_file(e.to_string()))?;
    if let Some(broker) = &broker {
        server = server.with_oauth(Arc::clone(broker));
    }
    let users = server.identity();
    let admin = admin
        .map(|(admin, listener)| {
            let mut server = AdminServer::new(Arc::clone(&host), &admin)
                .map_err(|e| in_file(e.to_string()))?
                .with_registries(registries.clone());
            if let Some(broker) = &broker {
                server = server.with_oauth(Arc::clone(broker), Arc::clone(&users));
            }
            admin_tokens_are_not_api_keys(&admin, &mcp).map_err(in_file)?;
            Ok::<_, Failure>((listener, server))
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

/// What `gatehouse serve` was asked to serve, besides its config.
pub(super) struct ServeArgs<'a> {
    /// `--adapter`s.
    pub adapters: &'a [String],
    /// `--policy`s.
    pub policies: &'a [String],
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--demo`.
    pub demo: bool,
    /// `--allow-downgrade`s: plugin ids that may serve below the version they last served, at
    /// start and on every reload of this process.
    pub allow_downgrade: &'a [String],
}

pub(super) fn serve(
    args: &ServeArgs<'_>,
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let ServeArgs {
        adapters,
        policies,
        listen,
        demo,
        allow_downgrade,
    } = *args;
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
    let drift_check = config.import.drift_check;
    // One gateway per SQLite file (see `GatewayLock`), checked before anything is loaded.
    let _lock = match &config.host.store.url {
        Some(_) => None,
        None => Some(GatewayLock::take(&config.host.store).map_err(refused)?),
    };
    let checkpoints = config.host.store.checkpoints.clone();
    let registries = Registries::new(&config.oci, &config.host.cache.resolved_dir());
    let every = std::time::Duration::from_secs(config.oci.watch_seconds);
    // What a reload compares the new config and plugins with.
    let mut previous = (config.clone(), Vec::new());
    let Started {
        host,
        mcp,
        server,
        loaded,
        admin,
        watch,
    } = start(
        config,
        &plugins,
        source.as_ref().and_then(|s| s.config.as_deref()),
    )?;
    // The tags to follow (`[oci] watch_seconds`), each with the plugin and digest it serves
    // now (`loaded` is in the order of `plugins`).
    let tags: Vec<FollowedTag> = (plugins.iter().zip(&loaded))
        .filter_map(|(plugin, loaded)| {
            Some(FollowedTag {
                tag: plugin.tag.clone()?,
                pinned: plugin.source.clone()?,
                kind: loaded.kind,
                id: loaded.id.clone(),
            })
        })
        .collect();
    let follow = (!every.is_zero() && !tags.is_empty()).then_some((registries, tags, every));
    // The manifests were verified as the adapters loaded.
    let manifests: Vec<_> = plugins
        .iter()
        .filter(|plugin| !plugin.is_policy)
        .filter_map(|plugin| {
            gatehouse_host::plugin::inspect(&plugin.bytes)
                .ok()?
                .manifest
        })
        .collect();
    // The admin API and the watchers act on this host: a reload cannot move them yet.
    let pinned = admin.is_some() || watch.is_some() || follow.is_some();
    drop(plugins);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        // Before anything is restored or listens: through the served adapters' own grants.
        drift::check(drift_check, &host, &manifests).await?;
        let lines = restore(&host, loaded, allow_downgrade).await?;
        for line in &lines {
            say!(out, "loaded {line}");
        }
        previous.1 = lines;
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
        if let Some((socket, admin)) = admin {
            let addr = socket
                .local_addr()
                .map_err(|e| usage(format!("the admin listener: {e}")))?;
            // The backlog of a busy admin listener: operators and scrapers, not agents.
            let listener = socket
                .listen(1024)
                .map_err(|e| usage(format!("cannot listen on {addr} (`[admin] listen`): {e}")))?;
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
        let _tags = follow.map(|(registries, tags, every)| {
            say!(out, "gatehouse: following {} registry tag(s) every {} s", tags.len(), every.as_secs());
            TagWatcher::start(Arc::clone(&host), registries, tags, every)
        });
        // The endpoint (and the admin API, the watcher) hold the host; a reload replaces it.
        drop(host);
        say!(out, "Ctrl-C stops the gateway.");
        let _ = out.flush();
        let serving = Serving::new(server);
        let reloads = async {
            while hangups.next().await {
                if pinned {
                    tracing::warn!("SIGHUP: reload is not available while `[admin]`, `[watch]` or `[oci] watch_seconds` is configured (they act on the running host); restart gatehouse to apply a new config");
                    continue;
                }
                let source = source.as_ref();
                reload(&serving, source, mcp.listen, listen, allow_downgrade, &mut previous).await;
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
/// config's plugins: [`Host::restore_plugin_changes`] says the precedence), then holds what
/// serves to the versions the store recorded as last served ([`Host::hold_floor`]: a plugin
/// below its record is refused, unless `allow_downgrade` names its id), and logs where each
/// serving plugin comes from, one line each; returns the lines.
async fn restore(
    host: &Host,
    loaded: Vec<Loaded>,
    allow_downgrade: &[String],
) -> Result<Vec<String>, Failure> {
    let mut sources = host.restore_plugin_changes().await.map_err(refused)?;
    let mut lines: Vec<(String, String)> = loaded
        .into_iter()
        .map(|Loaded { id, line, .. }| {
            let line = sources.remove(&id).unwrap_or(line);
            (id, line)
        })
        .collect();
    // Plugins only the store has (pushed through the admin API, in no file).
    lines.extend(sources);
    let allowed = (host.hold_floor(allow_downgrade, ALLOWED_BY).await)
        .map_err(|error| floor_refused(error, &lines))?;
    for downgrade in allowed {
        tracing::warn!(
            kind = %downgrade.kind,
            id = %downgrade.plugin.id,
            version = %downgrade.plugin.version,
            replaced = %downgrade.replaced.version,
            "`{}` {} serves below {}, the version it last served: allowed by `--allow-downgrade {}`, and audited. It is now the version on record, so the next start needs no flag; remove it, as it allows downgrades of this id on every reload too",
            downgrade.plugin.id,
            downgrade.plugin.version,
            downgrade.replaced.version,
            downgrade.plugin.id,
        );
    }
    let lines: Vec<String> = lines.into_iter().map(|(_, line)| line).collect();
    for line in &lines {
        tracing::info!("serving {line}");
    }
    Ok(lines)
}

/// The refusal of a start (or reload) whose plugins fall below the versions their ids last
/// served: each downgrade, where it came from (`lines`, by id), and how to allow it.
fn floor_refused(error: FloorError, lines: &[(String, String)]) -> Failure {
    let downgrades = match error {
        FloorError::Downgrades(downgrades) => downgrades,
        FloorError::Store(error) => return refused(error),
    };
    let each: Vec<String> = (downgrades.iter())
        .map(|downgrade| match downgrade {
            InstallError::Downgrade {
                id,
                serving,
                offered,
            } => {
                let from = (lines.iter())
                    .find(|(served, _)| served == id)
                    .map_or(id.as_str(), |(_, line)| line.as_str());
                format!(
                    "{from}: refused: `{id}` {offered} is older than {serving}, the version this \
                     gateway last served under that id (its state store records it); refusing \
                     the downgrade. A registry tag or a file now names an older signed build. \
                     If you mean to serve it, start gatehouse with `--allow-downgrade {id}` (the \
                     downgrade is audited)"
                )
            }
            other => other.to_string(),
        })
        .collect();
    refused(each.join("\n"))
}

/// Refuses an `[[admin.token]]` that is also an `[[mcp.api_key]]`: the agent holding the key
/// could act as an operator (approve its own calls, install plugins). Runs after both loaded
/// their secrets, so a secret that cannot be read has been reported already. Names both
/// entries (1-based), never the secret.
fn admin_tokens_are_not_api_keys(admin: &AdminConfig, mcp: &McpConfig) -> Result<(), String> {
    use sha2::{Digest, Sha256};
    let digest = |env: Option<&str>, file: Option<&Path>| {
        gatehouse_core::secret::read(env, file)
            .ok()
            .map(|secret| Sha256::digest(secret.expose().as_bytes()))
    };
    let keys: Vec<_> = mcp
        .api_keys
        .iter()
        .map(|key| digest(key.env.as_deref(), key.file.as_deref()))
        .collect();
    for (t, token) in admin.tokens.iter().enumerate() {
        let Some(secret) = digest(token.env.as_deref(), token.file.as_deref()) else {
            continue;
        };
        if let Some(k) = keys.iter().position(|key| *key == Some(secret)) {
            let key = &mcp.api_keys[k];
            return Err(format!(
                "`[[admin.token]]` #{} (principal `{}`) has the same value as `[[mcp.api_key]]` #{} (tenant `{}`): the agent holding that API key could act as the operator; give the admin token a value of its own",
                t + 1,
                token.principal,
                k + 1,
                key.tenant
            ));
        }
    }
    Ok(())
}

/// SIGHUP: reads the config file and the plugin files again and, if all of it loads (and
/// nothing falls below the version its id last served, unless `allow_downgrade` names it),
/// serves new requests from the new host; requests in flight finish on the old one. Anything
/// that fails to load keeps the serving config, and the log says why. The listener stays
/// where it is (`[mcp] listen` takes a restart).
///
/// The log line of a reload says what changed from `previous` (the serving config and
/// plugins), which it then becomes.
async fn reload(
    serving: &Serving,
    source: Option<&Source>,
    bound: SocketAddr,
    listen: Option<SocketAddr>,
    allow_downgrade: &[String],
    previous: &mut (ServeConfig, Vec<String>),
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
        start(config.clone(), &plugins, source.config.as_deref()).map(|started| (started, config))
    })
    .await;
    match started {
        Ok(Ok((started, config))) => {
            let lines = match restore(&started.host, started.loaded.clone(), allow_downgrade).await
            {
                Ok(lines) => lines,
                Err(failure) => {
                    tracing::warn!(config = %file, error = %failure.message, "config reload failed; still serving the previous config");
                    return;
                }
            };
            serving.replace(started.server);
            let sections = changed_sections(&previous.0, &config);
            let plugins_added: Vec<&str> = (lines.iter())
                .filter(|p| !previous.1.contains(*p))
                .map(String::as_str)
                .collect();
            let plugins_removed: Vec<&str> = (previous.1.iter())
                .filter(|p| !lines.contains(*p))
                .map(String::as_str)
                .collect();
            tracing::info!(
                config = %file,
                plugins = lines.len(),
                changed = %list(&sections),
                plugins_added = %list(&plugins_added),
                plugins_removed = %list(&plugins_removed),
                "config reloaded"
            );
            *previous = (config, lines);
        }
        Ok(Err(failure)) => {
            tracing::warn!(config = %file, error = %failure.message, "config reload failed; still serving the previous config");
        }
        Err(error) => {
            tracing::warn!(config = %file, %error, "config reload failed; still serving the previous config");
        }
    }
}

/// The config sections whose values differ between `old` and `new`, by their TOML names:
/// the tables (`sandbox`, `egress`, `mcp`...), and `[pipeline]`'s keys one by one
/// (`pipeline.tool`, `pipeline.policy`, `pipeline.policy_default`...). Values are never
/// shown: a section can name where a secret is.
fn changed_sections(old: &ServeConfig, new: &ServeConfig) -> Vec<String> {
    use serde_json::Value;
    use std::collections::BTreeMap;
    fn sections(config: &ServeConfig) -> BTreeMap<String, Value> {
        let value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
        let mut sections = BTreeMap::new();
        if let Value::Object(tables) = value(serde_json::to_value(&config.host)) {
            for (name, table) in tables {
                match table {
                    Value::Object(keys) if name == "pipeline" => {
                        for (key, v) in keys {
                            sections.insert(format!("pipeline.{key}"), v);
                        }
                    }
                    table => {
                        sections.insert(name, table);
                    }
                }
            }
        }
        sections.insert("mcp".into(), value(serde_json::to_value(&config.mcp)));
        sections.insert("admin".into(), value(serde_json::to_value(&config.admin)));
        sections.insert("watch".into(), value(serde_json::to_value(&config.watch)));
        sections.insert("import".into(), value(serde_json::to_value(&config.import)));
        sections.insert("oci".into(), value(serde_json::to_value(&config.oci)));
        sections.insert("oauth".into(), value(serde_json::to_value(&config.oauth)));
        sections.insert(
            "plugins".into(),
            value(serde_json::to_value(&config.plugins)),
        );
        sections
    }
    let (old, new) = (sections(old), sections(new));
    let mut changed: Vec<String> = old
        .iter()
        .filter(|(name, value)| new.get(*name) != Some(value))
        .map(|(name, _)| name.clone())
        .collect();
    changed.extend(new.keys().filter(|name| !old.contains_key(*name)).cloned());
    changed
}

/// `a, b, c`, or `none`.
fn list<T: AsRef<str>>(items: &[T]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(", ")
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
        admin: std::env::var_os(crate::admin::TOKEN_ENV).map(|_| AdminConfig {
            tokens: vec![gatehouse_server::admin::AdminTokenConfig {
                principal: "demo-operator".to_owned(),
                roles: vec![
                    gatehouse_server::admin::Role::Approver,
                    gatehouse_server::admin::Role::Operator,
                    gatehouse_server::admin::Role::Auditor,
                ],
                env: Some(crate::admin::TOKEN_ENV.to_owned()),
                file: None,
            }],
            ..AdminConfig::default()
        }),
        watch: None,
        oci: Default::default(),
        plugins: Default::default(),
        import: Default::default(),
        oauth: None,
    };
    let plugins = demo
        .plugins
        .into_iter()
        .map(|(name, bytes)| Plugin {
            label: format!("demo plugin {name}"),
            bytes,
            is_policy: false,
            source: None,
            tag: None,
        })
        .collect();
    Ok((config, plugins))
}

#[cfg(not(feature = "demo"))]
fn demo_plugins() -> Result<(ServeConfig, Plugins), Failure> {
    Err(usage(
        "this build has no demo plugins (build with `--features demo`)",
    ))
}
