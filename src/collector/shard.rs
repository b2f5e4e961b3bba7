//! What a shard's background threads, its stager and its uploader (which also merges the
//! parts), share: where the shard lives, its handles, and the rules they work under.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::health::Health;
use super::merge::{Policy, Urgent};
use super::metrics::ShardCounters;
use super::outbox::Outbox;
use super::retry::{Backoff, Shutdown};
use crate::clock::Clock;
use crate::storage::Db;

#[derive(Clone)]
pub struct Background {
    pub index: usize,
    /// The shard's directory (WAL, checkpoint, outbox, dedupe files).
    pub dir: PathBuf,
    pub outbox: Outbox,
    /// Flushed files waiting to be merged into lake files (`merge.rs`).
    pub parts: Outbox,
    /// When parts are merged.
    pub merge: Policy,
    /// The apps being settled: their parts are merged at once.
    pub urgent: Arc<Urgent>,
    /// What the writer has handed over (the merger's hour rule).
    pub handed: Arc<Handed>,
    pub db: Db,
    pub counters: Arc<ShardCounters>,
    pub health: Arc<Health>,
    pub shutdown: Arc<Shutdown>,
    /// How long after the shutdown began failing work is still retried.
    pub patience: Duration,
    pub backoff: Backoff,
    pub clock: Arc<dyn Clock>,
    /// The shard's checkpoint: the stager moves it, the uploader ships only what it covers.
    pub checkpoint: Arc<AtomicU64>,
}

/// What the shard's writer has handed over, for the merger's hour rule: the earliest hour of
/// its open files and the last LSN it handed to the stager. Every row of the hours before
/// [`Handed::hours_done`] is in parts at or below the checkpoint.
#[derive(Debug)]
pub struct Handed {
    /// µs / hour; `i64::MAX` when nothing is open.
    first_open_hour: AtomicI64,
    last_lsn: AtomicU64,
}

impl Default for Handed {
    fn default() -> Self {
        Handed {
            first_open_hour: AtomicI64::new(i64::MAX),
            last_lsn: AtomicU64::new(0),
        }
    }
}

impl Handed {
    /// The writer opened a file of `hour` (µs / hour).
    pub fn opened(&self, hour: i64) {
        self.first_open_hour.fetch_min(hour, Ordering::SeqCst);
    }

    /// The writer handed every open file over, up to `last_lsn`. The LSN is published first,
    /// so a reader that sees no open hour also sees the flush that took them.
    pub fn handed(&self, last_lsn: u64) {
        self.last_lsn.store(last_lsn, Ordering::SeqCst);
        self.first_open_hour.store(i64::MAX, Ordering::SeqCst);
    }

    /// The first hour that may still have rows outside the checkpointed parts (`i64::MIN`
    /// while a flush handed over is not checkpointed yet).
    pub fn hours_done(&self, checkpoint: u64) -> i64 {
        let open = self.first_open_hour.load(Ordering::SeqCst);
        if checkpoint >= self.last_lsn.load(Ordering::SeqCst) {
            open
        } else {
            i64::MIN
        }
    }
}
