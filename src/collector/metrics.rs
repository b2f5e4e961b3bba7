//! Counters of the collector: one `ShardCounters` per writer actor plus the edge's own. The
//! `/metrics` endpoint, the logs and the tests read the same atomics.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
pub struct ShardCounters {
    pub accepted: AtomicU64,
    pub duplicates: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_fsyncs: AtomicU64,
    pub fsync_micros: AtomicU64,
    pub rows_written: AtomicU64,
    pub files_written: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_micros: AtomicU64,
    pub upload_retries: AtomicU64,
    pub replayed: AtomicU64,
    pub queue_depth: AtomicU64,
}

/// Why the edge refused events or requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    InvalidEvent,
    InvalidBody,
    TooLarge,
    Unauthorized,
    PlanLimit,
    Overloaded,
}

impl Reject {
    const ALL: [Reject; 6] = [
        Reject::InvalidEvent,
        Reject::InvalidBody,
        Reject::TooLarge,
        Reject::Unauthorized,
        Reject::PlanLimit,
        Reject::Overloaded,
    ];

    fn name(self) -> &'static str {
        match self {
            Reject::InvalidEvent => "invalid_event",
            Reject::InvalidBody => "invalid_body",
            Reject::TooLarge => "too_large",
            Reject::Unauthorized => "unauthorized",
            Reject::PlanLimit => "plan_limit",
            Reject::Overloaded => "overloaded",
        }
    }
}

#[derive(Default, Debug)]
pub struct EdgeCounters {
    pub requests: AtomicU64,
    pub body_bytes: AtomicU64,
    rejected: [AtomicU64; 6],
}

impl EdgeCounters {
    pub fn reject(&self, why: Reject, n: u64) {
        let i = Reject::ALL.iter().position(|r| *r == why).expect("listed");
        self.rejected[i].fetch_add(n, Relaxed);
    }

    pub fn rejected(&self, why: Reject) -> u64 {
        let i = Reject::ALL.iter().position(|r| *r == why).expect("listed");
        self.rejected[i].load(Relaxed)
    }
}

/// Prometheus text exposition of every counter.
pub fn render(edge: &EdgeCounters, shards: &[std::sync::Arc<ShardCounters>]) -> String {
    let mut out = String::new();
    fn family(out: &mut String, name: &str, help: &str, kind: &str) {
        let _ = writeln!(
            out,
            "# HELP tributary_collector_{name} {help}\n# TYPE tributary_collector_{name} {kind}"
        );
    }
    for (name, help, value) in [
        (
            "requests_total",
            "Collect requests received.",
            &edge.requests,
        ),
        (
            "body_bytes_total",
            "Request body bytes received (after decompression).",
            &edge.body_bytes,
        ),
    ] {
        family(&mut out, name, help, "counter");
        let _ = writeln!(out, "tributary_collector_{name} {}", value.load(Relaxed));
    }
    family(
        &mut out,
        "rejected_total",
        "Events or requests refused, by reason.",
        "counter",
    );
    for r in Reject::ALL {
        let _ = writeln!(
            out,
            "tributary_collector_rejected_total{{reason=\"{}\"}} {}",
            r.name(),
            edge.rejected(r)
        );
    }
    type Family = (
        &'static str,
        &'static str,
        &'static str,
        fn(&ShardCounters) -> u64,
    );
    let per_shard: [Family; 12] = [
        (
            "accepted_total",
            "Events made durable and acknowledged.",
            "counter",
            |c| c.accepted.load(Relaxed),
        ),
        (
            "duplicates_total",
            "Events dropped as duplicates by messageId.",
            "counter",
            |c| c.duplicates.load(Relaxed),
        ),
        (
            "wal_bytes_total",
            "Bytes appended to the write-ahead log.",
            "counter",
            |c| c.wal_bytes.load(Relaxed),
        ),
        (
            "wal_fsyncs_total",
            "Group commits (one fdatasync each).",
            "counter",
            |c| c.wal_fsyncs.load(Relaxed),
        ),
        (
            "wal_fsync_seconds_total",
            "Time spent writing and fdatasyncing the WAL.",
            "counter",
            |c| c.fsync_micros.load(Relaxed),
        ),
        (
            "rows_written_total",
            "Rows written to Parquet files in the lake.",
            "counter",
            |c| c.rows_written.load(Relaxed),
        ),
        (
            "files_written_total",
            "Parquet files put in the lake.",
            "counter",
            |c| c.files_written.load(Relaxed),
        ),
        (
            "flushes_total",
            "Flushes (each closes every open file of the shard).",
            "counter",
            |c| c.flushes.load(Relaxed),
        ),
        (
            "flush_seconds_total",
            "Time spent encoding and uploading flushes.",
            "counter",
            |c| c.flush_micros.load(Relaxed),
        ),
        (
            "upload_retries_total",
            "Failed uploads that were retried.",
            "counter",
            |c| c.upload_retries.load(Relaxed),
        ),
        (
            "replayed_total",
            "Events replayed from the write-ahead log at start.",
            "counter",
            |c| c.replayed.load(Relaxed),
        ),
        (
            "queue_depth",
            "Batches waiting for the shard.",
            "gauge",
            |c| c.queue_depth.load(Relaxed),
        ),
    ];
    for (name, help, kind, get) in per_shard {
        family(&mut out, name, help, kind);
        for (i, c) in shards.iter().enumerate() {
            let v = get(c);
            if name.ends_with("_seconds_total") {
                let _ = writeln!(
                    out,
                    "tributary_collector_{name}{{shard=\"{i}\"}} {:.6}",
                    v as f64 / 1e6
                );
            } else {
                let _ = writeln!(out, "tributary_collector_{name}{{shard=\"{i}\"}} {v}");
            }
        }
    }
    out
}
