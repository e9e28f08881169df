//! MCP over Streamable HTTP: how agents reach the tools (`gatehouse serve`).
//!
//! One endpoint (`[mcp] path`, default `/mcp`), served by hyper, with its own front door and
//! rmcp's model types. Each HTTP request, in order ([`server`]):
//! 1. anything but the endpoint path is 404;
//! 2. `GET /.well-known/oauth-protected-resource` (and the same with the endpoint path appended)
//!    answers the OAuth protected resource metadata (RFC 9728) without identity: `resource`,
//!    `authorization_servers`, `bearer_methods_supported`, `scopes_supported`; `GET
//!    /.well-known/jwks.json` the gateway's public keys, those of its receipts and its A2A card
//!    ([`jwks`]);
//! 3. **identify** (gate 1, [`identity`]): a bearer API key or JWT ([`jwt`]), or the anonymous
//!    tenant if the operator set one; otherwise 401 with `WWW-Authenticate: Bearer
//!    resource_metadata="<metadata URL>"` (and `error="invalid_token"` when a token was refused),
//!    and nothing else happens;
//! 4. **the front door** ([`router`]): the HTTP checks (`Host`, `Origin`, method, `Accept`,
//!    `Content-Type`), the body within `[mcp] max_request_bytes` (413 beyond), one JSON-RPC
//!    message read ([`message`]) and classified once by its protocol era;
//! 5. **its version's answer**: [`v2025_11_25`] (the initialize handshake: 2025-11-25 and the
//!    versions before it) or [`v2026_07_28`] (self-contained requests); a `tools/call` of
//!    either runs the one call path ([`call`]): the governed pipeline, its result delivered as
//!    the caller's view ([`gatehouse_host::caller_view`]) and mapped to MCP ([`result`]).
//!
//! `README.md` beside this file has the table of what each version offers, and where rmcp is
//! used and where it is not.
//!
//! A call's result maps to MCP as: content blocks and `structuredContent` as the adapter returned
//! them (after verification and obligations); `isError` unless the outcome is `OK`, with the
//! error's message (and remediation) as text content; and the caller's view of the
//! `ToolResultEnvelope` (outcome code, status, model-useful error; no policy decision record,
//! egress record or usage: those stay in the logs and the audit log) under
//! `_meta["gatehouse/result"]`; a replayed result (same idempotency key, same request) also carries
//! `_meta["gatehouse/replay_of"]`, the id of the call that ran. An unknown or hidden tool is the
//! JSON-RPC invalid-params error, as the MCP specification asks. A caller passes an idempotency key
//! (required on write-class tools) as the tool argument `[mcp] idempotency_key_argument`
//! (default `idempotency_key`, listed in `tools/list`: [`keys`]) or in the request's `_meta` as
//! `gatehouse/idempotency_key`, and an approval mode as `_meta["gatehouse/approval_mode"]`; a call
//! paused for approval without a key resumes with `gatehouse/approval_id`.
//!
//! Sessions: no state. Every request stands alone (2026-07-28 has no sessions; 2025-11-25
//! clients get an `Mcp-Session-Id` that is kept nowhere and only scopes their
//! `notifications/cancelled`, and what they declared at `initialize` is remembered per caller:
//! [`v2025_11_25::session`]).
//!
//! A tool listed in `[mcp.aliases]` is listed and called under its alias ([`aliases`]).
//!
//! With `[mcp.a2a]`, the same listener serves peer agents over A2A (protocol 1.0, the JSON-RPC
//! binding): the agent card at `/.well-known/agent-card.json`, and its endpoint, where a
//! message runs the same call path and its task is an MCP task ([`a2a`]).

mod a2a;
pub mod aliases;
pub mod approvals;
mod call;
mod caller;
pub mod config;
mod connect;
pub(crate) mod content;
#[cfg(test)]
mod fuzz;
pub mod identity;
pub mod jwks;
pub mod jwt;
pub mod keys;
mod message;
mod meta;
mod origins;
mod relay;
mod reply;
mod result;
mod router;
pub mod server;
pub mod tasks;
mod v2025_11_25;
mod v2026_07_28;
mod watch;

pub use a2a::A2aConfig;
pub use aliases::ToolAliases;
pub use caller::Caller;
pub use config::{KeyArgumentName, McpConfig};
pub use identity::{ApiKeyConfig, ApiKeyError, ApiKeys, Identity, IdentityError};
pub use jwt::{JwtConfig, JwtConfigError, JwtVerifier};
pub use meta::{
    APPROVAL_ID_META, APPROVAL_MODE_META, IDEMPOTENCY_KEY_META, REPLAY_OF_META, RESULT_META,
};
pub use server::{McpServer, ServerConfigError, Serving};
