//! The delivery engine: one task that fans the changes out and starts the due deliveries, and a
//! task per delivery in flight.
//!
//! `tick (every 150 ms, or woken) -> fan_out -> heads (lanes not busy, <= free slots)
//!  -> per head: slot (max_in_flight) -> sign + POST -> settle (log; done, retry or give up)`
//!
//! Per endpoint, a lane (`hash(subject) % lanes`) has at most one delivery in flight and sends
//! its oldest first; the next leaves only once that one succeeded or was given up, so events of
//! one subject arrive in order. sled is touched only through `Store::run` (store threads).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use super::deliver::{Outcome, Sender};
use super::model::{Attempt, AttemptRecord, AttemptTrigger, LOGGED_ANSWER_BYTES};
use super::outbox::{self, Head, Verdict};
use super::store::{self, WebhookError};
use crate::clock::Clock;
use crate::config::WebhookSettings;
use crate::ids::Timestamp;
use crate::storage::changes::{types, Actor, Change};
use crate::storage::{Store, StoreError};

/// How often the engine looks for changes and due deliveries when nothing wakes it.
pub const TICK: Duration = Duration::from_millis(150);
/// How often the gauges are read from sled (a scan of the deliveries' keys and the endpoints).
const GAUGES_EVERY: Duration = Duration::from_secs(5);

/// What `/metrics` shows: counters since start, gauges as last read.
#[derive(Debug, Default)]
pub struct Counters {
    pub events: AtomicU64,
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub given_up: AtomicU64,
    pub pending: AtomicU64,
    pub changes_pending: AtomicU64,
    pub endpoints_disabled: AtomicU64,
}

struct Inner {
    store: Store,
    clock: Arc<dyn Clock>,
    settings: WebhookSettings,
    sender: Sender,
    counters: Arc<Counters>,
    /// The lanes with a delivery in flight (`d app endpoint lane`).
    busy: Mutex<HashSet<Vec<u8>>>,
    slots: Arc<Semaphore>,
    wake: Notify,
    /// Where the next look for due deliveries starts (`outbox::next_start`).
    start: Mutex<Vec<u8>>,
}

/// The running engine, stopped by [`Running::stop`].
pub struct Running {
    hooks: Webhooks,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops the loop (deliveries in flight end with the runtime; what they did not settle is
    /// sent again at the next start) and fans out what changed meanwhile.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
        self.hooks.drain().await;
    }
}

/// The handle of the webhooks (registered as `web::Data`): the engine's state and `send_test`.
#[derive(Clone)]
pub struct Webhooks {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks").finish_non_exhaustive()
    }
}

/// `±10 %` of `secs`, in µs.
fn jittered(secs: u64) -> i64 {
    let micros = secs as i64 * 1_000_000;
    let r = u16::from_be_bytes(crate::ids::random_bytes::<2>()) as i64;
    micros + micros * (r - 32_768) / 327_680
}

impl Webhooks {
    /// The handle; nothing runs until [`Webhooks::spawn`].
    pub fn new(settings: &WebhookSettings, store: Store, clock: Arc<dyn Clock>) -> Webhooks {
        let mut settings = settings.clone();
        settings.lanes = settings.lanes.clamp(1, 64);
        settings.max_in_flight = settings.max_in_flight.max(1);
        Webhooks {
            inner: Arc::new(Inner {
                sender: Sender::new(&settings),
                slots: Arc::new(Semaphore::new(settings.max_in_flight)),
                store,
                clock,
                settings,
                counters: Arc::default(),
                busy: Mutex::default(),
                wake: Notify::new(),
                start: Mutex::new(vec![super::store::DELIVERY]),
            }),
        }
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.inner.counters.clone()
    }

    pub fn settings(&self) -> &WebhookSettings {
        &self.inner.settings
    }

    /// Wakes the engine now (a change was recorded, a redeliver queued).
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Starts the engine's loop.
    pub fn spawn(&self) -> Running {
        let me = self.clone();
        let task = tokio::spawn(async move {
            let mut gauges_at = tokio::time::Instant::now();
            loop {
                me.tick().await;
                if gauges_at.elapsed() >= GAUGES_EVERY {
                    me.read_gauges().await;
                    gauges_at = tokio::time::Instant::now();
                }
                tokio::select! {
                    _ = me.inner.wake.notified() => {}
                    _ = tokio::time::sleep(TICK) => {}
                }
            }
        });
        Running {
            hooks: self.clone(),
            task,
        }
    }

    /// Fans out every change still queued (at a graceful stop: so a deleted resource's
    /// change no endpoint wants does not stay on disk until the next start).
    async fn drain(&self) {
        if let Err(e) = self.fan_out_all().await {
            tracing::warn!(error = %e, "webhooks: the last fan-out failed");
        }
    }

    /// Fans out what changed, batch after batch, until the queue is empty.
    async fn fan_out_all(&self) -> Result<(), StoreError> {
        let lanes = self.inner.settings.lanes;
        loop {
            let done = self
                .inner
                .store
                .run(move |db| outbox::fan_out(db, lanes))
                .await?;
            let c = &self.inner.counters;
            c.events.fetch_add(done.changes as u64, Ordering::Relaxed);
            if done.changes < outbox::BATCH {
                return Ok(());
            }
        }
    }

    async fn read_gauges(&self) {
        if let Ok((pending, changes, disabled)) = self.inner.store.run(outbox::gauges).await {
            let c = &self.inner.counters;
            c.pending.store(pending, Ordering::Relaxed);
            c.changes_pending.store(changes, Ordering::Relaxed);
            c.endpoints_disabled.store(disabled, Ordering::Relaxed);
        }
    }

    /// One round: fan out what changed (until the queue is empty), then start what is due.
    async fn tick(&self) {
        match self.fan_out_all().await {
            Ok(()) => {}
            // The store's queue is full: the next tick tries again.
            Err(StoreError::Busy) => return,
            Err(e) => {
                tracing::warn!(error = %e, "webhooks: fan-out failed, retrying");
                return;
            }
        }
        let free = self.inner.slots.available_permits();
        if free == 0 {
            return;
        }
        let busy = self
            .inner
            .busy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let now = self.inner.clock.now_micros();
        let start = self
            .inner
            .start
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let heads = self
            .inner
            .store
            .run(move |db| outbox::heads(db, now, &busy, free, &start))
            .await;
        match heads {
            Ok(heads) => {
                if let Some(next) = outbox::next_start(&heads) {
                    *self.inner.start.lock().unwrap_or_else(|e| e.into_inner()) = next;
                }
                for head in heads {
                    self.start(head);
                }
            }
            Err(e) => tracing::warn!(error = %e, "webhooks: reading the due deliveries failed"),
        }
    }

    /// Sends `head` on its own task, its lane busy until it is settled.
    fn start(&self, head: Head) {
        let Ok(slot) = self.inner.slots.clone().try_acquire_owned() else {
            return;
        };
        let lane = head.lane();
        if !self
            .inner
            .busy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(lane.clone())
        {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            me.deliver(head).await;
            drop(slot);
            me.inner
                .busy
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&lane);
            me.wake();
        });
    }

    /// What follows attempt number `attempt` (1-based) that got `outcome`.
    fn verdict(&self, outcome: &Outcome, attempt: u32, now: i64) -> Verdict {
        if outcome.delivered() {
            return Verdict::Delivered;
        }
        let schedule = &self.inner.settings.retry_schedule_secs;
        match schedule.get(attempt as usize - 1) {
            Some(&secs) => Verdict::RetryAt(now + jittered(secs)),
            None => Verdict::GiveUp(format!(
                "{attempt} attempts failed over the whole retry schedule; the last: {}",
                failure(outcome)
            )),
        }
    }

    async fn deliver(&self, head: Head) {
        let now = self.inner.clock.now();
        let d = &head.delivery;
        let secrets = head.endpoint.live_secrets(now);
        let outcome = self
            .inner
            .sender
            .send(
                &head.endpoint.endpoint.url,
                &d.event_id,
                &d.body,
                &secrets,
                now.unix_secs(),
            )
            .await;
        let attempt = d.attempts + 1;
        let trigger = if d.attempts > 0 {
            AttemptTrigger::Retry
        } else {
            d.trigger
        };
        let logged = attempt_record(&outcome, d, attempt, trigger, now);
        let verdict = self.verdict(&outcome, attempt, self.inner.clock.now_micros());
        let c = &self.inner.counters;
        match &verdict {
            Verdict::Delivered => c.delivered.fetch_add(1, Ordering::Relaxed),
            Verdict::RetryAt(_) => c.failed.fetch_add(1, Ordering::Relaxed),
            Verdict::GiveUp(reason) => {
                tracing::warn!(
                    app = head.app,
                    webhook = head.endpoint.endpoint.id,
                    event = d.event_id,
                    reason,
                    "webhook delivery given up, endpoint disabled"
                );
                c.failed.fetch_add(1, Ordering::Relaxed);
                c.given_up.fetch_add(1, Ordering::Relaxed)
            }
        };
        let keep = self.inner.settings.log_per_endpoint;
        let at = self.inner.clock.now();
        let (h, v) = (head.clone(), verdict.clone());
        match self
            .inner
            .store
            .run(move |db| outbox::settle(db, &h, logged, &v, keep, at))
            .await
        {
            Ok(0) => {}
            Ok(dropped) => {
                tracing::warn!(
                    app = head.app,
                    webhook = head.endpoint.endpoint.id,
                    dropped,
                    "the disabled endpoint's other waiting deliveries are given up"
                );
                c.given_up.fetch_add(dropped, Ordering::Relaxed);
            }
            // Not settled: the delivery stays at its lane's head and is sent again (at least once).
            Err(e) => tracing::warn!(error = %e, "webhooks: an attempt could not be recorded"),
        }
    }

    /// Sends a `webhook.test` event to endpoint `id` of `app` now, logs the attempt and answers
    /// it (any status, paused or disabled endpoints included).
    pub async fn send_test(&self, app: &str, id: &str) -> Result<Attempt, WebhookError> {
        let (a, i) = (app.to_owned(), id.to_owned());
        let record = self
            .inner
            .store
            .run(move |db| store::load(db, &a, &i))
            .await?
            .ok_or(WebhookError::NotFound("webhook"))?;
        let now = self.inner.clock.now();
        let data = serde_json::json!({"webhookId": id, "message": "a test event from Tributary"});
        let change = Change::new(types::WEBHOOK_TEST, app, id, now, &Actor::System, data);
        let body = super::model::event_body(&change, 0);
        let secrets = record.live_secrets(now);
        let outcome = self
            .inner
            .sender
            .send(
                &record.endpoint.url,
                &change.id,
                &body,
                &secrets,
                now.unix_secs(),
            )
            .await;
        let delivery = store::Delivery {
            event_id: change.id.clone(),
            kind: change.kind.clone(),
            subject: id.to_owned(),
            body,
            attempts: 0,
            due: now.micros(),
            trigger: AttemptTrigger::Test,
        };
        let logged = attempt_record(&outcome, &delivery, 1, AttemptTrigger::Test, now);
        let keep = self.inner.settings.log_per_endpoint;
        let (a, i) = (app.to_owned(), id.to_owned());
        Ok(self
            .inner
            .store
            .run(move |db| store::log_attempt(db, &a, &i, logged, keep))
            .await?)
    }
}

/// Why an attempt failed, in words.
fn failure(o: &Outcome) -> String {
    match (o.status, &o.error) {
        (Some(s), _) => format!("HTTP {s}"),
        (None, Some(e)) => e.clone(),
        (None, None) => "no answer".into(),
    }
}

/// The log record of an attempt.
fn attempt_record(
    o: &Outcome,
    d: &store::Delivery,
    attempt: u32,
    trigger: AttemptTrigger,
    at: Timestamp,
) -> AttemptRecord {
    let kept = &o.response[..o.response.len().min(LOGGED_ANSWER_BYTES)];
    AttemptRecord {
        attempt: Attempt {
            id: String::new(),
            event_id: d.event_id.clone(),
            kind: d.kind.clone(),
            attempt,
            at,
            status: o.status,
            error: o
                .error
                .clone()
                .or_else(|| (!o.delivered() && o.status.is_some()).then(|| failure(o)))
                .filter(|_| !o.delivered()),
            latency_ms: o.latency_ms,
            response: String::from_utf8_lossy(kept).into_owned(),
            trigger,
        },
        subject: d.subject.clone(),
        body: d.body.clone(),
    }
}
