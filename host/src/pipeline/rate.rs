//! Gate 4, rate budgets: how many calls a tenant (or a tenant on one tool) may make per
//! window, from the operator's `[[pipeline.rate_limit]]` entries.
//!
//! 1. each entry names tenants (`*` for every tenant), a tool glob (default `*`), `calls` per
//!    `per_seconds`, and whether the budget is shared by the tenant's matching tools
//!    (`per = "tenant"`, the default) or kept for each tool (`per = "tool"`);
//! 2. a call takes one unit from every entry that covers it, in config order; the first budget
//!    that is spent refuses the call with `RATE_LIMITED` (retryable, saying when to retry), and
//!    nothing runs;
//! 3. budgets live behind [`RateBudget`], a narrow trait: [`MemoryRateBudget`] (fixed windows
//!    in this process) is the default; a budget shared by several gateways (say, PostgreSQL)
//!    implements the same trait.
//!
//! ```toml
//! [[pipeline.rate_limit]]
//! tenants = ["acme"]
//! tools = "acme.payments.*"
//! calls = 100
//! per_seconds = 60
//! per = "tool"
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::model::{Glob, Tenants};

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

/// A future a budget answers with: `Ok(None)` if the unit was taken, `Ok(Some(ms))` if the
/// budget is spent (milliseconds until it refills), `Err` if the budget could not be read.
pub type RateFuture<'a> = Pin<Box<dyn Future<Output = Result<Option<u64>, String>> + Send + 'a>>;

/// Where rate budgets are kept. One call, one unit.
pub trait RateBudget: Send + Sync + std::fmt::Debug {
    /// Takes one unit from the budget named `key`, which allows `calls` per window of
    /// `window_ms` milliseconds, at `now_ms`.
    fn take(&self, key: String, calls: u32, window_ms: u64, now_ms: u64) -> RateFuture<'_>;
}

/// Fixed windows in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryRateBudget {
    /// key -> (window start, calls taken in it).
    windows: Mutex<HashMap<String, (u64, u32)>>,
}

impl RateBudget for MemoryRateBudget {
    fn take(&self, key: String, calls: u32, window_ms: u64, now_ms: u64) -> RateFuture<'_> {
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget windows that ended, so the map holds only budgets in use.
        windows.retain(|_, (start, _)| now_ms < start.saturating_add(window_ms));
        let (start, taken) = windows.entry(key).or_insert((now_ms, 0));
        let answer = if *taken < calls {
            *taken += 1;
            None
        } else {
            Some(start.saturating_add(window_ms).saturating_sub(now_ms))
        };
        Box::pin(std::future::ready(Ok(answer)))
    }
}

/// Takes one unit from every budget covering `tool` for `tenant`.
pub async fn take(
    limits: &[RateLimit],
    budget: &dyn RateBudget,
    tenant: &str,
    tool: &str,
    now_ms: u64,
) -> Result<(), RateError> {
    for (index, limit) in limits.iter().enumerate() {
        if !limit.tenants.matches(tenant) || !limit.tools.is_match(tool) {
            continue;
        }
        let (key, scope) = match limit.per {
            RateScope::Tenant => (
                format!("{index}\u{0}{tenant}"),
                format!(" for `{}`", limit.tools),
            ),
            RateScope::Tool => (
                format!("{index}\u{0}{tenant}\u{0}{tool}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_window_allows_its_calls_then_refuses_until_it_ends() {
        let budget = MemoryRateBudget::default();
        for _ in 0..2 {
            assert_eq!(budget.take("k".into(), 2, 1000, 10).await, Ok(None));
        }
        assert_eq!(budget.take("k".into(), 2, 1000, 400).await, Ok(Some(610)));
        assert_eq!(budget.take("other".into(), 2, 1000, 400).await, Ok(None));
        assert_eq!(budget.take("k".into(), 2, 1000, 1010).await, Ok(None));
    }
}
