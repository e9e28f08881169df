//! What the records of a call cite: the plugin that ran ([`PluginRef`]), each outbound request of
//! its adapter ([`EgressAttempt`]), the action its policies evaluated ([`ActionRecord`]) and the
//! policy gate's decision ([`DecisionRecord`], one [`ModuleDecision`] per module). Plain data: the
//! layers that produce them (plugin loading, the egress gate, policy evaluation) live in
//! `gatehouse-host`.

use std::net::SocketAddr;

pub use gatehouse_guardrails::Finding;
use serde::{Deserialize, Serialize};

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
    /// The principal's recent calls, oldest first.
    pub prior_actions: Vec<String>,
    /// Data classifications touched.
    pub data_classification: Vec<String>,
    /// The skills resolved for the call, in order (none in records before contract 0.4.0).
    #[serde(default)]
    pub skills: Vec<String>,
    /// Risk signals: (name, score).
    pub risk_signals: Vec<(String, f64)>,
}
