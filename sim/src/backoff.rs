//! When the agent dials again (seed "When nobody answers"; spec §5.1): every
//! 100 ms for the first 3 s after it starts or loses a connection, then a
//! wait that doubles from 100 ms up to a maximum (1.5 s by default).

use std::time::Duration;

use tokio::time::Instant;

const EAGER_GAP: Duration = Duration::from_millis(100);
const EAGER_WINDOW: Duration = Duration::from_secs(3);
pub const DEFAULT_MAX: Duration = Duration::from_millis(1_500);

#[derive(Debug, Clone)]
pub struct Backoff {
    max: Duration,
    phase_started: Instant,
    next: Duration,
}

impl Backoff {
    pub fn new(max: Duration, now: Instant) -> Self {
        Self { max, phase_started: now, next: EAGER_GAP }
    }

    /// Start the eager phase again: at start, and when an open link drops.
    pub fn reset(&mut self, now: Instant) {
        self.phase_started = now;
        self.next = EAGER_GAP;
    }

    /// How long to wait before the next dial, decided at `now`.
    pub fn next_delay(&mut self, now: Instant) -> Duration {
        if now.saturating_duration_since(self.phase_started) < EAGER_WINDOW {
            return EAGER_GAP;
        }
        let delay = self.next.min(self.max);
        self.next = (self.next * 2).min(self.max);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(max_ms: u64, count: usize) -> Vec<u64> {
        let mut now = Instant::now();
        let mut backoff = Backoff::new(Duration::from_millis(max_ms), now);
        (0..count)
            .map(|_| {
                let gap = backoff.next_delay(now);
                now += gap;
                gap.as_millis() as u64
            })
            .collect()
    }

    #[test]
    fn thirty_eager_dials_then_doubling_up_to_the_maximum() {
        let gaps = gaps(1_500, 36);
        assert_eq!(gaps[..30], [100; 30]);
        assert_eq!(gaps[30..], [100, 200, 400, 800, 1500, 1500]);
    }

    #[test]
    fn the_maximum_is_configurable() {
        assert_eq!(gaps(300, 34)[30..], [100, 200, 300, 300]);
    }

    #[test]
    fn a_dropped_link_starts_the_eager_phase_again() {
        let start = Instant::now();
        let mut backoff = Backoff::new(DEFAULT_MAX, start);
        let late = start + Duration::from_secs(10);
        assert_eq!(backoff.next_delay(late), Duration::from_millis(100));
        assert_eq!(backoff.next_delay(late), Duration::from_millis(200));
        backoff.reset(late);
        assert_eq!(backoff.next_delay(late + Duration::from_millis(2_900)), EAGER_GAP);
        assert_eq!(backoff.next_delay(late + Duration::from_millis(3_000)), Duration::from_millis(100));
    }
}
