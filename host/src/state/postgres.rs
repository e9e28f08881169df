//! The shared store: one PostgreSQL database behind any number of gateway processes
//! (`[store] url`), with the semantics of the SQLite store.
//!
//! 1. **open** (once per host): a thread of the store's own runs a small async runtime that
//!    owns every connection, so the store works the same whatever runtime (or none) its callers
//!    use. The versioned migrations (the portable files SQLite also applies) are applied under a
//!    session-level advisory lock, so gateways starting together apply each one exactly once;
//!    the schema version is kept in `gatehouse_schema`.
//! 2. **write** (group commit): every write is a job for a crew of writers, each writer with
//!    its own connection and prepared statements (`[store] writers` per crew, 1 by default).
//!    One crew takes the claims, the other everything else (records, approvals, resolutions,
//!    plugin changes, pruning, and [`Store::flush`]'s barrier, which thus orders the records
//!    only; claims are always waited on). A call's claim therefore never queues behind a batch
//!    of records, nor a record behind claims. A crew's writers take turns at its queue: one
//!    takes the jobs waiting (and while nobody waits on the batch, those that come within
//!    [`jobs::LINGER`]) while the others commit theirs, so a job waits for a batch in flight
//!    only when every writer of its crew has one (what bounds a gateway when the database is
//!    far: a round trip per batch). Each batch is committed in two steps:
//!    - the **fast transaction** holds the batch's claims and records, its statements sent in
//!      one pipeline ([`fast`]): one round trip to the database per batch, however many jobs
//!      it holds. A claim of a key nobody holds is one insert that the key's row makes atomic,
//!      so gateways claiming different keys never wait on each other.
//!    - the **careful transaction** ([`careful`]) runs, one job after another, what needs a
//!      read first: a claim of a key that already has a row (its row locked), approvals, an
//!      operator's resolution, plugin changes, pruning.
//!
//!    The audit chains are the one thing ordered across processes. A transaction appends its
//!    entries last, with one call of `gatehouse_append` (`migrations/postgres/`): for each
//!    chain its entries go to (`[store] chains`, keyed by tenant: [`audit::chain_of`]), in
//!    ascending order, under that chain's transaction-level advisory lock ([`WRITE_LOCK`] plus
//!    the chain), the database reads the chain's head, numbers and hashes the entries after it;
//!    then it inserts them all; the commit, next in the pipeline, releases the locks. The hash
//!    is `state::audit::entry_hash`'s, which `audit verify` checks: the gateway sends each
//!    entry's columns framed for it, and the database hashes the head's hash and the entry's
//!    position in its chain in front of them. So each chain keeps one verifiable order, gateways
//!    appending to different chains never wait on each other, a lock is never held across a
//!    round trip to a gateway, and a transaction holding one waits for no row, so the row
//!    locks and the chains' locks cannot deadlock.
//!    A job that fails in SQL aborts its transaction; the careful transaction is then rolled
//!    back and every job run again alone, so one bad job fails only itself. A job is answered
//!    only after its commit: what was acknowledged is in the database.
//! 3. **wake**: a record that completes or releases a key, and an operator's resolution, send
//!    `NOTIFY gatehouse_keys` with the key's digest; every gateway `LISTEN`s on its own
//!    connection and wakes the calls waiting on that key, wherever its holder ran. When the
//!    listening connection drops, every waiter is woken to look again.
//! 4. **read**: a pool of connections (`[store] pool_size`).
//! 5. **down**: a writer that loses its connection while others of its crew hold theirs
//!    connects again, at once when it finds the loss with a batch in hand, and meanwhile leaves
//!    the crew's jobs to them. When the database cannot be reached (every writer of a crew has
//!    lost its connection), [`Store::available`] turns false, every write fails at once with
//!    `StoreError::Unavailable`, and each writer tries to reconnect every half second; the
//!    store turns available by itself once a writer of each crew is back.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, GenericClient, Row, Statement, Transaction};
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_rustls::rustls;

use super::audit::{self, AuditEntry, AuditQuery, VerifyReport};
use super::jobs::{
    self, APPROVAL_COLUMNS, AUDIT_COLUMNS, CHECKPOINT_COLUMNS, CHECKPOINTS_QUERY, Done, Job,
    Judgement, KeyRow, Op, PLUGIN_CHANGES_QUERY, from_db, to_db,
};
use super::rate::{RateBudget, RateFuture};
use super::{
    Approval, ApprovalFilter, ApprovalLookup, ApprovalStatus, AuditEvent, CallRecord, Checkpoint,
    Claim, ClaimRequest, Decision, IdempotencyKey, KeyRecord, KeyState, PluginChange, Resolution,
    Store, StoreConfig, StoreError, StoreFuture, Waiters,
};

/// The schema migrations, in order: the portable files SQLite applies too (SQLite's own,
/// in `migrations/sqlite/`, are not PostgreSQL's), then PostgreSQL's own, in
/// `migrations/postgres/`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_rate_windows.sql"),
    include_str!("migrations/0005_audit_checkpoints.sql"),
    include_str!("migrations/0006_plugin_changes.sql"),
    include_str!("migrations/postgres/0007_audit_append.sql"),
    include_str!("migrations/postgres/0008_audit_chains.sql"),
];
/// The advisory lock a transaction takes (last) to append to audit chain 0, and that plugin
/// changes are numbered under: one appender at a time, across processes. Chain `c`'s is
/// `WRITE_LOCK + c`.
pub const WRITE_LOCK: i64 = 0x6761_7465_686f_7573; // "gatehous"
/// The advisory lock migrations run under.
const MIGRATE_LOCK: i64 = 0x6761_7465_6d69_6772; // "gatemigr"
/// The notification channel of keys that were completed, released or resolved.
const CHANNEL: &str = "gatehouse_keys";
/// Most jobs in one transaction.
const MAX_BATCH: usize = 512;
/// How often a lost database is tried again.
const RECONNECT_EVERY: Duration = Duration::from_millis(500);
/// How long connecting may take before the database counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often idempotency records past their dedupe window are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// Rows read per query when verifying the whole audit chain.
const VERIFY_PAGE: i64 = 10_000;

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
    /// Every other write; prunes expired keys.
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
            let password = crate::secret::read(
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
    fn read<T, F, R>(&self, read: F) -> StoreFuture<'_, T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> R + Send + 'static,
        R: Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let pool = self.pool.clone();
        let location = self.location.clone();
        let task = self.runtime.spawn(async move {
            let client = pool
                .get()
                .await
                .map_err(|e| StoreError::Unavailable(format!("{location}: {e}")))?;
            read(client).await.map_err(|e| unavailable(&location, &e))
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

/// The writer's connection and its prepared statements.
struct Writer {
    client: Client,
    sql: Statements,
}

/// The statements every call runs, prepared once per connection.
struct Statements {
    /// `[store] chains`: how many chains the entries go to ([`audit::chain_of`]).
    chains: u32,
    lock: Statement,
    append: Statement,
    new_key: Statement,
    find_key: Statement,
    take_key: Statement,
    stuck_key: Statement,
    complete_key: Statement,
    release_key: Statement,
    execute_approval: Statement,
    notify: Statement,
}

impl Writer {
    /// Connects writer `index` of the crew that takes `role`'s writes.
    async fn connect(shared: &Shared, role: Role, index: usize) -> Result<Self, String> {
        let mut client = connect(shared, &format!("{} writer {index}", role.name()))
            .await
            .map_err(|e| format!("cannot connect: {}", describe(&e)))?;
        migrate(&mut client).await?;
        let prepare = async |sql: &str| {
            client
                .prepare(sql)
                .await
                .map_err(|e| format!("cannot prepare `{sql}`: {}", describe(&e)))
        };
        let sql = Statements {
            chains: shared.chains,
            lock: prepare("SELECT pg_advisory_xact_lock($1)").await?,
            // Every entry of a batch in one statement: a column of values per array, numbered
            // and hashed by the database under each chain's lock.
            append: prepare(
                "SELECT gatehouse_append($1, $2::int[], $3::bigint[], $4::text[], $5::text[], \
                   $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bytea[])",
            )
            .await?,
            // A claim of a key nobody holds, in one statement: the row's own lock (a concurrent
            // insert of the same key waits for the other's commit) makes it atomic.
            new_key: prepare(
                "INSERT INTO idempotency (tenant, tool, key, request_hash, state, tool_call_id, lease_until, result, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, NULL, $7, $8) \
                 ON CONFLICT (tenant, tool, key) DO NOTHING",
            )
            .await?,
            find_key: prepare(
                "SELECT request_hash, state, tool_call_id, lease_until, result, expires_at \
                 FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3 FOR UPDATE",
            )
            .await?,
            take_key: prepare(
                "INSERT INTO idempotency (tenant, tool, key, request_hash, state, tool_call_id, lease_until, result, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, NULL, $7, $8) \
                 ON CONFLICT (tenant, tool, key) DO UPDATE SET request_hash = excluded.request_hash, \
                   state = 'in_progress', tool_call_id = excluded.tool_call_id, lease_until = excluded.lease_until, \
                   result = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at",
            )
            .await?,
            stuck_key: prepare(
                "UPDATE idempotency SET state = 'indeterminate' WHERE tenant = $1 AND tool = $2 AND key = $3",
            )
            .await?,
            complete_key: prepare(
                "UPDATE idempotency SET state = 'complete', result = $1 \
                 WHERE tenant = $2 AND tool = $3 AND key = $4 AND tool_call_id = $5",
            )
            .await?,
            release_key: prepare(
                "DELETE FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3 AND tool_call_id = $4",
            )
            .await?,
            execute_approval: prepare(
                "UPDATE approvals SET status = 'executed', executed_by_call = $1, decided_at = COALESCE(decided_at, $3) \
                 WHERE id = $2 AND status = 'approved'",
            )
            .await?,
            notify: prepare("SELECT pg_notify($1, $2)").await?,
        };
        Ok(Self { client, sql })
    }
}

/// `first`, then the jobs queued behind it, up to [`MAX_BATCH`]; while nobody waits on the
/// batch, also those that come within [`jobs::LINGER`].
async fn gather(first: Job, queue: &mut mpsc::UnboundedReceiver<Job>) -> Vec<Job> {
    let until = tokio::time::Instant::now() + jobs::LINGER;
    let mut waited = first.reply.is_some();
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        let next = match queue.try_recv() {
            Err(mpsc::error::TryRecvError::Empty) if !waited => {
                tokio::time::timeout_at(until, queue.recv())
                    .await
                    .ok()
                    .flatten()
            }
            queued => queued.ok(),
        };
        let Some(job) = next else { break };
        waited |= job.reply.is_some();
        batch.push(job);
    }
    batch
}

/// The writers of one [`Role`]: the queue they take their batches from, in turn, and what
/// they tell each other.
struct Crew {
    role: Role,
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>,
    /// Held (shared) by each writer from taking a batch until it is answered; a barrier
    /// ([`Op::Flush`]) takes it alone, so it is answered after every batch taken before it.
    in_flight: tokio::sync::RwLock<()>,
    /// How many of them have a connection.
    up: AtomicUsize,
}

impl Crew {
    fn new(role: Role, queue: mpsc::UnboundedReceiver<Job>) -> Self {
        Self {
            role,
            queue: tokio::sync::Mutex::new(queue),
            in_flight: tokio::sync::RwLock::new(()),
            up: AtomicUsize::new(0),
        }
    }
}

/// A writer: group commit (see the module docs). Its crew's writers take turns at the queue:
/// one gathers a batch while the others commit theirs. Reconnects by itself when the database
/// comes back; while it is down, it leaves the jobs to a writer of its crew that is up, and
/// when none is, fails them at once.
async fn write_loop(
    mut writer: Option<Writer>,
    crew: Arc<Crew>,
    index: usize,
    shared: Arc<Shared>,
) {
    let role = crew.role;
    let mut pruned: Option<std::time::Instant> = None;
    let mut retry = tokio::time::interval(RECONNECT_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Notices a lost database without waiting for a write, and finds it again.
    let check = async |writer: &mut Option<Writer>| match writer {
        Some(live) if live.client.is_closed() => {
            *writer = None;
            lost(&shared, &crew, index);
        }
        Some(_) => {}
        None => *writer = reconnect(&shared, &crew, index).await,
    };
    loop {
        if writer.is_none() && crew.up.load(Ordering::Acquire) > 0 {
            retry.tick().await;
            // The store is closing: the others finish the jobs queued.
            if crew.queue.try_lock().is_ok_and(|queue| queue.is_closed()) {
                return;
            }
            check(&mut writer).await;
            continue;
        }
        let mut queue = tokio::select! {
            queue = crew.queue.lock() => queue,
            _ = retry.tick() => {
                check(&mut writer).await;
                continue;
            }
        };
        let first = tokio::select! {
            job = queue.recv() => match job {
                Some(job) => job,
                None => return,
            },
            _ = retry.tick() => {
                drop(queue);
                check(&mut writer).await;
                continue;
            }
        };
        let mut batch = gather(first, &mut queue).await;
        // Taken while the queue is held, so a barrier taken after this batch waits for it.
        let in_flight = crew.in_flight.read().await;
        drop(queue);
        if writer.as_ref().is_some_and(|w| w.client.is_closed()) {
            writer = None;
            lost(&shared, &crew, index);
            // The others' connections hold: the database is there, and this batch need not
            // fail for one lost connection.
            if crew.up.load(Ordering::Acquire) > 0 {
                writer = reconnect(&shared, &crew, index).await;
            }
        }
        let Some(live) = writer.as_mut() else {
            let error = StoreError::Unavailable(format!(
                "{}: the database is unreachable; retrying every {} ms",
                shared.location,
                RECONNECT_EVERY.as_millis()
            ));
            answer(batch, (0..).map(|_| Err(error.clone())), &shared);
            continue;
        };
        if matches!(role, Role::Records)
            && index == 0
            && pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY)
        {
            pruned = Some(std::time::Instant::now());
            batch.push(Job {
                op: Op::Prune(super::now_ms()),
                reply: None,
            });
        }
        let results = run_batch(live, &batch, &shared.location).await;
        check(&mut writer).await;
        drop(in_flight);
        if batch.iter().any(|job| matches!(job.op, Op::Flush)) {
            drop(crew.in_flight.write().await);
        }
        answer(batch, results, &shared);
    }
}

/// Counts the writer down: the store is down while every writer of a crew is.
fn lost(shared: &Shared, crew: &Crew, index: usize) {
    let left = crew.up.fetch_sub(1, Ordering::AcqRel) - 1;
    if left == 0 {
        tracing::warn!(store = %shared.location, writer = crew.role.name(), index, "lost the connection to the database; calls that must be recorded fail until it is back");
    } else {
        tracing::warn!(store = %shared.location, writer = crew.role.name(), index, up = left, "a writer lost its connection to the database; the others of its crew take its jobs");
    }
}

/// Tries to connect the writer again; counts it up when it does.
async fn reconnect(shared: &Shared, crew: &Crew, index: usize) -> Option<Writer> {
    match Writer::connect(shared, crew.role, index).await {
        Ok(writer) => {
            tracing::info!(store = %shared.location, writer = crew.role.name(), index, "the database is back");
            crew.up.fetch_add(1, Ordering::AcqRel);
            // Keys may have been completed while nobody listened.
            shared.waiters.wake_all();
            Some(writer)
        }
        Err(error) => {
            tracing::debug!(%error, "the database is still unreachable");
            None
        }
    }
}

/// Sends every job its answer, waking the waiters of keys whose jobs committed.
fn answer(
    batch: Vec<Job>,
    results: impl IntoIterator<Item = Result<Done, StoreError>>,
    shared: &Shared,
) {
    for (job, result) in batch.into_iter().zip(results) {
        match &result {
            Ok(Done::Count(n)) if matches!(job.op, Op::Prune(_)) && *n > 0 => {
                tracing::info!(pruned = n, "forgot idempotency records past their window");
            }
            Ok(_) => {
                if let Some(key) = job.op.wakes() {
                    shared.waiters.wake(key);
                }
            }
            Err(error) => jobs::log_failed_write(error),
        }
        if let Some(reply) = job.reply {
            let _ = reply.send(result);
        }
    }
}

/// Runs the batch: its claims and records in the fast transaction, then what that left (every
/// other job, and each claim of a key that already had a row) in the careful one. Every job
/// gets an answer.
async fn run_batch(
    writer: &mut Writer,
    batch: &[Job],
    location: &str,
) -> Vec<Result<Done, StoreError>> {
    let mut answers: Vec<Option<Result<Done, StoreError>>> = batch.iter().map(|_| None).collect();
    if batch
        .iter()
        .any(|job| matches!(job.op, Op::Claim(_) | Op::Record(_)))
    {
        match fast(writer, batch).await {
            Ok(done) => {
                for (answer, done) in answers.iter_mut().zip(done) {
                    *answer = done.map(Ok);
                }
            }
            Err(error) if writer.client.is_closed() => {
                let error = unavailable(location, &error);
                return batch.iter().map(|_| Err(error.clone())).collect();
            }
            Err(error) => {
                tracing::debug!(error = %describe(&error), "a batch's fast transaction failed; its jobs run in the careful one");
            }
        }
    }
    let left = in_lock_order(batch, (0..batch.len()).filter(|&i| answers[i].is_none()));
    if !left.is_empty() {
        let done = careful(writer, batch, &left, location).await;
        for (&i, done) in left.iter().zip(done) {
            answers[i] = Some(done);
        }
    }
    answers
        .into_iter()
        .map(|answer| answer.expect("the careful transaction answers every job left"))
        .collect()
}

/// A statement sent in a pipeline, and what it answered.
type Pending<'a> = Pin<Box<dyn Future<Output = Result<Sent, tokio_postgres::Error>> + Send + 'a>>;

enum Sent {
    Done,
    Count(u64),
}

/// Awaits `pending` together, having sent each (its first poll) in order: the statements go
/// to the server one behind the other without waiting for an answer, and run there in that
/// order, so a pipeline costs one round trip however long it is.
async fn in_order(mut pending: Vec<Pending<'_>>) -> Result<Vec<Sent>, tokio_postgres::Error> {
    let mut answers: Vec<Option<Result<Sent, tokio_postgres::Error>>> =
        pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (statement, answer) in pending.iter_mut().zip(answers.iter_mut()) {
            if answer.is_none() {
                match statement.as_mut().poll(cx) {
                    Poll::Ready(done) => *answer = Some(done),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    answers
        .into_iter()
        .map(|answer| answer.expect("every statement answered"))
        .collect()
}

/// `jobs` in the order their transaction locks their key rows: by key. So no two
/// transactions, of this gateway's writers or of another gateway's, lock two key rows in
/// opposite orders and deadlock (which PostgreSQL breaks only after `deadlock_timeout`, by
/// failing one of them).
fn in_lock_order(batch: &[Job], jobs: impl Iterator<Item = usize>) -> Vec<usize> {
    let row = |index: usize| {
        let op = &batch[index].op;
        match op {
            Op::Claim(request) => Some(&request.key),
            _ => op.wakes(),
        }
        .map(|key| (&key.tenant, &key.tool, &key.key))
    };
    let mut jobs: Vec<usize> = jobs.collect();
    jobs.sort_by_key(|&index| row(index));
    jobs
}

/// The fast transaction: every claim and record of the batch in one pipeline, so a batch
/// costs one round trip to the database whatever it holds: `BEGIN`; each claim as one insert of
/// a key nobody holds (row-level: gateways claiming different keys never wait on each other);
/// each record's key and approval updates and its notification; then every record's audit
/// entry, appended by the database (`gatehouse_append`, under the write lock); `COMMIT`.
///
/// The write lock is thus held only while the database appends and commits, never across a
/// round trip. A claim whose key already has a row inserts nothing; its answer is `None`, and
/// the careful transaction judges it (after this one, as if it had come later: its batch's
/// jobs are concurrent). A statement that fails aborts the transaction, whose `COMMIT` then
/// rolls it back.
async fn fast(writer: &Writer, batch: &[Job]) -> Result<Vec<Option<Done>>, tokio_postgres::Error> {
    let Writer { client, sql } = writer;
    let now = super::now_ms();
    let entries = Entries::of(
        batch.iter().filter_map(|job| match &job.op {
            Op::Record(record) => Some(&record.audit),
            _ => None,
        }),
        sql.chains,
    );
    let params = entries.params();
    let mut pending: Vec<Pending<'_>> = Vec::new();
    pending.push(Box::pin(async {
        client.batch_execute("BEGIN").await.map(|()| Sent::Done)
    }));
    let mut claims = Vec::new();
    for index in in_lock_order(batch, 0..batch.len()) {
        let job = &batch[index];
        match &job.op {
            Op::Claim(request) => {
                claims.push((index, pending.len()));
                pending.push(Box::pin(async move {
                    let row = NewClaim::of(request, now);
                    client
                        .execute(&sql.new_key, &row.params())
                        .await
                        .map(Sent::Count)
                }));
            }
            Op::Record(record) => pending.extend(record_writes(client, sql, record, &job.op)),
            _ => {}
        }
    }
    if !entries.is_empty() {
        pending.push(Box::pin(async {
            client
                .query_one(&sql.append, &params)
                .await
                .map(|_| Sent::Done)
        }));
    }
    pending.push(Box::pin(async {
        client.batch_execute("COMMIT").await.map(|()| Sent::Done)
    }));
    let sent = match in_order(pending).await {
        Ok(sent) => sent,
        Err(error) => {
            if !client.is_closed() {
                // Its `COMMIT` rolled it back already; if that is what failed, make sure.
                let _ = client.batch_execute("ROLLBACK").await;
            }
            return Err(error);
        }
    };
    let mut done: Vec<Option<Done>> = batch
        .iter()
        .map(|job| matches!(job.op, Op::Record(_)).then_some(Done::Unit))
        .collect();
    for (index, at) in claims {
        if let Sent::Count(1) = sent[at] {
            done[index] = Some(Done::Claim(Claim::Run));
        }
    }
    Ok(done)
}

/// A record's writes besides its audit entry: its key completed or released, its approval
/// executed, and the notification of the key (delivered at commit).
fn record_writes<'a, C: GenericClient + Sync>(
    client: &'a C,
    sql: &'a Statements,
    record: &'a CallRecord,
    op: &'a Op,
) -> Vec<Pending<'a>> {
    let call = record.audit.tool_call_id.as_deref();
    let mut pending: Vec<Pending<'a>> = Vec::new();
    if let Some((key, result)) = &record.completes {
        pending.push(Box::pin(async move {
            let updated = client
                .execute(
                    &sql.complete_key,
                    &[result, &key.tenant, &key.tool, &key.key, &call],
                )
                .await?;
            if updated == 0 {
                tracing::warn!(key = %key.key, tool = %key.tool, "the key's record was resolved by an operator while the call ran; its result is not stored");
            }
            Ok(Sent::Done)
        }));
    }
    if let Some(key) = &record.releases {
        pending.push(Box::pin(async move {
            client
                .execute(&sql.release_key, &[&key.tenant, &key.tool, &key.key, &call])
                .await
                .map(Sent::Count)
        }));
    }
    if let Some(id) = &record.executes {
        pending.push(Box::pin(async move {
            client
                .execute(
                    &sql.execute_approval,
                    &[&call, id, &to_db(record.audit.at_ms)],
                )
                .await
                .map(Sent::Count)
        }));
    }
    if let Some(key) = op.wakes() {
        pending.push(Box::pin(async move {
            client
                .query_one(&sql.notify, &[&CHANNEL, &Waiters::digest(key)])
                .await
                .map(|_| Sent::Done)
        }));
    }
    pending
}

/// The careful transaction: the jobs the fast one left, one after another, each reading what
/// it decides on (a claim locks its key's row). Their audit entries and plugin changes are
/// written last, under the write lock ([`Last`]). If a job fails in SQL, the transaction is
/// rolled back and every job runs in a transaction of its own, so one bad job fails only itself.
async fn careful(
    writer: &mut Writer,
    batch: &[Job],
    jobs: &[usize],
    location: &str,
) -> Vec<Result<Done, StoreError>> {
    let Writer { client, sql } = writer;
    let together = async {
        let txn = client.transaction().await?;
        let mut last = Last::default();
        let mut answers = Vec::with_capacity(jobs.len());
        for &index in jobs {
            answers.push(apply(&txn, sql, &mut last, &batch[index].op).await?);
        }
        last.write(&txn, sql).await?;
        txn.commit().await?;
        Ok::<_, tokio_postgres::Error>(answers)
    };
    match together.await {
        Ok(answers) => return answers,
        Err(error) if client.is_closed() || jobs.len() == 1 => {
            let error = unavailable(location, &error);
            return jobs.iter().map(|_| Err(error.clone())).collect();
        }
        Err(error) => {
            tracing::debug!(error = %describe(&error), "a batch failed; running its jobs one by one");
        }
    }
    let mut answers = Vec::with_capacity(jobs.len());
    for &index in jobs {
        let alone = async {
            let txn = client.transaction().await?;
            let mut last = Last::default();
            let answer = apply(&txn, sql, &mut last, &batch[index].op).await?;
            last.write(&txn, sql).await?;
            txn.commit().await?;
            Ok::<_, tokio_postgres::Error>(answer)
        };
        answers.push(
            alone
                .await
                .unwrap_or_else(|e| Err(unavailable(location, &e))),
        );
    }
    answers
}

/// A claim as the row `new_key` and `take_key` write.
struct NewClaim<'r> {
    request: &'r ClaimRequest,
    times: [i64; 3],
}

impl<'r> NewClaim<'r> {
    fn of(request: &'r ClaimRequest, now_ms: u64) -> Self {
        Self {
            request,
            times: [request.lease_until_ms, now_ms, request.expires_at_ms].map(to_db),
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 8] {
        let (key, [lease_until, now, expires_at]) = (&self.request.key, &self.times);
        [
            &key.tenant,
            &key.tool,
            &key.key,
            &self.request.request_hash,
            &self.request.tool_call_id,
            lease_until,
            now,
            expires_at,
        ]
    }
}

/// What a careful transaction writes last, under the chains' locks: its audit entries (numbered
/// and hashed by the database after their chains' heads, `gatehouse_append`), and its plugin
/// changes (numbered after the last, under chain 0's lock, which is taken first so the locks
/// go in ascending order). Taken last, the locks are held by a transaction that waits for no
/// row.
#[derive(Default)]
struct Last<'a> {
    events: Vec<Cow<'a, AuditEvent>>,
    changes: Vec<&'a PluginChange>,
}

impl Last<'_> {
    async fn write(
        &self,
        txn: &Transaction<'_>,
        sql: &Statements,
    ) -> Result<(), tokio_postgres::Error> {
        if !self.changes.is_empty() {
            txn.execute(&sql.lock, &[&WRITE_LOCK]).await?;
        }
        let entries = Entries::of(self.events.iter().map(|event| &**event), sql.chains);
        if !entries.is_empty() {
            txn.query_one(&sql.append, &entries.params()).await?;
        }
        for change in &self.changes {
            txn.execute(
                "INSERT INTO plugin_changes (seq, at, plugin, change) \
                 VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM plugin_changes), $1, $2, $3)",
                &[
                    &to_db(super::now_ms()),
                    &change.plugin(),
                    &serde_json::to_string(change).expect("a plugin change serializes"),
                ],
            )
            .await?;
        }
        Ok(())
    }
}

/// Audit events as the columns `gatehouse_append` takes, one array each: each event's chain,
/// its columns, and its columns framed for the hash ([`audit::framed_columns`]).
struct Entries<'e> {
    chain: Vec<i32>,
    at: Vec<i64>,
    kind: Vec<&'e str>,
    ids: [Vec<Option<&'e str>>; 5],
    record: Vec<&'e str>,
    framed: Vec<Vec<u8>>,
}

impl<'e> Entries<'e> {
    fn of(events: impl Iterator<Item = &'e AuditEvent>, chains: u32) -> Self {
        let mut entries = Self {
            chain: Vec::new(),
            at: Vec::new(),
            kind: Vec::new(),
            ids: Default::default(),
            record: Vec::new(),
            framed: Vec::new(),
        };
        for event in events {
            let chain = audit::chain_of(event.tenant.as_deref(), chains);
            entries
                .chain
                .push(i32::try_from(chain).expect("at most MAX_CHAINS chains"));
            entries.at.push(to_db(event.at_ms));
            entries.kind.push(&event.kind);
            for (column, id) in entries.ids.iter_mut().zip(event.ids()) {
                column.push(id);
            }
            entries.record.push(&event.record);
            entries.framed.push(audit::framed_columns(event));
        }
        entries
    }

    fn is_empty(&self) -> bool {
        self.record.is_empty()
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 11] {
        let [tool_call_id, tenant, principal, tool, outcome] = &self.ids;
        [
            &WRITE_LOCK,
            &self.chain,
            &self.at,
            &self.kind,
            tool_call_id,
            tenant,
            principal,
            tool,
            outcome,
            &self.record,
            &self.framed,
        ]
    }
}

/// One job inside the batch's transaction. The outer error is SQL's (the transaction is lost);
/// the inner one is the job's own refusal (nothing was written).
async fn apply<'a>(
    txn: &Transaction<'_>,
    sql: &Statements,
    last: &mut Last<'a>,
    op: &'a Op,
) -> Result<Result<Done, StoreError>, tokio_postgres::Error> {
    let done = match op {
        Op::Claim(request) => Done::Claim(claim(txn, sql, request).await?),
        Op::Record(record) => {
            last.events.push(Cow::Borrowed(&record.audit));
            in_order(record_writes(txn, sql, record, op)).await?;
            Done::Unit
        }
        Op::Propose(proposal) => Done::Approval(Box::new(propose(txn, proposal).await?)),
        Op::Decide(decision) => {
            let Some(approval) = approval_where(txn, "id = $1", &[&decision.id]).await? else {
                return Ok(Err(StoreError::NotFound(format!(
                    "approval `{}`",
                    decision.id
                ))));
            };
            let status = match jobs::check_decision(&approval, decision) {
                Ok(status) => status,
                Err(refused) => return Ok(Err(refused)),
            };
            txn.execute(
                "UPDATE approvals SET status = $1, decided_by = $2, decided_reason = $3, decided_at = $4 WHERE id = $5",
                &[
                    &status.as_str(),
                    &decision.by,
                    &decision.reason,
                    &to_db(decision.now_ms),
                    &decision.id,
                ],
            )
            .await?;
            last.events.push(Cow::Owned(jobs::decision_event(
                &approval, decision, status,
            )));
            match approval_where(txn, "id = $1", &[&decision.id]).await? {
                Some(approval) => Done::Approval(Box::new(approval)),
                None => {
                    return Ok(Err(StoreError::NotFound(format!(
                        "approval `{}`",
                        decision.id
                    ))));
                }
            }
        }
        Op::Resolve {
            key,
            resolution,
            by,
            now_ms,
        } => {
            let row = txn
                .query_opt(
                    "SELECT state, lease_until, tool_call_id FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3",
                    &[&key.tenant, &key.tool, &key.key],
                )
                .await?;
            let Some(row) = row else {
                return Ok(Err(jobs::unknown_key(key)));
            };
            let (state, lease_until, holder): (String, i64, String) =
                (row.get(0), row.get(1), row.get(2));
            if let Err(refused) = jobs::check_resolvable(key, &state, from_db(lease_until), *now_ms)
            {
                return Ok(Err(refused));
            }
            let change = match resolution {
                Resolution::Release => {
                    "DELETE FROM idempotency WHERE tenant = $1 AND tool = $2 AND key = $3"
                }
                Resolution::Done => {
                    "UPDATE idempotency SET state = 'complete', result = NULL WHERE tenant = $1 AND tool = $2 AND key = $3"
                }
            };
            txn.execute(change, &[&key.tenant, &key.tool, &key.key])
                .await?;
            last.events.push(Cow::Owned(jobs::resolution_event(
                key,
                *resolution,
                by,
                *now_ms,
                holder,
            )));
            txn.query_one(&sql.notify, &[&CHANNEL, &Waiters::digest(key)])
                .await?;
            Done::Unit
        }
        Op::Prune(now_ms) => Done::Count(
            txn.execute(
                "DELETE FROM idempotency WHERE state = 'complete' AND expires_at <= $1",
                &[&to_db(*now_ms)],
            )
            .await?,
        ),
        Op::Flush => Done::Unit,
        Op::AddCheckpoint(checkpoint) => {
            txn.execute(
                &format!(
                    "INSERT INTO audit_checkpoints ({CHECKPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
                ),
                &[
                    &to_db(checkpoint.seq),
                    &checkpoint.hash,
                    &to_db(checkpoint.at_ms),
                    &checkpoint.key_id,
                    &checkpoint.signature,
                ],
            )
            .await?;
            Done::Unit
        }
        Op::AddPluginChange(change) => {
            last.changes.push(change);
            Done::Unit
        }
    };
    Ok(Ok(done))
}

async fn claim(
    txn: &Transaction<'_>,
    sql: &Statements,
    request: &ClaimRequest,
) -> Result<Claim, tokio_postgres::Error> {
    let key = &request.key;
    let now = super::now_ms();
    let existing = txn
        .query_opt(&sql.find_key, &[&key.tenant, &key.tool, &key.key])
        .await?
        .map(|row| KeyRow {
            request_hash: row.get(0),
            state: row.get(1),
            tool_call_id: row.get(2),
            lease_until_ms: from_db(row.get(3)),
            result: row.get(4),
            expires_at_ms: from_db(row.get(5)),
        });
    match jobs::judge(existing, request, now) {
        Judgement::Answer(claim) => Ok(claim),
        Judgement::Indeterminate(claim) => {
            txn.execute(&sql.stuck_key, &[&key.tenant, &key.tool, &key.key])
                .await?;
            Ok(claim)
        }
        Judgement::Take => {
            txn.execute(&sql.take_key, &NewClaim::of(request, now).params())
                .await?;
            Ok(Claim::Run)
        }
    }
}

async fn propose(
    txn: &Transaction<'_>,
    proposal: &Approval,
) -> Result<Approval, tokio_postgres::Error> {
    if let Some(key) = &proposal.idempotency_key
        && let Some(existing) = approval_where(
            txn,
            "tenant = $1 AND tool = $2 AND idempotency_key = $3",
            &[&proposal.tenant, &proposal.tool, key],
        )
        .await?
    {
        return Ok(existing);
    }
    txn.execute(
        &format!(
            "INSERT INTO approvals ({APPROVAL_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, NULL, NULL, NULL, NULL)"
        ),
        &[
            &proposal.id,
            &proposal.tenant,
            &proposal.tool,
            &proposal.idempotency_key,
            &proposal.request_hash,
            &proposal.call.to_string(),
            &jobs::strings_json(&proposal.principals),
            &proposal.mode,
            &jobs::strings_json(&proposal.reasons),
            &to_db(proposal.created_at_ms),
            &to_db(proposal.expires_at_ms),
        ],
    )
    .await?;
    let mut stored = proposal.clone();
    stored.status = ApprovalStatus::Pending;
    stored.decided_by = None;
    stored.decided_reason = None;
    stored.decided_at_ms = None;
    stored.executed_by_call = None;
    Ok(stored)
}

/// The one approval matching `condition`, read with whatever client or transaction.
async fn approval_where(
    client: &impl GenericClient,
    condition: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Approval>, tokio_postgres::Error> {
    client
        .query_opt(
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {condition}"),
            params,
        )
        .await?
        .map(|row| approval_row(&row))
        .transpose()
}

fn approval_row(row: &Row) -> Result<Approval, tokio_postgres::Error> {
    let status: String = row.try_get(9)?;
    let call: String = row.try_get(5)?;
    Ok(Approval {
        id: row.try_get(0)?,
        tenant: row.try_get(1)?,
        tool: row.try_get(2)?,
        idempotency_key: row.try_get(3)?,
        request_hash: row.try_get(4)?,
        // Written by this code from a `Value`: it parses; a damaged row reads as null.
        call: serde_json::from_str(&call).unwrap_or_default(),
        principals: jobs::strings_from_json(&row.try_get::<_, String>(6)?),
        mode: row.try_get(7)?,
        reasons: jobs::strings_from_json(&row.try_get::<_, String>(8)?),
        status: ApprovalStatus::parse(&status).unwrap_or(ApprovalStatus::Rejected),
        created_at_ms: from_db(row.try_get(10)?),
        expires_at_ms: from_db(row.try_get(11)?),
        decided_by: row.try_get(12)?,
        decided_reason: row.try_get(13)?,
        decided_at_ms: row.try_get::<_, Option<i64>>(14)?.map(from_db),
        executed_by_call: row.try_get(15)?,
    })
}

/// The columns an entry is read with: [`AUDIT_COLUMNS`], then its chain and link.
fn audit_columns() -> String {
    format!("{AUDIT_COLUMNS}, chain, link")
}

fn audit_row(row: &Row) -> Result<AuditEntry, tokio_postgres::Error> {
    Ok(AuditEntry {
        seq: from_db(row.try_get(0)?),
        chain: u32::try_from(row.try_get::<_, i32>(11)?).unwrap_or_default(),
        link: from_db(row.try_get(12)?),
        event: AuditEvent {
            at_ms: from_db(row.try_get(1)?),
            kind: row.try_get(2)?,
            tool_call_id: row.try_get(3)?,
            tenant: row.try_get(4)?,
            principal: row.try_get(5)?,
            tool: row.try_get(6)?,
            outcome: row.try_get(7)?,
            record: row.try_get(8)?,
        },
        prev_hash: row.try_get(9)?,
        hash: row.try_get(10)?,
    })
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
                ApprovalLookup::Id(id) => approval_where(&**client, "id = $1", &[id]).await,
                ApprovalLookup::Key(key) => {
                    approval_where(
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
        self.read(move |client| async move {
            let limit = if filter.limit == 0 { 100 } else { filter.limit };
            let rows = client
                .query(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals \
                         WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR tenant = $2) \
                         ORDER BY created_at DESC, id LIMIT $3"
                    ),
                    &[
                        &filter.status.map(ApprovalStatus::as_str),
                        &filter.tenant,
                        &i64::try_from(limit).unwrap_or(i64::MAX),
                    ],
                )
                .await?;
            rows.iter().map(approval_row).collect()
        })
    }

    fn prior_actions(
        &self,
        tenant: String,
        principal: String,
        limit: usize,
    ) -> StoreFuture<'_, Vec<String>> {
        self.read(move |client| async move {
            let statement = client
                .prepare_cached(
                    "SELECT tool FROM audit WHERE tenant = $1 AND principal = $2 AND kind = 'call' AND tool IS NOT NULL \
                     ORDER BY seq DESC LIMIT $3",
                )
                .await?;
            let rows = client
                .query(
                    &statement,
                    &[&tenant, &principal, &i64::try_from(limit).unwrap_or(i64::MAX)],
                )
                .await?;
            let mut tools: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
            tools.reverse();
            Ok(tools)
        })
    }

    fn keys(&self, indeterminate_only: bool, now_ms: u64) -> StoreFuture<'_, Vec<KeyRecord>> {
        self.read(move |client| async move {
            let rows = client
                .query(
                    "SELECT tenant, tool, key, state, tool_call_id, lease_until, created_at, expires_at \
                     FROM idempotency ORDER BY created_at",
                    &[],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| KeyRecord {
                    key: IdempotencyKey {
                        tenant: row.get(0),
                        tool: row.get(1),
                        key: row.get(2),
                    },
                    state: jobs::key_state(row.get(3), from_db(row.get(5)), now_ms),
                    tool_call_id: row.get(4),
                    created_at_ms: from_db(row.get(6)),
                    expires_at_ms: from_db(row.get(7)),
                })
                .filter(|r| !indeterminate_only || r.state == KeyState::Indeterminate)
                .collect())
        })
    }

    fn audit(&self, query: AuditQuery) -> StoreFuture<'_, Vec<AuditEntry>> {
        self.read(move |client| async move {
            let limit = (query.limit > 0).then(|| i64::try_from(query.limit).unwrap_or(i64::MAX));
            let rows = client
                .query(
                    &format!(
                        "SELECT {} FROM audit \
                         WHERE ($1::text IS NULL OR tool_call_id = $1) AND ($2::text IS NULL OR tenant = $2) \
                           AND ($3::text IS NULL OR outcome = $3) AND ($4::bigint IS NULL OR at >= $4) \
                           AND ($5::bigint IS NULL OR at < $5) AND ($6::bigint IS NULL OR seq > $6) \
                           AND ($7::text IS NULL OR tool = $7) AND ($8::text IS NULL OR principal = $8) \
                           AND ($9::text IS NULL OR kind = $9) \
                           AND ($10::text IS NULL OR strpos(record, '\"replay_of\":' || to_json($10::text)::text) > 0) \
                           AND ($12::int IS NULL OR chain = $12) \
                         ORDER BY seq LIMIT $11",
                        audit_columns()
                    ),
                    &[
                        &query.tool_call_id,
                        &query.tenant,
                        &query.outcome,
                        &query.since_ms.map(to_db),
                        &query.until_ms.map(to_db),
                        &query.after_seq.map(to_db),
                        &query.tool,
                        &query.principal,
                        &query.kind,
                        &query.replay_of,
                        &limit,
                        &query.chain.map(|chain| i32::try_from(chain).unwrap_or(i32::MAX)),
                    ],
                )
                .await?;
            rows.iter().map(audit_row).collect()
        })
    }

    fn checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        self.read(move |client| async move {
            let rows = client.query(CHECKPOINTS_QUERY, &[]).await?;
            Ok(rows
                .iter()
                .map(|row| Checkpoint {
                    seq: from_db(row.get(0)),
                    hash: row.get(1),
                    at_ms: from_db(row.get(2)),
                    key_id: row.get(3),
                    signature: row.get(4),
                })
                .collect())
        })
    }

    fn plugin_changes(&self) -> StoreFuture<'_, Vec<PluginChange>> {
        jobs::plugin_changes(self.read(move |client| async move {
            let rows = client.query(PLUGIN_CHANGES_QUERY, &[]).await?;
            Ok(rows
                .iter()
                .map(|row| row.get::<_, String>(0))
                .collect::<Vec<_>>())
        }))
    }

    fn chains(&self) -> u32 {
        self.chains
    }

    /// Pages through the log in one snapshot (a repeatable-read transaction): entries of
    /// different chains are numbered before they commit, so a page read after another commit
    /// could find a number the previous page skipped.
    fn verify_audit(&self) -> StoreFuture<'_, VerifyReport> {
        self.read(move |mut client| async move {
            let txn = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let statement = txn
                .prepare(&format!(
                    "SELECT {} FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                    audit_columns()
                ))
                .await?;
            let mut chains = audit::Chains::default();
            let mut after = 0_i64;
            loop {
                let rows = txn.query(&statement, &[&after, &VERIFY_PAGE]).await?;
                for row in &rows {
                    let entry = audit_row(row)?;
                    after = to_db(entry.seq);
                    if !chains.check(entry) {
                        return Ok(chains.report());
                    }
                }
                if (rows.len() as i64) < VERIFY_PAGE {
                    return Ok(chains.report());
                }
            }
        })
    }
}
