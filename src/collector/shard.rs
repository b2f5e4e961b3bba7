//! What a shard's background threads, its stager and its uploader (which also merges the
//! parts), share: where the shard lives, its handles, and the rules they work under.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::health::Health;
use super::merge::Policy;
use super::metrics::ShardCounters;
use super::outbox::Outbox;
use super::retry::{Backoff, Shutdown};
use super::settle::Urgent;
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
