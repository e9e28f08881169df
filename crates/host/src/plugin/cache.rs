//! The compiled-artifact cache: a second start does not recompile.
//!
//! Precompiled artifacts are native code that wasmtime runs without re-validating, so an entry
//! is only used if this host wrote it. Each entry is the BLAKE3 keyed hash (a MAC) under the
//! host key of `name || 0 || artifact`, followed by the artifact, named by the component
//! digest and the engine's compatibility hash. (Entries of earlier versions, tagged with
//! HMAC-SHA256, have another name and are never read.) The host key (`cache.key`, 32 random
//! bytes, mode 0600) is created on first use. An entry that is corrupted, truncated, copied
//! from another host or written for another engine configuration fails the check and is
//! recompiled and replaced, never executed.
//!
//! The cache directory must be owned by the gateway's user: anyone who can write the key file
//! can forge entries, exactly as anyone who can write the gateway binary can change it.

use std::hash::{Hash as _, Hasher as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::signature::ComponentDigest;

const TAG_LEN: usize = 32;
const KEY_FILE: &str = "cache.key";

/// The `[cache]` table of the operator config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Whether compiled components are cached on disk. Default: true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Where. Default: `$XDG_CACHE_HOME/gatehouse`, else `$HOME/.cache/gatehouse`, else
    /// `.gatehouse/cache` under the working directory.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: None,
        }
    }
}

fn yes() -> bool {
    true
}

impl CacheConfig {
    /// The directory to use, with the documented default applied.
    pub fn resolved_dir(&self) -> PathBuf {
        if let Some(dir) = &self.dir {
            return dir.clone();
        }
        if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            return PathBuf::from(xdg).join("gatehouse");
        }
        if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            return PathBuf::from(home).join(".cache").join("gatehouse");
        }
        PathBuf::from(".gatehouse").join("cache")
    }
}

/// What the cache did for one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a verified entry.
    Hit,
    /// Compiled; the entry was written (or caching is off).
    Miss,
    /// An entry existed but failed its check; compiled and replaced.
    Rejected(String),
}

/// Errors opening the cache.
#[derive(Debug, thiserror::Error)]
#[error("compile cache {path}: {source}")]
pub struct CacheError {
    path: String,
    source: std::io::Error,
}

/// An on-disk cache of compiled components.
#[derive(Debug)]
pub struct CompileCache {
    dir: PathBuf,
    key: [u8; 32],
}

impl CompileCache {
    /// Opens (creating if needed) a cache directory and its host key.
    pub fn open(dir: &Path) -> Result<Self, CacheError> {
        let err = |path: &Path| {
            let path = path.display().to_string();
            move |source| CacheError { path, source }
        };
        std::fs::create_dir_all(dir).map_err(err(dir))?;
        let key_path = dir.join(KEY_FILE);
        let key = match std::fs::read(&key_path) {
            Ok(bytes) if bytes.len() == 32 => bytes.try_into().expect("length checked"),
            Ok(_) | Err(_) => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key).map_err(|e| CacheError {
                    path: key_path.display().to_string(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                write_private(&key_path, &key).map_err(err(&key_path))?;
                key
            }
        };
        Ok(Self {
            dir: dir.to_owned(),
            key,
        })
    }

    /// Returns the compiled component for `bytes` (whose digest is `digest`), from the cache
    /// when a verified entry exists, compiling and storing it otherwise.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &ComponentDigest,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let name = entry_name(engine, digest);
        let path = self.dir.join(&name);
        let outcome = match map(&path) {
            Err(_) => CacheOutcome::Miss,
            Ok(entry) => match self.open_entry(&name, &entry) {
                Ok(artifact) => {
                    // SAFETY: `artifact` is bytes this host serialized itself: the MAC under
                    // the host-local key proves it, and wasmtime checks that the engine
                    // configuration and version match before using it. `deserialize` copies
                    // them out of the map before returning. The map could change under us only
                    // if the entry file were rewritten meanwhile, which takes its owner, who
                    // can also read the key (see the module docs).
                    #[allow(unsafe_code, reason = "deserializing our own authenticated artifact")]
                    match unsafe { Component::deserialize(engine, artifact) } {
                        Ok(component) => return Ok((component, CacheOutcome::Hit)),
                        Err(e) => CacheOutcome::Rejected(format!("incompatible artifact: {e}")),
                    }
                }
                Err(reason) => CacheOutcome::Rejected(reason),
            },
        };
        if let CacheOutcome::Rejected(reason) = &outcome {
            tracing::warn!(entry = %path.display(), %reason, "ignoring compile-cache entry");
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = self.store(&path, &name, &component.serialize()?) {
            tracing::warn!(entry = %path.display(), error = %e, "cannot write compile-cache entry");
        }
        Ok((component, outcome))
    }

    fn open_entry<'a>(&self, name: &str, entry: &'a [u8]) -> Result<&'a [u8], String> {
        if entry.len() < TAG_LEN {
            return Err("truncated entry".to_owned());
        }
        let (tag, artifact) = entry.split_at(TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().expect("split at TAG_LEN");
        // `blake3::Hash`'s equality is constant-time.
        if self.mac(name, artifact) != blake3::Hash::from_bytes(tag) {
            return Err(
                "authentication tag does not match (corrupted, or not written by this host)"
                    .to_owned(),
            );
        }
        Ok(artifact)
    }

    fn store(&self, path: &Path, name: &str, artifact: &[u8]) -> std::io::Result<()> {
        let tag = self.mac(name, artifact);
        crate::atomic_file::write(path, &[tag.as_bytes(), artifact])
    }

    /// The entry's tag: BLAKE3 keyed with the host key, over the name and the artifact (hashed
    /// on all cores: an interpreter's artifact is tens of MB).
    fn mac(&self, name: &str, artifact: &[u8]) -> blake3::Hash {
        let mut mac = blake3::Hasher::new_keyed(&self.key);
        mac.update(name.as_bytes());
        mac.update(&[0]);
        mac.update_rayon(artifact);
        mac.finalize()
    }
}

/// A read-only map of a cache entry (an empty file maps as empty).
#[allow(unsafe_code, reason = "mapping a cache entry read-only")]
fn map(path: &Path) -> std::io::Result<Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a read-only map of a file only this host's user writes (the cache directory is
    // its own; `store` replaces entries by rename, never in place).
    unsafe { Mmap::map(&file) }
}

/// `<component digest>-<engine compatibility hash>.b3.cwasm`: a different wasmtime version or
/// engine configuration never even looks at another's entries.
fn entry_name(engine: &Engine, digest: &ComponentDigest) -> String {
    let mut hasher = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!(
        "{}-{:016x}.b3.cwasm",
        hex::encode(digest.0),
        hasher.finish()
    )
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}
