//! Hot swap by a watched directory: every `*.wasm` file in the directory is a signed policy
//! module. A new or changed file is installed through [`Host::install_policy`], so it is
//! verified, loaded and config-checked before it replaces anything; a file that fails any
//! step leaves the serving version in place. Every install is appended to the audit log (kind
//! `plugin`, principal `watch:<dir>`). Removing a file uninstalls nothing (roll back through
//! the library API or the admin API).
//!
//! `gatehouse serve` watches the directory its config names:
//!
//! ```toml
//! [watch]
//! policy_dir = "/etc/gatehouse/policies"
//! interval_ms = 2000
//! ```
//!
//! The directory is polled: changes are detected by content digest, which is immune to
//! coarse file timestamps and needs no platform notification API.
//!
//! With `[oci] watch_seconds`, `serve` also follows the registry tags it loaded from
//! ([`TagWatcher`]): what a tag moves to is installed the same way, principal `watch:<tag>`,
//! if it is a version of the plugin the tag serves (the same kind and id). Every install, by
//! either watcher, is recorded as served ([`Host::record_served`]): the floor a restart holds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use gatehouse_store::ServedAs;

use crate::host::Host;
use crate::plugin::PluginRef;
use crate::plugin::manifest::PluginKind;

/// The `[watch]` table of `gatehouse serve`: a directory of signed policy modules to install
/// as they appear or change. Absent: nothing is watched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    /// The directory. Its `*.wasm` files are installed at start and whenever they change.
    pub policy_dir: PathBuf,
    /// How often to look, in milliseconds. Default: 2000.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
}

fn default_interval_ms() -> u64 {
    2000
}

/// What the watcher did with one new or changed file.
#[derive(Debug)]
pub struct WatchEvent {
    /// The file.
    pub path: PathBuf,
    /// The installed version, or why the file was refused (the serving version is unchanged).
    pub result: Result<PluginRef, String>,
}

/// A running directory watcher. Dropping it stops the watching.
#[derive(Debug)]
pub struct PolicyWatcher {
    task: JoinHandle<()>,
    events: mpsc::UnboundedReceiver<WatchEvent>,
}

impl PolicyWatcher {
    /// The next event; `None` once the watcher has stopped.
    pub async fn next_event(&mut self) -> Option<WatchEvent> {
        self.events.recv().await
    }
}

impl Drop for PolicyWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PolicyWatcher {
    /// Watches `dir` for policy modules to install on `host`, checking every `interval` (must
    /// be called inside a tokio runtime). Files present at start are installed on the first
    /// check.
    pub fn start(host: Arc<Host>, dir: PathBuf, interval: Duration) -> Self {
        let (tx, events) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut seen: HashMap<PathBuf, [u8; 32]> = HashMap::new();
            let mut ticker = tokio::time::interval(interval);
            let by = format!("watch:{}", dir.display());
            loop {
                ticker.tick().await;
                for (path, bytes) in changed_files(&dir, &mut seen) {
                    let result = host.install_policy(&bytes).map_err(|e| e.to_string());
                    match &result {
                        Ok(plugin) => {
                            tracing::info!(path = %path.display(), module = %plugin.id, version = %plugin.version, "policy installed from watched directory");
                            if let Err(e) = host
                                .record_served(PluginKind::Policy, plugin, ServedAs::Install)
                                .await
                            {
                                tracing::error!(path = %path.display(), error = %e, "the policy installed from the watched directory could not be recorded as served: a restart would not hold its version as the floor");
                            }
                            let replaced = host
                                .policies()
                                .into_iter()
                                .find(|p| p.plugin.id == plugin.id)
                                .and_then(|p| p.previous.last().cloned());
                            let change = serde_json::json!({
                                "action": "install", "kind": "policy", "plugin": plugin,
                                "replaced": replaced, "file": path.display().to_string(),
                            });
                            if let Err(e) = host.audit_plugin_change(&by, &change).await {
                                tracing::error!(path = %path.display(), error = %e, "the policy installed from the watched directory could not be recorded in the audit log");
                            }
                        }
                        Err(e) => {
                            tracing::warn!(path = %path.display(), error = %e, "policy file refused; the serving version stays");
                        }
                    }
                    if tx.send(WatchEvent { path, result }).is_err() {
                        return;
                    }
                }
            }
        });
        Self { task, events }
    }
}

/// `*.wasm` files whose content changed since the last check.
fn changed_files(dir: &Path, seen: &mut HashMap<PathBuf, [u8; 32]>) -> Vec<(PathBuf, Vec<u8>)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot read the policy directory");
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "wasm"))
        .collect();
    paths.sort();
    let mut changed = Vec::new();
    for path in paths {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if seen.insert(path.clone(), digest) != Some(digest) {
            changed.push((path, bytes));
        }
    }
    changed
}

/// Follows registry tags: every interval, each tag is resolved again, and when it names
/// another digest, that component is installed through [`Host::install_from`] (verified,
/// loaded and config-checked first; never a downgrade) and the install audited, principal
/// `watch:<tag>`, citing the pinned reference, and recorded as served
/// ([`Host::record_served`]). A tag that now names another plugin than the one it serves
/// (another id, or an adapter where it served a policy, or the reverse) is refused with a
/// warning naming both: a tag follows new versions of one plugin, never a substitute. A
/// refused digest is tried once and the serving version stays; a registry that cannot be
/// reached changes nothing. Dropping it stops it.
#[cfg(feature = "oci")]
#[derive(Debug)]
pub struct TagWatcher {
    task: JoinHandle<()>,
}

/// A registry tag a plugin was loaded from, for [`TagWatcher`] to follow: the plugin it serves
/// (what the tag moves to must be the same kind and id) and the digest serving now.
#[cfg(feature = "oci")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedTag {
    /// The tag.
    pub tag: crate::oci::OciRef,
    /// The pinned reference serving now (`oci://...@sha256:`).
    pub pinned: String,
    /// Adapter or policy.
    pub kind: PluginKind,
    /// The plugin id.
    pub id: String,
}

/// What a tag moved to, once looked at.
#[cfg(feature = "oci")]
enum Moved {
    /// Installed.
    Installed(PluginKind, PluginRef),
    /// Another plugin than the one the tag serves: its kind and id.
    Substitute(PluginKind, String),
    /// Refused by verification, loading or the no-downgrade rule: why.
    Refused(String),
}

#[cfg(feature = "oci")]
impl Drop for TagWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(feature = "oci")]
impl TagWatcher {
    /// Follows `tags` in `registries`, checking every `interval` (must be called inside a
    /// tokio runtime).
    pub fn start(
        host: Arc<Host>,
        registries: crate::oci::Registries,
        tags: Vec<FollowedTag>,
        interval: Duration,
    ) -> Self {
        use crate::oci::Tags;
        let task = tokio::spawn(async move {
            let mut serving = tags;
            let mut ticker = tokio::time::interval(interval);
            // The first tick is now; `serve` has just resolved every tag.
            ticker.tick().await;
            loop {
                ticker.tick().await;
                for followed in &mut serving {
                    let tag = followed.tag.clone();
                    let pulled = match registries.pull(&tag, Tags::AsConfigured).await {
                        Ok(pulled) => pulled,
                        Err(e) => {
                            tracing::warn!(reference = %tag, error = %e, "cannot resolve the tag; the serving version stays");
                            continue;
                        }
                    };
                    let pinned = pulled.pinned.to_string();
                    if pinned == followed.pinned {
                        continue;
                    }
                    followed.pinned = pinned.clone();
                    let installing = Arc::clone(&host);
                    let (kind, id) = (followed.kind, followed.id.clone());
                    let source = pinned.clone();
                    let moved = tokio::task::spawn_blocking(move || {
                        install_same(&installing, &pulled.bytes, source, kind, &id)
                    })
                    .await
                    .unwrap_or_else(|e| Moved::Refused(e.to_string()));
                    match moved {
                        Moved::Installed(kind, plugin) => {
                            installed(&host, &tag, &pinned, kind, &plugin).await;
                        }
                        Moved::Substitute(offered_kind, offered_id) => {
                            tracing::warn!(
                                reference = %tag, %pinned, serving_kind = %followed.kind,
                                serving_id = %followed.id, offered_kind = %offered_kind,
                                offered_id = %offered_id,
                                "the tag now names {offered_kind} `{offered_id}`, not {} `{}`, the plugin it serves: refused (a tag follows new versions of one plugin, never another); the serving version stays",
                                followed.kind, followed.id
                            );
                        }
                        Moved::Refused(e) => {
                            tracing::warn!(reference = %tag, %pinned, error = %e, "what the tag moved to was refused; the serving version stays");
                        }
                    }
                }
            }
        });
        Self { task }
    }
}

/// Installs `bytes` (pulled from `source`) if it is `kind` `id`, the plugin its tag serves.
#[cfg(feature = "oci")]
fn install_same(host: &Host, bytes: &[u8], source: String, kind: PluginKind, id: &str) -> Moved {
    let verified = match host.verify(bytes) {
        Ok(verified) => verified,
        Err(e) => return Moved::Refused(e.to_string()),
    };
    let offered = (verified.manifest.kind(), verified.manifest.id());
    if offered != (kind, id) {
        return Moved::Substitute(offered.0, offered.1.to_owned());
    }
    match host.install_from(bytes, Some(source)) {
        Ok((kind, plugin)) => Moved::Installed(kind, plugin),
        Err(e) => Moved::Refused(e.to_string()),
    }
}

/// Audits and records what a tag moved to, once installed.
#[cfg(feature = "oci")]
async fn installed(
    host: &Host,
    tag: &crate::oci::OciRef,
    pinned: &str,
    kind: PluginKind,
    plugin: &PluginRef,
) {
    let replaced = (host.policies().into_iter())
        .find(|p| p.plugin.id == plugin.id)
        .and_then(|p| p.previous.last().cloned());
    let change = serde_json::json!({
        "action": "install", "kind": kind.to_string(), "plugin": plugin,
        "replaced": replaced, "reference": tag.to_string(),
    });
    if let Err(e) = host
        .audit_plugin_change(&format!("watch:{tag}"), &change)
        .await
    {
        tracing::error!(reference = %tag, error = %e, "the install could not be recorded in the audit log");
    }
    if let Err(e) = host.record_served(kind, plugin, ServedAs::Install).await {
        tracing::error!(reference = %tag, error = %e, "the install could not be recorded as served: a restart would not hold its version as the floor");
    }
    // Said once it is on record, so whoever waits for the line finds the records written.
    tracing::info!(reference = %tag, %pinned, id = %plugin.id, version = %plugin.version, "installed what the tag moved to");
}
