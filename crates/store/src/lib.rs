//! gatehouse-store: what must outlive a call and be shared by every call: idempotency records,
//! pending approvals, rate budgets and the audit log, behind one [`Store`] interface
//! (docs/architecture.md, section 8).
//!
//! The embedded default is one SQLite file ([`sqlite`]); several gateway processes share one
//! PostgreSQL database instead ([`postgres`], `[store] url`, feature `postgres`), with the same
//! semantics behind the same trait; [`open`] picks the backend. The pipeline uses the store at
//! three gates:
//! 1. **approve** (gate 6): a call that needs approval is proposed ([`Store::propose`], find or
//!    create, so a repeat never makes a second approval) and ends `paused`; a repeat finds it
//!    approved ([`Store::approval`]) and goes on;
//! 2. **deduplicate** (gate 7): a call with an idempotency key claims it
//!    ([`Store::claim`]) before anything runs, durably; the claim says whether to run, replay
//!    a stored result, refuse a conflicting request, wait for the call in flight, or report a
//!    record a crash left behind (`indeterminate`, never re-run by itself);
//! 3. **record** (gate 10): every call, refusals included, ends in one [`CallRecord`]: an entry
//!    appended to the hash-chained audit log, the key's result, the approval's execution, all
//!    in one transaction. For a write-class call it is durable before the result is delivered.
//!
//! Writes from concurrent calls share commits (group commit). Nothing here knows the pipeline's
//! types: records arrive as JSON text, so the store has no opinion on envelopes. The crate
//! depends on `gatehouse-core` only (ids, canonical JSON, keys, secrets), never on wasmtime;
//! `gatehouse-host` re-exports it as `gatehouse_host::state`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod audit;
pub mod checkpoint;
mod jobs;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod rate;
mod recent;
mod rows;
pub mod sqlite;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use audit::{Anchor, AnchorBreak, AuditEntry, AuditQuery, ChainBreak, ChainHead, VerifyReport};
pub use checkpoint::{Checkpoint, CheckpointConfig};

/// A store operation in flight.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The `[store]` table: where state lives.
///
/// ```toml
/// [store]
/// path = "/var/lib/gatehouse/gatehouse.db"   # default: the user's data directory
/// approval_ttl_seconds = 86400                # how long an approval stays valid
/// allow_self_approval = false                 # may a principal approve its own call?
/// # max_size_mib = 1024                       # cap the file; default: the disk's size
///
/// # Several gateways, one database (instead of `path`):
/// # url = "postgres://gatehouse@db.internal:5432/gatehouse?sslmode=require"
/// # password_env = "GATEHOUSE_DB_PASSWORD"    # or password_file = "/run/secrets/db"
/// # ca_file = "/etc/gatehouse/db-ca.pem"      # trust roots for TLS, beside the system's
/// # pool_size = 8                             # read connections per gateway
/// # writers = 1                               # write connections per kind of write
/// # chains = 1                                # audit chains, keyed by tenant
/// # read_only_without_store = false           # serve read-only calls while it is down?
///
/// # Signed checkpoints of the audit chain (off without a key): see [`CheckpointConfig`].
/// # [store.checkpoints]
/// # key = "/etc/gatehouse/audit-2026.secret.toml"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The SQLite file. Default: `$XDG_DATA_HOME/gatehouse/gatehouse.db`, else
    /// `~/.local/share/gatehouse/gatehouse.db`. Created (with its directory) if missing.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// How long a proposed approval may wait for a decision, and an approved one for its
    /// caller's retry, in seconds. Default: 86400 (one day).
    #[serde(default = "defaults::approval_ttl_seconds")]
    pub approval_ttl_seconds: u64,
    /// Whether a principal in the requesting chain may approve the call. Default: false (four
    /// eyes).
    #[serde(default)]
    pub allow_self_approval: bool,
    /// Largest size of the store file, in MiB; a write that would pass it fails, and so does
    /// the write-class call that needed it (`STORE_UNAVAILABLE`, nothing runs). Default: no
    /// limit but the disk's.
    #[serde(default)]
    pub max_size_mib: Option<u64>,
    /// A PostgreSQL connection URL (`postgres://user@host:port/db?sslmode=require`): every
    /// gateway given the same URL shares idempotency, approvals and the audit log. When set,
    /// `path` and `max_size_mib` are not used. Needs the `postgres` feature (on in the
    /// `gatehouse` binary). A password in the URL works but is better kept out of the file:
    /// see `password_env` and `password_file`.
    #[serde(default)]
    pub url: Option<String>,
    /// The environment variable that holds the database password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// A file that holds the database password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// PEM trust roots for the database's TLS certificate, used beside the system's roots
    /// (`sslmode=require` in the URL insists on TLS; the default `prefer` uses it when the
    /// server offers it).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Read connections each gateway keeps to the database. Default: 8.
    #[serde(default = "defaults::pool_size")]
    pub pool_size: usize,
    /// Write connections each gateway keeps to the database for each of its two kinds of
    /// write (claims; records and everything else), each committing its own batches. With
    /// one, a write waits for the batch in flight before its own goes; with more, it waits
    /// only when all are busy, which pays when the database is far (4 at a round trip of a
    /// few milliseconds), but adds commits that contend for the audit chain's lock, which
    /// costs when it is near. Default: 1.
    #[serde(default = "defaults::writers")]
    pub writers: usize,
    /// The audit chains the log is partitioned into (PostgreSQL; 1 to 1024). A tenant's
    /// entries go to one chain ([`audit::chain_of`]), entries without a tenant to chain 0,
    /// and each chain is appended under a lock of its own, so gateways writing for tenants of
    /// different chains never wait on each other; `audit verify` checks every chain and
    /// reports each head, and checkpoints sign each head. Set the same number on every
    /// gateway of one database: with two numbers a tenant's entries are split over two chains
    /// (each still verifies), and a gateway's checkpointer signs only the chains it knows of.
    /// Changing it later starts no chain over: each chain goes on from its head. SQLite, with
    /// its one writer, keeps one chain. Default: 1.
    #[serde(default = "defaults::chains")]
    pub chains: u32,
    /// While the store is unreachable, whether read-only calls are served (without audit
    /// entries; each one logged) instead of refused with `STORE_UNAVAILABLE`. Write-class
    /// calls are always refused then. Default: false.
    #[serde(default)]
    pub read_only_without_store: bool,
    /// Where approvers decide, with `{id}` standing for the approval id: a paused result's
    /// remediation names it, so an agent can send its user there. Default: the admin
    /// console's `<[admin] console_url>#/approvals/{id}` when `gatehouse serve` runs the
    /// console, else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_url: Option<String>,
    /// `[store.checkpoints]`: the gateway signs the audit chain's head with an operator key.
    /// Default: off (no key).
    #[serde(default)]
    pub checkpoints: CheckpointConfig,
}

mod defaults {
    pub fn approval_ttl_seconds() -> u64 {
        86_400
    }

    pub fn pool_size() -> usize {
        8
    }

    pub fn writers() -> usize {
        1
    }

    pub fn chains() -> u32 {
        1
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            path: None,
            approval_ttl_seconds: defaults::approval_ttl_seconds(),
            allow_self_approval: false,
            max_size_mib: None,
            url: None,
            password_env: None,
            password_file: None,
            ca_file: None,
            pool_size: defaults::pool_size(),
            writers: defaults::writers(),
            chains: defaults::chains(),
            read_only_without_store: false,
            approval_url: None,
            checkpoints: CheckpointConfig::default(),
        }
    }
}

impl StoreConfig {
    /// An approver's decision on approval `id`, now, under this config's self-approval rule.
    /// Every way of deciding (the `gatehouse approvals` commands, `Host::decide` (gatehouse-host), the
    /// admin API) builds its decision here and hands it to [`Store::decide`], which applies
    /// the rules (pending, not expired, approver outside the requesting chain).
    pub fn decision(&self, id: &str, approve: bool, by: &str, reason: &str) -> Decision {
        Decision {
            id: id.to_owned(),
            approve,
            by: by.to_owned(),
            reason: reason.to_owned(),
            now_ms: now_ms(),
            allow_self_approval: self.allow_self_approval,
        }
    }

    /// The file to use, with the documented default applied.
    pub fn resolved_path(&self) -> PathBuf {
        if let Some(path) = &self.path {
            return path.clone();
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        data.join("gatehouse").join("gatehouse.db")
    }

    /// Where the store is, for messages: the database URL without its password, or the file.
    pub fn location(&self) -> String {
        match &self.url {
            Some(url) => match url::Url::parse(url) {
                Ok(mut parsed) => {
                    if parsed.password().is_some() {
                        let _ = parsed.set_password(Some("***"));
                    }
                    parsed.to_string()
                }
                Err(_) => "the PostgreSQL URL in [store] url".to_owned(),
            },
            None => self.resolved_path().display().to_string(),
        }
    }
}

/// Opens the store `config` names: PostgreSQL when `url` is set, else the SQLite file.
pub fn open(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    let refuse = |detail: String| StoreError::Open {
        path: config.location(),
        detail,
    };
    if config.pool_size == 0 || config.writers == 0 {
        return Err(refuse(
            "`[store] pool_size` and `writers` must be at least 1".to_owned(),
        ));
    }
    if !(1..=audit::MAX_CHAINS).contains(&config.chains) {
        return Err(refuse(format!(
            "`[store] chains` = {}: expected 1 to {}",
            config.chains,
            audit::MAX_CHAINS
        )));
    }
    if config.chains > 1 && config.url.is_none() {
        return Err(refuse(format!(
            "`[store] chains` = {}: only a PostgreSQL store (`[store] url`) partitions its audit log; a SQLite file, with its one writer, keeps one chain",
            config.chains
        )));
    }
    match &config.url {
        #[cfg(feature = "postgres")]
        Some(_) => Ok(Arc::new(postgres::PostgresStore::open(config)?)),
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(StoreError::Open {
            path: config.location(),
            detail: "this build of gatehouse has no PostgreSQL support (cargo feature `postgres`)"
                .to_owned(),
        }),
        None => Ok(Arc::new(sqlite::SqliteStore::open(config)?)),
    }
}

/// Why the store could not do what was asked. Every variant names the file or the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be opened (corrupt, unwritable, a newer schema).
    #[error("cannot open the state store {path}: {detail}")]
    Open {
        /// The file.
        path: String,
        /// What went wrong and the fix.
        detail: String,
    },
    /// A read or write failed (disk full, I/O error, the database went away).
    #[error("the state store failed: {0}")]
    Unavailable(String),
    /// No such record.
    #[error("{0} not found")]
    NotFound(String),
    /// The operation is not allowed in the record's current state.
    #[error("{0}")]
    Refused(String),
}

/// What identifies an idempotent call: the same key means the same effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IdempotencyKey {
    /// Tenant the call runs for.
    pub tenant: String,
    /// The tool, after meta-tool resolution.
    pub tool: String,
    /// The caller's key.
    pub key: String,
}

/// Gate 7's question: may this call run under its key?
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The key.
    pub key: IdempotencyKey,
    /// Hash of the canonical request ([`request_hash`]).
    pub request_hash: String,
    /// The claiming call.
    pub tool_call_id: String,
    /// Until when the claim holds if the call never finishes (a crash); after it the record is
    /// `indeterminate`. Unix ms.
    pub lease_until_ms: u64,
    /// Until when the key is remembered (the capability's dedupe window). Unix ms.
    pub expires_at_ms: u64,
}

/// Gate 7's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or its record expired): this call runs, and must record its result.
    Run,
    /// A call with this key and request completed: here is the result it delivered.
    Replay {
        /// The call that ran.
        tool_call_id: String,
        /// The result envelope it delivered, as JSON; `None` when an operator resolved the key
        /// as done (the effect happened, no result was recorded).
        result: Option<String>,
    },
    /// The key was used for a different request.
    Conflict {
        /// The call that holds the key.
        tool_call_id: String,
    },
    /// A call with this key and request is running now.
    InFlight {
        /// The call that holds the key.
        tool_call_id: String,
    },
    /// A call with this key started and never recorded an outcome (the process died): whether
    /// its effect happened is unknown. An operator resolves it; it is never re-run by itself.
    Indeterminate {
        /// The call that held the key.
        tool_call_id: String,
    },
}

/// The state of an idempotency record, as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// A call holds the key and is running (or died; see the lease).
    InProgress,
    /// The call completed; its result replays.
    Complete,
    /// The call died before recording an outcome; an operator must resolve it.
    Indeterminate,
}

/// An idempotency record, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyRecord {
    /// The key.
    pub key: IdempotencyKey,
    /// Its state (`in_progress` past its lease is reported as `indeterminate`).
    pub state: KeyState,
    /// The call that holds or held it.
    pub tool_call_id: String,
    /// When it was claimed, unix ms.
    pub created_at_ms: u64,
    /// When it expires, unix ms.
    pub expires_at_ms: u64,
}

/// How an operator resolves an indeterminate key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The effect did not happen: forget the key, so the next call with it runs.
    Release,
    /// The effect happened: later calls with the key get a result saying so, and nothing runs.
    Done,
}

/// The status of an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for an approver.
    Pending,
    /// Approved: the caller's next call with the same request runs, once.
    Approved,
    /// Rejected: the call will not run.
    Rejected,
    /// Approved and run.
    Executed,
}

impl ApprovalStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Executed => "executed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            "executed" => Some(Self::Executed),
            _ => None,
        }
    }

    /// A status filter as operators write it (`gatehouse approvals list --status`, the admin
    /// API's `?status=`): one of the statuses, or `all` (no filter).
    pub fn parse_filter(text: &str) -> Result<Option<Self>, String> {
        match text {
            "all" => Ok(None),
            other => Self::parse(other).map(Some).ok_or_else(|| {
                format!("status `{other}`: expected pending, approved, rejected, executed or all")
            }),
        }
    }
}

/// A proposed call waiting for (or past) a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// `apr_<hex>`.
    pub id: String,
    /// Tenant of the call.
    pub tenant: String,
    /// The tool.
    pub tool: String,
    /// The call's idempotency key, if it had one.
    pub idempotency_key: Option<String>,
    /// Hash of the canonical request: a retry must be the same request.
    pub request_hash: String,
    /// The proposed call (its `ToolCallEnvelope`, JSON), with its principal chain.
    pub call: Value,
    /// Ids of the principals in the requesting chain.
    pub principals: Vec<String>,
    /// The effective approval mode the call will run at.
    pub mode: String,
    /// Why it needs approval (policy reasons or the capability's approval gate).
    pub reasons: Vec<String>,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// When it was proposed, unix ms.
    pub created_at_ms: u64,
    /// When it stops being valid (undecided, or approved but not run), unix ms.
    pub expires_at_ms: u64,
    /// Who decided.
    pub decided_by: Option<String>,
    /// Why.
    pub decided_reason: Option<String>,
    /// When, unix ms.
    pub decided_at_ms: Option<u64>,
    /// The call that ran it.
    pub executed_by_call: Option<String>,
}

impl Approval {
    /// Whether it is past its expiry at `now_ms` without having run or been rejected.
    pub fn expired(&self, now_ms: u64) -> bool {
        matches!(
            self.status,
            ApprovalStatus::Pending | ApprovalStatus::Approved
        ) && now_ms >= self.expires_at_ms
    }

    /// One line for people: id, state (`expired` once past its expiry), who decided, the
    /// tool, tenant, requesting chain, age and reasons.
    pub fn summary(&self, now_ms: u64) -> String {
        let age = now_ms.saturating_sub(self.created_at_ms) / 1000;
        let state = if self.expired(now_ms) {
            "expired"
        } else {
            self.status.as_str()
        };
        let decided = self
            .decided_by
            .as_deref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        format!(
            "{}  {state}{decided}  {}  tenant {}  asked by {}  {age}s ago  ({})",
            self.id,
            self.tool,
            self.tenant,
            self.principals.join(" > "),
            self.reasons.join("; ")
        )
    }
}

/// How an approval is found for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalLookup {
    /// By id (a call without idempotency key resumes with the approval id).
    Id(String),
    /// By the call's key.
    Key(IdempotencyKey),
}

/// An approver's decision.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The approval.
    pub id: String,
    /// Approve (true) or reject.
    pub approve: bool,
    /// Who decides (a principal id).
    pub by: String,
    /// Why.
    pub reason: String,
    /// Now, unix ms.
    pub now_ms: u64,
    /// Whether someone in the requesting chain may decide.
    pub allow_self_approval: bool,
}

/// Which approvals to list.
#[derive(Debug, Clone, Default)]
pub struct ApprovalFilter {
    /// Only this status.
    pub status: Option<ApprovalStatus>,
    /// Only this tenant.
    pub tenant: Option<String>,
    /// At most this many, newest first. Default (0): 100.
    pub limit: usize,
}

/// Everything one call leaves behind, written in one transaction (gate 10).
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// The audit entry.
    pub audit: AuditEvent,
    /// The key this call claimed, and the result to replay for it.
    pub completes: Option<(IdempotencyKey, String)>,
    /// The key this call claimed but that nothing ran under (the call could not start): the
    /// key is forgotten, so a retry runs.
    pub releases: Option<IdempotencyKey>,
    /// The approval this call executed.
    pub executes: Option<String>,
    /// Whether the record must be durable before this returns (write-class calls). Otherwise
    /// it is queued and this returns at once.
    pub durable: bool,
}

/// What an audit entry says: everything but its place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEvent {
    /// `call`, `approval` (a decision), `operator` (an operator's resolution of a key) or
    /// `plugin` (a plugin installed, rolled back or reconfigured on a running host).
    pub kind: String,
    /// The call it is about.
    pub tool_call_id: Option<String>,
    /// Tenant.
    pub tenant: Option<String>,
    /// The acting principal (for `prior-actions`): the last of a call's chain, or the approver.
    pub principal: Option<String>,
    /// The tool.
    pub tool: Option<String>,
    /// The outcome code.
    pub outcome: Option<String>,
    /// The record itself: JSON text, hashed as stored.
    pub record: String,
    /// When, unix ms.
    pub at_ms: u64,
}

impl AuditEvent {
    /// The optional columns, in the order the chain's hash takes them: the call, tenant,
    /// principal, tool and outcome.
    pub fn ids(&self) -> [Option<&str>; 5] {
        [
            &self.tool_call_id,
            &self.tenant,
            &self.principal,
            &self.tool,
            &self.outcome,
        ]
        .map(Option::as_deref)
    }
}

/// The state interface every backend implements with the same semantics. All writes are
/// transactions; a write that returns `Ok` is committed. Every store also keeps the rate
/// budgets of gate 4 ([`rate::RateBudget`]).
pub trait Store: rate::RateBudget + Send + Sync + std::fmt::Debug {
    /// Registers interest in `key`: the returned `Notify` is woken when a call holding the key
    /// records (in this process or, for a shared backend, any other) or an operator resolves
    /// it. Call before [`Store::claim`] reads the key, so no wake-up is lost.
    fn watch(&self, key: &IdempotencyKey) -> Arc<tokio::sync::Notify>;

    /// Whether the store answers now (a shared database can be down for a while). A call made
    /// while it is not may still fail: this only lets the pipeline refuse early.
    fn available(&self) -> bool;

    /// The chains this store appends audit entries to: `[store] chains` (see
    /// [`audit::chain_of`]); a log may also hold chains of an earlier setting.
    fn chains(&self) -> u32 {
        1
    }

    /// Gate 7: claims `request.key` for a call, atomically, durably.
    fn claim(&self, request: ClaimRequest) -> StoreFuture<'_, Claim>;

    /// Gate 10: appends the audit entry and applies the rest of `record`, in one transaction.
    fn record(&self, record: CallRecord) -> StoreFuture<'_, ()>;

    /// Gate 6: the approval for `proposal`'s key if there is one, else `proposal` (pending,
    /// undecided), stored.
    fn propose(&self, proposal: Approval) -> StoreFuture<'_, Approval>;

    /// Gate 6: an existing approval.
    fn approval(&self, lookup: ApprovalLookup) -> StoreFuture<'_, Option<Approval>>;

    /// Approves or rejects a pending approval, appending the decision to the audit log.
    fn decide(&self, decision: Decision) -> StoreFuture<'_, Approval>;

    /// Approvals, newest first.
    fn approvals(&self, filter: ApprovalFilter) -> StoreFuture<'_, Vec<Approval>>;

    /// The capability ids of a principal's most recent calls in a tenant, oldest first.
    fn prior_actions(
        &self,
        tenant: String,
        principal: String,
        limit: usize,
    ) -> StoreFuture<'_, Vec<String>>;

    /// Idempotency records; `indeterminate_only` lists only those needing an operator.
    fn keys(&self, indeterminate_only: bool, now_ms: u64) -> StoreFuture<'_, Vec<KeyRecord>>;

    /// An operator's resolution of an indeterminate key, appended to the audit log.
    fn resolve(
        &self,
        key: IdempotencyKey,
        resolution: Resolution,
        by: String,
        now_ms: u64,
    ) -> StoreFuture<'_, ()>;

    /// Forgets idempotency records past their window; returns how many.
    fn prune(&self, now_ms: u64) -> StoreFuture<'_, u64>;

    /// Audit entries matching `query`, in log order.
    fn audit(&self, query: AuditQuery) -> StoreFuture<'_, Vec<AuditEntry>>;

    /// Walks every audit chain, in one view of the log, and reports each head and the first
    /// bad entry, if any.
    fn verify_audit(&self) -> StoreFuture<'_, VerifyReport>;

    /// Returns once every write queued before it is committed (the records of read-only
    /// calls nobody waited for): a barrier, before a last checkpoint.
    fn flush(&self) -> StoreFuture<'_, ()>;

    /// Stores a signed checkpoint of the audit chain.
    fn add_checkpoint(&self, checkpoint: Checkpoint) -> StoreFuture<'_, ()>;

    /// The stored checkpoints, oldest first.
    fn checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>>;

    /// Stores a change the admin API made to the serving plugins, after the ones before it:
    /// start-up applies them again ([`PluginChange`]).
    fn add_plugin_change(&self, change: PluginChange) -> StoreFuture<'_, ()>;

    /// The stored plugin changes, in the order they were made.
    fn plugin_changes(&self) -> StoreFuture<'_, Vec<PluginChange>>;
}

/// A change an operator made to the serving plugins at run time (the admin API), kept so a
/// restarted gateway serves what the running one did: table `plugin_changes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum PluginChange {
    /// A signed adapter or policy module was installed: its bytes, base64 (verified again,
    /// signature and trust, when applied).
    Install {
        /// The plugin id.
        plugin: String,
        /// The signed component, base64.
        component: String,
        /// Where it was fetched from (`oci://...@sha256:`), if from a registry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// When, unix ms.
        at_ms: u64,
    },
    /// A policy module was rolled back.
    Rollback {
        /// The module id.
        plugin: String,
        /// When, unix ms.
        at_ms: u64,
    },
    /// The config of every binding of a policy module was replaced.
    SetConfig {
        /// The module id.
        plugin: String,
        /// The config.
        config: Value,
        /// When, unix ms.
        at_ms: u64,
    },
}

impl PluginChange {
    /// `install`, `rollback` or `set_config`, as the audit log's plugin entries say.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Install { .. } => "install",
            Self::Rollback { .. } => "rollback",
            Self::SetConfig { .. } => "set_config",
        }
    }

    /// The plugin it changed.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Install { plugin, .. }
            | Self::Rollback { plugin, .. }
            | Self::SetConfig { plugin, .. } => plugin,
        }
    }
}

/// Wake-ups for calls waiting on a key another call holds (gate 7), by the key's digest
/// ([`Waiters::digest`]; a shared backend sends it to other processes).
#[derive(Debug, Default)]
pub struct Waiters {
    keys: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
}

impl Waiters {
    /// The key's short, fixed-size name: hex SHA-256 of its three parts.
    pub fn digest(key: &IdempotencyKey) -> String {
        let mut hasher = Sha256::new();
        for part in [&key.tenant, &key.tool, &key.key] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hex::encode(hasher.finalize())
    }

    /// Registers interest in `key`: await the returned `Notify`'s `notified()` (created before
    /// checking the key's state, so no wake-up is lost).
    pub fn watch(&self, key: &IdempotencyKey) -> Arc<tokio::sync::Notify> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(keys.entry(Self::digest(key)).or_default())
    }

    /// Wakes every call waiting on `key`.
    pub fn wake(&self, key: &IdempotencyKey) {
        self.wake_digest(&Self::digest(key));
    }

    /// Wakes every call waiting on the key with this digest.
    pub fn wake_digest(&self, digest: &str) {
        let notify = self
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(digest);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter (they check their keys again): after a lost notification channel.
    pub fn wake_all(&self) {
        let all = std::mem::take(&mut *self.keys.lock().unwrap_or_else(PoisonError::into_inner));
        for notify in all.into_values() {
            notify.notify_waiters();
        }
    }
}

/// The current time, unix ms.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A fresh approval id, `apr_<hex>`.
pub fn approval_id() -> String {
    format!("apr_{}", gatehouse_core::ids::random_hex(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_settings_out_of_range_are_refused_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let file = StoreConfig {
            path: Some(dir.path().join("state.db")),
            ..StoreConfig::default()
        };
        let refused = |config: StoreConfig| match open(&config) {
            Err(StoreError::Open { detail, .. }) => detail,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let detail = refused(StoreConfig {
            chains: 0,
            ..file.clone()
        });
        assert!(
            detail.contains("`[store] chains` = 0: expected 1 to 1024"),
            "{detail}"
        );
        let detail = refused(StoreConfig {
            chains: 4,
            ..file.clone()
        });
        assert!(detail.contains("only a PostgreSQL store"), "{detail}");
        let detail = refused(StoreConfig {
            writers: 0,
            ..file.clone()
        });
        assert!(detail.contains("must be at least 1"), "{detail}");
        assert!(open(&file).is_ok());
    }

    #[test]
    fn the_default_path_is_under_the_data_directory() {
        let config = StoreConfig {
            path: Some(PathBuf::from("/x/y.db")),
            ..StoreConfig::default()
        };
        assert_eq!(config.resolved_path(), PathBuf::from("/x/y.db"));
        assert!(
            StoreConfig::default()
                .resolved_path()
                .ends_with("gatehouse/gatehouse.db")
        );
    }
}
