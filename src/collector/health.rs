//! What is broken behind the edge, and the backlog: for `/healthz`, `/readyz`, `/metrics`, and
//! the edge's 503 once the backlog reaches its budget.
//!
//! The backlog is every byte on the data dir that is not in the lake yet: WAL segments (until
//! a flush trims them) and outbox files (until the uploader has put them). Writers, stagers and
//! uploaders add and subtract what they write and delete; at start it is measured from disk.
//! `collector.max_backlog_mb` bounds it: at the budget the edge answers 503 + Retry-After, so
//! an outage of the lake is ridden out on disk for as long as the budget lasts, never in memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use prometheus_client::metrics::gauge::Gauge;

use crate::ids::Timestamp;

crate::fields::names! {
    /// A part of the collector that can fail while the server keeps answering: `lake` (puts to
    /// the object store fail), `disk` (writes to the data dir fail: a full disk, an I/O error),
    /// `backlog` (it reached `collector.max_backlog_mb`), `registry` (an edge that has no
    /// registry from its control node yet: it knows no key, so it is not ready).
    pub Check {
        Lake = "lake",
        Disk = "disk",
        Backlog = "backlog",
        Registry = "registry",
    }
}

/// Something failing, since when, and the last error.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// `lake`, `disk`, `backlog`, `registry` or `store`.
    pub check: &'static str,
    pub since: Timestamp,
    pub message: String,
}

/// The gauges `/metrics` shows; updated as things change, except the two read at render time.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    pub backlog_bytes: Gauge,
    pub backlog_budget_bytes: Gauge,
    pub outbox_files: Gauge,
    /// Unix seconds of the last successful put to the lake.
    pub last_upload_timestamp_seconds: Gauge,
    /// Set by `Health::refresh` when `/metrics` is rendered.
    pub oldest_unuploaded_age_seconds: Gauge,
    /// Set by `Health::refresh` when `/metrics` is rendered.
    pub data_dir_free_bytes: Gauge,
}

/// What failed: the check, the part (`wal`, `outbox`, `put`, ...) and the shard.
type Key = (&'static str, &'static str, usize);

pub struct Health {
    budget: u64,
    data_dir: PathBuf,
    pub gauges: Gauges,
    /// (check, what failed, shard) -> (since µs, last error).
    problems: Mutex<BTreeMap<Key, (i64, String)>>,
    /// Per shard: when its oldest outbox file was staged (µs), 0 when its outbox is empty.
    oldest_staged: Vec<AtomicI64>,
    /// Whether the backlog was at its budget when last changed.
    over: AtomicBool,
}

impl Health {
    pub fn new(budget: u64, data_dir: &Path, shards: usize) -> Health {
        let budget = budget.min(i64::MAX as u64);
        let gauges = Gauges::default();
        gauges.backlog_budget_bytes.set(budget as i64);
        Health {
            budget,
            data_dir: data_dir.to_path_buf(),
            gauges,
            problems: Mutex::default(),
            oldest_staged: (0..shards).map(|_| AtomicI64::new(0)).collect(),
            over: AtomicBool::new(false),
        }
    }

    fn problems_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, (i64, String)>> {
        self.problems.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that `what` (`wal`, `outbox`, `put`, ...) fails on `shard`, a failure of `check`
    /// (its first failure keeps the `since`).
    pub fn failing(
        &self,
        check: Check,
        what: &'static str,
        shard: usize,
        now: i64,
        error: &dyn std::fmt::Display,
    ) {
        let mut map = self.problems_map();
        let entry = map
            .entry((check.name(), what, shard))
            .or_insert((now, String::new()));
        entry.1 = format!("{what}: {error}");
    }

    /// Notes that `what` works again on `shard`.
    pub fn recovered(&self, check: Check, what: &'static str, shard: usize) {
        self.problems_map().remove(&(check.name(), what, shard));
    }

    /// Adds (or, negative, removes) bytes of the backlog.
    pub fn add_backlog(&self, bytes: i64, now: i64) {
        let total = self.gauges.backlog_bytes.inc_by(bytes) + bytes;
        let over = total >= self.budget as i64;
        // The problem changes only when the budget is crossed: no lock on the hot path.
        if self.over.swap(over, Ordering::AcqRel) != over {
            if over {
                let msg = format!(
                    "{total} bytes wait for the lake on the data dir, the budget \
                     (collector.max_backlog_mb) is {}",
                    self.budget
                );
                self.failing(Check::Backlog, "budget", 0, now, &msg);
            } else {
                self.recovered(Check::Backlog, "budget", 0);
            }
        }
    }

    pub fn backlog_bytes(&self) -> u64 {
        self.gauges.backlog_bytes.get().max(0) as u64
    }

    /// Whether the edge must refuse new events (503) until uploads drain the backlog.
    pub fn over_budget(&self) -> bool {
        self.backlog_bytes() >= self.budget
    }

    /// A shard's oldest outbox file (µs it was staged; 0: the outbox is empty).
    pub fn set_oldest_staged(&self, shard: usize, micros: i64) {
        if let Some(a) = self.oldest_staged.get(shard) {
            a.store(micros, Ordering::Relaxed);
        }
    }

    /// Sets the gauges that depend on the time and the disk, before `/metrics` renders.
    pub fn refresh(&self, now: i64) {
        let oldest = self
            .oldest_staged
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&t| t > 0)
            .min();
        let age = oldest.map_or(0, |t| (now - t).max(0) / 1_000_000);
        self.gauges.oldest_unuploaded_age_seconds.set(age);
        let free = fs2::available_space(&self.data_dir).unwrap_or(0);
        self.gauges.data_dir_free_bytes.set(free as i64);
    }

    /// What fails now, one problem per check (its earliest `since`, the latest error).
    pub fn problems(&self) -> Vec<Problem> {
        let map = self.problems_map();
        let mut out: Vec<Problem> = Vec::new();
        for ((check, _, _), (since, message)) in map.iter() {
            match out.iter_mut().find(|p| p.check == *check) {
                Some(p) => p.since = p.since.min(Timestamp::from_micros(*since)),
                None => out.push(Problem {
                    check,
                    since: Timestamp::from_micros(*since),
                    message: message.clone(),
                }),
            }
        }
        out
    }
}

/// `collector.max_backlog_mb`, or with 0 the automatic budget: half of what the data dir's disk
/// has free (counting the backlog already there), at most 16 GiB.
pub fn backlog_budget(configured_mb: u64, data_dir: &Path, backlog: u64) -> u64 {
    const AUTO_MAX: u64 = 16 << 30;
    if configured_mb > 0 {
        return configured_mb << 20;
    }
    let free = fs2::available_space(data_dir).unwrap_or(0);
    ((free + backlog) / 2).min(AUTO_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_budget_sets_and_clears_its_problem() {
        let dir = tempfile::tempdir().unwrap();
        let h = Health::new(100, dir.path(), 2);
        h.add_backlog(60, 1);
        assert!(!h.over_budget());
        assert!(h.problems().is_empty());
        h.add_backlog(40, 2);
        assert!(h.over_budget());
        assert_eq!(h.problems()[0].check, "backlog");
        h.add_backlog(-50, 3);
        assert!(!h.over_budget());
        assert!(h.problems().is_empty());
    }

    #[test]
    fn a_problem_keeps_its_first_time_and_its_last_error_until_it_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let h = Health::new(100, dir.path(), 2);
        h.failing(Check::Lake, "put", 0, 5_000_000, &"refused");
        h.failing(Check::Lake, "put", 0, 9_000_000, &"timed out");
        h.failing(Check::Lake, "put", 1, 7_000_000, &"refused");
        let p = h.problems();
        assert_eq!(p.len(), 1, "one problem per check");
        assert_eq!(p[0].since, Timestamp::from_micros(5_000_000));
        assert_eq!(p[0].message, "put: timed out");
        h.recovered(Check::Lake, "put", 0);
        h.recovered(Check::Lake, "put", 1);
        assert!(h.problems().is_empty());
    }

    #[test]
    fn the_age_of_the_oldest_staged_file_is_read_at_render_time() {
        let dir = tempfile::tempdir().unwrap();
        let h = Health::new(100, dir.path(), 2);
        h.set_oldest_staged(1, 10_000_000);
        h.refresh(70_000_000);
        assert_eq!(h.gauges.oldest_unuploaded_age_seconds.get(), 60);
        assert!(h.gauges.data_dir_free_bytes.get() > 0);
        h.set_oldest_staged(1, 0);
        h.refresh(80_000_000);
        assert_eq!(h.gauges.oldest_unuploaded_age_seconds.get(), 0);
    }
}
