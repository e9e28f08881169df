//! The audit log's hash chains, independent of the backend that stores them.
//!
//! The log is one or more **chains** (docs/architecture.md, section 8: partitioned so that gateways
//! writing for different tenants never wait on each other). An entry's `chain` is its tenant's
//! ([`chain_of`]; PostgreSQL's `[store] chains`, 1 by default; SQLite keeps one), and `link`
//! is its position in that chain, from 1, no gaps. Entry `link` carries `prev_hash`, the hash of
//! the chain's entry `link - 1` (or [`GENESIS`] for the first), and `hash = SHA-256` over
//! `prev_hash`, `link` and every other column, each framed by its length (so no two different
//! entries hash the same bytes). `seq` numbers the whole log in the order it was appended:
//! increasing within a chain; in a SQLite log equal to `link`, in a PostgreSQL log skipping a
//! number where a transaction rolled back. [`verify`] walks the log in `seq` order and names
//! the first entry whose position, link or hash is wrong in its chain, so an edited, deleted,
//! inserted or reordered entry is found. The order of entries of different chains is the order
//! of their `seq` and times, which no hash covers. An attacker who can rewrite the whole tail
//! of a chain can hide a change from the chain alone, so each chain is anchored from outside
//! the database:
//! 1. a **head** ([`Anchor`], `SEQ:HASH`, one per chain) an operator wrote down earlier:
//!    [`check_anchor`] proves the log still holds that hash at that entry and goes on from it
//!    (entries appended since are fine; a removed, edited or re-chained prefix is not);
//! 2. **signed checkpoints** ([`super::checkpoint`]): the gateway signs each chain's head with
//!    an operator key and pushes it out of the database; verifying against them is checking
//!    one anchor per checkpoint, after its signature.

pub mod record;

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::records::AuditEvent;

/// `prev_hash` of the first entry.
pub const GENESIS: &str = "genesis";

/// The most chains a log is partitioned into (`[store] chains`).
pub const MAX_CHAINS: u32 = 1024;

/// The chain an entry about `tenant` goes to in a log of `chains` chains: entries without a
/// tenant (plugin changes, an operator's) go to chain 0, a tenant's to its name's 64-bit
/// FNV-1a hash modulo `chains`. The rule is fixed: gateways of every version must agree on it.
pub fn chain_of(tenant: Option<&str>, chains: u32) -> u32 {
    let Some(tenant) = tenant.filter(|_| chains > 1) else {
        return 0;
    };
    let hash = tenant
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    (hash % u64::from(chains)) as u32
}

/// One entry of the audit log, as stored: its event and its place in the log and its chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Position in the log, from 1: the order entries were appended in.
    pub seq: u64,
    /// The chain the entry belongs to ([`chain_of`]).
    pub chain: u32,
    /// Position in its chain, from 1, no gaps.
    pub link: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: AuditEvent,
    /// The hash of the chain's previous entry.
    pub prev_hash: String,
    /// This entry's hash.
    pub hash: String,
}

impl AuditEntry {
    /// The hash this entry must have, given its columns, `link` and `prev_hash`.
    pub fn expected_hash(&self) -> String {
        entry_hash(&self.prev_hash, self.link, &self.event)
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

/// The hash of a chain's entry `link` holding `event` after `prev_hash`: see the module docs.
pub fn entry_hash(prev_hash: &str, link: u64, event: &AuditEvent) -> String {
    let mut hasher = Sha256::new();
    frame(&mut hasher, Some(prev_hash.as_bytes()));
    frame(&mut hasher, Some(&link.to_le_bytes()));
    frame_columns(&mut hasher, event);
    let mut digits = [0u8; 64];
    hex::encode_to_slice(hasher.finalize(), &mut digits).expect("32 bytes are 64 hex digits");
    let mut hash = String::with_capacity(71);
    hash.push_str("sha256:");
    hash.push_str(std::str::from_utf8(&digits).expect("hex digits are ASCII"));
    hash
}

/// `event`'s columns as [`entry_hash`] hashes them after `prev_hash` and `link`: what the
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
    /// Only this chain's entries.
    pub chain: Option<u32>,
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

/// The first entry that breaks its chain, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum ChainBreak {
    /// The chain's entry `expected` is missing: the next one found, entry `seq` of the log,
    /// is its entry `found` (deleted entries).
    Missing {
        /// The chain.
        chain: u32,
        /// The position in the chain that should come next.
        expected: u64,
        /// The position that came.
        found: u64,
        /// The entry that came.
        seq: u64,
    },
    /// Entry `seq` does not link to its chain's entry before it (inserted or reordered entries).
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
    /// The first entry that is not as its chain says.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Missing { seq, .. } | Self::Unlinked { seq } | Self::Altered { seq } => *seq,
        }
    }
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // A log of one chain numbers its entries as its chain does.
            Self::Missing {
                chain: 0,
                expected,
                found,
                seq,
            } if found == seq => write!(
                f,
                "entry {expected} is missing (the next entry is {found}): entries were deleted"
            ),
            Self::Missing {
                chain,
                expected,
                found,
                seq,
            } => write!(
                f,
                "chain {chain}'s entry {expected} is missing (the next, entry {seq}, is its entry {found}): entries were deleted"
            ),
            Self::Unlinked { seq } => write!(
                f,
                "entry {seq} does not link to the entry before it in its chain: entries were inserted or reordered"
            ),
            Self::Altered { seq } => {
                write!(f, "entry {seq} does not match its hash: it was edited")
            }
        }
    }
}

/// Where a chain ends: its last entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainHead {
    /// The chain.
    pub chain: u32,
    /// Its entries (the last one's `link`).
    pub entries: u64,
    /// The last entry's position in the log.
    pub seq: u64,
    /// The last entry's hash: anchor it elsewhere ([`Anchor::of`]).
    pub hash: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Entries checked, in every chain (up to the first break).
    pub entries: u64,
    /// Each chain's last good entry, by chain; none for an empty log.
    pub heads: Vec<ChainHead>,
    /// The first break, if any.
    pub first_break: Option<ChainBreak>,
}

impl VerifyReport {
    /// The last entry of the log ([`GENESIS`] for an empty one): the one head of a log of one
    /// chain.
    pub fn head(&self) -> &str {
        self.heads
            .iter()
            .max_by_key(|head| head.seq)
            .map_or(GENESIS, |head| &head.hash)
    }

    /// The log's last entry's position (0 for an empty log).
    pub fn last_seq(&self) -> u64 {
        self.heads.iter().map(|head| head.seq).max().unwrap_or(0)
    }

    /// What a verify without a break says: the entries, and the heads to keep ([`Anchor::of`]),
    /// to be passed back as `pass_as` (`--head`, `?head=`).
    pub fn intact(&self, pass_as: &str) -> String {
        let keep = Anchor::of(self);
        match self.heads.len() {
            0 | 1 => format!(
                "ok, {} entries; head {keep} (keep it elsewhere and pass it as {pass_as} next time)",
                self.entries
            ),
            chains => format!(
                "ok, {} entries in {chains} chains; heads {keep} (keep them elsewhere and pass them as {pass_as} next time)",
                self.entries
            ),
        }
    }
}

/// The chain check, one entry at a time in log order (so a backend can stream a long log
/// through it), each entry checked against its chain's head so far.
#[derive(Debug, Clone, Default)]
pub struct Chains {
    heads: BTreeMap<u32, ChainHead>,
    entries: u64,
    first_break: Option<ChainBreak>,
}

impl Chains {
    /// Goes on from the heads of a report without a break (what a checkpointer read at start).
    pub fn resume(report: &VerifyReport) -> Self {
        Self {
            heads: report
                .heads
                .iter()
                .map(|head| (head.chain, head.clone()))
                .collect(),
            entries: report.entries,
            first_break: report.first_break.clone(),
        }
    }

    /// Chain `chain`'s head so far (`None` before its first entry).
    pub fn head(&self, chain: u32) -> Option<&ChainHead> {
        self.heads.get(&chain)
    }

    /// Checks the next entry in log order; false once a chain is broken (stop there).
    pub fn check(&mut self, entry: AuditEntry) -> bool {
        if self.first_break.is_some() {
            return false;
        }
        let (expected, prev_hash) = self
            .heads
            .get(&entry.chain)
            .map_or((1, GENESIS), |head| (head.entries + 1, head.hash.as_str()));
        self.first_break = if entry.link != expected {
            Some(ChainBreak::Missing {
                chain: entry.chain,
                expected,
                found: entry.link,
                seq: entry.seq,
            })
        } else if entry.prev_hash != prev_hash {
            Some(ChainBreak::Unlinked { seq: entry.seq })
        } else if entry.hash != entry.expected_hash() {
            Some(ChainBreak::Altered { seq: entry.seq })
        } else {
            None
        };
        if self.first_break.is_some() {
            return false;
        }
        self.entries += 1;
        self.heads.insert(
            entry.chain,
            ChainHead {
                chain: entry.chain,
                entries: entry.link,
                seq: entry.seq,
                hash: entry.hash,
            },
        );
        true
    }

    /// What the check found so far.
    pub fn report(&self) -> VerifyReport {
        VerifyReport {
            entries: self.entries,
            heads: self.heads.values().cloned().collect(),
            first_break: self.first_break.clone(),
        }
    }
}

/// A point the log must still pass through: entry `seq` with hash `hash`. Written `SEQ:HASH`
/// (what `gatehouse audit verify` prints as each chain's head to keep); a bare `HASH` is
/// accepted too and found by its hash (a scan of the log).
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

    /// The `SEQ:HASH` forms of a verified log's heads, one per chain, separated by commas (a
    /// log of one chain: its one head): what to keep and pass back later.
    pub fn of(report: &VerifyReport) -> String {
        if report.heads.is_empty() {
            return format!("0:{GENESIS}");
        }
        let heads: Vec<String> = report
            .heads
            .iter()
            .map(|head| format!("{}:{}", head.seq, head.hash))
            .collect();
        heads.join(",")
    }

    /// Parses what [`Anchor::of`] wrote: heads separated by commas.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, String> {
        text.split(',').map(Self::parse).collect()
    }
}

/// Why the log does not pass through an anchor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum AnchorBreak {
    /// The log no longer holds the anchored entry: entries were removed from the end of its
    /// chain.
    Truncated {
        /// The anchored entry.
        seq: u64,
        /// The log's last entry.
        last: u64,
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
            Self::Truncated { seq, last } if seq > last => write!(
                f,
                "the log ends at entry {last}, before entry {seq}: entries were removed from the end"
            ),
            Self::Truncated { seq, .. } => write!(
                f,
                "the log holds no entry {seq}: entries were removed from the end of its chain"
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

/// Walks entries in log order; stops at the first break.
pub fn verify(entries: impl IntoIterator<Item = AuditEntry>) -> VerifyReport {
    let mut chains = Chains::default();
    for entry in entries {
        if !chains.check(entry) {
            break;
        }
    }
    chains.report()
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
                    chain: 0,
                    link: seq,
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
        assert_eq!((report.entries, report.head()), (5, head.as_str()));
        assert_eq!(Anchor::of(&report), format!("5:{head}"));
        assert_eq!(verify(Vec::new()).head(), GENESIS);
        assert_eq!(Anchor::of(&verify(Vec::new())), "0:genesis");
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
                chain: 0,
                expected: 2,
                found: 3,
                seq: 3
            })
        );

        let mut reordered = chain(5);
        reordered.swap(1, 2);
        let (a, b) = (reordered[1].seq, reordered[2].seq);
        reordered[1].seq = b;
        reordered[1].link = b;
        reordered[2].seq = a;
        reordered[2].link = a;
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
            e.link = e.seq;
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

    /// Entries of `tenants` in turn, each chained in the chain [`chain_of`] gives it among
    /// `chains`, numbered through the log with `step` (a PostgreSQL log may skip numbers).
    fn partitioned(tenants: &[&str], chains: u32, n: u64, step: u64) -> Vec<AuditEntry> {
        let mut heads: BTreeMap<u32, (u64, String)> = BTreeMap::new();
        (1..=n)
            .map(|i| {
                let tenant = tenants[(i as usize) % tenants.len()];
                let chain = chain_of(Some(tenant), chains);
                let (link, prev) = heads
                    .get(&chain)
                    .map_or((1, GENESIS.to_owned()), |(l, h)| (l + 1, h.clone()));
                let mut entry = AuditEntry {
                    seq: i * step,
                    chain,
                    link,
                    event: AuditEvent {
                        at_ms: 1000 + i,
                        kind: "call".to_owned(),
                        tool_call_id: Some(format!("call_{i}")),
                        tenant: Some(tenant.to_owned()),
                        principal: None,
                        tool: Some("t.x".to_owned()),
                        outcome: Some("OK".to_owned()),
                        record: format!("{{\"n\":{i}}}"),
                    },
                    prev_hash: prev,
                    hash: String::new(),
                };
                entry.hash = entry.expected_hash();
                heads.insert(chain, (link, entry.hash.clone()));
                entry
            })
            .collect()
    }

    #[test]
    fn tenants_keep_their_chain_and_entries_without_one_go_to_chain_zero() {
        assert_eq!(chain_of(Some("acme"), 1), 0);
        assert_eq!(chain_of(None, 8), 0);
        // The rule is fixed (FNV-1a of the name, modulo the chains): a change would split a
        // tenant's entries over two chains between gateways of two versions.
        assert_eq!(
            chain_of(Some(""), 7),
            (0xcbf2_9ce4_8422_2325_u64 % 7) as u32
        );
        let chains: std::collections::BTreeSet<u32> = (0..64)
            .map(|t| chain_of(Some(&format!("tenant-{t}")), 8))
            .collect();
        assert_eq!(chains.len(), 8, "64 tenants spread over all 8 chains");
    }

    #[test]
    fn a_partitioned_log_verifies_each_chain_and_names_a_break_in_one() {
        let tenants = ["acme", "globex", "initech", "umbrella"];
        let entries = partitioned(&tenants, 4, 40, 2);
        let report = verify(entries.clone());
        assert_eq!(report.first_break, None);
        assert_eq!(report.entries, 40);
        let chains: Vec<u32> = report.heads.iter().map(|h| h.chain).collect();
        let mut expected: Vec<u32> = tenants.iter().map(|t| chain_of(Some(t), 4)).collect();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(chains, expected);
        assert_eq!(report.heads.iter().map(|h| h.entries).sum::<u64>(), 40);
        assert_eq!(report.last_seq(), 80);
        assert_eq!(report.head(), entries[39].hash);
        assert_eq!(
            Anchor::parse_list(&Anchor::of(&report)).unwrap().len(),
            chains.len()
        );

        // A deleted entry is missing from its chain, whatever other chains hold.
        let mut deleted = entries.clone();
        let gone = deleted.remove(10);
        let next = deleted[10..]
            .iter()
            .find(|e| e.chain == gone.chain)
            .unwrap()
            .clone();
        assert_eq!(
            verify(deleted).first_break,
            Some(ChainBreak::Missing {
                chain: gone.chain,
                expected: gone.link,
                found: gone.link + 1,
                seq: next.seq,
            })
        );

        // An entry moved to another chain, renumbered to fit, does not link there.
        let target = entries[12].clone();
        let other = entries
            .iter()
            .map(|e| e.chain)
            .find(|c| *c != target.chain)
            .unwrap();
        let mut moved = entries[..12].to_vec();
        let last_link = moved
            .iter()
            .filter(|e| e.chain == other)
            .map(|e| e.link)
            .max()
            .unwrap_or(0);
        let mut forged = target;
        forged.chain = other;
        forged.link = last_link + 1;
        moved.push(forged.clone());
        assert_eq!(
            verify(moved).first_break,
            Some(ChainBreak::Unlinked { seq: forged.seq })
        );

        // An edit is named by its entry's position in the log.
        let mut edited = entries;
        edited[25].event.outcome = Some("DENIED".to_owned());
        assert_eq!(
            verify(edited).first_break,
            Some(ChainBreak::Altered { seq: 52 })
        );
    }
}
