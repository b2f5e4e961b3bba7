//! Per-key rate limits: a token bucket per API key (governor), sized by the app's plan
//! (`plans.<plan>.requests_per_minute`). Every answer to a keyed request carries
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds at which the
//! bucket is full again); a refusal adds `Retry-After`.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

type Bucket = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// What the headers say about one request's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitInfo {
    pub limit: u32,
    pub remaining: u32,
    pub reset_unix: u64,
    /// Seconds to wait, when the request was refused.
    pub retry_after: Option<u64>,
}

impl RateLimitInfo {
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        let mut set = |name: &'static str, v: u64| {
            headers.insert(HeaderName::from_static(name), HeaderValue::from(v));
        };
        set("x-ratelimit-limit", self.limit.into());
        set("x-ratelimit-remaining", self.remaining.into());
        set("x-ratelimit-reset", self.reset_unix);
        if let Some(s) = self.retry_after {
            set("retry-after", s);
        }
    }
}

/// Buckets kept at most; beyond, idle ones are dropped first (see `check`).
const MAX_BUCKETS: usize = 50_000;
/// A bucket unused this long has refilled (every quota is per minute): dropping it changes
/// nothing, since a new bucket starts full.
const IDLE: Duration = Duration::from_secs(60);

/// Buckets by key id (API keys; the dashboard's e-mail and address pairs). A key's bucket is
/// rebuilt when its plan's rate changes. Memory: at most `MAX_BUCKETS` buckets (about 200
/// bytes each), whatever the number of keys tried.
#[derive(Default)]
pub struct RateLimits {
    buckets: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    rate: u32,
    bucket: Arc<Bucket>,
    used: Instant,
}

/// Makes room for one more bucket: drops the idle ones and then, when keys used within the
/// last minute still hold more than nine tenths of `max`, the least recently used of them
/// (they start full again if they return). A full table is scanned once per `max / 10` new
/// keys, not once per new key: keys tried at a steady rate keep it full, and a scan of
/// `MAX_BUCKETS` entries under the lock costs about a millisecond.
fn make_room(buckets: &mut HashMap<String, Entry>, max: usize) {
    if buckets.len() < max {
        return;
    }
    let now = Instant::now();
    buckets.retain(|_, e| now.duration_since(e.used) < IDLE);
    let keep = (max - max / 10).min(max - 1);
    if buckets.len() > keep {
        tracing::warn!(
            buckets = buckets.len(),
            "rate limit table full; forgetting the least recently used buckets"
        );
        let mut used: Vec<Instant> = buckets.values().map(|e| e.used).collect();
        let (_, &mut cutoff, _) = used.select_nth_unstable(buckets.len() - keep - 1);
        buckets.retain(|_, e| e.used > cutoff);
    }
}

fn unix_after(d: Duration) -> u64 {
    (SystemTime::now() + d)
        .duration_since(UNIX_EPOCH)
        .map(|t| t.as_secs_f64().ceil() as u64)
        .unwrap_or(0)
}

impl RateLimits {
    /// Takes one token from `key_id`'s bucket of `per_minute` tokens.
    pub fn check(&self, key_id: &str, per_minute: u32) -> RateLimitInfo {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let bucket = {
            let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
            match buckets.get_mut(key_id) {
                Some(e) if e.rate == per_minute.get() => {
                    e.used = Instant::now();
                    e.bucket.clone()
                }
                _ => {
                    let b = Arc::new(
                        RateLimiter::direct(Quota::per_minute(per_minute))
                            .with_middleware::<StateInformationMiddleware>(),
                    );
                    buckets.remove(key_id);
                    make_room(&mut buckets, MAX_BUCKETS);
                    let entry = Entry {
                        rate: per_minute.get(),
                        bucket: b.clone(),
                        used: Instant::now(),
                    };
                    buckets.insert(key_id.to_owned(), entry);
                    b
                }
            }
        };
        let limit = per_minute.get();
        let refill = Duration::from_secs(60) / limit;
        match bucket.check() {
            Ok(snap) => {
                let remaining = snap.remaining_burst_capacity();
                RateLimitInfo {
                    limit,
                    remaining,
                    reset_unix: unix_after(refill * (limit - remaining)),
                    retry_after: None,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(bucket.clock().now());
                let retry = wait.as_secs_f64().ceil().max(1.0) as u64;
                RateLimitInfo {
                    limit,
                    remaining: 0,
                    reset_unix: unix_after(refill * limit),
                    retry_after: Some(retry),
                }
            }
        }
    }

    /// Forgets a revoked key's bucket.
    pub fn forget(&self, key_id: &str) {
        self.buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_empties_and_then_refuses_with_a_wait() {
        let limits = RateLimits::default();
        let first = limits.check("k", 3);
        assert_eq!(
            (first.limit, first.remaining, first.retry_after),
            (3, 2, None)
        );
        limits.check("k", 3);
        assert_eq!(limits.check("k", 3).remaining, 0);
        let refused = limits.check("k", 3);
        assert!(
            refused.retry_after.is_some_and(|s| (1..=20).contains(&s)),
            "{refused:?}"
        );
        // Another key has its own bucket.
        assert_eq!(limits.check("other", 3).remaining, 2);
    }

    #[test]
    fn the_table_is_bounded_and_drops_idle_buckets_first() {
        let entry = |age: Duration| Entry {
            rate: 5,
            bucket: Arc::new(
                RateLimiter::direct(Quota::per_minute(NonZeroU32::new(5).unwrap()))
                    .with_middleware::<StateInformationMiddleware>(),
            ),
            used: Instant::now() - age,
        };
        let mut buckets = HashMap::new();
        buckets.insert("idle".to_owned(), entry(IDLE * 2));
        buckets.insert("busy".to_owned(), entry(Duration::ZERO));
        make_room(&mut buckets, 2);
        assert!(buckets.contains_key("busy") && !buckets.contains_key("idle"));
        buckets.insert("busy2".to_owned(), entry(Duration::ZERO));
        make_room(&mut buckets, 2);
        assert_eq!(
            buckets.len(),
            1,
            "room for one more, never beyond the bound"
        );
        assert!(
            buckets.contains_key("busy2"),
            "the least recently used goes first"
        );
        // A full table of busy keys: a tenth goes at once, the most recently used stay.
        let mut buckets: HashMap<String, Entry> = (0..100)
            .map(|i| (format!("k{i}"), entry(Duration::from_millis(100 - i))))
            .collect();
        make_room(&mut buckets, 100);
        assert_eq!(buckets.len(), 90);
        assert!((10..100).all(|i| buckets.contains_key(&format!("k{i}"))));
        let limits = RateLimits::default();
        for i in 0..(MAX_BUCKETS + 100) {
            limits.check(&format!("k{i}"), 60);
        }
        assert!(limits.buckets.lock().unwrap().len() <= MAX_BUCKETS);
    }
}
