//! Who is calling: what gate 1 establishes, whichever way ([`super::identity`]: an API key,
//! the anonymous tenant; [`super::jwt`]: a verified JWT's claims), and every call envelope
//! carries.

use gatehouse_core::envelope::{Protocol, ToolCallEnvelope};
use gatehouse_core::model::{Claims, Principal, PrincipalKind};
use gatehouse_host::delegation::Delegation;
use serde_json::Value;

/// Who is calling: established by [`Identity::identify`](super::Identity::identify), carried
/// into every call envelope, with the session its request belongs to.
///
/// Two callers are the same caller when they are the same tenant, principal and claims: the
/// session says where a request comes from, not who sends it, so a task is its owner's
/// whichever session polls it.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant the call runs for.
    pub tenant: String,
    /// The calling principal.
    pub principal: Principal,
    /// Its roles and groups, from its credential (policies see them as `action.claims`).
    pub claims: Claims,
    /// The session the request belongs to, where the protocol names one: the 2025-11-25
    /// `Mcp-Session-Id`, or the trace id a 2026-07-28 request's `_meta` (or `traceparent`
    /// header) carries. None: the principal's window.
    pub session: Option<String>,
    /// The call it acts on behalf of, when it is a peer the gateway called that calls back
    /// with the delegation it was given (the `gatehouse-delegation` header, verified at gate
    /// 1): its calls start from that call's principal chain, and run at most at its mode.
    pub delegation: Option<Delegation>,
}

impl PartialEq for Caller {
    fn eq(&self, other: &Self) -> bool {
        (&self.tenant, &self.principal, &self.claims)
            == (&other.tenant, &other.principal, &other.claims)
    }
}

impl Eq for Caller {}

impl Caller {
    /// In `session` (none: the principal's window).
    pub fn in_session(mut self, session: Option<String>) -> Self {
        self.session = session;
        self
    }

    /// This caller's call of `tool` with `args`, come by `protocol`: its tenant, principal
    /// (after the delegating call's chain, if it acts on one's behalf), claims and session.
    pub fn envelope(&self, protocol: Protocol, tool: &str, args: Value) -> ToolCallEnvelope {
        let mut call = ToolCallEnvelope::new(&self.tenant, tool, args)
            .by(protocol)
            .with_principal(self.principal.clone())
            .with_claims(self.claims.clone());
        call.session_id.clone_from(&self.session);
        match &self.delegation {
            Some(delegation) => delegation.clone().delegate(call),
            None => call,
        }
    }
}

/// An MCP caller is an agent acting in `tenant`, with no roles or groups.
pub(super) fn caller(tenant: &str, id: String) -> Caller {
    Caller {
        tenant: tenant.to_owned(),
        principal: Principal {
            kind: PrincipalKind::Agent,
            id,
            tenant: tenant.to_owned(),
        },
        claims: Claims::default(),
        session: None,
        delegation: None,
    }
}
