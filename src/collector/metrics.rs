//! The collector's metrics, in a `prometheus-client` registry served at `GET /metrics`
//! (OpenMetrics text). Counters per shard and per rejection reason, histograms for the request
//! latency, the WAL's group commit (its durable write) and the flush (encode + upload +
//! checkpoint).
//!
//! Every handle is created once, at start: the hot path only adds to atomics.

use crate::fields::names;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

names! {
    /// Why the edge refused events or requests.
    pub Reject {
        InvalidEvent = "invalid_event",
        InvalidBody = "invalid_body",
        TooLarge = "too_large",
        Unauthorized = "unauthorized",
        PlanLimit = "plan_limit",
        Overloaded = "overloaded",
        Suppressed = "suppressed",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabel {
    reason: Reject,
}

names! {
    /// What the retention sweep removes (`retention/`).
    pub Expired {
        LakePartitions = "lake_partitions",
        LakeFiles = "lake_files",
        HourlyBuckets = "hourly_buckets",
        DailyBuckets = "daily_buckets",
        Responses = "responses",
        LakeFileRecords = "lake_file_records",
    }
}

/// A `names!` enum in a label: its name.
macro_rules! label_values {
    ($($t:ty),+) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                EncodeLabelValue::encode(&self.name(), encoder)
            }
        }
    )+};
}

label_values!(Reject, Expired);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    kind: Expired,
}

/// The retention sweep's handles (its task adds to them).
#[derive(Debug, Clone, Default)]
pub struct RetentionCounters {
    removed: Family<KindLabel, Counter>,
    /// Sweeps run to the end, and sweeps that failed (retried at the next one).
    pub sweeps: Counter,
    pub failures: Counter,
}

impl RetentionCounters {
    pub fn removed(&self, kind: Expired, n: u64) {
        self.removed.get_or_create(&KindLabel { kind }).inc_by(n);
    }

    pub fn removed_count(&self, kind: Expired) -> u64 {
        self.removed.get_or_create(&KindLabel { kind }).get()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ShardLabel {
    shard: u32,
}

/// Buckets from 100 µs to about 26 s (×2 each), in seconds.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 19))
}

/// Registers each metric with its name and help.
macro_rules! register {
    ($r:expr, $($name:literal, $help:literal, $metric:expr;)+) => {
        $($r.register($name, $help, $metric);)+
    };
}

/// Declares the per-shard metrics once: each one's handle in [`ShardCounters`], its family
/// (labelled `shard="<index>"`) in `ShardFamilies`, and its name and help when registered.
macro_rules! shard_metrics {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $kind:ty = $make:path, $name:literal, $help:literal;
    )+) => {
        /// One shard's handles (the writer and the uploader add to them).
        #[derive(Debug, Clone)]
        pub struct ShardCounters {
            $($(#[doc = $doc])* pub $field: $kind,)+
        }

        impl Default for ShardCounters {
            /// Handles registered nowhere (unit tests).
            fn default() -> Self {
                ShardCounters { $($field: $make(),)+ }
            }
        }

        /// The per-shard families, labelled `shard="<index>"`.
        struct ShardFamilies {
            $($field: Family<ShardLabel, $kind>,)+
        }

        impl ShardFamilies {
            fn register(r: &mut Registry) -> ShardFamilies {
                let f = ShardFamilies { $($field: Family::new_with_constructor($make),)+ };
                register!(r, $($name, $help, f.$field.clone();)+);
                f
            }

            fn handles(&self, shards: usize) -> Vec<ShardCounters> {
                (0..shards as u32)
                    .map(|shard| {
                        let l = ShardLabel { shard };
                        ShardCounters { $($field: self.$field.get_or_create(&l).clone(),)+ }
                    })
                    .collect()
            }
        }
    };
}

shard_metrics! {
    accepted: Counter = Counter::default, "accepted", "Events made durable and acknowledged";
    duplicates: Counter = Counter::default, "duplicates",
        "Events dropped as duplicates by messageId";
    wal_bytes: Counter = Counter::default, "wal_bytes", "Bytes appended to the write-ahead log";
    /// One observation per group commit: the WAL's durable write (a direct, synchronous write,
    /// or a write and an fdatasync; the name is older).
    wal_fsync: Histogram = seconds, "wal_fsync_seconds",
        "Group commits: time to write the WAL durably";
    rows_written: Counter = Counter::default, "rows_written",
        "Rows written to Parquet files in the lake";
    files_written: Counter = Counter::default, "files_written", "Parquet files put in the lake";
    merges: Counter = Counter::default, "merges",
        "Groups of parts (one app and hour) merged into one lake file";
    /// One observation per flush: encode, put, checkpoint.
    flush: Histogram = seconds, "flush_seconds",
        "Flushes: time to stage a shard's closed files in its outbox and checkpoint them";
    upload_retries: Counter = Counter::default, "upload_retries",
        "Failed staging or upload attempts that were retried";
    upload_failures: Counter = Counter::default, "upload_failures",
        "Puts to the object store that failed (each is retried)";
    refused_at_commit: Counter = Counter::default, "refused_at_commit",
        "Events the edge let through but the shard dropped: their app was being deleted, or their person erased, meanwhile";
    refused_full: Counter = Counter::default, "refused_full",
        "Batches refused (503) because the shard's open files were full and not handed over yet";
    /// Flushes the writer could not start (the WAL would not rotate); retried a second later.
    flush_failures: Counter = Counter::default, "flush_failures",
        "Flushes that could not start (the WAL would not rotate); retried";
    replayed: Counter = Counter::default, "replayed",
        "Events replayed from the write-ahead log at start";
    /// messageIds the dedupe filter could not rule out, looked up on disk.
    dedupe_disk_lookups: Counter = Counter::default, "dedupe_disk_lookups",
        "messageIds the in-memory filter could not rule out, looked up on disk";
    queue_depth: Gauge = Gauge::default, "queue_depth", "Batches waiting for the shard";
}

/// The edge's handles.
#[derive(Debug)]
pub struct EdgeCounters {
    pub requests: Counter,
    pub body_bytes: Counter,
    /// Seconds from the request's start to the answer of `collect`.
    pub latency: Histogram,
    rejected: Family<ReasonLabel, Counter>,
    pub quarantine: QuarantineCounters,
}

/// The quarantine's handles (`quarantine.rs`: its thread adds to them).
#[derive(Debug, Clone, Default)]
pub struct QuarantineCounters {
    kept: Family<ReasonLabel, Counter>,
    /// Refused events not kept: the queue was full, or the store failed.
    pub dropped: Counter,
}

impl QuarantineCounters {
    pub fn kept(&self, why: Reject, n: u64) {
        self.kept
            .get_or_create(&ReasonLabel { reason: why })
            .inc_by(n);
    }

    pub fn kept_count(&self, why: Reject) -> u64 {
        self.kept.get_or_create(&ReasonLabel { reason: why }).get()
    }
}

impl EdgeCounters {
    /// Adds `n` refusals (every reason's series exists from the start, at 0: a request with
    /// none looks nothing up).
    pub fn reject(&self, why: Reject, n: u64) {
        if n == 0 {
            return;
        }
        self.rejected
            .get_or_create(&ReasonLabel { reason: why })
            .inc_by(n);
    }

    pub fn rejected(&self, why: Reject) -> u64 {
        self.rejected
            .get_or_create(&ReasonLabel { reason: why })
            .get()
    }
}

/// Metrics of a part above the collector (the fleet's `tributary_fleet_*`), read at each
/// scrape. That part registers it at start (`Metrics::add_section`), so the collector names
/// nothing above it.
pub trait Section: Send + Sync + std::fmt::Debug {
    /// Registers its metrics, with their values of now, in `r` (a new registry at each scrape).
    fn fill(&self, r: &mut Registry);
}

/// The registry and every handle in it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub edge: EdgeCounters,
    pub shards: Vec<ShardCounters>,
    pub retention: RetentionCounters,
    sections: std::sync::RwLock<Vec<Box<dyn Section>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(0)
    }
}

impl Metrics {
    pub fn new(shards: usize) -> Metrics {
        let mut registry = Registry::with_prefix("tributary_collector");
        let edge = EdgeCounters {
            requests: Counter::default(),
            body_bytes: Counter::default(),
            latency: seconds(),
            rejected: Family::default(),
            quarantine: QuarantineCounters::default(),
        };
        for why in Reject::ALL {
            drop(edge.rejected.get_or_create(&ReasonLabel { reason: *why }));
        }
        let retention = RetentionCounters::default();
        let r = &mut registry;
        register!(r,
            "retention_removed", "What the retention sweep removed, by kind",
                retention.removed.clone();
            "retention_sweeps", "Retention sweeps run to the end", retention.sweeps.clone();
            "retention_failures", "Retention sweeps that failed (retried at the next one)",
                retention.failures.clone();
            "requests", "Collect requests received", edge.requests.clone();
            "body_bytes", "Request body bytes received (after decompression)",
                edge.body_bytes.clone();
            "request_seconds", "Time to answer a collect request", edge.latency.clone();
            "rejected", "Events or requests refused, by reason", edge.rejected.clone();
            "quarantined", "Refused events kept in the app's quarantine, by reason",
                edge.quarantine.kept.clone();
            "quarantine_dropped",
            "Refused events not kept in the quarantine (its queue was full, or the store failed)",
                edge.quarantine.dropped.clone();
            "idle_memory_releases",
            "Times a thread gave its free memory back after the collector went quiet, by thread",
            crate::memory::RELEASES.clone();
        );
        let shards = ShardFamilies::register(r).handles(shards);
        Metrics {
            registry,
            edge,
            shards,
            retention,
            sections: Default::default(),
        }
    }

    /// Registers the gauges of the collector's health (`health.rs`).
    pub fn register_health(&mut self, g: &super::health::Gauges) {
        let r = &mut self.registry;
        register!(r,
            "backlog_bytes",
            "Bytes on the data dir that are not in the lake yet: WAL segments and outbox files",
            g.backlog_bytes.clone();
            "backlog_budget_bytes",
            "At this backlog the collector answers 503 + Retry-After (collector.max_backlog_mb)",
            g.backlog_budget_bytes.clone();
            "outbox_files", "Closed files waiting on the disk for the lake: parts to merge and outbox files to upload",
            g.outbox_files.clone();
            "oldest_unuploaded_age_seconds",
            "How long the oldest outbox file has waited for its upload (0: none waits)",
            g.oldest_unuploaded_age_seconds.clone();
            "last_upload_timestamp_seconds", "Unix time of the last successful put to the lake",
            g.last_upload_timestamp_seconds.clone();
            "data_dir_free_bytes", "Free space on the data dir's disk",
            g.data_dir_free_bytes.clone();
        );
    }

    /// Adds a section rendered after the collector's own metrics.
    pub fn add_section(&self, section: Box<dyn Section>) {
        let mut sections = self.sections.write().unwrap_or_else(|e| e.into_inner());
        sections.push(section);
    }

    /// The OpenMetrics text of every metric, the sections' after the collector's.
    pub fn render(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        let sections = self.sections.read().unwrap_or_else(|e| e.into_inner());
        for section in sections.iter() {
            let mut r = Registry::default();
            section.fill(&mut r);
            let _ = encode_registry(&mut out, &r);
        }
        let _ = encode_eof(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_feed_the_rendered_text() {
        let m = Metrics::new(2);
        m.shards[1].accepted.inc_by(7);
        m.shards[0].wal_fsync.observe(0.002);
        m.edge.reject(Reject::InvalidEvent, 3);
        let text = m.render();
        assert!(
            text.contains("tributary_collector_accepted_total{shard=\"1\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("tributary_collector_accepted_total{shard=\"0\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("tributary_collector_rejected_total{reason=\"invalid_event\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("tributary_collector_wal_fsync_seconds_count{shard=\"0\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(m.edge.rejected(Reject::InvalidEvent), 3);
    }

    #[derive(Debug)]
    struct Above(i64);

    impl Section for Above {
        fn fill(&self, r: &mut Registry) {
            let g: Gauge = Gauge::default();
            g.set(self.0);
            r.sub_registry_with_prefix("tributary_above").register(
                "things",
                "Things of a part above",
                g,
            );
        }
    }

    #[test]
    fn a_section_is_rendered_with_its_values_of_each_scrape_before_the_end() {
        let m = Metrics::new(1);
        m.add_section(Box::new(Above(3)));
        let text = m.render();
        assert!(text.contains("tributary_above_things 3\n"), "{text}");
        assert!(text.contains("tributary_collector_accepted_total{shard=\"0\"} 0"));
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn every_metric_the_default_config_names_exists() {
        let m = Metrics::new(1);
        // Families show once a label is used.
        for kind in Expired::ALL {
            m.retention.removed(*kind, 0);
        }
        let text = m.render();
        let config = include_str!("../../config/default.toml");
        let named: Vec<&str> = config
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("tributary_"))
            .collect();
        assert!(!named.is_empty());
        for name in named {
            let sample = |l: &str| {
                l.strip_prefix(name)
                    .is_some_and(|r| r.starts_with(['{', ' ']))
            };
            assert!(text.lines().any(sample), "{name} is not a metric: {text}");
        }
    }
}
