//! Gate 4, rate budgets: how many calls a tenant (or a tenant on one tool) may make per
//! window, from the operator's `[[pipeline.rate_limit]]` entries.
//!
//! 1. each entry names tenants (`*` for every tenant), a tool glob (default `*`), `calls` per
//!    `per_seconds`, and whether the budget is shared by the tenant's matching tools
//!    (`per = "tenant"`, the default) or kept for each tool (`per = "tool"`);
//! 2. a call takes one unit from every entry that covers it, in config order; the first budget
//!    that is spent refuses the call with `RATE_LIMITED` (retryable, saying when to retry), and
//!    nothing runs;
//! 3. budgets live behind [`RateBudget`], a narrow trait every state store implements: the
//!    SQLite store keeps them in this process's memory ([`MemoryRateBudget`]), the PostgreSQL
//!    store in the shared database, so gateways sharing it share their budgets;
//!    `Host::with_rate_budget` plugs in another.
//!
//! ```toml
//! [[pipeline.rate_limit]]
//! tenants = ["acme"]
//! tools = "acme.payments.*"
//! calls = 100
//! per_seconds = 60
//! per = "tool"
//! ```

use serde::{Deserialize, Serialize};

use gatehouse_core::model::{Glob, Tenants};
pub use gatehouse_store::rate::{MemoryRateBudget, RateBudget, RateFuture};

/// One `[[pipeline.rate_limit]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Tenants it applies to; `*` for every tenant. Required.
    pub tenants: Tenants,
    /// Glob over tool names it applies to. Default: `*`.
    #[serde(default = "any_tool")]
    pub tools: Glob,
    /// Calls allowed per window. Required; 0 refuses every call it covers.
    pub calls: u32,
    /// The window, in seconds. Required, at least 1.
    pub per_seconds: u32,
    /// One budget per tenant for all matching tools, or one per tenant and tool. Default:
    /// `tenant`.
    #[serde(default)]
    pub per: RateScope,
}

fn any_tool() -> Glob {
    Glob::new("*").expect("`*` is a glob")
}

/// What one budget covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateScope {
    /// The tenant's calls to every matching tool.
    #[default]
    Tenant,
    /// The tenant's calls to each matching tool, separately.
    Tool,
}

/// A budget that is spent: when to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant `{tenant}` used its {calls} calls per {per_seconds} s{scope}; retry in {retry_after_s} s"
)]
pub struct RateLimited {
    /// The tenant.
    pub tenant: String,
    /// The budget.
    pub calls: u32,
    /// Its window.
    pub per_seconds: u32,
    /// ` for <tool>` or ` for <glob>`.
    pub scope: String,
    /// Seconds until the window ends.
    pub retry_after_s: u64,
}

/// Takes one unit from every budget covering `tool` for `tenant`.
pub async fn take(
    limits: &[RateLimit],
    budget: &dyn RateBudget,
    tenant: &str,
    tool: &str,
    now_ms: u64,
) -> Result<(), RateError> {
    for limit in limits {
        if !limit.tenants.matches(tenant) || !limit.tools.is_match(tool) {
            continue;
        }
        let (key, scope) = match limit.per {
            RateScope::Tenant => (
                format!("{}|{}", budget_name(limit), tenant),
                format!(" for `{}`", limit.tools),
            ),
            RateScope::Tool => (
                format!("{}|{}|{}", budget_name(limit), tenant, tool),
                format!(" for `{tool}`"),
            ),
        };
        let window_ms = u64::from(limit.per_seconds.max(1)) * 1000;
        match budget.take(key, limit.calls, window_ms, now_ms).await {
            Ok(None) => {}
            Ok(Some(retry_after_ms)) => {
                return Err(RateError::Limited(RateLimited {
                    tenant: tenant.to_owned(),
                    calls: limit.calls,
                    per_seconds: limit.per_seconds,
                    scope,
                    retry_after_s: retry_after_ms.div_ceil(1000).max(1),
                }));
            }
            Err(detail) => return Err(RateError::Unavailable(detail)),
        }
    }
    Ok(())
}

/// What names a limit's budgets: its definition, so every gateway with the same limit shares
/// the same budget, and a changed limit starts a fresh one.
fn budget_name(limit: &RateLimit) -> String {
    format!("{}/{}s|{}", limit.calls, limit.per_seconds, limit.tools)
}

/// Why gate 4's rate budget refused a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// A budget is spent.
    #[error(transparent)]
    Limited(RateLimited),
    /// The budget could not be read (fail closed).
    #[error("the rate budget could not be read: {0}")]
    Unavailable(String),
}
