//! The per-call store state: what one plugin instance can reach, and what it left behind.
//!
//! Built fresh for every call (prepare phase) and dropped with the store. The WASI context is
//! empty on purpose: no preopened directories, no environment variables, no arguments, stdin
//! closed, TCP, UDP and name lookup disabled. stderr goes to a small bounded buffer so a
//! guest panic message can be reported; stdout is discarded.
//!
//! An adapter's store also holds its call's [caller gate](crate::caller) (what the adapter
//! tells and asks its caller) and the [`Paused`] clock of its asks, which the call's time
//! budget does not count.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::p2::pipe::{MemoryOutputPipe, SinkOutputStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::bindings::LogLevel;
use crate::bindings::adapter::gatehouse::plugin::log;
use crate::caller::{CallerGate, Question};
use crate::egress::{EgressGate, Paused};

/// How much guest stderr is kept (enough for a panic message and its location). A guest that
/// writes more traps.
const STDERR_CAPACITY: usize = 16 * 1024;
/// Log lines kept per call; later ones are counted, not stored.
const MAX_LOG_LINES: usize = 256;
/// Longest log line kept, in bytes; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;

/// The guest hit the configured memory limit. Raised from the store's resource limiter, so a
/// memory bomb is classified by this type, not by the guest's own allocator failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory limit of {limit} bytes exceeded (asked for {desired} bytes in all)")]
pub struct MemoryLimitExceeded {
    /// The configured limit.
    pub limit: usize,
    /// What the store's memories would have held together.
    pub desired: usize,
}

/// A guest's log text as the host logs it: control characters (line breaks, terminal escape
/// sequences, NUL...) and backslashes escaped, so one guest line stays one host line and
/// cannot forge records or drive a terminal.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Controls, and the bidirectional overrides that reorder what a terminal shows.
            c if c.is_control()
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.extend(c.escape_unicode());
            }
            c => out.push(c),
        }
    }
    out
}

/// One log line a plugin wrote through the `log` import.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The message (cut at 4 KiB, then [`escape`]d).
    pub message: String,
}

/// Store data for one call.
pub struct CallState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    pub(crate) egress: EgressGate,
    memory_limit: usize,
    /// Linear memory committed by every memory of the store: the limit is per call, not per
    /// memory, so a component cannot multiply it by declaring more memories.
    memory_used: usize,
    stderr: MemoryOutputPipe,
    pub(crate) logs: Vec<LogLine>,
    pub(crate) logs_dropped: usize,
    pub(crate) caller: CallerGate,
    /// The call's clock of waits for its caller, shared with its egress gate.
    pub(crate) paused: Arc<Paused>,
}

/// A wall clock stopped at the Unix epoch: policies read time from the action instead.
struct Epoch;

impl wasmtime_wasi::HostWallClock for Epoch {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

/// A monotonic clock that never moves.
struct Frozen;

impl wasmtime_wasi::HostMonotonicClock for Frozen {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

impl CallState {
    /// `deterministic` (policy evaluations): the guest's clocks are stopped and its random
    /// numbers are a fixed sequence, so a decision depends only on the action and the config
    /// and replays exactly (the time a policy may use is `action.context.now_unix_ms`).
    /// `caller` carries what an adapter tells and asks its caller ([`CallerGate::none`] for a
    /// policy).
    pub(crate) fn new(
        memory_limit: usize,
        egress: EgressGate,
        caller: CallerGate,
        deterministic: bool,
    ) -> Self {
        use rand::SeedableRng as _;
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(SinkOutputStream)
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        if deterministic {
            builder
                .wall_clock(Epoch)
                .monotonic_clock(Frozen)
                .secure_random(rand::rngs::StdRng::seed_from_u64(0))
                .insecure_random(rand::rngs::StdRng::seed_from_u64(0))
                .insecure_random_seed(0);
        }
        let wasi = builder.build();
        Self {
            paused: egress.paused(),
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            egress,
            memory_limit,
            memory_used: 0,
            stderr,
            logs: Vec::new(),
            logs_dropped: 0,
            caller,
        }
    }

    /// What the guest wrote to stderr, lossily decoded.
    /// What the guest wrote to stderr, [`escape`]d: it reaches the host's logs.
    pub(crate) fn stderr(&self) -> String {
        escape(String::from_utf8_lossy(&self.stderr.contents()).trim_end())
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

impl ResourceLimiter for CallState {
    /// Called for every memory's initial allocation and each growth: the store's total
    /// (all memories) may not pass the call's memory limit.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        let total = (self.memory_used - current.min(self.memory_used)).saturating_add(desired);
        if total > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded {
                limit: self.memory_limit,
                desired: total,
            }));
        }
        self.memory_used = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        super::CORE_INSTANCES_PER_COMPONENT as usize
    }

    fn memories(&self) -> usize {
        super::MEMORIES_PER_COMPONENT as usize
    }

    fn tables(&self) -> usize {
        super::TABLES_PER_COMPONENT as usize
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool> {
        Ok(maximum.is_none_or(|max| desired <= max))
    }
}

/// A plugin built for a released contract before the current one logs through that version's
/// `log` interface (`gatehouse:plugin/log@0.1.0` ... `@0.6.0`, at the module `$bindings`
/// bound it in): the same lines, kept the same way.
macro_rules! older_log {
    ($($bindings:ident),+ $(,)?) => {$(
        impl crate::bindings::$bindings::gatehouse::plugin::log::Host for CallState {
            async fn log(
                &mut self,
                level: crate::bindings::$bindings::gatehouse::plugin::log::Level,
                message: String,
            ) {
                log::Host::log(self, level.into(), message).await;
            }
        }
    )+};
}
older_log!(
    adapter_0_1,
    policy_0_2,
    policy_0_3,
    policy_0_4,
    adapter_0_5,
    adapter_0_6,
    adapter_0_7
);

impl log::Host for CallState {
    async fn log(&mut self, level: LogLevel, mut message: String) {
        if self.logs.len() >= MAX_LOG_LINES {
            self.logs_dropped += 1;
            return;
        }
        message.truncate(message.floor_char_boundary(MAX_LOG_LINE));
        let message = escape(&message);
        let level: &'static str = level.into();
        tracing::debug!(target: "gatehouse::plugin", level, %message);
        self.logs.push(LogLine { level, message });
    }
}

/// The `caller` interface (since contract 0.5.0), through the call's [`CallerGate`]. An ask's
/// wait is [`Paused`]: the call's time budget does not run down while the caller answers.
/// The current interface, 0.6.0's and 0.5.0's are the same at three versions (`caller` names
/// the one in scope where this is expanded).
macro_rules! caller_host {
    () => {
        impl caller::Host for CallState {
            async fn can(&mut self) -> caller::CallerCan {
                self.caller.can().into()
            }

            async fn progress(
                &mut self,
                progress: f64,
                total: Option<f64>,
                message: Option<String>,
            ) {
                self.caller.progress(progress, total, message);
            }

            async fn notify(
                &mut self,
                level: caller::LogLevel,
                logger: Option<String>,
                data: String,
            ) {
                self.caller.notify(level.into(), logger, data);
            }

            async fn ask(
                &mut self,
                key: String,
                kind: caller::AskKind,
                params: String,
            ) -> Result<String, caller::AskError> {
                let request = caller::InputRequest { key, kind, params };
                let mut answers = caller::Host::ask_all(self, vec![request]).await;
                answers.pop().unwrap_or_else(|| {
                    Err(caller::AskError::Failed(
                        "the gateway lost the answer".to_owned(),
                    ))
                })
            }

            async fn ask_all(
                &mut self,
                requests: Vec<caller::InputRequest>,
            ) -> Vec<Result<String, caller::AskError>> {
                let questions = (requests.into_iter())
                    .map(|request| Question {
                        key: request.key,
                        kind: request.kind.into(),
                        params: request.params,
                    })
                    .collect();
                self.paused.start();
                let answers = self.caller.ask_all(questions).await;
                self.paused.stop();
                (answers.into_iter())
                    .map(|answer| answer.map(|value| value.to_string()).map_err(Into::into))
                    .collect()
            }
        }
    };
}

mod caller_host {
    use super::{CallState, Question};
    use crate::bindings::caller;

    caller_host!();
}

mod caller_host_0_5 {
    use super::{CallState, Question};
    use crate::bindings::adapter_0_5::gatehouse::plugin::caller;

    caller_host!();
}

mod caller_host_0_6 {
    use super::{CallState, Question};
    use crate::bindings::adapter_0_6::gatehouse::plugin::caller;

    caller_host!();
}

mod caller_host_0_7 {
    use super::{CallState, Question};
    use crate::bindings::adapter_0_7::gatehouse::plugin::caller;

    caller_host!();
}
