//! The admin API: JSON over HTTP on its own listener (`[admin]`, loopback by default), for
//! operators acting on a running gateway. Every endpoint is described in `docs/admin-openapi.yaml`.
//!
//! Per request:
//! 1. `/healthz`, `/readyz` (the store answers) and `/metrics` (Prometheus, see the host's metrics)
//!    need no token: probes and scrapers reach them on the admin listener;
//! 2. everything under `/v1` needs `Authorization: Bearer <token>`, one of the `[[admin.token]]`
//!    entries (401 otherwise), whose roles must allow the endpoint (403): `approver` decides
//!    approvals, `operator` changes plugins, `auditor` reads the audit log (and, like the others,
//!    lists what it may see);
//! 3. the handler calls the same code as the `gatehouse` commands and the library: approvals
//!    through [`gatehouse_host::Host::decide`] (so the store's rules apply: pending, not expired,
//!    the approver outside the requesting chain), uploads through [`gatehouse_host::Host::install`]
//!    (signature, trust, load and config checks exactly as at start-up), and every change to the
//!    serving plugins is appended to the audit log (kind `plugin`, principal = the token's).
//!
//! Errors are `{"error": code, "message": ...}` with the status: 400 a bad request or a refused
//! plugin (the message says why), 401, 403, 404, 405, 409 a decision the record's state does not
//! allow (already decided, expired, self-approval, nothing to roll back), 413, 503 the store is
//! unavailable.
//!
//! The same listener serves the web console at `/console` ([`console`]): its pages call these
//! endpoints with a session cookie in place of the bearer token.
//!
//! Files by job: [`config`] (the `[admin]` table), [`auth`] (tokens and roles), [`server`]
//! (routes), `api` (the handlers), [`console`] (pages and sessions), [`reply`] (what handlers
//! answer with). The accept loop is the crate's [`listener`](crate::listener).

mod api;
pub mod auth;
pub mod config;
pub mod console;
pub mod reply;
pub mod server;

pub use auth::{Operator, TokenError, Tokens};
pub use config::{AdminConfig, AdminTokenConfig, Role};
pub use reply::{ApiError, Reply};
pub use server::{AdminConfigError, AdminServer};
