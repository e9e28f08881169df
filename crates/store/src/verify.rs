//! Checks a log whose chains verified intact against what was kept outside it: the heads an
//! earlier verify printed ([`check_anchor`]) and signed checkpoints ([`verify_checkpoints`]).

use gatehouse_core::keys::PublicKey;

use crate::audit::{Anchor, AnchorBreak, AuditQuery, GENESIS, VerifyReport};
use crate::checkpoint::Checkpoint;
use crate::records::StoreError;
use crate::store::Store;

/// Whether a log whose chains verified intact (`report`, no break) passes through `anchor`;
/// the anchored entry when it does. Entries appended after the anchor are fine: the log
/// extends it. Reads one entry (a bare hash: scans the log for it).
pub async fn check_anchor(
    store: &dyn Store,
    report: &VerifyReport,
    anchor: &Anchor,
) -> Result<Result<u64, AnchorBreak>, StoreError> {
    let seq = match anchor.seq {
        Some(seq) => seq,
        None => match report.heads.iter().find(|head| head.hash == anchor.hash) {
            Some(head) => return Ok(Ok(head.seq)),
            None => match find(store, &anchor.hash).await? {
                Some(seq) => seq,
                None => {
                    return Ok(Err(AnchorBreak::NotFound {
                        hash: anchor.hash.clone(),
                    }));
                }
            },
        },
    };
    let truncated = AnchorBreak::Truncated {
        seq,
        last: report.last_seq(),
    };
    let found = if seq == 0 {
        GENESIS.to_owned()
    } else if let Some(head) = report.heads.iter().find(|head| head.seq == seq) {
        head.hash.clone()
    } else if seq > report.last_seq() {
        return Ok(Err(truncated));
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
            _ => return Ok(Err(truncated)),
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
async fn find(store: &dyn Store, hash: &str) -> Result<Option<u64>, StoreError> {
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

/// Checks a log whose chain verified intact (`report`, no break) against signed checkpoints,
/// in order: each signature with `key`, then that the log holds the checkpoint's hash at its
/// position. The first that fails, named by its line (from 1), entry and time, is the answer.
pub async fn verify_checkpoints(
    store: &dyn Store,
    report: &VerifyReport,
    checkpoints: &[Checkpoint],
    key: &PublicKey,
) -> Result<Result<(), String>, StoreError> {
    for (index, checkpoint) in checkpoints.iter().enumerate() {
        let name = checkpoint.name(index);
        if !checkpoint.verifies(key) {
            return Ok(Err(format!(
                "{name}: its signature does not verify with key `{}`: the checkpoint was forged or altered (or signed by another key)",
                key.key_id
            )));
        }
        let anchor = Anchor {
            seq: Some(checkpoint.seq),
            hash: checkpoint.hash.clone(),
        };
        if let Err(problem) = check_anchor(store, report, &anchor).await? {
            return Ok(Err(format!("{name}: {problem}")));
        }
    }
    Ok(Ok(()))
}
