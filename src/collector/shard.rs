//! A shard writer actor and its uploader.
//!
//! `HTTP handler -> [bounded queue] -> shard writer -> [bounded queue] -> uploader -> object store`
//!
//! The writer, on its own thread:
//! 1. takes every batch waiting in its queue (group commit), drops duplicates by messageId,
//!    fills in the userId of identified visitors, appends the events to its WAL and fsyncs once;
//! 2. folds identify / group calls into the profiles (sled), then answers each batch (the HTTP
//!    200 waits for all this);
//! 3. remembers the messageIds (in memory, `dedupe.rs`), records usage in sled, and appends the
//!    rows to Arrow builders, one per (app, hour) partition;
//! 4. on rows, bytes or age, rotates the WAL and hands the open files to its uploader.
//!
//! The uploader encodes Parquet (zstd), notes the paths it is about to write in an intent file,
//! puts each file (retrying with backoff), appends the files' messageIds to the dedupe files,
//! flushes sled, writes the checkpoint (the last LSN now
//! in the lake), clears the intent and trims the WAL. At start, the paths of an unfinished intent
//! are deleted and the WAL is replayed from the checkpoint, so every acknowledged event lands in
//! the lake exactly once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::columns::{encode_parquet, RowBuilder};
use super::event::Event;
use super::metrics::ShardCounters;
use super::{dedupe, identity, lake, usage, wal};

const INTENT: &str = "intent";
/// Batches taken together into one group commit.
const MAX_GROUP: usize = 128;

/// What a writer needs to know.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub index: usize,
    pub node_id: String,
    pub wal_dir: PathBuf,
    pub prefix: String,
    pub max_rows: usize,
    pub max_bytes: usize,
    pub max_age: Duration,
    pub shutdown_upload_timeout: Duration,
    /// Set when the service shuts down: uploads then give up after `shutdown_upload_timeout`.
    pub stopping: Arc<std::sync::atomic::AtomicBool>,
}

/// The answer to one batch: it is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Committed {
    pub accepted: usize,
    pub duplicates: usize,
}

pub enum Msg {
    Write {
        events: Vec<Event>,
        reply: tokio::sync::oneshot::Sender<Result<Committed, String>>,
    },
    /// Commit what is queued, flush every open file, stop.
    Stop,
}

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("write-ahead log of shard {0}: {1}")]
    Wal(usize, std::io::Error),
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
}

struct Upload {
    last_lsn: u64,
    files: Vec<(Path, RecordBatch)>,
    /// `(day, app, messageId)` of every row, for the dedupe files.
    seen: Vec<(u32, String, String)>,
}

struct Writer {
    cfg: ShardConfig,
    db: sled::Db,
    seen: dedupe::Seen,
    /// `(day, app, messageId)` of the rows in the open files.
    seen_open: Vec<(u32, String, String)>,
    /// anonymousId -> userId of this shard's visitors (all their events come here), misses
    /// included; bounded by clearing.
    identities: HashMap<(String, String), Option<String>>,
    today: u32,
    wal: wal::Wal,
    open: BTreeMap<(String, i64), RowBuilder>,
    first_open_lsn: Option<u64>,
    oldest: Option<Instant>,
    rows: usize,
    bytes: usize,
    uploads: Sender<Upload>,
    counters: Arc<ShardCounters>,
}

/// Entries of the identity cache before it is cleared.
const MAX_CACHED_IDENTITIES: usize = 100_000;

/// A shard being started: `wait` returns once its WAL is replayed into the lake.
pub struct Starting {
    ready: std::sync::mpsc::Receiver<Result<(), ShardError>>,
    thread: JoinHandle<()>,
}

impl Starting {
    /// Waits for recovery to finish; the handle ends when the shard has stopped and its
    /// uploader has finished.
    pub fn wait(self) -> Result<JoinHandle<()>, ShardError> {
        match self.ready.recv() {
            Ok(Ok(())) => Ok(self.thread),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ShardError::Runtime(std::io::Error::other(
                "shard thread died during recovery",
            ))),
        }
    }
}

/// Starts shard `cfg.index` on its own thread: it opens its WAL, hands what the WAL holds
/// beyond the checkpoint to its uploader (which writes it to the lake before anything newer),
/// then serves its queue. Start-up never waits for the object store.
pub fn start(
    cfg: ShardConfig,
    db: sled::Db,
    store: Arc<dyn ObjectStore>,
    counters: Arc<ShardCounters>,
    rx: Receiver<Msg>,
) -> Result<Starting, ShardError> {
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let index = cfg.index;
    let thread = std::thread::Builder::new()
        .name(format!("shard-{index}"))
        .spawn(move || {
            let recovered = open(cfg, db, store, counters).and_then(
                |(mut writer, mut uploader, up_rx, replay)| {
                    let up = std::thread::Builder::new()
                        .name(format!("uploader-{index}"))
                        .spawn(move || {
                            uploader.undo_unfinished();
                            for job in up_rx.iter() {
                                uploader.run(job);
                            }
                        })
                        .map_err(ShardError::Runtime)?;
                    writer.replay(replay)?;
                    Ok((writer, up))
                },
            );
            match recovered {
                Ok((writer, up)) => {
                    let _ = ready_tx.send(Ok(()));
                    writer.run(rx);
                    let _ = up.join();
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        })
        .map_err(ShardError::Runtime)?;
    Ok(Starting { ready, thread })
}

/// Opens the WAL (cutting torn tails) and the dedupe memory; returns the records to replay.
#[allow(clippy::type_complexity)]
fn open(
    cfg: ShardConfig,
    db: sled::Db,
    store: Arc<dyn ObjectStore>,
    counters: Arc<ShardCounters>,
) -> Result<(Writer, Uploader, Receiver<Upload>, Vec<wal::Record>), ShardError> {
    let index = cfg.index;
    std::fs::create_dir_all(&cfg.wal_dir).map_err(|e| ShardError::Wal(index, e))?;
    let uploader = Uploader::new(cfg.clone(), db.clone(), store, counters.clone())?;
    let checkpoint = wal::read_checkpoint(&cfg.wal_dir).map_err(|e| ShardError::Wal(index, e))?;
    let (wal, replay) =
        wal::Wal::open(&cfg.wal_dir, checkpoint).map_err(|e| ShardError::Wal(index, e))?;
    let today = dedupe::day(chrono::Utc::now().timestamp_micros());
    let seen = dedupe::Seen::load(&cfg.wal_dir, today).map_err(|e| ShardError::Wal(index, e))?;
    let (up_tx, up_rx) = bounded::<Upload>(2);
    let writer = Writer {
        seen,
        seen_open: Vec::new(),
        identities: HashMap::new(),
        today,
        cfg,
        db,
        wal,
        open: BTreeMap::new(),
        first_open_lsn: None,
        oldest: None,
        rows: 0,
        bytes: 0,
        uploads: up_tx,
        counters,
    };
    Ok((writer, uploader, up_rx, replay))
}

impl Writer {
    /// Puts the WAL's records back into open files, closing them by rows and bytes as usual,
    /// and hands them to the uploader.
    fn replay(&mut self, records: Vec<wal::Record>) -> Result<(), ShardError> {
        if records.is_empty() {
            return Ok(());
        }
        let index = self.cfg.index;
        let n = records.len();
        for r in records {
            match Event::decode_wal(&r.payload) {
                Some(e) => {
                    self.update_profile(&e);
                    self.after_commit(&e, r.lsn);
                }
                None => {
                    tracing::error!(shard = index, lsn = r.lsn, "unreadable WAL record skipped")
                }
            }
            if self.rows >= self.cfg.max_rows || self.bytes >= self.cfg.max_bytes {
                self.flush().map_err(|e| ShardError::Wal(index, e))?;
            }
        }
        self.flush().map_err(|e| ShardError::Wal(index, e))?;
        self.counters.replayed.fetch_add(n as u64, Relaxed);
        tracing::info!(shard = index, events = n, "write-ahead log replayed");
        Ok(())
    }

    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            let wait = match self.oldest {
                Some(t) => self.cfg.max_age.saturating_sub(t.elapsed()),
                None => Duration::from_secs(1),
            };
            let mut stop = false;
            match rx.recv_timeout(wait) {
                Ok(first) => {
                    let mut group = Vec::new();
                    let mut push = |m: Msg, group: &mut Vec<_>| match m {
                        Msg::Write { events, reply } => group.push((events, reply)),
                        Msg::Stop => stop = true,
                    };
                    push(first, &mut group);
                    while group.len() < MAX_GROUP {
                        match rx.try_recv() {
                            Ok(m) => push(m, &mut group),
                            Err(_) => break,
                        }
                    }
                    self.counters.queue_depth.store(rx.len() as u64, Relaxed);
                    if !group.is_empty() {
                        self.commit(group);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stop = true,
            }
            let aged = self.oldest.is_some_and(|t| t.elapsed() >= self.cfg.max_age);
            if stop || aged || self.rows >= self.cfg.max_rows || self.bytes >= self.cfg.max_bytes {
                if let Err(e) = self.flush() {
                    tracing::error!(shard = self.cfg.index, error = %e, "flush failed; the WAL keeps the events");
                }
            }
            let today = dedupe::day(chrono::Utc::now().timestamp_micros());
            if today != self.today {
                self.today = today;
                if let Err(e) = self.seen.expire(&self.cfg.wal_dir, today) {
                    tracing::warn!(shard = self.cfg.index, error = %e, "old dedupe files not removed");
                }
            }
            if stop {
                tracing::info!(shard = self.cfg.index, "shard writer stopped");
                return;
            }
        }
    }

    /// Group commit: dedupe, enrich, one WAL append + fsync, then answer every batch.
    fn commit(&mut self, group: Vec<(Vec<Event>, Reply)>) {
        let (kept, outcomes) = self.prepare(group);
        let first_lsn = if kept.is_empty() {
            self.wal.next_lsn()
        } else {
            let started = Instant::now();
            let bytes_before = self.wal.segment_bytes();
            match self.wal.append_with(&kept, Event::encode_wal) {
                Ok(first) => {
                    self.counters
                        .fsync_micros
                        .fetch_add(started.elapsed().as_micros() as u64, Relaxed);
                    self.counters.wal_fsyncs.fetch_add(1, Relaxed);
                    self.counters
                        .wal_bytes
                        .fetch_add(self.wal.segment_bytes() - bytes_before, Relaxed);
                    first
                }
                Err(e) => {
                    tracing::error!(shard = self.cfg.index, error = %e, "write-ahead log append failed");
                    for (reply, _) in outcomes {
                        let _ = reply.send(Err(format!("write-ahead log: {e}")));
                    }
                    return;
                }
            }
        };
        // Profiles before the answer, so a 200 is visible at /api/v1/profiles at once.
        for e in &kept {
            self.update_profile(e);
        }
        for (reply, done) in outcomes {
            self.counters
                .accepted
                .fetch_add(done.accepted as u64, Relaxed);
            self.counters
                .duplicates
                .fetch_add(done.duplicates as u64, Relaxed);
            let _ = reply.send(Ok(done));
        }
        if let Err(e) = usage::add_events(&self.db, &kept) {
            tracing::warn!(shard = self.cfg.index, error = %e, "usage counter not updated");
        }
        for (i, e) in kept.iter().enumerate() {
            self.after_commit(e, first_lsn + i as u64);
        }
    }

    /// Drops duplicates (seen before, or twice in the group) and fills in the userId of
    /// identified visitors.
    fn prepare(
        &mut self,
        group: Vec<(Vec<Event>, Reply)>,
    ) -> (Vec<Event>, Vec<(Reply, Committed)>) {
        let mut in_group: HashSet<(String, String)> = HashSet::new();
        let mut kept = Vec::new();
        let mut outcomes = Vec::with_capacity(group.len());
        for (events, reply) in group {
            let mut done = Committed::default();
            for mut e in events {
                if self.seen.contains(&e.app_id, &e.message_id)
                    || !in_group.insert((e.app_id.clone(), e.message_id.clone()))
                {
                    done.duplicates += 1;
                    continue;
                }
                if let Some(anon) = e.anonymous_id.clone() {
                    let k = (e.app_id.clone(), anon);
                    if e.kind == "identify" {
                        if let Some(user) = &e.user_id {
                            self.identities.insert(k, Some(user.clone()));
                        }
                    } else if e.user_id.is_none() {
                        e.user_id = self.user_of(k);
                    }
                }
                done.accepted += 1;
                kept.push(e);
            }
            outcomes.push((reply, done));
        }
        (kept, outcomes)
    }

    /// The user an anonymous visitor was identified as (cache, then sled).
    fn user_of(&mut self, k: (String, String)) -> Option<String> {
        if let Some(known) = self.identities.get(&k) {
            return known.clone();
        }
        let user = match identity::user_of(&self.db, &k.0, &k.1) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(shard = self.cfg.index, error = %e, "identity lookup failed");
                return None;
            }
        };
        if self.identities.len() >= MAX_CACHED_IDENTITIES {
            self.identities.clear();
        }
        self.identities.insert(k, user.clone());
        user
    }

    /// Everything after the answer: the row in its open file and the messageId.
    fn after_commit(&mut self, e: &Event, lsn: u64) {
        let hour = e.received_at.div_euclid(3_600_000_000);
        self.open
            .entry((e.app_id.clone(), hour))
            .or_default()
            .append(e);
        self.rows += 1;
        self.bytes += e.approx_bytes();
        self.oldest.get_or_insert_with(Instant::now);
        self.first_open_lsn.get_or_insert(lsn);
        let day = dedupe::day(e.received_at);
        self.seen.insert(&e.app_id, &e.message_id, day);
        self.seen_open
            .push((day, e.app_id.clone(), e.message_id.clone()));
    }

    /// Folds an event into its user's profile; an error is logged, never fatal to the event.
    fn update_profile(&self, e: &Event) {
        if let Err(err) = identity::apply(&self.db, e) {
            tracing::error!(shard = self.cfg.index, error = %err, "profile not updated");
        }
    }

    /// Closes the open files: rotates the WAL and returns them with the last LSN they cover.
    fn take_files(&mut self) -> std::io::Result<Option<Upload>> {
        let Some(first_lsn) = self.first_open_lsn.take() else {
            return Ok(None);
        };
        let last_lsn = self.wal.next_lsn() - 1;
        self.wal.rotate()?;
        let files = std::mem::take(&mut self.open)
            .into_iter()
            .map(|((app, hour), mut rows)| {
                let hour = chrono::DateTime::from_timestamp(hour * 3600, 0).unwrap_or_default();
                let path = lake::file_path(
                    &self.cfg.prefix,
                    &app,
                    hour,
                    &self.cfg.node_id,
                    self.cfg.index,
                    first_lsn,
                );
                (path, rows.finish())
            })
            .collect();
        self.rows = 0;
        self.bytes = 0;
        self.oldest = None;
        let seen = std::mem::take(&mut self.seen_open);
        Ok(Some(Upload {
            last_lsn,
            files,
            seen,
        }))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(job) = self.take_files()? {
            if self.uploads.send(job).is_err() {
                return Err(std::io::Error::other("uploader stopped"));
            }
        }
        Ok(())
    }
}

type Reply = tokio::sync::oneshot::Sender<Result<Committed, String>>;

/// Encodes and uploads closed files, then checkpoints and trims the WAL.
struct Uploader {
    cfg: ShardConfig,
    db: sled::Db,
    store: Arc<dyn ObjectStore>,
    counters: Arc<ShardCounters>,
    rt: tokio::runtime::Runtime,
    /// Set once an upload was abandoned (only at shutdown): later jobs must not checkpoint
    /// past the abandoned one, so they are left in the WAL too.
    failed: bool,
}

impl Uploader {
    fn new(
        cfg: ShardConfig,
        db: sled::Db,
        store: Arc<dyn ObjectStore>,
        counters: Arc<ShardCounters>,
    ) -> Result<Self, ShardError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ShardError::Runtime)?;
        Ok(Uploader {
            cfg,
            db,
            store,
            counters,
            rt,
            failed: false,
        })
    }

    fn dir(&self) -> &FsPath {
        &self.cfg.wal_dir
    }

    /// Deletes the files of a flush that did not reach its checkpoint (a crash mid-upload):
    /// the WAL still holds their events and the replay writes them again. An intent whose
    /// checkpoint was written (a crash just before it was removed) is simply removed. Runs
    /// before any job, retrying while the object store is unreachable.
    fn undo_unfinished(&mut self) {
        let mut delay = Duration::from_secs(1);
        while let Err(e) = self.try_undo() {
            if self.cfg.stopping.load(Relaxed) {
                tracing::error!(shard = self.cfg.index, error = %e, "unfinished flush not undone at shutdown; nothing more is written");
                self.failed = true;
                return;
            }
            tracing::error!(shard = self.cfg.index, error = %e, "cannot undo an unfinished flush yet, retrying");
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }

    fn try_undo(&mut self) -> Result<(), String> {
        let path = self.dir().join(INTENT);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        let mut lines = text.lines();
        let intent_lsn = lines
            .next()
            .and_then(|l| l.strip_prefix("lsn "))
            .and_then(|n| n.parse::<u64>().ok());
        let checkpoint =
            wal::read_checkpoint(self.dir()).map_err(|e| format!("checkpoint: {e}"))?;
        let finished = intent_lsn.is_some_and(|lsn| checkpoint >= lsn);
        for line in lines.filter(|l| !l.is_empty() && !finished) {
            match self.rt.block_on(self.store.delete(&Path::from(line))) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(format!("delete {line}: {e}")),
            }
            tracing::info!(
                shard = self.cfg.index,
                path = line,
                "file of an unfinished flush removed"
            );
        }
        std::fs::remove_file(&path).map_err(|e| format!("intent: {e}"))
    }

    /// Writes one flush to the lake and checkpoints it, retrying (with backoff, up to 30 s
    /// apart) until it works. Only at shutdown does it give up, leaving the events in the WAL;
    /// later jobs are then skipped too, so no checkpoint can pass over them.
    fn run(&mut self, job: Upload) {
        if self.failed {
            return;
        }
        let started = Instant::now();
        let mut delay = Duration::from_secs(1);
        loop {
            match self.attempt(&job, started) {
                Ok(files) => {
                    self.counters.flushes.fetch_add(1, Relaxed);
                    self.counters
                        .flush_micros
                        .fetch_add(started.elapsed().as_micros() as u64, Relaxed);
                    tracing::debug!(
                        shard = self.cfg.index,
                        files,
                        last_lsn = job.last_lsn,
                        "flush done"
                    );
                    return;
                }
                Err(e) if self.cfg.stopping.load(Relaxed) => {
                    tracing::error!(shard = self.cfg.index, error = %e, "flush abandoned at shutdown; the WAL keeps the events");
                    self.failed = true;
                    return;
                }
                Err(e) => {
                    tracing::error!(shard = self.cfg.index, error = %e, retry_in_ms = delay.as_millis() as u64, "flush failed; the WAL keeps the events, retrying");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    fn attempt(&mut self, job: &Upload, started: Instant) -> Result<usize, String> {
        let mut encoded = Vec::with_capacity(job.files.len());
        for (path, batch) in &job.files {
            let bytes = encode_parquet(batch).map_err(|e| format!("parquet encoding: {e}"))?;
            encoded.push((path.clone(), bytes::Bytes::from(bytes), batch.num_rows()));
        }
        let mut intent = format!("lsn {}\n", job.last_lsn);
        intent.extend(encoded.iter().map(|(p, _, _)| format!("{p}\n")));
        wal::write_atomic(self.dir(), INTENT, intent.as_bytes())
            .map_err(|e| format!("intent: {e}"))?;
        let timeout = self.cfg.shutdown_upload_timeout;
        let stopping = self.cfg.stopping.clone();
        for (path, bytes, rows) in &encoded {
            let counters = self.counters.clone();
            let give_up = |attempt: u32| {
                counters.upload_retries.fetch_add(1, Relaxed);
                // Retry for as long as it takes, except when asked to stop.
                attempt > 0 && stopping.load(Relaxed) && started.elapsed() > timeout
            };
            self.rt
                .block_on(lake::put_with_retry(
                    self.store.as_ref(),
                    path,
                    bytes.clone(),
                    give_up,
                ))
                .map_err(|e| format!("upload of {path}: {e}"))?;
            self.counters.files_written.fetch_add(1, Relaxed);
            self.counters.rows_written.fetch_add(*rows as u64, Relaxed);
        }
        dedupe::persist(self.dir(), &job.seen).map_err(|e| format!("dedupe files: {e}"))?;
        self.db.flush().map_err(|e| format!("sled flush: {e}"))?;
        wal::write_checkpoint(self.dir(), job.last_lsn).map_err(|e| format!("checkpoint: {e}"))?;
        std::fs::remove_file(self.dir().join(INTENT)).map_err(|e| format!("intent: {e}"))?;
        wal::trim(self.dir(), job.last_lsn).map_err(|e| format!("trim: {e}"))?;
        Ok(encoded.len())
    }
}
