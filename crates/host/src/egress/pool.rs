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
//!    either is closed. An idle connection is closed after `[egress] idle_connection_timeout_ms`
//!    (by one sweeper task while any are kept, within a quarter of the timeout more).
//!    A connection the upstream closed while idle is dropped when next looked at.
//!
//! The pool lives in the host's [`TlsClient`](super::TlsClient) next to the TLS client
//! configuration, whose session cache gives a *new* connection to a known server TLS session
//! resumption; both are built once per host and shared by every adapter.
//!
//! [`Grants`]: super::Grants

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

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
    /// Whether a sweeper task is closing expired connections (one while any are kept).
    sweeping: bool,
}

struct Entry {
    kept_at: Instant,
    sender: Sender,
}

impl Idle {
    /// Closes the connections idle for `timeout` or longer.
    fn expire(&mut self, timeout: Duration) {
        let mut removed = 0;
        self.by_key.retain(|_, entries| {
            let before = entries.len();
            entries.retain(|entry| entry.kept_at.elapsed() < timeout);
            removed += before - entries.len();
            !entries.is_empty()
        });
        self.total -= removed;
    }
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
        lock(&self.idle)
    }

    /// An idle connection for `key` that can take a request, the most recently kept first.
    /// Connections that turn out closed or expired on the way are dropped.
    pub(super) async fn checkout(&self, key: &PoolKey) -> Option<Sender> {
        loop {
            let Entry {
                kept_at,
                mut sender,
            } = {
                let mut idle = self.lock();
                let entries = idle.by_key.get_mut(key)?;
                let entry = entries.pop();
                if entries.is_empty() {
                    idle.by_key.remove(key);
                }
                idle.total -= usize::from(entry.is_some());
                entry?
            };
            if kept_at.elapsed() >= self.limits.idle_timeout {
                continue;
            }
            if sender.is_ready() {
                return Some(sender);
            }
            if let Ok(Ok(())) = tokio::time::timeout(READY_WAIT, sender.ready()).await {
                return Some(sender);
            }
        }
    }

    /// Keeps `sender`, whose last response was read to its end, for `key`, until it is taken
    /// or has been idle for the idle timeout. A connection that would exceed a bound is
    /// closed.
    fn keep(&self, key: PoolKey, sender: Sender) {
        if self.limits.per_key == 0 || self.limits.total == 0 {
            return;
        }
        let mut idle = self.lock();
        if idle.total >= self.limits.total {
            return;
        }
        let entries = idle.by_key.entry(key).or_default();
        if entries.len() >= self.limits.per_key {
            return;
        }
        entries.push(Entry {
            kept_at: Instant::now(),
            sender,
        });
        idle.total += 1;
        if !idle.sweeping {
            idle.sweeping = true;
            tokio::spawn(sweep(Arc::downgrade(&self.idle), self.limits.idle_timeout));
        }
    }
}

/// Closes expired connections every quarter of the idle timeout, while any are kept and the
/// pool exists; so an idle connection closes between one and one and a quarter timeouts.
async fn sweep(idle: Weak<Mutex<Idle>>, timeout: Duration) {
    let period = (timeout / 4).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(period).await;
        let Some(idle) = idle.upgrade() else {
            return;
        };
        let mut idle = lock(&idle);
        idle.expire(timeout);
        if idle.total == 0 {
            idle.sweeping = false;
            return;
        }
    }
}

fn lock(idle: &Mutex<Idle>) -> MutexGuard<'_, Idle> {
    // Every change under this lock keeps `total` equal to the entries held, so a panic
    // elsewhere cannot leave it inconsistent: a poisoned lock is still usable.
    idle.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
