//! Settling an app: every event of it committed before the call put into lake files, so an
//! erasure or an app deletion can then work on the lake alone.
//!
//! `Collector::settle(app)` marks the app urgent (the mergers then merge its parts whatever
//! their size or hour, `merge.rs`), asks every writer to hand its open files over (`Msg::Flush`,
//! answered with the shard's last committed LSN), wakes the uploaders, and polls until, in every
//! shard, the checkpoint has passed that LSN, the WAL's segments up to it are trimmed, and
//! neither the parts nor the outbox hold a file of the app from at or before it. Then each
//! writer scrubs its WAL (`Msg::Scrub`: a recycled segment's tail and the spare go), so an
//! erasure leaves none of the app's raw events outside the lake. A lake that is away (or a
//! stop) makes it return an error after [`SETTLE_WAIT`]: the caller (a job) tries again later.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Sender, TrySendError};

use super::outbox::Outbox;
use super::{wal, writer, Collector};

/// How long `settle` waits for the files to reach the lake before it gives up for now.
pub const SETTLE_WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// Why an app is not settled yet: try again later.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error("the collector is stopping")]
    Stopped,
    #[error("the app's events are not all in the lake yet: {0}")]
    NotYet(String),
}

/// What `settle` watches in one shard.
#[derive(Clone)]
pub struct ShardFiles {
    pub parts: Outbox,
    pub outbox: Outbox,
    pub checkpoint: Arc<AtomicU64>,
    /// The shard's WAL directory: the segments up to the LSN must be gone (`wal::trim`).
    pub wal: PathBuf,
    /// The lake's prefix (`lake.prefix`): where an app's files are.
    pub prefix: String,
}

impl ShardFiles {
    /// Whether every row of `app` at or below `lsn` is in the lake, and no WAL segment keeps
    /// them (an erasure then leaves none of the app's raw events in the shard's files).
    fn settled(&self, app: &str, lsn: u64) -> std::io::Result<bool> {
        if self.checkpoint.load(Ordering::Acquire) < lsn || !wal::trimmed_through(&self.wal, lsn)? {
            return Ok(false);
        }
        let dir = super::lake::app_dir(&self.prefix, app);
        for store in [&self.parts, &self.outbox] {
            if store.list_under(&dir)?.iter().any(|s| s.first_lsn <= lsn) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Collector {
    /// Returns once every event of `app` committed before the call is in a lake file in the
    /// object store; an error when that cannot happen within [`SETTLE_WAIT`] (the lake is away,
    /// the server stops): try again later.
    pub async fn settle(&self, app: &str) -> Result<(), SettleError> {
        let _held = self.urgent.hold(app);
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        // Shards beyond the queues (retired) flushed everything at start: their checkpoint.
        let mut targets: Vec<u64> = self
            .files
            .iter()
            .map(|f| f.checkpoint.load(Ordering::Acquire))
            .collect();
        for (i, queue) in self.queues.iter().enumerate() {
            targets[i] = ask_flush(queue, deadline).await?;
        }
        loop {
            let mut pending = 0;
            for (files, &lsn) in self.files.iter().zip(&targets) {
                let done = files
                    .settled(app, lsn)
                    .map_err(|e| SettleError::NotYet(format!("listing the shard's files: {e}")))?;
                pending += usize::from(!done);
            }
            // The uploaders merge and ship (a full channel: awake already).
            for wake in self.wakes.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                let _ = wake.try_send(());
            }
            if pending == 0 {
                // The trim passed the app's events: the writers drop what their WAL files keep
                // beyond their records (a recycled segment's tail, the spare).
                for queue in &self.queues {
                    ask_scrub(queue, deadline).await?;
                }
                return Ok(());
            }
            if self.shutdown.elapsed().is_some() {
                return Err(SettleError::Stopped);
            }
            if tokio::time::Instant::now() >= deadline {
                let problems: Vec<String> = self
                    .health
                    .problems()
                    .iter()
                    .map(|p| format!("{}: {}", p.check, p.message))
                    .collect();
                let why = if problems.is_empty() {
                    format!("{pending} shard(s) still shipping")
                } else {
                    problems.join("; ")
                };
                return Err(SettleError::NotYet(why));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Asks a writer to hand its open files over; its last committed LSN.
async fn ask_flush(
    queue: &Sender<writer::Msg>,
    deadline: tokio::time::Instant,
) -> Result<u64, SettleError> {
    ask(queue, deadline, |reply| writer::Msg::Flush { reply }).await
}

/// Asks a writer to scrub its WAL's files.
async fn ask_scrub(
    queue: &Sender<writer::Msg>,
    deadline: tokio::time::Instant,
) -> Result<(), SettleError> {
    ask(queue, deadline, |reply| writer::Msg::Scrub { reply })
        .await?
        .map_err(|e| SettleError::NotYet(format!("scrubbing the write-ahead log: {e}")))
}

/// Sends a writer the message `make` builds around a reply channel; its answer.
async fn ask<T>(
    queue: &Sender<writer::Msg>,
    deadline: tokio::time::Instant,
    make: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> writer::Msg,
) -> Result<T, SettleError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let mut msg = make(reply);
    loop {
        match queue.try_send(msg) {
            Ok(()) => break,
            Err(TrySendError::Full(m)) if tokio::time::Instant::now() < deadline => {
                msg = m;
                tokio::time::sleep(POLL).await;
            }
            Err(TrySendError::Full(_)) => {
                return Err(SettleError::NotYet("a shard's queue stayed full".into()))
            }
            Err(TrySendError::Disconnected(_)) => return Err(SettleError::Stopped),
        }
    }
    match tokio::time::timeout_at(deadline, answer).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(SettleError::Stopped),
        Err(_) => Err(SettleError::NotYet("a shard did not answer".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, SystemClock};
    use crate::collector::gate::AdmitAll;
    use crate::collector::{lake, Event};
    use crate::config::Settings;
    use crate::storage::Db;
    use std::time::Duration;

    /// Every file under `dir`, recursively (none if it does not exist).
    fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out
    }

    fn lake_files(dir: &std::path::Path, app: &str) -> Vec<std::path::PathBuf> {
        files_under(&dir.join(format!("events/app_id={app}")))
    }

    /// A collector on a data dir in `tmp` with a local lake in it, hourly lake files and open
    /// files that would not age for an hour; `configure` changes the rest.
    fn start(
        tmp: &std::path::Path,
        configure: impl FnOnce(&mut Settings),
    ) -> (Arc<Collector>, std::path::PathBuf) {
        let mut s = Settings::load(None).unwrap();
        s.storage.data_dir = tmp.to_path_buf();
        s.collector.lake_file_max_wait_ms = 0;
        s.collector.max_file_age_ms = 3_600_000;
        configure(&mut s);
        let lake_dir = tmp.join("lake");
        let store = lake::open(&s.lake, &lake_dir).unwrap();
        let c = Collector::start(
            &s,
            &Db::temporary(),
            store,
            Arc::new(SystemClock),
            Arc::new(AdmitAll),
        );
        (Arc::new(c.unwrap()), lake_dir)
    }

    fn rows(files: &[std::path::PathBuf]) -> i64 {
        files
            .iter()
            .map(|f| {
                let f = std::fs::File::open(f).unwrap();
                let meta = parquet::file::metadata::ParquetMetaDataReader::new()
                    .parse_and_finish(&f)
                    .unwrap();
                meta.file_metadata().num_rows()
            })
            .sum()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn settling_an_app_puts_its_events_into_the_lake_and_leaves_the_others_parked() {
        let tmp = tempfile::tempdir().unwrap();
        let (c, lake_dir) = start(tmp.path(), |s| s.collector.shards = 2);
        let now = SystemClock.now_micros();
        let events = |app: &str| -> Vec<Event> {
            (0..40)
                .map(|i| Event::example(app, &format!("{app}{i}"), &format!("v{i}"), now))
                .collect()
        };
        assert_eq!(c.submit(events("a")).await.unwrap().accepted, 40);
        assert_eq!(c.submit(events("b")).await.unwrap().accepted, 40);
        c.settle("a").await.unwrap();
        assert_eq!(rows(&lake_files(&lake_dir, "a")), 40, "every event of a");
        assert!(
            lake_files(&lake_dir, "b").is_empty(),
            "b waits for its hour"
        );
        assert!(!c.urgent.contains("a"), "no longer urgent once settled");
        // Settling again, with nothing new, is at once.
        c.settle("a").await.unwrap();
        let stopping = c.clone();
        tokio::task::spawn_blocking(move || stopping.shutdown())
            .await
            .unwrap();
        assert_eq!(
            rows(&lake_files(&lake_dir, "b")),
            40,
            "a stop merges the rest"
        );
        assert!(matches!(c.settle("a").await, Err(SettleError::Stopped)));
    }

    /// The files under `dir`, outside `skip`, whose bytes contain `needle`.
    fn files_holding(dir: &std::path::Path, skip: &std::path::Path, needle: &[u8]) -> Vec<String> {
        files_under(dir)
            .into_iter()
            .filter(|p| !p.starts_with(skip))
            .filter(|p| {
                let bytes = std::fs::read(p).unwrap_or_default();
                bytes.windows(needle.len()).any(|w| w == needle)
            })
            .map(|p| p.display().to_string())
            .collect()
    }

    /// What an erasure relies on: once an app is settled, its raw events are only in the
    /// lake: not in a WAL segment, nor behind the records of a segment recycled from a spare
    /// that held them, nor in the spare.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn once_settled_no_file_outside_the_lake_keeps_the_apps_events() {
        let tmp = tempfile::tempdir().unwrap();
        let (c, lake_dir) = start(tmp.path(), |s| {
            s.collector.shards = 1;
            // Every 10 rows the files go to the stager: the WAL rotates, its trim keeps a spare.
            s.collector.max_file_rows = 10;
        });
        let now = SystemClock.now_micros();
        let person = "visitor-to-be-erased";
        for round in 0..3 {
            let theirs: Vec<Event> = (0..20)
                .map(|i| Event::example("a", &format!("m{round}-{i}"), person, now))
                .collect();
            assert_eq!(c.submit(theirs).await.unwrap().accepted, 20);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !files_under(tmp.path())
                .iter()
                .any(|p| p.ends_with("spare.log"))
            {
                assert!(std::time::Instant::now() < deadline, "no spare kept");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Shorter records of another app: the next rotation writes them over the spare,
            // whose older records stay behind them.
            let others: Vec<Event> = (0..10)
                .map(|i| Event::example("b", &format!("b{round}{i}"), "v", now))
                .collect();
            assert_eq!(c.submit(others).await.unwrap().accepted, 10);
            assert!(
                !files_holding(tmp.path(), &lake_dir, person.as_bytes()).is_empty(),
                "the search finds their events outside the lake before the settle"
            );
            c.settle("a").await.unwrap();
            assert_eq!(
                files_holding(tmp.path(), &lake_dir, person.as_bytes()),
                Vec::<String>::new(),
                "round {round}: only the lake holds them"
            );
        }
        let stopping = c.clone();
        tokio::task::spawn_blocking(move || stopping.shutdown())
            .await
            .unwrap();
    }
}
