//! Kept-alive upstream connections, so repeated requests skip the TCP connect and the TLS
//! handshake.
//!
//! 1. A connection is keyed by a [`PoolKey`]: the **checked address** it is connected to, the
//!    scheme, the TLS server name, and the **grant identity** (the adapter's [`Grants`] and the
//!    rule whose credentials the request carried). So a connection is never shared between
//!    grants with different credentials, and a request only rides a connection to an address
//!    its own lookup just checked: the gate runs every check (grant, method, approval mode,
//!    resolution and the special-purpose address check) *before* it asks the pool, then asks
//!    only for keys of the addresses that passed.
//! 2. A connection goes back to the pool ([`Reuse::keep`]) when its response body has been read
//!    to its end; a response body dropped unfinished, or any error, closes it instead. Taking
//!    it out ([`Pool::checkout`]) waits briefly for hyper to say it can carry another request
//!    (the end of the body reaches the connection's task a moment after the reader); one that
//!    cannot (it was closed, e.g. by `Connection: close` or by the upstream) is dropped.
//! 3. The pool is bounded: at most `[egress] max_idle_connections_per_destination` idle
//!    connections per key and `[egress] max_idle_connections` in all; a connection beyond
//!    either is closed. An idle connection is closed after `[egress] idle_connection_timeout_ms`.
//!    A connection the upstream closed while idle is dropped when next looked at.
//!
//! The pool lives in the host's [`TlsClient`](super::TlsClient) next to the TLS client
//! configuration, whose session cache gives a *new* connection to a known server TLS session
//! resumption; both are built once per host and shared by every adapter.
//!
//! [`Grants`]: super::Grants

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use hyper::client::conn::http1::SendRequest;

use super::config::EgressConfig;

/// How long [`Pool::checkout`] waits for a kept connection to become ready for another
/// request before closing it and trying the next (or a new connection).
const READY_WAIT: Duration = Duration::from_millis(50);

/// The request body type the gate sends: the whole body, read and charged before sending.
pub(super) type Sender = SendRequest<http_body_util::Full<Bytes>>;

/// What a kept-alive connection may be reused for. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PoolKey {
    /// The checked address the connection is connected to.
    pub addr: SocketAddr,
    /// The TLS server name the certificate was checked against; `None` for `http`.
    pub tls_name: Option<String>,
    /// The identity of the adapter's grants ([`Grants::id`](super::Grants)).
    pub grants: u64,
    /// The index of the rule (and so the credentials) the request matched.
    pub rule: usize,
}

/// The pool's bounds, from `[egress]`.
#[derive(Debug, Clone, Copy)]
struct Limits {
    per_key: usize,
    total: usize,
    idle_timeout: Duration,
}

/// Idle kept-alive connections. Cheap to clone (shared).
#[derive(Clone)]
pub(super) struct Pool {
    limits: Limits,
    idle: Arc<Mutex<Idle>>,
}

#[derive(Default)]
struct Idle {
    by_key: HashMap<PoolKey, Vec<Entry>>,
    total: usize,
    next_id: u64,
}

struct Entry {
    id: u64,
    sender: Sender,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("limits", &self.limits)
            .field("idle", &self.lock().total)
            .finish()
    }
}

impl Pool {
    /// A pool with the bounds of `config`.
    pub(super) fn new(config: &EgressConfig) -> Self {
        Self {
            limits: Limits {
                per_key: config.max_idle_connections_per_destination,
                total: config.max_idle_connections,
                idle_timeout: Duration::from_millis(config.idle_connection_timeout_ms),
            },
            idle: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Idle> {
        // Every change under this lock keeps `total` equal to the entries held, so a panic
        // elsewhere cannot leave it inconsistent: a poisoned lock is still usable.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An idle connection for `key` that can take a request, the most recently kept first.
    /// Connections that turn out closed on the way are dropped.
    pub(super) async fn checkout(&self, key: &PoolKey) -> Option<Sender> {
        loop {
            let mut sender = {
                let mut idle = self.lock();
                let entries = idle.by_key.get_mut(key)?;
                let entry = entries.pop();
                if entries.is_empty() {
                    idle.by_key.remove(key);
                }
                idle.total -= usize::from(entry.is_some());
                entry?.sender
            };
            if let Ok(Ok(())) = tokio::time::timeout(READY_WAIT, sender.ready()).await {
                return Some(sender);
            }
        }
    }

    /// Keeps `sender`, whose last response was read to its end, for `key`, and closes it if it
    /// stays idle past the idle timeout. A connection that would exceed a bound is closed.
    fn keep(&self, key: PoolKey, sender: Sender) {
        if self.limits.per_key == 0 || self.limits.total == 0 {
            return;
        }
        let Some(id) = self.put(&key, sender) else {
            return;
        };
        let pool = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(pool.limits.idle_timeout).await;
            pool.expire(&key, id);
        });
    }

    fn put(&self, key: &PoolKey, sender: Sender) -> Option<u64> {
        let mut idle = self.lock();
        if idle.total >= self.limits.total {
            return None;
        }
        let id = idle.next_id;
        idle.next_id += 1;
        let entries = idle.by_key.entry(key.clone()).or_default();
        if entries.len() >= self.limits.per_key {
            return None;
        }
        entries.push(Entry { id, sender });
        idle.total += 1;
        Some(id)
    }

    /// Closes the connection `id` if it is still idle.
    fn expire(&self, key: &PoolKey, id: u64) {
        let mut idle = self.lock();
        let Some(entries) = idle.by_key.get_mut(key) else {
            return;
        };
        let before = entries.len();
        entries.retain(|entry| entry.id != id);
        let removed = before - entries.len();
        if entries.is_empty() {
            idle.by_key.remove(key);
        }
        idle.total -= removed;
    }
}

/// A connection that carried a request, to be kept once its response body has been read to
/// its end ([`MeteredBody`](super::transport::MeteredBody) does it), or closed if dropped
/// before.
pub(super) struct Reuse {
    pub pool: Pool,
    pub key: PoolKey,
    pub sender: Sender,
}

impl Reuse {
    /// Hands the connection to the pool.
    pub(super) fn keep(self) {
        self.pool.keep(self.key, self.sender);
    }
}
