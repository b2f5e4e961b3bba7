//! The uploader actor: one thread per shard, woken by its stager (or once a poll interval).
//!
//! Each round it first merges the shard's due parts into outbox files (`merge.rs`: one file per
//! app and hour, sized for readers; every part when the server stops), then it puts the shard's outbox files (`outbox.rs`) into the object store, oldest flush first,
//! only those whose flush is checkpointed; after each put it records the file for the
//! dashboard (`written.rs`) and deletes it from the outbox. A put is atomic (readers see the
//! whole file or nothing) and idempotent (a crash between the put and the delete puts the same
//! bytes at the same path again), so every staged file lands in the lake exactly once.
//! Failures are retried with the collector's one backoff rule (`retry.rs`: at most 2 s apart,
//! from the first delay again after a success), so a lake that comes back is used within
//! seconds; meanwhile the outbox keeps the files on disk, and `health.rs` reports the lake as
//! unreachable. At shutdown it keeps trying for `collector.shutdown_upload_timeout_ms`; what is
//! left stays in the outbox and is put after the next start.
//!
//! Upgrade from a release that put files before its checkpoint: an unfinished `intent` file
//! (the lake paths of a flush cut by a crash) is undone first: the paths are deleted from the
//! lake, since the WAL replay writes their rows again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::UNIX_EPOCH;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use super::health::Check;
use super::merge;
use super::outbox::Staged;
use super::retry::retry;
use super::shard::Background;
use super::wal;
use super::written::{self, WrittenFile};

const INTENT: &str = "intent";

/// Why one attempt at putting a file failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("object store, {path}: {source}")]
    Store {
        path: String,
        source: object_store::Error,
    },
    #[error("{what}: {source}")]
    Local {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
}

impl UploadError {
    /// Which health check a failure concerns.
    fn check(&self) -> (Check, &'static str) {
        match self {
            UploadError::Store { .. } => (Check::Lake, "put"),
            UploadError::Local { .. } | UploadError::Sled(_) => (Check::Disk, "outbox"),
        }
    }
}

fn local(what: &'static str) -> impl FnOnce(std::io::Error) -> UploadError {
    move |source| UploadError::Local { what, source }
}

/// What an uploader needs.
pub struct Uploader {
    pub bg: Background,
    pub store: Arc<dyn ObjectStore>,
}

/// Starts the uploader on its own thread; it ships what is left and ends when its stager
/// drops the channel.
pub fn spawn(uploader: Uploader, wake: Receiver<()>) -> std::io::Result<JoinHandle<()>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(format!("uploader-{}", uploader.bg.index))
        .spawn(move || {
            let mut running = Running { u: uploader, rt };
            let mut gave_up = !running.undo_unfinished();
            loop {
                let stopping = match wake.recv_timeout(crate::memory::poll()) {
                    Ok(()) | Err(RecvTimeoutError::Timeout) => false,
                    Err(RecvTimeoutError::Disconnected) => true,
                };
                running.merge_due(stopping);
                if !gave_up {
                    gave_up = !running.ship_all();
                }
                if stopping {
                    return;
                }
                crate::memory::release_if_idle(crate::memory::Thread::Uploader);
            }
        })
}

struct Running {
    u: Uploader,
    rt: tokio::runtime::Runtime,
}

impl Running {
    /// Runs `attempt` under the retry rule, logging, counting and reporting each failure.
    /// False when it gave up (only at shutdown).
    fn retrying(
        &mut self,
        what: &str,
        mut attempt: impl FnMut(&mut Self) -> Result<(), UploadError>,
    ) -> bool {
        let (backoff, patience, shutdown) = (
            self.u.bg.backoff,
            self.u.bg.patience,
            self.u.bg.shutdown.clone(),
        );
        let (index, counters) = (self.u.bg.index, self.u.bg.counters.clone());
        let (health, clock) = (self.u.bg.health.clone(), self.u.bg.clock.clone());
        let failed_check = std::cell::Cell::new(None);
        let done = retry(
            backoff,
            &shutdown,
            patience,
            || attempt(self),
            |e, delay| {
                let (check, part) = e.check();
                failed_check.set(Some((check, part)));
                health.failing(check, part, index, clock.now_micros(), e);
                counters.upload_retries.inc();
                if check == Check::Lake {
                    counters.upload_failures.inc();
                }
                tracing::error!(shard = index, error = %e, retry_in_ms = delay.as_millis() as u64, "{what} failed; the outbox keeps the file, retrying");
            },
        );
        match done {
            Ok(()) => {
                if let Some((check, part)) = failed_check.get() {
                    health.recovered(check, part, index);
                    tracing::info!(shard = index, "{what} works again");
                }
                true
            }
            Err(e) => {
                tracing::error!(shard = index, error = %e, "{what} abandoned at shutdown; the outbox keeps the files for the next start");
                false
            }
        }
    }

    /// Merges the due parts (`all`: every part) into the outbox. A failure is reported and
    /// tried again next round: the parts stay, and the outbox still ships.
    fn merge_due(&mut self, all: bool) {
        let bg = &self.u.bg;
        let now = bg.clock.now_micros();
        if let Err(e) = merge::recover(&bg.dir) {
            tracing::error!(shard = bg.index, error = %e, "finishing a cut merge failed; trying again");
            bg.health.failing(Check::Disk, "merge", bg.index, now, &e);
            return;
        }
        let checkpoint = bg.checkpoint.load(Ordering::Acquire);
        let groups = match merge::groups(&bg.parts, checkpoint) {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(shard = bg.index, error = %e, "parts not listed; trying again later");
                return;
            }
        };
        let moment = merge::Now {
            micros: now,
            urgent: &bg.urgent,
            hours_done: bg.handed.hours_done(checkpoint),
        };
        for group in merge::choose(groups, &bg.merge, &moment, all) {
            match merge::merge(&bg.dir, &bg.parts, &bg.outbox, &group) {
                Ok(m) => {
                    bg.health
                        .add_backlog(m.bytes as i64 - m.parts_bytes as i64, now);
                    let gauge = &bg.health.gauges.outbox_files;
                    gauge.inc_by(m.files as i64 - m.parts as i64);
                    bg.counters.merges.inc();
                    bg.health.recovered(Check::Disk, "merge", bg.index);
                    crate::memory::note_activity();
                }
                Err(e) => {
                    tracing::error!(shard = bg.index, error = %e, "merging parts failed; they stay, trying again");
                    bg.health.failing(Check::Disk, "merge", bg.index, now, &e);
                    return;
                }
            }
        }
    }

    /// Ships every checkpointed outbox file, oldest first. False when it gave up (shutdown).
    fn ship_all(&mut self) -> bool {
        let staged = match self.u.bg.outbox.list() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(shard = self.u.bg.index, error = %e, "outbox not listed; trying again later");
                return true;
            }
        };
        let checkpoint = self.u.bg.checkpoint.load(Ordering::Acquire);
        let ready: Vec<Staged> = staged
            .into_iter()
            .filter(|s| s.first_lsn <= checkpoint)
            .collect();
        for s in &ready {
            let since = s.staged_at.duration_since(UNIX_EPOCH).unwrap_or_default();
            self.u
                .bg
                .health
                .set_oldest_staged(self.u.bg.index, since.as_micros() as i64);
            if !self.retrying("upload", |me| me.ship(s)) {
                return false;
            }
            crate::memory::note_activity();
        }
        self.u.bg.health.set_oldest_staged(self.u.bg.index, 0);
        true
    }

    /// Puts one outbox file, records it and deletes it from the outbox.
    fn ship(&mut self, s: &Staged) -> Result<(), UploadError> {
        let rows = rows_of(&s.file);
        let store = |source| UploadError::Store {
            path: s.path.to_string(),
            source,
        };
        if s.bytes <= PUT_AT_ONCE as u64 {
            let bytes = bytes::Bytes::from(std::fs::read(&s.file).map_err(local("outbox read"))?);
            let put = self.u.store.put(&s.path, PutPayload::from(bytes));
            self.rt.block_on(put).map_err(store)?;
        } else {
            self.rt.block_on(put_in_parts(&*self.u.store, s))?;
        }
        let at = self.u.bg.clock.now();
        self.u.bg.counters.files_written.inc();
        self.u.bg.counters.rows_written.inc_by(rows);
        self.u
            .bg
            .health
            .gauges
            .last_upload_timestamp_seconds
            .set(at.unix_secs());
        let file = WrittenFile {
            path: s.path.to_string(),
            rows,
            bytes: s.bytes,
            written_at: at,
        };
        // The dashboard's list of recent files: a file missing from it is no reason to put
        // the file again.
        if let Err(e) = self
            .u
            .bg
            .db
            .with(|db| written::record(db, &[(s.app_id().to_owned(), file)], at))
        {
            tracing::warn!(shard = self.u.bg.index, error = %e, "file put but not recorded for the dashboard");
        }
        self.u.bg.outbox.remove(s).map_err(local("outbox delete"))?;
        self.u.bg.health.gauges.outbox_files.dec();
        self.u.bg.health.add_backlog(-(s.bytes as i64), at.micros());
        Ok(())
    }

    /// Deletes the lake files of a flush that an earlier release put but did not checkpoint (a
    /// crash mid-upload). An intent whose checkpoint was written is only removed. Runs before
    /// anything is shipped. False when it gave up (shutdown).
    fn undo_unfinished(&mut self) -> bool {
        self.retrying("undoing an unfinished flush", Self::try_undo)
    }

    fn try_undo(&mut self) -> Result<(), UploadError> {
        let path = self.u.bg.dir.join(INTENT);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        let mut lines = text.lines();
        let intent_lsn = lines
            .next()
            .and_then(|l| l.strip_prefix("lsn "))
            .and_then(|n| n.parse::<u64>().ok());
        let checkpoint = wal::read_checkpoint(&self.u.bg.dir).map_err(local("checkpoint"))?;
        let finished = intent_lsn.is_some_and(|lsn| checkpoint >= lsn);
        for line in lines.filter(|l| !l.is_empty() && !finished) {
            match self.rt.block_on(self.u.store.delete(&Path::from(line))) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => {
                    return Err(UploadError::Store {
                        path: line.to_owned(),
                        source,
                    })
                }
            }
            self.u.bg.db.with(|db| written::forget(db, &[line]))?;
            tracing::info!(
                shard = self.u.bg.index,
                path = line,
                "file of an unfinished flush removed"
            );
        }
        std::fs::remove_file(&path).map_err(local("intent"))
    }
}

/// The rows of a Parquet file, from its footer (0 if it cannot be read: the count is for
/// metrics and the dashboard only).
fn rows_of(file: &std::path::Path) -> u64 {
    std::fs::File::open(file)
        .ok()
        .and_then(|f| {
            parquet::file::metadata::ParquetMetaDataReader::new()
                .parse_and_finish(&f)
                .ok()
        })
        .map_or(0, |m| m.file_metadata().num_rows().max(0) as u64)
}

/// A file up to this size is put in one request; a bigger one in parts of this size (S3's
/// least is 5 MiB), at most [`UPLOAD_CONCURRENCY`] in flight and one filling, so an upload
/// holds at most 3 x 8 MiB. The object appears when the upload completes, whole (S3 and the
/// local store alike).
const PUT_AT_ONCE: usize = 8 << 20;
const UPLOAD_CONCURRENCY: usize = 2;

async fn put_in_parts(store: &dyn ObjectStore, s: &Staged) -> Result<(), UploadError> {
    use std::io::Read;
    let to_store = |source| UploadError::Store {
        path: s.path.to_string(),
        source,
    };
    let mut file = std::fs::File::open(&s.file).map_err(local("outbox read"))?;
    let upload = store.put_multipart(&s.path).await.map_err(to_store)?;
    let mut w = WriteMultipart::new_with_chunk_size(upload, PUT_AT_ONCE);
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                let _ = w.abort().await;
                return Err(local("outbox read")(e));
            }
        };
        if let Err(e) = w.wait_for_capacity(UPLOAD_CONCURRENCY).await {
            return Err(to_store(e));
        }
        w.write(&buf[..n]);
    }
    w.finish().await.map_err(to_store)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::health::Health;
    use crate::collector::metrics::ShardCounters;
    use crate::collector::outbox::Outbox;
    use crate::collector::retry::Backoff;
    use crate::storage::Db;
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};

    const FAST: Backoff = Backoff {
        first: Duration::from_millis(1),
        max: Duration::from_millis(5),
    };

    fn lake_path(lsn: u64) -> Path {
        Path::from(format!(
            "events/app_id=a/dt=2026-11-26/hour=10/part-n0-0-{lsn:020}.parquet"
        ))
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn checkpointed_files_are_put_once_the_lake_is_back_and_later_flushes_wait() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("shard-0");
        let lake_dir = tmp.path().join("lake");
        std::fs::create_dir_all(&lake_dir).unwrap();
        let store = object_store::local::LocalFileSystem::new_with_prefix(&lake_dir).unwrap();
        let outbox = Outbox::new(&dir);
        outbox.write(&lake_path(3), b"three").unwrap();
        outbox.write(&lake_path(9), b"nine!").unwrap();
        let health = Arc::new(Health::new(u64::MAX, tmp.path(), 1));
        health.add_backlog(10, 0);
        health.gauges.outbox_files.set(2); // as measured at start
        let counters: Arc<ShardCounters> = Arc::default();
        let checkpoint = Arc::new(AtomicU64::new(5));
        // The lake is away: its directory is a file, so every put fails.
        std::fs::remove_dir(&lake_dir).unwrap();
        std::fs::write(&lake_dir, b"").unwrap();
        let uploader = Uploader {
            bg: Background {
                index: 0,
                dir: dir.clone(),
                outbox: outbox.clone(),
                parts: Outbox::parts(&dir),
                merge: crate::collector::merge::Policy::default(),
                urgent: Arc::default(),
                handed: Arc::default(),
                db: Db::temporary(),
                counters: counters.clone(),
                health: health.clone(),
                shutdown: Arc::default(),
                patience: Duration::ZERO,
                backoff: FAST,
                clock: Arc::new(crate::clock::SystemClock),
                checkpoint: checkpoint.clone(),
            },
            store: Arc::new(store),
        };
        let (wake, woken) = crossbeam_channel::bounded(1);
        let thread = spawn(uploader, woken).unwrap();
        wake.send(()).unwrap();
        wait_for("the outage is reported", || {
            health.problems().first().is_some_and(|p| p.check == "lake")
        });
        assert!(counters.upload_failures.get() > 0);
        std::fs::remove_file(&lake_dir).unwrap();
        std::fs::create_dir(&lake_dir).unwrap();
        let put = |lsn: u64| lake_dir.join(lake_path(lsn).as_ref());
        wait_for("put once the lake is back", || put(3).exists());
        wait_for("the outage is over", || health.problems().is_empty());
        assert_eq!(std::fs::read(put(3)).unwrap(), b"three");
        let left: Vec<u64> = outbox.list().unwrap().iter().map(|s| s.first_lsn).collect();
        assert_eq!(left, [9], "a flush beyond the checkpoint is not put");
        assert_eq!(health.backlog_bytes(), 5);
        assert_eq!(
            health.gauges.outbox_files.get(),
            1,
            "the gauge follows the disk"
        );
        checkpoint.store(9, Ordering::Release);
        wake.send(()).unwrap();
        wait_for("the next flush is put", || put(9).exists());
        // The gauges follow the delete: wait for them, not for the disk.
        wait_for("the backlog is empty", || {
            health.backlog_bytes() == 0 && health.gauges.outbox_files.get() == 0
        });
        assert!(outbox.list().unwrap().is_empty());
        assert_eq!(counters.files_written.get(), 2);
        drop(wake);
        thread.join().unwrap();
    }
}
