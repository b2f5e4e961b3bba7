//! The uploader actor: one thread per shard, fed by its writer over a bounded queue of 1.
//!
//! For each flush (files its writer encoded as Parquet, zstd, as rows came) it notes the paths
//! it is about to write in an *intent* file (fsync'd), puts each file, applies the flush's
//! traffic rollups (once per LSN: `rollup/store.rs`), writes the files' messageId fingerprints
//! as a dedupe run, flushes sled (profiles), writes the checkpoint (the last LSN now in the lake),
//! clears
//! the intent and trims the WAL. It also records the files it put (`written.rs`) for the
//! dashboard. Every failure is retried with the collector's one backoff rule
//! (`retry.rs`), while the WAL keeps the events.
//!
//! At start, before any flush, the paths of an unfinished intent are deleted: the WAL still
//! holds their events and the writer's replay writes them again, so every acknowledged event
//! lands in the lake exactly once.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::metrics::ShardCounters;
use super::retry::{retry, Backoff, Shutdown};
use super::written::{self, WrittenFile};
use super::{dedupe, rollup, wal};
use crate::clock::Clock;
use crate::storage::files::write_atomic;

const INTENT: &str = "intent";

/// One flush: the closed files of a shard and the last WAL LSN they cover.
pub struct Upload {
    pub last_lsn: u64,
    pub files: Vec<Encoded>,
    /// The fingerprints of every row's messageId, for the dedupe index.
    pub ids: Arc<dedupe::Flushed>,
    /// The rollups of the rows (`rollup/`), applied once before the checkpoint.
    pub rollup: rollup::Delta,
}

/// Why one attempt at a flush failed.
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
    #[error("sled flush: {0}")]
    Sled(#[from] sled::Error),
    #[error("rollups: {0}")]
    Rollup(#[from] rollup::store::RollupError),
}

fn local(what: &'static str) -> impl FnOnce(std::io::Error) -> UploadError {
    move |source| UploadError::Local { what, source }
}

/// What an uploader needs.
pub struct Uploader {
    pub index: usize,
    /// The shard's directory (WAL, checkpoint, intent, dedupe files).
    pub dir: PathBuf,
    pub db: sled::Db,
    pub dedupe: Arc<dedupe::Index>,
    pub store: Arc<dyn ObjectStore>,
    pub counters: Arc<ShardCounters>,
    pub shutdown: Arc<Shutdown>,
    /// How long after the shutdown began failing work is still retried.
    pub patience: Duration,
    pub backoff: Backoff,
    /// When a file was written (the dashboard's list of recent files).
    pub clock: Arc<dyn Clock>,
}

/// Starts the uploader on its own thread; it ends when its writer drops the queue.
pub fn spawn(uploader: Uploader, jobs: Receiver<Upload>) -> std::io::Result<JoinHandle<()>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(format!("uploader-{}", uploader.index))
        .spawn(move || {
            let mut running = Running {
                u: uploader,
                rt,
                failed: false,
            };
            running.undo_unfinished();
            loop {
                match jobs.recv_timeout(crate::memory::poll()) {
                    Ok(job) => {
                        // Work from start to end: a slow upload is not a quiet period.
                        crate::memory::note_activity();
                        running.upload(job);
                        crate::memory::note_activity();
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                crate::memory::release_if_idle(crate::memory::Thread::Uploader);
            }
        })
}

struct Running {
    u: Uploader,
    rt: tokio::runtime::Runtime,
    /// Set once work was abandoned (only at shutdown): later jobs must not checkpoint past it,
    /// so they are left in the WAL too.
    failed: bool,
}

impl Running {
    fn dir(&self) -> &FsPath {
        &self.u.dir
    }

    /// Runs `attempt` under the retry rule, logging each failure.
    fn retrying<T>(
        &mut self,
        what: &str,
        mut attempt: impl FnMut(&mut Self) -> Result<T, UploadError>,
    ) -> Result<T, UploadError> {
        let (backoff, patience, shutdown) =
            (self.u.backoff, self.u.patience, self.u.shutdown.clone());
        let (index, counters) = (self.u.index, self.u.counters.clone());
        retry(
            backoff,
            &shutdown,
            patience,
            || attempt(self),
            |e, delay| {
                counters.upload_retries.inc();
                tracing::error!(shard = index, error = %e, retry_in_ms = delay.as_millis() as u64, "{what} failed; the WAL keeps the events, retrying");
            },
        )
    }

    /// Deletes the files of a flush that did not reach its checkpoint (a crash mid-upload). An
    /// intent whose checkpoint was written (a crash just before it was removed) is only
    /// removed. Runs before any job, retrying while the object store is unreachable.
    fn undo_unfinished(&mut self) {
        if let Err(e) = self.retrying("undoing an unfinished flush", Self::try_undo) {
            tracing::error!(shard = self.u.index, error = %e, "unfinished flush not undone at shutdown; nothing more is written");
            self.failed = true;
        }
    }

    fn try_undo(&mut self) -> Result<(), UploadError> {
        let path = self.dir().join(INTENT);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        let mut lines = text.lines();
        let intent_lsn = lines
            .next()
            .and_then(|l| l.strip_prefix("lsn "))
            .and_then(|n| n.parse::<u64>().ok());
        let checkpoint = wal::read_checkpoint(self.dir()).map_err(local("checkpoint"))?;
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
            written::forget(&self.u.db, &[line])?;
            tracing::info!(
                shard = self.u.index,
                path = line,
                "file of an unfinished flush removed"
            );
        }
        std::fs::remove_file(&path).map_err(local("intent"))
    }

    /// Writes one flush to the lake and checkpoints it, retrying until it works. Only at
    /// shutdown does it give up, leaving the events in the WAL.
    fn upload(&mut self, job: Upload) {
        if self.failed {
            return;
        }
        let started = Instant::now();
        if let Err(e) = self.retrying("flush", |me| me.put_and_checkpoint(&job)) {
            return self.abandon(e);
        }
        self.u
            .counters
            .flush
            .observe(started.elapsed().as_secs_f64());
        tracing::debug!(
            shard = self.u.index,
            files = job.files.len(),
            last_lsn = job.last_lsn,
            "flush done"
        );
    }

    fn abandon(&mut self, e: UploadError) {
        tracing::error!(shard = self.u.index, error = %e, "flush abandoned at shutdown; the WAL keeps the events");
        self.failed = true;
    }

    fn put_and_checkpoint(&mut self, job: &Upload) -> Result<(), UploadError> {
        let files = &job.files;
        let mut intent = format!("lsn {}\n", job.last_lsn);
        intent.extend(files.iter().map(|f| format!("{}\n", f.path)));
        write_atomic(self.dir(), INTENT, intent.as_bytes()).map_err(local("intent"))?;
        for f in files {
            // A put is atomic: readers see the whole file or nothing.
            let put = self.u.store.put(&f.path, PutPayload::from(f.bytes.clone()));
            self.rt.block_on(put).map_err(|source| UploadError::Store {
                path: f.path.to_string(),
                source,
            })?;
            self.u.counters.files_written.inc();
            self.u.counters.rows_written.inc_by(f.rows as u64);
        }
        // The dashboard's list of recent files; forgotten again if this flush is undone.
        let at = self.u.clock.now();
        let record: Vec<(String, WrittenFile)> = files
            .iter()
            .map(|f| {
                let file = WrittenFile {
                    path: f.path.to_string(),
                    rows: f.rows as u64,
                    bytes: f.bytes.len() as u64,
                    written_at: at,
                };
                (f.app_id.clone(), file)
            })
            .collect();
        written::record(&self.u.db, &record, at)?;
        // Exactly once: skipped when the shard's rollup LSN already covers the job.
        rollup::store::apply(&self.u.db, self.u.index, job.last_lsn, &job.rollup)?;
        self.u
            .dedupe
            .persist(&job.ids)
            .map_err(local("dedupe runs"))?;
        self.u.db.flush()?;
        wal::write_checkpoint(self.dir(), job.last_lsn).map_err(local("checkpoint"))?;
        std::fs::remove_file(self.dir().join(INTENT)).map_err(local("intent"))?;
        wal::trim(self.dir(), job.last_lsn).map_err(local("trim"))?;
        if let Err(e) = self.u.dedupe.compact() {
            // Lookups stay exact over more runs; the next flush tries again.
            tracing::warn!(shard = self.u.index, error = %e, "dedupe runs not merged");
        }
        Ok(())
    }
}

/// A closed lake file: its app, where it goes, its Parquet bytes, its rows.
pub struct Encoded {
    pub app_id: String,
    pub path: Path,
    pub bytes: bytes::Bytes,
    pub rows: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::columns::{encode_parquet, RowBuilder};
    use crate::collector::event::Event;
    use object_store::memory::InMemory;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    struct Fixture {
        _tmp: tempfile::TempDir,
        dir: PathBuf,
        store: Arc<InMemory>,
        counters: Arc<ShardCounters>,
        index: Arc<dedupe::Index>,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("shard-0");
        std::fs::create_dir_all(&dir).unwrap();
        Fixture {
            _tmp: tmp,
            store: Arc::new(InMemory::new()),
            counters: Arc::default(),
            index: dedupe::Index::open(&dir, 1).unwrap(),
            dir,
        }
    }

    impl Fixture {
        /// Runs an uploader over `jobs` until they are done.
        fn run(&self, jobs: Vec<Upload>) {
            let uploader = Uploader {
                index: 0,
                dir: self.dir.clone(),
                db: sled::Config::new().temporary(true).open().unwrap(),
                dedupe: self.index.clone(),
                store: self.store.clone(),
                counters: self.counters.clone(),
                shutdown: Arc::default(),
                patience: Duration::ZERO,
                backoff: Backoff::default(),
                clock: Arc::new(crate::clock::SystemClock),
            };
            let (tx, rx) = crossbeam_channel::bounded(jobs.len().max(1));
            for j in jobs {
                tx.send(j).unwrap();
            }
            drop(tx);
            spawn(uploader, rx).unwrap().join().unwrap();
        }

        fn get(&self, path: &str) -> Option<bytes::Bytes> {
            let store = self.store.clone();
            let path = Path::from(path);
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(async move {
                    match store.get(&path).await {
                        Ok(r) => Some(r.bytes().await.unwrap()),
                        Err(_) => None,
                    }
                })
        }
    }

    fn job(index: &dedupe::Index, path: &str, last_lsn: u64, rows: usize) -> Upload {
        let mut b = RowBuilder::default();
        for i in 0..rows {
            b.append(&Event::example("app", &format!("msg_{i}"), "a", 1));
        }
        let bytes = encode_parquet(&b.finish()).unwrap().into();
        Upload {
            last_lsn,
            files: vec![Encoded {
                app_id: "app".into(),
                path: Path::from(path),
                bytes,
                rows,
            }],
            ids: {
                let mut ids: Vec<u128> = (0..rows)
                    .map(|i| index.fingerprint("app", &format!("msg_{i}")))
                    .collect();
                ids.sort_unstable();
                Arc::new(dedupe::Flushed {
                    lsn: last_lsn,
                    ids: vec![(0, ids)],
                })
            },
            rollup: Default::default(),
        }
    }

    #[test]
    fn a_flush_puts_parquet_then_checkpoints_and_remembers_the_ids() {
        let f = fixture();
        f.run(vec![job(&f.index, "events/a.parquet", 7, 3)]);
        let bytes = f.get("events/a.parquet").expect("file in the store");
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 3);
        assert_eq!(wal::read_checkpoint(&f.dir).unwrap(), 7);
        assert!(!f.dir.join(INTENT).exists());
        // A writer started afterwards finds the ids on disk.
        let index = dedupe::Index::open(&f.dir, 1).unwrap();
        let key = index.fingerprint("app", "msg_2");
        let seen = dedupe::Seen::open(index, 1, 4096, Default::default()).unwrap();
        assert!(seen.contains(key));
        assert_eq!(f.counters.files_written.get(), 1);
        assert_eq!(f.counters.rows_written.get(), 3);
    }

    #[test]
    fn the_files_of_an_unfinished_flush_are_removed_before_anything_else() {
        let f = fixture();
        f.run(vec![job(&f.index, "events/half.parquet", 9, 1)]);
        // A crash after the put but before the checkpoint: the intent names the file.
        wal::write_checkpoint(&f.dir, 4).unwrap();
        write_atomic(&f.dir, INTENT, b"lsn 9\nevents/half.parquet\n").unwrap();
        f.run(vec![]);
        assert!(
            f.get("events/half.parquet").is_none(),
            "the WAL replay writes it again"
        );
        assert!(!f.dir.join(INTENT).exists());
        // An intent the checkpoint already covers removes nothing.
        f.run(vec![job(&f.index, "events/done.parquet", 12, 1)]);
        write_atomic(&f.dir, INTENT, b"lsn 12\nevents/done.parquet\n").unwrap();
        f.run(vec![]);
        assert!(f.get("events/done.parquet").is_some());
    }
}
