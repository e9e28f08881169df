//! gatehouse-core: the vocabulary every layer of gatehouse speaks, as plain data.
//!
//! - [`model`]: the specs' terms: capability classes, approval modes, principals, verdicts,
//!   obligations, content blocks, tenant and tool selectors, and what a call's records cite
//!   (plugins, egress attempts, policy decisions);
//! - [`envelope`]: the [`ToolCallEnvelope`](envelope::ToolCallEnvelope) a caller submits and
//!   the [`ToolResultEnvelope`](envelope::ToolResultEnvelope) it gets back;
//! - [`ids`]: the ids the host mints and W3C trace context;
//! - [`canonical`]: canonical JSON and the request hash idempotency keys are checked against;
//! - [`keys`]: ed25519 keys, their files, and the messages they sign;
//! - [`agent_card`]: A2A agent-card signatures, made and verified with those keys;
//! - [`secret`]: secrets read from the environment or a file, never printed;
//! - [`throttle`]: warnings that a flood cannot turn into a flood of log lines.
//!
//! Nothing here runs a plugin, opens a store or listens: this crate depends on neither
//! wasmtime nor a database, so it builds beside them. The crates above it (`gatehouse-store`,
//! `gatehouse-host`, `gatehouse-server`, `gatehouse-cli`) and their layers are drawn in
//! `crates/host/README.md`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent_card;
pub mod canonical;
pub mod envelope;
pub mod ids;
pub mod keys;
pub mod model;
pub mod receipt;
pub mod secret;
pub mod throttle;
