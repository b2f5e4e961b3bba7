//! The shard writer actor: one thread per shard, fed by a bounded queue.
//!
//! `edge -> [bounded queue] -> writer -> [queue of 1] -> stager (stager.rs) -> outbox -> uploader`
//!
//! For each group of batches waiting in its queue (group commit), the writer:
//! 1. drops duplicates by messageId and fills in the userId of identified visitors;
//! 2. appends the events to its WAL and fsyncs once;
//! 3. folds identify / group calls into the profiles (sled), then answers each batch (the HTTP
//!    200 waits for all this);
//! 4. remembers the messageIds (`dedupe/`), counts usage (in sled every 250 ms), appends the rows to
//!    Arrow builders, one per (app, hour) partition, and to the traffic rollups' live `Delta`
//!    (`rollup/live.rs`: counted by the traffic reads from now on; rows at or below the shard's
//!    rollup LSN, already counted, are left out);
//! 5. on rows, bytes or age, rotates the WAL and hands the open files to its stager, unless the
//!    stager still has a flush waiting: then the files stay open, and once they are full the
//!    writer answers `Full` (503 + Retry-After) until the stager takes them. The writer never
//!    waits for the stager, the outbox or the object store.
//!
//! At start it replays what its WAL holds beyond the checkpoint through the same steps 3-5.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::columns::{Encoder, OpenFile};
use super::dedupe::{self, FingerprintMap, FingerprintSet, Seen};
use super::event::{Event, EventType, Record, Records};
use super::gate::{AppGate, Gatekeeper};
use super::health::{Check, Health};
use super::metrics::ShardCounters;
use super::stager::{Encoded, Flush};
use super::{lake, rollup, usage, wal};
use crate::clock::Clock;
use crate::profiles::{self, Change, Touch};
use crate::storage::Db;

/// Batches taken together into one group commit.
const MAX_GROUP: usize = 128;
/// Entries of the identity cache before it is cleared.
const MAX_CACHED_IDENTITIES: usize = 100_000;
/// The longest an idle writer sleeps before it looks at the clock again (file age, day).
const TICK: Duration = Duration::from_millis(500);
/// How long after a failed flush the next one is tried.
const FLUSH_RETRY: Duration = Duration::from_secs(1);
const HOUR_MICROS: i64 = 3_600_000_000;
/// How long after finding its stager busy the writer tries to hand its files over again.
const STAGER_RETRY: Duration = Duration::from_millis(50);

/// What a writer needs to know.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub index: usize,
    pub node_id: String,
    /// The shard's directory: WAL segments, checkpoint, intent, dedupe files.
    pub dir: PathBuf,
    /// Prefix of every lake path.
    pub prefix: String,
    pub max_rows: usize,
    /// Estimated event bytes of the open files (`collector.max_file_bytes`).
    pub max_bytes: usize,
    /// Memory of the open files (compressed row groups and builders): the budget's share.
    pub max_memory: usize,
    pub max_age: Duration,
    /// Bytes of each of the shard's dedupe filters (one per generation).
    pub dedupe_filter_bytes: usize,
    /// Bots (`is_bot`) counted in the rollups (`collector.count_bots`).
    pub count_bots: bool,
    /// On an edge: the uplink queue that takes the profile touches too.
    pub uplink: Option<crate::storage::queue::Queue>,
}

/// What a writer is made from: its settings and the handles it shares with the collector.
pub struct Parts {
    pub cfg: WriterConfig,
    pub db: Db,
    pub clock: Arc<dyn Clock>,
    pub counters: Arc<ShardCounters>,
    /// Where closed files go to be staged (a queue of 1).
    pub stager: Sender<Flush>,
    pub health: Arc<Health>,
    /// The shard's dedupe index on disk.
    pub index: Arc<dedupe::Index>,
    /// Where the writer counts its committed rows for the traffic reads (`rollup/live.rs`).
    pub rollups: Arc<rollup::live::Live>,
    /// Where the writer says what it has handed over (the merger's hour rule).
    pub handed: Arc<super::shard::Handed>,
    /// Apps being deleted and erased persons, checked again at commit.
    pub gate: Arc<dyn Gatekeeper>,
}

/// The answer to one batch: it is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Committed {
    pub accepted: usize,
    pub duplicates: usize,
}

/// An event the group commit keeps, read from its batch's WAL record.
struct Kept<'b> {
    event: Event<'b>,
    /// Its record as the edge encoded it; `None` once the writer changed the event (a userId
    /// filled in), so the WAL gets it encoded again.
    record: Option<Record<'b>>,
}

/// Why a batch was not committed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    #[error("write-ahead log append failed: {0}")]
    Wal(Arc<std::io::Error>),
    #[error("the shard writer stopped")]
    Stopped,
    #[error("the shard writer stopped taking events after a Parquet encoding error: {0}")]
    Broken(Arc<str>),
    /// The open files are full and could not be handed over yet (the stager is busy, or the
    /// disk refuses the flush): retry later.
    #[error("the shard's open files are full and wait for the stager")]
    Full,
}

impl WriteError {
    /// Whether a retry can cure it (a full disk, a busy stager): 503, not 500.
    pub fn retryable(&self) -> bool {
        !matches!(self, WriteError::Broken(_))
    }
}

pub type Reply = tokio::sync::oneshot::Sender<Result<Committed, WriteError>>;

pub enum Msg {
    Write {
        events: Records,
        reply: Reply,
        /// The batch's share of the memory budget, freed once it is committed.
        held: super::budget::Reservation,
    },
    /// Hand the open files over as soon as the stager takes them (`settle.rs`); answers at
    /// once with the last committed LSN, which the stager's checkpoint passes once they are
    /// staged.
    Flush {
        reply: tokio::sync::oneshot::Sender<u64>,
    },
    /// Remove what the WAL's files keep beyond their records (`wal::Wal::scrub`), once the
    /// trim passed an app's events (`settle.rs`); answers with the outcome.
    Scrub {
        reply: tokio::sync::oneshot::Sender<std::io::Result<()>>,
    },
    /// Commit what is queued, flush every open file, stop.
    Stop,
}

/// The writer's own state: WAL, dedupe memory, open files.
pub struct Writer {
    cfg: WriterConfig,
    db: Db,
    clock: Arc<dyn Clock>,
    seen: Seen,
    /// anonymousId -> userId of this shard's visitors (all their events come here), misses
    /// included; bounded by clearing.
    identities: FingerprintMap<Option<String>>,
    wal: wal::Wal,
    /// The open files by app and hour.
    open: BTreeMap<Arc<str>, BTreeMap<i64, OpenFile>>,
    /// Encodes the open files' full row groups on a thread of its own.
    encoder: Encoder,
    /// Set by a Parquet encoding error (a bug, never input): the writer then refuses every
    /// batch and never flushes again, so nothing past the WAL's checkpoint is trimmed; a
    /// restart replays the WAL.
    broken: Option<Arc<str>>,
    first_open_lsn: Option<u64>,
    /// The LSN of the newest open row: what a flush checkpoints. Not the WAL's end: during a
    /// replay that flushes several times, the WAL already holds rows of the later flushes.
    last_open_lsn: u64,
    /// Clock time (µs) the oldest open row arrived.
    oldest: Option<i64>,
    /// The earliest hour (µs / hour) of the open files.
    first_hour: Option<i64>,
    rows: usize,
    bytes: usize,
    /// The open files' [`OpenFile::memory`], summed as appends change it (a file's changes
    /// only there), so the budget is checked at each commit without visiting every file.
    memory: usize,
    /// After a failed flush (the WAL cannot rotate), none is tried before this clock time
    /// (µs): a failing disk is retried once a second, not spun on.
    retry_flush_at: i64,
    stager: Sender<Flush>,
    health: Arc<Health>,
    /// Whether the last WAL append failed (reported in `health` until one works again).
    wal_failing: bool,
    counters: Arc<ShardCounters>,
    /// The rollups of the open rows (`rollup/`): counted in the shard's live delta, which is
    /// handed over with them.
    rollups: Arc<rollup::live::Live>,
    /// Rows at or below this LSN are in the rollups already (read at start): a replay skips them.
    rollup_lsn: u64,
    /// A `Flush` asked for the open files: handed over at the first chance, like aged ones.
    flush_asked: bool,
    handed: Arc<super::shard::Handed>,
    gate: Arc<dyn Gatekeeper>,
    /// Committed events not yet counted in sled's monthly usage.
    usage: usage::Pending,
}

impl Writer {
    /// Opens the shard's WAL (cutting a torn tail) and dedupe memory; returns the writer and
    /// the records beyond the checkpoint, to replay.
    pub fn open(parts: Parts) -> std::io::Result<(Writer, Vec<wal::Record>)> {
        let Parts { cfg, db, clock, .. } = parts;
        let counters = parts.counters;
        std::fs::create_dir_all(&cfg.dir)?;
        let checkpoint = wal::read_checkpoint(&cfg.dir)?;
        let (mut wal, replay) = wal::Wal::open(&cfg.dir, checkpoint)?;
        // The backlog counted the segments by their sizes before the open cut their ends.
        parts
            .health
            .add_backlog(wal.take_grown(), clock.now_micros());
        let rollup_lsn = db
            .with(|db| rollup::store::applied_lsn(db, cfg.index))
            .map_err(std::io::Error::other)?;
        let seen = Seen::open(
            parts.index,
            clock.now_micros(),
            cfg.dedupe_filter_bytes,
            counters.dedupe_disk_lookups.clone(),
        )?;
        let encoder = Encoder::spawn(format!("encoder-{}", cfg.index))?;
        let writer = Writer {
            seen,
            identities: FingerprintMap::default(),
            cfg,
            db,
            clock,
            wal,
            open: BTreeMap::new(),
            encoder,
            broken: None,
            first_open_lsn: None,
            last_open_lsn: 0,
            oldest: None,
            first_hour: None,
            rows: 0,
            bytes: 0,
            memory: 0,
            retry_flush_at: 0,
            stager: parts.stager,
            health: parts.health,
            wal_failing: false,
            counters,
            rollups: parts.rollups,
            rollup_lsn,
            flush_asked: false,
            handed: parts.handed,
            gate: parts.gate,
            usage: usage::Pending::default(),
        };
        Ok((writer, replay))
    }

    /// Puts the WAL's records back into open files, closing them by rows and bytes as usual,
    /// and hands them to the uploader.
    pub fn replay(&mut self, records: Vec<wal::Record>) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let index = self.cfg.index;
        let n = records.len();
        // Usage: what the counts miss (a crash before sled wrote them) is counted again.
        let counted = self
            .db
            .with(|db| usage::counted_lsn(db, index))
            .unwrap_or(u64::MAX);
        let (mut uncounted, mut last) = (usage::Counts::default(), 0);
        for r in records {
            match Event::decode_wal(&r.payload) {
                Some(e) => {
                    if r.lsn > counted {
                        uncounted.add(&e, 1);
                        last = r.lsn;
                    }
                    self.update_profile(&e);
                    let now = self.clock.now_micros();
                    let key = self.seen.index().fingerprint(&e.app_id, &e.message_id);
                    self.after_commit(&[&e], &[key], r.lsn, now);
                    self.count(&[&[&e]], r.lsn);
                }
                None => {
                    tracing::error!(shard = index, lsn = r.lsn, "unreadable WAL record skipped")
                }
            }
            if self.full() {
                self.flush(true)?;
            }
        }
        if !uncounted.is_empty() {
            let lsn = Some((index, last));
            if let Err(e) = self.db.with(|db| usage::add_counts(db, &uncounted, lsn)) {
                tracing::warn!(shard = index, error = %e, "usage counter not updated");
            }
        }
        self.flush(true)?;
        self.counters.replayed.inc_by(n as u64);
        tracing::info!(shard = index, events = n, "write-ahead log replayed");
        Ok(())
    }

    /// Serves the queue until `Stop` (or until every sender is gone), then flushes.
    pub fn run(mut self, rx: Receiver<Msg>) {
        loop {
            let stop = match rx.recv_timeout(self.wait()) {
                Ok(first) => {
                    let stop = self.take_group(first, &rx);
                    crate::memory::note_activity();
                    stop
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => true,
            };
            let may_retry = self.clock.now_micros() >= self.retry_flush_at;
            if stop || (may_retry && (self.aged() || self.full() || self.flush_asked)) {
                if let Err(e) = self.flush(stop) {
                    tracing::error!(shard = self.cfg.index, error = %e, "flush failed; the WAL keeps the events");
                    self.counters.flush_failures.inc();
                    self.retry_flush_at = self.clock.now_micros() + FLUSH_RETRY.as_micros() as i64;
                }
            }
            self.usage
                .write(&self.db, self.cfg.index, self.clock.now_micros(), stop);
            self.seen.roll(self.clock.now_micros());
            self.seen.poll_rebuilt();
            crate::memory::release_if_idle(crate::memory::Thread::Writer);
            if stop {
                tracing::info!(shard = self.cfg.index, "shard writer stopped");
                return;
            }
        }
    }

    /// How long to wait for the next batch: until the oldest open row ages out (or the next
    /// flush may be tried), at most a tick.
    fn wait(&self) -> Duration {
        let now = self.clock.now_micros();
        let usage = self.usage.due_at().map_or(TICK, |due| {
            Duration::from_micros(due.saturating_sub(now).max(0) as u64)
        });
        let Some(oldest) = self.oldest else {
            return usage.min(TICK);
        };
        let age = Duration::from_micros(now.saturating_sub(oldest).max(0) as u64);
        let retry = Duration::from_micros(self.retry_flush_at.saturating_sub(now).max(0) as u64);
        self.cfg
            .max_age
            .saturating_sub(age)
            .max(retry)
            .min(usage)
            .min(TICK)
    }

    /// Whether the oldest open row is `max_age` old, or an open file's hour is over (so an
    /// hour's last rows reach the merger within a tick of its end, not `max_age` later).
    fn aged(&self) -> bool {
        let now = self.clock.now_micros();
        let hour_over = self
            .first_hour
            .is_some_and(|h| h < now.div_euclid(HOUR_MICROS));
        hour_over
            || self
                .oldest
                .is_some_and(|t| now.saturating_sub(t) >= self.cfg.max_age.as_micros() as i64)
    }

    fn full(&self) -> bool {
        self.rows >= self.cfg.max_rows
            || self.bytes >= self.cfg.max_bytes
            || self.memory >= self.cfg.max_memory
    }

    /// Stops taking events after an encoding error (see `broken`).
    fn break_down(&mut self, e: parquet::errors::ParquetError) {
        tracing::error!(shard = self.cfg.index, error = %e, "Parquet encoding failed; the shard refuses events until a restart replays its WAL");
        self.broken.get_or_insert_with(|| e.to_string().into());
    }

    /// Takes `first` and whatever else waits (up to `MAX_GROUP` batches) and commits them as
    /// one group. Returns whether a `Stop` was among them.
    fn take_group(&mut self, first: Msg, rx: &Receiver<Msg>) -> bool {
        let mut group = Vec::new();
        let mut held = Vec::new();
        let mut asked = Vec::new();
        let mut stop = false;
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Write {
                    events,
                    reply,
                    held: h,
                } => {
                    group.push((events, reply));
                    held.push(h);
                }
                Msg::Flush { reply } => asked.push(reply),
                Msg::Scrub { reply } => {
                    let scrubbed = self.wal.scrub();
                    self.health
                        .add_backlog(self.wal.take_grown(), self.clock.now_micros());
                    let _ = reply.send(scrubbed);
                }
                Msg::Stop => stop = true,
            }
            if group.len() < MAX_GROUP {
                next = rx.try_recv().ok();
            }
        }
        self.counters.queue_depth.set(rx.len() as i64);
        if !group.is_empty() {
            self.commit(group);
        }
        if !asked.is_empty() {
            self.flush_asked = self.first_open_lsn.is_some();
            let last = self.wal.next_lsn().saturating_sub(1);
            for reply in asked {
                let _ = reply.send(last);
            }
        }
        stop
    }

    /// Group commit: dedupe, enrich, one WAL append + fsync, then answer every batch. The
    /// events are read from their batches' WAL records, borrowed.
    fn commit(&mut self, group: Vec<(Records, Reply)>) {
        if let Some(why) = &self.broken {
            for (_, reply) in group {
                let _ = reply.send(Err(WriteError::Broken(why.clone())));
            }
            return;
        }
        if self.full() {
            // The files could not be handed over (the stager is busy, or the flush failed):
            // taking more would grow them past the memory budget.
            self.counters.refused_full.inc_by(group.len() as u64);
            for (_, reply) in group {
                let _ = reply.send(Err(WriteError::Full));
            }
            return;
        }
        // When these rows arrived, for the file-age rule: read before anyone is answered.
        let arrived = self.clock.now_micros();
        let (batches, replies): (Vec<Records>, Vec<Reply>) = group.into_iter().unzip();
        let (kept, keys, outcomes) = self.prepare(&batches, replies);
        let first_lsn = match self.append(&kept) {
            Ok(lsn) => lsn,
            Err(e) => {
                tracing::error!(shard = self.cfg.index, error = %e, "write-ahead log append failed");
                self.health
                    .failing(Check::Disk, "wal", self.cfg.index, arrived, &e);
                self.wal_failing = true;
                let e = WriteError::Wal(Arc::new(e));
                for (reply, _) in outcomes {
                    let _ = reply.send(Err(e.clone()));
                }
                return;
            }
        };
        // The identity cache learns only what is durable.
        for k in &kept {
            self.learn_identity(&k.event);
        }
        // Profiles before the answer, so a 200 is visible at /api/v1/profiles at once.
        for k in &kept {
            self.update_profile(&k.event);
        }
        for (reply, done) in outcomes {
            let c = &self.counters;
            c.accepted.inc_by(done.accepted as u64);
            c.duplicates.inc_by(done.duplicates as u64);
            let _ = reply.send(Ok(done));
        }
        let events: Vec<&Event<'_>> = kept.iter().map(|k| &k.event).collect();
        // Runs of one app and hour: one open file, one usage count, one rollup bucket.
        let runs: Vec<&[&Event<'_>]> = events.chunk_by(same_app_and_hour).collect();
        self.add_usage(&runs, first_lsn);
        self.seen.warm(&keys);
        let mut at = 0;
        for run in &runs {
            let lsn = first_lsn + at as u64;
            self.after_commit(run, &keys[at..at + run.len()], lsn, arrived);
            at += run.len();
        }
        self.count(&runs, first_lsn);
    }

    /// Adds committed events (LSNs from `first_lsn`) to the monthly usage: written to sled
    /// with the shard's usage LSN when due (`usage::Pending`; a replay counts what a crash
    /// lost, once).
    fn add_usage(&mut self, runs: &[&[&Event<'_>]], first_lsn: u64) {
        let events: usize = runs.iter().map(|r| r.len()).sum();
        if events == 0 {
            return;
        }
        self.usage.add(runs, first_lsn + events as u64 - 1);
        let now = self.clock.now_micros();
        self.usage.write(&self.db, self.cfg.index, now, false);
    }

    /// Counts committed rows in the traffic rollups, live from now on (one lock for them all):
    /// not those at or below the rollup LSN (counted before a crash), nor bots unless
    /// `count_bots`.
    fn count(&self, runs: &[&[&Event<'_>]], first_lsn: u64) {
        let counted = |e: &Event<'_>, lsn: u64| {
            lsn > self.rollup_lsn && (self.cfg.count_bots || e.is_bot != Some(true))
        };
        self.rollups.count(self.cfg.index, |d| {
            let mut lsn = first_lsn;
            for run in runs {
                let rows = || run.iter().zip(lsn..).filter(|(e, l)| counted(e, *l));
                if let Some((first, _)) = rows().next() {
                    let bucket = d.bucket(&first.app_id, hour_of(first));
                    rows().for_each(|(e, _)| bucket.add(e));
                }
                lsn += run.len() as u64;
            }
        });
    }

    /// Appends the events to the WAL with one fsync (each one's record copied as the edge
    /// encoded it, unless the writer changed the event); returns the first one's LSN.
    fn append(&mut self, kept: &[Kept<'_>]) -> std::io::Result<u64> {
        if kept.is_empty() {
            return Ok(self.wal.next_lsn());
        }
        let started = Instant::now();
        let bytes_before = self.wal.segment_bytes();
        let first = self.wal.append_with(kept, |k, buf| match k.record {
            Some(record) => record.write_to(buf),
            None => {
                k.event.encode_wal(buf);
            }
        });
        // The backlog counts the segments' files (a failed append may have cut one).
        self.health
            .add_backlog(self.wal.take_grown(), self.clock.now_micros());
        let first = first?;
        let c = &self.counters;
        c.wal_fsync.observe(started.elapsed().as_secs_f64());
        c.wal_bytes.inc_by(self.wal.segment_bytes() - bytes_before);
        if self.wal_failing {
            self.wal_failing = false;
            self.health.recovered(Check::Disk, "wal", self.cfg.index);
            tracing::info!(shard = self.cfg.index, "write-ahead log appends work again");
        }
        Ok(first)
    }

    /// Drops duplicates (seen before, or twice in the group) and fills in the userId of
    /// visitors identified earlier. Returns the kept events with their fingerprints.
    fn prepare<'b>(
        &mut self,
        batches: &'b [Records],
        replies: Vec<Reply>,
    ) -> (Vec<Kept<'b>>, Vec<u128>, Vec<(Reply, Committed)>) {
        let events: usize = batches.iter().map(Records::len).sum();
        // Every record read once, in order, with the index of its batch: the candidates,
        // compacted in place below (nothing moves while none is dropped).
        let mut kept = Vec::with_capacity(events);
        let mut batch_of = Vec::with_capacity(events);
        for (b, batch) in batches.iter().enumerate() {
            for record in batch.records() {
                match record.decode() {
                    Some(event) => {
                        kept.push(Kept {
                            event,
                            record: Some(record),
                        });
                        batch_of.push(b);
                    }
                    // The edge encoded it: never seen, but no reason to stop the shard.
                    None => {
                        tracing::error!(shard = self.cfg.index, "unreadable event record skipped")
                    }
                }
            }
        }
        // The group's messageIds first, so that their dedupe filter blocks load together.
        let index = self.seen.index();
        let fingerprints: Vec<u128> = kept
            .iter()
            .map(|k| index.fingerprint(&*k.event.app_id, &*k.event.message_id))
            .collect();
        self.seen.warm(&fingerprints);
        let mut in_group = FingerprintSet::default();
        in_group.reserve(kept.len());
        let mut keys = Vec::with_capacity(kept.len());
        // Identities of this group, not yet durable: they fill later events of the group only.
        let mut pending: FingerprintMap<String> = FingerprintMap::default();
        let mut done = vec![Committed::default(); batches.len()];
        let now = self.clock.now_micros();
        // Each app's gate, looked up once per group (batches are of one app).
        let mut gates: Vec<(Box<str>, AppGate)> = Vec::new();
        let mut candidates = fingerprints.into_iter().zip(batch_of);
        kept.retain_mut(|k| {
            let Some((key, b)) = candidates.next() else {
                return false;
            };
            let e = &mut k.event;
            let gate = match gates.iter().position(|(a, _)| **a == *e.app_id) {
                Some(i) => &gates[i].1,
                None => {
                    gates.push((Box::from(&*e.app_id), self.gate.gate(&e.app_id)));
                    &gates[gates.len() - 1].1
                }
            };
            if !gate.admits(e, now) {
                self.counters.refused_at_commit.inc();
                return false;
            }
            if !in_group.insert(key) || self.seen.contains(key) {
                done[b].duplicates += 1;
                return false;
            }
            if let Some(anon) = &e.anonymous_id {
                let k_anon = self.seen.index().fingerprint(&*e.app_id, &**anon);
                if e.kind == EventType::Identify {
                    if let Some(user) = &e.user_id {
                        pending.insert(k_anon, user.to_string());
                    }
                } else if e.user_id.is_none() {
                    let user = match pending.get(&k_anon) {
                        Some(u) => Some(u.clone()),
                        None => self.user_of(k_anon, &e.app_id, anon),
                    };
                    if let Some(user) = user {
                        // Changed: encoded again for the WAL.
                        e.user_id = Some(user.into());
                        k.record = None;
                    }
                }
            }
            done[b].accepted += 1;
            keys.push(key);
            true
        });
        (kept, keys, replies.into_iter().zip(done).collect())
    }

    fn learn_identity(&mut self, e: &Event<'_>) {
        if let (EventType::Identify, Some(anon), Some(user)) = (e.kind, &e.anonymous_id, &e.user_id)
        {
            let k = self.seen.index().fingerprint(&e.app_id, anon);
            self.cache_identity(k, Some(user.to_string()));
        }
    }

    fn cache_identity(&mut self, k: u128, user: Option<String>) {
        if self.identities.len() >= MAX_CACHED_IDENTITIES {
            self.identities.clear();
        }
        self.identities.insert(k, user);
    }

    /// The user an anonymous visitor (`k`: the fingerprint of app and anonymousId) was
    /// identified as (cache, then sled).
    fn user_of(&mut self, k: u128, app: &str, anon: &str) -> Option<String> {
        if let Some(known) = self.identities.get(&k) {
            return known.clone();
        }
        let user = match self.db.with(|db| profiles::store::user_of(db, app, anon)) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(shard = self.cfg.index, error = %e, "identity lookup failed");
                return None;
            }
        };
        self.cache_identity(k, user.clone());
        user
    }

    /// Everything after the answer but the rollups, for a run of events of one app and hour
    /// (LSNs from `first_lsn`): the rows in their open file and the messageIds (`keys`).
    fn after_commit(&mut self, run: &[&Event<'_>], keys: &[u128], first_lsn: u64, arrived: i64) {
        let Some(first) = run.first() else { return };
        let (app, hour) = (&*first.app_id, hour_of(first));
        if !self.open.contains_key(app) {
            self.open.insert(Arc::from(app), BTreeMap::new());
        }
        let hours = self.open.get_mut(app).expect("inserted above");
        let (file, before) = match hours.entry(hour) {
            std::collections::btree_map::Entry::Occupied(o) => {
                let file = o.into_mut();
                let before = file.memory();
                (file, before)
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                (v.insert(OpenFile::new(&self.encoder)), 0)
            }
        };
        let appended = file.append(run);
        self.memory = self.memory - before + file.memory();
        self.rows += run.len();
        self.bytes += match appended {
            Ok(bytes) => bytes,
            Err(err) => {
                self.break_down(err);
                run.iter().map(|e| e.approx_bytes()).sum()
            }
        };
        if self.oldest.is_none() {
            self.oldest = Some(arrived);
        }
        if self.first_hour.is_none_or(|h| hour < h) {
            self.first_hour = Some(hour);
            self.handed.opened(hour);
        }
        self.first_open_lsn.get_or_insert(first_lsn);
        self.last_open_lsn = first_lsn + run.len() as u64 - 1;
        for (e, &key) in run.iter().zip(keys) {
            self.seen.insert(key, e.received_at);
        }
    }

    /// Folds an event into its user's profile; an error is logged, never fatal to the event.
    fn update_profile(&self, e: &Event<'_>) {
        let Some(touch) = touch(e) else { return };
        let uplink = self.cfg.uplink;
        if let Err(err) = self
            .db
            .with(|db| profiles::store::apply_to(db, &touch, uplink))
        {
            tracing::error!(shard = self.cfg.index, error = %err, "profile not updated");
        }
    }

    /// Closes the open files: rotates the WAL and returns them with the last LSN they cover.
    /// Nothing changes when the rotation fails: the files stay open and are tried again.
    fn take_files(&mut self) -> std::io::Result<Option<Flush>> {
        if let Some(why) = &self.broken {
            return Err(std::io::Error::other(why.to_string()));
        }
        let Some(first_lsn) = self.first_open_lsn else {
            return Ok(None);
        };
        let last_lsn = self.last_open_lsn;
        // Every handed-over row counted first: the stager may trim the WAL past it.
        let now = self.clock.now_micros();
        self.usage.write(&self.db, self.cfg.index, now, true);
        let rotated = self.wal.rotate();
        self.health.add_backlog(self.wal.take_grown(), now);
        rotated?;
        self.first_open_lsn = None;
        let mut files = Vec::with_capacity(self.open.values().map(BTreeMap::len).sum());
        let open = std::mem::take(&mut self.open);
        self.memory = 0;
        for (app, hour, file) in open
            .into_iter()
            .flat_map(|(app, hours)| hours.into_iter().map(move |(h, f)| (app.clone(), h, f)))
        {
            let hour = chrono::DateTime::from_timestamp(hour * 3600, 0).unwrap_or_default();
            let path = lake::file_path(
                &self.cfg.prefix,
                &app,
                hour,
                &self.cfg.node_id,
                self.cfg.index,
                first_lsn,
            );
            match file.close() {
                Ok(closed) => files.push(Encoded {
                    path,
                    rows: closed.rows,
                    bytes: closed.bytes.into(),
                }),
                Err(e) => {
                    self.break_down(e);
                    return Err(std::io::Error::other("Parquet encoding failed"));
                }
            }
        }
        self.rows = 0;
        self.bytes = 0;
        self.oldest = None;
        self.first_hour = None;
        self.handed.handed(last_lsn);
        self.flush_asked = false;
        Ok(Some(Flush {
            last_lsn,
            files,
            ids: self.seen.take_open(last_lsn),
            rollup: self.rollups.stage(self.cfg.index, last_lsn),
        }))
    }

    /// Hands the open files to the stager. Unless `wait` (the replay at start, the stop), a
    /// stager that still has a flush queued leaves them open: tried again `STAGER_RETRY` later.
    fn flush(&mut self, wait: bool) -> std::io::Result<()> {
        if !wait && self.stager.is_full() {
            self.retry_flush_at = self.clock.now_micros() + STAGER_RETRY.as_micros() as i64;
            return Ok(());
        }
        if let Some(job) = self.take_files()? {
            crate::memory::note_activity();
            // Never blocks unless `wait`: the writer is the only sender and the queue had room.
            if self.stager.send(job).is_err() {
                return Err(std::io::Error::other("stager stopped"));
            }
        }
        Ok(())
    }
}

/// The hour of the lake partition an event goes to.
fn hour_of(e: &Event<'_>) -> i64 {
    e.received_at.div_euclid(HOUR_MICROS)
}

fn same_app_and_hour(a: &&Event<'_>, b: &&Event<'_>) -> bool {
    a.app_id == b.app_id && hour_of(a) == hour_of(b)
}

/// What an event of a known user tells its profile.
fn touch<'e>(e: &'e Event<'_>) -> Option<Touch<'e>> {
    let change = match (e.kind, &e.group_id) {
        (EventType::Identify, _) => Change::Identify {
            traits: e.traits.as_deref(),
        },
        (EventType::Group, Some(g)) => Change::Group {
            group_id: g,
            traits: e.traits.as_deref(),
        },
        _ => Change::Seen,
    };
    Some(Touch {
        app_id: &e.app_id,
        user_id: e.user_id.as_deref()?,
        anonymous_id: e.anonymous_id.as_deref(),
        at: e.timestamp,
        change,
    })
}

/// A writer being started: `wait` returns once its WAL is replayed (handed to the uploader).
pub struct Starting {
    ready: std::sync::mpsc::Receiver<std::io::Result<()>>,
    thread: JoinHandle<()>,
}

impl Starting {
    /// Waits for recovery to finish; the handle ends when the writer has stopped.
    pub fn wait(self) -> std::io::Result<JoinHandle<()>> {
        match self.ready.recv() {
            Ok(Ok(())) => Ok(self.thread),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::other("shard writer died during recovery")),
        }
    }
}

/// Starts a writer on its own thread: it opens its WAL, replays it, then serves `rx`.
/// Shards recover in parallel; start-up never waits for the object store.
pub fn spawn(parts: Parts, rx: Receiver<Msg>) -> std::io::Result<Starting> {
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("shard-{}", parts.cfg.index))
        .spawn(move || {
            let opened =
                Writer::open(parts).and_then(|(mut w, records)| w.replay(records).map(|()| w));
            match opened {
                Ok(writer) => {
                    let _ = ready_tx.send(Ok(()));
                    writer.run(rx);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        })?;
    Ok(Starting { ready, thread })
}

#[cfg(test)]
mod tests;
