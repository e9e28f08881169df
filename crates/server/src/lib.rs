//! gatehouse-server: the network front ends of a [`gatehouse_host::Host`].
//!
//! - [`mcp`]: MCP over Streamable HTTP, how agents reach the tools (`gatehouse serve`), with
//!   identity (API keys, JWTs) as gate 1 of the governed call;
//! - [`admin`]: the admin API (approvals, the audit log, plugin swaps, health and Prometheus
//!   metrics) and the web console, on a listener of their own.
//!
//! Both listen the same way ([`listener`]: one accept loop with a connection cap, header and
//! body time limits, and a drain on shutdown), take bearer tokens the same way (`bearer`: read
//! once from the environment or a file, kept as digests) and write the same access lines
//! (`access_log`), and make their own requests the same way ([`outbound`]: a JWKS fetch, an
//! A2A webhook, the card `gatehouse import a2a` reads). Each endpoint is built once per config (the load phase: tokens and keys
//! read, URLs checked) and then answers requests by calling the host; nothing here decides
//! about a call.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

// Layers, top to bottom (see crates/host/README.md): mcp, admin -> listener, bearer,
// access_log;
// below them the crates gatehouse-host, gatehouse-store and gatehouse-core.
mod access_log;
pub mod admin;
mod bearer;
pub mod listener;
pub mod mcp;
pub mod oauth;
pub mod outbound;
