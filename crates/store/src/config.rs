//! The `[store]` table: where state lives, and the settings of both backends.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointConfig;
use crate::records::{DecidedAs, Decision, now_ms};

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
    /// An approver's decision on approval `id`, now, under this config's self-approval rule. Every
    /// way of deciding (the `gatehouse approvals` commands, `Host::decide` (gatehouse-host), the
    /// admin API) builds its decision here (or in [`consent`](Self::consent) or
    /// [`withdrawal`](Self::withdrawal)) and hands it to [`Store::decide`], which applies the
    /// rules (pending, not expired, approver outside the requesting chain).
    pub fn decision(&self, id: &str, approve: bool, by: &str, reason: &str) -> Decision {
        self.decided_as(DecidedAs::Approver, id, approve, by, reason)
    }

    /// The calling user's consent to approval `id` (or its refusal, `approve` false), now, as
    /// MCP form elicitation asks it: `by` must be in the requesting chain, and the
    /// self-approval rule does not apply ([`DecidedAs::Consent`]).
    pub fn consent(&self, id: &str, approve: bool, by: &str, reason: &str) -> Decision {
        self.decided_as(DecidedAs::Consent, id, approve, by, reason)
    }

    /// The caller's withdrawal of its own proposal `id` (its task was cancelled), now: a
    /// rejection by `by`, who must be in the requesting chain ([`DecidedAs::Caller`]).
    pub fn withdrawal(&self, id: &str, by: &str, reason: &str) -> Decision {
        self.decided_as(DecidedAs::Caller, id, false, by, reason)
    }

    fn decided_as(
        &self,
        decided_as: DecidedAs,
        id: &str,
        approve: bool,
        by: &str,
        reason: &str,
    ) -> Decision {
        Decision {
            id: id.to_owned(),
            approve,
            by: by.to_owned(),
            reason: reason.to_owned(),
            now_ms: now_ms(),
            allow_self_approval: self.allow_self_approval,
            decided_as,
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
