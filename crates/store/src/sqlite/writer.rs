//! The SQLite store's writer: one thread that commits every write job in batches (group
//! commit, see the module docs of [`super`]), and the checkpoint thread beside it.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};

use super::sql::{Head, apply, exec};
use super::unavailable;
use crate::jobs::{self, Done, Job, Op};
use crate::records::StoreError;
use crate::session_cache::SessionCache;
use crate::store::Waiters;

/// Most jobs in one transaction: bounds the latency one commit adds to the first job.
const MAX_BATCH: usize = 512;

/// How often the WAL is copied into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// The checkpoint thread: copies committed WAL frames into the database file without blocking
/// the writer (`PASSIVE`). Once a checkpoint has copied everything, the writer's next
/// transaction starts the WAL over from its beginning, so it stays small. Ends when the writer
/// thread ends, with a last full checkpoint.
pub(super) fn checkpoint_loop(conn: &Connection, writer_gone: &mpsc::Receiver<()>) {
    while let Err(mpsc::RecvTimeoutError::Timeout) = writer_gone.recv_timeout(CHECKPOINT_EVERY) {
        let checkpoint = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        if let Err(error) = checkpoint {
            tracing::debug!(%error, "a WAL checkpoint did not complete; the next one retries");
        }
    }
    // A last checkpoint, so a clean shutdown leaves the database file complete.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// How often idempotency records past their dedupe window, and tasks past their expiry, are
/// deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The writer thread: group commit (see the module docs). Also prunes expired idempotency
/// records and tasks, at most every [`PRUNE_EVERY`], in a batch of their own. After each
/// commit, wakes the calls waiting on the keys it completed or released. Ends when every sender
/// is gone, after the jobs already queued.
pub(super) fn write_loop(
    mut conn: Connection,
    queue: &mpsc::Receiver<Job>,
    waiters: &Waiters,
    sessions: &SessionCache,
) {
    let mut pruned: Option<Instant> = None;
    while let Ok(first) = queue.recv() {
        if pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            pruned = Some(Instant::now());
            let mut prune = [Job {
                op: Op::Prune(crate::records::now_ms()),
                reply: None,
            }];
            match run_batch(&mut conn, &mut prune).pop() {
                Some(Ok(Done::Count(n))) if n > 0 => {
                    tracing::info!(
                        pruned = n,
                        "forgot idempotency records and tasks past their expiry"
                    );
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "pruning idempotency records and tasks failed");
                }
                _ => {}
            }
        }
        let mut batch = gather(first, queue);
        // Taken before the batch's first statement: a fill reads either before this commit or
        // after its writes are applied below.
        let turn = sessions.turn();
        let results = run_batch(&mut conn, &mut batch);
        // Before anyone is answered: a caller's next call must see this one in its session.
        sessions.committed(
            batch
                .iter()
                .zip(&results)
                .filter_map(|(job, result)| Some((&job.op, changed(result.as_ref().ok()?)))),
        );
        drop(turn);
        for (job, result) in batch.into_iter().zip(results) {
            match &result {
                Ok(_) => {
                    if let Some(key) = job.op.wakes() {
                        waiters.wake(key);
                    }
                }
                Err(error) => jobs::log_failed_write(error),
            }
            if let Some(reply) = job.reply {
                let _ = reply.send(result);
            }
        }
    }
}

/// `first`, then the jobs queued behind it, up to [`MAX_BATCH`]; while nobody waits on the
/// batch, also those that come within [`jobs::LINGER`]. It lingers parked, not in `recv`, so
/// each job that comes does not wake it: only a job someone waits on does
/// ([`SqliteStore::write`] unparks this thread), and ends the linger.
fn gather(first: Job, queue: &mpsc::Receiver<Job>) -> Vec<Job> {
    let until = Instant::now() + jobs::LINGER;
    let mut waited = first.reply.is_some();
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match queue.try_recv() {
            Ok(job) => {
                waited |= job.reply.is_some();
                batch.push(job);
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
            Err(mpsc::TryRecvError::Empty) => {
                let left = until.saturating_duration_since(Instant::now());
                if waited || left.is_zero() {
                    break;
                }
                std::thread::park_timeout(left);
            }
        }
    }
    batch
}

/// Whether a committed write changed anything: a conditional one (a session's start or end)
/// answers how many rows it changed.
fn changed(done: &Done) -> bool {
    !matches!(done, Done::Count(0))
}

/// Runs a batch in one transaction; every job gets an answer, all failed if the commit fails.
pub(super) fn run_batch(conn: &mut Connection, batch: &mut [Job]) -> Vec<Result<Done, StoreError>> {
    let failed = |error: &StoreError, n: usize| (0..n).map(|_| Err(error.clone())).collect();
    let txn = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(txn) => txn,
        Err(e) => return failed(&unavailable(e), batch.len()),
    };
    let mut results = Vec::with_capacity(batch.len());
    let mut head = Head::default();
    for job in batch.iter_mut() {
        let result = if one_write(&job.op) {
            // SQLite undoes a failed statement by itself, so a job of one write needs no
            // savepoint to fail alone.
            apply(&txn, &mut head, &mut job.op)
        } else {
            // Each other job in a savepoint (through the statement cache: this runs per job).
            match exec(&txn, "SAVEPOINT job", []) {
                Ok(_) => match apply(&txn, &mut head, &mut job.op) {
                    Ok(done) => exec(&txn, "RELEASE job", [])
                        .map(|_| done)
                        .map_err(unavailable),
                    Err(error) => {
                        // Undo this job only.
                        exec(&txn, "ROLLBACK TO job", []).ok();
                        exec(&txn, "RELEASE job", []).ok();
                        Err(error)
                    }
                },
                Err(e) => Err(unavailable(e)),
            }
        };
        if let Err(error) = &result {
            // Read the head again after a job that failed.
            head = Head::default();
            // A full disk or an I/O error can make SQLite roll the whole transaction back.
            // The jobs after it would then run outside any, each kept on its own, and the
            // commit fail: the batch ends here, every job failed, as none of it is kept.
            if txn.is_autocommit() {
                return failed(error, batch.len());
            }
        }
        results.push(result);
    }
    match txn.commit() {
        Ok(()) => results,
        Err(e) => failed(&unavailable(e), batch.len()),
    }
}

/// Whether `op` changes the database with one statement at most: a claim (read, then insert
/// or update its key), or the record of a call that completes, releases and executes nothing
/// (a read-only call's, the common job). Such a job runs without a savepoint of its own. A
/// savepoint costs every job two statements more and, for each page the job changes that the
/// batch had already changed (the log's last page, each index's), a copy of the page into the
/// statement journal (`docs/benchmarks.md`, tenth round).
fn one_write(op: &Op) -> bool {
    match op {
        Op::Claim(_) => true,
        Op::Record(record) => {
            record.completes.is_none() && record.releases.is_none() && record.executes.is_none()
        }
        _ => false,
    }
}
