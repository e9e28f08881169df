//! What both HTTP listeners (the MCP endpoint and the admin API) refuse to hostile clients
//! beyond hyper's header read timeout: more open connections than `max_connections`
//! ([`ConnectionCap`]), and a request body that takes longer than `body_timeout_ms` to arrive
//! ([`read_body`]). Without them a client that opens sockets and never sends, or sends a body
//! one byte a minute, holds a task and a file descriptor each for as long as it likes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::throttle::{self, Throttle};

/// A cap on the connections a listener serves at once. A connection beyond it is closed at
/// accept, before any byte is read; refusals are counted and logged at most once per 10 s.
#[derive(Debug)]
pub(crate) struct ConnectionCap {
    listener: &'static str,
    max: usize,
    slots: Arc<Semaphore>,
    /// A flood of refusals must not become a flood of log lines.
    refused: Throttle,
}

impl ConnectionCap {
    /// A cap of `max` open connections on the listener named `listener` (for the logs).
    pub(crate) fn new(listener: &'static str, max: usize) -> Self {
        Self {
            listener,
            max,
            slots: Arc::new(Semaphore::new(max)),
            refused: Throttle::new(throttle::INTERVAL),
        }
    }

    /// Admits one connection: the permit is its slot, freed when dropped (hold it for the
    /// connection's life). `None` when all slots are taken: drop the stream, which closes it.
    pub(crate) fn admit(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Some(permit);
        }
        if let Some(refused) = self.refused.hit() {
            tracing::warn!(
                listener = self.listener,
                max_connections = self.max,
                refused,
                "connections refused: the listener is at max_connections (raise it, or find who holds them open)"
            );
        }
        None
    }
}

/// Why a request body was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// Longer than the size limit (the number of bytes).
    #[error("the request body exceeds {0} bytes")]
    TooLarge(usize),
    /// Not complete within the time limit.
    #[error("the request body did not arrive within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The connection failed while reading it.
    #[error("cannot read the request body: {0}")]
    Unreadable(String),
}

/// Reads a whole request body of at most `max_bytes`, within `timeout` (counted from the end
/// of the headers, which hyper bounds separately).
pub(crate) async fn read_body(
    body: Incoming,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(timeout, Limited::new(body, max_bytes).collect()).await {
        Err(_) => Err(BodyError::TimedOut(timeout)),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(BodyError::TooLarge(max_bytes)),
        Ok(Err(error)) => Err(BodyError::Unreadable(error.to_string())),
    }
}
