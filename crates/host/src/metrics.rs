//! What a host has done, as Prometheus metrics (`prometheus-client`): every finished call is
//! observed once, from its result envelope, by [`crate::Host::call`]; the gauges that describe
//! the present (approvals pending, instance slots in use) are read when scraped.
//!
//! | metric | labels | from |
//! |---|---|---|
//! | `gatehouse_calls_total` | adapter, capability, outcome | every call |
//! | `gatehouse_call_duration_seconds` | adapter, capability | every call, gate 0 to result |
//! | `gatehouse_fuel_consumed_total` | adapter, capability | the adapter's fuel (`usage`) |
//! | `gatehouse_egress_requests_total` | adapter, capability, code, allowed | each egress attempt |
//! | `gatehouse_egress_destination_requests_total` | destination, code | each egress attempt |
//! | `gatehouse_policy_verdicts_total` | module, version, verdict | each module's answer on a call |
//! | `gatehouse_policy_shadow_decisions_total` | module, version, verdict, changes | each shadow binding's answer on a call |
//! | `gatehouse_approvals_pending` | | the store, at scrape time |
//! | `gatehouse_approvals` | state | the store, at scrape time |
//! | `gatehouse_store_commit_seconds` | | each call's record, committed |
//! | `gatehouse_store_up` | | the store, at scrape time (1 answers a read, 0 not) |
//! | `gatehouse_unauthorized_requests_total` | listener | each 401 of `mcp` or `admin` |
//! | `gatehouse_instance_slots_in_use`, `gatehouse_instance_slots` | | the sandbox, at scrape |
//! | `gatehouse_build_info` | version, commit | always 1 |
//!
//! - `code` is the egress gate's: `ok`, a denial (`no_matching_grant`, `address_not_allowed`...)
//!   or how an allowed request failed (`upstream_error`, `upstream_timeout`...).
//! - `destination` is `host:port` of a request the gate let through; every denied request is
//!   `destination="denied"`, since its host is the adapter's text (its reason is in the log and
//!   on the call's record).
//! - `verdict` is `allow`, `deny`, `require_approval` or `abstain`; `version` is the module
//!   version that answered (`missing` when the bound module was not installed).
//! - `changes` is `true` when a shadow binding's verdict, were it enforcing, would change the
//!   call's composed verdict: `sum(rate(gatehouse_policy_shadow_decisions_total{changes="true"}[1h]))`
//!   is what promoting it would change.
//! - `state` is `pending` (waiting, not expired), `approved` (not yet used, not expired),
//!   `executed`, `rejected` or `expired` (pending or approved past its expiry).
//! - `commit` is the `GATEHOUSE_GIT_COMMIT` the binary was built with, else `unknown`.
//!
//! A call that never reached an adapter (an unknown or hidden tool) is labelled
//! `adapter="none", capability="none"`: the tool name it asked for is the caller's text, and
//! would let any caller grow the label set without bound. Requests the MCP server refuses
//! before a call exists (401, 403, 413) are not counted in the call metrics; 401s are counted
//! by listener.

use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_core::model::ModuleDecision;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    adapter: String,
    capability: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    adapter: String,
    capability: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DestinationLabels {
    destination: String,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    module: String,
    version: String,
    verdict: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShadowLabels {
    module: String,
    version: String,
    verdict: String,
    changes: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

/// Approvals by state at scrape time (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApprovalCounts {
    /// Waiting for a decision, not expired.
    pub pending: usize,
    /// Approved, not yet used, not expired.
    pub approved: usize,
    /// Approved and run.
    pub executed: usize,
    /// Rejected.
    pub rejected: usize,
    /// Pending or approved past the expiry.
    pub expired: usize,
}

/// Store commit buckets: 0.1 ms doubling to ~3.3 s (a SQLite commit with `synchronous=FULL`
/// is about an fsync; PostgreSQL's a round trip).
pub(crate) fn commit_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EgressLabels {
    adapter: String,
    capability: String,
    code: String,
    allowed: String,
}

type HistogramFamily = Family<ToolLabels, Histogram, fn() -> Histogram>;

/// Call latency buckets: 0.5 ms doubling to ~16 s (a call's deadline is seconds).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The `destination` label of an egress attempt: `host:port` when the gate let it through,
/// `denied` otherwise (see the module docs).
fn destination(attempt: &crate::egress::EgressAttempt) -> String {
    if !attempt.allowed {
        return "denied".to_owned();
    }
    url::Url::parse(&attempt.destination)
        .ok()
        .and_then(|url| {
            let host = url.host_str()?.to_owned();
            Some(format!("{host}:{}", url.port_or_known_default()?))
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// A host's metrics (see the module docs).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<OutcomeLabels, Counter>,
    duration: HistogramFamily,
    fuel: Family<ToolLabels, Counter>,
    egress: Family<EgressLabels, Counter>,
    destinations: Family<DestinationLabels, Counter>,
    verdicts: Family<VerdictLabels, Counter>,
    shadow: Family<ShadowLabels, Counter>,
    unauthorized: Family<ListenerLabels, Counter>,
    approvals_pending: Gauge,
    approvals: Family<StateLabels, Gauge>,
    store_up: Gauge,
    slots_in_use: Gauge,
    slots: Gauge,
}

impl Metrics {
    /// The metrics of a host whose pipeline observes its store commits in `commits`.
    pub(crate) fn new(commits: Histogram) -> Self {
        let calls = Family::<OutcomeLabels, Counter>::default();
        let duration = HistogramFamily::new_with_constructor(duration_histogram);
        let fuel = Family::<ToolLabels, Counter>::default();
        let egress = Family::<EgressLabels, Counter>::default();
        let approvals_pending = Gauge::default();
        let slots_in_use = Gauge::default();
        let slots = Gauge::default();
        let destinations = Family::<DestinationLabels, Counter>::default();
        let verdicts = Family::<VerdictLabels, Counter>::default();
        let shadow = Family::<ShadowLabels, Counter>::default();
        let unauthorized = Family::<ListenerLabels, Counter>::default();
        let approvals = Family::<StateLabels, Gauge>::default();
        let store_up = Gauge::default();
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: option_env!("GATEHOUSE_GIT_COMMIT").unwrap_or("unknown"),
            })
            .set(1);
        let mut registry = Registry::with_prefix("gatehouse");
        registry.register(
            "calls",
            "Governed calls by adapter, capability and outcome code",
            calls.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Time from receiving a call to its result",
            duration.clone(),
        );
        registry.register("fuel_consumed", "Fuel the adapter consumed", fuel.clone());
        registry.register(
            "egress_requests",
            "Outbound requests adapters attempted, by the egress gate's code",
            egress.clone(),
        );
        registry.register(
            "egress_destination_requests",
            "Outbound requests by destination host:port (`denied` when refused) and the gate's code",
            destinations.clone(),
        );
        registry.register(
            "policy_verdicts",
            "Policy module answers by module, version and verdict",
            verdicts.clone(),
        );
        registry.register(
            "policy_shadow_decisions",
            "Answers of policy bindings in shadow mode by module, version, verdict, and whether enforcing it would change the call's verdict",
            shadow.clone(),
        );
        registry.register(
            "unauthorized_requests",
            "Requests refused with 401 (authentication failed), by listener",
            unauthorized.clone(),
        );
        registry.register(
            "approvals_pending",
            "Approvals waiting for a decision and not expired",
            approvals_pending.clone(),
        );
        registry.register(
            "approvals",
            "Approvals in the store by state: pending, approved, executed, rejected, expired",
            approvals.clone(),
        );
        registry.register(
            "store_commit_seconds",
            "Time to commit a call's record to the state store",
            commits,
        );
        registry.register(
            "store_up",
            "Whether the state store answered a read at scrape time (1) or not (0)",
            store_up.clone(),
        );
        registry.register(
            "build_info",
            "The gatehouse build: version and git commit",
            build,
        );
        registry.register(
            "instance_slots_in_use",
            "Sandbox instance slots taken now",
            slots_in_use.clone(),
        );
        registry.register(
            "instance_slots",
            "Sandbox instance slots ([sandbox] max_concurrent_calls)",
            slots.clone(),
        );
        Self {
            registry,
            calls,
            duration,
            fuel,
            egress,
            destinations,
            verdicts,
            shadow,
            unauthorized,
            approvals_pending,
            approvals,
            store_up,
            slots_in_use,
            slots,
        }
    }

    /// Counts one 401 on `listener` (`mcp` or `admin`).
    pub(crate) fn unauthorized(&self, listener: &'static str) {
        self.unauthorized
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    /// Counts one finished call.
    pub fn observe(&self, result: &ToolResultEnvelope, elapsed: std::time::Duration) {
        let tool = match &result.adapter {
            Some(adapter) => ToolLabels {
                adapter: adapter.id.clone(),
                capability: result
                    .capability_id
                    .strip_prefix(adapter.id.as_str())
                    .and_then(|c| c.strip_prefix('.'))
                    .unwrap_or(&result.capability_id)
                    .to_owned(),
            },
            None => ToolLabels {
                adapter: "none".to_owned(),
                capability: "none".to_owned(),
            },
        };
        self.calls
            .get_or_create(&OutcomeLabels {
                adapter: tool.adapter.clone(),
                capability: tool.capability.clone(),
                outcome: result.outcome.to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&tool)
            .observe(elapsed.as_secs_f64());
        if let Some(usage) = &result.usage {
            self.fuel.get_or_create(&tool).inc_by(usage.fuel_consumed);
        }
        for attempt in &result.egress {
            self.egress
                .get_or_create(&EgressLabels {
                    adapter: tool.adapter.clone(),
                    capability: tool.capability.clone(),
                    code: attempt.code.clone(),
                    allowed: attempt.allowed.to_string(),
                })
                .inc();
            self.destinations
                .get_or_create(&DestinationLabels {
                    destination: destination(attempt),
                    code: attempt.code.clone(),
                })
                .inc();
        }
        let labels = |module: &ModuleDecision| VerdictLabels {
            module: module.module_id.clone(),
            version: module
                .module
                .as_ref()
                .map_or_else(|| "missing".to_owned(), |m| m.version.clone()),
            verdict: serde_json::to_value(module.verdict)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
        };
        for module in result.policy_decision.iter().flat_map(|d| &d.modules) {
            self.verdicts.get_or_create(&labels(module)).inc();
        }
        for shadow in result.policy_decision.iter().flat_map(|d| &d.shadow) {
            let VerdictLabels {
                module,
                version,
                verdict,
            } = labels(&shadow.decision);
            self.shadow
                .get_or_create(&ShadowLabels {
                    module,
                    version,
                    verdict,
                    changes: shadow.changes.to_string(),
                })
                .inc();
        }
    }

    /// The metrics in the Prometheus text format, with the present-state gauges set to these
    /// values: the approvals by state, `None` when the store did not answer (the approval
    /// gauges keep their last values and `gatehouse_store_up` is 0).
    pub fn encode(&self, approvals: Option<ApprovalCounts>, slots: (usize, usize)) -> String {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.store_up.set(i64::from(approvals.is_some()));
        if let Some(counts) = approvals {
            self.approvals_pending.set(gauge(counts.pending));
            for (state, n) in [
                ("pending", counts.pending),
                ("approved", counts.approved),
                ("executed", counts.executed),
                ("rejected", counts.rejected),
                ("expired", counts.expired),
            ] {
                self.approvals
                    .get_or_create(&StateLabels { state })
                    .set(gauge(n));
            }
        }
        self.slots_in_use.set(gauge(slots.0));
        self.slots.set(gauge(slots.1));
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
