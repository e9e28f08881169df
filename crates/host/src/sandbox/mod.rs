//! The sandbox: one engine, and a fresh, budgeted instance for every call.
//!
//! Lifecycle phases:
//! 1. **link** (once per host): [`Sandbox::new`] builds the wasmtime [`Engine`] (component
//!    model, async, fuel, epoch interruption, pooling allocator), starts the epoch ticker, and
//!    builds one linker per world. Both link WASI 0.2 with an empty context (no files, no
//!    environment, no sockets) and the `log` import of every released contract version
//!    (`gatehouse:plugin/log@0.7.0`, `@0.6.0`, `@0.5.0`, `@0.4.0`, `@0.3.0`, `@0.2.0` and
//!    `@0.1.0`);
//!    only the adapter linker has `wasi:http`, served by the [egress gate](crate::egress), and
//!    the `caller` interface (since 0.5.0), served by the [caller gate](crate::caller). A policy's store
//!    has stopped clocks and a fixed random sequence, so its decision replays exactly.
//! 2. **load** (once per plugin): compiling refuses a component with more core instances,
//!    memories or tables than an instance may have (the pool's per-component caps);
//!    [`Sandbox::prepare_adapter`] / [`Sandbox::prepare_policy`] pre-instantiate a compiled component against its world's
//!    linker; a component that does not implement the world is refused here. A component
//!    built for a released contract before the current one is prepared against that version's
//!    world ([`PreparedAdapter::V0_5`], [`PreparedAdapter::V0_1`], [`PreparedPolicy::V0_7`],
//!    [`PreparedPolicy::V0_6`], [`PreparedPolicy::V0_3`], [`PreparedPolicy::V0_2`],
//!    [`PreparedPolicy::V0_1`]; a 0.6.0 or 0.7.0 adapter has the current world's shape) and
//!    its values adapted per call (`crate::bindings::v0_1`, `v0_2`, `v0_3`, `v0_6`, `v0_7`).
//!    Each plugin runs with its own [`Limits`]: `[sandbox]`'s defaults, or its
//!    `[[sandbox.plugin]]` override (an interpreter-based component, JavaScript or Python,
//!    needs more fuel and memory than a Rust one), never above `[sandbox]`'s `max_*` ceilings.
//! 3. **prepare** (per call): a free slot of the tenant's share
//!    (`max_concurrent_calls_per_tenant`, else [`SandboxError::TenantBusy`]), then a free
//!    instance slot (a call beyond `max_concurrent_calls` waits for one, at most its own
//!    `timeout_ms`, then fails as [`SandboxError::Busy`]), and a new [`Store`] with fuel, an
//!    epoch deadline and the memory limit (all the instance's memories together). The deadline starts once the
//!    slot is held, so a call that queued still gets its whole budget, and it does not run
//!    while an adapter waits for its caller's answer (an ask, [`Paused`], a clock the call's
//!    egress gate shares): the epoch deadline is extended by the time paused when it is
//!    reached, and so are the host's timeout around the call and the egress gate's budget.
//! 4. **invoke** (per call): instantiate from the pre-instance, call, classify any trap by its
//!    type ([`SandboxError`]), drop the store. Nothing survives between calls.

mod initialize;
mod state;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};

use crate::bindings::adapter::{AdapterPre, gatehouse::plugin::log};
use crate::bindings::adapter_0_1::gatehouse::plugin::log as log_0_1;
use crate::bindings::adapter_0_5::gatehouse::plugin::{caller as caller_0_5, log as log_0_5};
use crate::bindings::adapter_0_6::gatehouse::plugin::{caller as caller_0_6, log as log_0_6};
use crate::bindings::adapter_0_7::gatehouse::plugin::{caller as caller_0_7, log as log_0_7};
use crate::bindings::caller;
use crate::bindings::policy::PolicyPre;
use crate::bindings::policy_0_2::gatehouse::plugin::log as log_0_2;
use crate::bindings::policy_0_3::gatehouse::plugin::log as log_0_3;
use crate::bindings::policy_0_4::gatehouse::plugin::log as log_0_4;
use crate::bindings::types::{
    Action, CallContext, Completion, CompletionRef, Decision, EmbeddedResource, Prompt, ToolError,
    ToolOutput,
};
use crate::bindings::{
    adapter_0_1, adapter_0_5, policy_0_1, policy_0_2, policy_0_3, policy_0_6, policy_0_7, v0_1,
    v0_2, v0_3, v0_6, v0_7,
};
use crate::caller::CallerGate;
use crate::egress::{EgressAttempt, EgressGate, Paused};
use gatehouse_core::model::CallerRecord;
pub use state::{CallState, LogLine, MemoryLimitExceeded, escape};

/// How often the epoch advances. Deadlines are rounded up to whole ticks.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Wasm stack per call: deep enough for real code, small enough that unbounded recursion
/// traps quickly with `StackOverflow`.
const MAX_WASM_STACK: usize = 1 << 20;
/// Pool slots per concurrent component instance. A Rust component built for wasm32-wasip2
/// holds a handful of core instances (the program, the WASI adapter, shims), 1-2 memories and
/// up to 4 tables; a componentize-js one 4 core instances, 2 memories and 3 tables; a
/// componentize-py one (CPython and its extension libraries, dynamically linked) 14 core
/// instances, 10 memories and 10 tables. The caps leave room above the largest.
/// These are also the caps per component (the pool refuses a component over them when it is
/// compiled; the store's limiter checks again at instantiation), so one call cannot take the
/// slots of others. Unused slots cost address space only.
const CORE_INSTANCES_PER_COMPONENT: u32 = 16;
/// See [`CORE_INSTANCES_PER_COMPONENT`].
const MEMORIES_PER_COMPONENT: u32 = 12;
/// See [`CORE_INSTANCES_PER_COMPONENT`].
const TABLES_PER_COMPONENT: u32 = 12;
/// The largest linear memory a wasm32 instance can address: the ceiling of `max_memory_mib`.
const WASM32_MEMORY_MIB: u32 = 4096;
/// Largest policy decision accepted, in bytes of reasons, evidence refs and obligations:
/// a decision is recorded with every call, so a module cannot bloat the audit log or the
/// result; one beyond it fails (and so denies).
pub const MAX_DECISION_BYTES: usize = 64 * 1024;
/// Host-side slack on top of the guest deadline for the async host calls around it.
const HOST_GRACE: Duration = Duration::from_millis(250);
/// Linear memory a freed slot keeps resident: its dirty pages (found with `PAGEMAP_SCAN`
/// where the kernel has it, Linux 6.7+) are reset in place instead of being handed back to the
/// kernel with `madvise` and faulted in again by the next call. Covers a Rust component's
/// shadow stack and early heap; pages beyond it are decommitted as before. Costs at most this
/// much RSS per warm slot, and only for pages a call touched.
const MEMORY_KEEP_RESIDENT: usize = 2 << 20;
/// The same for a freed slot's tables.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;
/// Decommits (what does not stay resident) gathered into one batch: one `madvise` round and
/// TLB flush for several freed slots instead of one per slot.
const DECOMMIT_BATCH: usize = 8;

/// The `[sandbox]` table of the operator config: per-call budgets. Every default is chosen so
/// a well-behaved adapter never meets it and a runaway one is stopped within seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// Fuel (roughly, wasm instructions) per call. Default: 1,000,000,000 — about a second of
    /// guest compute on a current x86-64 core.
    #[serde(default = "defaults::fuel")]
    pub fuel: u64,
    /// Wall-clock deadline per call, in milliseconds, host calls included. Default: 5000.
    #[serde(default = "defaults::timeout_ms")]
    pub timeout_ms: u64,
    /// Linear memory per instance, in MiB. Default: 64.
    #[serde(default = "defaults::memory_mib")]
    pub memory_mib: u32,
    /// Largest tool output accepted from an adapter (all content, structured JSON and evidence
    /// refs together), in KiB. Default: 1024.
    #[serde(default = "defaults::max_output_kib")]
    pub max_output_kib: u32,
    /// Instances that may run at once (sizes the pooling allocator); further calls wait for a
    /// free slot. Default: 128.
    #[serde(default = "defaults::max_concurrent_calls")]
    pub max_concurrent_calls: u32,
    /// Instances one tenant's calls (and the policy evaluations for them) may hold at once,
    /// so one tenant's hostile or slow calls cannot starve the others. Default: half of
    /// `max_concurrent_calls`, rounded up; a single-tenant gateway sets it equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls_per_tenant: Option<u32>,
    /// The most fuel any plugin's override may give a call. Default: 50,000,000,000 (50 times
    /// the default budget: an interpreter's start-up and a few milliseconds of its work).
    #[serde(default = "defaults::max_fuel")]
    pub max_fuel: u64,
    /// The longest deadline any plugin's override may give a call, in milliseconds.
    /// Default: 60000.
    #[serde(default = "defaults::max_timeout_ms")]
    pub max_timeout_ms: u64,
    /// The most linear memory any plugin's override may give an instance, in MiB (at most
    /// 4096, what wasm32 addresses). Also the size of each pooled memory slot, which costs
    /// address space, not memory. Default: 512.
    #[serde(default = "defaults::max_memory_mib")]
    pub max_memory_mib: u32,
    /// Per-plugin budgets (`[[sandbox.plugin]]`): the first entry whose `id` glob matches a
    /// plugin's id replaces the defaults above for that plugin's calls, each field it sets up
    /// to its `max_*` ceiling. Default: none, every plugin runs with the defaults.
    #[serde(default, rename = "plugin", skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginBudget>,
}

/// One `[[sandbox.plugin]]` entry: budgets for the plugins whose id matches `id`.
///
/// ```toml
/// [[sandbox.plugin]]
/// id = "acme.orders-js"      # a plugin id, or a glob such as "acme.*"
/// memory_mib = 128
/// fuel = 20_000_000_000
/// timeout_ms = 10_000
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginBudget {
    /// The plugin ids this entry applies to: an id, or a glob (`acme.*`).
    pub id: gatehouse_core::model::Glob,
    /// Fuel per call. Default: `[sandbox] fuel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Deadline per call, in milliseconds. Default: `[sandbox] timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Linear memory per instance, in MiB. Default: `[sandbox] memory_mib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u32>,
}

/// A `[sandbox]` budget out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid [sandbox] config: `{key}` is {value}; {expected}")]
pub struct SandboxConfigError {
    /// The key, e.g. `memory_mib` or `plugin[0].fuel`.
    pub key: String,
    /// Its value.
    pub value: u64,
    /// What it must be, and how to fix it.
    pub expected: String,
}

mod defaults {
    pub fn fuel() -> u64 {
        1_000_000_000
    }
    pub fn timeout_ms() -> u64 {
        5_000
    }
    pub fn memory_mib() -> u32 {
        64
    }
    pub fn max_output_kib() -> u32 {
        1024
    }
    pub fn max_concurrent_calls() -> u32 {
        128
    }
    pub fn max_fuel() -> u64 {
        50_000_000_000
    }
    pub fn max_timeout_ms() -> u64 {
        60_000
    }
    pub fn max_memory_mib() -> u32 {
        512
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            fuel: defaults::fuel(),
            timeout_ms: defaults::timeout_ms(),
            memory_mib: defaults::memory_mib(),
            max_output_kib: defaults::max_output_kib(),
            max_concurrent_calls: defaults::max_concurrent_calls(),
            max_concurrent_calls_per_tenant: None,
            max_fuel: defaults::max_fuel(),
            max_timeout_ms: defaults::max_timeout_ms(),
            max_memory_mib: defaults::max_memory_mib(),
            plugins: Vec::new(),
        }
    }
}

impl SandboxConfig {
    /// The default per-call budgets: those of every plugin without a `[[sandbox.plugin]]`
    /// entry.
    pub fn limits(&self) -> Limits {
        Limits {
            fuel: self.fuel,
            timeout: Duration::from_millis(self.timeout_ms),
            memory_bytes: self.memory_mib as usize * 1024 * 1024,
            max_output_bytes: self.max_output_kib as usize * 1024,
        }
    }

    /// The per-call budgets of plugin `id`: the first matching `[[sandbox.plugin]]` entry's,
    /// the defaults for what it leaves out.
    pub fn limits_for(&self, id: &str) -> Limits {
        let mut limits = self.limits();
        if let Some(entry) = self.plugins.iter().find(|entry| entry.id.is_match(id)) {
            if let Some(fuel) = entry.fuel {
                limits.fuel = fuel;
            }
            if let Some(ms) = entry.timeout_ms {
                limits.timeout = Duration::from_millis(ms);
            }
            if let Some(mib) = entry.memory_mib {
                limits.memory_bytes = mib as usize * 1024 * 1024;
            }
        }
        limits
    }

    /// Checks every budget is in range: not zero, and not above its `max_*` ceiling (which
    /// [`Sandbox::new`] sizes the pool by).
    pub fn check(&self) -> Result<(), SandboxConfigError> {
        let error = |key: &str, value: u64, expected: String| SandboxConfigError {
            key: key.to_owned(),
            value,
            expected,
        };
        let max_memory = u64::from(self.max_memory_mib);
        if !(1..=u64::from(WASM32_MEMORY_MIB)).contains(&max_memory) {
            return Err(error(
                "max_memory_mib",
                max_memory,
                format!("it must be between 1 and {WASM32_MEMORY_MIB} (what wasm32 addresses)"),
            ));
        }
        let within = |key: &str, value: u64, max: u64, max_key: &str| {
            if value == 0 {
                Err(error(key, value, "it must be at least 1".to_owned()))
            } else if value > max {
                Err(error(
                    key,
                    value,
                    format!("the host's ceiling is `{max_key}` = {max}; raise it or lower this"),
                ))
            } else {
                Ok(())
            }
        };
        let checks =
            |prefix: &str, fuel: Option<u64>, timeout: Option<u64>, memory: Option<u32>| {
                if let Some(fuel) = fuel {
                    within(&format!("{prefix}fuel"), fuel, self.max_fuel, "max_fuel")?;
                }
                if let Some(ms) = timeout {
                    within(
                        &format!("{prefix}timeout_ms"),
                        ms,
                        self.max_timeout_ms,
                        "max_timeout_ms",
                    )?;
                }
                if let Some(mib) = memory {
                    within(
                        &format!("{prefix}memory_mib"),
                        u64::from(mib),
                        max_memory,
                        "max_memory_mib",
                    )?;
                }
                Ok(())
            };
        checks(
            "",
            Some(self.fuel),
            Some(self.timeout_ms),
            Some(self.memory_mib),
        )?;
        for (index, entry) in self.plugins.iter().enumerate() {
            checks(
                &format!("plugin[{index}] (id = \"{}\").", entry.id),
                entry.fuel,
                entry.timeout_ms,
                entry.memory_mib,
            )?;
        }
        Ok(())
    }
}

/// Per-call budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Fuel for the call.
    pub fuel: u64,
    /// Wall-clock deadline.
    pub timeout: Duration,
    /// Linear memory cap per instance.
    pub memory_bytes: usize,
    /// Output size cap.
    pub max_output_bytes: usize,
}

/// Why a call did not produce a result. Classified by trap *type*, never by message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// All fuel consumed.
    #[error("ran out of fuel after {fuel} units")]
    OutOfFuel {
        /// The budget.
        fuel: u64,
    },
    /// The wall-clock deadline passed.
    #[error("did not finish within its {}ms deadline", timeout.as_millis())]
    Deadline {
        /// The deadline.
        timeout: Duration,
    },
    /// The memory limit was hit.
    #[error("{0}")]
    MemoryLimit(MemoryLimitExceeded),
    /// The output was larger than allowed.
    #[error("returned {size} bytes of output; the limit is {limit}")]
    OutputTooLarge {
        /// Output size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The guest trapped (a panic, stack overflow, bad memory access...).
    #[error("trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap {
        /// The trap, e.g. "wasm `unreachable` instruction executed".
        trap: String,
        /// What the guest wrote to stderr (a Rust panic message lands here).
        stderr: String,
    },
    /// Every instance slot of the call's tenant stayed taken for the call's whole deadline;
    /// nothing ran.
    #[error(
        "could not start: all {slots} instance slots of tenant `{tenant}` stayed busy for {}ms (`[sandbox] max_concurrent_calls_per_tenant`)",
        waited.as_millis()
    )]
    TenantBusy {
        /// The tenant.
        tenant: String,
        /// The tenant's share of slots.
        slots: u32,
        /// How long the call waited.
        waited: Duration,
    },
    /// Every instance slot stayed taken for the call's whole deadline; nothing ran.
    #[error(
        "could not start: all {slots} instance slots stayed busy for {}ms (`[sandbox] max_concurrent_calls`)",
        waited.as_millis()
    )]
    Busy {
        /// The number of slots.
        slots: u32,
        /// How long the call waited.
        waited: Duration,
    },
    /// The host failed while running the guest (not the guest's fault as far as we can tell).
    #[error("host error while running the plugin: {0}")]
    Host(String),
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!("; stderr: {stderr}")
    }
}

/// A component does not implement the world it claims, in any released contract version.
#[derive(Debug, thiserror::Error)]
#[error(
    "the component does not implement the `{world}` world of gatehouse:plugin@0.8.0 (nor of \
     the released 0.7.0, 0.6.0, 0.5.0, 0.4.0, 0.3.0, 0.2.0 or 0.1.0): {detail}"
)]
pub struct WorldMismatch {
    /// `adapter` or `policy`.
    pub world: &'static str,
    /// What is missing or mistyped.
    pub detail: String,
}

/// An adapter pre-instantiated against the world of the contract version it was built for.
pub enum PreparedAdapter {
    /// The current contract, `gatehouse:plugin@0.8.0`: tools, resources and prompts; or the
    /// released 0.7.0 or 0.6.0, whose adapter worlds are the same but for their version.
    Current(AdapterPre<CallState>),
    /// The released `gatehouse:plugin@0.5.0`, or 0.4.0, 0.3.0 or 0.2.0, whose adapter worlds
    /// have the same shape less the `caller` import: tools only (`invoke`).
    V0_5(adapter_0_5::AdapterPre<CallState>),
    /// The released `gatehouse:plugin@0.1.0`: its call context has no `upstream`.
    V0_1(adapter_0_1::AdapterPre<CallState>),
}

impl PreparedAdapter {
    /// The engine it was prepared with.
    pub fn engine(&self) -> &Engine {
        match self {
            Self::Current(pre) => pre.engine(),
            Self::V0_5(pre) => pre.engine(),
            Self::V0_1(pre) => pre.engine(),
        }
    }

    /// Whether it serves resources and prompts (built for contract 0.6.0 or later).
    pub fn serves_content(&self) -> bool {
        matches!(self, Self::Current(_))
    }
}

/// What a call asks of an adapter: one of its exports.
#[derive(Debug, Clone, Copy)]
pub enum Export<'a> {
    /// `invoke`: run a tool (a capability) with JSON arguments.
    Invoke {
        /// The capability id.
        capability: &'a str,
        /// Its arguments, a JSON object.
        args: &'a str,
    },
    /// `read-resource` (0.6.0).
    ReadResource {
        /// The resource's URI.
        uri: &'a str,
    },
    /// `get-prompt` (0.6.0).
    GetPrompt {
        /// The prompt's name.
        name: &'a str,
        /// Its arguments, a JSON object of strings.
        args: &'a str,
    },
    /// `complete` (0.6.0).
    Complete {
        /// The prompt or resource template.
        reference: &'a CompletionRef,
        /// The argument's name.
        argument: &'a str,
        /// What the user typed so far.
        value: &'a str,
        /// The values of the arguments already given, a JSON object.
        context: &'a str,
    },
}

/// What an export answered.
#[derive(Debug)]
pub enum Served {
    /// `invoke`'s tool output.
    Output(ToolOutput),
    /// `read-resource`'s contents.
    Contents(Vec<EmbeddedResource>),
    /// `get-prompt`'s prompt.
    Prompt(Prompt),
    /// `complete`'s suggestions.
    Completion(Completion),
}

/// A policy module pre-instantiated against the world of the contract version it was built
/// for.
pub enum PreparedPolicy {
    /// The current contract, `gatehouse:plugin@0.8.0`.
    Current(PolicyPre<CallState>),
    /// The released `gatehouse:plugin@0.7.0`: its action has no `protocol` or `delegated-by`.
    V0_7(policy_0_7::PolicyPre<CallState>),
    /// The released `gatehouse:plugin@0.6.0`, or 0.5.0 or 0.4.0, whose policy worlds are the
    /// same but for their version: its action has no `sends`, and its prior actions are tool
    /// names.
    V0_6(policy_0_6::PolicyPre<CallState>),
    /// The released `gatehouse:plugin@0.3.0`: its action has no claims or skills.
    V0_3(policy_0_3::PolicyPre<CallState>),
    /// The released `gatehouse:plugin@0.2.0`: its decision has fewer obligations too.
    V0_2(policy_0_2::PolicyPre<CallState>),
    /// The released `gatehouse:plugin@0.1.0`, whose `action` and `decision` are 0.2.0's.
    V0_1(policy_0_1::PolicyPre<CallState>),
}

/// What one call did, whatever its outcome.
#[derive(Debug)]
pub struct CallReport<T> {
    /// The result, or why there is none.
    pub outcome: Result<T, SandboxError>,
    /// Fuel the call consumed.
    pub fuel_consumed: u64,
    /// Wall-clock time, instantiation included.
    pub duration: Duration,
    /// Log lines the plugin wrote.
    pub logs: Vec<LogLine>,
    /// Log lines beyond the per-call cap.
    pub logs_dropped: usize,
    /// Outbound requests it attempted.
    pub egress: Vec<EgressAttempt>,
    /// What it told and asked its caller (an adapter of contract 0.5.0), if anything.
    pub caller: Option<CallerRecord>,
}

/// The engine and its linkers. Cheap to share (`Arc` it); one per host.
pub struct Sandbox {
    engine: Engine,
    limits: Limits,
    /// One permit per pooled instance: held from store creation to its drop.
    slots: Semaphore,
    /// Each tenant's share of the slots (one entry per tenant seen).
    tenant_slots: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<Semaphore>>>,
    tenant_share: u32,
    adapter_linker: Linker<CallState>,
    policy_linker: Linker<CallState>,
    config: SandboxConfig,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Link phase: builds the engine and the linkers, and starts the epoch ticker (a thread
    /// that ends when the engine is dropped).
    ///
    /// Call [`SandboxConfig::check`] first: this builds the pool from the config as it is.
    pub fn new(config: SandboxConfig) -> wasmtime::Result<Self> {
        let limits = config.limits();
        let slots = config.max_concurrent_calls.max(1);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(slots * CORE_INSTANCES_PER_COMPONENT)
            .total_memories(slots * MEMORIES_PER_COMPONENT)
            .total_tables(slots * TABLES_PER_COMPONENT)
            .total_stacks(slots)
            .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
            .max_memories_per_component(MEMORIES_PER_COMPONENT)
            .max_tables_per_component(TABLES_PER_COMPONENT)
            .max_memory_size(config.max_memory_mib as usize * 1024 * 1024)
            .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .pagemap_scan(wasmtime::Enabled::Auto)
            .decommit_batch_size(DECOMMIT_BATCH.min(slots as usize));
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm)?;
        start_epoch_ticker(&engine)?;

        let mut adapter_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut adapter_linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut adapter_linker)?;
        log::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        caller::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_7::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        caller_0_7::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_6::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        caller_0_6::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_5::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        caller_0_5::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_4::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_3::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_2::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;
        log_0_1::add_to_linker::<CallState, HasSelf<CallState>>(&mut adapter_linker, |s| s)?;

        let mut policy_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut policy_linker)?;
        log::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_7::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_6::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_5::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_4::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_3::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_2::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;
        log_0_1::add_to_linker::<CallState, HasSelf<CallState>>(&mut policy_linker, |s| s)?;

        Ok(Self {
            engine,
            limits,
            slots: Semaphore::new(slots as usize),
            tenant_slots: std::sync::Mutex::default(),
            tenant_share: config
                .max_concurrent_calls_per_tenant
                .unwrap_or(slots.div_ceil(2))
                .clamp(1, slots),
            adapter_linker,
            policy_linker,
            config,
        })
    }

    /// The engine, for compiling components.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The default per-call budgets.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The per-call budgets of plugin `id` (its `[[sandbox.plugin]]` entry, or the defaults).
    pub fn limits_for(&self, id: &str) -> Limits {
        self.config.limits_for(id)
    }

    /// Instance slots taken now, and how many there are (`[sandbox] max_concurrent_calls`).
    pub fn slots(&self) -> (usize, usize) {
        let total = self.config.max_concurrent_calls.max(1) as usize;
        (total.saturating_sub(self.slots.available_permits()), total)
    }

    /// Load phase: pre-instantiates an adapter, checking it implements the `adapter` world of
    /// the current contract or, failing that, of the released 0.5.0 (which 0.2.0 to 0.4.0
    /// adapters satisfy too), then 0.1.0. A component that
    /// implements neither is refused with what the current world misses.
    pub fn prepare_adapter(&self, component: &Component) -> Result<PreparedAdapter, WorldMismatch> {
        let mismatch = |e: wasmtime::Error| WorldMismatch {
            world: "adapter",
            detail: format!("{e:#}"),
        };
        let pre = self
            .adapter_linker
            .instantiate_pre(component)
            .map_err(mismatch)?;
        if let Ok(current) = AdapterPre::new(pre.clone()) {
            return Ok(PreparedAdapter::Current(current));
        }
        // What 0.5.0's world misses is what every version's does (`invoke`, say); the current
        // one's first miss may be only one of the exports 0.6.0 added.
        adapter_0_5::AdapterPre::new(pre.clone())
            .map(PreparedAdapter::V0_5)
            .or_else(|older| {
                adapter_0_1::AdapterPre::new(pre)
                    .map(PreparedAdapter::V0_1)
                    .map_err(|_| mismatch(older))
            })
    }

    /// Load phase: pre-instantiates a policy module, checking it implements the `policy` world
    /// of the current contract or, failing that, of the released 0.7.0, then 0.6.0 (which
    /// 0.4.0 and 0.5.0 policies satisfy too), then 0.3.0, then 0.2.0, then 0.1.0.
    pub fn prepare_policy(&self, component: &Component) -> Result<PreparedPolicy, WorldMismatch> {
        let mismatch = |e: wasmtime::Error| WorldMismatch {
            world: "policy",
            detail: format!("{e:#}"),
        };
        let pre = self
            .policy_linker
            .instantiate_pre(component)
            .map_err(mismatch)?;
        match PolicyPre::new(pre.clone()) {
            Ok(current) => Ok(PreparedPolicy::Current(current)),
            Err(current) => policy_0_7::PolicyPre::new(pre.clone())
                .map(PreparedPolicy::V0_7)
                .or_else(|_| policy_0_6::PolicyPre::new(pre.clone()).map(PreparedPolicy::V0_6))
                .or_else(|_| policy_0_3::PolicyPre::new(pre.clone()).map(PreparedPolicy::V0_3))
                .or_else(|_| policy_0_2::PolicyPre::new(pre.clone()).map(PreparedPolicy::V0_2))
                .or_else(|_| policy_0_1::PolicyPre::new(pre).map(PreparedPolicy::V0_1))
                .map_err(|_| mismatch(current)),
        }
    }

    /// Prepare + invoke: runs one adapter export in a fresh instance, its requests through
    /// `egress`, what it tells and asks its caller through `caller`. An adapter built for a
    /// contract before 0.6.0 has only `invoke`: asked for another export, it answers an
    /// `internal` tool error (the host refuses to install one whose manifest declares
    /// resources or prompts, so only a bug gets here).
    #[allow(
        clippy::too_many_arguments,
        reason = "one call's every input, each distinct"
    )]
    pub async fn run_adapter(
        &self,
        pre: &PreparedAdapter,
        limits: &Limits,
        egress: EgressGate,
        caller: CallerGate,
        ctx: &CallContext,
        export: Export<'_>,
    ) -> CallReport<Result<Served, ToolError>> {
        let mut report = self
            .run(
                &ctx.tenant,
                limits,
                egress,
                caller,
                false,
                async |store| match (pre, export) {
                    (PreparedAdapter::Current(pre), export) => {
                        let adapter = pre.instantiate_checked_once(&mut *store).await?;
                        Ok(match export {
                            Export::Invoke { capability, args } => adapter
                                .call_invoke(store, ctx, capability, args)
                                .await?
                                .map(Served::Output),
                            Export::ReadResource { uri } => adapter
                                .call_read_resource(store, ctx, uri)
                                .await?
                                .map(Served::Contents),
                            Export::GetPrompt { name, args } => adapter
                                .call_get_prompt(store, ctx, name, args)
                                .await?
                                .map(Served::Prompt),
                            Export::Complete {
                                reference,
                                argument,
                                value,
                                context,
                            } => adapter
                                .call_complete(store, ctx, reference, argument, value, context)
                                .await?
                                .map(Served::Completion),
                        })
                    }
                    (PreparedAdapter::V0_5(pre), Export::Invoke { capability, args }) => {
                        let adapter = pre.instantiate_checked_once(&mut *store).await?;
                        let result = adapter.call_invoke(store, ctx, capability, args).await?;
                        Ok(result.map(Served::Output))
                    }
                    (PreparedAdapter::V0_1(pre), Export::Invoke { capability, args }) => {
                        let adapter = pre.instantiate_checked_once(&mut *store).await?;
                        let ctx = v0_1::call_context(ctx);
                        let result = adapter.call_invoke(store, &ctx, capability, args).await?;
                        Ok(result
                            .map(|output| Served::Output(output.into()))
                            .map_err(ToolError::from))
                    }
                    (PreparedAdapter::V0_5(_) | PreparedAdapter::V0_1(_), _) => {
                        Ok(Err(older_serves_tools_only()))
                    }
                },
            )
            .await;
        // An error is output too: bounded like it, so an adapter cannot push an unbounded
        // message (say, a whole upstream body) through the error path.
        let limit = limits.max_output_bytes;
        let size = match &report.outcome {
            Ok(Ok(served)) => served_size(served),
            Ok(Err(error)) => {
                error.code.len()
                    + error.message.len()
                    + error.remediation.as_ref().map_or(0, String::len)
            }
            Err(_) => 0,
        };
        if size > limit {
            report.outcome = Err(SandboxError::OutputTooLarge { size, limit });
        }
        report
    }

    /// Prepare + invoke: runs one policy evaluation in a fresh instance. Policies have no
    /// `wasi:http` import, so the egress gate is never reached; it denies anyway.
    pub async fn run_policy(
        &self,
        pre: &PreparedPolicy,
        limits: &Limits,
        action: &Action,
        config: &str,
    ) -> CallReport<Decision> {
        // An older version's module: its action converted down, its decision back up.
        macro_rules! older {
            ($store:ident, $pre:ident, $version:ident) => {{
                let policy = $pre.instantiate_checked_once(&mut *$store).await?;
                let action = $version::action(action);
                let decision = policy.call_evaluate($store, &action, config).await?;
                Ok(Decision::from(decision))
            }};
        }
        let mut report = self
            .run(
                &action.tenant,
                limits,
                EgressGate::deny_all(),
                CallerGate::none(),
                true,
                async |store| match pre {
                    PreparedPolicy::Current(pre) => {
                        let policy = pre.instantiate_checked_once(&mut *store).await?;
                        policy.call_evaluate(store, action, config).await
                    }
                    PreparedPolicy::V0_7(pre) => older!(store, pre, v0_7),
                    PreparedPolicy::V0_6(pre) => older!(store, pre, v0_6),
                    PreparedPolicy::V0_3(pre) => older!(store, pre, v0_3),
                    PreparedPolicy::V0_2(pre) => older!(store, pre, v0_2),
                    PreparedPolicy::V0_1(pre) => older!(store, pre, v0_1),
                },
            )
            .await;
        if let Ok(decision) = &report.outcome
            && let size = decision_size(decision)
            && size > MAX_DECISION_BYTES
        {
            report.outcome = Err(SandboxError::OutputTooLarge {
                size,
                limit: MAX_DECISION_BYTES,
            });
        }
        report
    }

    /// Prepare + invoke, whatever the world: a slot of `tenant`'s share, then a slot of the
    /// pool, a fresh budgeted store, `call` under the deadline, every failure classified.
    async fn run<T>(
        &self,
        tenant: &str,
        limits: &Limits,
        egress: EgressGate,
        caller: CallerGate,
        deterministic: bool,
        call: impl AsyncFnOnce(&mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> CallReport<T> {
        let waited = Instant::now();
        let deadline = tokio::time::Instant::now() + limits.timeout;
        // The semaphores are never closed, so an `Err` from `acquire` cannot happen. A share
        // as large as the pool limits nothing beyond the pool itself.
        let _tenant_slot = if self.tenant_share < self.config.max_concurrent_calls.max(1) {
            let share = self.tenant_share(tenant);
            let Ok(Ok(permit)) = tokio::time::timeout_at(deadline, share.acquire_owned()).await
            else {
                return self.busy(
                    waited,
                    SandboxError::TenantBusy {
                        tenant: tenant.to_owned(),
                        slots: self.tenant_share,
                        waited: waited.elapsed(),
                    },
                );
            };
            Some(permit)
        } else {
            None
        };
        let Ok(Ok(_slot)) = tokio::time::timeout_at(deadline, self.slots.acquire()).await else {
            return self.busy(
                waited,
                SandboxError::Busy {
                    slots: self.config.max_concurrent_calls,
                    waited: waited.elapsed(),
                },
            );
        };
        let (mut store, started) = self.prepare(limits, egress, caller, deterministic);
        let paused = std::sync::Arc::clone(&store.data().paused);
        let outcome = tokio::select! {
            biased;
            outcome = call(&mut store) => Some(outcome),
            () = running_out(&paused, started, limits.timeout + HOST_GRACE) => None,
        };
        let outcome = match outcome {
            Some(Ok(value)) => Ok(value),
            Some(Err(error)) => Err(classify(&error, limits, &store)),
            None => Err(SandboxError::Deadline {
                timeout: limits.timeout,
            }),
        };
        finish(store, started, limits, outcome)
    }

    /// `tenant`'s share of the slots (created at its first call; tenants are few: one per
    /// API key, or per tenant an embedding gateway names).
    fn tenant_share(&self, tenant: &str) -> std::sync::Arc<Semaphore> {
        let mut shares = self
            .tenant_slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::sync::Arc::clone(
            shares
                .entry(tenant.to_owned())
                .or_insert_with(|| std::sync::Arc::new(Semaphore::new(self.tenant_share as usize))),
        )
    }

    fn busy<T>(&self, waited: Instant, error: SandboxError) -> CallReport<T> {
        let waited = waited.elapsed();
        tracing::warn!(%error, "no free instance slot; call refused");
        CallReport {
            outcome: Err(error),
            fuel_consumed: 0,
            duration: waited,
            logs: Vec::new(),
            logs_dropped: 0,
            egress: Vec::new(),
            caller: None,
        }
    }

    fn prepare(
        &self,
        limits: &Limits,
        egress: EgressGate,
        caller: CallerGate,
        deterministic: bool,
    ) -> (Store<CallState>, Instant) {
        let mut store = Store::new(
            &self.engine,
            CallState::new(limits.memory_bytes, egress, caller, deterministic),
        );
        store.limiter(|state| state);
        store
            .set_fuel(limits.fuel)
            .expect("fuel consumption is enabled on this engine");
        let started = Instant::now();
        store.set_epoch_deadline(deadline_ticks(limits.timeout));
        // Reached: the time the call waited for its caller does not count; what is left of
        // the budget, if anything, is the new deadline.
        let timeout = limits.timeout;
        store.epoch_deadline_callback(move |store| {
            let running = store.data().paused.running_since(started);
            Ok(match timeout.checked_sub(running) {
                Some(left) if !left.is_zero() => UpdateDeadline::Continue(deadline_ticks(left)),
                _ => UpdateDeadline::Interrupt,
            })
        });
        (store, started)
    }
}

fn finish<T>(
    mut store: Store<CallState>,
    started: Instant,
    limits: &Limits,
    outcome: Result<T, SandboxError>,
) -> CallReport<T> {
    let remaining = store.get_fuel().unwrap_or(0);
    let state = store.data_mut();
    CallReport {
        outcome,
        fuel_consumed: limits.fuel.saturating_sub(remaining),
        duration: started.elapsed(),
        logs: std::mem::take(&mut state.logs),
        logs_dropped: state.logs_dropped,
        egress: state.egress.take_attempts(),
        caller: std::mem::replace(&mut state.caller, CallerGate::none()).into_record(),
    }
}

/// Ends when the call has run `budget`, the time it waited for its caller not counted.
async fn running_out(paused: &Paused, started: Instant, budget: Duration) {
    loop {
        let running = paused.running_since(started);
        match budget.checked_sub(running) {
            Some(left) if !left.is_zero() => tokio::time::sleep(left).await,
            _ => return,
        }
    }
}

/// Classifies a failed call by the type of its error.
fn classify(error: &wasmtime::Error, limits: &Limits, store: &Store<CallState>) -> SandboxError {
    if let Some(exceeded) = error.downcast_ref::<MemoryLimitExceeded>() {
        return SandboxError::MemoryLimit(*exceeded);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => SandboxError::OutOfFuel { fuel: limits.fuel },
        Some(Trap::Interrupt) => SandboxError::Deadline {
            timeout: limits.timeout,
        },
        Some(trap) => SandboxError::Trap {
            trap: trap.to_string(),
            stderr: store.data().stderr(),
        },
        None => SandboxError::Host(format!("{error:#}")),
    }
}

fn deadline_ticks(timeout: Duration) -> u64 {
    let ticks = timeout.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
}

fn start_epoch_ticker(engine: &Engine) -> wasmtime::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("gatehouse-epoch".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })?;
    Ok(())
}

/// Bytes of an adapter's output as the host will hold and forward them.
/// The bytes of text a decision carries (reasons, evidence, obligations).
fn decision_size(decision: &Decision) -> usize {
    use crate::bindings::types::Obligation;
    let reasons: usize = decision
        .reasons
        .iter()
        .map(|r| r.code.len() + r.message.len())
        .sum();
    let obligations: usize = decision
        .obligations
        .iter()
        .map(|o| match o {
            Obligation::RedactPointer(pointer) => pointer.len(),
            Obligation::MaskPii(kinds) => kinds.len(),
            Obligation::MaskSecrets(scan) => {
                scan.kinds.len() + scan.fields.iter().map(String::len).sum::<usize>()
            }
            Obligation::MaskIdentifiers(identifiers) => identifiers
                .iter()
                .map(|i| i.name.len() + i.pattern.len())
                .sum(),
        })
        .sum();
    reasons
        + obligations
        + decision
            .evidence_refs
            .iter()
            .map(String::len)
            .sum::<usize>()
}

pub fn output_size(output: &ToolOutput) -> usize {
    output.content.iter().map(content_size).sum::<usize>()
        + output.structured.as_ref().map_or(0, String::len)
        + output.evidence_refs.iter().map(String::len).sum::<usize>()
}

/// The size of what an export answered, as [`output_size`] counts a tool's output.
fn served_size(served: &Served) -> usize {
    match served {
        Served::Output(output) => output_size(output),
        Served::Contents(contents) => contents.iter().map(resource_size).sum(),
        Served::Prompt(prompt) => {
            prompt.description.as_ref().map_or(0, String::len)
                + (prompt.messages.iter())
                    .map(|message| content_size(&message.content))
                    .sum::<usize>()
        }
        Served::Completion(completion) => completion.values.iter().map(String::len).sum(),
    }
}

fn content_size(block: &crate::bindings::types::Content) -> usize {
    use crate::bindings::types::Content;
    match block {
        Content::Text(text) => text.len(),
        Content::Image(blob) | Content::Audio(blob) => blob.data.len() + blob.mime_type.len(),
        Content::Resource(resource) => resource_size(resource),
    }
}

fn resource_size(resource: &EmbeddedResource) -> usize {
    resource.uri.len()
        + resource.mime_type.as_ref().map_or(0, String::len)
        + resource.text.as_ref().map_or(0, String::len)
        + resource.data.as_ref().map_or(0, Vec::len)
}

/// What an adapter built for a contract before 0.6.0 answers when asked for anything but a
/// tool.
fn older_serves_tools_only() -> ToolError {
    ToolError {
        kind: crate::bindings::types::ErrorKind::Internal,
        code: "NOT_SERVED".to_owned(),
        message: "this adapter was built for a contract before 0.6.0, which serves tools only"
            .to_owned(),
        retryable: false,
        remediation: Some("rebuild it against gatehouse:plugin@0.8.0".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> SandboxConfig {
        toml::from_str(toml).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_plugin_entry_replaces_the_defaults_it_sets() {
        let config = config(
            r#"
            fuel = 1000
            [[plugin]]
            id = "acme.*-js"
            memory_mib = 128
            fuel = 5000
            [[plugin]]
            id = "acme.orders-js"
            fuel = 9
            "#,
        );
        config.check().unwrap();
        let js = config.limits_for("acme.orders-js");
        assert_eq!(
            (js.fuel, js.memory_bytes),
            (5000, 128 << 20),
            "the first match wins"
        );
        assert_eq!(js.timeout, config.limits().timeout);
        assert_eq!(config.limits_for("acme.orders"), config.limits());
    }

    #[test]
    fn budgets_out_of_range_are_refused_naming_the_key_and_the_ceiling() {
        let cases = [
            (
                "memory_mib = 0",
                "invalid [sandbox] config: `memory_mib` is 0; it must be at least 1",
            ),
            (
                "max_memory_mib = 5000",
                "`max_memory_mib` is 5000; it must be between 1 and 4096",
            ),
            (
                "fuel = 60_000_000_000",
                "`fuel` is 60000000000; the host's ceiling is `max_fuel` = 50000000000",
            ),
            (
                "[[plugin]]\nid = \"a.js\"\nmemory_mib = 1024",
                "`plugin[0] (id = \"a.js\").memory_mib` is 1024; the host's ceiling is `max_memory_mib` = 512",
            ),
            (
                "max_timeout_ms = 10000\n[[plugin]]\nid = \"a.js\"\ntimeout_ms = 0",
                "`plugin[0] (id = \"a.js\").timeout_ms` is 0; it must be at least 1",
            ),
        ];
        for (toml, expected) in cases {
            let error = config(toml).check().unwrap_err().to_string();
            assert!(error.contains(expected), "{toml}: {error}");
        }
    }

    #[test]
    fn a_default_above_a_ceiling_is_refused() {
        let error = config("timeout_ms = 90000").check().unwrap_err();
        assert_eq!(error.key, "timeout_ms");
        assert!(
            error.expected.contains("`max_timeout_ms` = 60000"),
            "{error}"
        );
    }
}
