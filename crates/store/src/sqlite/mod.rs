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
//!    mutex, used from the blocking thread pool. A session, asked for on every call a policy
//!    sees, is read once; after that the writer keeps it in memory from the writes it commits
//!    (`session_cache.rs`).
//!
//! Another process (the `gatehouse approvals` and `audit` commands) may open the same file
//! while a gateway serves from it: SQLite's locks serialize the writers, and the audit chain's
//! head is read inside each transaction, never kept past it. A second *gateway* may not: rate
//! budgets and sessions live in the serving process's memory, so two gateways
//! on one file would each enforce half a budget. `gatehouse serve` takes [`GatewayLock`] (an
//! exclusive lock on `<file>.lock`) before it opens the store, and a second gateway is refused
//! at start, naming PostgreSQL (`[store] url`), the store several gateways share.
//!
//! Files by job: this one opens and migrates the file and answers the [`Store`] trait;
//! `writer` commits the batches (and runs the checkpoint thread); `sql` holds the SQL of each
//! operation; `rows` reads rusqlite's rows for the row mapping PostgreSQL shares (`crate::rows`).

mod rows;
mod sql;
#[cfg(test)]
mod tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::audit::{AuditEntry, AuditQuery, VerifyReport};
use crate::checkpoint::Checkpoint;
use crate::config::StoreConfig;
use crate::connections::{Connection as StoredConnection, ConnectionFilter, ConnectionKey};
use crate::jobs::{self, Done, Job, Op};
use crate::rate::{MemoryRateBudget, RateBudget, RateFuture};
use crate::records::{
    Approval, ApprovalFilter, ApprovalLookup, IdempotencyKey, KeyRecord, KeyState, PluginChange,
    ServedVersion, StoreError, Task, TaskFilter,
};
use crate::session_cache::{self, SessionCache};
use crate::sessions::{Session, SessionFilter, SessionKey, SessionLimits};
use crate::store::{Store, StoreFuture, Waiters};

/// The schema migrations, in order; the schema version is their count (so a file's version
/// is not its last migration's file number). The portable ones are PostgreSQL's too; the
/// third, SQLite's alone, rebuilds the audit table around its rowid.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_rate_windows.sql"),
    include_str!("../../migrations/sqlite/0003_audit_rowid.sql"),
    include_str!("../../migrations/0005_audit_checkpoints.sql"),
    include_str!("../../migrations/0006_plugin_changes.sql"),
    include_str!("../../migrations/0009_tasks.sql"),
    include_str!("../../migrations/0011_served_versions.sql"),
    include_str!("../../migrations/0012_sessions.sql"),
    include_str!("../../migrations/sqlite/0013_audit_by_session.sql"),
    include_str!("../../migrations/0014_connections.sql"),
    include_str!("../../migrations/0015_connection_refresh.sql"),
];

/// How long a connection waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite store. Cheap to share (`Arc` it).
pub struct SqliteStore {
    path: PathBuf,
    /// `None` once the store is shutting down.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The writer thread, unparked by a job someone waits on (see `writer::gather`).
    writer_thread: std::thread::Thread,
    reader: Arc<Mutex<Connection>>,
    waiters: Arc<Waiters>,
    /// Rate budgets: in this process's memory (one gateway per file).
    rates: MemoryRateBudget,
    /// Sessions, kept by the writer (one gateway per file).
    sessions: Arc<SessionCache>,
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
        let sessions = Arc::new(SessionCache::default());
        let committed = Arc::clone(&sessions);
        let writer = std::thread::Builder::new()
            .name("gatehouse-store".to_owned())
            .spawn(move || {
                writer::write_loop(writer, &queue, &woken, &committed);
                drop(stop);
            })
            .map_err(|e| fail(format!("cannot start the writer thread: {e}")))?;
        std::thread::Builder::new()
            .name("gatehouse-checkpoint".to_owned())
            .spawn(move || writer::checkpoint_loop(&checkpointer, &stopped))
            .map_err(|e| fail(format!("cannot start the checkpoint thread: {e}")))?;
        Ok(Self {
            path: path.to_owned(),
            jobs: Mutex::new(Some(jobs)),
            writer_thread: writer.thread().clone(),
            writer: Mutex::new(Some(writer)),
            reader: Arc::new(Mutex::new(reader)),
            waiters,
            rates: MemoryRateBudget::default(),
            sessions,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends a job to the writer; waits for its commit when `wait` (and ends the writer's
    /// linger: see `writer::gather`).
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

    /// The session under `key` as stored, with its last `limit` actions (kept in memory from
    /// then on).
    fn read_session(&self, key: SessionKey, limit: usize) -> StoreFuture<'_, Option<Session>> {
        let cache = Arc::clone(&self.sessions);
        self.read(move |conn| {
            let _turn = cache.turn();
            let Some(mut session) = sql::session(conn, &key)? else {
                return Ok(None);
            };
            session.actions = sql::session_actions(conn, &session, limit.max(session_cache::KEPT))?;
            cache.fill(session.clone());
            let skip = session.actions.len().saturating_sub(limit);
            session.actions.drain(..skip);
            Ok(Some(session))
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

#[allow(
    clippy::needless_pass_by_value,
    reason = "used as `map_err(unavailable)`, which passes the error by value"
)]
fn unavailable(error: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(error.to_string())
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
            ApprovalLookup::Id(id) => sql::approval_by_id(conn, id),
            ApprovalLookup::Key(key) => sql::approval_by_key(conn, key),
        })
    }

    fn approvals(&self, filter: ApprovalFilter) -> StoreFuture<'_, Vec<Approval>> {
        self.read(move |conn| sql::approvals(conn, &filter))
    }

    fn task(&self, id: String) -> StoreFuture<'_, Option<Task>> {
        self.read(move |conn| sql::task_by_id(conn, &id))
    }

    fn tasks(&self, filter: TaskFilter) -> StoreFuture<'_, Vec<Task>> {
        self.read(move |conn| sql::tasks(conn, &filter))
    }

    fn session(
        &self,
        key: SessionKey,
        now_ms: u64,
        limits: SessionLimits,
    ) -> StoreFuture<'_, Session> {
        let found = key.clone();
        let find = move || {
            let key = found.clone();
            async move {
                match self.sessions.get(&key, limits.actions) {
                    Some(session) => Ok(Some(session)),
                    None => self.read_session(key, limits.actions).await,
                }
            }
        };
        let write = |op| self.write(op, true);
        Box::pin(jobs::live_session(find, write, key, now_ms, limits))
    }

    fn sessions(&self, filter: SessionFilter) -> StoreFuture<'_, Vec<Session>> {
        self.read(move |conn| sql::sessions(conn, &filter))
    }

    fn session_entries(
        &self,
        key: SessionKey,
        limit: usize,
    ) -> StoreFuture<'_, Option<(Session, Vec<AuditEntry>)>> {
        self.read(move |conn| {
            let Some(session) = sql::session(conn, &key)? else {
                return Ok(None);
            };
            let entries = sql::session_entries(conn, &session, limit)?;
            Ok(Some((session, entries)))
        })
    }

    fn keys(&self, indeterminate_only: bool, now_ms: u64) -> StoreFuture<'_, Vec<KeyRecord>> {
        self.read(move |conn| {
            let records = sql::keys(conn, now_ms)?;
            Ok(records
                .into_iter()
                .filter(|r| !indeterminate_only || r.state == KeyState::Indeterminate)
                .collect())
        })
    }

    fn audit(&self, query: AuditQuery) -> StoreFuture<'_, Vec<AuditEntry>> {
        self.read(move |conn| sql::audit(conn, &query))
    }

    fn checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        self.read(sql::checkpoints)
    }

    fn connection(&self, key: ConnectionKey) -> StoreFuture<'_, Option<StoredConnection>> {
        self.read(move |conn| sql::connection(conn, &key))
    }

    fn connections(&self, filter: ConnectionFilter) -> StoreFuture<'_, Vec<StoredConnection>> {
        self.read(move |conn| sql::connections(conn, &filter))
    }

    fn authorization(
        &self,
        state_hash: String,
    ) -> StoreFuture<'_, Option<crate::connections::Authorization>> {
        self.read(move |conn| sql::authorization(conn, &state_hash))
    }

    fn plugin_changes(&self) -> StoreFuture<'_, Vec<PluginChange>> {
        jobs::plugin_changes(self.read(sql::plugin_changes))
    }

    fn served_versions(&self) -> StoreFuture<'_, Vec<ServedVersion>> {
        self.read(sql::served_versions)
    }

    fn verify_audit(&self) -> StoreFuture<'_, VerifyReport> {
        self.read(sql::verify_audit)
    }
}
