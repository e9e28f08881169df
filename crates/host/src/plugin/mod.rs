//! Plugins: packing, verifying, compiling and pre-instantiating signed components.
//!
//! Load phase, once per plugin, in this order (each step refuses with a [`LoadError`] that
//! names the cause):
//! 1. read the top-level sections (a component, not a core module);
//! 2. read the signature block and check it covers these exact bytes (unsigned, tampered);
//! 3. find the trusted key and verify the signature with it (unknown key, bad signature);
//! 4. read and check the embedded manifest (missing, invalid, wrong kind), and for an
//!    adapter, against the capability ids its code handles where `gatehouse pack` recorded
//!    them ([`handles`]);
//! 5. check the key may publish this plugin id (out of scope);
//! 6. for adapters, intersect the operator's egress grants with the manifest's egress requests
//!    and read the bound credentials, and keep what its manifest declares of its caller
//!    (`[caller]`) with the operator's `[[caller.grant]]`;
//! 7. compile, through the digest-keyed, integrity-checked compile cache;
//! 8. pre-instantiate against the world's linker (component not implementing the world).
//!
//! Steps 1-5 are [`crate::Host::verify`], which compiles and executes nothing; [`inspect`]
//! only reads.

pub(crate) mod cache;
pub mod content;
#[cfg(test)]
mod fuzz;
pub mod handles;
pub mod manifest;
#[cfg(test)]
mod props;
pub mod sections;
pub mod signature;
pub(crate) mod trust;

use std::path::Path;
use std::sync::Arc;

pub use cache::CacheOutcome;
use cache::CompileCache;
pub use gatehouse_core::model::PluginRef;
use manifest::{AdapterManifest, Manifest, ManifestError, PluginKind, PolicyManifest};
use sections::{MANIFEST_SECTION, SIGNATURE_SECTION, SectionError};
use signature::{ComponentDigest, SignatureBlock, SignatureError, SigningKey};
use trust::{TrustError, TrustStore};
use wasmtime::component::Component;

use crate::caller::{CallerConfig, CallerGrant};
use crate::egress::{EgressConfig, GrantError, Grants, TlsClient};
use crate::sandbox::{
    Limits, PreparedAdapter, PreparedPolicy, Sandbox, SandboxConfig, WorldMismatch,
};
use crate::stdio::{StdioError, StdioServers};

/// Why a plugin was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not a readable component.
    #[error(transparent)]
    Format(#[from] SectionError),
    /// Unsigned, doubly signed, malformed signature, or tampered bytes.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// Unknown key, bad signature, or key out of scope.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// The manifest declares a capability the code does not handle (as the component's
    /// recorded ids say).
    #[error("{0}")]
    Drift(String),
    /// No manifest section.
    #[error(
        "the component has no `{MANIFEST_SECTION}` section; embed one with `gatehouse pack --manifest`"
    )]
    NoManifest,
    /// More than one manifest section.
    #[error("the component carries {0} manifest sections; expected exactly one")]
    ManyManifests(usize),
    /// The embedded manifest is invalid.
    #[error("invalid embedded manifest: {0}")]
    Manifest(#[from] ManifestError),
    /// The manifest is of the other kind.
    #[error("expected a{} {expected} but the manifest declares a{} {found}", article(*.expected), article(*.found))]
    WrongKind {
        /// What the caller asked to load.
        expected: PluginKind,
        /// What the manifest says.
        found: PluginKind,
    },
    /// Compilation failed.
    #[error("the component does not compile: {0}")]
    Compile(String),
    /// The component does not implement its world.
    #[error(transparent)]
    World(#[from] WorldMismatch),
    /// The operator's egress grants for this adapter do not fit its manifest, or a bound
    /// credential cannot be read.
    #[error(transparent)]
    Egress(#[from] GrantError),
    /// The stdio MCP server the manifest names is not granted, asks for more than its
    /// grant, or its installed package no longer matches the signed pin.
    #[error(transparent)]
    Stdio(#[from] StdioError),
    /// The manifest declares resources, resource templates or prompts, but the component was
    /// built for a contract before 0.6.0, which serves tools only.
    #[error(
        "the manifest declares resources, resource templates or prompts, but the component \
         was built for gatehouse:plugin@0.5.0 or before, which serves tools only; rebuild it \
         against 0.6.0 (gatehouse-sdk's `Adapter::read_resource` and `get_prompt`), or remove \
         them from the manifest"
    )]
    ServesToolsOnly,
}

fn article(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Adapter => "n",
        PluginKind::Policy => "",
    }
}

/// A component that passed steps 1-5: signed by a trusted key that may publish it.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The embedded manifest.
    pub manifest: Manifest,
    /// Digest of the component without its signature (what the key signed).
    pub digest: ComponentDigest,
    /// The signing key's id.
    pub key_id: String,
}

/// An adapter ready to run: verified, compiled and pre-instantiated by one host. Read-only:
/// what was verified is what gets served.
pub struct LoadedAdapter {
    manifest: AdapterManifest,
    plugin: PluginRef,
    cache: CacheOutcome,
    egress: Arc<Grants>,
    caller: Arc<CallerGrant>,
    limits: Limits,
    pre: PreparedAdapter,
}

impl LoadedAdapter {
    /// The same plugin, citing `source` (an `oci://...@sha256:` reference; `None` for a file)
    /// as where it came from: in its install's audit entry and in the records of the calls it
    /// serves.
    pub fn with_source(mut self, source: Option<String>) -> Self {
        self.plugin.source = source;
        self
    }

    /// Its manifest, as signed.
    pub fn manifest(&self) -> &AdapterManifest {
        &self.manifest
    }

    /// Who and what it is.
    pub fn plugin(&self) -> &PluginRef {
        &self.plugin
    }

    /// Whether compilation came from the cache.
    pub fn cache(&self) -> &CacheOutcome {
        &self.cache
    }

    /// What it may reach: the operator's grants intersected with the manifest's requests.
    pub(crate) fn grants(&self) -> Arc<Grants> {
        Arc::clone(&self.egress)
    }

    /// What it may tell and ask its caller: its manifest's `[caller]` table with the
    /// operator's `[[caller.grant]]`.
    pub(crate) fn caller(&self) -> Arc<CallerGrant> {
        Arc::clone(&self.caller)
    }

    /// The budgets of each of its calls (`[sandbox]`, or its `[[sandbox.plugin]]` entry).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The pre-instance every call instantiates.
    pub(crate) fn pre(&self) -> &PreparedAdapter {
        &self.pre
    }
}

/// A policy module ready to run: verified, compiled and pre-instantiated by one host.
/// Read-only, like [`LoadedAdapter`].
pub struct LoadedPolicy {
    manifest: PolicyManifest,
    plugin: PluginRef,
    cache: CacheOutcome,
    limits: Limits,
    pre: PreparedPolicy,
}

impl LoadedPolicy {
    /// The same plugin, citing `source` (an `oci://...@sha256:` reference; `None` for a file)
    /// as where it came from: in its install's audit entry and in the records of the calls it
    /// serves.
    pub fn with_source(mut self, source: Option<String>) -> Self {
        self.plugin.source = source;
        self
    }

    /// Its manifest, as signed.
    pub fn manifest(&self) -> &PolicyManifest {
        &self.manifest
    }

    /// Who and what it is.
    pub fn plugin(&self) -> &PluginRef {
        &self.plugin
    }

    /// Whether compilation came from the cache.
    pub fn cache(&self) -> &CacheOutcome {
        &self.cache
    }

    /// The budgets of each of its evaluations (`[sandbox]`, or its `[[sandbox.plugin]]`
    /// entry).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The pre-instance every evaluation instantiates.
    pub(crate) fn pre(&self) -> &PreparedPolicy {
        &self.pre
    }
}

impl std::fmt::Debug for LoadedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedAdapter")
            .field("plugin", &self.plugin)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for LoadedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPolicy")
            .field("plugin", &self.plugin)
            .finish_non_exhaustive()
    }
}

/// What `inspect` reports: read without trusting or executing anything.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Inspection {
    /// The embedded manifest, if there is a valid one.
    pub manifest: Option<Manifest>,
    /// Why the manifest is missing or invalid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_error: Option<String>,
    /// The signature block, if any (not verified).
    pub signature: Option<SignatureBlock>,
    /// Digest of the component without its signature section.
    pub digest: String,
    /// Size of the file.
    pub size_bytes: usize,
}

/// Reads a component's manifest and signature block without verifying or executing anything.
pub fn inspect(bytes: &[u8]) -> Result<Inspection, SectionError> {
    let list = sections::sections(bytes)?;
    let (manifest, manifest_error) = match read_manifest(&list) {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let signature = sections::custom(&list, SIGNATURE_SECTION)
        .first()
        .and_then(|data| serde_json::from_slice(data).ok());
    Ok(Inspection {
        manifest,
        manifest_error,
        signature,
        digest: ComponentDigest::of(&sections::without(bytes, &list, &[SIGNATURE_SECTION]))
            .to_string(),
        size_bytes: bytes.len(),
    })
}

/// Steps 1-5: checks signature, trust and manifest. Compiles and executes nothing.
pub(crate) fn verify(bytes: &[u8], trust: &TrustStore) -> Result<Verified, LoadError> {
    let list = sections::sections(bytes)?;
    let signed = signature::read_signature(bytes, &list)?;
    let publisher = trust.authenticate(&signed)?;
    let manifest = read_manifest(&list)?;
    if let (Manifest::Adapter(adapter), Some(handled)) = (&manifest, handles::recorded(&list)) {
        let file = format!("the manifest of `{}`", adapter.id);
        for warning in handles::check(adapter, &handled, &file).map_err(LoadError::Drift)? {
            tracing::warn!(adapter = %adapter.id, "{warning}");
        }
    }
    publisher.authorize(manifest.kind(), manifest.id())?;
    Ok(Verified {
        manifest,
        digest: signed.digest,
        key_id: signed.block.key_id,
    })
}

/// Embeds a manifest into a component and signs the result (`gatehouse pack`). Any previous
/// manifest and signature are replaced.
pub fn pack(
    component: &[u8],
    manifest: &Manifest,
    key: &SigningKey,
) -> Result<Vec<u8>, SectionError> {
    let list = sections::sections(component)?;
    let mut bytes = sections::without(component, &list, &[MANIFEST_SECTION, SIGNATURE_SECTION]);
    sections::append_custom(&mut bytes, MANIFEST_SECTION, &manifest.to_json());
    signature::sign(key, &bytes)
}

/// Compiles a component in a throwaway engine and checks that it implements the world of
/// `kind`, so an author learns at pack time (`gatehouse policy pack`; for `gatehouse pack` and
/// `gatehouse import --key`, [`handles::examine`] does it, in a child process within bounds),
/// not at an operator's load time. Checks no signature and runs nothing.
pub fn check_world(bytes: &[u8], kind: PluginKind) -> Result<(), String> {
    compile_checked(bytes, kind).map(drop)
}

/// Runs `component`'s initializer (`wizer-initialize(string)`) once with `input`, in a
/// throwaway engine with no egress and the sandbox's ceilings for budgets, and returns the
/// snapshot of the initialized instance ([`crate::sandbox`]'s `pre_initialize`), checked to
/// implement the `policy` world. `gatehouse policy pack` puts a parsed rule set into the
/// generic Cedar module this way.
pub fn pre_initialize(component: &[u8], input: &str) -> Result<Vec<u8>, String> {
    let defaults = SandboxConfig::default();
    let sandbox = Sandbox::new(SandboxConfig {
        max_concurrent_calls: 1,
        fuel: defaults.max_fuel,
        timeout_ms: defaults.max_timeout_ms,
        memory_mib: defaults.max_memory_mib,
        ..defaults
    })
    .map_err(|e| format!("cannot create the engine: {e:#}"))?;
    // On a thread of its own, so it runs from any context (a runtime or none).
    let snapshot = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a runtime: {e}"))?
                    .block_on(sandbox.pre_initialize(component, input))
            })
            .join()
            .unwrap_or_else(|_| Err("snapshotting the initialized component panicked".to_owned()))
    })?;
    check_world(&snapshot, PluginKind::Policy)?;
    Ok(snapshot)
}

/// [`check_world`]'s throwaway engine, and for an adapter the component prepared in it (to
/// run it once: [`handles::examine`]).
fn compile_checked(
    bytes: &[u8],
    kind: PluginKind,
) -> Result<(Sandbox, Option<PreparedAdapter>), String> {
    let sandbox = Sandbox::new(SandboxConfig {
        max_concurrent_calls: 1,
        ..SandboxConfig::default()
    })
    .map_err(|e| format!("cannot create the engine: {e:#}"))?;
    let component = Component::new(sandbox.engine(), bytes)
        .map_err(|e| format!("the component does not compile: {e:#}"))?;
    let prepared = match kind {
        PluginKind::Adapter => sandbox.prepare_adapter(&component).map(Some),
        PluginKind::Policy => sandbox.prepare_policy(&component).map(|_| None),
    }
    .map_err(|e| format!("{e}; the manifest says kind = \"{kind}\""))?;
    Ok((sandbox, prepared))
}

fn read_manifest(list: &[sections::Section<'_>]) -> Result<Manifest, LoadError> {
    match sections::custom(list, MANIFEST_SECTION).as_slice() {
        [] => Err(LoadError::NoManifest),
        [one] => Ok(Manifest::from_json(one)?),
        many => Err(LoadError::ManyManifests(many.len())),
    }
}

/// What [`load_adapter`] grants from the operator's config: egress (with the TLS client of
/// its `https` requests), stdio servers, and what adapters may ask their callers.
pub(crate) struct AdapterGrants<'a> {
    pub egress: &'a EgressConfig,
    pub tls: &'a TlsClient,
    pub stdio: &'a StdioServers,
    pub caller: &'a CallerConfig,
}

/// Steps 6-8 for an adapter, after [`verify`].
pub(crate) fn load_adapter(
    sandbox: &Sandbox,
    cache: Option<&CompileCache>,
    config: &AdapterGrants<'_>,
    bytes: &[u8],
    verified: Verified,
) -> Result<LoadedAdapter, LoadError> {
    let AdapterGrants {
        egress,
        tls,
        stdio,
        caller,
    } = config;
    let Manifest::Adapter(manifest) = verified.manifest else {
        return Err(LoadError::WrongKind {
            expected: PluginKind::Adapter,
            found: PluginKind::Policy,
        });
    };
    let plugin = plugin_ref(
        &manifest.id,
        &manifest.version,
        &verified.digest,
        verified.key_id,
    );
    let mut grants = Grants::for_adapter(egress, tls, &manifest.id, &manifest.egress)?;
    if let Some(spec) = &manifest.stdio {
        // Its server is told it may ask what the adapter declares it passes on (as the import
        // told it, so it lists the same tools); the operator's grant decides each ask.
        grants.stdio = Some(stdio.prepare(&manifest.id, spec, &manifest.caller.ask)?);
    }
    let egress = Arc::new(grants);
    if let Some(server) = &egress.stdio
        && !egress.rules.is_empty()
    {
        // Its grant names destinations: the server reaches them through the egress proxy.
        server.set_network(crate::egress::network(&egress));
    }
    let secrets = (egress.rules.iter())
        .flat_map(|rule| &rule.credentials)
        .filter_map(|credential| Some((credential.slot.clone(), credential.secret()?.to_vec())))
        .collect();
    let caller = Arc::new(CallerGrant::for_adapter(
        caller,
        &manifest.id,
        &manifest.caller,
        secrets,
    ));
    let (component, cache) = compile(sandbox, cache, &verified.digest, bytes)?;
    let pre = sandbox.prepare_adapter(&component)?;
    if manifest.serves_content() && !pre.serves_content() {
        return Err(LoadError::ServesToolsOnly);
    }
    Ok(LoadedAdapter {
        limits: sandbox.limits_for(&manifest.id),
        manifest,
        plugin,
        cache,
        egress,
        caller,
        pre,
    })
}

/// Steps 7-8 for a policy module, after [`verify`].
pub(crate) fn load_policy(
    sandbox: &Sandbox,
    cache: Option<&CompileCache>,
    bytes: &[u8],
    verified: Verified,
) -> Result<LoadedPolicy, LoadError> {
    let Manifest::Policy(manifest) = verified.manifest else {
        return Err(LoadError::WrongKind {
            expected: PluginKind::Policy,
            found: PluginKind::Adapter,
        });
    };
    let plugin = plugin_ref(
        &manifest.id,
        &manifest.version,
        &verified.digest,
        verified.key_id,
    );
    let (component, cache) = compile(sandbox, cache, &verified.digest, bytes)?;
    let pre = sandbox.prepare_policy(&component)?;
    Ok(LoadedPolicy {
        limits: sandbox.limits_for(&manifest.id),
        manifest,
        plugin,
        cache,
        pre,
    })
}

fn plugin_ref(id: &str, version: &str, digest: &ComponentDigest, key_id: String) -> PluginRef {
    PluginRef {
        id: id.to_owned(),
        version: version.to_owned(),
        digest: digest.to_string(),
        key_id,
        source: None,
    }
}

fn compile(
    sandbox: &Sandbox,
    cache: Option<&CompileCache>,
    digest: &ComponentDigest,
    bytes: &[u8],
) -> Result<(Component, CacheOutcome), LoadError> {
    let compiled = match cache {
        Some(cache) => cache.load_or_compile(sandbox.engine(), digest, bytes),
        None => Component::new(sandbox.engine(), bytes).map(|c| (c, CacheOutcome::Miss)),
    };
    compiled.map_err(|e| LoadError::Compile(format!("{e:#}")))
}

/// Reads a file, naming it in the error.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}
