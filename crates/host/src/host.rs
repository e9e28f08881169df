//! [`Host`]: the library entry point for gateway embedders and the CLI.

use std::sync::Arc;

use gatehouse_core::canonical::canonical_json;
use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::{ApprovalMode, Operation};
use gatehouse_store::{
    Approval, ApprovalFilter, ApprovalLookup, ApprovalStatus, AuditEntry, AuditEvent, AuditQuery,
    CallRecord, Decision, PluginChange, Store, StoreError, VerifyReport, now_ms,
};
use serde_json::Value;

use crate::bindings::types::{Completion, CompletionRef};
use crate::caller::{CallerConfig, CallerConfigError};
use crate::config::HostConfig;
use crate::decisions::{self, Decisions};
use crate::egress::{CallInfo, EgressConfig, EgressGate, FetchError, TlsClient, TlsConfigError};
use crate::metrics::{ApprovalCounts, Metrics};
use crate::pipeline::registry::Listed;
use crate::pipeline::{Pipeline, PipelineError};
use crate::plugin::cache::CompileCache;
use crate::plugin::content::{Prompt, Resource, ResourceTemplate};
use crate::plugin::manifest::Capability;
use crate::plugin::manifest::PluginKind;
use crate::plugin::trust::{TrustConfigError, TrustStore};
use crate::plugin::{self, LoadError, LoadedAdapter, LoadedPolicy, PluginRef, Verified};
use crate::policy::PolicyError;
use crate::sandbox::{Export, Limits, Sandbox, SandboxConfigError, Served};
use crate::skills::Resolution;
use crate::stdio::StdioServers;

mod floor;
#[cfg(test)]
mod tests;

pub use floor::{AllowedDowngrade, FloorError};
use floor::{Floors, check_downgrade};

/// The most values a completion answers (MCP's limit).
const MAX_COMPLETIONS: usize = 100;

/// Why a host could not be built from its config.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The trust config is invalid.
    #[error(transparent)]
    Trust(#[from] TrustConfigError),
    /// A `[sandbox]` budget is out of range.
    #[error(transparent)]
    Sandbox(#[from] SandboxConfigError),
    /// A `[caller]` grant is out of range.
    #[error(transparent)]
    Caller(#[from] CallerConfigError),
    /// The engine could not be created.
    #[error("cannot create the WebAssembly engine: {0}")]
    Engine(String),
    /// The `[pipeline]` config is invalid.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The TLS client for `https` egress cannot be built (a bad `extra_root_certificates` file).
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
    /// The state store cannot be opened (corrupt, unwritable, newer schema).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a plugin was not installed. The serving version, if any, is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// Verification or loading failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The adapter's schemas do not compile.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The policy's config schema rejects a binding's config.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The adapter was loaded by another host (with its own engine and trust), so this one
    /// cannot vouch for it.
    #[error(
        "`{0}` was loaded by another host; load it with this host's `load_adapter` before serving it"
    )]
    ForeignAdapter(String),
    /// The plugin's version is lower than the one serving under its id, or than the one its
    /// id last served as the store recorded it (a downgrade, perhaps to a version with a
    /// known flaw: see [`Host::hold_floor`]). The operator can force it.
    #[error(
        "`{id}` {offered} is older than {serving}, the version serving or last served under \
         that id; refusing the downgrade. If you mean it, install it with \
         `force_install_adapter` / `force_install_policy`"
    )]
    Downgrade {
        /// The plugin id.
        id: String,
        /// The serving version, or the recorded one if higher.
        serving: String,
        /// The version offered.
        offered: String,
    },
}

/// The gatehouse host: verifies and loads signed plugins and runs calls in fresh sandboxes.
///
/// Build it with [`Host::new`] from a [`HostConfig`]; install adapters with
/// [`Host::install_adapter`] and policy modules with [`Host::install_policy`]; run calls with
/// [`Host::call`]. Defaults (all deny): no trusted publisher, no tool visible to any tenant, no
/// policy bound and `policy_default = "deny"`, no skills; budgets as in
/// [`SandboxConfig`](crate::sandbox::SandboxConfig).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use gatehouse_host::{Host, HostConfig, ToolCallEnvelope};
///
/// let config = HostConfig::from_file("gatehouse.toml".as_ref())?;
/// let host = Host::new(config)?;
/// host.install_adapter(&std::fs::read("echo.signed.wasm")?)?;
/// let call = ToolCallEnvelope::new("acme", "gatehouse.echo.echo", serde_json::json!({ "message": "hi" }));
/// let result = host.call(call).await;
/// println!("{}", serde_json::to_string_pretty(&result)?);
/// # Ok(()) }
/// ```
pub struct Host {
    sandbox: Sandbox,
    trust: TrustStore,
    cache: Option<CompileCache>,
    egress: EgressConfig,
    stdio: Arc<StdioServers>,
    caller: CallerConfig,
    tls: TlsClient,
    pipeline: Pipeline,
    metrics: Metrics,
    decisions: Decisions,
    /// The version each plugin last served, once [`Host::hold_floor`] read them.
    floors: Floors,
}

/// A serving policy module, for operators: its version, the versions a rollback would put
/// back (the next one last), and the config of each binding naming it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PolicyModule {
    /// The serving version.
    #[serde(flatten)]
    pub plugin: PluginRef,
    /// What [`Host::rollback_policy`] can put back, the next one last.
    pub previous: Vec<PluginRef>,
    /// The config of every `[[pipeline.policy]]` binding of the module, in binding order.
    pub configs: Vec<Value>,
    /// How many of its bindings are in shadow mode ([`Host::promote_policy`] makes them
    /// enforcing).
    pub shadow_bindings: usize,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("trust", &self.trust)
            .field("limits", self.sandbox.limits())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Builds a host: checks the trust config, loads the TLS roots for `https` egress, creates
    /// the engine, opens the cache. A cache
    /// that cannot be opened is logged and skipped (compilation still works, just slower).
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        let store = gatehouse_store::open(&config.store)?;
        Self::with_store(config, store)
    }

    /// Builds a host over a store of the embedder's choosing (the store in `config` is not
    /// opened; its approval settings still apply).
    pub fn with_store(config: HostConfig, store: Arc<dyn Store>) -> Result<Self, HostError> {
        config.sandbox.check()?;
        config.caller.check()?;
        let trust = TrustStore::new(&config.trust)?;
        let pipeline = Pipeline::new(
            &config.pipeline,
            &config.sessions,
            &config.receipts,
            config.egress.delegation_key_file.as_deref(),
            store,
            config.store.clone(),
        )?;
        let tls = TlsClient::from_config(&config.egress)?;
        let sandbox =
            Sandbox::new(config.sandbox).map_err(|e| HostError::Engine(format!("{e:#}")))?;
        let cache = if config.cache.enabled {
            let dir = config.cache.resolved_dir();
            CompileCache::open(&dir)
                .inspect_err(|e| tracing::warn!(error = %e, "compile cache disabled"))
                .ok()
        } else {
            None
        };
        Ok(Self {
            sandbox,
            trust,
            cache,
            egress: config.egress,
            stdio: Arc::new(StdioServers::new(config.stdio)),
            caller: config.caller,
            tls,
            metrics: Metrics::new(pipeline.commits.clone()),
            pipeline,
            decisions: Decisions::default(),
            floors: Floors::default(),
        })
    }

    /// Gives the pipeline the account broker that keeps callers' own tokens, for grants whose
    /// credential is one (`oauth = "..."`, [`crate::accounts`]). Without one, such a call fails
    /// `CONNECTION_UNAVAILABLE`.
    pub fn set_accounts(&mut self, accounts: Arc<dyn crate::accounts::Accounts>) {
        self.pipeline.accounts = Some(accounts);
    }

    /// Sends `request` for the served adapter `adapter` the one way its own calls go out: the
    /// egress gate, with that adapter's grants (their rules, address checks, headers and
    /// credentials, and nothing else), as a `read_only` call (safe methods, and the methods a
    /// grant names in `read_methods`), within `[egress]`'s budgets. For requests the gateway
    /// makes on an adapter's behalf, such as `[import] drift_check`. `None` when no adapter
    /// of that id is served.
    pub async fn fetch_for_adapter(
        &self,
        adapter: &str,
        request: http::Request<bytes::Bytes>,
    ) -> Option<Result<http::Response<bytes::Bytes>, FetchError>> {
        let grants = self.pipeline.registry.grants_of(adapter)?;
        let gate = EgressGate::new(
            grants,
            CallInfo::new(
                ApprovalMode::ReadOnly,
                gatehouse_core::ids::trace_id(),
                None,
            ),
        );
        Some(gate.fetch(request).await)
    }

    /// The stdio MCP servers of the served adapters (`[stdio]`): their states, and their
    /// shutdown.
    pub fn stdio(&self) -> &StdioServers {
        &self.stdio
    }

    /// The TLS client of this host's `https` requests, built from `[egress]`'s root
    /// certificates: egress uses it, and so does every other `https` request made for this
    /// host (the MCP endpoint's JWKS fetches, for one).
    pub fn tls(&self) -> &TlsClient {
        &self.tls
    }

    /// Checks signature, trust scope and manifest without compiling or executing anything.
    pub fn verify(&self, bytes: &[u8]) -> Result<Verified, LoadError> {
        plugin::verify(bytes, &self.trust)
    }

    /// Verifies, compiles (or loads from the cache) and pre-instantiates an adapter.
    pub fn load_adapter(&self, bytes: &[u8]) -> Result<LoadedAdapter, LoadError> {
        self.load_verified_adapter(bytes, self.verify(bytes)?)
    }

    fn load_verified_adapter(
        &self,
        bytes: &[u8],
        verified: Verified,
    ) -> Result<LoadedAdapter, LoadError> {
        let grants = plugin::AdapterGrants {
            egress: &self.egress,
            tls: &self.tls,
            stdio: &self.stdio,
            caller: &self.caller,
        };
        plugin::load_adapter(&self.sandbox, self.cache.as_ref(), &grants, bytes, verified)
    }

    /// Verifies, compiles (or loads from the cache) and pre-instantiates a policy module.
    pub fn load_policy(&self, bytes: &[u8]) -> Result<LoadedPolicy, LoadError> {
        let verified = self.verify(bytes)?;
        plugin::load_policy(&self.sandbox, self.cache.as_ref(), bytes, verified)
    }

    /// Verifies and loads an adapter, compiles its schemas, and serves it: a new adapter id is
    /// added, an existing one replaced atomically (calls in flight finish on the old one).
    /// A version lower than the serving one is refused ([`InstallError::Downgrade`]), and,
    /// once [`Host::hold_floor`] ran, one lower than the version its id last served.
    pub fn install_adapter(&self, bytes: &[u8]) -> Result<PluginRef, InstallError> {
        self.serve_adapter(self.load_adapter(bytes)?)
    }

    /// [`Host::install_adapter`], a downgrade included: the operator's explicit choice.
    pub fn force_install_adapter(&self, bytes: &[u8]) -> Result<PluginRef, InstallError> {
        self.serve(self.load_adapter(bytes)?, true)
    }

    /// Serves an adapter this host loaded with [`Host::load_adapter`] (see
    /// [`Host::install_adapter`]). An adapter loaded by another host is refused.
    pub fn serve_adapter(&self, adapter: LoadedAdapter) -> Result<PluginRef, InstallError> {
        self.serve(adapter, false)
    }

    fn serve(&self, adapter: LoadedAdapter, force: bool) -> Result<PluginRef, InstallError> {
        let plugin = adapter.plugin().clone();
        if !wasmtime::Engine::same(adapter.pre().engine(), self.sandbox.engine()) {
            return Err(InstallError::ForeignAdapter(plugin.id));
        }
        if !force {
            let serving = self.pipeline.registry.serving_version(&plugin.id);
            let floor = self.floors.get(PluginKind::Adapter, &plugin.id);
            check_downgrade(&plugin.id, [serving, floor], &plugin.version)?;
        }
        self.pipeline.install_adapter(adapter)?;
        self.floors.served(PluginKind::Adapter, &plugin);
        Ok(plugin)
    }

    /// Verifies and loads a policy module and swaps it in atomically after checking every
    /// binding's config against its config schema. Calls in flight finish on the version they
    /// started with. On any error the serving version keeps serving.
    /// A version lower than the serving one is refused ([`InstallError::Downgrade`]), also
    /// when it arrives through the watched policy directory, and, once [`Host::hold_floor`]
    /// ran, one lower than the version its id last served.
    pub fn install_policy(&self, bytes: &[u8]) -> Result<PluginRef, InstallError> {
        self.swap_policy(self.load_policy(bytes)?, false)
    }

    /// Serves a policy module this host loaded with [`Host::load_policy`] (see
    /// [`Host::install_policy`]).
    pub fn serve_policy(&self, policy: LoadedPolicy) -> Result<PluginRef, InstallError> {
        self.swap_policy(policy, false)
    }

    /// [`Host::install_policy`], a downgrade included: the operator's explicit choice.
    pub fn force_install_policy(&self, bytes: &[u8]) -> Result<PluginRef, InstallError> {
        self.swap_policy(self.load_policy(bytes)?, true)
    }

    fn swap_policy(&self, policy: LoadedPolicy, force: bool) -> Result<PluginRef, InstallError> {
        if !force {
            let plugin = policy.plugin();
            let serving = self.policy_version(&plugin.id).map(|p| p.version);
            let floor = self.floors.get(PluginKind::Policy, &plugin.id);
            check_downgrade(&plugin.id, [serving, floor], &plugin.version)?;
        }
        let plugin = self.pipeline.policies.install(policy)?;
        self.floors.served(PluginKind::Policy, &plugin);
        Ok(plugin)
    }

    /// Verifies and installs a signed adapter or policy module, whichever its manifest says it
    /// is: exactly [`Host::install_adapter`] or [`Host::install_policy`] (same signature,
    /// trust, load and config checks), for callers that take either (the admin API's upload).
    pub fn install(&self, bytes: &[u8]) -> Result<(PluginKind, PluginRef), InstallError> {
        self.install_from(bytes, None)
    }

    /// [`Host::install`] of a component fetched from `source` (an `oci://...@sha256:`
    /// reference), which its install and the calls it serves then cite
    /// ([`PluginRef::source`]).
    pub fn install_from(
        &self,
        bytes: &[u8],
        source: Option<String>,
    ) -> Result<(PluginKind, PluginRef), InstallError> {
        let verified = self.verify(bytes)?;
        let kind = verified.manifest.kind();
        let plugin = match kind {
            PluginKind::Adapter => {
                let adapter = self.load_verified_adapter(bytes, verified)?;
                self.serve_adapter(adapter.with_source(source))?
            }
            PluginKind::Policy => {
                let policy =
                    plugin::load_policy(&self.sandbox, self.cache.as_ref(), bytes, verified)?;
                self.swap_policy(policy.with_source(source), false)?
            }
        };
        Ok((kind, plugin))
    }

    /// The installed adapters, sorted by id.
    pub fn adapters(&self) -> Vec<PluginRef> {
        self.pipeline.registry.adapters()
    }

    /// The installed policy modules, sorted by id.
    pub fn policies(&self) -> Vec<PolicyModule> {
        let set = self.pipeline.policies.snapshot();
        set.modules()
            .map(|plugin| PolicyModule {
                plugin: plugin.clone(),
                previous: self.pipeline.policies.previous(&plugin.id),
                configs: set.configs(&plugin.id).into_iter().cloned().collect(),
                shadow_bindings: set.shadow_bindings(&plugin.id),
            })
            .collect()
    }

    /// Appends a change to what this host serves to the audit log, durably, as an entry of
    /// kind `plugin` by principal `by`; `record` says what changed. The admin API and the
    /// watched policy directory record every install, rollback and config change here; the
    /// library's install methods record nothing by themselves (start-up loads are not
    /// changes).
    pub async fn audit_plugin_change(&self, by: &str, record: &Value) -> Result<(), StoreError> {
        self.audit_event("plugin", by, record).await
    }

    /// Appends an operator's act of kind `kind` (`plugin`, `reveal`...) by `by` to the audit
    /// log, durably, with `record` as its record.
    pub async fn audit_event(
        &self,
        kind: &str,
        by: &str,
        record: &Value,
    ) -> Result<(), StoreError> {
        self.pipeline
            .store
            .record(CallRecord {
                audit: AuditEvent {
                    kind: kind.to_owned(),
                    tool_call_id: None,
                    tenant: None,
                    principal: Some(by.to_owned()),
                    tool: None,
                    outcome: None,
                    record: canonical_json(record),
                    at_ms: now_ms(),
                },
                completes: None,
                releases: None,
                executes: None,
                durable: true,
                session: None,
            })
            .await
    }

    /// Applies again, in the order they were made, the changes operators made to the serving
    /// plugins through the admin API (kept in the store: [`PluginChange`]), on top of what is
    /// installed now (the config's plugins): so a restarted gateway serves what the stopped
    /// one served. This is the precedence: **the config's plugins first, then the stored
    /// changes**. An install is verified again, signature and trust, exactly like a file; one
    /// refused now, or older than the config's version of the plugin (never a downgrade), is
    /// skipped and logged, and the config's version serves. Returns, per plugin id a change
    /// took effect for, where its serving version (or binding config) comes from.
    pub async fn restore_plugin_changes(
        &self,
    ) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
        use base64::Engine as _;
        let mut sources = std::collections::BTreeMap::new();
        for change in self.pipeline.store.plugin_changes().await? {
            let id = change.plugin().to_owned();
            let applied = match &change {
                PluginChange::Install {
                    component,
                    source,
                    at_ms,
                    ..
                } => base64::engine::general_purpose::STANDARD
                    .decode(component)
                    .map_err(|e| format!("the stored component does not decode: {e}"))
                    .and_then(|bytes| {
                        (self.install_from(&bytes, source.clone())).map_err(|e| e.to_string())
                    })
                    .map(|(_, plugin)| {
                        let pulled = source
                            .as_ref()
                            .map_or_else(String::new, |source| format!(" (pulled from {source})"));
                        format!(
                            "{} {} ({}) from the state store: installed through the admin API at {at_ms} ms{pulled}",
                            plugin.id, plugin.version, plugin.digest
                        )
                    }),
                PluginChange::Rollback { at_ms, .. } => self
                    .rollback_policy(&id)
                    .map_err(|e| e.to_string())
                    .map(|plugin| {
                        format!(
                            "{} {} ({}) from the state store: rolled back through the admin API at {at_ms} ms",
                            plugin.id, plugin.version, plugin.digest
                        )
                    }),
                PluginChange::Promote { at_ms, .. } => self
                    .promote_policy(&id)
                    .map_err(|e| e.to_string())
                    .map(|bindings| {
                        format!(
                            "{id}: {bindings} shadow binding(s) enforcing, from the state store: promoted through the admin API at {at_ms} ms"
                        )
                    }),
                PluginChange::SetConfig { config, at_ms, .. } => self
                    .set_policy_config(&id, config)
                    .map_err(|e| e.to_string())
                    .map(|()| {
                        let serving = self.policy_version(&id).map_or_else(
                            || format!("{id} (not installed)"),
                            |p| {
                                sources.get(&id).cloned().unwrap_or_else(|| {
                                    format!("{} {} ({})", p.id, p.version, p.digest)
                                })
                            },
                        );
                        format!(
                            "{serving}; binding config from the state store: set through the admin API at {at_ms} ms"
                        )
                    }),
            };
            match applied {
                Ok(source) => {
                    sources.insert(id, source);
                }
                Err(error) => tracing::warn!(
                    plugin = %id,
                    action = change.action(),
                    %error,
                    "a plugin change made through the admin API does not apply at start; the config's version serves"
                ),
            }
        }
        Ok(sources)
    }

    /// Counts one request refused with 401 by a listener in front of this host (`mcp` or
    /// `admin`: the `listener` label of `gatehouse_unauthorized_requests_total`).
    pub fn count_unauthorized(&self, listener: &'static str) {
        self.metrics.unauthorized(listener);
    }

    /// The host's metrics in the Prometheus text format (see [`crate::metrics`]); reads the
    /// pending approvals from the store.
    ///
    /// A store that does not answer is reported as `gatehouse_store_up 0`, not as an error, so
    /// a scrape still sees it.
    pub async fn metrics_text(&self) -> Result<String, StoreError> {
        let now = now_ms();
        let approvals = self
            .pipeline
            .store
            .approvals(ApprovalFilter {
                status: None,
                tenant: None,
                limit: usize::MAX,
            })
            .await
            .inspect_err(|error| tracing::warn!(%error, "metrics: the state store did not answer"))
            .ok()
            .map(|approvals| {
                let mut counts = ApprovalCounts::default();
                for approval in &approvals {
                    let count = match approval.status {
                        _ if approval.expired(now) => &mut counts.expired,
                        ApprovalStatus::Pending => &mut counts.pending,
                        ApprovalStatus::Approved => &mut counts.approved,
                        ApprovalStatus::Executed => &mut counts.executed,
                        ApprovalStatus::Rejected => &mut counts.rejected,
                    };
                    *count += 1;
                }
                counts
            });
        Ok(self.metrics.encode(approvals, self.sandbox.slots()))
    }

    /// Whether the host can serve: its store answers a read.
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.pipeline
            .store
            .approvals(ApprovalFilter {
                limit: 1,
                ..ApprovalFilter::default()
            })
            .await
            .map(drop)
    }

    /// Puts back the policy version the last install of `module` replaced: an operator's
    /// downgrade, never refused (record it as [`ServedAs::Downgrade`](gatehouse_store::ServedAs)
    /// with [`Host::record_served`]).
    pub fn rollback_policy(&self, module: &str) -> Result<PluginRef, PolicyError> {
        let plugin = self.pipeline.policies.rollback(module)?;
        self.floors.served(PluginKind::Policy, &plugin);
        Ok(plugin)
    }

    /// Promotes every shadow binding of `module` to enforcing, atomically; returns how many.
    /// Audit it ([`Host::audit_plugin_change`]): the admin API does.
    pub fn promote_policy(&self, module: &str) -> Result<usize, PolicyError> {
        self.pipeline.policies.promote(module)
    }

    /// Replaces the config of every binding of `module`, atomically, after checking it
    /// against the module's config schema.
    pub fn set_policy_config(&self, module: &str, config: &Value) -> Result<(), PolicyError> {
        self.pipeline.policies.set_config(module, config)
    }

    /// The serving version of a policy module.
    pub fn policy_version(&self, module: &str) -> Option<PluginRef> {
        self.pipeline.policies.snapshot().module(module).cloned()
    }

    /// The tools `tenant` may see and call, sorted. Skills never change this list.
    pub fn visible_tools(&self, tenant: &str) -> Vec<String> {
        self.tool_catalog(tenant)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    /// Opens the delegation a peer calling back presents (the header
    /// [`HEADER`](crate::delegation::HEADER) its request carries) for a caller of `tenant`: the
    /// delegating call a front end starts the envelope from
    /// ([`Delegation::delegate`](crate::delegation::Delegation::delegate)), or why the call
    /// is refused.
    pub fn open_delegation(
        &self,
        token: &str,
        tenant: &str,
    ) -> Result<crate::delegation::Delegation, crate::delegation::DelegationError> {
        (self.pipeline.delegations).open(token, tenant, now_ms())
    }

    /// The tools `tenant` may see and call, sorted by name, with their capabilities (what MCP
    /// `tools/list` shows).
    pub fn tool_catalog(&self, tenant: &str) -> Vec<(String, Capability)> {
        self.pipeline.registry.catalog(tenant)
    }

    /// What `read` makes of tool `name`'s capability, if `tenant` may call it: one tool of
    /// [`Host::tool_catalog`], without listing (or copying) the rest.
    pub fn with_tool<R>(
        &self,
        tenant: &str,
        name: &str,
        read: impl FnOnce(&Capability) -> R,
    ) -> Option<R> {
        (self.pipeline.registry).with_capability(tenant, name, Operation::CallTool, read)
    }

    /// The resources `tenant` may read, sorted by name (what MCP `resources/list` shows).
    pub fn resource_catalog(&self, tenant: &str) -> Vec<Listed<Resource>> {
        self.pipeline.registry.resources(tenant)
    }

    /// The resource templates `tenant` may read, sorted by name (`resources/templates/list`).
    pub fn template_catalog(&self, tenant: &str) -> Vec<Listed<ResourceTemplate>> {
        self.pipeline.registry.templates(tenant)
    }

    /// The prompts `tenant` may fill in, sorted by name (`prompts/list`).
    pub fn prompt_catalog(&self, tenant: &str) -> Vec<Listed<Prompt>> {
        self.pipeline.registry.prompts(tenant)
    }

    /// The resource `tenant` may read at `uri`: its name (`<adapter id>.<id>`) and the read's
    /// arguments, for a call with [`Operation::ReadResource`](gatehouse_core::model::Operation).
    /// `None` if no resource the tenant may see is at `uri`.
    pub fn resource_at(&self, tenant: &str, uri: &str) -> Option<(String, Value)> {
        self.pipeline.registry.resource_at(tenant, uri)
    }

    /// Suggested values for an argument of a prompt (by its name, `<adapter id>.<id>`) or a
    /// parameter of a resource template (by its URI template) `tenant` may see: the adapter's
    /// `complete` export, run in the sandbox within its limits, its requests through its
    /// egress grants at mode `read_only`. Not a governed call (it reads nothing the caller
    /// gets but names of values, and is not recorded). `None` if there is no such prompt or
    /// template for the tenant; an adapter's failure is an empty completion, logged.
    pub async fn complete(
        &self,
        tenant: &str,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &Value,
    ) -> Option<Completion> {
        let registry = &self.pipeline.registry;
        let (tool, reference) = match reference {
            CompletionRef::Prompt(name) => {
                let tool = registry.lookup(tenant, name, Operation::GetPrompt)?;
                let id = tool.capability().id.clone();
                (tool, CompletionRef::Prompt(id))
            }
            CompletionRef::Resource(template) => {
                let listed = (registry.templates(tenant).into_iter())
                    .find(|t| &t.entry.uri_template == template)?;
                let tool = registry.lookup(tenant, &listed.name, Operation::ReadResource)?;
                (tool, CompletionRef::Resource(template.clone()))
            }
        };
        let adapter = tool.adapter();
        let trace_id = gatehouse_core::ids::trace_id();
        let ctx = crate::bindings::types::CallContext {
            tool_call_id: gatehouse_core::ids::tool_call_id(),
            trace_id: trace_id.clone(),
            tenant: tenant.to_owned(),
            principals: Vec::new(),
            approval_mode: ApprovalMode::ReadOnly.into(),
            idempotency_key: None,
            skill_context: None,
            upstream: tool.capability().upstream.as_ref().map(ToString::to_string),
        };
        let egress = EgressGate::new(
            adapter.grants(),
            CallInfo::new(ApprovalMode::ReadOnly, &trace_id, None).for_tenant(tenant),
        );
        let report = self
            .sandbox
            .run_adapter(
                adapter.pre(),
                adapter.limits(),
                egress,
                crate::caller::CallerGate::none(),
                &ctx,
                Export::Complete {
                    reference: &reference,
                    argument,
                    value,
                    context: &context.to_string(),
                },
            )
            .await;
        let mut completion = match report.outcome {
            Ok(Ok(Served::Completion(completion))) => completion,
            other => {
                tracing::warn!(tool = %tool.name, outcome = ?other.map(|r| r.map(drop)), "a completion failed; answering none");
                Completion {
                    values: Vec::new(),
                    total: None,
                    has_more: false,
                }
            }
        };
        if completion.values.len() > MAX_COMPLETIONS {
            completion.values.truncate(MAX_COMPLETIONS);
            completion.has_more = true;
        }
        Some(completion)
    }

    /// Whether `tool`, as `tenant` sees it, declares the top-level argument `argument` in its
    /// input schema: false for a tool it may not see, and for a meta-tool.
    pub fn declares_argument(&self, tenant: &str, tool: &str, argument: &str) -> bool {
        self.pipeline
            .registry
            .declares_argument(tenant, tool, argument)
    }

    /// Whether `tool` is a capability marked `sensitive`: its arguments and results are kept
    /// as hashes in the audit log and shown masked to people.
    pub fn is_sensitive(&self, tool: &str) -> bool {
        self.pipeline.registry.is_sensitive(tool)
    }

    /// A call's arguments as approvers see them (the admin API, the console, a consent form):
    /// each top-level value of a capability marked `sensitive` replaced by its hash, as the
    /// audit log keeps them; any other tool's as they are.
    pub fn approver_view(&self, tool: &str, args: &Value) -> Value {
        if !self.is_sensitive(tool) {
            return args.clone();
        }
        match args {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| (key.clone(), gatehouse_core::canonical::redacted(value)))
                    .collect(),
            ),
            other => gatehouse_core::canonical::redacted(other),
        }
    }

    /// The skills resolution trace for a call of `tool` by `tenant` and `users`: the text
    /// the adapter would receive and which skills matched at each level.
    pub fn resolve_skills(&self, tenant: &str, tool: &str, users: &[&str]) -> Resolution {
        self.pipeline.skills.resolve(tenant, tool, users)
    }

    /// The public half of the key results' receipts are signed with (`[receipts] key`), if
    /// receipts are on: what a caller verifies them with.
    pub fn receipt_key(&self) -> Option<gatehouse_core::keys::PublicKey> {
        self.pipeline.receipt_key()
    }

    /// The state store (idempotency records, approvals, audit log).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.pipeline.store
    }

    /// Approvals, newest first.
    pub async fn approvals(&self, filter: ApprovalFilter) -> Result<Vec<Approval>, StoreError> {
        self.pipeline.store.approvals(filter).await
    }

    /// Where an approver decides approval `id` (`[store] approval_url`), if configured.
    pub fn approval_url(&self, id: &str) -> Option<String> {
        self.pipeline
            .store_config()
            .approval_url
            .as_ref()
            .map(|url| url.replace("{id}", id))
    }

    /// One approval.
    pub async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        self.pipeline
            .store
            .approval(ApprovalLookup::Id(id.to_owned()))
            .await
    }

    /// Approves (or rejects) a pending approval as principal `by`. Refused if `by` is in the
    /// requesting chain (unless `[store] allow_self_approval`), or the approval is decided or
    /// expired. The caller's next call with the same request then runs, once.
    pub async fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        reason: &str,
    ) -> Result<Approval, StoreError> {
        self.decided(
            self.pipeline
                .store_config()
                .decision(id, approve, by, reason),
        )
        .await
    }

    /// The calling user's own decision on approval `id` (MCP consent through a form
    /// elicitation, `[mcp] consent_modes`): `by` must be in the requesting chain, and the
    /// self-approval rule does not apply; recorded as consent in the approval and the audit log.
    pub async fn consent(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        reason: &str,
    ) -> Result<Approval, StoreError> {
        self.decided(
            self.pipeline
                .store_config()
                .consent(id, approve, by, reason),
        )
        .await
    }

    /// The caller withdraws its own pending proposal (an MCP task cancelled before its
    /// approval was decided): `by` must be in the requesting chain; the approval ends rejected,
    /// recorded as withdrawn by the caller.
    pub async fn withdraw(&self, id: &str, by: &str, reason: &str) -> Result<Approval, StoreError> {
        let decision = self.pipeline.store_config().withdrawal(id, by, reason);
        self.decided(decision).await
    }

    async fn decided(&self, decision: Decision) -> Result<Approval, StoreError> {
        let id = decision.id.clone();
        let decided = self.pipeline.store.decide(decision).await;
        self.decisions.wake(&id);
        decided
    }

    /// Waits until approval `id` is decided, expires, or `until` passes, whichever is first,
    /// and returns it as it then stands (`None`: there is no such approval). See
    /// [`crate::decisions`]: a decision through this host wakes the wait at once, one made by
    /// another process within [`decisions::POLL`].
    pub async fn await_decision(
        &self,
        id: &str,
        until: tokio::time::Instant,
    ) -> Result<Option<Approval>, StoreError> {
        loop {
            let notify = self.decisions.watch(id);
            let decided = notify.notified();
            tokio::pin!(decided);
            decided.as_mut().enable();
            let approval = self.approval(id).await;
            let now = tokio::time::Instant::now();
            let done = match &approval {
                Err(_) | Ok(None) => true,
                Ok(Some(approval)) => {
                    approval.status != ApprovalStatus::Pending
                        || approval.expired(now_ms())
                        || now >= until
                }
            };
            if done {
                self.decisions.forget(id, &notify);
                return approval;
            }
            tokio::select! {
                () = &mut decided => {}
                () = tokio::time::sleep(decisions::POLL.min(until - now)) => {}
            }
        }
    }

    /// Woken by every decision made through this host: what a loop that runs approved work
    /// (the MCP task runner) sleeps on between its reads of the store.
    pub fn decided_here(&self) -> Arc<tokio::sync::Notify> {
        self.decisions.any()
    }

    /// How long sessions live (`[sessions]`).
    pub fn session_limits(&self) -> gatehouse_store::SessionLimits {
        self.pipeline.session_limits()
    }

    /// `[sessions]`: its limits and the operator's labels.
    pub fn sessions(&self) -> &crate::config::SessionsConfig {
        self.pipeline.sessions()
    }

    /// Audit entries, in log order.
    pub async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        self.pipeline.store.audit(query).await
    }

    /// Checks the whole audit chain.
    pub async fn verify_audit(&self) -> Result<VerifyReport, StoreError> {
        self.pipeline.store.verify_audit().await
    }

    /// The policy gate alone, for a recorded action (`gatehouse replay`): the serving modules
    /// and bindings evaluate it; nothing else runs.
    /// The flow rules see what the action records they saw (`flows`).
    pub async fn evaluate_policy(
        &self,
        tool: &str,
        mut action: gatehouse_core::model::ActionRecord,
    ) -> gatehouse_core::model::DecisionRecord {
        let set = self.pipeline.policies.snapshot();
        let facts = std::mem::take(&mut action.flows);
        crate::policy::evaluate(&set, &self.sandbox, tool, action.into(), &facts).await
    }

    /// Keeps gate 4's rate budgets in `budget` instead of this process's memory (e.g. a
    /// budget several gateways share). Call before serving.
    pub fn with_rate_budget(mut self, budget: Arc<dyn crate::config::RateBudget>) -> Self {
        self.pipeline.set_rate_budget(budget);
        self
    }

    /// The per-call budgets in force.
    pub fn limits(&self) -> &Limits {
        self.sandbox.limits()
    }

    /// Runs one governed call through every gate, in order (see [`crate::pipeline`]). Never
    /// fails: every refusal or failure is a result envelope with a status and an outcome code.
    ///
    /// This is the operator's full record (policy decision, egress attempts, engine and store
    /// errors): deliver [`Host::call_for_caller`] (or [`crate::caller_view`] of this) to the
    /// caller that asked.
    pub async fn call(&self, call: ToolCallEnvelope) -> ToolResultEnvelope {
        self.run(call, None).await
    }

    /// [`Host::call`], its adapter's host calls to its caller carried to `relay`.
    async fn run(
        &self,
        call: ToolCallEnvelope,
        relay: Option<Arc<dyn crate::relay::Relay>>,
    ) -> ToolResultEnvelope {
        let started = std::time::Instant::now();
        let result = self.pipeline.run(&self.sandbox, call, relay).await;
        self.metrics.observe(&result, started.elapsed());
        result
    }

    /// [`Host::call`], delivered as the caller sees it ([`crate::caller_view`]): outcome codes
    /// and model-useful messages, none of the gateway's internals. The full record is in the
    /// logs and the audit log.
    pub async fn call_for_caller(&self, call: ToolCallEnvelope) -> ToolResultEnvelope {
        crate::pipeline::deliver::caller_view(&self.call(call).await)
    }

    /// [`Host::call_for_caller`], with what the adapter tells and asks its caller while it
    /// runs (contract 0.5.0: progress, log lines, elicitation, sampling, roots) carried to
    /// `relay` ([`crate::relay`]), as far as its manifest declares and the operator grants.
    /// The full record, with each ask and its answer, is in the logs and the audit log.
    pub async fn call_relayed(
        &self,
        call: ToolCallEnvelope,
        relay: Arc<dyn crate::relay::Relay>,
    ) -> ToolResultEnvelope {
        crate::pipeline::deliver::caller_view(&self.run(call, Some(relay)).await)
    }
}
