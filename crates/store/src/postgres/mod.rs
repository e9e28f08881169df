//! The shared store: one PostgreSQL database behind any number of gateway processes (`[store]
//! url`), with the semantics of the SQLite store.
//!
//! 1. **open** (once per host): a thread of the store's own runs a small async runtime that owns
//!    every connection, so the store works the same whatever runtime (or none) its callers use. The
//!    versioned migrations (the portable files SQLite also applies) are applied under a
//!    session-level advisory lock, so gateways starting together apply each one exactly once; the
//!    schema version is kept in `gatehouse_schema`.
//! 2. **write** (group commit): every write is a job for a crew of writers, each writer with its
//!    own connection and prepared statements (`[store] writers` per crew, 1 by default). One crew
//!    takes the claims, the other everything else (records, approvals, tasks, resolutions, plugin
//!    changes, pruning, and [`Store::flush`]'s barrier, which thus orders the records only; claims
//!    are always waited on). A call's claim therefore never queues behind a batch of records, nor a
//!    record behind claims. A crew's writers take turns at its queue: one takes the jobs waiting
//!    (and while nobody waits on the batch, those that come within [`jobs::LINGER`]) while the
//!    others commit theirs, so a job waits for a batch in flight only when every writer of its crew
//!    has one (what bounds a gateway when the database is far: a round trip per batch). Each batch
//!    is committed in two steps:
//!    - the **fast transaction** holds the batch's claims and records, its statements sent in one
//!      pipeline (`writer::fast`): one round trip to the database per batch, however many jobs it
//!      holds. A claim of a key nobody holds is one insert that the key's row makes atomic, so
//!      gateways claiming different keys never wait on each other.
//!    - the **careful transaction** (`writer::careful`) runs, one job after another, what needs a
//!      read first: a claim of a key that already has a row (its row locked), approvals (a
//!      decision is a conditional update from `pending`: of two gateways deciding at once, the
//!      second's update finds the first's committed decision and changes nothing), tasks, an
//!      operator's resolution, plugin changes, served versions, pruning.
//!
//!    The audit chains are the one thing ordered across processes. A transaction appends its
//!    entries last, with one call of `gatehouse_append` (`migrations/postgres/`): for each chain
//!    its entries go to (`[store] chains`, keyed by tenant: [`audit::chain_of`]), in ascending
//!    order, under that chain's transaction-level advisory lock ([`WRITE_LOCK`] plus the chain),
//!    the database reads the chain's head, numbers and hashes the entries after it; then it inserts
//!    them all; the commit, next in the pipeline, releases the locks. The hash is
//!    `audit::entry_hash`'s, which `audit verify` checks: the gateway sends each entry's columns
//!    framed for it, and the database hashes the head's hash and the entry's position in its chain
//!    in front of them. So each chain keeps one verifiable order, gateways appending to different
//!    chains never wait on each other, a lock is never held across a round trip to a gateway, and a
//!    transaction holding one waits for no row, so the row locks and the chains' locks cannot
//!    deadlock. A job that fails in SQL aborts its transaction; the careful transaction is then
//!    rolled back and every job run again alone, so one bad job fails only itself. A job is
//!    answered only after its commit: what was acknowledged is in the database.
//! 3. **wake**: a record that completes or releases a key, and an operator's resolution, send
//!    `NOTIFY gatehouse_keys` with the key's digest; every gateway `LISTEN`s on its own connection
//!    and wakes the calls waiting on that key, wherever its holder ran. When the listening
//!    connection drops, every waiter is woken to look again.
//! 4. **read**: a pool of connections (`[store] pool_size`).
//! 5. **down**: a writer that loses its connection while others of its crew hold theirs connects
//!    again, at once when it finds the loss with a batch in hand, and meanwhile leaves the crew's
//!    jobs to them. When the database cannot be reached (every writer of a crew has lost its
//!    connection), [`Store::available`] turns false, every write fails at once with
//!    `StoreError::Unavailable`, and each writer tries to reconnect every half second; the store
//!    turns available by itself once a writer of each crew is back.
//!
//! Files by job: this one opens (connects, migrates, listens) and answers the [`Store`] trait;
//! `writer` runs the crews and their two transactions; `sql` holds the SQL of each operation;
//! `rows` reads tokio-postgres's rows for the row mapping SQLite shares (`crate::rows`). A damaged
//! row is an error that names its column, never a default.

mod rows;
mod sql;
mod writer;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_rustls::rustls;

use self::rows::PgError;
use self::writer::{Crew, Writer, write_loop};
use crate::audit::{AuditEntry, AuditQuery, VerifyReport};
use crate::checkpoint::Checkpoint;
use crate::config::StoreConfig;
use crate::connections::{Connection, ConnectionFilter, ConnectionKey};
use crate::jobs::{self, Done, Job, Op};
use crate::rate::{RateBudget, RateFuture};
use crate::records::{
    Approval, ApprovalFilter, ApprovalLookup, IdempotencyKey, KeyRecord, KeyState, PluginChange,
    ServedVersion, StoreError, Task, TaskFilter,
};
use crate::rows::{from_db, to_db};
use crate::sessions::{Session, SessionFilter, SessionKey, SessionLimits};
use crate::store::{Store, StoreFuture, Waiters};

/// The schema migrations, in order of their file numbers: the portable files SQLite applies too
/// (SQLite's own, in `migrations/sqlite/`, are not PostgreSQL's) and PostgreSQL's own, in
/// `migrations/postgres/`. The schema version is their count.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_rate_windows.sql"),
    include_str!("../../migrations/0005_audit_checkpoints.sql"),
    include_str!("../../migrations/0006_plugin_changes.sql"),
    include_str!("../../migrations/postgres/0007_audit_append.sql"),
    include_str!("../../migrations/postgres/0008_audit_chains.sql"),
    include_str!("../../migrations/0009_tasks.sql"),
    include_str!("../../migrations/0011_served_versions.sql"),
    include_str!("../../migrations/0012_sessions.sql"),
    include_str!("../../migrations/postgres/0013_audit_by_session.sql"),
    include_str!("../../migrations/0014_connections.sql"),
    include_str!("../../migrations/0015_connection_refresh.sql"),
];

/// The advisory lock a transaction takes (last) to append to audit chain 0, and that plugin
/// changes are numbered under: one appender at a time, across processes. Chain `c`'s is
/// `WRITE_LOCK + c`.
pub const WRITE_LOCK: i64 = 0x6761_7465_686f_7573; // "gatehous"

/// The advisory lock migrations run under.
const MIGRATE_LOCK: i64 = 0x6761_7465_6d69_6772; // "gatemigr"

/// The notification channel of keys that were completed, released or resolved.
const CHANNEL: &str = "gatehouse_keys";

/// How often a lost database is tried again.
const RECONNECT_EVERY: Duration = Duration::from_millis(500);

/// How long connecting may take before the database counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

type Tls = MakeRustlsConnect;

/// The PostgreSQL store. Cheap to share (`Arc` it).
pub struct PostgresStore {
    location: String,
    /// `None` once the store is shutting down.
    jobs: Mutex<Option<Queues>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    runtime: tokio::runtime::Handle,
    pool: Pool,
    waiters: Arc<Waiters>,
    /// The two crews of writers: claims', then records'.
    crews: [Arc<Crew>; 2],
    /// `[store] chains`.
    chains: u32,
}

/// The two crews' queues (see the module docs).
struct Queues {
    claims: mpsc::UnboundedSender<Job>,
    records: mpsc::UnboundedSender<Job>,
}

/// Which kind of write a crew of writers takes.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// Claims only: never appends, never takes the write lock.
    Claims,
    /// Every other write; prunes expired keys and tasks.
    Records,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Claims => "claims",
            Self::Records => "records",
        }
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    /// Lets the writers commit the jobs already queued, then stops the store's thread.
    fn drop(&mut self) {
        jobs::stop_writer(&self.jobs, &self.thread);
    }
}

/// What the writers and the listener share with the store.
struct Shared {
    config: tokio_postgres::Config,
    /// `[store] chains`.
    chains: u32,
    tls: Tls,
    waiters: Arc<Waiters>,
    location: String,
}

impl PostgresStore {
    /// Connects to the database `config.url` names, applies the migrations it has not seen,
    /// and starts the writers and the listener. Fails (naming the database, never its
    /// password) when it cannot connect, authenticate or migrate.
    pub fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        let location = config.location();
        let fail = |detail: String| StoreError::Open {
            path: location.clone(),
            detail,
        };
        let url = config
            .url
            .as_deref()
            .ok_or_else(|| fail("`[store] url` is not set".to_owned()))?;
        let mut pg: tokio_postgres::Config = url
            .parse()
            .map_err(|e| fail(format!("not a PostgreSQL URL: {e}")))?;
        if config.password_env.is_some() || config.password_file.is_some() {
            let password = gatehouse_core::secret::read(
                config.password_env.as_deref(),
                config.password_file.as_deref(),
            )
            .map_err(|e| fail(format!("the database password: {e}")))?;
            pg.password(password.expose());
        }
        pg.connect_timeout(CONNECT_TIMEOUT);
        pg.application_name("gatehouse");
        let tls = MakeRustlsConnect::new(tls_config(config.ca_file.as_deref()).map_err(fail)?);
        let pool = Pool::builder(Manager::from_config(
            pg.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        ))
        .max_size(config.pool_size.max(1))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .create_timeout(Some(CONNECT_TIMEOUT))
        .wait_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(|e| fail(format!("cannot build the connection pool: {e}")))?;
        let waiters = Arc::new(Waiters::default());
        let shared = Arc::new(Shared {
            config: pg,
            chains: config.chains,
            tls,
            waiters: Arc::clone(&waiters),
            location: location.clone(),
        });
        let (claims, claim_queue) = mpsc::unbounded_channel();
        let (records, record_queue) = mpsc::unbounded_channel();
        let crews = [
            Arc::new(Crew::new(Role::Claims, claim_queue)),
            Arc::new(Crew::new(Role::Records, record_queue)),
        ];
        let crewed = crews.clone();
        let writers = config.writers.max(1);
        let (ready, started) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gatehouse-postgres".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(format!("cannot start its runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let mut connected = Vec::new();
                    for crew in crewed {
                        for index in 0..writers {
                            match Writer::connect(&shared, crew.role, index).await {
                                Ok(writer) => {
                                    crew.up.fetch_add(1, Ordering::AcqRel);
                                    connected.push((Arc::clone(&crew), index, writer));
                                }
                                Err(e) => {
                                    let _ = ready.send(Err(e));
                                    return;
                                }
                            }
                        }
                    }
                    let _ = ready.send(Ok(tokio::runtime::Handle::current()));
                    tokio::spawn(listen(Arc::clone(&shared)));
                    let mut loops = tokio::task::JoinSet::new();
                    for (crew, index, writer) in connected {
                        loops.spawn(write_loop(Some(writer), crew, index, Arc::clone(&shared)));
                    }
                    while loops.join_next().await.is_some() {}
                });
            })
            .map_err(|e| fail(format!("cannot start its thread: {e}")))?;
        let runtime = match started.recv() {
            Ok(Ok(runtime)) => runtime,
            Ok(Err(detail)) => {
                let _ = thread.join();
                return Err(fail(detail));
            }
            Err(_) => {
                let _ = thread.join();
                return Err(fail("its thread stopped while starting".to_owned()));
            }
        };
        Ok(Self {
            location,
            jobs: Mutex::new(Some(Queues { claims, records })),
            thread: Mutex::new(Some(thread)),
            runtime,
            pool,
            waiters,
            crews,
            chains: config.chains,
        })
    }

    /// Sends a job to its writer (a claim to the claims', anything else to the records'); waits
    /// for its commit when `wait`.
    fn write(&self, op: Op, wait: bool) -> StoreFuture<'_, Done> {
        jobs::submit(op, wait, |job| {
            self.jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .is_some_and(|queues| match job.op {
                    Op::Claim(_) => queues.claims.send(job).is_ok(),
                    _ => queues.records.send(job).is_ok(),
                })
        })
    }

    /// Runs `read` with a pooled connection on the store's runtime.
    /// The session under `key` as stored, with its last `limit` actions.
    fn read_session(&self, key: SessionKey, limit: usize) -> StoreFuture<'_, Option<Session>> {
        self.read(move |client| async move {
            let Some(mut session) = sql::session(&**client, &key).await? else {
                return Ok(None);
            };
            session.actions = sql::session_actions(&**client, &session, limit).await?;
            Ok(Some(session))
        })
    }

    fn read<T, F, R>(&self, read: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> R + Send + 'static,
        R: Future<Output = Result<T, PgError>> + Send,
    {
        let pool = self.pool.clone();
        let location = self.location.clone();
        let task = self.runtime.spawn(async move {
            let client = pool
                .get()
                .await
                .map_err(|e| StoreError::Unavailable(format!("{location}: {e}")))?;
            read(client)
                .await
                .map_err(|e| e.into_store_error(&location))
        });
        Box::pin(async move {
            task.await.unwrap_or_else(|e| {
                Err(StoreError::Unavailable(format!("a store read failed: {e}")))
            })
        })
    }
}

/// rustls with the ring provider, trusting the system's roots and the operator's `ca_file`.
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    if let Some(path) = ca_file {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let certs: Vec<_> = CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect)
            .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("ca_file {} holds no certificate", path.display()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A database error, for operators: SQLSTATE and message when the server sent them.
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match std::error::Error::source(error) {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}

fn unavailable(location: &str, error: &tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(format!("{location}: {}", describe(error)))
}

/// The store's settings for a connection named `gatehouse <name>` (its `application_name`,
/// which `pg_stat_activity` shows).
fn named(shared: &Shared, name: &str) -> tokio_postgres::Config {
    let mut config = shared.config.clone();
    config.application_name(format!("gatehouse {name}"));
    config
}

/// Connects as `gatehouse <name>` ([`named`]); the connection is driven on the current
/// runtime.
async fn connect(shared: &Shared, name: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = named(shared, name).connect(shared.tls.clone()).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(error = %describe(&error), "a PostgreSQL connection ended");
        }
    });
    Ok(client)
}

/// Applies the migrations the database has not seen, under the migration lock.
async fn migrate(client: &mut Client) -> Result<(), String> {
    let sql = |e: tokio_postgres::Error| describe(&e);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
        .await
        .map_err(sql)?;
    let result = async {
        client
            .batch_execute("CREATE TABLE IF NOT EXISTS gatehouse_schema (version BIGINT NOT NULL)")
            .await
            .map_err(sql)?;
        let version: i64 = client
            .query_opt("SELECT version FROM gatehouse_schema", &[])
            .await
            .map_err(sql)?
            .map_or(0, |row| row.get(0));
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(format!(
                "its schema version is {version}, newer than this gatehouse knows ({known}); run a newer gatehouse"
            ));
        }
        let txn = client.transaction().await.map_err(sql)?;
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            txn.batch_execute(migration)
                .await
                .map_err(|e| format!("migration {} failed: {}", index + 1, describe(&e)))?;
        }
        txn.execute("DELETE FROM gatehouse_schema", &[])
            .await
            .map_err(sql)?;
        txn.execute("INSERT INTO gatehouse_schema (version) VALUES ($1)", &[&known])
            .await
            .map_err(sql)?;
        txn.commit().await.map_err(sql)
    }
    .await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
        .await;
    result.and(unlocked.map(drop).map_err(sql))
}

/// The listener: `LISTEN gatehouse_keys` on a connection of its own, waking the waiters of
/// every key another gateway (or this one) completed. Reconnects when the connection drops,
/// waking every waiter so none sleeps through a notification it missed.
async fn listen(shared: Arc<Shared>) {
    loop {
        match named(&shared, "listener").connect(shared.tls.clone()).await {
            Ok((client, mut connection)) => {
                let waiters = Arc::clone(&shared.waiters);
                let messages = tokio::spawn(async move {
                    while let Some(message) =
                        std::future::poll_fn(|cx| connection.poll_message(cx)).await
                    {
                        match message {
                            Ok(AsyncMessage::Notification(note)) => {
                                waiters.wake_digest(note.payload());
                            }
                            Ok(_) => {}
                            Err(error) => {
                                tracing::debug!(error = %describe(&error), "the listening connection failed");
                                break;
                            }
                        }
                    }
                });
                match client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    Ok(()) => {
                        // Calls that began waiting before this LISTEN may have missed a wake-up.
                        shared.waiters.wake_all();
                        let _ = messages.await;
                    }
                    Err(error) => {
                        tracing::debug!(error = %describe(&error), "LISTEN failed");
                        messages.abort();
                    }
                }
                shared.waiters.wake_all();
            }
            Err(error) => {
                tracing::debug!(error = %describe(&error), "cannot connect the listener");
            }
        }
        tokio::time::sleep(RECONNECT_EVERY).await;
    }
}

/// A budget is one row, taken from in one atomic statement (outside the write lock: the row's
/// own lock serializes gateways taking from the same budget). `taken` counts every attempt in
/// the window, so the answer says whether this one was within `calls`.
impl RateBudget for PostgresStore {
    fn take(&self, key: String, calls: u32, window_ms: u64, now_ms: u64) -> RateFuture<'_> {
        let take = self.read(move |client| async move {
            let statement = client
                .prepare_cached(
                    "INSERT INTO rate_windows AS w (key, window_start, taken) VALUES ($1, $2, 1) \
                     ON CONFLICT (key) DO UPDATE SET \
                       window_start = CASE WHEN w.window_start + $3 <= $2 THEN $2 ELSE w.window_start END, \
                       taken = CASE WHEN w.window_start + $3 <= $2 THEN 1 ELSE w.taken + 1 END \
                     RETURNING window_start, taken",
                )
                .await?;
            let row = client
                .query_one(&statement, &[&key, &to_db(now_ms), &to_db(window_ms)])
                .await?;
            let (start, taken): (i64, i64) = (row.get(0), row.get(1));
            Ok((from_db(start), u64::try_from(taken).unwrap_or(u64::MAX)))
        });
        Box::pin(async move {
            let (start, taken) = take.await.map_err(|e| e.to_string())?;
            Ok((taken > u64::from(calls))
                .then(|| start.saturating_add(window_ms).saturating_sub(now_ms)))
        })
    }
}

impl Store for PostgresStore {
    jobs::queued_writes!();

    fn watch(&self, key: &IdempotencyKey) -> Arc<tokio::sync::Notify> {
        self.waiters.watch(key)
    }

    fn available(&self) -> bool {
        self.crews
            .iter()
            .all(|crew| crew.up.load(Ordering::Acquire) > 0)
    }

    fn approval(&self, lookup: ApprovalLookup) -> StoreFuture<'_, Option<Approval>> {
        self.read(move |client| async move {
            match &lookup {
                ApprovalLookup::Id(id) => sql::approval_where(&**client, "id = $1", &[id]).await,
                ApprovalLookup::Key(key) => {
                    sql::approval_where(
                        &**client,
                        "tenant = $1 AND tool = $2 AND idempotency_key = $3",
                        &[&key.tenant, &key.tool, &key.key],
                    )
                    .await
                }
            }
        })
    }

    fn approvals(&self, filter: ApprovalFilter) -> StoreFuture<'_, Vec<Approval>> {
        self.read(move |client| async move { sql::approvals(&**client, &filter).await })
    }

    fn task(&self, id: String) -> StoreFuture<'_, Option<Task>> {
        self.read(move |client| async move { sql::task_by_id(&**client, &id).await })
    }

    fn tasks(&self, filter: TaskFilter) -> StoreFuture<'_, Vec<Task>> {
        self.read(move |client| async move { sql::tasks(&**client, &filter).await })
    }

    fn session(
        &self,
        key: SessionKey,
        now_ms: u64,
        limits: SessionLimits,
    ) -> StoreFuture<'_, Session> {
        let found = key.clone();
        let find = move || self.read_session(found.clone(), limits.actions);
        let write = |op| self.write(op, true);
        Box::pin(jobs::live_session(find, write, key, now_ms, limits))
    }

    fn sessions(&self, filter: SessionFilter) -> StoreFuture<'_, Vec<Session>> {
        self.read(move |client| async move { sql::sessions(&**client, &filter).await })
    }

    fn session_entries(
        &self,
        key: SessionKey,
        limit: usize,
    ) -> StoreFuture<'_, Option<(Session, Vec<AuditEntry>)>> {
        self.read(move |client| async move {
            let Some(session) = sql::session(&**client, &key).await? else {
                return Ok(None);
            };
            let entries = sql::session_entries(&**client, &session, limit).await?;
            Ok(Some((session, entries)))
        })
    }

    fn keys(&self, indeterminate_only: bool, now_ms: u64) -> StoreFuture<'_, Vec<KeyRecord>> {
        self.read(move |client| async move {
            let records = sql::keys(&**client, now_ms).await?;
            Ok(records
                .into_iter()
                .filter(|r| !indeterminate_only || r.state == KeyState::Indeterminate)
                .collect())
        })
    }

    fn audit(&self, query: AuditQuery) -> StoreFuture<'_, Vec<AuditEntry>> {
        self.read(move |client| async move { sql::audit(&**client, &query).await })
    }

    fn checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        self.read(move |client| async move { sql::checkpoints(&**client).await })
    }

    fn plugin_changes(&self) -> StoreFuture<'_, Vec<PluginChange>> {
        jobs::plugin_changes(
            self.read(move |client| async move { sql::plugin_changes(&**client).await }),
        )
    }

    fn served_versions(&self) -> StoreFuture<'_, Vec<ServedVersion>> {
        self.read(move |client| async move { sql::served_versions(&**client).await })
    }

    fn connection(&self, key: ConnectionKey) -> StoreFuture<'_, Option<Connection>> {
        self.read(move |client| async move { sql::connection(&**client, &key).await })
    }

    fn connections(&self, filter: ConnectionFilter) -> StoreFuture<'_, Vec<Connection>> {
        self.read(move |client| async move { sql::connections(&**client, &filter).await })
    }

    fn authorization(
        &self,
        state_hash: String,
    ) -> StoreFuture<'_, Option<crate::connections::Authorization>> {
        self.read(move |client| async move { sql::authorization(&**client, &state_hash).await })
    }

    fn chains(&self) -> u32 {
        self.chains
    }

    fn verify_audit(&self) -> StoreFuture<'_, VerifyReport> {
        self.read(sql::verify_audit)
    }
}
