//! A steady load for the fault tests: a few concurrent clients posting batches of fresh
//! messageIds to the real binary, as the tracker does (a 503 or a lost answer: the same batch
//! again after `Retry-After`, at most a second later here). Every answer is recorded with its
//! latency; a breach of the collector's promise (no answer within 5 s, a 503 without
//! `Retry-After`, any other status) is a violation the test reports at its next check.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::anon;

/// The collector answers every request within this (issue 22: "say 5 s"): its
/// `answer_timeout_ms` (5 s) counts from the body read, so the body's upload and the reply get
/// one more second, as in `tests/api/disk.rs`.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(6);
/// The clients give up after this.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a client waits before sending a refused batch again, whatever `Retry-After` says.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(1);

/// Posts `events` as one batch to the collector of `base` with the integration key `ik`.
pub async fn post_batch(
    client: &reqwest::Client,
    base: &str,
    ik: &str,
    events: Vec<Value>,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{base}/api/w/analytics/collect"))
        .header("x-app-key", ik)
        .json(&crate::events::batch(events))
        .send()
        .await
}

/// How long [`post_until_taken`] sends a refused batch again before it fails the test.
const TAKEN_WITHIN: Duration = Duration::from_secs(30);

/// Posts `events` as [`post_batch`] does until the collector takes them, as a client does: a
/// 503 (the shard's stager behind its flushes under a busy disk, the backlog at its budget) is
/// sent again after its `Retry-After` (at most [`RETRY_AFTER_CAP`]); the messageIds make the
/// retry of a batch one shard committed exact. Panics with the answer on any other status, a
/// 503 without `Retry-After`, or a batch still refused after [`TAKEN_WITHIN`].
pub async fn post_until_taken(client: &reqwest::Client, base: &str, ik: &str, events: Vec<Value>) {
    let deadline = Instant::now() + TAKEN_WITHIN;
    loop {
        let r = post_batch(client, base, ik, events.clone()).await.unwrap();
        let status = r.status().as_u16();
        let retry_after = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if status == 200 {
            return;
        }
        let body = r.text().await.unwrap_or_default();
        match retry_after {
            Some(secs) if status == 503 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_secs(secs).min(RETRY_AFTER_CAP)).await;
            }
            _ => panic!("{base} answered {status} (Retry-After {retry_after:?}): {body}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Spec {
    /// Names this load's messageIds: `msg_<prefix>_<client>_<batch>_<i>`.
    pub prefix: &'static str,
    pub clients: usize,
    pub events_per_batch: usize,
    /// A client sends a batch this often; `None`: as fast as answers come.
    pub every: Option<Duration>,
    /// Characters of incompressible-ish padding in each event's properties.
    pub pad: usize,
}

/// One answer (or its absence: status 0).
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub sent: Instant,
    pub status: u16,
    pub latency: Duration,
}

#[derive(Debug)]
struct Stats {
    /// When the load began: violations say when they happened from here.
    began: Instant,
    replies: Vec<Reply>,
    /// `(client, batch)` of every batch answered 200.
    acked: Vec<(usize, u64)>,
    /// Per client, the batches sent so far are `0..sent[client]`.
    sent: Vec<u64>,
    violations: Vec<String>,
}

impl Stats {
    fn assert_no_violations(&self) {
        assert!(
            self.violations.is_empty(),
            "{} violations of the collector's promise, the first ones: {:#?}",
            self.violations.len(),
            &self.violations[..self.violations.len().min(5)]
        );
    }
}

pub struct Load {
    spec: Spec,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<Stats>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What a load did, once stopped.
#[derive(Debug)]
pub struct Outcome {
    pub spec: Spec,
    pub replies: Vec<Reply>,
    pub acked: Vec<(usize, u64)>,
    pub sent: Vec<u64>,
}

pub fn message_id(prefix: &str, client: usize, batch: u64, i: usize) -> String {
    format!("msg_{prefix}_{client}_{batch}_{i}")
}

fn body(spec: &Spec, visitors: &[String], client: usize, batch: u64) -> String {
    let now = chrono::Utc::now().to_rfc3339();
    let mut seed = (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ batch;
    let events: Vec<Value> = (0..spec.events_per_batch)
        .map(|i| {
            let mut pad = String::with_capacity(spec.pad + 16);
            while pad.len() < spec.pad {
                // xorshift: cheap bytes that compress about as well as real identifiers.
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                pad.push_str(&format!("{seed:016x}"));
            }
            pad.truncate(spec.pad);
            json!({
                "type": "track", "event": "Fault",
                "anonymousId": visitors[(batch as usize + i) % visitors.len()],
                "messageId": message_id(spec.prefix, client, batch, i),
                "timestamp": now, "properties": {"batch": batch, "pad": pad},
            })
        })
        .collect();
    json!({"batch": events, "sentAt": now}).to_string()
}

/// How long a client of `Load::start_retrying` waits before sending a batch that got no
/// answer again.
const LOST_RETRY_AFTER: Duration = Duration::from_millis(200);

impl Load {
    pub fn start(base: &str, key: &str, spec: Spec) -> Load {
        Load::start_with(base, key, spec, false)
    }

    /// `start`, for a node that may be killed: a batch that gets no answer (refused, reset) is
    /// sent again after `LOST_RETRY_AFTER`, as a tracker would, and is no violation.
    pub fn start_retrying(base: &str, key: &str, spec: Spec) -> Load {
        Load::start_with(base, key, spec, true)
    }

    fn start_with(base: &str, key: &str, spec: Spec, retry_lost: bool) -> Load {
        let stats = Arc::new(Mutex::new(Stats {
            began: Instant::now(),
            replies: Vec::new(),
            acked: Vec::new(),
            sent: vec![0; spec.clients],
            violations: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        // Several visitors, so that every shard gets some of the load.
        let visitors: Arc<Vec<String>> = Arc::new(
            (0..8)
                .map(|v| anon(&format!("fault visitor {v}")))
                .collect(),
        );
        let tasks = (0..spec.clients)
            .map(|c| {
                let client = Client {
                    // A pool of its own: one connection, used by one request at a time, as a
                    // browser tab's. (A shared pool may open a connection it then keeps idle,
                    // which the server answers 408 once `client_request_timeout_ms` passed.)
                    http: reqwest::Client::builder()
                        .pool_idle_timeout(crate::helpers::IDLE_CONNECTION)
                        .timeout(CLIENT_TIMEOUT)
                        .build()
                        .unwrap(),
                    url: format!("{base}/api/w/analytics/collect"),
                    key: key.to_owned(),
                    spec: spec.clone(),
                    visitors: visitors.clone(),
                    stats: stats.clone(),
                    stop: stop.clone(),
                    retry_lost,
                };
                tokio::spawn(client.run(c))
            })
            .collect();
        Load {
            spec,
            stop,
            stats,
            tasks,
        }
    }

    /// Panics with the violations seen so far, if any (or if a client stopped: it panicked).
    pub fn check(&self) {
        assert!(
            !self.tasks.iter().any(|t| t.is_finished()),
            "a load client stopped before the load did"
        );
        let stats = self.stats.lock().unwrap();
        stats.assert_no_violations();
    }

    /// The answers to requests sent since `t`.
    pub fn replies_since(&self, t: Instant) -> Vec<Reply> {
        let stats = self.stats.lock().unwrap();
        stats
            .replies
            .iter()
            .filter(|r| r.sent >= t)
            .copied()
            .collect()
    }

    /// The first request sent since `t` that was answered `status`.
    pub fn first_since(&self, t: Instant, status: u16) -> Option<Reply> {
        self.replies_since(t)
            .into_iter()
            .filter(|r| r.status == status)
            .min_by_key(|r| r.sent)
    }

    /// How many requests sent since `t` were answered `status`.
    pub fn count_since(&self, t: Instant, status: u16) -> usize {
        self.replies_since(t)
            .iter()
            .filter(|r| r.status == status)
            .count()
    }

    pub fn acked_events(&self) -> usize {
        self.stats.lock().unwrap().acked.len() * self.spec.events_per_batch
    }

    /// Stops the clients (each finishes its request in flight) and checks the violations.
    pub async fn stop(self) -> Outcome {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            t.await.expect("a load client panicked");
        }
        let stats = self.stats.lock().unwrap();
        stats.assert_no_violations();
        Outcome {
            spec: self.spec.clone(),
            replies: stats.replies.clone(),
            acked: stats.acked.clone(),
            sent: stats.sent.clone(),
        }
    }
}

struct Client {
    http: reqwest::Client,
    url: String,
    key: String,
    spec: Spec,
    visitors: Arc<Vec<String>>,
    stats: Arc<Mutex<Stats>>,
    stop: Arc<AtomicBool>,
    /// A batch without an answer is sent again, not a violation (`Load::start_retrying`).
    retry_lost: bool,
}

impl Client {
    async fn run(self, c: usize) {
        let mut tick = self.spec.every.map(|every| {
            let mut t = tokio::time::interval(every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let mut pending: Option<u64> = None;
        while !self.stop.load(Ordering::SeqCst) {
            if let Some(t) = &mut tick {
                t.tick().await;
            }
            let b = pending.take().unwrap_or_else(|| {
                let mut stats = self.stats.lock().unwrap();
                stats.sent[c] += 1;
                stats.sent[c] - 1
            });
            let sent = Instant::now();
            let answer = self.post(&body(&self.spec, &self.visitors, c, b)).await;
            let wait = self.record(c, b, sent, answer, &mut pending);
            if let Some(wait) = wait {
                tokio::time::sleep(wait).await;
            }
        }
    }

    /// Records the answer to batch `b` of client `c` sent at `sent`; returns how long to wait
    /// before sending again (after a 503), and sets `pending` to a batch to send again.
    fn record(
        &self,
        c: usize,
        b: u64,
        sent: Instant,
        answer: Result<(u16, Option<u64>, Value), String>,
        pending: &mut Option<u64>,
    ) -> Option<Duration> {
        let latency = sent.elapsed();
        let mut stats = self.stats.lock().unwrap();
        let status = answer.as_ref().map_or(0, |a| a.0);
        stats.replies.push(Reply {
            sent,
            status,
            latency,
        });
        let at = format!(
            "batch {c}/{b} sent {:?} into the load, answered in {latency:?}",
            sent - stats.began
        );
        if latency > ANSWER_WITHIN {
            stats
                .violations
                .push(format!("{at}: no answer within {ANSWER_WITHIN:?}"));
        }
        match answer {
            Ok((200, _, body)) => {
                let n = |k: &str| body["data"][k].as_u64().unwrap_or(0);
                if n("accepted") + n("duplicates") != self.spec.events_per_batch as u64 {
                    stats.violations.push(format!("{at}: 200 {body}"));
                }
                stats.acked.push((c, b));
                None
            }
            Ok((503, Some(secs), _)) => {
                *pending = Some(b);
                Some(Duration::from_secs(secs).min(RETRY_AFTER_CAP))
            }
            Ok((503, None, body)) => {
                stats
                    .violations
                    .push(format!("{at}: 503 without Retry-After: {body}"));
                *pending = Some(b);
                None
            }
            Ok((status, _, body)) => {
                stats.violations.push(format!("{at}: {status} {body}"));
                *pending = Some(b);
                None
            }
            Err(_) if self.retry_lost => {
                *pending = Some(b);
                Some(LOST_RETRY_AFTER)
            }
            Err(e) => {
                stats.violations.push(format!("{at}: no answer: {e}"));
                *pending = Some(b);
                None
            }
        }
    }

    /// Status, `Retry-After` (seconds) and the JSON body, or why there was no answer.
    async fn post(&self, body: &str) -> Result<(u16, Option<u64>, Value), String> {
        let r = self
            .http
            .post(&self.url)
            .header("x-app-key", &self.key)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        let status = r.status().as_u16();
        let retry_after = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let text = r.text().await.map_err(|e| format!("{e:?}"))?;
        Ok((
            status,
            retry_after,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }
}

impl Outcome {
    pub fn count(&self, status: u16) -> usize {
        self.replies.iter().filter(|r| r.status == status).count()
    }

    pub fn max_latency(&self) -> Duration {
        self.replies
            .iter()
            .map(|r| r.latency)
            .max()
            .unwrap_or_default()
    }

    pub fn acked_events(&self) -> usize {
        self.acked.len() * self.spec.events_per_batch
    }

    /// One line of figures for the closing note.
    pub fn figures(&self) -> String {
        format!(
            "{} requests: {} x 200, {} x 503, max latency {:?}; {} events acknowledged",
            self.replies.len(),
            self.count(200),
            self.count(503),
            self.max_latency(),
            self.acked_events()
        )
    }

    fn was_sent(&self, id: &str) -> bool {
        let Some(rest) = id
            .strip_prefix("msg_")
            .and_then(|r| r.strip_prefix(self.spec.prefix))
            .and_then(|r| r.strip_prefix('_'))
        else {
            return false;
        };
        let parts: Vec<u64> = rest.split('_').filter_map(|p| p.parse().ok()).collect();
        matches!(parts[..], [c, b, i] if (c as usize) < self.sent.len()
            && b < self.sent[c as usize]
            && (i as usize) < self.spec.events_per_batch)
    }
}

/// Asserts that the lake holds every acknowledged event of `loads` exactly once and nothing
/// that was never sent; returns the number of rows.
pub fn assert_every_acknowledged_event_once(ids: &[String], loads: &[&Outcome]) -> usize {
    let mut counts: HashMap<&str, u32> = HashMap::with_capacity(ids.len());
    for id in ids {
        *counts.entry(id).or_default() += 1;
    }
    let duplicated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(
        duplicated.is_empty(),
        "{} rows are duplicates, e.g. {duplicated:?}",
        ids.len() - counts.len()
    );
    let unknown: Vec<_> = counts
        .keys()
        .filter(|id| !loads.iter().any(|l| l.was_sent(id)))
        .take(5)
        .collect();
    assert!(
        unknown.is_empty(),
        "the lake holds events never sent: {unknown:?}"
    );
    let mut missing = 0usize;
    let mut examples = Vec::new();
    for load in loads {
        for &(c, b) in &load.acked {
            for i in 0..load.spec.events_per_batch {
                let id = message_id(load.spec.prefix, c, b, i);
                if !counts.contains_key(id.as_str()) {
                    missing += 1;
                    if examples.len() < 5 {
                        examples.push(id);
                    }
                }
            }
        }
    }
    assert_eq!(
        missing, 0,
        "acknowledged events missing from the lake, e.g. {examples:?}"
    );
    ids.len()
}
