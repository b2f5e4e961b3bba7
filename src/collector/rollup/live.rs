//! The rollups not yet in sled, so an event counts from its 200 rather than from its flush.
//!
//! Per shard: `open`, what the writer committed since its last flush (counted as it commits,
//! the way `Delta` always was), and `staged`, the flushes handed to the stager and not yet
//! applied. A traffic read adds both to what sled holds.
//!
//! Each row is seen once by a reader: the stager applies a flush to sled and drops it from
//! `staged` under the write side of `gate`, and a reader holds the read side while it reads
//! sled and copies the live part; the writer moves `open` into `staged` under the shard's lock,
//! which the reader takes for its copy. The writer never takes `gate`, so it never waits for a
//! reader's sled read nor for the stager. After a crash the live part is gone with the
//! process and the WAL replay rebuilds it from the rows beyond the shard's rollup LSN.
//!
//! Memory: `open` is the delta the writer kept before, and a staged delta is shared (`Arc`)
//! with the flush that carries it to the stager: no copy is kept. A reader copies the buckets
//! of one app and one window only, for the time of its answer.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use super::store::{self, RollupError};
use super::{Bucket, Delta};
use crate::storage::queue::Queue;

#[derive(Debug, Default)]
struct Shard {
    open: Delta,
    /// `(last LSN, delta)` of each flush handed over and not yet applied, oldest first.
    staged: Vec<(u64, Arc<Delta>)>,
}

/// Every shard's live rollups (`Collector::rollups`).
#[derive(Debug, Default)]
pub struct Live {
    gate: RwLock<()>,
    shards: Vec<Mutex<Shard>>,
}

impl Live {
    pub fn new(shards: usize) -> Live {
        Live {
            gate: RwLock::new(()),
            shards: (0..shards).map(|_| Mutex::default()).collect(),
        }
    }

    fn shard(&self, index: usize) -> MutexGuard<'_, Shard> {
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts committed rows into shard `index`'s open delta (the writer, after each commit).
    pub fn count<R>(&self, index: usize, f: impl FnOnce(&mut Delta) -> R) -> R {
        f(&mut self.shard(index).open)
    }

    /// Closes the open delta of shard `index` for the flush ending at `last_lsn`: it stays
    /// counted (staged) until the stager applies it. Returns it for the flush.
    pub fn stage(&self, index: usize, last_lsn: u64) -> Arc<Delta> {
        let mut shard = self.shard(index);
        let delta = Arc::new(std::mem::take(&mut shard.open));
        if !delta.is_empty() {
            shard.staged.push((last_lsn, delta.clone()));
        }
        delta
    }

    /// Applies a flush's delta to sled (`store::apply`: once per LSN) and stops counting it
    /// live, in one step for readers. On an error it stays live, and the stager retries.
    pub fn apply(
        &self,
        db: &sled::Db,
        index: usize,
        last_lsn: u64,
        delta: &Delta,
    ) -> Result<bool, RollupError> {
        self.retire(index, last_lsn, || store::apply(db, index, last_lsn, delta))
    }

    /// On an edge: `wire::forward` (the delta onto the uplink, not into sled) and stops
    /// counting it live, like `apply`.
    pub fn forward(
        &self,
        db: &sled::Db,
        uplink: Queue,
        index: usize,
        last_lsn: u64,
        delta: &Delta,
        at: i64,
    ) -> Result<bool, RollupError> {
        self.retire(index, last_lsn, || {
            super::wire::forward(db, uplink, index, last_lsn, delta, at)
        })
    }

    /// Runs `done` (what takes the flushes up to `last_lsn` of shard `index` out of the live
    /// part) and drops them from `staged`, in one step for readers.
    fn retire(
        &self,
        index: usize,
        last_lsn: u64,
        done: impl FnOnce() -> Result<bool, RollupError>,
    ) -> Result<bool, RollupError> {
        let _readers_out = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        let applied = done()?;
        if let Some(shard) = self.shards.get(index) {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            shard.staged.retain(|(lsn, _)| *lsn > last_lsn);
        }
        Ok(applied)
    }

    /// Drops `app`'s rows from every shard's open delta (the app's deletion, once its events
    /// are settled: then no staged flush holds any, as the stager applied them to sled, where
    /// the deletion removes them). Returns how many shards had some.
    pub fn forget(&self, app: &str) -> usize {
        let _no_read = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        (0..self.shards.len())
            .filter(|&index| self.shard(index).open.forget(app))
            .count()
    }

    /// Runs `stored` (the read of sled) and returns its answer with the live buckets of `app`
    /// whose hour is in `hours`, merged over the shards, by hour.
    pub fn read<T>(
        &self,
        app: &str,
        hours: Range<i64>,
        stored: impl FnOnce() -> T,
    ) -> (T, Vec<(i64, Bucket)>) {
        let _no_apply = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        let answer = stored();
        let mut live: BTreeMap<i64, Bucket> = BTreeMap::new();
        for index in 0..self.shards.len() {
            let shard = self.shard(index);
            let deltas = shard.staged.iter().map(|(_, d)| &**d);
            for delta in deltas.chain([&shard.open]) {
                for (hour, b) in delta.hours_of(app, hours.clone()) {
                    live.entry(hour).or_default().merge(b);
                }
            }
        }
        (answer, live.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::event::Event;
    use crate::collector::rollup::HOUR_MICROS;

    const T0: i64 = 1_790_000_000_000_000;
    const H0: i64 = T0.div_euclid(HOUR_MICROS);

    fn count(live: &Live, ids: Range<usize>) {
        live.count(0, |d| {
            for i in ids {
                d.add(&Event::example(
                    "app",
                    &format!("m{i}"),
                    &format!("v{i}"),
                    T0,
                ));
            }
        });
    }

    /// Events of `app` in hour H0: stored, then live.
    fn events(live: &Live, db: &sled::Db) -> (u64, u64) {
        let (stored, live) = live.read("app", H0..H0 + 1, || {
            store::read(db, "app", store::Unit::Hour, H0, H0 + 1).unwrap()
        });
        let sum = |b: &[(i64, Bucket)]| b.iter().map(|(_, b)| b.events()).sum();
        (sum(&stored), sum(&live))
    }

    #[test]
    fn a_row_counts_live_from_its_commit_then_stored_once_its_flush_is_applied() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let live = Live::new(2);
        count(&live, 0..3);
        assert_eq!(events(&live, &db), (0, 3), "open rows count at once");
        let first = live.stage(0, 3);
        count(&live, 3..5);
        assert_eq!(events(&live, &db), (0, 5), "a staged flush still counts");
        assert!(live.apply(&db, 0, 3, &first).unwrap());
        assert_eq!(
            events(&live, &db),
            (3, 2),
            "applied: stored, no longer live"
        );
        let second = live.stage(0, 5);
        assert!(
            !live.apply(&db, 0, 3, &second).unwrap(),
            "at or below the LSN"
        );
        assert_eq!(
            events(&live, &db),
            (3, 2),
            "a skipped apply drops no later flush"
        );
        assert!(live.apply(&db, 0, 5, &second).unwrap());
        assert_eq!(events(&live, &db), (5, 0));
        let (_, other) = live.read("other", H0..H0 + 1, || ());
        assert!(other.is_empty(), "only the app asked for");
    }

    #[test]
    fn a_reader_sees_each_row_once_while_the_stager_applies_flushes() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let live = Arc::new(Live::new(1));
        let flushes: Vec<(u64, Arc<Delta>)> = (0..20)
            .map(|i| {
                count(&live, i * 10..(i + 1) * 10);
                let lsn = (i as u64 + 1) * 10;
                (lsn, live.stage(0, lsn))
            })
            .collect();
        let stager = {
            let (live, db) = (live.clone(), db.clone());
            std::thread::spawn(move || {
                for (lsn, delta) in flushes {
                    live.apply(&db, 0, lsn, &delta).unwrap();
                }
            })
        };
        loop {
            let (stored, live_now) = events(&live, &db);
            assert_eq!(stored + live_now, 200, "each row once, at every moment");
            if stored == 200 {
                break;
            }
        }
        stager.join().unwrap();
    }
}
