//! The per-call store state: what one plugin instance can reach, and what it left behind.
//!
//! Built fresh for every call (prepare phase) and dropped with the store. The WASI context is
//! empty on purpose: no preopened directories, no environment variables, no arguments, stdin
//! closed, TCP, UDP and name lookup disabled. stderr goes to a small bounded buffer so a
//! guest panic message can be reported; stdout is discarded.

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::p2::pipe::{MemoryOutputPipe, SinkOutputStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::bindings::LogLevel;
use crate::bindings::adapter::gatehouse::plugin::log;
use crate::egress::EgressGate;

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
#[error("memory limit of {limit} bytes exceeded (asked for {desired} bytes)")]
pub struct MemoryLimitExceeded {
    /// The configured limit.
    pub limit: usize,
    /// What the guest asked to grow to.
    pub desired: usize,
}

/// One log line a plugin wrote through the `log` import.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The message (cut at 4 KiB).
    pub message: String,
}

/// Store data for one call.
pub struct CallState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    pub(crate) egress: EgressGate,
    memory_limit: usize,
    stderr: MemoryOutputPipe,
    pub(crate) logs: Vec<LogLine>,
    pub(crate) logs_dropped: usize,
}

impl CallState {
    pub(crate) fn new(memory_limit: usize, egress: EgressGate) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let wasi = WasiCtx::builder()
            .stdout(SinkOutputStream)
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            egress,
            memory_limit,
            stderr,
            logs: Vec::new(),
            logs_dropped: 0,
        }
    }

    /// What the guest wrote to stderr, lossily decoded.
    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim_end()
            .to_owned()
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
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        if desired > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded {
                limit: self.memory_limit,
                desired,
            }));
        }
        Ok(true)
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

impl log::Host for CallState {
    async fn log(&mut self, level: LogLevel, mut message: String) {
        if self.logs.len() >= MAX_LOG_LINES {
            self.logs_dropped += 1;
            return;
        }
        message.truncate(message.floor_char_boundary(MAX_LOG_LINE));
        let level: &'static str = level.into();
        tracing::debug!(target: "gatehouse::plugin", level, %message);
        self.logs.push(LogLine { level, message });
    }
}
