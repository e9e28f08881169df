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
//!    host invariants, policy modules, approve, deduplicate, invoke with skills context,
//!    verify, obligations, record.
//!
//! Embedding (see [`Host`] and `crates/host/examples/embed.rs`): build a [`Host`] from a
//! [`HostConfig`], install adapters and policies, submit [`ToolCallEnvelope`]s. The public
//! surface is this root, [`config`] (every config table), [`envelope`] (both envelopes and
//! what they carry), [`model`] (the specs' vocabulary), [`plugin`] (manifests, signing keys,
//! `pack` and `inspect`), [`state`] (the store), [`error`] (every error type), [`watch`],
//! [`telemetry`], [`delegation`], [`accounts`] (each user's own upstream accounts) and, with
//! its feature, [`oci`].
//!
//! The MCP server, the admin API and the console are the `gatehouse-server` crate, and the
//! `gatehouse` command line is `gatehouse-cli`: this crate compiles neither, nor clap, nor
//! rmcp, nor hyper's server. How the crates and this crate's modules layer (each imports only
//! from layers below it) is drawn in `crates/host/README.md`.
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

// Layers, top to bottom (see crates/host/README.md): watch -> host, oci -> config, metrics ->
// pipeline -> policy -> plugin -> sandbox -> egress, caller -> stdio, bindings -> relay,
// skills, telemetry, decisions, delegation, accounts, atomic_file; below them the crates gatehouse-store and
// gatehouse-core.
pub mod accounts;
mod atomic_file;
mod bindings;
mod caller;
pub mod config;
pub mod decisions;
pub mod delegation;
mod egress;
pub mod error;
#[cfg(test)]
mod fuzz;
mod host;
mod metrics;
#[cfg(feature = "oci")]
pub mod oci;
mod pipeline;
pub mod plugin;
mod policy;
pub mod relay;
mod sandbox;
mod skills;
pub mod stdio;
pub mod telemetry;
pub mod watch;

/// The envelopes of a governed call (`gatehouse-core`'s `envelope`).
pub use gatehouse_core::envelope;
/// The specs' vocabulary (`gatehouse-core`'s `model`).
pub use gatehouse_core::model;
/// The state store (the `gatehouse-store` crate).
pub use gatehouse_store as state;

/// What a completion completes and answers (contract 0.6.0's `completion-ref` and
/// `completion`).
pub use bindings::types::{Completion, CompletionRef};
pub use config::HostConfig;
pub use egress::{AddressPolicy, TlsClient, install_default_provider};
pub use envelope::{OutcomeCode, Status, ToolCallEnvelope, ToolResultEnvelope};
pub use error::{HostError, InstallError, LoadError};
pub use host::{AllowedDowngrade, Host, PolicyModule};
pub use model::{
    ApprovalMode, CapabilityClass, ContentBlock, ErrorBody, ErrorKind, Principal, PrincipalKind,
};
pub use pipeline::deliver::caller_view;
pub use pipeline::invariants::MAX_IDEMPOTENCY_KEY;
pub use pipeline::obligations::apply_to_value as apply_obligations;
pub use pipeline::registry::Listed;
pub use plugin::{LoadedAdapter, LoadedPolicy, PluginRef, Verified};
pub use skills::{Level as SkillLevel, Resolution, Traced as SkillTrace};

/// The egress gate's own API, for the project's benchmarks (feature `internals`): drive the
/// gate without a guest. Not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::egress::{CallInfo, EgressGate, Grants, TlsClient};
}
