//! The registry of installed adapters and the operator's tool grants: which tools exist, and
//! which tenant may see which of them.
//!
//! An adapter is installed with its capabilities' schemas compiled ([`Schemas`]), replacing
//! any serving version of the same id atomically (calls in flight keep the one they resolved).
//! A tool is visible to a tenant when some `[[pipeline.tool]]` grant's glob matches its name
//! and lists the tenant; the constraints of every matching grant apply to its arguments.
//!
//! What an adapter serves besides its tools (resources, resource templates, prompts:
//! [`crate::plugin::content`]) is installed beside them, each as the read-only capability a
//! read or fill-in of it is, named `<adapter id>.<id>` like a tool, visible under the same
//! grants, and resolved only for its own [`Operation`]: a resource is never a tool to call.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use gatehouse_core::model::Operation;
use serde_json::Value;

use crate::pipeline::config::ToolGrant;
use crate::pipeline::validate::{CompiledConstraints, Schemas, ValidateError};
use crate::plugin::LoadedAdapter;
use crate::plugin::content::{self, Prompt, Resource, ResourceTemplate};
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

/// What one entry of an adapter is.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A tool: one of the manifest's capabilities.
    Tool,
    /// A resource, read at its URI.
    Resource(Resource),
    /// A resource template, read at a URI that matches it.
    Template(ResourceTemplate),
    /// A prompt, filled in with its arguments.
    Prompt(Prompt),
}

impl Kind {
    /// The operation that reaches it.
    pub fn operation(&self) -> Operation {
        match self {
            Self::Tool => Operation::CallTool,
            Self::Resource(_) | Self::Template(_) => Operation::ReadResource,
            Self::Prompt(_) => Operation::GetPrompt,
        }
    }
}

/// One thing an adapter serves, as the pipeline governs it.
#[derive(Debug)]
struct Entry {
    kind: Kind,
    capability: Capability,
    schemas: Schemas,
}

/// An installed adapter with its capabilities' compiled schemas.
#[derive(Debug)]
pub struct InstalledAdapter {
    loaded: LoadedAdapter,
    /// Its tools, then its resources, resource templates and prompts, each with its compiled
    /// schemas.
    entries: Vec<Entry>,
}

impl InstalledAdapter {
    /// Compiles the schemas of every capability of `adapter`, and of the capabilities its
    /// resources, resource templates and prompts are.
    pub fn new(loaded: LoadedAdapter) -> Result<Self, ValidateError> {
        let manifest = loaded.manifest();
        let tools = (manifest.capabilities.iter()).map(|c| (Kind::Tool, c.clone()));
        let resources =
            (manifest.resources.iter()).map(|r| (Kind::Resource(r.clone()), r.capability()));
        let templates = (manifest.resource_templates.iter())
            .map(|t| (Kind::Template(t.clone()), t.capability()));
        let prompts = (manifest.prompts.iter()).map(|p| (Kind::Prompt(p.clone()), p.capability()));
        let entries = (tools.chain(resources).chain(templates).chain(prompts))
            .map(|(kind, capability)| {
                Ok(Entry {
                    schemas: Schemas::compile(&capability)?,
                    kind,
                    capability,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { loaded, entries })
    }

    fn entry(&self, id: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.capability.id == id)
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
        &self.adapter.entries[self.capability].capability
    }

    /// The capability's compiled schemas.
    pub fn schemas(&self) -> &Schemas {
        &self.adapter.entries[self.capability].schemas
    }

    /// What it is: a tool, a resource, a resource template or a prompt.
    pub fn kind(&self) -> &Kind {
        &self.adapter.entries[self.capability].kind
    }
}

/// A resource, resource template or prompt a tenant may read or fill in, with its name
/// `<adapter id>.<id>` (what `resources/list`, `resources/templates/list` and `prompts/list`
/// show).
#[derive(Debug, Clone)]
pub struct Listed<T> {
    /// `<adapter id>.<id>`.
    pub name: String,
    /// What the manifest declares of it.
    pub entry: T,
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
        self.visible(tenant, |entry| {
            matches!(entry.kind, Kind::Tool).then(|| entry.capability.clone())
        })
    }

    /// The resources `tenant` may read, sorted by name.
    pub fn resources(&self, tenant: &str) -> Vec<Listed<Resource>> {
        self.listed(tenant, |kind| match kind {
            Kind::Resource(resource) => Some(resource.clone()),
            _ => None,
        })
    }

    /// The resource templates `tenant` may read, sorted by name.
    pub fn templates(&self, tenant: &str) -> Vec<Listed<ResourceTemplate>> {
        self.listed(tenant, |kind| match kind {
            Kind::Template(template) => Some(template.clone()),
            _ => None,
        })
    }

    /// The prompts `tenant` may fill in, sorted by name.
    pub fn prompts(&self, tenant: &str) -> Vec<Listed<Prompt>> {
        self.listed(tenant, |kind| match kind {
            Kind::Prompt(prompt) => Some(prompt.clone()),
            _ => None,
        })
    }

    /// The resource `tenant` may read at `uri`: its name and the read's arguments (the URI,
    /// a template's parameters, the classification). A fixed URI before a template; among
    /// several, the first by name. `None` if there is none, or the tenant may see none.
    pub fn resource_at(&self, tenant: &str, uri: &str) -> Option<(String, Value)> {
        let fixed = self.resources(tenant).into_iter().find_map(|r| {
            (r.entry.uri == uri).then(|| {
                let args = content::read_args(
                    uri,
                    serde_json::Map::new(),
                    r.entry.classification.as_deref(),
                );
                (r.name, args)
            })
        });
        fixed.or_else(|| {
            self.templates(tenant).into_iter().find_map(|t| {
                let parameters = t.entry.matches(uri)?;
                let args = content::read_args(uri, parameters, t.entry.classification.as_deref());
                Some((t.name, args))
            })
        })
    }

    /// What `tenant` may see of every adapter's entries, by `pick`, sorted by name.
    fn visible<T>(&self, tenant: &str, pick: impl Fn(&Entry) -> Option<T>) -> Vec<(String, T)> {
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        let pick = &pick;
        let mut list: Vec<(String, T)> = adapters
            .values()
            .flat_map(|a| {
                let id = &a.loaded.manifest().id;
                (a.entries.iter()).filter_map(move |e| {
                    pick(e).map(|picked| (format!("{id}.{}", e.capability.id), picked))
                })
            })
            .filter(|(name, _)| self.grants_for(tenant, name).next().is_some())
            .collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list
    }

    fn listed<T>(&self, tenant: &str, pick: impl Fn(&Kind) -> Option<T>) -> Vec<Listed<T>> {
        (self.visible(tenant, |entry| pick(&entry.kind)).into_iter())
            .map(|(name, entry)| Listed { name, entry })
            .collect()
    }

    /// The tool (or resource, resource template or prompt) `name` if `tenant` may see it and
    /// `operation` reaches it; `None` if it does not exist, is hidden, or is something else
    /// (the three are indistinguishable on purpose).
    pub fn lookup(&self, tenant: &str, name: &str, operation: Operation) -> Option<Tool> {
        let constraints: Vec<CompiledConstraints> = self
            .grants_for(tenant, name)
            .map(|g| g.constraints.clone())
            .collect();
        if constraints.is_empty() {
            return None;
        }
        let (adapter, capability) = self.with_entry(name, |adapter, i| (Arc::clone(adapter), i))?;
        if adapter.entries[capability].kind.operation() != operation {
            return None;
        }
        Some(Tool {
            name: name.to_owned(),
            adapter,
            capability,
            constraints,
        })
    }

    /// What `read` makes of the capability `name` is, if `tenant` may see it and `operation`
    /// reaches it: [`lookup`](Self::lookup)'s answer without copying the tool out (read under
    /// the registry's lock: keep `read` short).
    pub fn with_capability<R>(
        &self,
        tenant: &str,
        name: &str,
        operation: Operation,
        read: impl FnOnce(&Capability) -> R,
    ) -> Option<R> {
        self.grants_for(tenant, name).next()?;
        self.with_entry(name, |adapter, i| {
            let entry = &adapter.entries[i];
            (entry.kind.operation() == operation).then(|| read(&entry.capability))
        })?
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
    fn capability_is(&self, name: &str, what: impl FnOnce(&Capability) -> bool) -> bool {
        self.with_entry(name, |adapter, i| what(&adapter.entries[i].capability))
            .unwrap_or(false)
    }

    /// What `read` makes of the installed adapter that serves `name` (`<adapter id>.<id>`)
    /// and the index of its entry `id` (ids are unique among everything an adapter serves),
    /// whoever may see it; `None` if none is installed. Read under the registry's lock.
    fn with_entry<R>(
        &self,
        name: &str,
        read: impl FnOnce(&Arc<InstalledAdapter>, usize) -> R,
    ) -> Option<R> {
        let (adapter_id, id) = name.rsplit_once('.')?;
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        let adapter = adapters.get(adapter_id)?;
        Some(read(adapter, adapter.entry(id)?))
    }

    fn grants_for<'a>(&'a self, tenant: &'a str, tool: &'a str) -> impl Iterator<Item = &'a Grant> {
        self.grants
            .iter()
            .filter(move |g| g.spec.tools.is_match(tool) && g.spec.tenants.matches(tenant))
    }
}
