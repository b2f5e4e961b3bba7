//! The stager actor: one thread per shard, fed by its writer over a rendezvous channel (the
//! writer hands a flush over only when the stager is free, and otherwise keeps its files open).
//!
//! For each flush (files its writer encoded as Parquet as rows came: zstd, or Snappy for a small
//! file) it writes the files to the shard's parts (`outbox.rs`'s rules; made durable together, one
//! `syncfs`; the uploader merges them into lake files, `merge.rs`), applies the flush's traffic
//! rollups (once per LSN: `rollup/store.rs`), writes the files' messageId fingerprints as a dedupe
//! run, flushes sled (profiles), writes the checkpoint (the last LSN now safe outside the WAL),
//! trims the WAL and wakes the uploader. Nothing here waits for the object store: a lake that is
//! away only grows the parts and the outbox, within `collector.max_backlog_mb` (`health.rs`). Every
//! failure (a full disk) is retried with the collector's one backoff rule (`retry.rs`) while the
//! WAL keeps the events; meanwhile the writer keeps its files open, then answers 503.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use object_store::path::Path;

use super::health::Check;
use super::retry::retry;
use super::shard::Background;
use super::{dedupe, rollup, wal};
use crate::storage::queue::Queue;

/// One flush: the closed files of a shard and the last WAL LSN they cover.
pub struct Flush {
    pub last_lsn: u64,
    pub files: Vec<Encoded>,
    /// The fingerprints of every row's messageId, for the dedupe index.
    pub ids: Arc<dedupe::Flushed>,
    /// The rollups of the rows (`rollup/`), applied once before the checkpoint; counted live
    /// (`rollup/live.rs`) until then.
    pub rollup: Arc<rollup::Delta>,
}

/// A closed lake file: where it goes, its Parquet bytes, its rows.
pub struct Encoded {
    pub path: Path,
    pub bytes: bytes::Bytes,
    pub rows: usize,
}

/// Why one attempt at staging a flush failed.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("{what}: {source}")]
    Local {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("sled flush: {0}")]
    Sled(#[from] sled::Error),
    #[error("rollups: {0}")]
    Rollup(#[from] rollup::store::RollupError),
}

fn local(what: &'static str) -> impl FnOnce(std::io::Error) -> StageError {
    move |source| StageError::Local { what, source }
}

/// What a stager needs.
pub struct Stager {
    pub bg: Background,
    pub dedupe: Arc<dedupe::Index>,
    /// The live rollups, which stop counting a flush once it is applied.
    pub rollups: Arc<rollup::live::Live>,
    /// Wakes the uploader (a full channel means it is awake already).
    pub wake: Sender<()>,
    /// On an edge (`fleet.role = "edge"`): the uplink queue that takes each flush's rollups.
    pub uplink: Option<Queue>,
    /// Whether the trim keeps a segment for the writer to recycle (`wal.rs`): not for a
    /// retired shard, whose writer is gone (no one would scrub it for an erasure).
    pub keep_spare: bool,
}

/// Starts the stager on its own thread; it ends when its writer drops the channel.
pub fn spawn(stager: Stager, jobs: Receiver<Flush>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("stager-{}", stager.bg.index))
        .spawn(move || {
            let mut failed = false;
            loop {
                match jobs.recv_timeout(crate::memory::poll()) {
                    // After an abandoned flush (only at shutdown) later ones must not
                    // checkpoint past it: they stay in the WAL too.
                    Ok(job) if !failed => {
                        crate::memory::note_activity();
                        failed = !stager.stage(&job);
                        crate::memory::note_activity();
                    }
                    Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                crate::memory::release_if_idle(crate::memory::Thread::Stager);
            }
        })
}

impl Stager {
    /// Stages one flush and checkpoints it, retrying until it works. Only at shutdown does it
    /// give up (false), leaving the events in the WAL.
    fn stage(&self, job: &Flush) -> bool {
        let started = Instant::now();
        let (index, counters, health, clock) = (
            self.bg.index,
            &self.bg.counters,
            &self.bg.health,
            &self.bg.clock,
        );
        let done = retry(
            self.bg.backoff,
            &self.bg.shutdown,
            self.bg.patience,
            || self.try_stage(job),
            |e, delay| {
                counters.upload_retries.inc();
                health.failing(Check::Disk, "outbox", index, clock.now_micros(), e);
                tracing::error!(shard = index, error = %e, retry_in_ms = delay.as_millis() as u64, "staging a flush failed; the WAL keeps the events, retrying");
            },
        );
        match done {
            Ok(()) => {
                health.recovered(Check::Disk, "outbox", index);
                counters.flush.observe(started.elapsed().as_secs_f64());
                // Full: the uploader is awake already and lists the outbox again.
                let _ = self.wake.try_send(());
                true
            }
            Err(e) => {
                tracing::error!(shard = index, error = %e, "flush abandoned at shutdown; the WAL keeps the events");
                false
            }
        }
    }

    fn try_stage(&self, job: &Flush) -> Result<(), StageError> {
        let now = self.bg.clock.now_micros();
        for f in &job.files {
            let replaced = self
                .bg
                .parts
                .write(&f.path, &f.bytes)
                .map_err(local("parts"))?;
            let grew = f.bytes.len() as i64 - replaced.map_or(0, |b| b as i64);
            self.bg.health.add_backlog(grew, now);
            if replaced.is_none() {
                self.bg.health.gauges.outbox_files.inc();
            }
        }
        // Durable before the checkpoint says so (a part beyond it is deleted at start).
        self.bg
            .parts
            .sync(job.files.iter().map(|f| &f.path))
            .map_err(local("parts"))?;
        // Exactly once: skipped when the shard's rollup LSN already covers the job. On an edge
        // the delta goes onto the uplink for the control node instead of into sled.
        let (index, lsn) = (self.bg.index, job.last_lsn);
        let delta = &job.rollup;
        self.bg.db.with(|db| match self.uplink {
            None => self.rollups.apply(db, index, lsn, delta),
            Some(q) => self.rollups.forward(db, q, index, lsn, delta, now),
        })?;
        self.dedupe
            .persist(&job.ids)
            .map_err(local("dedupe runs"))?;
        self.bg.db.with(|db| db.flush())?;
        wal::write_checkpoint(&self.bg.dir, job.last_lsn).map_err(local("checkpoint"))?;
        self.bg.checkpoint.store(job.last_lsn, Ordering::Release);
        // What a trim removed leaves the backlog, even when it then failed.
        let trimmed = wal::trim(&self.bg.dir, job.last_lsn, self.keep_spare);
        self.bg
            .health
            .add_backlog(-(wal::freed(&trimmed) as i64), now);
        trimmed.map_err(|(_, e)| local("trim")(e))?;
        if let Err(e) = self.dedupe.compact() {
            // Lookups stay exact over more runs; the next flush tries again.
            tracing::warn!(shard = self.bg.index, error = %e, "dedupe runs not merged");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::collector::health::Health;
    use crate::collector::metrics::ShardCounters;
    use crate::collector::outbox::Outbox;
    use crate::collector::retry::Backoff;
    use crate::storage::Db;
    use std::path::PathBuf;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    const FAST: Backoff = Backoff {
        first: Duration::from_millis(1),
        max: Duration::from_millis(5),
    };

    struct Fixture {
        _tmp: tempfile::TempDir,
        dir: PathBuf,
        health: Arc<Health>,
        checkpoint: Arc<AtomicU64>,
        counters: Arc<ShardCounters>,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("shard-0");
        std::fs::create_dir_all(&dir).unwrap();
        Fixture {
            health: Arc::new(Health::new(u64::MAX, tmp.path(), 1)),
            _tmp: tmp,
            dir,
            checkpoint: Arc::default(),
            counters: Arc::default(),
        }
    }

    impl Fixture {
        fn stager(&self, wake: Sender<()>) -> Stager {
            Stager {
                bg: Background {
                    index: 0,
                    dir: self.dir.clone(),
                    outbox: Outbox::new(&self.dir),
                    parts: Outbox::parts(&self.dir),
                    merge: crate::collector::merge::Policy::default(),
                    urgent: Arc::default(),
                    handed: Arc::default(),
                    db: Db::temporary(),
                    counters: self.counters.clone(),
                    health: self.health.clone(),
                    shutdown: Arc::default(),
                    patience: Duration::ZERO,
                    backoff: FAST,
                    clock: Arc::new(SystemClock),
                    checkpoint: self.checkpoint.clone(),
                },
                dedupe: dedupe::Index::open(&self.dir, 1).unwrap(),
                rollups: Arc::new(rollup::live::Live::new(1)),
                wake,
                uplink: None,
                keep_spare: true,
            }
        }
    }

    fn flush(last_lsn: u64) -> Flush {
        let path =
            format!("events/app_id=a/dt=2026-11-26/hour=10/part-n0-0-{last_lsn:020}.parquet");
        Flush {
            last_lsn,
            files: vec![Encoded {
                path: Path::from(path),
                bytes: bytes::Bytes::from_static(b"parquet bytes"),
                rows: 3,
            }],
            ids: Arc::new(dedupe::Flushed {
                lsn: last_lsn,
                ids: Vec::new(),
            }),
            rollup: Arc::default(),
        }
    }

    #[test]
    fn a_flush_goes_to_the_parts_then_the_checkpoint_trims_the_wal_and_wakes_the_uploader() {
        let f = fixture();
        let (mut log, _) = wal::Wal::open(&f.dir, 0).unwrap();
        log.append(&[b"1", b"2", b"3"]).unwrap();
        log.rotate().unwrap();
        let wal_bytes = wal::bytes(&f.dir).unwrap();
        f.health.add_backlog(wal_bytes as i64, 0);
        let (wake, woken) = crossbeam_channel::bounded(1);
        assert!(f.stager(wake).stage(&flush(3)));
        let staged = Outbox::parts(&f.dir).list().unwrap();
        assert_eq!(staged.len(), 1);
        assert_eq!(f.health.gauges.outbox_files.get(), 1);
        assert_eq!(std::fs::read(&staged[0].file).unwrap(), b"parquet bytes");
        assert_eq!(wal::read_checkpoint(&f.dir).unwrap(), 3);
        assert_eq!(f.checkpoint.load(Ordering::Acquire), 3);
        assert_eq!(
            wal::bytes(&f.dir).unwrap(),
            0,
            "the segment of the flush is trimmed"
        );
        assert_eq!(f.health.backlog_bytes(), 13, "the backlog is now the part");
        assert!(woken.try_recv().is_ok());
    }

    #[test]
    fn an_edge_stager_pushes_the_rollups_onto_the_uplink_once_instead_of_applying_them() {
        use crate::collector::event::Event;
        use crate::storage::queue::UPLINK;
        let f = fixture();
        let (wake, _woken) = crossbeam_channel::bounded(4);
        let mut stager = f.stager(wake);
        stager.uplink = Some(UPLINK);
        let mut delta = rollup::Delta::default();
        delta.add(&Event::example("a", "m1", "v1", 1_790_000_000_000_000));
        let job = Flush {
            rollup: Arc::new(delta),
            ..flush(4)
        };
        assert!(stager.stage(&job));
        // A retried job (a crash before its checkpoint) and an older one push nothing.
        assert!(stager.stage(&job));
        assert!(stager.stage(&flush(2)));
        let db = stager.bg.db.get().unwrap();
        let items = UPLINK.peek(&db, 10, 1 << 20).unwrap();
        assert_eq!(items.len(), 1, "one item for the flush");
        assert_eq!(items[0].kind, rollup::wire::KIND);
        let item: rollup::wire::Item = serde_json::from_slice(&items[0].payload).unwrap();
        assert_eq!((item.shard, item.lsn, item.delta.rows()), (0, 4, 1));
        assert_eq!(rollup::store::applied_lsn(&db, 0).unwrap(), 4);
        let all = rollup::store::read(&db, "a", rollup::store::Unit::Hour, 0, i64::MAX);
        assert!(
            all.unwrap().is_empty(),
            "nothing applied to the edge's rollups"
        );
    }

    #[test]
    fn a_disk_that_refuses_the_parts_is_retried_and_reported_until_it_works() {
        let f = fixture();
        // The parts' directory is taken by a file: every write fails.
        let blocker = f.dir.join("parts");
        std::fs::write(&blocker, b"").unwrap();
        let (wake, _woken) = crossbeam_channel::bounded(1);
        let (jobs, rx) = crossbeam_channel::bounded(1);
        let thread = spawn(f.stager(wake), rx).unwrap();
        jobs.send(flush(5)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while f.health.problems().is_empty() {
            assert!(Instant::now() < deadline, "the failure was not reported");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(f.health.problems()[0].check, "disk");
        assert_eq!(
            wal::read_checkpoint(&f.dir).unwrap(),
            0,
            "nothing checkpointed"
        );
        std::fs::remove_file(&blocker).unwrap();
        // Staged, checkpointed, and reported as recovered.
        while wal::read_checkpoint(&f.dir).unwrap() != 5 || !f.health.problems().is_empty() {
            assert!(
                Instant::now() < deadline,
                "not staged once the disk was back"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(f.counters.upload_retries.get() > 0);
        drop(jobs);
        thread.join().unwrap();
    }
}
