//! Warnings that a flood cannot turn into a flood of log lines: a [`Throttle`] counts the
//! events it is told about and lets one warning through per interval, carrying the count
//! since the last one. Used for refused connections, authentication failures (401) and
//! denied calls and requests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The interval of the throttles the host uses: a warning at most every 10 s per kind of
/// event, enough to notice a problem and cheap in a flood.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Counts events; says when a warning is due (see the module docs).
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    /// Events not yet reported in a warning.
    count: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

impl Throttle {
    /// At most one warning per `interval`.
    pub const fn new(interval: Duration) -> Self {
        Self {
            interval,
            count: AtomicU64::new(0),
            last_warning: Mutex::new(None),
        }
    }

    /// Counts one event. `Some(n)`, the events since the last warning (this one included),
    /// when a warning is due now: the first event, and the first one an interval after the
    /// last warning.
    pub fn hit(&self) -> Option<u64> {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut last = self
            .last_warning
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if last.is_none_or(|at| now.duration_since(at) >= self.interval) {
            *last = Some(now);
            Some(self.count.swap(0, Ordering::Relaxed))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_interval_carries_the_count() {
        let throttle = Throttle::new(Duration::from_millis(200));
        assert_eq!(throttle.hit(), Some(1));
        assert_eq!((throttle.hit(), throttle.hit()), (None, None));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(throttle.hit(), Some(3));
    }
}
