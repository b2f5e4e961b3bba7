//! The clock: wall time for everything that records or compares "now". `Application::build`
//! takes one and hands it to every part that reads the time (the collector, `AppState` for the
//! handlers and the dashboard, the sweepers); stores and models take `now` as a value. The
//! binary passes [`SystemClock`]; tests hand in a [`ManualClock`] or a [`ShiftedClock`] and
//! move it, so time-driven behaviour (file age, day rollover, expiry) is tested without
//! waiting.

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use crate::ids::Timestamp;

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Microseconds since the Unix epoch, UTC.
    fn now_micros(&self) -> i64;

    /// Now, as the time type of every record: whole milliseconds, as records keep it (so a
    /// time read back from a record equals the one it was written with, index keys included).
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(self.now_micros().div_euclid(1000) * 1000)
    }
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

/// The system's clock moved forward by hand: it runs, so records made one after the other keep
/// their order, and a test moves it past a deadline instead of waiting for it.
#[derive(Debug, Default)]
pub struct ShiftedClock(AtomicI64);

impl ShiftedClock {
    pub fn advance(&self, micros: i64) {
        self.0.fetch_add(micros, Relaxed);
    }
}

impl Clock for ShiftedClock {
    fn now_micros(&self) -> i64 {
        SystemClock.now_micros() + self.0.load(Relaxed)
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

    #[test]
    fn a_shifted_clock_runs_and_jumps_when_told() {
        let c = ShiftedClock::default();
        let before = SystemClock.now_micros();
        c.advance(3_600_000_000);
        let shifted = c.now_micros();
        assert!(shifted >= before + 3_600_000_000);
        assert!(shifted < SystemClock.now_micros() + 3_601_000_000);
        assert!(c.now().micros() >= shifted / 1000 * 1000, "it runs");
        assert_eq!(
            c.now().micros() % 1000,
            0,
            "in whole milliseconds, as records keep it"
        );
    }
}
