//! Who is calling: what gate 1 establishes, whichever way ([`super::identity`]: an API key,
//! the anonymous tenant; [`super::jwt`]: a verified JWT's claims), and every call envelope
//! carries.

use gatehouse_core::model::{Claims, Principal, PrincipalKind};

/// Who is calling: established by [`Identity::identify`](super::Identity::identify), carried
/// into every call envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The tenant the call runs for.
    pub tenant: String,
    /// The calling principal.
    pub principal: Principal,
    /// Its roles and groups, from its credential (policies see them as `action.claims`).
    pub claims: Claims,
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
    }
}
