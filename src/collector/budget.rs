//! The collector's memory budget: `collector.max_memory_mb` split over the pools that grow
//! with traffic, so the worst case is a formula of the configuration.
//!
//! ```text
//! max_memory_mb = dedupe_memory_mb                    Bloom filters (dedupe/), fixed
//!               + max_memory_mb / 4                   queued batches, all shards (Gate)
//!               + shards x 4 x file_bytes             per shard: open files, one flush
//!                                                     queued for the stager, one being
//!                                                     staged, one file being uploaded
//! file_bytes    = min(max_file_bytes, (max_memory_mb x 3/4 - dedupe_memory_mb) / (4 x shards))
//! ```
//!
//! Sizes are the events' estimated bytes (`Event::approx_bytes`). What a pool cannot take is
//! refused at the edge (503 + Retry-After: the queued-batch gate) or flushed early (a shard
//! closes its files at `file_bytes`). Not counted here: the HTTP layer's buffers (bounded by
//! `server.max_connections` x `collector.max_batch_bytes`), sled's cache (`storage.cache_mb`),
//! the identity cache (`MAX_CACHED_IDENTITIES` per shard) and each shard's WAL write buffer
//! (one group's records, at most 4 MiB kept between appends: `wal::KEPT_BUFFER_BYTES`). The
//! traffic rollups of the rows in each `file_bytes` (`rollup/`) are a fraction of them and shadow
//! them: a delta lives with its open files and its flush (until the stager applies it), shared
//! with the live traffic reads (`rollup/live.rs`), never copied; a read copies one app's window.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::CollectorSettings;

/// Flushes a shard may hold at once: its open files, one queued for the stager, one being
/// staged, one (file) being uploaded. A backlog waits on disk, in the outbox.
const FILES_IN_MEMORY: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Each dedupe filter (3 generations per shard).
    pub filter_bytes: usize,
    /// Queued batches, all shards together.
    pub queued_bytes: usize,
    /// A shard's open files close at this size.
    pub file_bytes: usize,
}

impl Budget {
    pub fn new(c: &CollectorSettings, shards: usize) -> Result<Budget, String> {
        let mb = |n: usize| n << 20;
        let shards = shards.max(1);
        let total = mb(c.max_memory_mb);
        let queued_bytes = total / 4;
        let for_files = (total - queued_bytes).saturating_sub(mb(c.dedupe_memory_mb));
        let file_bytes = (for_files / (FILES_IN_MEMORY * shards)).min(c.max_file_bytes);
        if file_bytes < mb(1) {
            return Err(format!(
                "collector.max_memory_mb = {} leaves less than 1 MB per shard for open files after \
                 collector.dedupe_memory_mb = {} and the queue (a quarter); raise it or lower dedupe_memory_mb",
                c.max_memory_mb, c.dedupe_memory_mb
            ));
        }
        Ok(Budget {
            filter_bytes: super::dedupe_filter_bytes(c.dedupe_memory_mb, shards),
            queued_bytes,
            file_bytes,
        })
    }
}

/// The queued-batch pool: a batch enters only if its bytes fit.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    used: Arc<AtomicUsize>,
    max: usize,
}

/// Bytes held in the pool until dropped (when the writer has committed the batch).
#[derive(Debug, Default)]
pub struct Reservation {
    used: Option<Arc<AtomicUsize>>,
    bytes: usize,
}

impl Gate {
    pub fn new(max: usize) -> Gate {
        Gate {
            used: Arc::default(),
            max,
        }
    }

    /// Takes `bytes` from the pool, or `None` when they do not fit. An empty pool takes any
    /// batch, so one larger than the pool is never refused forever.
    pub fn reserve(&self, bytes: usize) -> Option<Reservation> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used > 0 && used + bytes > self.max {
                return None;
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Reservation {
                        used: Some(self.used.clone()),
                        bytes,
                    })
                }
                Err(now) => used = now,
            }
        }
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(used) = &self.used {
            used.fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_refuses_what_does_not_fit_and_frees_on_drop() {
        let gate = Gate::new(100);
        let a = gate.reserve(60).unwrap();
        assert!(gate.reserve(50).is_none());
        let b = gate.reserve(40).unwrap();
        assert_eq!(gate.used(), 100);
        drop(a);
        drop(b);
        assert_eq!(gate.used(), 0);
        let big = gate.reserve(500).expect("an empty pool takes any batch");
        assert!(gate.reserve(1).is_none());
        drop(big);
    }

    #[test]
    fn the_default_budget_splits_256_mb() {
        let mut c = crate::config::Settings::load(None).unwrap().collector;
        c.max_memory_mb = 256;
        c.dedupe_memory_mb = 64;
        let b = Budget::new(&c, 2).unwrap();
        assert_eq!(b.queued_bytes, 64 << 20);
        assert_eq!(b.file_bytes, (128 << 20) / 8);
        assert_eq!(b.filter_bytes, (64 << 20) / 6, "3 generations x 2 shards");
        c.max_memory_mb = 80;
        assert!(
            Budget::new(&c, 2).is_err(),
            "too small for the dedupe filters"
        );
    }
}
