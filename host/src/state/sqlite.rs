//! The embedded store: one SQLite file in WAL mode.
//!
//! 1. **open** (once per host): the file and its directory are created if missing, the
//!    versioned migrations are applied (tracked by `PRAGMA user_version`): the portable ones
//!    in `migrations/` it shares with PostgreSQL, then SQLite's own in `migrations/sqlite/`,
//!    and a writer thread starts. A file that is not a database, is of a newer schema, or
//!    cannot be written fails the open, naming the file.
//! 2. **write** (group commit): every write is a job sent to the writer thread. It takes the
//!    first job waiting, then every other job already queued (and while nobody waits on the
//!    batch, the jobs that come within [`jobs::LINGER`]), runs them all in one transaction
//!    (each in a savepoint, so one failing job does not undo the others; a job of one write
//!    needs none, as SQLite undoes a failed statement by itself), commits once
//!    (`synchronous = FULL`: one fsync for the whole batch), and only then answers each job.
//!    Concurrent calls therefore share commits instead of paying one fsync each; while one
//!    commit's fsync runs, the next batch gathers.
//! 3. **read**: a separate connection (WAL lets it read while the writer writes) behind a
//!    mutex, used from the blocking thread pool. `prior_actions`, asked on every call a
//!    policy sees, reads a principal's tools once; after that the writer keeps them in memory
//!    from the calls it commits (`recent.rs`).
//!
//! Another process (the `gatehouse approvals` and `audit` commands) may open the same file
//! while a gateway serves from it: SQLite's locks serialize the writers, and the audit chain's
//! head is read inside each transaction, never kept past it. A second *gateway* may not: rate
//! budgets and principals' recent tools live in the serving process's memory, so two gateways
//! on one file would each enforce half a budget. `gatehouse serve` takes [`GatewayLock`] (an
//! exclusive lock on `<file>.lock`) before it opens the store, and a second gateway is refused
//! at start, naming PostgreSQL (`[store] url`), the store several gateways share.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior, params};
use serde_json::Value;

use super::audit::{self, AuditEntry, AuditQuery, GENESIS, VerifyReport};
use super::jobs::{
    self, APPROVAL_COLUMNS, AUDIT_COLUMNS, CHECKPOINT_COLUMNS, CHECKPOINTS_QUERY, Done, Job,
    Judgement, KeyRow, Op, PLUGIN_CHANGES_QUERY, from_db, to_db,
};
use super::rate::{MemoryRateBudget, RateBudget, RateFuture};
use super::recent::{self, RecentActions};
use super::{
    Approval, ApprovalFilter, ApprovalLookup, ApprovalStatus, AuditEvent, CallRecord, Checkpoint,
    Claim, ClaimRequest, Decision, IdempotencyKey, KeyRecord, PluginChange, Resolution, Store,
    StoreConfig, StoreError, StoreFuture, Waiters,
};

/// The schema migrations, in order; the schema version is their count. The portable ones are
/// PostgreSQL's too; the third, SQLite's alone, rebuilds the audit table around its rowid.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_rate_windows.sql"),
    include_str!("migrations/sqlite/0003_audit_rowid.sql"),
    include_str!("migrations/0005_audit_checkpoints.sql"),
    include_str!("migrations/0006_plugin_changes.sql"),
];
/// How long a connection waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Most jobs in one transaction: bounds the latency one commit adds to the first job.
const MAX_BATCH: usize = 512;

/// The SQLite store. Cheap to share (`Arc` it).
pub struct SqliteStore {
    path: PathBuf,
    /// `None` once the store is shutting down.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The writer thread, unparked by a job someone waits on (see [`gather`]).
    writer_thread: std::thread::Thread,
    reader: Arc<Mutex<Connection>>,
    waiters: Arc<Waiters>,
    /// Rate budgets: in this process's memory (one gateway per file).
    rates: MemoryRateBudget,
    /// Principals' recent tools for `prior_actions`, kept by the writer (one gateway per file).
    recent: Arc<RecentActions>,
}

impl Drop for SqliteStore {
    /// Lets the writer finish the jobs already queued (records of read-only calls nobody waited
    /// for), so a clean shutdown loses nothing.
    fn drop(&mut self) {
        jobs::stop_writer(&self.jobs, &self.writer);
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store `config` names and starts its writer thread.
    pub fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        let path = &config.resolved_path();
        let fail = open_error(path);
        create_dir(path)?;
        owner_only(path).map_err(|e| fail(format!("cannot create it: {e}")))?;
        let mut writer = connect(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
        .map_err(|e| fail(e.to_string()))?;
        migrate(&mut writer, path).map_err(&fail)?;
        if let Some(mib) = config.max_size_mib {
            let page_size: i64 = writer
                .pragma_query_value(None, "page_size", |row| row.get(0))
                .map_err(|e| fail(e.to_string()))?;
            let pages = i64::try_from(mib.saturating_mul(1024 * 1024)).unwrap_or(i64::MAX)
                / page_size.max(512);
            writer
                .pragma_update(None, "max_page_count", pages.max(1))
                .map_err(|e| fail(e.to_string()))?;
        }
        // Checkpoints (copying the WAL into the database file) mostly run on their own
        // connection and thread, off the writer's path; the writer's own automatic checkpoint
        // (every 1000 pages) then finds little left to copy, and restarts the WAL from its
        // beginning, so commits overwrite the same file blocks instead of growing the file.
        let checkpointer =
            connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|e| fail(e.to_string()))?;
        let reader =
            connect(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| fail(e.to_string()))?;
        let (jobs, queue) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        let waiters = Arc::new(Waiters::default());
        let woken = Arc::clone(&waiters);
        let recent = Arc::new(RecentActions::default());
        let committed = Arc::clone(&recent);
        let writer = std::thread::Builder::new()
            .name("gatehouse-store".to_owned())
            .spawn(move || {
                write_loop(writer, &queue, &woken, &committed);
                drop(stop);
            })
            .map_err(|e| fail(format!("cannot start the writer thread: {e}")))?;
        std::thread::Builder::new()
            .name("gatehouse-checkpoint".to_owned())
            .spawn(move || checkpoint_loop(&checkpointer, &stopped))
            .map_err(|e| fail(format!("cannot start the checkpoint thread: {e}")))?;
        Ok(Self {
            path: path.to_owned(),
            jobs: Mutex::new(Some(jobs)),
            writer_thread: writer.thread().clone(),
            writer: Mutex::new(Some(writer)),
            reader: Arc::new(Mutex::new(reader)),
            waiters,
            rates: MemoryRateBudget::default(),
            recent,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends a job to the writer; waits for its commit when `wait` (and ends the writer's
    /// linger: see [`gather`]).
    fn write(&self, op: Op, wait: bool) -> StoreFuture<'_, Done> {
        jobs::submit(op, wait, |job| {
            let sent = self
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .is_some_and(|jobs| jobs.send(job).is_ok());
            if sent && wait {
                self.writer_thread.unpark();
            }
            sent
        })
    }

    /// Runs `read` on the reader connection in the blocking pool.
    fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let reader = Arc::clone(&self.reader);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let conn = reader.lock().unwrap_or_else(PoisonError::into_inner);
                read(&conn).map_err(unavailable)
            })
            .await
            .map_err(|e| StoreError::Unavailable(format!("a store read failed: {e}")))?
        })
    }
}

/// One gateway's claim on a SQLite store file: an exclusive advisory lock on the sidecar file
/// `<file>.lock`, held until dropped (the OS releases it when the process dies, however it
/// dies). See the module docs for why.
#[derive(Debug)]
pub struct GatewayLock {
    _file: std::fs::File,
}

impl GatewayLock {
    /// Takes the lock of the store `config` names, or says which gateway setup to use instead.
    pub fn take(config: &StoreConfig) -> Result<Self, StoreError> {
        let path = config.resolved_path();
        let mut name = path.clone().into_os_string();
        name.push(".lock");
        let lock = PathBuf::from(name);
        let fail = open_error(&path);
        create_dir(&path)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)
            .map_err(|e| fail(format!("cannot open its lock file {}: {e}", lock.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(fail(format!(
                "another gateway is serving from it (it holds {}). One SQLite file serves one \
                 gateway process: rate budgets and prior actions live in that process's memory. \
                 Stop the other gateway, give this one its own `[store] path`, or let several \
                 gateways share a PostgreSQL database (`[store] url`)",
                lock.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(fail(format!("cannot lock {}: {e}", lock.display())))
            }
        }
    }
}

/// The error of a store file that cannot be opened, naming it.
fn open_error(path: &Path) -> impl Fn(String) -> StoreError + '_ {
    move |detail| StoreError::Open {
        path: path.display().to_string(),
        detail,
    }
}

/// Creates the store file's directory if it is missing.
fn create_dir(path: &Path) -> Result<(), StoreError> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir)
            .map_err(|e| open_error(path)(format!("cannot create its directory: {e}"))),
        None => Ok(()),
    }
}

/// Creates the file at `path` readable and writable by its owner only (0600), before SQLite
/// creates it with 0644: it holds call arguments, results and approvals. SQLite gives the
/// `-wal` and `-shm` files the database file's mode. An existing file that others may read
/// is used as it is, with a warning saying how to fix it.
fn owner_only(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        path = %path.display(),
                        mode = %format_args!("{mode:o}"),
                        "the state store file is readable by others: it holds call arguments and results; `chmod 600` it (and its -wal and -shm files)"
                    );
                }
            }
            Err(e) => return Err(e),
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

fn connect(path: &Path, flags: OpenFlags) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Query plans that never depend on bound values. Without this SQLite marks a cached
    // statement to be prepared again whenever some of its parameters are bound anew (a
    // `LIMIT ?`, say), and the policy's `prior_actions` query was parsed and planned again on
    // every call: more CPU than running it.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    if !flags.contains(OpenFlags::SQLITE_OPEN_READ_ONLY) {
        // WAL: readers never block the writer; FULL: a commit survives power loss.
        enable_wal(&conn)?;
        conn.pragma_update(None, "synchronous", "FULL")?;
    }
    Ok(conn)
}

/// Switches `conn`'s file to WAL. While another process is creating the same new file SQLite
/// answers "database is locked" here without calling the busy handler, so that answer is
/// retried, for as long as the busy timeout.
fn enable_wal(conn: &Connection) -> rusqlite::Result<()> {
    let started = Instant::now();
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if matches!(
                    error.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Applies the migrations the file has not seen, in one transaction. The version is read
/// again under the transaction's write lock, so processes opening a new file at once migrate
/// it once. Upgrading a file that holds data is logged: a migration that rebuilds a table
/// (version 3 rebuilds the audit log's) copies every row, which takes a while on a large file.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), String> {
    if schema_version(conn)? == MIGRATIONS.len() {
        return Ok(());
    }
    let txn = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
    let version = schema_version(&txn)?;
    if (1..MIGRATIONS.len()).contains(&version) {
        tracing::info!(
            store = %path.display(),
            from = version,
            to = MIGRATIONS.len(),
            "upgrading the state store's schema; a large file takes a while"
        );
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        txn.execute_batch(sql)
            .map_err(|e| format!("migration {} failed: {e}", index + 1))?;
    }
    txn.pragma_update(None, "user_version", MIGRATIONS.len() as i64)
        .map_err(|e| e.to_string())?;
    txn.commit().map_err(|e| e.to_string())
}

/// The file's schema version (`PRAGMA user_version`); an error if it is newer than this build's.
fn schema_version(conn: &Connection) -> Result<usize, String> {
    let version: usize = conn
        .pragma_query_value(None, "user_version", |row| row.get::<_, i64>(0))
        .map_err(|e| e.to_string())?
        .try_into()
        .unwrap_or(usize::MAX);
    if version > MIGRATIONS.len() {
        return Err(format!(
            "its schema version is {version}, newer than this gatehouse knows ({}); run a newer gatehouse",
            MIGRATIONS.len()
        ));
    }
    Ok(version)
}

/// Runs a statement through the connection's statement cache (hot statements are parsed once).
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// One row through the statement cache.
fn query_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, map)
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "used as `map_err(unavailable)`, which passes the error by value"
)]
fn unavailable(error: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// How often the WAL is copied into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// The checkpoint thread: copies committed WAL frames into the database file without blocking
/// the writer (`PASSIVE`). Once a checkpoint has copied everything, the writer's next
/// transaction starts the WAL over from its beginning, so it stays small. Ends when the writer
/// thread ends, with a last full checkpoint.
fn checkpoint_loop(conn: &Connection, writer_gone: &mpsc::Receiver<()>) {
    while let Err(mpsc::RecvTimeoutError::Timeout) = writer_gone.recv_timeout(CHECKPOINT_EVERY) {
        let checkpoint = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        if let Err(error) = checkpoint {
            tracing::debug!(%error, "a WAL checkpoint did not complete; the next one retries");
        }
    }
    // A last checkpoint, so a clean shutdown leaves the database file complete.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// How often idempotency records past their dedupe window are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The writer thread: group commit (see the module docs). Also prunes expired idempotency
/// records, at most every [`PRUNE_EVERY`], in a batch of their own. After each commit, wakes
/// the calls waiting on the keys it completed or released. Ends when every sender is gone,
/// after the jobs already queued.
fn write_loop(
    mut conn: Connection,
    queue: &mpsc::Receiver<Job>,
    waiters: &Waiters,
    recent: &RecentActions,
) {
    let mut pruned: Option<Instant> = None;
    while let Ok(first) = queue.recv() {
        if pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            pruned = Some(Instant::now());
            let mut prune = [Job {
                op: Op::Prune(super::now_ms()),
                reply: None,
            }];
            match run_batch(&mut conn, &mut prune).pop() {
                Some(Ok(Done::Count(n))) if n > 0 => {
                    tracing::info!(pruned = n, "forgot idempotency records past their window");
                }
                Some(Err(error)) => tracing::warn!(%error, "pruning idempotency records failed"),
                _ => {}
            }
        }
        let mut batch = gather(first, queue);
        // Taken before the batch's first statement: a fill reads either before this commit or
        // after its calls are appended below.
        let turn = recent.turn();
        let results = run_batch(&mut conn, &mut batch);
        // Before anyone is answered: a caller's next call must see this one in prior-actions.
        recent.committed(
            batch
                .iter()
                .zip(&results)
                .filter(|(_, result)| result.is_ok())
                .filter_map(|(job, _)| call_of(&job.op)),
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

/// The tenant, principal and tool of a job recording a call: what `prior_actions` lists.
fn call_of(op: &Op) -> Option<(&str, &str, &str)> {
    match op {
        Op::Record(record) if record.audit.kind == "call" => Some((
            record.audit.tenant.as_deref()?,
            record.audit.principal.as_deref()?,
            record.audit.tool.as_deref()?,
        )),
        _ => None,
    }
}

/// Runs a batch in one transaction; every job gets an answer, all failed if the commit fails.
fn run_batch(conn: &mut Connection, batch: &mut [Job]) -> Vec<Result<Done, StoreError>> {
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

/// One job inside the batch's transaction.
fn apply(txn: &Connection, head: &mut Head, op: &mut Op) -> Result<Done, StoreError> {
    match op {
        Op::Claim(request) => claim(txn, request).map(Done::Claim),
        Op::Record(record) => {
            let at = record.audit.at_ms;
            append(txn, head, &record.audit)?;
            if let Some((key, result)) = &record.completes {
                let tool_call_id = call_id_of(&record.audit);
                let updated = exec(
                    txn,
                    "UPDATE idempotency SET state = 'complete', result = ?1 \
                     WHERE tenant = ?2 AND tool = ?3 AND key = ?4 AND tool_call_id = ?5",
                    params![result, key.tenant, key.tool, key.key, tool_call_id],
                )
                .map_err(unavailable)?;
                if updated == 0 {
                    tracing::warn!(key = %key.key, tool = %key.tool, "the key's record was resolved by an operator while the call ran; its result is not stored");
                }
            }
            if let Some(key) = &record.releases {
                exec(txn, "DELETE FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3 AND tool_call_id = ?4", params![key.tenant, key.tool, key.key, call_id_of(&record.audit)])
                .map_err(unavailable)?;
            }
            if let Some(id) = &record.executes {
                exec(txn, "UPDATE approvals SET status = 'executed', executed_by_call = ?1, decided_at = COALESCE(decided_at, ?3) \
                     WHERE id = ?2 AND status = 'approved'", params![call_id_of(&record.audit), id, to_db(at)])
                .map_err(unavailable)?;
            }
            Ok(Done::Unit)
        }
        Op::Propose(proposal) => propose(txn, proposal).map(|a| Done::Approval(Box::new(a))),
        Op::Decide(decision) => decide(txn, head, decision).map(|a| Done::Approval(Box::new(a))),
        Op::Resolve {
            key,
            resolution,
            by,
            now_ms,
        } => resolve(txn, head, key, *resolution, by, *now_ms).map(|()| Done::Unit),
        Op::Prune(now_ms) => txn
            .execute(
                "DELETE FROM idempotency WHERE state = 'complete' AND expires_at <= ?1",
                params![to_db(*now_ms)],
            )
            .map(|n| Done::Count(n as u64))
            .map_err(unavailable),
        Op::Flush => Ok(Done::Unit),
        Op::AddCheckpoint(checkpoint) => exec(
            txn,
            &format!(
                "INSERT INTO audit_checkpoints ({CHECKPOINT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            params![
                to_db(checkpoint.seq),
                checkpoint.hash,
                to_db(checkpoint.at_ms),
                checkpoint.key_id,
                checkpoint.signature
            ],
        )
        .map(|_| Done::Unit)
        .map_err(unavailable),
        Op::AddPluginChange(change) => exec(
            txn,
            "INSERT INTO plugin_changes (seq, at, plugin, change) \
             VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM plugin_changes), ?1, ?2, ?3)",
            params![
                to_db(super::now_ms()),
                change.plugin(),
                serde_json::to_string(change).expect("a plugin change serializes")
            ],
        )
        .map(|_| Done::Unit)
        .map_err(unavailable),
    }
}

fn call_id_of(entry: &AuditEvent) -> Option<&str> {
    entry.tool_call_id.as_deref()
}

fn claim(txn: &Connection, request: &ClaimRequest) -> Result<Claim, StoreError> {
    let key = &request.key;
    let now = super::now_ms();
    let existing = query_row(
        txn,
        "SELECT request_hash, state, tool_call_id, lease_until, result, expires_at \
         FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
        params![key.tenant, key.tool, key.key],
        |row| {
            Ok(KeyRow {
                request_hash: row.get(0)?,
                state: row.get(1)?,
                tool_call_id: row.get(2)?,
                lease_until_ms: from_db(row.get(3)?),
                result: row.get(4)?,
                expires_at_ms: from_db(row.get(5)?),
            })
        },
    )
    .optional()
    .map_err(unavailable)?;
    match jobs::judge(existing, request, now) {
        Judgement::Answer(claim) => return Ok(claim),
        Judgement::Indeterminate(claim) => {
            exec(
                txn,
                "UPDATE idempotency SET state = 'indeterminate' \
                 WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
                params![key.tenant, key.tool, key.key],
            )
            .map_err(unavailable)?;
            return Ok(claim);
        }
        Judgement::Take => {}
    }
    exec(txn, "INSERT INTO idempotency (tenant, tool, key, request_hash, state, tool_call_id, lease_until, result, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, 'in_progress', ?5, ?6, NULL, ?7, ?8) \
         ON CONFLICT (tenant, tool, key) DO UPDATE SET request_hash = excluded.request_hash, \
           state = 'in_progress', tool_call_id = excluded.tool_call_id, lease_until = excluded.lease_until, \
           result = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at", params![
            key.tenant,
            key.tool,
            key.key,
            request.request_hash,
            request.tool_call_id,
            to_db(request.lease_until_ms),
            to_db(now),
            to_db(request.expires_at_ms)
        ])
    .map_err(unavailable)?;
    Ok(Claim::Run)
}

/// The audit chain's head within one batch's transaction: the next entry's number and its
/// `prev_hash`, read at the batch's first append and moved by each (the transaction holds the
/// write lock, so no other writer moves it meanwhile). Empty after a job is rolled back.
#[derive(Default)]
struct Head(Option<(u64, String)>);

/// Appends an audit entry after the head, read inside this transaction, and moves the head.
fn append(txn: &Connection, head: &mut Head, entry: &AuditEvent) -> Result<(), StoreError> {
    let (seq, prev_hash) = match head.0.take() {
        Some(next) => next,
        None => query_row(
            txn,
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
        )
        .optional()
        .map_err(unavailable)?
        .map_or((1, GENESIS.to_owned()), |(seq, hash)| {
            (from_db(seq) + 1, hash)
        }),
    };
    let hash = audit::entry_hash(&prev_hash, seq, entry);
    exec(txn, "INSERT INTO audit (seq, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", params![
            to_db(seq),
            to_db(entry.at_ms),
            entry.kind,
            entry.tool_call_id,
            entry.tenant,
            entry.principal,
            entry.tool,
            entry.outcome,
            entry.record,
            prev_hash,
            hash
        ])
    .map_err(unavailable)?;
    head.0 = Some((seq + 1, hash));
    Ok(())
}

/// The audit query's SQL; its parameters are [`AuditQuery`]'s fields in order, then the limit.
///
/// SQLite cannot search an index for `?1 IS NULL OR tool_call_id = ?1`: the whole log would be
/// scanned in `seq` order. A call has a handful of entries, so when one is asked for, the call
/// index is searched and the few rows found are sorted. The other filters keep the scan in `seq`
/// order, which stops at the limit (a tenant or a time range may hold most of the log).
fn audit_query(by_call: bool) -> String {
    let call = if by_call {
        "tool_call_id = ?1"
    } else {
        "?1 IS NULL"
    };
    format!(
        "SELECT {AUDIT_COLUMNS} FROM audit \
         WHERE {call} AND (?2 IS NULL OR tenant = ?2) \
           AND (?3 IS NULL OR outcome = ?3) AND (?4 IS NULL OR at >= ?4) \
           AND (?5 IS NULL OR at < ?5) AND (?6 IS NULL OR seq > ?6) \
           AND (?7 IS NULL OR tool = ?7) AND (?8 IS NULL OR principal = ?8) \
           AND (?9 IS NULL OR kind = ?9) \
           AND (?10 IS NULL OR instr(record, '\"replay_of\":' || json_quote(?10)) > 0) \
         ORDER BY seq LIMIT ?11"
    )
}

fn approval_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
    let json = |index: usize| -> rusqlite::Result<Value> {
        let text: String = row.get(index)?;
        serde_json::from_str(&text).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                index,
                rusqlite::types::Type::Text,
                Box::new(e),
            )
        })
    };
    let strings = |index: usize| -> rusqlite::Result<Vec<String>> {
        Ok(jobs::strings_from_json(&row.get::<_, String>(index)?))
    };
    let status: String = row.get(9)?;
    Ok(Approval {
        id: row.get(0)?,
        tenant: row.get(1)?,
        tool: row.get(2)?,
        idempotency_key: row.get(3)?,
        request_hash: row.get(4)?,
        call: json(5)?,
        principals: strings(6)?,
        mode: row.get(7)?,
        reasons: strings(8)?,
        status: ApprovalStatus::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                9,
                rusqlite::types::Type::Text,
                format!("unknown approval status `{status}`").into(),
            )
        })?,
        created_at_ms: from_db(row.get(10)?),
        expires_at_ms: from_db(row.get(11)?),
        decided_by: row.get(12)?,
        decided_reason: row.get(13)?,
        decided_at_ms: row.get::<_, Option<i64>>(14)?.map(from_db),
        executed_by_call: row.get(15)?,
    })
}

fn approval_by_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<Approval>> {
    query_row(
        conn,
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
        params![id],
        approval_row,
    )
    .optional()
}

fn approval_by_key(conn: &Connection, key: &IdempotencyKey) -> rusqlite::Result<Option<Approval>> {
    query_row(
        conn,
        &format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE tenant = ?1 AND tool = ?2 AND idempotency_key = ?3"
        ),
        params![key.tenant, key.tool, key.key],
        approval_row,
    )
    .optional()
}

fn propose(txn: &Connection, proposal: &Approval) -> Result<Approval, StoreError> {
    if let Some(key) = &proposal.idempotency_key {
        let key = IdempotencyKey {
            tenant: proposal.tenant.clone(),
            tool: proposal.tool.clone(),
            key: key.clone(),
        };
        if let Some(existing) = approval_by_key(txn, &key).map_err(unavailable)? {
            return Ok(existing);
        }
    }
    exec(
        txn,
        &format!(
            "INSERT INTO approvals ({APPROVAL_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10, ?11, NULL, NULL, NULL, NULL)"
        ),
        params![
            proposal.id,
            proposal.tenant,
            proposal.tool,
            proposal.idempotency_key,
            proposal.request_hash,
            proposal.call.to_string(),
            jobs::strings_json(&proposal.principals),
            proposal.mode,
            jobs::strings_json(&proposal.reasons),
            to_db(proposal.created_at_ms),
            to_db(proposal.expires_at_ms)
        ],
    )
    .map_err(unavailable)?;
    approval_by_id(txn, &proposal.id)
        .map_err(unavailable)?
        .ok_or_else(|| StoreError::Unavailable("the new approval vanished".to_owned()))
}

fn decide(txn: &Connection, head: &mut Head, decision: &Decision) -> Result<Approval, StoreError> {
    let approval = approval_by_id(txn, &decision.id)
        .map_err(unavailable)?
        .ok_or_else(|| StoreError::NotFound(format!("approval `{}`", decision.id)))?;
    let status = jobs::check_decision(&approval, decision)?;
    exec(txn, "UPDATE approvals SET status = ?1, decided_by = ?2, decided_reason = ?3, decided_at = ?4 WHERE id = ?5", params![
            status.as_str(),
            decision.by,
            decision.reason,
            to_db(decision.now_ms),
            decision.id
        ])
    .map_err(unavailable)?;
    append(
        txn,
        head,
        &jobs::decision_event(&approval, decision, status),
    )?;
    approval_by_id(txn, &decision.id)
        .map_err(unavailable)?
        .ok_or_else(|| StoreError::NotFound(format!("approval `{}`", decision.id)))
}

fn resolve(
    txn: &Connection,
    head: &mut Head,
    key: &IdempotencyKey,
    resolution: Resolution,
    by: &str,
    now_ms: u64,
) -> Result<(), StoreError> {
    let row = query_row(
            txn,
            "SELECT state, lease_until, tool_call_id FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
            params![key.tenant, key.tool, key.key],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?)),
        )
        .optional()
        .map_err(unavailable)?
        .ok_or_else(|| jobs::unknown_key(key))?;
    let (state, lease_until, tool_call_id) = row;
    jobs::check_resolvable(key, &state, from_db(lease_until), now_ms)?;
    match resolution {
        Resolution::Release => exec(
            txn,
            "DELETE FROM idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
            params![key.tenant, key.tool, key.key],
        ),
        Resolution::Done => exec(
            txn,
            "UPDATE idempotency SET state = 'complete', result = NULL WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
            params![key.tenant, key.tool, key.key],
        ),
    }
    .map_err(unavailable)?;
    append(
        txn,
        head,
        &jobs::resolution_event(key, resolution, by, now_ms, tool_call_id),
    )
}

/// An entry of the one chain a SQLite log is: its position in the chain is its position in
/// the log.
fn audit_row(row: &Row<'_>) -> rusqlite::Result<AuditEntry> {
    let seq = from_db(row.get(0)?);
    Ok(AuditEntry {
        seq,
        chain: 0,
        link: seq,
        event: AuditEvent {
            at_ms: from_db(row.get(1)?),
            kind: row.get(2)?,
            tool_call_id: row.get(3)?,
            tenant: row.get(4)?,
            principal: row.get(5)?,
            tool: row.get(6)?,
            outcome: row.get(7)?,
            record: row.get(8)?,
        },
        prev_hash: row.get(9)?,
        hash: row.get(10)?,
    })
}

impl RateBudget for SqliteStore {
    fn take(&self, key: String, calls: u32, window_ms: u64, now_ms: u64) -> RateFuture<'_> {
        self.rates.take(key, calls, window_ms, now_ms)
    }
}

impl Store for SqliteStore {
    jobs::queued_writes!();

    fn watch(&self, key: &IdempotencyKey) -> Arc<tokio::sync::Notify> {
        self.waiters.watch(key)
    }

    fn available(&self) -> bool {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn approval(&self, lookup: ApprovalLookup) -> StoreFuture<'_, Option<Approval>> {
        self.read(move |conn| match &lookup {
            ApprovalLookup::Id(id) => approval_by_id(conn, id),
            ApprovalLookup::Key(key) => approval_by_key(conn, key),
        })
    }

    fn approvals(&self, filter: ApprovalFilter) -> StoreFuture<'_, Vec<Approval>> {
        self.read(move |conn| {
            let limit = if filter.limit == 0 { 100 } else { filter.limit };
            let mut statement = conn.prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals \
                 WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR tenant = ?2) \
                 ORDER BY created_at DESC, id LIMIT ?3"
            ))?;
            let rows = statement.query_map(
                params![
                    filter.status.map(ApprovalStatus::as_str),
                    filter.tenant,
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                approval_row,
            )?;
            rows.collect()
        })
    }

    fn prior_actions(
        &self,
        tenant: String,
        principal: String,
        limit: usize,
    ) -> StoreFuture<'_, Vec<String>> {
        if let Some(tools) = self.recent.get(&tenant, &principal, limit) {
            return Box::pin(std::future::ready(Ok(tools)));
        }
        let recent = Arc::clone(&self.recent);
        self.read(move |conn| {
            let _turn = recent.turn();
            let mut statement = conn.prepare_cached(
                "SELECT tool FROM audit WHERE tenant = ?1 AND principal = ?2 AND kind = 'call' AND tool IS NOT NULL \
                 ORDER BY seq DESC LIMIT ?3",
            )?;
            let read = limit.max(recent::KEPT);
            let mut tools: Vec<String> = statement
                .query_map(
                    params![tenant, principal, i64::try_from(read).unwrap_or(i64::MAX)],
                    |row| row.get(0),
                )?
                .collect::<rusqlite::Result<_>>()?;
            tools.reverse();
            recent.fill(tenant, principal, &tools);
            Ok(tools.split_off(tools.len().saturating_sub(limit)))
        })
    }

    fn keys(&self, indeterminate_only: bool, now_ms: u64) -> StoreFuture<'_, Vec<KeyRecord>> {
        self.read(move |conn| {
            let mut statement = conn.prepare(
                "SELECT tenant, tool, key, state, tool_call_id, lease_until, created_at, expires_at \
                 FROM idempotency ORDER BY created_at",
            )?;
            let rows = statement.query_map([], |row| {
                let state: String = row.get(3)?;
                let state = jobs::key_state(&state, from_db(row.get(5)?), now_ms);
                Ok(KeyRecord {
                    key: IdempotencyKey {
                        tenant: row.get(0)?,
                        tool: row.get(1)?,
                        key: row.get(2)?,
                    },
                    state,
                    tool_call_id: row.get(4)?,
                    created_at_ms: from_db(row.get(6)?),
                    expires_at_ms: from_db(row.get(7)?),
                })
            })?;
            let records: Vec<KeyRecord> = rows.collect::<rusqlite::Result<_>>()?;
            Ok(records
                .into_iter()
                .filter(|r| !indeterminate_only || r.state == super::KeyState::Indeterminate)
                .collect())
        })
    }

    fn audit(&self, query: AuditQuery) -> StoreFuture<'_, Vec<AuditEntry>> {
        self.read(move |conn| {
            // One writer has nothing to partition: the log is chain 0.
            if query.chain.is_some_and(|chain| chain != 0) {
                return Ok(Vec::new());
            }
            let mut statement = conn.prepare(&audit_query(query.tool_call_id.is_some()))?;
            let limit = if query.limit == 0 {
                -1
            } else {
                i64::try_from(query.limit).unwrap_or(i64::MAX)
            };
            let rows = statement.query_map(
                params![
                    query.tool_call_id,
                    query.tenant,
                    query.outcome,
                    query.since_ms.map(to_db),
                    query.until_ms.map(to_db),
                    query.after_seq.map(to_db),
                    query.tool,
                    query.principal,
                    query.kind,
                    query.replay_of,
                    limit
                ],
                audit_row,
            )?;
            rows.collect()
        })
    }

    fn checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        self.read(|conn| {
            let mut statement = conn.prepare(CHECKPOINTS_QUERY)?;
            let rows = statement.query_map([], |row| {
                Ok(Checkpoint {
                    seq: from_db(row.get(0)?),
                    hash: row.get(1)?,
                    at_ms: from_db(row.get(2)?),
                    key_id: row.get(3)?,
                    signature: row.get(4)?,
                })
            })?;
            rows.collect()
        })
    }

    fn plugin_changes(&self) -> StoreFuture<'_, Vec<PluginChange>> {
        jobs::plugin_changes(self.read(|conn| {
            let mut statement = conn.prepare(PLUGIN_CHANGES_QUERY)?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
        }))
    }

    fn verify_audit(&self) -> StoreFuture<'_, VerifyReport> {
        self.read(|conn| {
            let mut statement =
                conn.prepare(&format!("SELECT {AUDIT_COLUMNS} FROM audit ORDER BY seq"))?;
            let mut chains = audit::Chains::default();
            for entry in statement.query_map([], audit_row)? {
                if !chains.check(entry?) {
                    break;
                }
            }
            Ok(chains.report())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ApprovalFilter, AuditEvent, KeyState};

    fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: Some(dir.path().join("state.db")),
            ..StoreConfig::default()
        };
        (SqliteStore::open(&config).unwrap(), dir)
    }

    fn key(k: &str) -> IdempotencyKey {
        IdempotencyKey {
            tenant: "acme".to_owned(),
            tool: "t.pay".to_owned(),
            key: k.to_owned(),
        }
    }

    fn claim_request(k: &str, hash: &str, call: &str, lease_ms: u64) -> ClaimRequest {
        let now = crate::state::now_ms();
        ClaimRequest {
            key: key(k),
            request_hash: hash.to_owned(),
            tool_call_id: call.to_owned(),
            lease_until_ms: now + lease_ms,
            expires_at_ms: now + 60_000,
        }
    }

    fn finished(call: &str, k: &str, result: &str) -> CallRecord {
        CallRecord {
            audit: AuditEvent {
                kind: "call".to_owned(),
                tool_call_id: Some(call.to_owned()),
                tenant: Some("acme".to_owned()),
                principal: Some("agent:a".to_owned()),
                tool: Some("t.pay".to_owned()),
                outcome: Some("OK".to_owned()),
                record: "{}".to_owned(),
                at_ms: crate::state::now_ms(),
            },
            completes: Some((key(k), result.to_owned())),
            releases: None,
            executes: None,
            durable: true,
        }
    }

    #[tokio::test]
    async fn a_key_runs_once_then_replays_and_refuses_other_requests() {
        let (store, _dir) = store();
        let first = claim_request("k1", "h1", "call_1", 60_000);
        assert_eq!(store.claim(first.clone()).await.unwrap(), Claim::Run);
        assert_eq!(
            store
                .claim(claim_request("k1", "h1", "call_2", 60_000))
                .await
                .unwrap(),
            Claim::InFlight {
                tool_call_id: "call_1".to_owned()
            }
        );
        assert_eq!(
            store
                .claim(claim_request("k1", "h2", "call_3", 60_000))
                .await
                .unwrap(),
            Claim::Conflict {
                tool_call_id: "call_1".to_owned()
            }
        );
        store
            .record(finished("call_1", "k1", "{\"r\":1}"))
            .await
            .unwrap();
        assert_eq!(
            store
                .claim(claim_request("k1", "h1", "call_4", 60_000))
                .await
                .unwrap(),
            Claim::Replay {
                tool_call_id: "call_1".to_owned(),
                result: Some("{\"r\":1}".to_owned())
            }
        );
        let report = store.verify_audit().await.unwrap();
        assert_eq!((report.entries, report.first_break), (1, None));
    }

    /// The job recording a read-only call: one write.
    fn read_only(call: &str) -> Job {
        let mut record = finished(call, call, "{}");
        record.completes = None;
        record.durable = false;
        Job {
            op: Op::Record(record),
            reply: None,
        }
    }

    #[tokio::test]
    async fn a_job_failing_inside_a_batch_leaves_one_chain_through_the_others() {
        let (store, dir) = store();
        let missing = Decision {
            id: "apr_missing".to_owned(),
            approve: true,
            by: "ops".to_owned(),
            reason: "r".to_owned(),
            now_ms: crate::state::now_ms(),
            allow_self_approval: false,
        };
        let mut first = finished("call_0", "call_0", "{}");
        first.completes = None;
        store.record(first).await.unwrap();
        // One batch on a connection of its own: two entries, a job that fails, two more.
        let mut conn = connect(&dir.path().join("state.db"), OpenFlags::default()).unwrap();
        let mut batch = vec![
            read_only("call_1"),
            read_only("call_2"),
            Job {
                op: Op::Decide(missing),
                reply: None,
            },
            read_only("call_3"),
            read_only("call_4"),
        ];
        let results = run_batch(&mut conn, &mut batch);
        let failed: Vec<bool> = results.iter().map(Result::is_err).collect();
        assert_eq!(failed, [false, false, true, false, false]);
        assert!(
            matches!(&results[2], Err(StoreError::NotFound(what)) if what.contains("apr_missing"))
        );
        let report = store.verify_audit().await.unwrap();
        assert_eq!((report.entries, report.first_break), (5, None));
    }

    /// Jobs of one write run without a savepoint. A record too large for a capped store fails
    /// in the middle of a batch, and SQLite may undo the statement or the whole transaction:
    /// either way the log keeps exactly the jobs answered `Ok`, and the small records after
    /// the large one are not kept behind the batch's back.
    #[tokio::test]
    async fn a_batch_that_fills_the_store_keeps_exactly_the_jobs_it_answers_ok() {
        let (store, dir) = store();
        let mut first = finished("call_0", "call_0", "{}");
        first.completes = None;
        store.record(first).await.unwrap();
        let mut conn = connect(&dir.path().join("state.db"), OpenFlags::default()).unwrap();
        let pages: i64 = conn
            .pragma_query_value(None, "page_count", |row| row.get(0))
            .unwrap();
        conn.pragma_update(None, "max_page_count", pages + 8)
            .unwrap();
        let mut batch: Vec<Job> = (1..=5).map(|n| read_only(&format!("call_{n}"))).collect();
        if let Op::Record(record) = &mut batch[2].op {
            record.audit.record = format!("{{\"filler\":\"{}\"}}", "x".repeat(100_000));
        }
        let results = run_batch(&mut conn, &mut batch);
        let errors: Vec<Option<String>> = results
            .iter()
            .map(|result| result.as_ref().err().map(ToString::to_string))
            .collect();
        assert!(
            matches!(&results[2], Err(StoreError::Unavailable(_))),
            "the large record fitted: {errors:?}"
        );
        let kept = results.iter().filter(|result| result.is_ok()).count();
        let report = store.verify_audit().await.unwrap();
        assert_eq!(
            (report.entries, report.first_break),
            (1 + kept as u64, None),
            "{errors:?}"
        );
    }

    #[tokio::test]
    async fn a_call_s_entries_are_found_through_the_call_index() {
        let (store, _dir) = store();
        for call in ["call_1", "call_2", "call_3"] {
            let mut record = finished(call, call, "{}");
            record.completes = None;
            store.record(record).await.unwrap();
        }
        let entries = store
            .audit(AuditQuery {
                tool_call_id: Some("call_2".to_owned()),
                ..AuditQuery::default()
            })
            .await
            .unwrap();
        let found: Vec<_> = entries
            .iter()
            .map(|e| (e.seq, e.event.tool_call_id.as_deref()))
            .collect();
        assert_eq!(found, [(2, Some("call_2"))]);
        // Searched, not scanned: a log of a million calls answers as fast as this one.
        let reader = store.reader.lock().unwrap();
        let plan: Vec<String> = reader
            .prepare(&format!("EXPLAIN QUERY PLAN {}", audit_query(true)))
            .unwrap()
            .query_map(
                params![
                    "call_2",
                    None::<String>,
                    None::<String>,
                    None::<i64>,
                    None::<i64>,
                    None::<i64>,
                    None::<String>,
                    None::<String>,
                    None::<String>,
                    None::<String>,
                    -1
                ],
                |row| row.get(3),
            )
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX audit_by_call")),
            "{plan:?}"
        );
    }

    #[tokio::test]
    async fn a_claim_past_its_lease_is_indeterminate_until_an_operator_resolves_it() {
        let (store, _dir) = store();
        assert_eq!(
            store
                .claim(claim_request("k", "h", "call_1", 0))
                .await
                .unwrap(),
            Claim::Run
        );
        let again = claim_request("k", "h", "call_2", 60_000);
        let indeterminate = Claim::Indeterminate {
            tool_call_id: "call_1".to_owned(),
        };
        assert_eq!(store.claim(again.clone()).await.unwrap(), indeterminate);
        assert_eq!(store.claim(again.clone()).await.unwrap(), indeterminate);
        let now = crate::state::now_ms();
        let listed = store.keys(true, now).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, KeyState::Indeterminate);
        store
            .resolve(key("k"), Resolution::Release, "ops".to_owned(), now)
            .await
            .unwrap();
        assert_eq!(store.claim(again).await.unwrap(), Claim::Run);
        // The resolution is in the audit log, chained.
        let entries = store.audit(AuditQuery::default()).await.unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].event.kind, "operator");
        assert!(store.verify_audit().await.unwrap().first_break.is_none());
    }

    #[tokio::test]
    async fn proposals_are_found_by_key_and_decided_by_someone_else() {
        let (store, _dir) = store();
        let proposal = |id: &str| Approval {
            id: id.to_owned(),
            tenant: "acme".to_owned(),
            tool: "t.pay".to_owned(),
            idempotency_key: Some("k".to_owned()),
            request_hash: "h".to_owned(),
            call: serde_json::json!({ "tool_call_id": "call_1" }),
            principals: vec!["usr_alice".to_owned()],
            mode: "delegated".to_owned(),
            reasons: vec!["R: why".to_owned()],
            status: ApprovalStatus::Pending,
            created_at_ms: crate::state::now_ms(),
            expires_at_ms: crate::state::now_ms() + 60_000,
            decided_by: None,
            decided_reason: None,
            decided_at_ms: None,
            executed_by_call: None,
        };
        let first = store.propose(proposal("apr_1")).await.unwrap();
        let second = store.propose(proposal("apr_2")).await.unwrap();
        assert_eq!((first.id.as_str(), second.id.as_str()), ("apr_1", "apr_1"));
        let decision = |by: &str| Decision {
            id: "apr_1".to_owned(),
            approve: true,
            by: by.to_owned(),
            reason: "fine".to_owned(),
            now_ms: crate::state::now_ms(),
            allow_self_approval: false,
        };
        let refused = store.decide(decision("usr_alice")).await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Refused(ref m) if m.contains("requesting principal chain")),
            "{refused}"
        );
        let approved = store.decide(decision("usr_bob")).await.unwrap();
        assert_eq!(approved.status, ApprovalStatus::Approved);
        assert_eq!(approved.decided_by.as_deref(), Some("usr_bob"));
        let again = store.decide(decision("usr_carol")).await.unwrap_err();
        assert!(
            matches!(again, StoreError::Refused(ref m) if m.contains("already approved")),
            "{again}"
        );
        let pending = store
            .approvals(ApprovalFilter {
                status: Some(ApprovalStatus::Pending),
                ..ApprovalFilter::default()
            })
            .await
            .unwrap();
        assert!(pending.is_empty());
    }

    #[test]
    fn gateways_opening_a_new_file_at_once_migrate_it_once() {
        for _ in 0..10 {
            let dir = tempfile::tempdir().unwrap();
            let config = StoreConfig {
                path: Some(dir.path().join("state.db")),
                ..StoreConfig::default()
            };
            let start = std::sync::Barrier::new(6);
            std::thread::scope(|scope| {
                let opens: Vec<_> = (0..6)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            SqliteStore::open(&config).map(drop)
                        })
                    })
                    .collect();
                for open in opens {
                    open.join().unwrap().expect("every open succeeds");
                }
            });
            let conn = connect(
                dir.path().join("state.db").as_path(),
                OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            assert_eq!(schema_version(&conn).unwrap(), MIGRATIONS.len());
        }
    }

    #[tokio::test]
    async fn a_version_2_log_is_rebuilt_around_its_rowid_and_still_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        // A file as version 2 left it, with three chained entries.
        {
            let mut conn = connect(&path, OpenFlags::default()).unwrap();
            let txn = conn.transaction().unwrap();
            for sql in &MIGRATIONS[..2] {
                txn.execute_batch(sql).unwrap();
            }
            txn.pragma_update(None, "user_version", 2).unwrap();
            for call in ["call_1", "call_2", "call_3"] {
                append(
                    &txn,
                    &mut Head::default(),
                    &finished(call, call, "{}").audit,
                )
                .unwrap();
            }
            txn.commit().unwrap();
        }
        let store = SqliteStore::open(&StoreConfig {
            path: Some(path.clone()),
            ..StoreConfig::default()
        })
        .unwrap();
        let mut record = finished("call_4", "k", "{}");
        record.completes = None;
        store.record(record).await.unwrap();

        let report = store.verify_audit().await.unwrap();
        assert_eq!((report.entries, report.first_break), (4, None));
        let entries = store.audit(AuditQuery::default()).await.unwrap();
        let calls: Vec<_> = entries
            .iter()
            .map(|e| (e.seq, e.event.tool_call_id.as_deref().unwrap()))
            .collect();
        assert_eq!(
            calls,
            [(1, "call_1"), (2, "call_2"), (3, "call_3"), (4, "call_4")]
        );
        // `seq` is the rowid now (no unique index of its own), and the time index is gone.
        let reader = store.reader.lock().unwrap();
        assert_eq!(schema_version(&reader).unwrap(), MIGRATIONS.len());
        let mut indexes: Vec<String> = reader
            .prepare("SELECT name FROM pragma_index_list('audit')")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        indexes.sort();
        assert_eq!(indexes, ["audit_by_call", "audit_by_principal"]);
        let head_plan: String = reader
            .query_row(
                "EXPLAIN QUERY PLAN SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |row| row.get(3),
            )
            .unwrap();
        assert_eq!(head_plan, "SCAN audit");
    }

    #[test]
    fn a_file_that_is_not_a_store_fails_the_open_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("garbage.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let config = StoreConfig {
            path: Some(path.clone()),
            ..StoreConfig::default()
        };
        let error = SqliteStore::open(&config).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("cannot open the state store {}", path.display())),
            "{error}"
        );
        let under_a_file = StoreConfig {
            path: Some(path.join("inside.db")),
            ..StoreConfig::default()
        };
        let error = SqliteStore::open(&under_a_file).unwrap_err().to_string();
        assert!(error.contains("cannot create its directory"), "{error}");
    }
}
