//! Between gates 6 and 7, connect: the caller's own tokens for the adapter's grants that send
//! them ([`crate::accounts`]). A provider the caller has no usable connection to pauses the
//! call, `CONNECTION_REQUIRED`, with the URL where they connect; nothing ran and no key was
//! claimed, so the retry (with the same idempotency key) runs the call once.
//!
//! It comes after approval, so an approver decides before anyone is sent to connect, and
//! before deduplication, so a paused call holds no key.

use gatehouse_core::envelope::ToolCallEnvelope;
use gatehouse_core::model::PrincipalKind;

use crate::accounts::{AccountError, Accounts, ConnectionKey, PendingCall, UserToken};
use crate::egress::Grants;
use crate::pipeline::outcome::Stop;

/// The providers whose caller's token `grants` send, each once, in grant order.
pub fn providers(grants: &Grants) -> Vec<String> {
    let mut providers: Vec<String> = Vec::new();
    for provider in (grants.rules.iter())
        .flat_map(|rule| &rule.credentials)
        .filter_map(|credential| credential.provider())
    {
        if !providers.iter().any(|p| p == provider) {
            providers.push(provider.to_owned());
        }
    }
    providers
}

/// Whose account a call acts as: its tenant's, and the first user of its principal chain (a
/// peer's call on a person's behalf acts as that person), else its caller.
pub fn whose(call: &ToolCallEnvelope, provider: &str) -> ConnectionKey {
    let chain = &call.principal_chain;
    let principal = (chain.iter().find(|p| p.kind == PrincipalKind::User))
        .or(chain.last())
        .map(|p| p.id.clone())
        .unwrap_or_default();
    ConnectionKey {
        tenant: call.tenant_id.clone(),
        principal,
        provider: provider.to_owned(),
    }
}

/// The caller's tokens for `providers`, or why the call stops: a provider not connected
/// (`CONNECTION_REQUIRED`, with the flow begun), or a broker that cannot answer.
pub async fn tokens(
    accounts: Option<&dyn Accounts>,
    providers: &[String],
    call: &ToolCallEnvelope,
    tool: &str,
) -> Result<Vec<UserToken>, Stop> {
    if providers.is_empty() {
        return Ok(Vec::new());
    }
    let Some(accounts) = accounts else {
        return Err(Stop::Connect(AccountError::Unavailable(format!(
            "`{tool}` sends its caller's own token, and this gateway has no account broker (`[oauth]`) to get one"
        ))));
    };
    let mut tokens = Vec::with_capacity(providers.len());
    for provider in providers {
        let whose = whose(call, provider);
        if whose.principal.is_empty() {
            return Err(Stop::Connect(AccountError::Unavailable(format!(
                "`{tool}` sends its caller's own token, and this call names no principal to act as"
            ))));
        }
        match accounts.token(&whose).await.map_err(Stop::Connect)? {
            Some(token) => tokens.push(token),
            None => {
                let pending = PendingCall {
                    tool: tool.to_owned(),
                    call: serde_json::to_string(call).unwrap_or_default(),
                };
                let url = accounts
                    .begin(&whose, &pending)
                    .await
                    .map_err(Stop::Connect)?;
                return Err(Stop::ConnectionRequired {
                    tool: tool.to_owned(),
                    provider: provider.clone(),
                    url,
                    keyed: call.idempotency_key.is_some(),
                });
            }
        }
    }
    Ok(tokens)
}
