//! Each principal's recent tools, kept in memory from the call records this process commits,
//! so the policy gate's `prior-actions` costs no store read per call.
//!
//! For a store only one gateway records calls in (the SQLite file: see its rate budgets), the
//! calls it commits are all the calls there are. A principal's entry is filled once from the
//! store (a read), then the writer appends every call it commits for that principal. The fill
//! and the writer's commit-and-append take turns ([`RecentActions::turn`]), so a fill sees
//! either the state before a commit (which then appends to it) or after the append, never a
//! commit without its append.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Tools kept per principal: the most `prior-actions` asks for.
pub(super) const KEPT: usize = 16;

/// Principals kept at most (about 1 KiB each); past that the cache starts over (the next calls
/// fill it again).
const PRINCIPALS: usize = 4_096;

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct RecentActions {
    /// (tenant, principal) -> up to [`KEPT`] tools, oldest first.
    tools: Mutex<HashMap<(String, String), VecDeque<String>>>,
    /// Held by a fill from its read to its insert, and by the writer from a batch's first
    /// statement to the append of its committed calls.
    turn: Mutex<()>,
}

impl RecentActions {
    /// The principal's last `limit` tools, oldest first; `None` when not held or `limit` is
    /// over [`KEPT`] (then read them from the store and [`fill`](Self::fill)).
    pub fn get(&self, tenant: &str, principal: &str, limit: usize) -> Option<Vec<String>> {
        if limit > KEPT {
            return None;
        }
        let tools = self.tools();
        let tools = tools.get(&(tenant.to_owned(), principal.to_owned()))?;
        Some(
            tools
                .iter()
                .skip(tools.len().saturating_sub(limit))
                .cloned()
                .collect(),
        )
    }

    /// Taken by a fill around its read and [`fill`](Self::fill), and by the writer around a
    /// batch and [`committed`](Self::committed).
    pub fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps the principal's tools (its last [`KEPT`] or fewer, oldest first), read from the
    /// store during this [`turn`](Self::turn). An entry already there (a concurrent fill) wins.
    pub fn fill(&self, tenant: String, principal: String, tools: &[String]) {
        let mut held = self.tools();
        if held.len() >= PRINCIPALS {
            held.clear();
        }
        let kept = tools
            .iter()
            .skip(tools.len().saturating_sub(KEPT))
            .cloned()
            .collect();
        held.entry((tenant, principal)).or_insert(kept);
    }

    /// The writer committed these calls, `(tenant, principal, tool)`, in this order, during
    /// this [`turn`](Self::turn).
    pub fn committed<'a>(&self, calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) {
        let mut held = self.tools();
        for (tenant, principal, tool) in calls {
            if let Some(tools) = held.get_mut(&(tenant.to_owned(), principal.to_owned())) {
                if tools.len() == KEPT {
                    tools.pop_front();
                }
                tools.push_back(tool.to_owned());
            }
        }
    }

    fn tools(&self) -> MutexGuard<'_, HashMap<(String, String), VecDeque<String>>> {
        self.tools.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    #[test]
    fn a_filled_principal_follows_its_commits_and_keeps_the_last_sixteen() {
        let recent = RecentActions::default();
        assert_eq!(recent.get("t", "p", 16), None);
        recent.fill("t".into(), "p".into(), &tools(&["a", "b"]));
        assert_eq!(recent.get("t", "p", 16), Some(tools(&["a", "b"])));
        assert_eq!(recent.get("t", "p", 1), Some(tools(&["b"])));
        let names: Vec<String> = (0..20).map(|n| format!("x{n}")).collect();
        recent.committed(names.iter().map(|n| ("t", "p", n.as_str())));
        assert_eq!(recent.get("t", "p", 16), Some(names[4..].to_vec()));
        // More than is kept, another tenant, another principal: the store answers.
        assert_eq!(recent.get("t", "p", 17), None);
        assert_eq!(recent.get("u", "p", 16), None);
        assert_eq!(recent.get("t", "q", 16), None);
        // Calls of principals not held are not guessed at.
        recent.committed([("t", "q", "y")]);
        assert_eq!(recent.get("t", "q", 16), None);
    }

    #[test]
    fn a_second_fill_does_not_replace_what_commits_extended() {
        let recent = RecentActions::default();
        recent.fill("t".into(), "p".into(), &tools(&["a"]));
        recent.committed([("t", "p", "b")]);
        recent.fill("t".into(), "p".into(), &tools(&["a"]));
        assert_eq!(recent.get("t", "p", 16), Some(tools(&["a", "b"])));
    }
}
