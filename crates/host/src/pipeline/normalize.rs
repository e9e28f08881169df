//! Gate 2, normalize: meta-tool resolution, then registry lookup with tenant visibility, and
//! the normalized action (AARM's action shape) that policy modules evaluate.
//!
//! A wrapper tool configured as a `[[pipeline.meta_tool]]` resolves to the real target named
//! in its arguments *before* any policy runs; the target is what every later gate, policy and
//! record sees. A tool the tenant may not see is reported exactly like a missing one.

use gatehouse_core::envelope::{Protocol, ToolCallEnvelope};
use gatehouse_core::model::{ApprovalMode, Operation};
use serde_json::{Map, Value};

use crate::bindings::types as wit;
use crate::pipeline::config::MetaTool;
use crate::pipeline::registry::{Kind, Registry, Tool};
use crate::plugin::content::read_args;

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
}

/// A call resolved to one capability of one installed adapter.
#[derive(Debug)]
pub struct Target {
    /// The tool.
    pub tool: Tool,
    /// The meta-tool it was reached through, if any.
    pub via_meta_tool: Option<String>,
    /// The real arguments.
    pub args: Value,
}

/// Gate 2: resolves a meta-tool (for a tool call), then finds the capability the tenant may
/// see that `operation` reaches: a tool, or the resource, resource template or prompt.
pub fn resolve(
    registry: &Registry,
    meta_tools: &[MetaTool],
    tenant: &str,
    tool: &str,
    operation: Operation,
    args: &Value,
) -> Result<Target, NormalizeError> {
    let meta = (meta_tools.iter()).find(|m| operation == Operation::CallTool && m.name == tool);
    let (tool, args, via_meta_tool) = match meta {
        Some(meta) => {
            let target = args
                .get(&meta.target_arg)
                .and_then(Value::as_str)
                .ok_or_else(|| NormalizeError::MetaTarget {
                    meta: meta.name.clone(),
                    arg: meta.target_arg.clone(),
                })?;
            let inner = match args.get(&meta.args_arg) {
                None => gatehouse_core::model::empty_object(),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(_) => {
                    return Err(NormalizeError::MetaArgs {
                        meta: meta.name.clone(),
                        arg: meta.args_arg.clone(),
                    });
                }
            };
            (target, inner, Some(meta.name.clone()))
        }
        None => (tool, args.clone(), None),
    };
    let unknown = || NormalizeError::Unknown {
        tool: tool.to_owned(),
    };
    let tool = registry
        .lookup(tenant, tool, operation)
        .ok_or_else(unknown)?;
    // A read's arguments are the host's, made from its URI: the parameters its template gives,
    // the reviewed classification. A URI the entry does not serve is not there to read.
    let args = match tool.kind() {
        Kind::Resource(resource) => {
            let uri = args.get("uri").and_then(Value::as_str);
            if uri != Some(resource.uri.as_str()) {
                return Err(unknown());
            }
            read_args(
                &resource.uri,
                Map::new(),
                resource.classification.as_deref(),
            )
        }
        Kind::Template(template) => {
            let uri = args
                .get("uri")
                .and_then(Value::as_str)
                .ok_or_else(unknown)?;
            let parameters = template.matches(uri).ok_or_else(unknown)?;
            read_args(uri, parameters, template.classification.as_deref())
        }
        Kind::Tool | Kind::Prompt(_) => args,
    };
    Ok(Target {
        tool,
        via_meta_tool,
        args,
    })
}

impl Target {
    /// The normalized action the policy gate evaluates, at approval mode `mode` and the host's
    /// time `now_unix_ms` (so a recorded decision replays exactly), with the names of the
    /// skills resolved for the call.
    pub fn action(
        &self,
        call: &ToolCallEnvelope,
        mode: ApprovalMode,
        now_unix_ms: u64,
        skills: Vec<String>,
    ) -> wit::Action {
        let capability = self.tool.capability();
        // A resource's reviewed classification is data the call touches.
        let classification = match self.tool.kind() {
            Kind::Resource(resource) => resource.classification.clone(),
            Kind::Template(template) => template.classification.clone(),
            Kind::Tool | Kind::Prompt(_) => None,
        };
        wit::Action {
            tool_call_id: call.tool_call_id.clone(),
            adapter_id: self.tool.adapter().manifest().id.clone(),
            capability_id: capability.id.clone(),
            capability_class: capability.capability_class.into(),
            approval_mode_max: capability.approval_mode.into(),
            approval_mode_requested: mode.into(),
            args: self.args.to_string(),
            principals: call.principal_chain.iter().map(Into::into).collect(),
            tenant: call.tenant_id.clone(),
            claims: (&call.claims).into(),
            context: wit::ActionContext {
                now_unix_ms,
                prior_actions: Vec::new(),
                data_classification: classification.into_iter().collect(),
                skills,
                sends: Vec::new(),
                protocol: Protocol::name(call.protocol).to_owned(),
                delegated_by: (call.delegated_by.as_ref()).map(|by| by.tool_call_id.clone()),
            },
            risk_signals: Vec::new(),
        }
    }
}
