//! Signed checkpoints of the audit chain: what makes the log hold against someone who can write
//! the database but does not hold the operator's key (docs/architecture.md, section 8).
//!
//! A checkpoint is a chain's head (`seq`, `hash`) and the time, signed with an ed25519 key in
//! the `gatehouse keygen` file format (`[store.checkpoints] key`). A log of several chains
//! (`[store] chains`) gets a checkpoint per chain head: each names its entry by its position in
//! the log, whose hash fixes the chain up to it. Per gateway:
//! 1. **watch** (every second at most): the [`Checkpointer`] checks the whole log at its first
//!    look, then reads each chain's entries appended since the head it checked and checks their
//!    links and hashes ([`super::audit::Chains`], from that head on), so it only ever signs a
//!    head that extends the previous one;
//! 2. **sign** a chain's head when `every_entries` entries were appended to it since its last
//!    checkpoint, or `every_seconds` passed with at least one, and once more at shutdown: the
//!    checkpoint is
//!    stored (table `audit_checkpoints`, `gatehouse audit checkpoints`,
//!    `GET /v1/audit/checkpoints`) and pushed to the sinks: a JSON-lines `file` and an HTTP
//!    `url` (POST, one checkpoint as JSON), both meant to be out of the database writers'
//!    reach;
//! 3. **verify** (`gatehouse audit verify --checkpoints FILE`): each checkpoint's signature is
//!    checked with the public key, then the log must still hold its hash at its position
//!    ([`super::audit::check_anchor`]). An edited entry breaks the chain; a rewritten and
//!    re-chained prefix changes a checkpointed hash; a truncated log ends before a checkpoint.
//!
//! Entries after the last checkpoint are protected by the chain alone; shutdown signs one last
//! checkpoint so a stopped gateway leaves none unsigned. Without `key`, nothing is signed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use gatehouse_core::keys::{KeyError, PublicKey, SigningKey};
use serde::{Deserialize, Serialize};

use super::audit::{AuditQuery, ChainBreak, Chains, VerifyReport};
use super::{Store, StoreError};

/// Domain separation: a checkpoint signature is never a component signature, nor the reverse.
const CONTEXT: &[u8] = b"gatehouse-audit-checkpoint-v1\0";
/// How often the checkpointer looks at the log (at most; `every_seconds` below it wins).
const POLL: Duration = Duration::from_secs(1);
/// Entries read per query while checking the new entries.
const PAGE: usize = 1000;

/// `[store.checkpoints]`: signing the audit chains' heads. Off unless `key` is set.
///
/// ```toml
/// [store.checkpoints]
/// key = "/etc/gatehouse/audit-2026.secret.toml"      # from `gatehouse keygen --key-id audit-2026`
/// public_key = "/etc/gatehouse/audit-2026.pub.toml"  # for `gatehouse audit verify --checkpoints`
/// every_entries = 1000
/// every_seconds = 60
/// file = "/var/log/gatehouse/checkpoints.jsonl" # where the database's writers cannot write
/// # url = "https://audit.internal/checkpoints"  # POSTed, one checkpoint per request
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointConfig {
    /// The secret key file the gateway signs with (`gatehouse keygen`'s `<id>.secret.toml`).
    /// Default: none, and no checkpoints are signed.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// The public key file `gatehouse audit verify --checkpoints` checks signatures with when
    /// `--public-key` is not given. Default: the public half of `key`.
    #[serde(default)]
    pub public_key: Option<PathBuf>,
    /// Sign a chain's head after this many new entries in it. Default: 1000.
    #[serde(default = "defaults::every_entries")]
    pub every_entries: u64,
    /// Sign a chain's head when this many seconds passed since its last checkpoint and an
    /// entry was appended to it. Default: 60.
    #[serde(default = "defaults::every_seconds")]
    pub every_seconds: u64,
    /// Append each checkpoint to this file as a JSON line. Default: none.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// POST each checkpoint as JSON to this `http://` URL; one that fails is sent again with
    /// the next. Default: none.
    #[serde(default)]
    pub url: Option<String>,
}

mod defaults {
    pub fn every_entries() -> u64 {
        1000
    }

    pub fn every_seconds() -> u64 {
        60
    }
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            key: None,
            public_key: None,
            every_entries: defaults::every_entries(),
            every_seconds: defaults::every_seconds(),
            file: None,
            url: None,
        }
    }
}

impl CheckpointConfig {
    /// The key `verify` checks signatures with: `public_key`, else the public half of `key`.
    pub fn verifying_key(&self) -> Result<Option<PublicKey>, KeyError> {
        match (&self.public_key, &self.key) {
            (Some(path), _) => PublicKey::from_file(path).map(Some),
            (None, Some(path)) => Ok(Some(SigningKey::from_file(path)?.public_key())),
            (None, None) => Ok(None),
        }
    }
}

/// One signed head of an audit chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The entry signed: its chain's head then (its position in the log).
    pub seq: u64,
    /// Its hash.
    pub hash: String,
    /// When it was signed, unix ms.
    pub at_ms: u64,
    /// The signing key's id.
    pub key_id: String,
    /// ed25519 over the context tag and `seq`, `hash`, `at_ms` (see [`Checkpoint::message`]),
    /// base64.
    pub signature: String,
}

impl Checkpoint {
    /// Signs the head `seq`/`hash` at `at_ms`.
    pub fn sign(key: &SigningKey, seq: u64, hash: &str, at_ms: u64) -> Self {
        let signature = key.sign_message(CONTEXT, &Self::message(seq, hash, at_ms));
        Self {
            seq,
            hash: hash.to_owned(),
            at_ms,
            key_id: key.key_id.clone(),
            signature: BASE64.encode(signature),
        }
    }

    /// The signed bytes after the context tag: `seq`, `hash` and `at_ms`, one per line.
    fn message(seq: u64, hash: &str, at_ms: u64) -> Vec<u8> {
        format!("{seq}\n{hash}\n{at_ms}").into_bytes()
    }

    /// Whether `key` signed this checkpoint (and it names that key).
    pub fn verifies(&self, key: &PublicKey) -> bool {
        let Ok(signature) = BASE64.decode(&self.signature) else {
            return false;
        };
        let Ok(signature) = <[u8; 64]>::try_from(signature.as_slice()) else {
            return false;
        };
        self.key_id == key.key_id
            && key.verifies_message(
                CONTEXT,
                &Self::message(self.seq, &self.hash, self.at_ms),
                &signature,
            )
    }

    /// Reads a JSON-lines file of checkpoints (what the file sink and `gatehouse audit
    /// checkpoints` write); blank lines are skipped; errors name the line.
    pub fn read_lines(path: &Path) -> Result<Vec<Self>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(index, line)| {
                serde_json::from_str(line).map_err(|e| {
                    format!(
                        "{} line {}: not a checkpoint ({e}); expected one JSON object per line with seq, hash, at_ms, key_id and signature",
                        path.display(),
                        index + 1
                    )
                })
            })
            .collect()
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
        let anchor = super::Anchor {
            seq: Some(checkpoint.seq),
            hash: checkpoint.hash.clone(),
        };
        if let Err(problem) = super::audit::check_anchor(store, report, &anchor).await? {
            return Ok(Err(format!("{name}: {problem}")));
        }
    }
    Ok(Ok(()))
}

impl Checkpoint {
    /// How messages name the checkpoint at `index` (from 0) of a file.
    pub fn name(&self, index: usize) -> String {
        format!(
            "checkpoint {} (entry {}, signed at {} ms by `{}`)",
            index + 1,
            self.seq,
            self.at_ms,
            self.key_id
        )
    }
}

/// The gateway's signer: a task that signs the chains' heads (see the module docs).
pub struct Checkpointer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer").finish_non_exhaustive()
    }
}

impl Checkpointer {
    /// Starts signing checkpoints of `store`'s audit chain as `config` says; `None` when no key
    /// is configured. Fails when the key file cannot be read. Call inside a tokio runtime.
    pub fn start(store: Arc<dyn Store>, config: &CheckpointConfig) -> Result<Option<Self>, String> {
        let Some(path) = &config.key else {
            return Ok(None);
        };
        let key =
            SigningKey::from_file(path).map_err(|e| format!("`[store.checkpoints] key`: {e}"))?;
        if let Some(url) = &config.url
            && !url.starts_with("http://")
        {
            return Err(format!(
                "`[store.checkpoints] url` = {url:?}: expected an http:// URL (put a TLS proxy in front of an https sink)"
            ));
        }
        let signer = Signer {
            store,
            key,
            every_entries: config.every_entries.max(1),
            every: Duration::from_secs(config.every_seconds.max(1)),
            file: config.file.clone(),
            url: config.url.clone(),
            checked: None,
            signed: BTreeMap::new(),
            started: Instant::now(),
            unsent: Vec::new(),
            reported: None,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(signer.run(stopped));
        Ok(Some(Self { stop, task }))
    }

    /// Signs a last checkpoint (after every record already queued is committed) and stops.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(error) = self.task.await {
            tracing::error!(%error, "the audit checkpoint task failed");
        }
    }
}

struct Signer {
    store: Arc<dyn Store>,
    key: SigningKey,
    every_entries: u64,
    every: Duration,
    file: Option<PathBuf>,
    url: Option<String>,
    /// The chains checked so far (the whole log at the first look).
    checked: Option<Chains>,
    /// Each chain's last entry signed (its `link`) and when.
    signed: BTreeMap<u32, (u64, Instant)>,
    /// When the signer started: a chain never signed counts its time from then.
    started: Instant,
    /// Checkpoints the HTTP sink has not taken yet, oldest first.
    unsent: Vec<Checkpoint>,
    /// The last break logged (each is logged once).
    reported: Option<ChainBreak>,
}

impl Signer {
    async fn run(mut self, mut stopped: tokio::sync::oneshot::Receiver<()>) {
        let poll = POLL.min(self.every);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                () = tokio::time::sleep(poll) => {}
            }
            self.tick(false).await;
        }
        // Every record queued before the stop, committed: then the last checkpoint.
        if let Err(error) = self.store.flush().await {
            tracing::warn!(%error, "the state store did not commit its queued records before the last audit checkpoint");
        }
        self.tick(true).await;
    }

    /// Checks the entries appended since the last look; signs each chain's head when due (or
    /// `last`).
    async fn tick(&mut self, last: bool) {
        let report = match self.check().await {
            Ok(report) => report,
            Err(error) => {
                tracing::warn!(%error, "cannot read the audit log for a checkpoint; trying again");
                return;
            }
        };
        if let Some(problem) = &report.first_break {
            if self.reported.as_ref() != Some(problem) {
                tracing::error!(%problem, good_entries = report.entries, "the audit log is broken: no checkpoint is signed until it is mended");
                self.reported = Some(problem.clone());
            }
            return;
        }
        for head in &report.heads {
            let (signed, signed_at) = self
                .signed
                .get(&head.chain)
                .copied()
                .unwrap_or((0, self.started));
            let new = head.entries.saturating_sub(signed);
            let due = new >= self.every_entries
                || (new > 0 && (last || signed_at.elapsed() >= self.every));
            if !due {
                continue;
            }
            let checkpoint = Checkpoint::sign(&self.key, head.seq, &head.hash, super::now_ms());
            if let Err(error) = self.store.add_checkpoint(checkpoint.clone()).await {
                tracing::warn!(%error, seq = checkpoint.seq, "cannot store an audit checkpoint; the sinks still get it");
            }
            self.signed
                .insert(head.chain, (head.entries, Instant::now()));
            tracing::debug!(chain = head.chain, seq = checkpoint.seq, hash = %checkpoint.hash, "audit checkpoint signed");
            self.push(checkpoint).await;
        }
    }

    /// Checks the whole log at the first look, then each chain's entries after its head: by
    /// chain, because entries of different chains may commit out of `seq` order.
    async fn check(&mut self) -> Result<VerifyReport, StoreError> {
        let Some(checked) = &mut self.checked else {
            let report = self.store.verify_audit().await?;
            self.checked = Some(Chains::resume(&report));
            return Ok(report);
        };
        let report = checked.report();
        if report.first_break.is_some() {
            return Ok(report);
        }
        let chains: BTreeSet<u32> = (0..self.store.chains())
            .chain(report.heads.iter().map(|head| head.chain))
            .collect();
        for chain in chains {
            loop {
                let page = self
                    .store
                    .audit(AuditQuery {
                        chain: Some(chain),
                        after_seq: Some(checked.head(chain).map_or(0, |head| head.seq)),
                        limit: PAGE,
                        ..AuditQuery::default()
                    })
                    .await?;
                let full = page.len() == PAGE;
                for entry in page {
                    if !checked.check(entry) {
                        return Ok(checked.report());
                    }
                }
                if !full {
                    break;
                }
            }
        }
        Ok(checked.report())
    }

    /// Sends a checkpoint to the sinks.
    async fn push(&mut self, checkpoint: Checkpoint) {
        let line = serde_json::to_string(&checkpoint).expect("a checkpoint serializes");
        if let Some(path) = &self.file
            && let Err(error) = append_line(path, &line)
        {
            tracing::warn!(file = %path.display(), %error, seq = checkpoint.seq, "cannot write an audit checkpoint to `[store.checkpoints] file`");
        }
        let Some(url) = self.url.clone() else {
            return;
        };
        self.unsent.push(checkpoint);
        while let Some(next) = self.unsent.first() {
            let body = serde_json::to_string(next).expect("a checkpoint serializes");
            match post(&url, body).await {
                Ok(()) => {
                    self.unsent.remove(0);
                }
                Err(error) => {
                    tracing::warn!(%url, %error, unsent = self.unsent.len(), "cannot push an audit checkpoint to `[store.checkpoints] url`; it is sent again with the next one");
                    return;
                }
            }
        }
    }
}

/// Appends one line and syncs it: a checkpoint that was reported written is on the disk.
fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(format!("{line}\n").as_bytes())?;
    file.sync_data()
}

/// POSTs `body` as JSON to an `http://` URL; any 2xx is success.
async fn post(url: &str, body: String) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    let host = uri.host().ok_or("the URL has no host")?.to_owned();
    let port = uri.port_u16().unwrap_or(80);
    let exchange = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let authority = uri
            .authority()
            .map_or_else(|| host.clone(), ToString::to_string);
        let request = http::Request::post(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(http::header::HOST, authority)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("the sink answered {}", response.status()))
        }
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "no answer in 10 s".to_owned())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_verifies_with_its_key_only_and_covers_every_field() {
        let key = SigningKey::generate("audit-1").unwrap();
        let checkpoint = Checkpoint::sign(&key, 7, "sha256:aa", 1000);
        assert!(checkpoint.verifies(&key.public_key()));
        let other = SigningKey::generate("audit-1").unwrap();
        assert!(!checkpoint.verifies(&other.public_key()));
        for tampered in [
            Checkpoint {
                seq: 8,
                ..checkpoint.clone()
            },
            Checkpoint {
                hash: "sha256:ab".to_owned(),
                ..checkpoint.clone()
            },
            Checkpoint {
                at_ms: 1001,
                ..checkpoint.clone()
            },
        ] {
            assert!(!tampered.verifies(&key.public_key()), "{tampered:?}");
        }
    }
}
