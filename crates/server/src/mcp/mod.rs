//! MCP over Streamable HTTP: how agents reach the tools (`gatehouse serve`).
//!
//! One endpoint (`[mcp] path`, default `/mcp`), served by hyper with the official Rust MCP SDK
//! (rmcp) speaking the protocol. Each HTTP request, in order:
//! 1. anything but the endpoint path is 404;
//! 2. `GET /.well-known/oauth-protected-resource` (and the same with the endpoint path appended)
//!    answers the OAuth protected resource metadata (RFC 9728) without identity: `resource`,
//!    `authorization_servers`, `bearer_methods_supported`, `scopes_supported`;
//! 3. **identify** (gate 1, [`identity`]): a bearer API key or JWT ([`jwt`]), or the anonymous
//!    tenant if the operator set one; otherwise 401 with `WWW-Authenticate: Bearer
//!    resource_metadata="<metadata URL>"` (and `error="invalid_token"` when a token was refused),
//!    and nothing else happens;
//! 4. the body is read within `[mcp] max_request_bytes` (413 beyond); rmcp checks `Host`
//!    (DNS-rebinding protection; `[mcp] allowed_hosts`) and `Origin` (a browser origin must be
//!    listed in `[mcp] allowed_origins`, or be a loopback origin on a loopback listener; requests
//!    without one pass), then parses JSON-RPC: a body that is not JSON gets the JSON-RPC parse
//!    error (-32700), JSON that is not a JSON-RPC message the invalid-request error (-32600), both
//!    with HTTP 400 and never a call;
//! 5. `tools/list` answers the tools the caller's tenant may see (hidden and missing tools look the
//!    same); `tools/call` builds a `ToolCallEnvelope` for the caller and runs
//!    [`Host::call_for_caller`](gatehouse_host::Host::call_for_caller): the governed pipeline, its
//!    result delivered as the caller's view ([`gatehouse_host::caller_view`]). The common
//!    `tools/call` (no `Origin`, a protocol version before 2026-07-28) is answered by the same
//!    handler code without rmcp's per-request service (`direct`), only where rmcp's checks are
//!    known to pass and its answer would be the same; everything else goes through rmcp.
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
//! Sessions: stateless. Every request stands alone (the 2026-07-28 protocol has no sessions; older
//! clients get plain JSON responses without a session id).
//!
//! A tool listed in `[mcp.aliases]` is listed and called under its alias ([`aliases`]).
//!
//! Files by job: [`config`] (the `[mcp]` table), [`aliases`] (MCP names for tools), [`server`]
//! (accept loop and HTTP), [`identity`] (gate 1), [`jwt`] (JWT verification), `caller` (who gate 1
//! found), [`keys`] (the key argument), `handler` (the rmcp handler), `direct` (the common `tools/call` without rmcp's
//! per-request service), `result` (envelope to MCP result).

pub mod aliases;
pub mod approvals;
mod caller;
pub mod config;
mod direct;
#[cfg(test)]
mod fuzz;
mod handler;
pub mod identity;
pub mod jwt;
pub mod keys;
mod legacy;
mod meta;
mod result;
pub mod server;
pub mod tasks;

pub use aliases::ToolAliases;
pub use caller::Caller;
pub use config::{KeyArgumentName, McpConfig};
pub use identity::{ApiKeyConfig, ApiKeyError, ApiKeys, Identity, IdentityError};
pub use jwt::{JwtConfig, JwtConfigError, JwtError, JwtVerifier};
pub use meta::{
    APPROVAL_ID_META, APPROVAL_MODE_META, IDEMPOTENCY_KEY_META, REPLAY_OF_META, RESULT_META,
};
pub use server::{McpServer, ServerConfigError, Serving};
