//! The registry of installed adapters and the operator's tool grants: which tools exist, and
//! which tenant may see which of them.
//!
//! An adapter is installed with its capabilities' schemas compiled ([`Schemas`]), replacing
//! any serving version of the same id atomically (calls in flight keep the one they resolved).
//! A tool is visible to a tenant when some `[[pipeline.tool]]` grant's glob matches its name
//! and lists the tenant; the constraints of every matching grant apply to its arguments.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::pipeline::config::ToolGrant;
use crate::pipeline::validate::{CompiledConstraints, Schemas, ValidateError};
use crate::plugin::LoadedAdapter;
use crate::plugin::manifest::Capability;

/// A `[[pipeline.tool]]` grant that cannot be used (reported at start-up).
#[derive(Debug, thiserror::Error)]
#[error("[[pipeline.tool]] #{index}: {source}")]
pub struct ToolGrantError {
    /// Index of the grant.
    pub index: usize,
    /// What is wrong with it.
    pub source: ValidateError,
}

/// An installed adapter with its capabilities' compiled schemas.
#[derive(Debug)]
pub struct InstalledAdapter {
    loaded: LoadedAdapter,
    /// Compiled schemas, in the order of the manifest's capabilities.
    schemas: Vec<Schemas>,
}

impl InstalledAdapter {
    /// Compiles the schemas of every capability of `adapter`.
    pub fn new(loaded: LoadedAdapter) -> Result<Self, ValidateError> {
        let schemas = loaded
            .manifest()
            .capabilities
            .iter()
            .map(Schemas::compile)
            .collect::<Result<_, _>>()?;
        Ok(Self { loaded, schemas })
    }
}

/// One tool of one installed adapter, as a call resolved it.
#[derive(Debug, Clone)]
pub struct Tool {
    /// The tool name `<adapter id>.<capability id>`.
    pub name: String,
    adapter: Arc<InstalledAdapter>,
    capability: usize,
    /// Constraints from every grant that matched, for the calling tenant.
    pub constraints: Vec<CompiledConstraints>,
}

impl Tool {
    /// The adapter it belongs to.
    pub fn adapter(&self) -> &LoadedAdapter {
        &self.adapter.loaded
    }

    /// The capability.
    pub fn capability(&self) -> &Capability {
        &self.adapter.loaded.manifest().capabilities[self.capability]
    }

    /// The capability's compiled schemas.
    pub fn schemas(&self) -> &Schemas {
        &self.adapter.schemas[self.capability]
    }
}

struct Grant {
    spec: ToolGrant,
    constraints: CompiledConstraints,
}

/// Installed adapters by id, and the tool grants.
pub struct Registry {
    adapters: RwLock<HashMap<String, Arc<InstalledAdapter>>>,
    grants: Vec<Grant>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("grants", &self.grants.len())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// Compiles the grants' argument constraints; no adapter is installed yet.
    pub fn new(grants: &[ToolGrant]) -> Result<Self, ToolGrantError> {
        let grants = grants
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let constraints = CompiledConstraints::new(&spec.arg_constraints)
                    .map_err(|source| ToolGrantError { index, source })?;
                Ok(Grant {
                    spec: spec.clone(),
                    constraints,
                })
            })
            .collect::<Result<_, ToolGrantError>>()?;
        Ok(Self {
            adapters: RwLock::new(HashMap::new()),
            grants,
        })
    }

    /// Adds or atomically replaces an adapter (by id). Calls in flight keep the old one.
    pub fn install(&self, adapter: InstalledAdapter) {
        let id = adapter.loaded.manifest().id.clone();
        self.adapters
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::new(adapter));
    }

    /// The installed adapters, sorted by id.
    pub fn adapters(&self) -> Vec<crate::plugin::PluginRef> {
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        let mut list: Vec<_> = adapters
            .values()
            .map(|a| a.loaded.plugin().clone())
            .collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// What the adapter serving under `id` may reach (its egress grants), if one serves.
    pub fn grants_of(&self, id: &str) -> Option<Arc<crate::egress::Grants>> {
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        adapters.get(id).map(|a| a.loaded.grants())
    }

    /// The version of the adapter serving under `id`, if any.
    pub fn serving_version(&self, id: &str) -> Option<String> {
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        adapters.get(id).map(|a| a.loaded.plugin().version.clone())
    }

    /// The tools `tenant` may see, sorted by name, with their capabilities (what tools/list
    /// shows).
    pub fn catalog(&self, tenant: &str) -> Vec<(String, Capability)> {
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        let mut tools: Vec<(String, Capability)> = adapters
            .values()
            .flat_map(|a| {
                let manifest = a.loaded.manifest();
                manifest
                    .capabilities
                    .iter()
                    .map(move |c| (format!("{}.{}", manifest.id, c.id), c.clone()))
            })
            .filter(|(tool, _)| self.grants_for(tenant, tool).next().is_some())
            .collect();
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        tools
    }

    /// The tool `name` if `tenant` may see it; `None` if it does not exist or is hidden (the
    /// two are indistinguishable on purpose).
    pub fn lookup(&self, tenant: &str, name: &str) -> Option<Tool> {
        let constraints: Vec<CompiledConstraints> = self
            .grants_for(tenant, name)
            .map(|g| g.constraints.clone())
            .collect();
        if constraints.is_empty() {
            return None;
        }
        let (adapter_id, capability_id) = name.rsplit_once('.')?;
        let adapter = self
            .adapters
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(adapter_id)
            .cloned()?;
        let capability = adapter
            .loaded
            .manifest()
            .capabilities
            .iter()
            .position(|c| c.id == capability_id)?;
        Some(Tool {
            name: name.to_owned(),
            adapter,
            capability,
            constraints,
        })
    }

    /// Whether the tool `name`, if `tenant` may see it, declares the top-level argument
    /// `argument` in its input schema. Cheaper than [`lookup`](Self::lookup): nothing is
    /// cloned.
    pub fn declares_argument(&self, tenant: &str, name: &str, argument: &str) -> bool {
        self.grants_for(tenant, name).next().is_some()
            && self.capability_is(name, |c| c.declares_argument(argument))
    }

    /// Whether the tool `name` is a capability marked `sensitive` (whoever may see it).
    pub fn is_sensitive(&self, name: &str) -> bool {
        self.capability_is(name, |c| c.sensitive)
    }

    /// Whether the capability the tool `name` is, if it is installed, is `what`.
    fn capability_is(&self, name: &str, what: impl Fn(&Capability) -> bool) -> bool {
        let Some((adapter_id, capability_id)) = name.rsplit_once('.') else {
            return false;
        };
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        adapters.get(adapter_id).is_some_and(|adapter| {
            adapter
                .loaded
                .manifest()
                .capabilities
                .iter()
                .any(|c| c.id == capability_id && what(c))
        })
    }

    fn grants_for<'a>(&'a self, tenant: &'a str, tool: &'a str) -> impl Iterator<Item = &'a Grant> {
        self.grants
            .iter()
            .filter(move |g| g.spec.tools.is_match(tool) && g.spec.tenants.matches(tenant))
    }
}
