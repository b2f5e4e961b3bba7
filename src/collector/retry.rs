//! The one retry rule of the collector's background work (staging flushes, uploads, undoing an
//! unfinished flush): exponential backoff between attempts (from the first delay again for each
//! new piece of work, so it resets after a success), for as long as it takes, except once the
//! service is shutting down, when work gives up `shutdown_upload_timeout` after the shutdown
//! began (the WAL or the outbox keeps the events for the next start).

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub use crate::backoff::Backoff;

/// Set once the service begins to shut down; sleeping retries wake up at once.
#[derive(Debug, Default)]
pub struct Shutdown {
    began: Mutex<Option<Instant>>,
    changed: Condvar,
}

impl Shutdown {
    pub fn begin(&self) {
        let mut began = self.began.lock().unwrap_or_else(|e| e.into_inner());
        began.get_or_insert_with(Instant::now);
        self.changed.notify_all();
    }

    /// How long ago the shutdown began, if it did.
    pub fn elapsed(&self) -> Option<Duration> {
        self.began
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|t| t.elapsed())
    }

    /// Sleeps `d`; a shutdown that begins meanwhile wakes it (once: after that, every sleep is
    /// whole, so retries during the shutdown's patience are spaced, never spun).
    fn sleep(&self, d: Duration) {
        let began = self.began.lock().unwrap_or_else(|e| e.into_inner());
        if began.is_none() {
            let _ = self.changed.wait_timeout_while(began, d, |b| b.is_none());
        } else {
            drop(began);
            std::thread::sleep(d);
        }
    }
}

/// Runs `attempt` until it succeeds. After each failure `on_failure` sees the error (to log
/// and count it); then, unless the shutdown began more than `patience` ago, it waits the next
/// backoff delay and tries again. Returns the last error when it gives up.
pub fn retry<T, E>(
    backoff: Backoff,
    shutdown: &Shutdown,
    patience: Duration,
    mut attempt: impl FnMut() -> Result<T, E>,
    mut on_failure: impl FnMut(&E, Duration),
) -> Result<T, E> {
    let mut delay = backoff.first;
    loop {
        match attempt() {
            Ok(v) => return Ok(v),
            Err(e) => {
                let left = match shutdown.elapsed() {
                    Some(t) if t >= patience => return Err(e),
                    Some(t) => delay.min(patience - t),
                    None => delay,
                };
                on_failure(&e, left);
                shutdown.sleep(left);
                delay = backoff.after(delay);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Backoff = Backoff {
        first: Duration::from_millis(1),
        max: Duration::from_millis(4),
    };

    /// An attempt that fails ("down") before its `works_at`-th call (always, with 0), and
    /// counts its calls in `calls`.
    fn attempts(calls: &mut u32, works_at: u32) -> impl FnMut() -> Result<u32, &'static str> + '_ {
        move || {
            *calls += 1;
            if works_at != 0 && *calls >= works_at {
                Ok(*calls)
            } else {
                Err("down")
            }
        }
    }

    #[test]
    fn retries_until_it_works_with_growing_delays() {
        let shutdown = Shutdown::default();
        let mut calls = 0;
        let mut delays = Vec::new();
        let got = retry(
            FAST,
            &shutdown,
            Duration::ZERO,
            attempts(&mut calls, 5),
            |_, d| delays.push(d.as_millis()),
        );
        assert_eq!(got, Ok(5));
        assert_eq!(delays, [1, 2, 4, 4]);
    }

    #[test]
    fn gives_up_once_the_shutdown_is_older_than_the_patience() {
        let shutdown = Shutdown::default();
        shutdown.begin();
        let got: Result<(), &str> =
            retry(FAST, &shutdown, Duration::ZERO, || Err("down"), |_, _| {});
        assert_eq!(got, Err("down"));
        // The patience counts from the shutdown, not from the first attempt.
        let mut calls = 0;
        let patience = Duration::from_secs(3600);
        let attempt = attempts(&mut calls, 3);
        let got = retry(FAST, &shutdown, patience, attempt, |_, _| {});
        assert_eq!(got, Ok(3));
    }

    #[test]
    fn retries_after_the_shutdown_are_spaced_until_the_patience_ends() {
        let shutdown = Shutdown::default();
        shutdown.begin();
        let slow = Backoff {
            first: Duration::from_millis(20),
            max: Duration::from_millis(20),
        };
        let mut calls = 0;
        let started = Instant::now();
        let patience = Duration::from_millis(200);
        let attempt = attempts(&mut calls, 0);
        let got = retry(slow, &shutdown, patience, attempt, |_, _| {});
        assert_eq!(got, Err("down"));
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert!(calls <= 12, "{calls} attempts: spaced, not spun");
    }

    #[test]
    fn the_shutdown_wakes_a_sleeping_retry() {
        let shutdown = std::sync::Arc::new(Shutdown::default());
        let s = shutdown.clone();
        let started = Instant::now();
        let t = std::thread::spawn(move || {
            let slow = Backoff {
                first: Duration::from_secs(600),
                max: Duration::from_secs(600),
            };
            retry::<(), _>(slow, &s, Duration::ZERO, || Err("down"), |_, _| {})
        });
        while started.elapsed() < Duration::from_millis(20) {
            std::thread::yield_now();
        }
        shutdown.begin();
        assert_eq!(t.join().unwrap(), Err("down"));
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}
