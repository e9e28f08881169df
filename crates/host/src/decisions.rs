//! Waiting for an approval's decision: what a request held open for its approval, and an MCP task
//! that runs once its approval is decided, wait on ([`Host::await_decision`]).
//!
//! A decision made through this host ([`Host::decide`], [`Host::consent`],
//! [`Host::withdraw`]) wakes its waiters at once. One made elsewhere (another gateway on the same
//! PostgreSQL store, `gatehouse approvals approve` on the store's file) is seen by a read of the
//! store every [`POLL`]: the store, not this process, holds the decision.
//!
//! [`Host::await_decision`]: crate::Host::await_decision
//! [`Host::decide`]: crate::Host::decide
//! [`Host::consent`]: crate::Host::consent
//! [`Host::withdraw`]: crate::Host::withdraw

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// How often a waiter reads the approval from the store, for decisions made by another process:
/// a person's decision reaches a waiting call within half a second, at two reads of one row a
/// second per waiting call.
pub const POLL: Duration = Duration::from_millis(500);

/// The calls waiting on approvals, by approval id, and one wake-up for any decision (what a
/// task runner sleeps on).
#[derive(Debug, Default)]
pub(crate) struct Decisions {
    waiting: Mutex<HashMap<String, Arc<Notify>>>,
    any: Arc<Notify>,
}

impl Decisions {
    /// Registers interest in approval `id`: await the returned `Notify` (registered before the
    /// approval is read, so no decision is missed).
    pub(crate) fn watch(&self, id: &str) -> Arc<Notify> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(waiting.entry(id.to_owned()).or_default())
    }

    /// Drops the interest `watch` registered, once nobody else waits on `id`.
    pub(crate) fn forget(&self, id: &str, notify: &Arc<Notify>) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        // Ours and the map's: nobody else waits.
        if Arc::strong_count(notify) <= 2 {
            waiting.remove(id);
        }
    }

    /// Wakes every call waiting on approval `id`, and whoever waits for any decision.
    pub(crate) fn wake(&self, id: &str) {
        let notify = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
        self.any.notify_waiters();
    }

    /// Woken by every decision made through this host.
    pub(crate) fn any(&self) -> Arc<Notify> {
        Arc::clone(&self.any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_decision_wakes_its_waiters_and_the_any_waiters() {
        let decisions = Decisions::default();
        let notify = decisions.watch("apr_1");
        let any = decisions.any();
        let woken = notify.notified();
        let any_woken = any.notified();
        tokio::pin!(woken, any_woken);
        woken.as_mut().enable();
        any_woken.as_mut().enable();
        decisions.wake("apr_1");
        tokio::time::timeout(Duration::from_secs(1), woken)
            .await
            .expect("the waiter on apr_1 is woken");
        tokio::time::timeout(Duration::from_secs(1), any_woken)
            .await
            .expect("the any-decision waiter is woken");
        assert!(
            decisions.waiting.lock().unwrap().is_empty(),
            "a decided approval's entry is gone"
        );
    }

    #[test]
    fn forget_keeps_an_entry_another_waiter_holds() {
        let decisions = Decisions::default();
        let first = decisions.watch("apr_1");
        let second = decisions.watch("apr_1");
        decisions.forget("apr_1", &first);
        drop(first);
        assert_eq!(decisions.waiting.lock().unwrap().len(), 1);
        decisions.forget("apr_1", &second);
        assert!(decisions.waiting.lock().unwrap().is_empty());
    }
}
