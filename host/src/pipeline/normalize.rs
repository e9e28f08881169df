//! Gate 2, normalize: meta-tool resolution, then registry lookup with tenant visibility.
//!
//! A wrapper tool configured as a `[[pipeline.meta_tool]]` resolves to the real target named
//! in its arguments *before* any policy runs; the target is what every later gate, policy and
//! record sees. A tool the tenant may not see is reported exactly like a missing one.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use globset::{Glob, GlobMatcher};
use serde_json::Value;

use crate::pipeline::config::{MetaTool, ToolGrant};
use crate::pipeline::validate::{CompiledConstraints, Schemas, ValidateError};
use crate::plugin::LoadedAdapter;
use crate::plugin::manifest::Capability;

/// Why a call was not resolved to a tool.
#[derive(Debug, thiserror::Error)]
pub enum NormalizeError {
    /// The tool does not exist or the tenant may not see it (indistinguishable on purpose).
    #[error("`{tool}` is not a tool available to you")]
    Unknown {
        /// The tool name as called.
        tool: String,
    },
    /// A meta-tool call without a usable target.
    #[error("meta-tool `{meta}` needs a string argument `{arg}` naming the tool to call")]
    MetaTarget {
        /// The wrapper.
        meta: String,
        /// The argument that should name the target.
        arg: String,
    },
    /// A meta-tool call whose arguments are not an object.
    #[error("meta-tool `{meta}`: argument `{arg}` must be an object of the target's arguments")]
    MetaArgs {
        /// The wrapper.
        meta: String,
        /// The argument that should hold the target's arguments.
        arg: String,
    },
    /// A tool grant's glob is invalid (config error, reported at startup).
    #[error("[[pipeline.tool]] #{index}: {message}")]
    Grant {
        /// Index of the grant.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

/// An installed adapter with its compiled schemas.
#[derive(Debug)]
pub struct InstalledAdapter {
    /// The loaded component.
    pub adapter: LoadedAdapter,
    /// Compiled input/output schemas per capability id.
    pub schemas: HashMap<String, Schemas>,
}

struct Grant {
    tools: GlobMatcher,
    tenants: Vec<String>,
    constraints: CompiledConstraints,
}

/// Tools by name, tenant grants and meta-tools.
pub struct Registry {
    adapters: RwLock<HashMap<String, Arc<InstalledAdapter>>>,
    grants: Vec<Grant>,
    meta_tools: Vec<MetaTool>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("meta_tools", &self.meta_tools)
            .finish_non_exhaustive()
    }
}

/// A call resolved to one capability of one installed adapter.
#[derive(Debug)]
pub struct Target {
    /// The tool name `<adapter id>.<capability id>`.
    pub tool: String,
    /// The meta-tool it was reached through, if any.
    pub via_meta_tool: Option<String>,
    /// The adapter.
    pub adapter: Arc<InstalledAdapter>,
    /// Index of the capability in the adapter's manifest.
    capability: usize,
    /// The real arguments.
    pub args: Value,
    /// Constraints from every grant that matched.
    pub constraints: Vec<CompiledConstraints>,
}

impl Target {
    /// The capability called.
    pub fn capability(&self) -> &Capability {
        &self.adapter.adapter.manifest.capabilities[self.capability]
    }

    /// The compiled schemas of the capability.
    pub fn schemas(&self) -> &Schemas {
        &self.adapter.schemas[&self.capability().id]
    }
}

impl Registry {
    /// Compiles grants (globs, constraint patterns).
    pub fn new(grants: &[ToolGrant], meta_tools: Vec<MetaTool>) -> Result<Self, NormalizeError> {
        let mut compiled = Vec::with_capacity(grants.len());
        for (index, grant) in grants.iter().enumerate() {
            let tools = Glob::new(&grant.tools)
                .map_err(|e| NormalizeError::Grant {
                    index,
                    message: format!("tool glob `{}` is invalid: {e}", grant.tools),
                })?
                .compile_matcher();
            let constraints =
                CompiledConstraints::new(&grant.arg_constraints).map_err(|e: ValidateError| {
                    NormalizeError::Grant {
                        index,
                        message: e.to_string(),
                    }
                })?;
            compiled.push(Grant {
                tools,
                tenants: grant.tenants.clone(),
                constraints,
            });
        }
        Ok(Self {
            adapters: RwLock::new(HashMap::new()),
            grants: compiled,
            meta_tools,
        })
    }

    /// Adds or atomically replaces an adapter (by id). Calls in flight keep the old one.
    pub fn install(&self, adapter: InstalledAdapter) {
        let id = adapter.adapter.manifest.id.clone();
        self.adapters
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::new(adapter));
    }

    /// The tools `tenant` may see, sorted by name, with their capabilities (what tools/list
    /// shows).
    pub fn catalog(&self, tenant: &str) -> Vec<(String, Capability)> {
        let adapters = self.adapters.read().unwrap_or_else(PoisonError::into_inner);
        let mut tools: Vec<(String, Capability)> = adapters
            .values()
            .flat_map(|a| {
                let id = &a.adapter.manifest.id;
                a.adapter
                    .manifest
                    .capabilities
                    .iter()
                    .map(move |c| (format!("{id}.{}", c.id), c.clone()))
            })
            .filter(|(tool, _)| self.grants_for(tenant, tool).next().is_some())
            .collect();
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        tools
    }

    fn grants_for<'a>(&'a self, tenant: &'a str, tool: &'a str) -> impl Iterator<Item = &'a Grant> {
        self.grants.iter().filter(move |g| {
            g.tools.is_match(tool) && g.tenants.iter().any(|t| t == "*" || t == tenant)
        })
    }

    /// Gate 2: resolves a meta-tool, then finds the capability the tenant may see.
    pub fn resolve(
        &self,
        tenant: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Target, NormalizeError> {
        let (tool, args, via) = match self.meta_tools.iter().find(|m| m.name == tool) {
            Some(meta) => {
                let target = args
                    .get(&meta.target_arg)
                    .and_then(Value::as_str)
                    .ok_or_else(|| NormalizeError::MetaTarget {
                        meta: meta.name.clone(),
                        arg: meta.target_arg.clone(),
                    })?;
                let inner = match args.get(&meta.args_arg) {
                    None => Value::Object(serde_json::Map::new()),
                    Some(v @ Value::Object(_)) => v.clone(),
                    Some(_) => {
                        return Err(NormalizeError::MetaArgs {
                            meta: meta.name.clone(),
                            arg: meta.args_arg.clone(),
                        });
                    }
                };
                (target.to_owned(), inner, Some(meta.name.clone()))
            }
            None => (tool.to_owned(), args.clone(), None),
        };
        let unknown = || NormalizeError::Unknown { tool: tool.clone() };
        let constraints: Vec<CompiledConstraints> = self
            .grants_for(tenant, &tool)
            .map(|g| g.constraints.clone())
            .collect();
        if constraints.is_empty() {
            return Err(unknown());
        }
        let (adapter_id, capability_id) = tool.rsplit_once('.').ok_or_else(unknown)?;
        let adapter = self
            .adapters
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(adapter_id)
            .cloned()
            .ok_or_else(unknown)?;
        let capability = adapter
            .adapter
            .manifest
            .capabilities
            .iter()
            .position(|c| c.id == capability_id)
            .ok_or_else(unknown)?;
        Ok(Target {
            tool: tool.clone(),
            via_meta_tool: via,
            adapter,
            capability,
            args,
            constraints,
        })
    }
}
