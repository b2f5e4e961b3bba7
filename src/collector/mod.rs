//! The analytics collector: `POST /api/w/analytics/collect` to a durable Parquet lake.
//!
//! ```text
//! http (auth, limits, simd-json parse, validate, enrich)        collector/http.rs, decode/
//!   -> route by hash(app, anonymousId) over bounded queues       Collector::submit (mod.rs)
//!   -> shard writer: dedupe, WAL append + fsync, reply            writer.rs, wal.rs, dedupe/
//!   -> open Parquet files per (app, hour), row group by group     columns.rs (from event.rs)
//!   -> stager: files to the parts on disk, checkpoint, trim       stager.rs, outbox.rs
//!      (+ the traffic rollups, applied once per LSN before the checkpoint)   rollup/
//!   -> uploader: parts of an app-hour merged into one outbox file merge.rs
//!      outbox -> object_store put, delete                         uploader.rs, lake.rs, retry.rs
//! ```
//!
//! Nothing on the way to the answer waits for the object store: a lake that is away grows the
//! outbox on disk (`health.rs`: the backlog and its budget), and every request is answered
//! within `collector.answer_timeout_ms`.
//!
//! Architecture invariant: a 200 from the collector means every accepted event of the batch is
//! fsync'd in a shard's WAL. Architecture invariant: every queue is bounded; a full shard queue
//! is answered 503 + Retry-After at the edge, never buffered without bound.

pub mod agent;
pub mod budget;
pub mod columns;
pub mod decode;
pub mod dedupe;
pub mod event;
pub mod gate;
pub mod geo;
pub mod health;
pub mod http;
pub mod lake;
pub mod merge;
pub mod metrics;
pub mod outbox;
pub mod quarantine;
pub mod quota;
pub mod retry;
pub mod rollup;
pub mod segment;
pub mod settle;
pub mod shard;
pub mod stager;
pub mod uploader;
pub mod usage;
pub mod wal;
pub mod writer;
pub mod written;

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender, TrySendError};
use object_store::ObjectStore;

use crate::clock::Clock;
use crate::config::{CollectorSettings, Settings};
use crate::storage::queue::UPLINK;
use crate::storage::Db;
pub use event::{Event, EventType, Record, Records, Text};
pub use gate::{AppGate, Gatekeeper};
use health::Health;
use metrics::Metrics;
use outbox::Outbox;
use retry::{Backoff, Shutdown};
use stager::Stager;
use uploader::Uploader;
pub use writer::{Committed, WriteError};

#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error("{0}")]
    Lake(#[from] lake::LakeError),
    #[error("{0}")]
    Config(String),
    #[error("the quarantine thread: {0}")]
    Quarantine(std::io::Error),
    #[error("shard {shard}: {source}")]
    Shard {
        shard: usize,
        source: std::io::Error,
    },
}

/// Why a batch could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// A shard's queue is full: retry later.
    #[error("a shard queue is full")]
    Overloaded,
    /// The backlog waiting for the lake reached `collector.max_backlog_mb`: retry later.
    #[error("the backlog waiting for the lake is at its budget")]
    Backlogged,
    /// A shard did not answer within `collector.answer_timeout_ms`: retry later (the retry is
    /// deduplicated if the batch was committed meanwhile).
    #[error("a shard did not answer in time")]
    TimedOut,
    /// A shard failed to write.
    #[error(transparent)]
    Failed(#[from] WriteError),
}

/// What became of a batch handed to the shards.
#[derive(Debug, Default)]
pub struct Submitted {
    /// What the shards that answered committed (even when another one failed).
    pub committed: Committed,
    /// Events of shards that did not answer by the deadline: they may still be committed.
    pub pending: usize,
    /// Why not all of the batch was committed.
    pub error: Option<SubmitError>,
}

impl Submitted {
    fn failed(e: SubmitError) -> Submitted {
        Submitted {
            error: Some(e),
            ..Submitted::default()
        }
    }

    /// The events that are or may be in the lake: what a plan quota counts.
    pub fn counted(&self) -> u64 {
        (self.committed.accepted + self.pending) as u64
    }

    pub fn result(self) -> Result<Committed, SubmitError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.committed),
        }
    }
}

/// Handle to the shard writers; shared by every HTTP worker.
pub struct Collector {
    queues: Vec<Sender<writer::Msg>>,
    pub metrics: Metrics,
    /// The `events_per_month` counters (`quota.rs`).
    pub quotas: quota::Quotas,
    /// The last refused events of each app (`quarantine.rs`).
    pub quarantine: quarantine::Keeper,
    /// The address database (`geo.rs`), when `collector.geoip_database` names one.
    pub places: Option<geo::Places>,
    pub clock: Arc<dyn Clock>,
    /// What is broken behind the edge, and the backlog with its budget.
    pub health: Arc<Health>,
    /// The traffic rollups committed and not yet in sled (`rollup/live.rs`), which the
    /// traffic reads add to the stored ones.
    pub rollups: Arc<rollup::live::Live>,
    /// How long `submit` waits for the shards.
    answer_timeout: Duration,
    /// The queued-batch pool of the memory budget (`budget.rs`).
    gate: budget::Gate,
    /// Each shard's parts, outbox and checkpoint (retired shards too), for `settle`.
    files: Vec<settle::ShardFiles>,
    /// Each uploader's wake-up (`settle`), dropped at shutdown so the uploaders can end.
    wakes: Mutex<Vec<Sender<()>>>,
    /// The apps being settled (`settle.rs`).
    urgent: Arc<merge::Urgent>,
    /// Writer threads, then uploader threads: joined in that order at shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
    shutdown: Arc<Shutdown>,
}

/// The number of shards `collector.shards` asks for. 0 is automatic: as many as the data
/// directory already has (an upgrade never reshards, so a retry still meets its messageId's
/// shard), else one per two CPU cores, at least one. The HTTP workers take more than half of
/// the CPU at saturation (BENCHMARKS.md): on 2 cores one shard takes as many events per second
/// as two, with 11% less CPU per event and less memory.
fn shard_count(configured: usize, data_dir: &Path) -> usize {
    match (configured, shard_dirs_from(data_dir, 0)) {
        (0, 0) => std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
        (0, existing) => existing,
        (n, _) => n,
    }
}

/// The size of one dedupe filter: `collector.dedupe_memory_mb` shared by every shard's
/// generations.
pub fn dedupe_filter_bytes(dedupe_memory_mb: usize, shards: usize) -> usize {
    (dedupe_memory_mb << 20) / (shards.max(1) * dedupe::GENERATIONS as usize)
}

/// What the writer of shard `index` is given; a `retired` shard (beyond `collector.shards`)
/// takes no events, so its filters only serve its replay.
fn writer_config(
    settings: &Settings,
    budget: &budget::Budget,
    index: usize,
    retired: bool,
) -> writer::WriterConfig {
    let c = &settings.collector;
    writer::WriterConfig {
        index,
        node_id: c.node_id.clone(),
        dir: shard_dir(&settings.storage.data_dir, index),
        prefix: settings.lake.prefix.clone(),
        max_rows: c.max_file_rows.max(1),
        max_bytes: c.max_file_bytes.max(1),
        max_memory: budget.file_bytes,
        max_age: Duration::from_millis(c.max_file_age_ms.max(1)),
        dedupe_filter_bytes: if retired {
            RETIRED_FILTER_BYTES
        } else {
            budget.filter_bytes
        },
        count_bots: c.count_bots,
        uplink: settings.fleet.is_edge().then_some(UPLINK),
    }
}

/// The memory and backlog budgets the collector starts with.
fn log_budgets(
    c: &CollectorSettings,
    shards: usize,
    budget: &budget::Budget,
    backlog: u64,
    backlog_budget: u64,
) {
    tracing::info!(
        shards,
        file_mb = budget.file_bytes >> 20,
        queued_mb = budget.queued_bytes >> 20,
        dedupe_mb = c.dedupe_memory_mb,
        "collector memory budget"
    );
    tracing::info!(
        backlog_mb = backlog >> 20,
        budget_mb = backlog_budget >> 20,
        lake_file_mb = c.lake_file_mb,
        "collector backlog (WAL, parts and outbox files not in the lake yet)"
    );
}

/// When a shard's parts are merged into lake files: the parts of all shards may take a
/// quarter of the backlog budget before the biggest groups are merged early.
fn merge_policy(c: &CollectorSettings, backlog_budget: u64, shards: usize) -> merge::Policy {
    merge::Policy {
        file_bytes: c.lake_file_mb.max(1) << 20,
        max_wait: (c.lake_file_max_wait_ms > 0)
            .then(|| Duration::from_millis(c.lake_file_max_wait_ms)),
        max_parts: backlog_budget / 4 / shards.max(1) as u64,
    }
}

/// The dedupe filter of a shard beyond `collector.shards`, which only replays its WAL.
const RETIRED_FILTER_BYTES: usize = 64 * 1024;

/// How many shard directories exist from index `n` on (`wal/shard-<i>`, `i >= n`, counted
/// until the first missing index). From `collector.shards` on, they are shards of an earlier,
/// larger count: retired.
fn shard_dirs_from(data_dir: &Path, n: usize) -> usize {
    (n..)
        .take_while(|&i| shard_dir(data_dir, i).is_dir())
        .count()
}

/// What every shard's threads share.
struct Common<'a> {
    settings: &'a Settings,
    budget: &'a budget::Budget,
    db: &'a Db,
    lake: &'a Arc<dyn ObjectStore>,
    clock: &'a Arc<dyn Clock>,
    health: &'a Arc<Health>,
    shutdown: &'a Arc<Shutdown>,
    rollups: &'a Arc<rollup::live::Live>,
    gate: &'a Arc<dyn Gatekeeper>,
    merge: merge::Policy,
    urgent: &'a Arc<merge::Urgent>,
}

/// One shard's threads, just started.
struct Shard {
    queue: Sender<writer::Msg>,
    writer: writer::Starting,
    /// Its stager, then its uploader.
    background: [JoinHandle<()>; 2],
    files: settle::ShardFiles,
    /// Wakes its uploader (`settle`); dropped at shutdown, or the uploader would never end.
    wake: Sender<()>,
}

impl Common<'_> {
    /// Starts shard `index`: its uploader, its stager and its writer (which replays its WAL).
    fn spawn_shard(
        &self,
        index: usize,
        retired: bool,
        checkpoint: Arc<AtomicU64>,
        counters: Arc<metrics::ShardCounters>,
    ) -> std::io::Result<Shard> {
        let c = &self.settings.collector;
        let dir = shard_dir(&self.settings.storage.data_dir, index);
        let ids = dedupe::Index::open(&dir, self.clock.now_micros())?;
        let (wake_tx, wake_rx) = bounded(1);
        let bg = shard::Background {
            index,
            dir: dir.clone(),
            outbox: Outbox::new(&dir),
            parts: Outbox::parts(&dir),
            merge: self.merge.clone(),
            urgent: self.urgent.clone(),
            handed: Arc::default(),
            db: self.db.clone(),
            counters: counters.clone(),
            health: self.health.clone(),
            shutdown: self.shutdown.clone(),
            patience: Duration::from_millis(c.shutdown_upload_timeout_ms),
            backoff: Backoff::default(),
            clock: self.clock.clone(),
            checkpoint,
        };
        let bg_handed = bg.handed.clone();
        let uploader = Uploader {
            bg: bg.clone(),
            store: self.lake.clone(),
        };
        let files = settle::ShardFiles {
            parts: bg.parts.clone(),
            outbox: bg.outbox.clone(),
            checkpoint: bg.checkpoint.clone(),
            wal: bg.dir.clone(),
            prefix: self.settings.lake.prefix.clone(),
        };
        let wake = wake_tx.clone();
        let (stage_tx, stage_rx) = bounded(1);
        let stager = Stager {
            bg: shard::Background {
                // At shutdown a flush that fails to stage (a full disk) is left in the WAL at
                // once: waiting would only hold the exit up.
                patience: Duration::ZERO,
                ..bg
            },
            dedupe: ids.clone(),
            rollups: self.rollups.clone(),
            wake: wake_tx,
            uplink: self.settings.fleet.is_edge().then_some(UPLINK),
            keep_spare: !retired,
        };
        let background = [
            stager::spawn(stager, stage_rx)?,
            uploader::spawn(uploader, wake_rx)?,
        ];
        let (queue, rx) = bounded(c.queue_batches.max(1));
        let parts = writer::Parts {
            cfg: writer_config(self.settings, self.budget, index, retired),
            db: self.db.clone(),
            clock: self.clock.clone(),
            counters,
            stager: stage_tx,
            health: self.health.clone(),
            index: ids,
            rollups: self.rollups.clone(),
            handed: bg_handed,
            gate: self.gate.clone(),
        };
        Ok(Shard {
            queue,
            writer: writer::spawn(parts, rx)?,
            background,
            files,
            wake,
        })
    }
}

/// Each shard's checkpoint, and the backlog (WAL, parts and outbox bytes) and the parts and
/// outbox files of all, once a cut merge is finished and the parts and each outbox are
/// recovered up to the checkpoint.
fn recover(
    data_dir: &Path,
    shards: usize,
) -> Result<(Vec<Arc<AtomicU64>>, u64, u64), CollectorError> {
    let failed = |shard| move |source| CollectorError::Shard { shard, source };
    let (mut backlog, mut outbox_files) = (0, 0);
    let mut checkpoints = Vec::with_capacity(shards);
    for index in 0..shards {
        let dir = shard_dir(data_dir, index);
        let checkpoint = wal::read_checkpoint(&dir).map_err(failed(index))?;
        if dir.is_dir() {
            merge::recover(&dir).map_err(failed(index))?;
        }
        for store in [Outbox::parts(&dir), Outbox::new(&dir)] {
            let (files, staged) = store.recover(checkpoint).map_err(failed(index))?;
            outbox_files += files;
            backlog += staged;
        }
        backlog += wal::bytes(&dir).or_else(none_yet).map_err(failed(index))?;
        checkpoints.push(Arc::new(AtomicU64::new(checkpoint)));
    }
    Ok((checkpoints, backlog, outbox_files))
}

/// A directory that does not exist yet holds nothing.
fn none_yet(e: std::io::Error) -> std::io::Result<u64> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(0)
    } else {
        Err(e)
    }
}

/// The directory of shard `index`: its WAL, checkpoint, outbox and dedupe files.
pub fn shard_dir(data_dir: &Path, index: usize) -> std::path::PathBuf {
    data_dir.join("wal").join(format!("shard-{index}"))
}

/// The shard of a visitor: FNV-1a over `app \0 visitor`, a hash fixed by its specification,
/// so a retry reaches the same shard (and its dedupe memory) after any upgrade.
pub fn shard_of(app_id: &str, visitor: &str, shards: usize) -> usize {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = app_id.bytes().chain([0]).chain(visitor.bytes());
    let h = bytes.fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    (h % shards.max(1) as u64) as usize
}

impl Collector {
    /// Starts one writer, one stager and one uploader per shard over `lake`; each writer first
    /// replays its WAL (in parallel, into the outbox; start-up never waits for the object
    /// store), and the uploaders ship the outboxes in the background.
    pub fn start(
        settings: &Settings,
        db: &Db,
        lake: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
        gate: Arc<dyn Gatekeeper>,
    ) -> Result<Collector, CollectorError> {
        let c = &settings.collector;
        let data_dir = &settings.storage.data_dir;
        let n = shard_count(c.shards, data_dir);
        let budget = budget::Budget::new(c, n).map_err(CollectorError::Config)?;
        // Directories of shards beyond `n` (the count was lowered): started too, so their WALs
        // replay into the lake, then stopped at once; they take no new events.
        let retired = shard_dirs_from(data_dir, n);
        let total = n + retired;
        let failed = |shard| move |source| CollectorError::Shard { shard, source };
        let (checkpoints, backlog, outbox_files) = recover(data_dir, total)?;
        let backlog_budget = health::backlog_budget(c.max_backlog_mb, data_dir, backlog);
        let health = Arc::new(Health::new(backlog_budget, data_dir, total));
        health.add_backlog(backlog as i64, clock.now_micros());
        health.gauges.outbox_files.set(outbox_files as i64);
        let shutdown = Arc::new(Shutdown::default());
        let mut metrics = Metrics::new(total);
        metrics.register_health(&health.gauges);
        let quarantine = quarantine::Keeper::start(db, c, &metrics.edge.quarantine)
            .map_err(CollectorError::Quarantine)?;
        let places = geo::Places::open(&c.geoip_database).map_err(CollectorError::Config)?;
        let mut queues = Vec::with_capacity(n);
        let mut starting = Vec::with_capacity(total);
        let mut background = Vec::with_capacity(2 * total);
        let mut files = Vec::with_capacity(total);
        let mut wakes = Vec::with_capacity(total);
        let rollups = Arc::new(rollup::live::Live::new(total));
        let urgent = Arc::default();
        let common = Common {
            merge: merge_policy(c, backlog_budget, total),
            urgent: &urgent,
            gate: &gate,
            settings,
            budget: &budget,
            db,
            lake: &lake,
            clock: &clock,
            health: &health,
            shutdown: &shutdown,
            rollups: &rollups,
        };
        for (index, checkpoint) in checkpoints.into_iter().enumerate() {
            let counters = Arc::new(metrics.shards[index].clone());
            let shard = common
                .spawn_shard(index, index >= n, checkpoint, counters)
                .map_err(failed(index))?;
            starting.push(shard.writer);
            files.push(shard.files);
            wakes.push(shard.wake);
            // Stagers end before uploaders (which then ship what is left): joined in order.
            background.extend(shard.background);
            if index < n {
                queues.push(shard.queue);
            } else {
                tracing::info!(
                    shard = index,
                    shards = n,
                    "shard beyond collector.shards: its WAL is replayed, then it stops"
                );
                // The writer serves its queue after the replay: `Stop` is its first message.
                let _ = shard.queue.send(writer::Msg::Stop);
            }
        }
        let mut threads = Vec::with_capacity(3 * total);
        let mut failure = None;
        for (index, s) in starting.into_iter().enumerate() {
            match s.wait() {
                Ok(t) => threads.push(t),
                Err(e) => failure = failure.or(Some(failed(index)(e))),
            }
        }
        threads.extend(background);
        let collector = Collector {
            queues,
            metrics,
            quotas: quota::Quotas::default(),
            quarantine,
            places,
            clock,
            health,
            rollups,
            answer_timeout: Duration::from_millis(c.answer_timeout_ms.max(1)),
            gate: budget::Gate::new(budget.queued_bytes),
            threads: Mutex::new(threads),
            shutdown,
            files,
            wakes: Mutex::new(wakes),
            urgent,
        };
        log_budgets(c, n, &budget, backlog, backlog_budget);
        if let Some(e) = failure {
            collector.shutdown();
            return Err(e);
        }
        tracing::info!(shards = n, lake = %settings.lake.kind, "collector started");
        Ok(collector)
    }

    fn shard_of(&self, e: &Event<'_>) -> usize {
        shard_of(&e.app_id, e.visitor(), self.queues.len())
    }

    /// Hands the events to their shards and waits until they are durable, at most
    /// `collector.answer_timeout_ms`.
    pub async fn submit(&self, events: Vec<Event<'_>>) -> Result<Committed, SubmitError> {
        self.submit_all(events).await.result()
    }

    /// `submit`, saying also what the shards committed when another one failed, and how many
    /// events a shard still holds past the deadline (the plan quota counts both).
    pub async fn submit_all(&self, events: Vec<Event<'_>>) -> Submitted {
        if self.health.over_budget() {
            return Submitted::failed(SubmitError::Backlogged);
        }
        let deadline = tokio::time::Instant::now() + self.answer_timeout;
        // Each shard's events in their WAL form, in two buffers (sized for the usual record).
        let per_shard = {
            let n = self.queues.len();
            let guess = events.len() / n + 1;
            let mut per_shard: Vec<Records> =
                (0..n).map(|_| Records::with_capacity(guess)).collect();
            for e in &events {
                let i = if n == 1 { 0 } else { self.shard_of(e) };
                per_shard[i].push(e);
            }
            per_shard
        };
        drop(events);
        let mut waiting = Vec::new();
        let mut overloaded = false;
        let mut failure = None;
        for (i, events) in per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, e)| !e.is_empty())
        {
            let bytes = events.approx_bytes();
            let Some(held) = self.gate.reserve(bytes) else {
                overloaded = true;
                continue;
            };
            let count = events.len();
            let (reply, answer) = tokio::sync::oneshot::channel();
            let sent = self.queues[i].try_send(writer::Msg::Write {
                events,
                reply,
                held,
            });
            self.metrics.shards[i]
                .queue_depth
                .set(self.queues[i].len() as i64);
            match sent {
                Ok(()) => waiting.push((answer, count)),
                Err(TrySendError::Full(_)) => overloaded = true,
                Err(TrySendError::Disconnected(_)) => {
                    failure = Some(WriteError::Stopped);
                    break;
                }
            }
        }
        // Wait for what was sent even when another shard was full: a retry of the whole batch
        // is then deduplicated by messageId. A shard that does not answer in time keeps the
        // batch queued (it is committed later, or dropped by a stopped writer); the client's
        // retry meets it in the dedupe memory.
        let mut out = Submitted::default();
        for (answer, count) in waiting {
            match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(Ok(c))) => {
                    out.committed.accepted += c.accepted;
                    out.committed.duplicates += c.duplicates;
                }
                Ok(Ok(Err(e))) => failure = Some(e),
                Ok(Err(_)) => failure = Some(WriteError::Stopped),
                Err(_) => out.pending += count,
            }
        }
        out.error = match (failure, out.pending > 0, overloaded) {
            (Some(e), _, _) => Some(SubmitError::Failed(e)),
            (None, true, _) => Some(SubmitError::TimedOut),
            (None, false, true) => Some(SubmitError::Overloaded),
            (None, false, false) => None,
        };
        out
    }

    /// Drains every queue, flushes every open file to the lake, and waits for the threads.
    pub fn shutdown(&self) {
        self.shutdown.begin();
        for q in &self.queues {
            let _ = q.send(writer::Msg::Stop);
        }
        self.wakes.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        self.quarantine.stop();
        tracing::info!("collector stopped; every accepted event is in the lake or the WAL");
    }

    /// `/metrics` text.
    pub fn metrics(&self) -> String {
        self.health.refresh(self.clock.now_micros());
        self.metrics.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: usize) -> Event<'static> {
        Event::example("a", &format!("msg_{n}"), "v", 1)
    }

    #[test]
    fn shard_routing_is_pinned_across_releases() {
        // FNV-1a of "app\0visitor": these values must never change.
        assert_eq!(
            shard_of("app", "visitor", usize::MAX),
            0x9967_271e_ad27_263e % usize::MAX
        );
        assert_eq!(shard_of("app", "visitor", 4), 2);
        let spread: std::collections::HashSet<_> = (0..64)
            .map(|i| shard_of("a", &format!("v{i}"), 4))
            .collect();
        assert_eq!(spread.len(), 4);
    }

    #[test]
    fn automatic_shards_keep_what_the_data_dir_has_and_a_lower_count_retires_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(shard_count(0, dir.path()), (cores / 2).max(1));
        for i in 0..3 {
            std::fs::create_dir_all(shard_dir(dir.path(), i)).unwrap();
        }
        assert_eq!(shard_count(0, dir.path()), 3);
        assert_eq!(shard_count(1, dir.path()), 1);
        assert_eq!(shard_dirs_from(dir.path(), 1), 2);
        assert_eq!(shard_dirs_from(dir.path(), 3), 0);
    }

    /// A collector over one shard queue that nobody serves unless the test does.
    fn unserved(queue: Sender<writer::Msg>, budget: u64, timeout: Duration) -> Collector {
        let dir = std::env::temp_dir();
        Collector {
            queues: vec![queue],
            metrics: Metrics::new(1),
            quotas: quota::Quotas::default(),
            quarantine: quarantine::Keeper::stopped(),
            places: None,
            clock: Arc::new(crate::clock::SystemClock),
            health: Arc::new(Health::new(budget, &dir, 1)),
            rollups: Arc::default(),
            answer_timeout: timeout,
            gate: budget::Gate::default(),
            threads: Mutex::default(),
            shutdown: Arc::default(),
            files: Vec::new(),
            wakes: Mutex::default(),
            urgent: Arc::default(),
        }
    }

    #[tokio::test]
    async fn a_stuck_shard_is_answered_timed_out_and_a_full_backlog_backlogged() {
        let (tx, rx) = bounded(8);
        let collector = unserved(tx, 1000, Duration::from_millis(50));
        let started = std::time::Instant::now();
        assert!(matches!(
            collector.submit(vec![event(1)]).await,
            Err(SubmitError::TimedOut)
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(rx.len(), 1, "the batch stays queued for the shard");
        assert_eq!(collector.metrics.shards[0].queue_depth.get(), 1);
        collector.health.add_backlog(1000, 0);
        assert!(matches!(
            collector.submit(vec![event(2)]).await,
            Err(SubmitError::Backlogged)
        ));
        assert_eq!(rx.len(), 1, "refused before it reaches a shard");
    }

    #[tokio::test]
    async fn the_quota_counts_what_a_shard_may_still_commit_and_not_what_never_reached_one() {
        let (tx, _rx) = bounded(8);
        let collector = unserved(tx, 1000, Duration::from_millis(20));
        let stuck = collector.submit_all(vec![event(1), event(2)]).await;
        assert!(matches!(stuck.error, Some(SubmitError::TimedOut)));
        assert_eq!((stuck.pending, stuck.counted()), (2, 2));
        collector.health.add_backlog(1000, 0);
        let refused = collector.submit_all(vec![event(3)]).await;
        assert!(matches!(refused.error, Some(SubmitError::Backlogged)));
        assert_eq!(refused.counted(), 0);
        let (tx, rx) = bounded(8);
        drop(rx);
        let stopped = unserved(tx, u64::MAX, Duration::from_secs(5));
        let failed = stopped.submit_all(vec![event(4)]).await;
        assert!(matches!(
            failed.error,
            Some(SubmitError::Failed(WriteError::Stopped))
        ));
        assert_eq!(failed.counted(), 0);
    }

    #[tokio::test]
    async fn a_full_shard_queue_answers_overloaded_instead_of_buffering() {
        let (tx, rx) = bounded(1);
        let collector = unserved(tx, u64::MAX, Duration::from_secs(60));
        let collector = Arc::new(collector);
        // The first batch takes the only slot; nobody serves the queue, so it waits.
        let first = tokio::spawn({
            let c = collector.clone();
            async move { c.submit(vec![event(1)]).await }
        });
        while rx.is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(matches!(
            collector.submit(vec![event(2)]).await,
            Err(SubmitError::Overloaded)
        ));
        // Once the shard answers, the waiting batch completes.
        let Ok(writer::Msg::Write { reply, events, .. }) = rx.recv() else {
            panic!("expected a write")
        };
        assert_eq!(events.len(), 1);
        reply
            .send(Ok(Committed {
                accepted: 1,
                duplicates: 0,
            }))
            .unwrap();
        assert_eq!(
            first.await.unwrap().unwrap(),
            Committed {
                accepted: 1,
                duplicates: 0
            }
        );
    }
}
