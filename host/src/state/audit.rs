//! The audit log's hash chain, independent of the backend that stores it.
//!
//! Entry `n` carries `prev_hash`, the hash of entry `n - 1` (or [`GENESIS`] for the first), and
//! `hash = SHA-256` over `prev_hash` and every other column, each framed by its length (so no
//! two different entries hash the same bytes). Sequence numbers start at 1 and have no gaps. [`verify`] walks the log in order and names the first entry
//! whose number, link or hash is wrong, so an edited, deleted, inserted or reordered entry is
//! found. An attacker who can rewrite the whole tail of the chain can hide a change from the
//! chain alone: keep the head hash [`VerifyReport::head`] somewhere the database's writers
//! cannot reach, and compare.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::AuditEvent;

/// `prev_hash` of the first entry.
pub const GENESIS: &str = "genesis";

/// One entry of the audit log, as stored: its event and its place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Position in the log, from 1, no gaps.
    pub seq: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: AuditEvent,
    /// The previous entry's hash.
    pub prev_hash: String,
    /// This entry's hash.
    pub hash: String,
}

impl AuditEntry {
    /// The hash this entry must have, given its columns and `prev_hash`.
    pub fn expected_hash(&self) -> String {
        entry_hash(&self.prev_hash, self.seq, &self.event)
    }

    /// The entry as JSON for people and tools, with its record parsed (it is stored as JSON
    /// text): what `gatehouse audit show|export` print and the admin API returns.
    pub fn expanded(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(record) = value.get_mut("record")
            && let Ok(parsed) = serde_json::from_str::<serde_json::Value>(&self.event.record)
        {
            *record = parsed;
        }
        value
    }
}

/// The hash of entry `seq` holding `event` after `prev_hash`: see the module docs.
pub fn entry_hash(prev_hash: &str, seq: u64, event: &AuditEvent) -> String {
    let mut hasher = Sha256::new();
    let mut field = |bytes: Option<&[u8]>| match bytes {
        Some(bytes) => {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        }
        // An absent column: a length no present one can have.
        None => hasher.update(u64::MAX.to_le_bytes()),
    };
    field(Some(prev_hash.as_bytes()));
    field(Some(&seq.to_le_bytes()));
    field(Some(&event.at_ms.to_le_bytes()));
    field(Some(event.kind.as_bytes()));
    for id in [
        &event.tool_call_id,
        &event.tenant,
        &event.principal,
        &event.tool,
        &event.outcome,
    ] {
        field(id.as_deref().map(str::as_bytes));
    }
    field(Some(event.record.as_bytes()));
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// Which entries to read.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Only entries about this call.
    pub tool_call_id: Option<String>,
    /// Only this tenant.
    pub tenant: Option<String>,
    /// Only this outcome code.
    pub outcome: Option<String>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only entries by this principal (the acting one: the caller's last, an approver, an
    /// operator).
    pub principal: Option<String>,
    /// Only this kind of entry (`call`, `decision`, `plugin`, ...).
    pub kind: Option<String>,
    /// Only the calls that replayed the result of call `replay_of`.
    pub replay_of: Option<String>,
    /// Only entries at or after this time, unix ms.
    pub since_ms: Option<u64>,
    /// Only entries before this time, unix ms.
    pub until_ms: Option<u64>,
    /// Only entries after this sequence number (for paging).
    pub after_seq: Option<u64>,
    /// At most this many (0: no limit).
    pub limit: usize,
}

/// The first entry that breaks the chain, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum ChainBreak {
    /// Entry `expected` is missing: the next one found is `found` (deleted entries).
    Missing {
        /// The sequence number that should come next.
        expected: u64,
        /// The one that came.
        found: u64,
    },
    /// Entry `seq` does not link to the entry before it (inserted or reordered entries).
    Unlinked {
        /// The entry.
        seq: u64,
    },
    /// Entry `seq`'s content does not match its hash (an edited entry).
    Altered {
        /// The entry.
        seq: u64,
    },
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing { expected, found } => write!(
                f,
                "entry {expected} is missing (the next entry is {found}): entries were deleted"
            ),
            Self::Unlinked { seq } => write!(
                f,
                "entry {seq} does not link to the entry before it: entries were inserted or reordered"
            ),
            Self::Altered { seq } => {
                write!(f, "entry {seq} does not match its hash: it was edited")
            }
        }
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Entries checked (up to the first break).
    pub entries: u64,
    /// The hash of the last good entry ([`GENESIS`] for an empty log): anchor it elsewhere.
    pub head: String,
    /// The first break, if any.
    pub first_break: Option<ChainBreak>,
}

/// The chain check, one entry at a time (so a backend can stream a long log through it).
#[derive(Debug, Clone)]
pub struct Chain {
    report: VerifyReport,
}

impl Default for Chain {
    fn default() -> Self {
        Self {
            report: VerifyReport {
                entries: 0,
                head: GENESIS.to_owned(),
                first_break: None,
            },
        }
    }
}

impl Chain {
    /// Checks the next entry in log order; false once the chain is broken (stop there).
    pub fn check(&mut self, entry: AuditEntry) -> bool {
        let report = &mut self.report;
        if report.first_break.is_some() {
            return false;
        }
        let expected = report.entries + 1;
        report.first_break = if entry.seq != expected {
            Some(ChainBreak::Missing {
                expected,
                found: entry.seq,
            })
        } else if entry.prev_hash != report.head {
            Some(ChainBreak::Unlinked { seq: entry.seq })
        } else if entry.hash != entry.expected_hash() {
            Some(ChainBreak::Altered { seq: entry.seq })
        } else {
            None
        };
        if report.first_break.is_some() {
            return false;
        }
        report.entries = expected;
        report.head = entry.hash;
        true
    }

    /// What the check found so far.
    pub fn report(self) -> VerifyReport {
        self.report
    }
}

/// Walks entries in log order; stops at the first break.
pub fn verify(entries: impl IntoIterator<Item = AuditEntry>) -> VerifyReport {
    let mut chain = Chain::default();
    for entry in entries {
        if !chain.check(entry) {
            break;
        }
    }
    chain.report()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: u64) -> Vec<AuditEntry> {
        let mut prev = GENESIS.to_owned();
        (1..=n)
            .map(|seq| {
                let mut entry = AuditEntry {
                    seq,
                    event: AuditEvent {
                        at_ms: 1000 + seq,
                        kind: "call".to_owned(),
                        tool_call_id: Some(format!("call_{seq}")),
                        tenant: Some("acme".to_owned()),
                        principal: None,
                        tool: Some("t.x".to_owned()),
                        outcome: Some("OK".to_owned()),
                        record: format!("{{\"n\":{seq}}}"),
                    },
                    prev_hash: prev.clone(),
                    hash: String::new(),
                };
                entry.hash = entry.expected_hash();
                prev = entry.hash.clone();
                entry
            })
            .collect()
    }

    #[test]
    fn an_intact_chain_verifies_and_reports_its_head() {
        let entries = chain(5);
        let head = entries[4].hash.clone();
        let report = verify(entries);
        assert_eq!(report.first_break, None);
        assert_eq!((report.entries, report.head), (5, head));
        assert_eq!(verify(Vec::new()).head, GENESIS);
    }

    #[test]
    fn edits_deletions_insertions_and_reorders_are_named() {
        let mut edited = chain(5);
        edited[2].event.outcome = Some("POLICY_BLOCKED".to_owned());
        assert_eq!(
            verify(edited).first_break,
            Some(ChainBreak::Altered { seq: 3 })
        );

        let mut deleted = chain(5);
        deleted.remove(1);
        assert_eq!(
            verify(deleted).first_break,
            Some(ChainBreak::Missing {
                expected: 2,
                found: 3
            })
        );

        let mut reordered = chain(5);
        reordered.swap(1, 2);
        let (a, b) = (reordered[1].seq, reordered[2].seq);
        reordered[1].seq = b;
        reordered[2].seq = a;
        assert_eq!(
            verify(reordered).first_break,
            Some(ChainBreak::Unlinked { seq: 2 })
        );

        let mut inserted = chain(5);
        let mut fake = inserted[1].clone();
        fake.event.record = "{\"forged\":true}".to_owned();
        fake.hash = fake.expected_hash();
        inserted.insert(2, fake);
        for (i, e) in inserted.iter_mut().enumerate() {
            e.seq = i as u64 + 1;
        }
        let report = verify(inserted);
        assert!(
            matches!(
                report.first_break,
                Some(ChainBreak::Altered { seq: 3 } | ChainBreak::Unlinked { seq: 3 })
            ),
            "{report:?}"
        );
    }
}
