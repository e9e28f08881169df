//! gatehouse-host: a policy-enforcement host for AI-agent tool calls.
//!
//! Third parties ship **adapters** and operators ship **policy modules**, both as signed
//! WebAssembly components behind one WIT contract (`wit/gatehouse.wit`). The host:
//! 1. checks each component's signature against the operator's trusted publisher keys and
//!    scopes ([`plugin`]);
//! 2. compiles it once, caching the artifact by digest;
//! 3. runs every call in a fresh instance with fuel, deadline and memory budgets, with no
//!    ambient authority: no files, no environment, no sockets, and egress only through the
//!    egress gate;
//! 4. reports every outcome as a [`ToolResultEnvelope`] with an [`OutcomeCode`];
//! 5. runs every call through the governed pipeline ([`Host::call`]): normalize, validate,
//!    host invariants, policy modules, invoke with skills context, verify, obligations;
//! 6. serves the tools to agents over MCP (Streamable HTTP) with API-key identity
//!    (`mcp`, feature `mcp`, and `gatehouse serve`, feature `cli`);
//! 7. lets operators act on a running gateway through the admin API (`admin`, feature
//!    `admin`): approvals, the audit log, plugin swaps, health and Prometheus metrics.
//!
//! Embedding (see [`Host`] and `host/examples/embed.rs`): build a [`Host`] from
//! a [`HostConfig`], install adapters and policies, submit [`ToolCallEnvelope`]s. The public
//! surface is this root, [`config`] (every config table), [`envelope`] (both envelopes and
//! what they carry), [`model`] (the specs' vocabulary), [`plugin`] (manifests, signing keys,
//! `pack` and `inspect`), [`error`] (every error type) and [`watch`]. With
//! `default-features = false` the crate compiles neither the command line nor the MCP server.
//!
//! How the modules layer (each imports only from layers below it) is drawn in
//! `host/README.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use gatehouse_host::{Host, HostConfig, ToolCallEnvelope};
//!
//! let host = Host::new(HostConfig::from_file("gatehouse.toml".as_ref())?)?;
//! host.install_adapter(&std::fs::read("echo.signed.wasm")?)?;
//! let call = ToolCallEnvelope::new("acme", "gatehouse.echo.echo", serde_json::json!({ "message": "hi" }));
//! let result = host.call(call).await;
//! assert!(result.is_ok());
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![deny(unsafe_code)]

// Layers, top to bottom (see host/README.md): cli -> import, mcp, admin, demo, watch -> host, oci ->
// config, metrics -> pipeline -> envelope -> policy -> plugin -> sandbox -> egress -> model, skills, state, ids,
// secret, bindings.
#[cfg(any(feature = "mcp", feature = "admin"))]
mod access_log;
#[cfg(feature = "admin")]
pub mod admin;
mod atomic_file;
mod bindings;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
mod egress;
pub mod envelope;
pub mod error;
#[cfg(test)]
mod fuzz;
mod host;
mod ids;
#[cfg(feature = "import")]
pub mod import;
#[cfg(any(feature = "mcp", feature = "admin"))]
mod listener;
#[cfg(feature = "mcp")]
pub mod mcp;
mod metrics;
pub mod model;
#[cfg(feature = "oci")]
pub mod oci;
mod pipeline;
pub mod plugin;
mod policy;
mod sandbox;
mod secret;
mod skills;
pub mod state;
mod telemetry;
mod throttle;
pub mod watch;

/// OTLP export of the call spans (cargo feature `otlp`; see the `telemetry` module docs).
#[cfg(feature = "otlp")]
pub use telemetry::otlp;

pub use config::HostConfig;
#[cfg(any(feature = "oci", feature = "import"))]
pub use egress::install_default_provider;
pub use envelope::{OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
pub use error::{HostError, InstallError, LoadError};
pub use host::{Host, PolicyModule};
pub use model::{
    ApprovalMode, CapabilityClass, ContentBlock, ErrorBody, ErrorKind, Principal, PrincipalKind,
};
pub use pipeline::deliver::caller_view;
pub use plugin::{LoadedAdapter, LoadedPolicy, PluginRef, Verified};
pub use skills::{Level as SkillLevel, Resolution, Traced as SkillTrace};

/// The egress gate's own API, for the project's benchmarks (feature `internals`): drive the
/// gate without a guest. Not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::egress::{CallInfo, EgressGate, Grants, TlsClient};
}
