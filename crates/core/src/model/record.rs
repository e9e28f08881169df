//! What the records of a call cite: the plugin that ran ([`PluginRef`]), each outbound request of
//! its adapter ([`EgressAttempt`]), what it told and asked its caller ([`CallerRecord`]), the
//! action its policies evaluated ([`ActionRecord`]) and the policy gate's decision
//! ([`DecisionRecord`], one [`ModuleDecision`] per module). Plain data: the layers that produce
//! them (plugin loading, the egress gate, the caller gate, policy evaluation) live in
//! `gatehouse-host`.

use std::net::SocketAddr;

pub use gatehouse_guardrails::Finding;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApprovalMode, CapabilityClass, Claims, Obligation, Principal, Reason, Verdict};

/// Identity of a loaded plugin, as decision and result records cite it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginRef {
    /// Plugin id.
    pub id: String,
    /// Plugin version.
    pub version: String,
    /// `sha256:<hex>` of the unsigned component.
    pub digest: String,
    /// Signing key id.
    pub key_id: String,
    /// Where it was fetched from, pinned by digest (`oci://REGISTRY/REPO@sha256:...`), when it
    /// came from a registry. Absent for a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One outbound request an adapter attempted during a call. Never holds header values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressAttempt {
    /// HTTP method.
    pub method: String,
    /// `scheme://host:port/path` (no query), or the raw URI, cut, when it did not parse.
    pub destination: String,
    /// The checked address connected to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// Whether the gate let it through.
    pub allowed: bool,
    /// `ok`; after a denial, the egress gate's code for it; or how an allowed request failed:
    /// `upstream_error`, `upstream_timeout`, `tls_error`, `request_body_error`,
    /// `response_bytes_budget`, `time_budget`.
    pub code: String,
    /// Why it was denied or how it failed; empty when it went through.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Response status, if a response arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Request body bytes sent.
    pub request_bytes: u64,
    /// Response body bytes delivered to the guest.
    pub response_bytes: u64,
    /// The caller's own tokens the request carried (a grant's `oauth` credential), each as
    /// `principal@provider#hash`: whose connection, and the first 16 hex digits of the
    /// token's SHA-256, never the token. Empty for the operator's credentials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
}

/// What an adapter told and asked its caller during one call (contract 0.5.0's `caller`
/// interface): progress and log lines counted, each ask kept with its answer. Absent from the
/// record of a call whose adapter did neither.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallerRecord {
    /// Progress notifications.
    #[serde(default, skip_serializing_if = "Told::is_empty")]
    pub progress: Told,
    /// Log lines for the caller.
    #[serde(default, skip_serializing_if = "Told::is_empty")]
    pub log: Told,
    /// Each ask, in order, with its answer or why it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<AskRecord>,
    /// Asks made beyond the ones kept in `asks` (at most 64 per call are kept; each was
    /// refused or answered all the same).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub asks_unrecorded: u32,
}

impl CallerRecord {
    /// Whether nothing was told or asked.
    pub fn is_empty(&self) -> bool {
        self.progress.is_empty()
            && self.log.is_empty()
            && self.asks.is_empty()
            && self.asks_unrecorded == 0
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How many notifications of one kind (progress, log lines) an adapter sent, and what became
/// of them. They are counted, not kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Told {
    /// Handed to the caller's relay.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub relayed: u32,
    /// Dropped by the host.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u32,
    /// Why the first dropped one was: not declared in the manifest, no caller attached, over
    /// the per-call cap, malformed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_because: Option<String>,
}

impl Told {
    /// Whether none was sent.
    pub fn is_empty(&self) -> bool {
        self.relayed == 0 && self.dropped == 0
    }
}

/// One ask of an adapter to its caller, and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskRecord {
    /// Its name within the call, as the adapter chose it.
    pub key: String,
    /// The MCP request: `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The request's params as the adapter sent them (null when they were not JSON): an
    /// elicitation's message and schema, a sampling request's messages. A form's sensitive
    /// fields' defaults are kept as hashes; all of it is, for a capability declared
    /// `sensitive`.
    pub params: Value,
    /// How it ended.
    pub outcome: AskOutcome,
    /// The caller's answer (the result of its response): an elicitation's action and content
    /// (a form's sensitive fields as hashes), a sampling result, the roots. A hash of it all,
    /// for a capability declared `sensitive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    /// Why it has no answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// How long the caller took, in milliseconds (0 for an ask that was not sent).
    #[serde(default)]
    pub waited_ms: u64,
}

/// How an ask ended: answered, or the `ask-error` case the adapter got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskOutcome {
    /// The caller answered.
    Answered,
    /// Nobody could be asked (no caller attached to the call).
    Unavailable,
    /// The caller did not declare it can answer this kind of request; nothing was sent.
    NotSupported,
    /// The host refused it (manifest, operator grant, budget, malformed, a credential);
    /// nothing was sent.
    Refused,
    /// The caller answered with an error, hung up, or answered too much.
    Failed,
    /// No answer within the ask's timeout.
    Timeout,
}

/// Reason code recorded when a module failed to evaluate (trap, fuel, deadline).
pub const POLICY_FAILED: &str = "POLICY_FAILED";
/// Reason code recorded when a binding names a module that is not installed.
pub const POLICY_MODULE_MISSING: &str = "POLICY_MODULE_MISSING";
/// Reason code recorded when every policy abstained and the operator default decided.
pub const POLICY_DEFAULT: &str = "POLICY_DEFAULT";

/// What one module said about one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleDecision {
    /// The module that said it (id, version, digest, key). Absent if the module was missing.
    pub module: Option<PluginRef>,
    /// The module id named by the binding.
    pub module_id: String,
    /// Its verdict (`deny` when it failed: fail closed).
    pub verdict: Verdict,
    /// The mode it asked for, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_mode: Option<ApprovalMode>,
    /// Whether the host ignored its mode because it would have raised the call's mode.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mode_raise_ignored: bool,
    /// Why.
    pub reasons: Vec<Reason>,
    /// Evidence it cited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_refs: Vec<String>,
    /// Fuel it consumed.
    pub fuel_consumed: u64,
}

/// The decision record of one call's policy gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// Id of this decision (`pol_<hex>`).
    pub decision_id: String,
    /// The composed verdict.
    pub verdict: Verdict,
    /// The approval mode the call runs at after policy.
    pub approval_mode_effective: ApprovalMode,
    /// Whether the operator default decided (every module abstained or none was bound).
    pub default_applied: bool,
    /// Each module's answer, in evaluation order.
    pub modules: Vec<ModuleDecision>,
    /// The obligations the result must satisfy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligations: Vec<Obligation>,
    /// What each binding in shadow mode (`mode = "shadow"`) would have decided: evaluated on
    /// the call, changing nothing of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadow: Vec<ShadowDecision>,
    /// What the host masked under `mask-secrets` and `mask-identifiers`: each kind (or
    /// identifier name) and place, never the value. Arguments are named by their JSON pointer
    /// under `args`, the result by its part (`content/0`, `structured_content/token`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<Finding>,
}

/// A shadow binding's answer on one call, beside the real decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowDecision {
    /// The module's answer, as an enforcing binding's would be recorded.
    #[serde(flatten)]
    pub decision: ModuleDecision,
    /// The composed verdict had this binding been enforcing (beside the enforcing ones).
    pub would_be: Verdict,
    /// Whether `would_be` differs from the call's real verdict: promoting this binding would
    /// change this call's outcome.
    pub changes: bool,
}

impl DecisionRecord {
    /// Every module's reasons, as `code: message`, in evaluation order.
    pub fn reasons(&self) -> Vec<String> {
        self.modules
            .iter()
            .flat_map(|m| {
                m.reasons
                    .iter()
                    .map(|r| format!("{}: {}", r.code, r.message))
            })
            .collect()
    }
}

/// One earlier call of a session, as a policy sees it (contract 0.7.0's `prior-action`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "PriorActionForm")]
pub struct PriorAction {
    /// The tool called.
    pub tool: String,
    /// The call's id.
    pub tool_call_id: String,
    /// When its audit entry was written, unix ms.
    pub at_ms: u64,
    /// The labels its result brought to the session.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

impl PriorAction {
    /// The call `tool_call_id` of `tool`, recorded at `at_ms`, with the labels of the
    /// session's `held` that it brought.
    pub fn brought(
        tool: String,
        tool_call_id: String,
        at_ms: u64,
        held: &[super::label::LabelSource],
    ) -> Self {
        let labels = (held.iter())
            .filter(|source| source.tool_call_id == tool_call_id)
            .map(|source| source.label.clone())
            .collect();
        Self {
            tool,
            tool_call_id,
            at_ms,
            labels,
        }
    }

    /// An action known by its tool alone.
    pub fn tool(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            tool_call_id: String::new(),
            at_ms: 0,
            labels: Vec::new(),
        }
    }
}

/// How a prior action is written: a record, or (in records before contract 0.7.0) its tool.
#[derive(Deserialize)]
#[serde(untagged)]
enum PriorActionForm {
    Tool(String),
    Record {
        tool: String,
        #[serde(default)]
        tool_call_id: String,
        #[serde(default)]
        at_ms: u64,
        #[serde(default)]
        labels: Vec<String>,
    },
}

impl From<PriorActionForm> for PriorAction {
    fn from(form: PriorActionForm) -> Self {
        match form {
            PriorActionForm::Tool(tool) => Self::tool(tool),
            PriorActionForm::Record {
                tool,
                tool_call_id,
                at_ms,
                labels,
            } => Self {
                tool,
                tool_call_id,
                at_ms,
                labels,
            },
        }
    }
}

/// The normalized action a policy evaluates, in gatehouse's vocabulary: how the audit log keeps
/// it, and what `gatehouse replay` evaluates again. `gatehouse-host` converts it to and from
/// the WIT `action` without loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// The call.
    pub tool_call_id: String,
    /// The adapter.
    pub adapter_id: String,
    /// The capability.
    pub capability_id: String,
    /// Its class.
    pub capability_class: CapabilityClass,
    /// Its declared maximum mode.
    pub approval_mode_max: ApprovalMode,
    /// The mode the call entered the policy gate with.
    pub approval_mode_requested: ApprovalMode,
    /// The arguments (JSON text, as the policy saw them).
    pub args: String,
    /// The principal chain.
    pub principals: Vec<Principal>,
    /// The tenant.
    pub tenant: String,
    /// The calling principal's admitted claims (none in records before contract 0.4.0).
    #[serde(default)]
    pub claims: Claims,
    /// Host time, unix ms.
    pub now_unix_ms: u64,
    /// The session's latest calls, oldest first, each with the labels it brought (records
    /// before contract 0.7.0 keep the tool names, read as actions with no id or labels).
    pub prior_actions: Vec<PriorAction>,
    /// The session's labels (and a resource read's classification).
    pub data_classification: Vec<String>,
    /// The skills resolved for the call, in order (none in records before contract 0.4.0).
    #[serde(default)]
    pub skills: Vec<String>,
    /// Risk signals: (name, score).
    pub risk_signals: Vec<(String, f64)>,
    /// How the call reached the gateway: `mcp`, `a2a` or `direct` (empty in records before
    /// contract 0.8.0).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The call this one was made on behalf of, if a peer called back with a delegation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_by: Option<String>,
    /// What the flow rules judged it by: its session's labels with their sources, and what
    /// its tool sends (none in records before sessions).
    #[serde(default, skip_serializing_if = "super::label::FlowFacts::is_empty")]
    pub flows: super::label::FlowFacts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::label::LabelSource;

    #[test]
    fn a_prior_action_reads_as_a_tool_name_from_older_records_and_as_a_record_from_newer() {
        let held = [
            LabelSource {
                label: "private".into(),
                tool: "crm.lookup".into(),
                tool_call_id: "c1".into(),
                at_ms: 5,
            },
            LabelSource {
                label: "untrusted".into(),
                tool: "web.fetch".into(),
                tool_call_id: "c2".into(),
                at_ms: 6,
            },
        ];
        let lookup = PriorAction::brought("crm.lookup".into(), "c1".into(), 5, &held);
        assert_eq!(lookup.labels, ["private"]);
        let other = PriorAction::brought("crm.lookup".into(), "c3".into(), 7, &held);
        assert!(other.labels.is_empty());

        let written = serde_json::to_value([&lookup, &other]).unwrap();
        assert_eq!(
            written,
            serde_json::json!([
                { "tool": "crm.lookup", "tool_call_id": "c1", "at_ms": 5, "labels": ["private"] },
                { "tool": "crm.lookup", "tool_call_id": "c3", "at_ms": 7 },
            ])
        );
        let read: Vec<PriorAction> = serde_json::from_value(written).unwrap();
        assert_eq!(read, [lookup, other]);
        // Before contract 0.7.0 the audit record kept the tool names.
        let old: Vec<PriorAction> = serde_json::from_str(r#"["crm.lookup","web.fetch"]"#).unwrap();
        assert_eq!(
            old,
            [
                PriorAction::tool("crm.lookup"),
                PriorAction::tool("web.fetch")
            ]
        );
        assert!(serde_json::from_str::<PriorAction>("7").is_err());
    }
}
