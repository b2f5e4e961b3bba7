//! The clock: wall time for everything that records or compares "now". Production uses the
//! system clock; tests hand in a [`ManualClock`] and move it, so time-driven behaviour (file
//! age, day rollover) is tested without waiting.

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Microseconds since the Unix epoch, UTC.
    fn now_micros(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> i64 {
        chrono::Utc::now().timestamp_micros()
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn at(micros: i64) -> ManualClock {
        ManualClock(AtomicI64::new(micros))
    }
    pub fn advance(&self, micros: i64) {
        self.0.fetch_add(micros, Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::at(5);
        assert_eq!(c.now_micros(), 5);
        c.advance(10);
        assert_eq!(c.now_micros(), 15);
        assert!(SystemClock.now_micros() > 1_700_000_000_000_000);
    }
}
