//! Sessions: what a caller's calls share, so a policy can judge a call by the calls before it
//! (issue 58). A session belongs to one principal in one tenant and is named by a key: the MCP
//! session's id, the trace id a stateless client sends, or `""`, the principal's window (its
//! calls that name no session).
//!
//! What the store keeps of a session:
//! - its row in `sessions`: when it started, when it expires at the latest, whether an operator
//!   ended it, and its labels ([`LabelSource`]: each label with the action that first brought
//!   it). The row is written when the session starts and when a call adds a label, in that
//!   call's record transaction; a call that adds no label writes nothing of the session;
//! - its actions: the audit log's call entries, found by the session id their record holds
//!   (`record.call.session_id`: indexed by PostgreSQL as an expression over the record, by
//!   SQLite as a column the writer copies it into).
//!
//! A session is live until it is ended, its longest life passes, or it idles longer than the
//! idle timeout (its last action, or its last label, that long ago). The next call under a key
//! whose session is not live starts a new one under the same key ([`Store::session`]): labels
//! empty, actions counted from then.
//!
//! [`Store::session`]: crate::Store::session

use serde::{Deserialize, Serialize};

/// The session of one principal in one tenant under one key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionKey {
    /// Tenant.
    pub tenant: String,
    /// The calling principal (the last of the chain).
    pub principal: String,
    /// The session's key: an MCP session id, a trace id, or `""` (the principal's window).
    pub key: String,
}

/// How long a session lives (`[sessions]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Idle longer than this, a session ends.
    pub idle_ms: u64,
    /// A session ends this long after it started, however busy.
    pub life_ms: u64,
    /// The most of its latest actions a session is read with.
    pub actions: usize,
}

pub use gatehouse_core::model::label::LabelSource;

/// One action of a session: a call its audit log records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAction {
    /// The tool called.
    pub tool: String,
    /// The call's id: the labels its result brought name it ([`LabelSource::tool_call_id`]).
    pub tool_call_id: String,
    /// When it was recorded, unix ms.
    pub at_ms: u64,
}

/// A session as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Whose, and under which key.
    #[serde(flatten)]
    pub key: SessionKey,
    /// When it started, unix ms.
    pub started_ms: u64,
    /// When its row was last written (its start or its last label), unix ms.
    pub last_ms: u64,
    /// When it ends at the latest, unix ms.
    pub expires_ms: u64,
    /// When an operator ended it, unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// Its labels, in the order they joined.
    pub labels: Vec<LabelSource>,
    /// Its latest actions, oldest first (at most [`SessionLimits::actions`]); empty in a list
    /// of sessions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<SessionAction>,
}

impl Session {
    /// A session starting now under `key`.
    pub fn start(key: SessionKey, now_ms: u64, limits: SessionLimits) -> Self {
        Self {
            key,
            started_ms: now_ms,
            last_ms: now_ms,
            expires_ms: now_ms.saturating_add(limits.life_ms),
            ended_ms: None,
            labels: Vec::new(),
            actions: Vec::new(),
        }
    }

    /// When it was last active: its last action or its row's last write.
    pub fn active_ms(&self) -> u64 {
        self.actions
            .last()
            .map_or(self.last_ms, |a| a.at_ms.max(self.last_ms))
    }

    /// Whether a call at `now_ms` belongs to it: not ended, not past its life, not idle.
    pub fn live(&self, now_ms: u64, limits: SessionLimits) -> bool {
        self.ended_ms.is_none()
            && now_ms < self.expires_ms
            && now_ms <= self.active_ms().saturating_add(limits.idle_ms)
    }

    /// Whether it holds `label`.
    pub fn holds(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l.label == label)
    }

    /// Adds the labels of `brought` it does not hold yet ([`join`]). Returns whether any
    /// joined.
    pub fn join(&mut self, brought: &[LabelSource]) -> bool {
        join(&mut self.labels, brought)
    }
}

/// Adds to `labels` those of `brought` it does not hold yet, each with its source (the first
/// source of a label stays): the one rule by which labels join a session, in memory and in the
/// store. Returns whether any joined.
pub(crate) fn join(labels: &mut Vec<LabelSource>, brought: &[LabelSource]) -> bool {
    let before = labels.len();
    for label in brought {
        if !labels.iter().any(|l| l.label == label.label) {
            labels.push(label.clone());
        }
    }
    labels.len() > before
}

/// What a call's record writes of its session, in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWrite {
    /// The session's key (its tenant and principal are the audit entry's).
    pub key: String,
    /// The labels the result brought that the session did not hold, and when the session
    /// they join started (they join it only if it is still that one).
    pub labels: Option<(u64, Vec<LabelSource>)>,
}

/// Which sessions to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Only this tenant's.
    pub tenant: Option<String>,
    /// Only this principal's.
    pub principal: Option<String>,
    /// At most this many, the most recently started first (0: no limit).
    pub limit: usize,
}

/// The labels' column: JSON text.
pub(crate) fn labels_json(labels: &[LabelSource]) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "[]".to_owned())
}

/// The labels' column read back. A column that does not parse is an error, never "no labels":
/// a session that lost its labels would let a flow through.
pub(crate) fn labels_of(text: &str) -> Result<Vec<LabelSource>, serde_json::Error> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: SessionLimits = SessionLimits {
        idle_ms: 100,
        life_ms: 1_000,
        actions: 16,
    };

    fn key() -> SessionKey {
        SessionKey {
            tenant: "t".into(),
            principal: "p".into(),
            key: "s".into(),
        }
    }

    fn source(label: &str, call: &str) -> LabelSource {
        LabelSource {
            label: label.into(),
            tool: "a.b".into(),
            tool_call_id: call.into(),
            at_ms: 5,
        }
    }

    #[test]
    fn a_session_ends_when_idle_past_its_life_or_ended() {
        let mut session = Session::start(key(), 0, LIMITS);
        assert!(session.live(100, LIMITS));
        assert!(!session.live(101, LIMITS), "idle past the timeout");
        session.actions.push(SessionAction {
            tool: "a.b".into(),
            tool_call_id: "c1".into(),
            at_ms: 950,
        });
        assert!(session.live(999, LIMITS));
        assert!(!session.live(1_000, LIMITS), "past its longest life");
        session.ended_ms = Some(960);
        assert!(!session.live(961, LIMITS), "ended");
    }

    #[test]
    fn a_label_joins_once_with_its_first_source() {
        let mut session = Session::start(key(), 0, LIMITS);
        assert!(session.join(&[source("private", "c1"), source("private", "c2")]));
        assert!(!session.join(&[source("private", "c3")]));
        assert_eq!(session.labels, vec![source("private", "c1")]);
        assert!(session.holds("private") && !session.holds("untrusted"));
    }
}
