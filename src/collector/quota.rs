//! The `events_per_month` plan limit, checked and counted in one step.
//!
//! `edge: reserve(app, month, n) -> [granted <= n] -> submit -> settle(committed)`
//!
//! Each app-month has one counter in memory (an `AtomicU64`), seeded from the sled count the
//! shard writers keep (`usage.rs`) on its first use after a start. A batch reserves its events
//! with one compare-and-swap that never goes past the limit, so concurrent batches cannot
//! overshoot it; a batch that crosses the limit gets what is left (its first events, in batch
//! order) and the edge refuses the rest one by one. Once the shards answer, the reservation is
//! settled: what they did not commit (duplicates, a failed write, a full queue) goes back to
//! the counter. What a shard still holds when the answer deadline passes stays counted (it
//! may commit later; a retry of it is a duplicate and gives its own share back), and so does a
//! reservation whose request was dropped before it was settled.
//!
//! The hot path costs a read lock, a hash lookup and a compare-and-swap; the first batch of an
//! app-month waits for one store read (concurrent first batches wait for the same read). The
//! counter is per process; in a fleet (`fleet/`) each app-month also holds `others`, the count
//! of every other node as the control node last reported it (`set_others`, at each sync), and
//! a reservation fits `used + others` under the limit. So the fleet can overshoot the limit by
//! at most what the other nodes accept between two syncs: edges x sync interval x rate.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// An app-month's counter: seeded once, then only moved by reservations and refunds.
#[derive(Default)]
struct Slot {
    seeded: tokio::sync::OnceCell<()>,
    used: AtomicU64,
    /// The other nodes' count of the fleet (0 on a single node).
    others: AtomicU64,
}

/// Every app-month's counter in memory, by month then app (looked up without allocating).
/// Months before the newest one reserved are dropped: it holds one month per active app (two
/// around a month's turn), about 100 bytes each.
#[derive(Default)]
pub struct Quotas {
    slots: RwLock<HashMap<String, HashMap<String, Arc<Slot>>>>,
}

/// Events taken from an app-month's allowance; settle it with what the shards committed.
/// Dropped unsettled, it keeps everything counted (the batch may have been committed).
#[must_use = "settle the reservation with what was committed"]
pub struct Reservation {
    slot: Arc<Slot>,
    granted: u64,
    /// The count before this reservation (for a refusal's message).
    before: u64,
}

impl Reservation {
    /// How many of the batch's events may be committed (its first ones).
    pub fn granted(&self) -> usize {
        self.granted as usize
    }

    /// The month's count before this batch.
    pub fn before(&self) -> u64 {
        self.before
    }

    /// Gives back what was granted but not used (`used <= granted`).
    pub fn settle(self, used: u64) {
        let back = self.granted.saturating_sub(used);
        if back > 0 {
            self.slot.used.fetch_sub(back, Ordering::AcqRel);
        }
    }
}

impl Quotas {
    fn slot(&self, app: &str, month: &str) -> Arc<Slot> {
        let read = self.slots.read().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = read.get(month).and_then(|apps| apps.get(app)) {
            return s.clone();
        }
        drop(read);
        let mut write = self.slots.write().unwrap_or_else(|e| e.into_inner());
        let slot = write
            .entry(month.to_owned())
            .or_default()
            .entry(app.to_owned())
            .or_default()
            .clone();
        write.retain(|m, _| m.as_str() >= month);
        slot
    }

    /// Reserves up to `n` events of `app`'s `month` under `limit` (`None`: unlimited, still
    /// counted). `seed` reads the month's stored count; it runs once per app-month, before any
    /// reservation of it, and its error is returned (the next batch tries again).
    pub async fn reserve<E, F, Fut>(
        &self,
        app: &str,
        month: &str,
        limit: Option<u64>,
        n: usize,
        seed: F,
    ) -> Result<Reservation, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<u64, E>>,
    {
        let slot = self.slot(app, month);
        slot.seeded
            .get_or_try_init(|| async {
                slot.used.fetch_add(seed().await?, Ordering::AcqRel);
                Ok(())
            })
            .await?;
        let others = slot.others.load(Ordering::Acquire);
        let limit = limit.unwrap_or(u64::MAX).saturating_sub(others);
        let mut granted = 0;
        let before = slot
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                granted = limit.saturating_sub(used).min(n as u64);
                (granted > 0).then_some(used + granted)
            })
            .unwrap_or_else(|used| used)
            + others;
        Ok(Reservation {
            slot,
            granted,
            before,
        })
    }

    /// Sets the count of `app`'s `month` on the fleet's other nodes (from the control node).
    pub fn set_others(&self, app: &str, month: &str, count: u64) {
        self.slot(app, month).others.store(count, Ordering::Release);
    }

    /// The other nodes' count of an app-month (0 when none was reported).
    pub fn others(&self, app: &str, month: &str) -> u64 {
        let read = self.slots.read().unwrap_or_else(|e| e.into_inner());
        read.get(month)
            .and_then(|apps| apps.get(app))
            .map_or(0, |s| s.others.load(Ordering::Acquire))
    }

    /// Forgets every month's counter of `app` (its deletion).
    pub fn forget(&self, app: &str) {
        let mut write = self.slots.write().unwrap_or_else(|e| e.into_inner());
        for apps in write.values_mut() {
            apps.remove(app);
        }
    }

    /// The app-month's count as this process sees it (`None` before its first batch).
    pub fn used(&self, app: &str, month: &str) -> Option<u64> {
        let read = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let slot = read.get(month)?.get(app)?;
        slot.seeded
            .initialized()
            .then(|| slot.used.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn reserve(q: &Quotas, month: &str, limit: u64, n: usize) -> Reservation {
        q.reserve("app", month, Some(limit), n, || async { Ok::<_, ()>(3) })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_batch_gets_what_is_left_and_gives_back_what_it_did_not_commit() {
        let q = Quotas::default();
        let r = reserve(&q, "2026-11", 10, 5).await;
        assert_eq!((r.granted(), r.before()), (5, 3), "seeded from the store");
        let crossing = reserve(&q, "2026-11", 10, 5).await;
        assert_eq!((crossing.granted(), crossing.before()), (2, 8));
        let none = reserve(&q, "2026-11", 10, 1).await;
        assert_eq!((none.granted(), none.before()), (0, 10));
        none.settle(0);
        // Two of the first five were duplicates: they go back.
        r.settle(3);
        assert_eq!(q.used("app", "2026-11"), Some(8));
        crossing.settle(2);
        assert_eq!(reserve(&q, "2026-11", 10, 9).await.granted(), 2);
        // Dropped unsettled: kept.
        assert_eq!(q.used("app", "2026-11"), Some(10));
    }

    #[tokio::test]
    async fn concurrent_reservations_never_pass_the_limit() {
        let q = Arc::new(Quotas::default());
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { reserve(&q, "2026-11", 20, 1).await.granted() })
            })
            .collect();
        let mut granted = 0;
        for t in tasks {
            granted += t.await.unwrap();
        }
        assert_eq!(granted, 17, "20 less the 3 seeded");
        assert_eq!(q.used("app", "2026-11"), Some(20));
    }

    #[tokio::test]
    async fn a_failed_seed_reserves_nothing_and_the_next_batch_seeds_again() {
        let q = Quotas::default();
        let failed = q
            .reserve("app", "2026-11", Some(5), 1, || async {
                Err::<u64, _>("busy")
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(q.used("app", "2026-11"), None);
        assert_eq!(reserve(&q, "2026-11", 5, 9).await.granted(), 2);
        // A new month drops the older ones and starts from its own count.
        let next = reserve(&q, "2026-12", 5, 1).await;
        assert_eq!(next.before(), 3);
        assert_eq!(q.used("app", "2026-11"), None);
        let unlimited = q
            .reserve("app", "2026-12", None, 1000, || async { Ok::<_, ()>(0) })
            .await
            .unwrap();
        assert_eq!(unlimited.granted(), 1000);
        assert_eq!(q.used("app", "2026-12"), Some(1004));
    }

    #[tokio::test]
    async fn the_other_nodes_count_takes_its_share_of_the_limit() {
        let q = Quotas::default();
        q.set_others("app", "2026-11", 4);
        // Limit 10, 3 seeded here, 4 elsewhere: 3 left.
        assert_eq!(reserve(&q, "2026-11", 10, 5).await.granted(), 3);
        assert_eq!(q.others("app", "2026-11"), 4);
        q.set_others("app", "2026-11", 9);
        assert_eq!(reserve(&q, "2026-11", 10, 5).await.granted(), 0);
    }
}
