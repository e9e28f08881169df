//! gatehouse-host: a policy-enforcement host for AI-agent tool calls.
//!
//! Third parties ship **adapters** and operators ship **policy modules**, both as signed
//! WebAssembly components behind one WIT contract (`wit/gatehouse.wit`). The host:
//! 1. checks each component's signature against the operator's trusted publisher keys and
//!    scopes ([`plugin`]);
//! 2. compiles it once, caching the artifact by digest ([`plugin::cache`]);
//! 3. runs every call in a fresh instance with fuel, deadline and memory budgets
//!    ([`sandbox`]), with no ambient authority: no files, no environment, no sockets, and
//!    egress only through the [`egress`] gate;
//! 4. reports every outcome as a [`ToolResultEnvelope`] with an [`OutcomeCode`];
//! 5. runs every call through the governed pipeline ([`pipeline`]): normalize, validate, host
//!    invariants, policy modules ([`policy`]), invoke with skills context ([`skills`]),
//!    verify, obligations;
//! 6. serves the tools to agents over MCP (Streamable HTTP) with API-key identity
//!    ([`mcp`], `gatehouse serve`).
//!
//! Embedding (see [`Host`] and `host/examples/embed.rs`): build a [`Host`] from
//! a [`HostConfig`], install adapters and policies, submit [`ToolCallEnvelope`]s.
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

pub mod bindings;
pub mod cli;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
pub mod egress;
pub mod envelope;
mod host;
pub mod mcp;
pub mod model;
pub mod pipeline;
pub mod plugin;
pub mod policy;
pub mod sandbox;
pub mod skills;

pub use config::HostConfig;
pub use envelope::{OutcomeCode, Status, ToolResultEnvelope};
pub use host::{Host, HostError, InstallError};
pub use pipeline::ToolCallEnvelope;
