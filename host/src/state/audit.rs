//! The audit log's hash chain, independent of the backend that stores it.
//!
//! Entry `n` carries `prev_hash`, the hash of entry `n - 1` (or [`GENESIS`] for the first), and
//! `hash = SHA-256` over `prev_hash` and every other column, each framed by its length (so no
//! two different entries hash the same bytes). Sequence numbers start at 1 and have no gaps. [`verify`] walks the log in order and names the first entry
//! whose number, link or hash is wrong, so an edited, deleted, inserted or reordered entry is
//! found. An attacker who can rewrite the whole tail of the chain can hide a change from the
//! chain alone, so the chain is anchored from outside the database:
//! 1. a **head** ([`Anchor`], `SEQ:HASH`) an operator wrote down earlier: [`check_anchor`]
//!    proves the log still holds that hash at that position and goes on from it (entries
//!    appended since are fine; a removed, edited or re-chained prefix is not);
//! 2. **signed checkpoints** ([`super::checkpoint`]): the gateway signs its head with an
//!    operator key and pushes it out of the database; verifying against them is checking one
//!    anchor per checkpoint, after its signature.

pub mod record;

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
    /// text) and in its full form ([`record::full`]): what `gatehouse audit show|export` print
    /// and the admin API returns.
    pub fn expanded(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(slot) = value.get_mut("record")
            && let Some(full) = record::full(&self.event)
        {
            *slot = full;
        }
        value
    }
}

/// The hash of entry `seq` holding `event` after `prev_hash`: see the module docs.
pub fn entry_hash(prev_hash: &str, seq: u64, event: &AuditEvent) -> String {
    let mut hasher = Sha256::new();
    frame(&mut hasher, Some(prev_hash.as_bytes()));
    frame(&mut hasher, Some(&seq.to_le_bytes()));
    frame_columns(&mut hasher, event);
    let mut digits = [0u8; 64];
    hex::encode_to_slice(hasher.finalize(), &mut digits).expect("32 bytes are 64 hex digits");
    let mut hash = String::with_capacity(71);
    hash.push_str("sha256:");
    hash.push_str(std::str::from_utf8(&digits).expect("hex digits are ASCII"));
    hash
}

/// `event`'s columns as [`entry_hash`] hashes them after `prev_hash` and `seq`: what the
/// PostgreSQL store hands the database, which hashes them after the head it reads under its
/// lock (`migrations/postgres/0007_audit_append.sql`).
pub fn framed_columns(event: &AuditEvent) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(event.record.len() + 160);
    frame_columns(&mut bytes, event);
    bytes
}

/// Where framed bytes go: a hasher, or a buffer for the database to hash.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// One column: its length as a little-endian u64, then its bytes.
fn frame(sink: &mut impl Sink, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            sink.put(&(bytes.len() as u64).to_le_bytes());
            sink.put(bytes);
        }
        // An absent column: a length no present one can have.
        None => sink.put(&u64::MAX.to_le_bytes()),
    }
}

fn frame_columns(sink: &mut impl Sink, event: &AuditEvent) {
    frame(sink, Some(&event.at_ms.to_le_bytes()));
    frame(sink, Some(event.kind.as_bytes()));
    for id in event.ids() {
        frame(sink, id.map(str::as_bytes));
    }
    frame(sink, Some(event.record.as_bytes()));
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

impl ChainBreak {
    /// The first entry that is not as the chain says.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Missing { expected, .. } => *expected,
            Self::Unlinked { seq } | Self::Altered { seq } => *seq,
        }
    }
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

/// A point the log must still pass through: entry `seq` with hash `hash`. Written `SEQ:HASH`
/// (what `gatehouse audit verify` prints as the head to keep); a bare `HASH` is accepted too and
/// found by its hash (a scan of the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The entry's position; `None` for a bare hash, found by scanning.
    pub seq: Option<u64>,
    /// Its hash.
    pub hash: String,
}

impl Anchor {
    /// Parses `SEQ:HASH` or a bare `HASH` (`sha256:<hex>`, or [`GENESIS`] for an empty log).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (seq, hash) = match text.split_once(':') {
            Some((seq, hash)) if !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()) => {
                let seq = seq
                    .parse::<u64>()
                    .map_err(|e| format!("head `{text}`: the sequence number: {e}"))?;
                (Some(seq), hash)
            }
            _ => (None, text),
        };
        let well_formed = hash == GENESIS
            || hash
                .strip_prefix("sha256:")
                .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if !well_formed {
            return Err(format!(
                "head `{text}`: expected SEQ:HASH as printed by `gatehouse audit verify`, e.g. 42:sha256:<64 hex digits>"
            ));
        }
        if hash == GENESIS && seq.is_some_and(|s| s != 0) {
            return Err(format!(
                "head `{text}`: `{GENESIS}` is the head of entry 0 only"
            ));
        }
        Ok(Self {
            seq: if hash == GENESIS { Some(0) } else { seq },
            hash: hash.to_owned(),
        })
    }

    /// The `SEQ:HASH` form of a verified head: what to keep and pass back later.
    pub fn of(report: &VerifyReport) -> String {
        format!("{}:{}", report.entries, report.head)
    }
}

/// Why the log does not pass through an anchor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum AnchorBreak {
    /// The log is shorter than the anchor: entries were removed from its end.
    Truncated {
        /// The anchored entry.
        seq: u64,
        /// The entries the log holds.
        entries: u64,
    },
    /// The entry at the anchor's position has another hash: the log was rewritten up to it
    /// and chained again.
    Rewritten {
        /// The anchored entry.
        seq: u64,
        /// Its hash now.
        found: String,
        /// The hash anchored.
        expected: String,
    },
    /// No entry has the (bare) hash.
    NotFound {
        /// The hash.
        hash: String,
    },
}

impl std::fmt::Display for AnchorBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated { seq, entries } => write!(
                f,
                "the log ends at entry {entries}, before entry {seq}: entries were removed from the end"
            ),
            Self::Rewritten {
                seq,
                found,
                expected,
            } => write!(
                f,
                "entry {seq}'s hash is {found} where {expected} was recorded: the log was rewritten up to entry {seq} and chained again"
            ),
            Self::NotFound { hash } => write!(
                f,
                "no entry has the hash {hash}: the log was rewritten (or the head is from another log)"
            ),
        }
    }
}

/// Whether a log whose chain verified intact (`report`, no break) passes through `anchor`;
/// the anchored position when it does. Entries appended after the anchor are fine: the log
/// extends it. Reads one entry (a bare hash: scans the log for it).
pub async fn check_anchor(
    store: &dyn super::Store,
    report: &VerifyReport,
    anchor: &Anchor,
) -> Result<Result<u64, AnchorBreak>, super::StoreError> {
    let seq = match anchor.seq {
        Some(seq) => seq,
        None if anchor.hash == report.head => return Ok(Ok(report.entries)),
        None => match find(store, &anchor.hash).await? {
            Some(seq) => seq,
            None => {
                return Ok(Err(AnchorBreak::NotFound {
                    hash: anchor.hash.clone(),
                }));
            }
        },
    };
    if seq > report.entries {
        return Ok(Err(AnchorBreak::Truncated {
            seq,
            entries: report.entries,
        }));
    }
    let found = if seq == 0 {
        GENESIS.to_owned()
    } else if seq == report.entries {
        report.head.clone()
    } else {
        let entry = store
            .audit(AuditQuery {
                after_seq: Some(seq - 1),
                limit: 1,
                ..AuditQuery::default()
            })
            .await?;
        match entry.into_iter().next() {
            Some(entry) if entry.seq == seq => entry.hash,
            _ => {
                return Ok(Err(AnchorBreak::Truncated {
                    seq,
                    entries: report.entries,
                }));
            }
        }
    };
    if found != anchor.hash {
        return Ok(Err(AnchorBreak::Rewritten {
            seq,
            found,
            expected: anchor.hash.clone(),
        }));
    }
    Ok(Ok(seq))
}

/// The position of the entry whose hash is `hash`, read page by page.
async fn find(store: &dyn super::Store, hash: &str) -> Result<Option<u64>, super::StoreError> {
    let mut after_seq = None;
    loop {
        let page = store
            .audit(AuditQuery {
                after_seq,
                limit: 1000,
                ..AuditQuery::default()
            })
            .await?;
        let Some(last) = page.last() else {
            return Ok(None);
        };
        after_seq = Some(last.seq);
        if let Some(entry) = page.iter().find(|e| e.hash == hash) {
            return Ok(Some(entry.seq));
        }
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

    #[test]
    fn heads_read_as_seq_and_hash_or_a_bare_hash() {
        let hash = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            Anchor::parse(&format!("42:{hash}")).unwrap(),
            Anchor {
                seq: Some(42),
                hash: hash.clone()
            }
        );
        assert_eq!(Anchor::parse(&hash).unwrap().seq, None);
        assert_eq!(Anchor::parse("genesis").unwrap().seq, Some(0));
        let error = Anchor::parse("42:sha256:abc").unwrap_err();
        assert!(error.contains("expected SEQ:HASH"), "{error}");
    }

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
