//! Watching a running `tributary serve` from outside for the fault tests: `/metrics`,
//! `/healthz` and `/readyz`, what waits for the lake on its data dir, its peak memory, and
//! `eventually` (poll a condition with a deadline).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::binary::Server;
use crate::helpers::ADMIN_TOKEN;
use crate::load::{self, Load};

/// An HTTP client for the tests' own requests (the load's clients have theirs).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(load::CLIENT_TIMEOUT)
        .pool_idle_timeout(crate::helpers::IDLE_CONNECTION)
        .build()
        .unwrap()
}

/// Polls `probe` every 100 ms until it gives a value, failing after `within` (or at once when
/// the load saw a violation); returns the value and how long it took.
pub async fn eventually<T>(
    what: &str,
    within: Duration,
    load: Option<&Load>,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        if let Some(load) = load {
            load.check();
        }
        if let Some(v) = probe().await {
            return (v, start.elapsed());
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The samples of `GET /metrics`, summed over their labels by name.
pub struct Metrics(HashMap<String, f64>);

impl Metrics {
    fn parse(text: &str) -> Metrics {
        let mut samples = HashMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, rest) = match line.split_once('{') {
                Some((name, rest)) => (name, rest.rsplit_once('}').map_or("", |r| r.1)),
                None => line.split_once(' ').unwrap_or((line, "")),
            };
            if let Some(v) = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
            {
                *samples.entry(name.to_owned()).or_insert(0.0) += v;
            }
        }
        Metrics(samples)
    }

    /// The sample `name` in full (summed over its labels), if the server exports it.
    pub fn named(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    /// `tributary_collector_<name>`; panics if the server does not export it.
    pub fn get(&self, name: &str) -> f64 {
        let full = format!("tributary_collector_{name}");
        *self
            .0
            .get(&full)
            .unwrap_or_else(|| panic!("{full} is missing from /metrics"))
    }
}

/// An answer of `/healthz` or `/readyz`.
#[derive(Debug)]
pub struct Health {
    pub status: u16,
    pub retry_after: bool,
    pub body: Value,
}

impl Health {
    /// `status` of the body, inside the envelope's `data` or at the top.
    pub fn says(&self) -> &str {
        let doc = if self.body["data"].is_object() {
            &self.body["data"]
        } else {
            &self.body
        };
        doc["status"].as_str().unwrap_or("")
    }

    /// Whether a problem of `check` is listed, wherever the body puts its problems: `problems[]`
    /// with a `check`, or an error envelope's `details[]` with the check as `field`.
    pub fn has_problem(&self, check: &str) -> bool {
        fn walk(v: &Value, check: &str) -> bool {
            let named = Some(&Value::from(check));
            match v {
                Value::Object(m) => {
                    m.get("check") == named
                        || m.get("field") == named
                        || m.values().any(|v| walk(v, check))
                }
                Value::Array(a) => a.iter().any(|v| walk(v, check)),
                _ => false,
            }
        }
        walk(&self.body, check)
    }
}

/// What waits for the lake on the data dir, read from the disk: outbox files and parts (which
/// `/metrics` counts together as `outbox_files`), their bytes, and the bytes of WAL segments
/// (`<data_dir>/wal/shard-<i>/...`).
#[derive(Debug, Default)]
pub struct OnDisk {
    pub outbox_files: usize,
    pub outbox_bytes: u64,
    pub wal_bytes: u64,
}

/// Every file under `dir`, recursively, that `keep` accepts, sorted.
fn files_where(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if keep(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every `.parquet` file under `dir`, recursively, sorted.
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    files_where(dir, |p| p.extension().is_some_and(|x| x == "parquet"))
}

/// Every file under `dir` outside `skip` whose bytes contain `needle`.
pub fn files_holding(dir: &Path, skip: &Path, needle: &[u8]) -> Vec<PathBuf> {
    files_where(dir, |p| {
        !p.starts_with(skip)
            && std::fs::read(p)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle)
    })
}

impl OnDisk {
    pub fn read(data_dir: &Path) -> OnDisk {
        fn walk(dir: &Path, in_outbox: bool, into: &mut OnDisk) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
                let Ok(meta) = e.metadata() else { continue };
                if meta.is_dir() {
                    let waiting = name == "outbox" || name == "parts";
                    walk(&path, in_outbox || waiting, into);
                } else if in_outbox && name.ends_with(".parquet") {
                    into.outbox_files += 1;
                    into.outbox_bytes += meta.len();
                } else if name.starts_with("wal-") && name.ends_with(".log") {
                    into.wal_bytes += meta.len();
                }
            }
        }
        let mut found = OnDisk::default();
        walk(&data_dir.join("wal"), false, &mut found);
        found
    }
}

/// A running server seen from outside: its address and its data dir.
pub struct Node {
    pub http: reqwest::Client,
    pub base: String,
    pub data_dir: PathBuf,
    pid: u32,
}

impl Node {
    pub fn new(server: &Server, data_dir: &Path) -> Node {
        Node {
            http: http(),
            base: server.base.clone(),
            data_dir: data_dir.to_path_buf(),
            pid: server.child.id(),
        }
    }

    pub async fn metrics(&self) -> Metrics {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("/metrics answers")
            .text()
            .await
            .unwrap();
        Metrics::parse(&text)
    }

    /// `/healthz` or `/readyz`.
    pub async fn health(&self, path: &str) -> Health {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path} answers: {e}"));
        let status = r.status().as_u16();
        let retry_after = r.headers().contains_key("retry-after");
        let body = r.json().await.unwrap_or(Value::Null);
        Health {
            status,
            retry_after,
            body,
        }
    }

    pub fn on_disk(&self) -> OnDisk {
        OnDisk::read(&self.data_dir)
    }

    /// `/metrics` and what the disk holds, with the lake cut (nothing leaves the outbox; files
    /// the shards close meanwhile are the tolerance), and where they disagree (tests assert it
    /// last, so that a wrong gauge does not hide the rest of a scenario).
    pub async fn against_the_disk(&self) -> (Metrics, OnDisk, Vec<String>) {
        let before = self.on_disk();
        let m = self.metrics().await;
        let after = self.on_disk();
        let mut disagree = Vec::new();
        let files = m.get("outbox_files");
        if !(before.outbox_files as f64 - 2.0..=after.outbox_files as f64 + 2.0).contains(&files) {
            disagree.push(format!(
                "outbox_files says {files}, the disk holds {} then {} files",
                before.outbox_files, after.outbox_files
            ));
        }
        let bytes = m.get("backlog_bytes");
        let (low, high) = (
            (before.outbox_bytes + before.wal_bytes) as f64,
            (after.outbox_bytes + after.wal_bytes) as f64,
        );
        if bytes < low * 0.9 - 1e6 || bytes > high * 1.1 + 1e6 {
            disagree.push(format!(
                "backlog_bytes says {bytes}, the disk holds {low} then {high} bytes ({after:?})"
            ));
        }
        (m, after, disagree)
    }

    /// Waits until `/readyz` answers 200 and says `ok`.
    pub async fn becomes_ready(&self, what: &str, load: Option<&Load>) {
        eventually(what, Duration::from_secs(30), load, async || {
            let r = self.health("/readyz").await;
            (r.status == 200 && r.says() == "ok").then_some(())
        })
        .await;
    }

    /// Waits until an upload has succeeded since `after` (the metric moved past it).
    pub async fn uploads_resume(&self, after: f64, load: Option<&Load>, within: Duration) {
        eventually("an upload succeeds", within, load, async || {
            let m = self.metrics().await;
            (m.get("last_upload_timestamp_seconds") > after).then_some(())
        })
        .await;
    }

    /// Waits until the outbox is empty, by `/metrics` and on the disk, and the backlog at most
    /// `slack` bytes (under load the WAL always holds the open files' rows).
    pub async fn backlog_drains(&self, slack: f64, load: Option<&Load>, within: Duration) {
        eventually("the backlog drains", within, load, async || {
            let m = self.metrics().await;
            let drained = m.get("outbox_files") == 0.0 && m.get("backlog_bytes") <= slack;
            (drained && self.on_disk().outbox_files == 0).then_some(())
        })
        .await;
    }

    /// The peak resident set of the process so far (`VmHWM`), in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        memory_bytes(self.pid, "VmHWM")
    }
}

/// The resident set of process `pid` now (`VmRSS`), in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    memory_bytes(pid, "VmRSS")
}

/// A memory line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`: kB there), in bytes.
fn memory_bytes(pid: u32, field: &str) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's /proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    kb * 1024
}

/// `tributary_collector_backlog_bytes` sampled every 100 ms in the background.
pub struct BacklogSampler {
    samples: Arc<Mutex<Vec<(Instant, f64)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl BacklogSampler {
    pub fn start(node: &Node) -> BacklogSampler {
        let samples: Arc<Mutex<Vec<(Instant, f64)>>> = Arc::default();
        let kept = samples.clone();
        // A client of its own, so its requests never wait behind the test's.
        let node = Node {
            http: http(),
            base: node.base.clone(),
            data_dir: node.data_dir.clone(),
            pid: node.pid,
        };
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let at = Instant::now();
                let backlog = node.metrics().await.get("backlog_bytes");
                kept.lock().unwrap().push((at, backlog));
            }
        });
        BacklogSampler { samples, task }
    }

    /// The samples taken between `from` and `to`.
    pub fn between(&self, from: Instant, to: Instant) -> Vec<f64> {
        let samples = self.samples.lock().unwrap();
        samples
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|s| s.1)
            .collect()
    }
}

impl Drop for BacklogSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}
