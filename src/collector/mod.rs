//! The analytics collector: `POST /api/w/analytics/collect` to a durable Parquet lake.
//!
//! ```text
//! http (auth, limits, simd-json parse, validate, enrich)        collector/http.rs, decode.rs
//!   -> route by hash(app, anonymousId) over bounded queues       Collector::submit
//!   -> shard writer: dedupe, WAL append + fsync, reply            shard.rs, wal.rs
//!   -> Arrow builders per (app, hour) -> uploader: Parquet zstd   columns.rs
//!   -> object_store put (local dir or S3) -> checkpoint, trim WAL lake.rs
//! ```
//!
//! Architecture invariant: a 200 from the collector means every accepted event of the batch is
//! fsync'd in a shard's WAL. Architecture invariant: every queue is bounded; a full shard queue
//! is answered 503 + Retry-After at the edge, never buffered without bound.

pub mod columns;
pub mod decode;
pub mod dedupe;
pub mod event;
pub mod http;
pub mod identity;
pub mod lake;
pub mod metrics;
pub mod shard;
pub mod usage;
pub mod wal;

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender, TrySendError};

use crate::config::Settings;
pub use event::Event;
use metrics::{EdgeCounters, ShardCounters};
pub use shard::Committed;

#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error("{0}")]
    Lake(#[from] lake::LakeError),
    #[error("{0}")]
    Shard(#[from] shard::ShardError),
}

/// Why a batch could not be committed.
#[derive(Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// A shard's queue is full: retry later.
    Overloaded,
    /// A shard failed to write (its reason is logged).
    Failed(String),
}

/// Handle to the shard writers; shared by every HTTP worker.
pub struct Collector {
    queues: Vec<Sender<shard::Msg>>,
    pub shard_counters: Vec<Arc<ShardCounters>>,
    pub edge: EdgeCounters,
    pub meter: usage::Meter,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stopping: Arc<AtomicBool>,
}

impl Collector {
    /// Opens the lake, replays every shard's WAL into it, and starts the writers.
    pub fn start(settings: &Settings, db: &sled::Db) -> Result<Collector, CollectorError> {
        let c = &settings.collector;
        let data_dir = &settings.storage.data_dir;
        let store = lake::open(&settings.lake, &data_dir.join("lake"))?;
        let n = match c.shards {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            n => n,
        };
        let stopping = Arc::new(AtomicBool::new(false));
        let mut queues = Vec::with_capacity(n);
        let mut shard_counters = Vec::with_capacity(n);
        let mut starting = Vec::with_capacity(n);
        for index in 0..n {
            let (tx, rx) = bounded(c.queue_batches.max(1));
            let counters = Arc::new(ShardCounters::default());
            let cfg = shard::ShardConfig {
                index,
                node_id: c.node_id.clone(),
                wal_dir: data_dir.join("wal").join(format!("shard-{index}")),
                prefix: settings.lake.prefix.clone(),
                max_rows: c.max_file_rows.max(1),
                max_bytes: c.max_file_bytes.max(1),
                max_age: Duration::from_millis(c.max_file_age_ms.max(1)),
                shutdown_upload_timeout: Duration::from_millis(c.shutdown_upload_timeout_ms),
                stopping: stopping.clone(),
            };
            starting.push(shard::start(
                cfg,
                db.clone(),
                store.clone(),
                counters.clone(),
                rx,
            )?);
            queues.push(tx);
            shard_counters.push(counters);
        }
        // Shards recover (replay their WAL into the lake) in parallel; wait for all of them.
        let mut threads = Vec::with_capacity(n);
        let mut failure = None;
        for s in starting {
            match s.wait() {
                Ok(t) => threads.push(t),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            stopping.store(true, Relaxed);
            for q in &queues {
                let _ = q.send(shard::Msg::Stop);
            }
            for t in threads {
                let _ = t.join();
            }
            return Err(e.into());
        }
        tracing::info!(shards = n, lake = %settings.lake.kind, "collector started");
        Ok(Collector {
            queues,
            shard_counters,
            edge: EdgeCounters::default(),
            meter: usage::Meter::default(),
            threads: Mutex::new(threads),
            stopping,
        })
    }

    fn shard_of(&self, e: &Event) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        e.app_id.hash(&mut h);
        e.visitor().hash(&mut h);
        (h.finish() % self.queues.len() as u64) as usize
    }

    /// Hands the events to their shards and waits until they are durable.
    pub async fn submit(&self, events: Vec<Event>) -> Result<Committed, SubmitError> {
        let mut per_shard: Vec<Vec<Event>> = (0..self.queues.len()).map(|_| Vec::new()).collect();
        for e in events {
            let i = self.shard_of(&e);
            per_shard[i].push(e);
        }
        let mut waiting = Vec::new();
        let mut overloaded = false;
        for (i, events) in per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, e)| !e.is_empty())
        {
            let (reply, answer) = tokio::sync::oneshot::channel();
            match self.queues[i].try_send(shard::Msg::Write { events, reply }) {
                Ok(()) => waiting.push(answer),
                Err(TrySendError::Full(_)) => overloaded = true,
                Err(TrySendError::Disconnected(_)) => {
                    return Err(SubmitError::Failed("collector stopped".into()))
                }
            }
        }
        // Wait for what was sent even when another shard was full: a retry of the whole batch
        // is then deduplicated by messageId.
        let mut total = Committed::default();
        let mut failure = None;
        for answer in waiting {
            match answer.await {
                Ok(Ok(c)) => {
                    total.accepted += c.accepted;
                    total.duplicates += c.duplicates;
                }
                Ok(Err(e)) => failure = Some(e),
                Err(_) => failure = Some("shard stopped".into()),
            }
        }
        if let Some(e) = failure {
            return Err(SubmitError::Failed(e));
        }
        if overloaded {
            return Err(SubmitError::Overloaded);
        }
        Ok(total)
    }

    /// Drains every queue, flushes every open file to the lake, and waits for the threads.
    pub fn shutdown(&self) {
        self.stopping.store(true, Relaxed);
        for q in &self.queues {
            let _ = q.send(shard::Msg::Stop);
        }
        let threads = std::mem::take(&mut *self.threads.lock().expect("threads lock"));
        for t in threads {
            let _ = t.join();
        }
        tracing::info!("collector stopped; every accepted event is in the lake or the WAL");
    }

    /// `/metrics` text.
    pub fn metrics(&self) -> String {
        metrics::render(&self.edge, &self.shard_counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: usize) -> Event {
        serde_json::from_value(serde_json::json!({
            "message_id": format!("msg_{n}"), "app_id": "a", "type": "page", "event": null,
            "anonymous_id": "v", "user_id": null, "group_id": null, "session_id": null,
            "timestamp": 1, "original_timestamp": null, "sent_at": null, "received_at": 1,
            "page_url": null, "page_path": null, "page_title": null, "page_referrer": null,
            "device_type": null, "locale": null, "timezone": null, "screen_width": null,
            "screen_height": null, "ip": null, "user_agent": null, "properties": null,
            "traits": null, "context": null
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_full_shard_queue_answers_overloaded_instead_of_buffering() {
        let (tx, rx) = bounded(1);
        let collector = Collector {
            queues: vec![tx],
            shard_counters: vec![Arc::default()],
            edge: EdgeCounters::default(),
            meter: usage::Meter::default(),
            threads: Mutex::default(),
            stopping: Arc::default(),
        };
        let collector = Arc::new(collector);
        // The first batch takes the only slot; nobody serves the queue, so it waits.
        let first = tokio::spawn({
            let c = collector.clone();
            async move { c.submit(vec![event(1)]).await }
        });
        while rx.is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            collector.submit(vec![event(2)]).await,
            Err(SubmitError::Overloaded)
        );
        // Once the shard answers, the waiting batch completes.
        let Ok(shard::Msg::Write { reply, events }) = rx.recv() else {
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
            first.await.unwrap(),
            Ok(Committed {
                accepted: 1,
                duplicates: 0
            })
        );
    }
}
