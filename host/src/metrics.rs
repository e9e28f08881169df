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
//! | `gatehouse_approvals_pending` | | the store, at scrape time |
//! | `gatehouse_instance_slots_in_use`, `gatehouse_instance_slots` | | the sandbox, at scrape |
//!
//! A call that never reached an adapter (an unknown or hidden tool) is labelled
//! `adapter="none", capability="none"`: the tool name it asked for is the caller's text, and
//! would let any caller grow the label set without bound. Requests the MCP server refuses
//! before a call exists (401, 403, 413) are not counted here.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::envelope::ToolResultEnvelope;

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

/// A host's metrics (see the module docs).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<OutcomeLabels, Counter>,
    duration: HistogramFamily,
    fuel: Family<ToolLabels, Counter>,
    egress: Family<EgressLabels, Counter>,
    approvals_pending: Gauge,
    slots_in_use: Gauge,
    slots: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let calls = Family::<OutcomeLabels, Counter>::default();
        let duration = HistogramFamily::new_with_constructor(duration_histogram);
        let fuel = Family::<ToolLabels, Counter>::default();
        let egress = Family::<EgressLabels, Counter>::default();
        let approvals_pending = Gauge::default();
        let slots_in_use = Gauge::default();
        let slots = Gauge::default();
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
            "approvals_pending",
            "Approvals waiting for a decision and not expired",
            approvals_pending.clone(),
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
            approvals_pending,
            slots_in_use,
            slots,
        }
    }
}

impl Metrics {
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
        }
    }

    /// The metrics in the Prometheus text format, with the present-state gauges set to these
    /// values.
    pub fn encode(&self, approvals_pending: usize, slots: (usize, usize)) -> String {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.approvals_pending.set(gauge(approvals_pending));
        self.slots_in_use.set(gauge(slots.0));
        self.slots.set(gauge(slots.1));
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
