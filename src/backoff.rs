//! The one backoff rule of background work that waits for something to come back (a lake, a
//! disk): delays from `first`, doubling up to `max`, from `first` again after a success. The
//! collector's retries (`collector/retry.rs`) and the durable jobs (`jobs/`) both use it.

use std::time::Duration;

/// Delays between attempts: `first`, doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

/// 200 ms, doubling up to 2 s: an outage costs one cheap failed attempt per 2 s,
/// and a lake (or a disk) that is back is used again within 2 s.
impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(200),
            max: Duration::from_secs(2),
        }
    }
}

impl Backoff {
    /// The delay after `delay`: twice it, at most `max`.
    pub fn after(&self, delay: Duration) -> Duration {
        (delay * 2).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_max() {
        let b = Backoff::default();
        let mut d = b.first;
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(d.as_millis());
            d = b.after(d);
        }
        assert_eq!(seen, [200, 400, 800, 1600, 2000, 2000]);
    }
}
