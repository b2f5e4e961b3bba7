//! The quarantine: the last refused events of each app, with their reasons, so that an event
//! refused inside a batch that was answered (an SDK reads any 2xx as success and never looks
//! at `rejected`) is not lost in silence (Snowplow's bad rows). The dashboard lists them
//! (`dashboard/apps/quarantine.rs`), `/metrics` counts them by reason.
//!
//! `edge -> Keeper::keep(body, refusals) -> [bounded queue] -> keeper thread: each refused
//!  event's JSON cut out of the body -> sled, the app's oldest records beyond the bound dropped`
//!
//! The edge never waits: a job that finds the queue full (`QUEUE_JOBS` jobs, or bodies
//! totalling `QUEUE_BYTES`) is dropped and counted (`quarantine_dropped_total`). Records are
//! best effort: a crash loses what is queued.
//!
//! Tree `quarantine`: `app \0 id (u64, big endian: sled's monotonic ids)` -> the record (JSON).
//! Bound: `collector.quarantine_per_app` records per app (100 by default), each at most
//! `MAX_EVENT_BYTES` of the event's JSON plus `MAX_ERRORS` reasons (each a field name and a
//! message of a few hundred bytes at most): about 10 KiB at worst, so at most
//! `quarantine_per_app x 10 KiB` of disk per app (1 MiB by default; an ordinary refused event
//! takes under 1 KiB). Memory: the queue holds at most `QUEUE_BYTES` (8 MiB) of bodies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender, TrySendError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decode::{clamp_numbers, Rejected};
use super::metrics::{QuarantineCounters, Reject};
use crate::config::CollectorSettings;
use crate::ids::Timestamp;
use crate::storage::{decode, encode, Db, StoreError};

pub const TREE: &str = "quarantine";
/// The most of an event's JSON a record keeps (cut on a character boundary).
pub const MAX_EVENT_BYTES: usize = 4096;
/// The most reasons a record keeps.
pub const MAX_ERRORS: usize = 20;
/// Jobs and body bytes the queue holds; beyond, jobs are dropped and counted.
const QUEUE_JOBS: usize = 64;
const QUEUE_BYTES: usize = 8 << 20;

/// One reason an event was refused: `{"field", "message"}` as in the collector's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

/// One refused event as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    pub received_at: Timestamp,
    /// The answer's `meta.requestId`.
    pub request_id: String,
    /// Its position in the batch.
    pub index: usize,
    /// `invalid_event`, `too_large` or `plan_limit` (the `/metrics` reason).
    pub reason: String,
    pub errors: Vec<Problem>,
    /// The event's JSON as sent (compact), cut at `MAX_EVENT_BYTES`.
    pub event: String,
    pub truncated: bool,
}

/// One refused event of a batch, as the edge knows it.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub index: usize,
    pub reason: Reject,
    pub errors: Vec<Problem>,
}

/// The refusals of a batch, one per event (the answer's `errors` may name an event several
/// times), in batch order. An event refused for its size counts as `too_large`.
pub fn refusals(rejected: &[Rejected], plan_limited: impl Fn(&Rejected) -> bool) -> Vec<Refusal> {
    let mut out: Vec<Refusal> = Vec::new();
    for r in rejected {
        let reason = if plan_limited(r) {
            Reject::PlanLimit
        } else if r.too_large {
            Reject::TooLarge
        } else {
            Reject::InvalidEvent
        };
        let problem = Problem {
            field: r.field.clone(),
            message: r.message.clone(),
        };
        match out.last_mut() {
            Some(last) if last.index == r.index => {
                if reason == Reject::TooLarge {
                    last.reason = reason;
                }
                if last.errors.len() < MAX_ERRORS {
                    last.errors.push(problem);
                }
            }
            _ => out.push(Refusal {
                index: r.index,
                reason,
                errors: vec![problem],
            }),
        }
    }
    out
}

/// What the edge hands over: a body and its refused events.
pub struct Job {
    pub app: String,
    pub request_id: String,
    pub received_at: Timestamp,
    /// The body as decoded (after gzip).
    pub body: Vec<u8>,
    pub refusals: Vec<Refusal>,
}

/// The handle of the keeper thread.
pub struct Keeper {
    tx: Mutex<Option<Sender<Job>>>,
    queued: Arc<AtomicUsize>,
    counts: QuarantineCounters,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Keeper {
    /// Starts the keeper thread over `db`, keeping `collector.quarantine_per_app` records
    /// per app.
    pub fn start(
        db: &Db,
        cfg: &CollectorSettings,
        counts: &QuarantineCounters,
    ) -> std::io::Result<Keeper> {
        let (db, per_app, counts) = (db.clone(), cfg.quarantine_per_app.max(1), counts.clone());
        let (tx, rx) = bounded::<Job>(QUEUE_JOBS);
        let queued = Arc::new(AtomicUsize::new(0));
        let (q, kept) = (queued.clone(), counts.clone());
        let thread = std::thread::Builder::new()
            .name("quarantine".into())
            .spawn(move || {
                // Ends when the last sender is gone (`stop`), after the queued jobs.
                for job in rx {
                    q.fetch_sub(job.body.len(), Ordering::AcqRel);
                    let n = job.refusals.len() as u64;
                    if let Err(e) = db.with(|db| store(db, job, per_app, &kept)) {
                        tracing::warn!(error = %e, "refused events not quarantined");
                        kept.dropped.inc_by(n);
                    }
                }
            })?;
        Ok(Keeper {
            tx: Mutex::new(Some(tx)),
            queued,
            counts,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// A keeper without a thread: every job is dropped and counted (unit tests).
    #[cfg(test)]
    pub fn stopped() -> Keeper {
        Keeper {
            tx: Mutex::new(None),
            queued: Arc::default(),
            counts: QuarantineCounters::default(),
            thread: Mutex::new(None),
        }
    }

    /// Queues a batch's refused events; drops them (counted) when the queue is full.
    pub fn keep(&self, job: Job) {
        let n = job.refusals.len() as u64;
        let bytes = job.body.len();
        let fits = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q + bytes <= QUEUE_BYTES).then_some(q + bytes)
            })
            .is_ok();
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let sent = match (fits, tx.as_ref()) {
            (true, Some(tx)) => match tx.try_send(job) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    self.queued.fetch_sub(bytes, Ordering::AcqRel);
                    false
                }
            },
            (true, None) => {
                self.queued.fetch_sub(bytes, Ordering::AcqRel);
                false
            }
            (false, _) => false,
        };
        if !sent {
            self.counts.dropped.inc_by(n);
        }
    }

    /// Writes what is queued and stops the thread.
    pub fn stop(&self) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn app_prefix(app: &str) -> Vec<u8> {
    [app.as_bytes(), b"\0"].concat()
}

/// The events of a body, as `parse` in `decode/` reads them: `batch`'s items, else the body.
fn items(body: &[u8]) -> Vec<Value> {
    let root = serde_json::from_slice::<Value>(body)
        .or_else(|_| serde_json::from_slice::<Value>(&clamp_numbers(body)));
    match root {
        Ok(Value::Object(mut o)) => match o.remove("batch") {
            Some(Value::Array(items)) => items,
            Some(_) => Vec::new(),
            None => vec![Value::Object(o)],
        },
        _ => Vec::new(),
    }
}

/// The event's compact JSON without a `writeKey` (an integration key is stored only as its
/// hash), cut at `MAX_EVENT_BYTES` on a character boundary.
fn excerpt(item: Option<&mut Value>) -> (String, bool) {
    let Some(item) = item else {
        return (String::new(), false);
    };
    if let Some(o) = item.as_object_mut() {
        o.remove("writeKey");
    }
    let mut text = item.to_string();
    if text.len() <= MAX_EVENT_BYTES {
        return (text, false);
    }
    let mut cut = MAX_EVENT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    (text, true)
}

/// Writes a job's records, then drops the app's oldest beyond `per_app`.
fn store(
    db: &sled::Db,
    job: Job,
    per_app: usize,
    counts: &QuarantineCounters,
) -> Result<(), StoreError> {
    let tree = db.open_tree(TREE)?;
    let mut items = items(&job.body);
    let prefix = app_prefix(&job.app);
    // Only the last `per_app` of a batch could stay.
    let skip = job.refusals.len().saturating_sub(per_app);
    for r in job.refusals.into_iter().skip(skip) {
        let (event, truncated) = excerpt(items.get_mut(r.index));
        let record = Refused {
            received_at: job.received_at,
            request_id: job.request_id.clone(),
            index: r.index,
            reason: r.reason.name().to_owned(),
            errors: r.errors,
            event,
            truncated,
        };
        let key = [&prefix[..], &db.generate_id()?.to_be_bytes()].concat();
        tree.insert(key, encode(&record))?;
        counts.kept(r.reason, 1);
    }
    let old: Vec<sled::IVec> = tree
        .scan_prefix(&prefix)
        .keys()
        .rev()
        .skip(per_app)
        .collect::<Result<_, _>>()?;
    for k in old {
        tree.remove(k)?;
    }
    Ok(())
}

/// The app's kept records, newest first, at most `limit`.
pub fn recent(db: &sled::Db, app: &str, limit: usize) -> Result<Vec<Refused>, StoreError> {
    let tree = db.open_tree(TREE)?;
    let mut out = Vec::new();
    for kv in tree.scan_prefix(app_prefix(app)).rev().take(limit) {
        let (k, v) = kv?;
        out.push(decode(&k, &v)?);
    }
    Ok(out)
}

/// Removes the app's kept records that `about` says are about an erased person; answers how
/// many went.
pub fn forget(
    db: &sled::Db,
    app: &str,
    about: impl Fn(&Refused) -> bool,
) -> Result<usize, StoreError> {
    let tree = db.open_tree(TREE)?;
    let mut gone = 0;
    for kv in tree.scan_prefix(app_prefix(app)) {
        let (k, v) = kv?;
        if about(&decode(&k, &v)?) {
            tree.remove(k)?;
            gone += 1;
        }
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(index: usize, field: &str, too_large: bool) -> Rejected {
        Rejected {
            index,
            field: field.into(),
            message: format!("bad {field}"),
            too_large,
        }
    }

    #[test]
    fn an_event_refused_for_several_fields_is_one_refusal() {
        let r = refusals(
            &[
                rejected(1, "type", false),
                rejected(1, "body", true),
                rejected(4, "events_per_month", false),
            ],
            |r| r.field == "events_per_month",
        );
        let got: Vec<_> = r
            .iter()
            .map(|r| (r.index, r.reason, r.errors.len()))
            .collect();
        assert_eq!(got, [(1, Reject::TooLarge, 2), (4, Reject::PlanLimit, 1)]);
    }

    #[test]
    fn a_job_the_keeper_cannot_take_is_dropped_and_counted() {
        let keeper = Keeper::stopped();
        let two = [rejected(0, "type", false), rejected(1, "type", false)];
        keeper.keep(Job {
            app: "a".into(),
            request_id: "req_1".into(),
            received_at: Timestamp::t0(),
            body: b"{}".to_vec(),
            refusals: refusals(&two, |_| false),
        });
        assert_eq!(keeper.counts.dropped.get(), 2);
        assert_eq!(keeper.queued.load(Ordering::Acquire), 0);
    }

    #[test]
    fn records_keep_the_events_json_and_only_the_last_per_app() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let counts = QuarantineCounters::default();
        let long = "x".repeat(MAX_EVENT_BYTES);
        let body = format!(
            r#"{{"batch": [{{"type": "track"}}, {{"type": "dance", "n": 1e400}},
                {{"type": "page", "long": "{long}"}}]}}"#
        );
        let job = |app: &str, indexes: &[usize]| Job {
            app: app.into(),
            request_id: "req_1".into(),
            received_at: Timestamp::t0(),
            body: body.clone().into_bytes(),
            refusals: indexes
                .iter()
                .map(|&index| Refusal {
                    index,
                    reason: Reject::InvalidEvent,
                    errors: vec![Problem {
                        field: "type".into(),
                        message: "must be one of".into(),
                    }],
                })
                .collect(),
        };
        store(&db, job("a", &[1, 2]), 3, &counts).unwrap();
        store(&db, job("b", &[0]), 3, &counts).unwrap();
        let a = recent(&db, "a", 10).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].index, a[0].truncated), (2, true));
        assert_eq!(a[0].event.len(), MAX_EVENT_BYTES);
        assert_eq!(
            a[1].event, r#"{"type":"dance","n":1.7976931348623157e+308}"#,
            "a number beyond a float is kept clamped"
        );
        store(&db, job("a", &[0, 1]), 3, &counts).unwrap();
        let a: Vec<usize> = recent(&db, "a", 10)
            .unwrap()
            .iter()
            .map(|r| r.index)
            .collect();
        assert_eq!(a, [1, 0, 2], "the newest 3, newest first");
        assert_eq!(recent(&db, "b", 10).unwrap().len(), 1);
        let single = Job {
            body: br#"{"type": "dance", "writeKey": "ik_secret"}"#.to_vec(),
            ..job("c", &[0])
        };
        store(&db, single, 3, &counts).unwrap();
        assert_eq!(
            recent(&db, "c", 10).unwrap()[0].event,
            r#"{"type":"dance"}"#,
            "a single event's body, without its key"
        );
        assert_eq!(counts.kept_count(Reject::InvalidEvent), 6);
    }
}
