//! Rate budgets (gate 4) where they are kept: every [`Store`](crate::store::Store) is a
//! [`RateBudget`]. One budget allows `calls` per fixed window; a call takes one unit. The
//! SQLite store keeps its budgets in this process's memory ([`MemoryRateBudget`]: one
//! gateway per file); the PostgreSQL store keeps them in the shared database, so every gateway
//! on it draws from the same budgets.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

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
    /// key -> (window start, window end, calls taken in it).
    windows: Mutex<HashMap<String, (u64, u64, u32)>>,
}

impl RateBudget for MemoryRateBudget {
    fn take(&self, key: String, calls: u32, window_ms: u64, now_ms: u64) -> RateFuture<'_> {
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget windows that ended, so the map holds only budgets in use.
        windows.retain(|_, (_, end, _)| now_ms < *end);
        let (_, end, taken) =
            windows
                .entry(key)
                .or_insert((now_ms, now_ms.saturating_add(window_ms), 0));
        let answer = if *taken < calls {
            *taken += 1;
            None
        } else {
            Some(end.saturating_sub(now_ms))
        };
        Box::pin(std::future::ready(Ok(answer)))
    }
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
