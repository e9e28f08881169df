//! Sessions kept in memory from the writes this process commits, so the policy gate's session
//! (its labels and latest actions) costs no store read per call.
//!
//! For a store only one gateway writes (the SQLite file: see its rate budgets), the writes it
//! commits are all the writes there are. A session is filled once from the store (a read),
//! then the writer applies every write it commits to it: a call recorded in it, the labels a
//! call added, its start, its end. The fill and the writer's commit-and-apply take turns
//! ([`SessionCache::turn`]), so a fill sees either the state before a commit (which then
//! applies to it) or after, never a commit without its apply.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::jobs::Op;
use crate::sessions::{Session, SessionAction, SessionKey};

/// A session's latest actions kept: the most a policy reads by default.
pub(super) const KEPT: usize = 16;

/// Sessions kept at most (a few KiB each); past that the cache starts over (the next calls
/// fill it again).
const SESSIONS: usize = 4_096;

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct SessionCache {
    sessions: Mutex<HashMap<SessionKey, Kept>>,
    /// Held by a fill from its read to its insert, and by the writer from a batch's first
    /// statement to the apply of its committed writes.
    turn: Mutex<()>,
}

/// A session, its latest actions in a ring.
#[derive(Debug)]
struct Kept {
    session: Session,
    actions: VecDeque<SessionAction>,
}

impl SessionCache {
    /// The session under `key` with its last `limit` actions; `None` when not held or `limit`
    /// is over [`KEPT`] (then read it from the store and [`fill`](Self::fill)).
    pub fn get(&self, key: &SessionKey, limit: usize) -> Option<Session> {
        if limit > KEPT {
            return None;
        }
        let sessions = self.sessions();
        let kept = sessions.get(key)?;
        let mut session = kept.session.clone();
        session.actions = kept
            .actions
            .iter()
            .skip(kept.actions.len().saturating_sub(limit))
            .cloned()
            .collect();
        Some(session)
    }

    /// Taken by a fill around its read and [`fill`](Self::fill), and by the writer around a
    /// batch and [`committed`](Self::committed).
    pub fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `session` (with its last [`KEPT`] or fewer actions, oldest first), read from the
    /// store during this [`turn`](Self::turn). An entry already there (a concurrent fill, or
    /// a start the writer applied) wins.
    pub fn fill(&self, session: Session) {
        let mut held = self.sessions();
        if held.len() >= SESSIONS {
            held.clear();
        }
        held.entry(session.key.clone())
            .or_insert_with(|| Kept::of(session));
    }

    /// The writer committed these writes, in this order, during this [`turn`](Self::turn);
    /// each with whether it changed anything (a start another call won, or an end of a session
    /// that had ended, did not).
    pub fn committed<'a>(&self, writes: impl IntoIterator<Item = (&'a Op, bool)>) {
        let mut held = self.sessions();
        for (op, changed) in writes {
            match op {
                Op::Record(record) if record.audit.kind == "call" && !held.is_empty() => {
                    let (Some(session), Some(tenant), Some(principal), Some(tool)) = (
                        &record.session,
                        &record.audit.tenant,
                        &record.audit.principal,
                        &record.audit.tool,
                    ) else {
                        continue;
                    };
                    let key = SessionKey {
                        tenant: tenant.clone(),
                        principal: principal.clone(),
                        key: session.key.clone(),
                    };
                    let Some(kept) = held.get_mut(&key) else {
                        continue;
                    };
                    let at_ms = record.audit.at_ms;
                    if at_ms < kept.session.started_ms {
                        continue;
                    }
                    if kept.actions.len() == KEPT {
                        kept.actions.pop_front();
                    }
                    kept.actions.push_back(SessionAction {
                        tool: tool.clone(),
                        tool_call_id: record.audit.tool_call_id.clone().unwrap_or_default(),
                        at_ms,
                    });
                    if let Some((started_ms, labels)) = &session.labels
                        && *started_ms == kept.session.started_ms
                        && kept.session.join(labels)
                    {
                        kept.session.last_ms = kept.session.last_ms.max(at_ms);
                    }
                }
                Op::StartSession { session, .. } if changed => {
                    if held.len() >= SESSIONS {
                        held.clear();
                    }
                    held.insert(session.key.clone(), Kept::of(session.clone()));
                }
                Op::EndSession { key, at_ms } if changed => {
                    if let Some(kept) = held.get_mut(key) {
                        kept.session.ended_ms = Some(*at_ms);
                    }
                }
                _ => {}
            }
        }
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<SessionKey, Kept>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Kept {
    fn of(mut session: Session) -> Self {
        let actions = std::mem::take(&mut session.actions);
        let skip = actions.len().saturating_sub(KEPT);
        Self {
            session,
            actions: actions.into_iter().skip(skip).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{AuditEvent, CallRecord};
    use crate::sessions::{LabelSource, SessionLimits, SessionWrite};

    const LIMITS: SessionLimits = SessionLimits {
        idle_ms: 1_000,
        life_ms: 10_000,
        actions: KEPT,
    };

    fn key(session: &str) -> SessionKey {
        SessionKey {
            tenant: "t".into(),
            principal: "p".into(),
            key: session.into(),
        }
    }

    fn call(session: &str, tool: &str, at_ms: u64, labels: Option<(u64, &str)>) -> Op {
        Op::Record(CallRecord {
            audit: AuditEvent {
                kind: "call".into(),
                tool_call_id: Some(format!("{tool}@{at_ms}")),
                tenant: Some("t".into()),
                principal: Some("p".into()),
                tool: Some(tool.into()),
                outcome: Some("OK".into()),
                record: "{}".into(),
                at_ms,
            },
            completes: None,
            releases: None,
            executes: None,
            durable: false,
            session: Some(SessionWrite {
                key: session.into(),
                labels: labels.map(|(started, label)| {
                    (
                        started,
                        vec![LabelSource {
                            label: label.into(),
                            tool: tool.into(),
                            tool_call_id: format!("{tool}@{at_ms}"),
                            at_ms,
                        }],
                    )
                }),
            }),
        })
    }

    #[test]
    fn a_filled_session_follows_its_commits_and_keeps_the_last_sixteen() {
        let cache = SessionCache::default();
        assert_eq!(cache.get(&key("s"), KEPT), None);
        cache.fill(Session::start(key("s"), 10, LIMITS));
        let calls: Vec<Op> = (0..20)
            .map(|n| call("s", &format!("x{n}"), 20 + n, None))
            .collect();
        cache.committed(calls.iter().map(|op| (op, true)));
        let session = cache.get(&key("s"), KEPT).expect("held");
        let tools: Vec<&str> = session.actions.iter().map(|a| a.tool.as_str()).collect();
        assert_eq!(tools.len(), KEPT);
        assert_eq!((tools[0], tools[15]), ("x4", "x19"));
        assert_eq!(cache.get(&key("s"), 1).expect("held").actions.len(), 1);
        // More than is kept, another session: the store answers.
        assert_eq!(cache.get(&key("s"), KEPT + 1), None);
        assert_eq!(cache.get(&key("other"), 1), None);
        // Calls of sessions not held are not guessed at.
        cache.committed([(&call("other", "y", 50, None), true)]);
        assert_eq!(cache.get(&key("other"), 1), None);
    }

    #[test]
    fn labels_join_the_session_they_were_found_in_and_starts_and_ends_apply() {
        let cache = SessionCache::default();
        cache.fill(Session::start(key("s"), 10, LIMITS));
        cache.committed([
            (&call("s", "a", 11, Some((10, "private"))), true),
            // Found in a session that has since been replaced: not joined.
            (&call("s", "b", 12, Some((5, "untrusted"))), true),
        ]);
        let session = cache.get(&key("s"), KEPT).expect("held");
        assert!(session.holds("private") && !session.holds("untrusted"));
        assert_eq!(session.labels[0].tool, "a");
        let end = Op::EndSession {
            key: key("s"),
            at_ms: 13,
        };
        cache.committed([(&end, true)]);
        assert_eq!(cache.get(&key("s"), 1).expect("held").ended_ms, Some(13));
        // A start another call won changes nothing; one that applied replaces the session.
        let start = |at| Op::StartSession {
            session: Session::start(key("s"), at, LIMITS),
            replaces: Some(10),
        };
        cache.committed([(&start(14), false)]);
        assert_eq!(cache.get(&key("s"), 1).expect("held").started_ms, 10);
        cache.committed([(&start(15), true)]);
        let fresh = cache.get(&key("s"), KEPT).expect("held");
        assert_eq!((fresh.started_ms, fresh.labels.len()), (15, 0));
        assert!(fresh.actions.is_empty());
    }

    #[test]
    fn a_second_fill_does_not_replace_what_commits_extended() {
        let cache = SessionCache::default();
        cache.fill(Session::start(key("s"), 10, LIMITS));
        cache.committed([(&call("s", "b", 11, None), true)]);
        cache.fill(Session::start(key("s"), 10, LIMITS));
        assert_eq!(cache.get(&key("s"), KEPT).expect("held").actions.len(), 1);
    }
}
