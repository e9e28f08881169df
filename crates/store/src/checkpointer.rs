//! The gateway's signer of audit checkpoints (see [`crate::checkpoint`] for what a checkpoint
//! is and the steps): a task that watches the chains' heads, signs them, and pushes each
//! checkpoint to the sinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_core::keys::SigningKey;

use crate::audit::{AuditQuery, ChainBreak, Chains, VerifyReport};
use crate::checkpoint::{Checkpoint, CheckpointConfig};
use crate::records::StoreError;
use crate::store::Store;

/// How often the checkpointer looks at the log (at most; `every_seconds` below it wins).
const POLL: Duration = Duration::from_secs(1);

/// Entries read per query while checking the new entries.
const PAGE: usize = 1000;

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
            let checkpoint =
                Checkpoint::sign(&self.key, head.seq, &head.hash, crate::records::now_ms());
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
