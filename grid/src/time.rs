//! Time as the grid reads it. Wall-clock milliseconds are what the store
//! and the protocol carry; the owner task reads them from one [`Clock`]
//! that runs on tokio's time, so that its tests under paused time see the
//! same instant on both.

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Now, in epoch milliseconds, by the system's clock.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// `2026-01-01T00:00:00.000Z`: the form lynkeus' records carry.
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Epoch milliseconds that advance with tokio's clock: read once from the
/// system at the start, then by tokio's monotonic time (paused in tests).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch_us: i64,
    at: Instant,
}

impl Clock {
    /// A clock that starts at the system's time now.
    pub fn system() -> Self {
        Self::starting_at(now_ms())
    }

    /// A clock that reads `epoch_ms` now.
    pub fn starting_at(epoch_ms: i64) -> Self {
        Self { epoch_us: epoch_ms * 1_000, at: Instant::now() }
    }

    pub fn now_ms(&self) -> i64 {
        self.now_us() / 1_000
    }

    /// Now in epoch microseconds: what a lease's `granted_unix_us` carries.
    pub fn now_us(&self) -> i64 {
        self.epoch_us + self.at.elapsed().as_micros() as i64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_clock_follows_tokio_time() {
        let clock = Clock::starting_at(1_000);
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(clock.now_ms(), 21_000);
    }
}
