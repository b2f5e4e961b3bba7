//! Per-key rate limits: a token bucket per API key (governor), sized by the app's plan
//! (`plans.<plan>.requests_per_minute`). Every answer to a keyed request carries
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds at which the
//! bucket is full again); a refusal adds `Retry-After`.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Buckets by key id. A key's bucket is rebuilt when its plan's rate changes.
#[derive(Default)]
pub struct RateLimits {
    buckets: Mutex<HashMap<String, (u32, Arc<Bucket>)>>,
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
            let mut buckets = self.buckets.lock().expect("rate limit lock");
            match buckets.get(key_id) {
                Some((rate, b)) if *rate == per_minute.get() => b.clone(),
                _ => {
                    let b = Arc::new(
                        RateLimiter::direct(Quota::per_minute(per_minute))
                            .with_middleware::<StateInformationMiddleware>(),
                    );
                    buckets.insert(key_id.to_owned(), (per_minute.get(), b.clone()));
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
        self.buckets.lock().expect("rate limit lock").remove(key_id);
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
}
