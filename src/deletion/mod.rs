//! An app's deletion: `DELETE /admin/v1/apps/{appId}` (and the dashboard) starts a durable job
//! (`jobs/`) that removes the app and everything of it, resumable after `kill -9` at any step.
//!
//! `start` (the request): the job is stored, then the app is marked as being deleted
//! (`App::deletion_job_id`): the registry drops it at once, so none of its keys authenticates
//! and no new event or API write lands; the admin API and the dashboard refuse its pages. Then
//! the job's steps, each idempotent:
//!
//! 1. `mark`: the same mark (a job stored by a request that died before marking).
//! 2. `settle`: waits until every event of the app committed so far is in a lake file
//!    (`Collector::settle`), so no outbox file re-creates its lake prefix after the deletion
//!    and every rollup of it is in sled; retried while the lake is away.
//! 3. `webhooks`: waits (at most `WEBHOOKS_WAIT`, polling) until the app's changes are fanned
//!    out and its webhook deliveries are sent or given up, so its endpoints hear of what
//!    happened before the deletion (`app.deletion.started` included); what is still pending
//!    then goes with the app (counted `webhooksDropped`).
//! 4. `sled`: every record of the app in sled (`sled.rs`), a piece of `PIECE_KEYS` at a time;
//!    the token is the place reached.
//! 5. `live`: the app's live rollups and quota counters in memory.
//! 6. `lake`: `events/app_id=<app>/` through `object_store` (`retention/lake.rs`), one `dt=`
//!    partition at a time; the token is the last partition done.
//! 7. `finish`: settles again (an event accepted just before the mark), removes whatever came
//!    back (sled, lake, live), the app's other jobs, its keys and the app itself.
//!
//! The report counts, per sled tree, the keys removed (records with their index entries), and
//! the lake's partitions and files. A piece redone after a crash counts only what was left.

pub mod http;
pub mod sled;

use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use object_store::ObjectStore;

use crate::collector::Collector;
use crate::jobs::{Cursor, Job, JobError, JobKind, JobView, Jobs, StepOutcome, Work};
use crate::storage::changes::{self, types, Actor, Change};
use crate::storage::{Store, StoreError};
use crate::tenants::{Access, App};

/// The most sled keys one piece of the `sled` step removes (one store call, one flush).
const PIECE_KEYS: usize = 5_000;

const STEPS: &[&str] = &[
    "mark", "settle", "webhooks", "sled", "live", "lake", "finish",
];

/// The longest the `webhooks` step waits for the app's webhooks to be sent.
const WEBHOOKS_WAIT: Duration = Duration::from_secs(60);

/// How often the `webhooks` step looks again.
const WEBHOOKS_POLL: Duration = Duration::from_millis(200);

/// What the deletion's steps touch.
pub struct AppDeletion {
    pub store: Store,
    pub access: web::Data<Access>,
    pub collector: web::Data<Collector>,
    pub lake: Arc<dyn ObjectStore>,
    /// `lake.prefix` of the settings.
    pub prefix: String,
}

/// Why a deletion did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no such app")]
    NoApp,
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Starts the deletion of `app` (asked by `by`): stores the job with its `app.deletion.started`
/// event, marks the app (its keys stop at once) and wakes the runner. An app already being
/// deleted answers the job that deletes it.
pub async fn start(
    jobs: &Jobs,
    store: &Store,
    access: &web::Data<Access>,
    (app, by): (&str, &Actor),
) -> Result<Job, StartError> {
    let id = app.to_owned();
    let found = store
        .run(move |db| crate::tenants::store::get_app(db, &id))
        .await?
        .ok_or(StartError::NoApp)?;
    if let Some(job) = running(jobs, &found).await? {
        return Ok(job);
    }
    let (of, by) = (app.to_owned(), by.clone());
    let params = serde_json::Value::Null;
    let job = jobs
        .submit_with(JobKind::AppDeletion, app, params, move |_, job| {
            Ok((Vec::new(), Some(started(&of, job, &by))))
        })
        .await?;
    let marked = mark(store, access, app, &job.id).await?;
    match marked.and_then(|a| a.deletion_job_id) {
        Some(by) if by == job.id => Ok(job),
        // Another request won the race: its job deletes the app, this one goes.
        Some(by) => {
            let mine = job.id.clone();
            store
                .run(move |db| crate::jobs::store::delete(db, &mine))
                .await?;
            jobs.get(&by).await?.ok_or(StartError::NoApp)
        }
        None => Err(StartError::NoApp),
    }
}

/// `app.deletion.started`: the deletion's job as `GET /admin/v1/jobs/{jobId}` shows it.
fn started(app: &str, job: &Job, by: &Actor) -> Change {
    let data = changes::data("job", &JobView::from(job));
    Change::new(
        types::APP_DELETION_STARTED,
        app,
        &job.id,
        job.created_at,
        by,
        data,
    )
}

/// The job deleting `app`, if it is being deleted.
pub async fn running(jobs: &Jobs, app: &App) -> Result<Option<Job>, StoreError> {
    match &app.deletion_job_id {
        Some(id) => jobs.get(id).await,
        None => Ok(None),
    }
}

/// Marks `app` as deleted by `job` (unless another job holds it) and drops it from the
/// registry; the app as it is now, `None` when it is gone.
async fn mark(
    store: &Store,
    access: &web::Data<Access>,
    app: &str,
    job: &str,
) -> Result<Option<App>, StoreError> {
    let (app, job, access) = (app.to_owned(), job.to_owned(), access.clone());
    let now = access.registry.clock().now();
    store
        .run(move |db| {
            let marked = crate::tenants::store::mark_deleting(db, &app, &job, now)?;
            access.registry.reload_app(db, &app)?;
            Ok(marked)
        })
        .await
}

impl AppDeletion {
    async fn mark(&self, job: &Job) -> Result<StepOutcome, JobError> {
        match mark(&self.store, &self.access, &job.app_id, &job.id).await? {
            Some(app) if app.deletion_job_id.as_deref() != Some(job.id.as_str()) => {
                Err(JobError::Fatal(format!(
                    "the app is being deleted by {:?}",
                    app.deletion_job_id
                )))
            }
            _ => Ok(StepOutcome::Done),
        }
    }

    async fn settle(&self, app: &str) -> Result<StepOutcome, JobError> {
        settle(&self.store, &self.collector, app).await?;
        Ok(StepOutcome::Done)
    }

    /// Waits until nothing of the app is left for the webhooks to send, at most
    /// `WEBHOOKS_WAIT`; what is left then is counted and goes with the app.
    async fn webhooks(&self, app: &str, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let left = webhooks_sent(&self.store, app, WEBHOOKS_WAIT).await?;
        if left > 0 {
            tracing::warn!(app_id = %app, left, "app deletion: webhooks still pending; they go with the app");
            cursor.count("webhooksDropped", left);
        }
        Ok(StepOutcome::Done)
    }

    /// One piece of the app's sled records, from the place in the token.
    async fn sled(&self, app: &str, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let from = cursor
            .token
            .as_deref()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let app = app.to_owned();
        let (at, removed, total) = self
            .store
            .run(move |db| {
                let mut removed = Vec::new();
                if from == 0 {
                    let records = sled::forget_lake_files(db, &app)?;
                    removed.push((crate::collector::written::TREE, records));
                }
                let places = sled::places(&app);
                let (at, more) = sled::remove_from(db, &places, from, PIECE_KEYS)?;
                removed.extend(more);
                Ok((at, removed, places.len()))
            })
            .await?;
        for (tree, n) in removed {
            cursor.count(tree, n);
        }
        if at >= total {
            return Ok(StepOutcome::Done);
        }
        cursor.token = Some(at.to_string());
        Ok(StepOutcome::More)
    }

    fn live(&self, app: &str, cursor: &mut Cursor) {
        let shards = self.collector.rollups.forget(app);
        cursor.count("liveRollupShards", shards as u64);
        self.collector.quotas.forget(app);
        self.access.suppressions.forget(app);
    }

    /// One partition of the app's lake folder, after the one in the token.
    async fn lake(&self, app: &str, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let lake = &*self.lake;
        let after = cursor.token.as_deref();
        let Some(partition) =
            crate::retention::lake::next_partition(lake, &self.prefix, app, after).await?
        else {
            let rest = crate::collector::lake::app_dir(&self.prefix, app);
            cursor.count(
                "lakeFiles",
                crate::retention::lake::drop_all(lake, &rest).await? as u64,
            );
            return Ok(StepOutcome::Done);
        };
        let files = crate::retention::lake::drop_all(lake, &partition).await?;
        cursor.count("lakeFiles", files as u64);
        cursor.count("lakePartitions", 1);
        cursor.token = Some(partition.to_string());
        Ok(StepOutcome::More)
    }

    /// Settles again and removes whatever came back, the app's other jobs, its keys and the
    /// app.
    async fn finish(&self, job: &Job, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let app = job.app_id.as_str();
        settle(&self.store, &self.collector, app).await?;
        loop {
            let mut again = Cursor::default();
            if self.sled(app, &mut again).await? == StepOutcome::Done {
                merge(cursor, again);
                break;
            }
            merge(cursor, again);
        }
        self.live(app, cursor);
        let mut lake = Cursor::default();
        while self.lake(app, &mut lake).await? == StepOutcome::More {}
        merge(cursor, lake);
        let (id, mine, access) = (app.to_owned(), job.id.clone(), self.access.clone());
        let (keys, jobs) = self
            .store
            .run(move |db| {
                let mut jobs = 0;
                for other in crate::jobs::store::of_app(db, &id, None)? {
                    if other.id != mine && crate::jobs::store::delete(db, &other.id)? {
                        // An erasure's subject (the person's ids, kept under its job's id)
                        // goes with it.
                        crate::privacy::store::forget_subject(db, &other.id)?;
                        jobs += 1;
                    }
                }
                let keys = crate::tenants::store::remove_app(db, &id)?;
                for key in &keys {
                    access.registry.reload_key(db, key)?;
                }
                access.registry.reload_app(db, &id)?;
                Ok((keys, jobs))
            })
            .await?;
        for key in &keys {
            self.access.rate_limits.forget(key);
        }
        cursor.count("keys", keys.len() as u64);
        cursor.count("jobs", jobs);
        cursor.count("apps", 1);
        tracing::info!(app_id = %app, job = %job.id, "app deleted");
        Ok(StepOutcome::Done)
    }
}

/// Polls until the webhooks have nothing of `app` left to send (its changes fanned out, its
/// deliveries sent or given up), for at most `wait`; answers what is left (0: all sent).
async fn webhooks_sent(store: &Store, app: &str, wait: Duration) -> Result<u64, StoreError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let a = app.to_owned();
        let left = store
            .run(move |db| crate::webhooks::store::pending_of_app(db, &a))
            .await?;
        if left == 0 || tokio::time::Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(WEBHOOKS_POLL).await;
    }
}

/// Adds `piece`'s report to `cursor`'s.
fn merge(cursor: &mut Cursor, piece: Cursor) {
    for (what, n) in piece.report {
        cursor.count(&what, n);
    }
}

/// Waits until every event of `app` committed so far, here and on every edge of the fleet, is
/// in the lake (retried while it is away).
async fn settle(store: &Store, collector: &Collector, app: &str) -> Result<(), JobError> {
    collector
        .settle(app)
        .await
        .map_err(|e| JobError::Retry(format!("settle: {e}")))?;
    crate::fleet::settle::fleet(store, app, &*collector.clock)
        .await
        .map_err(|e| JobError::Retry(format!("settle: {e}")))
}

impl Work for AppDeletion {
    fn steps(&self) -> &'static [&'static str] {
        STEPS
    }

    fn run<'a>(
        &'a self,
        job: &'a Job,
        cursor: &'a mut Cursor,
    ) -> BoxFuture<'a, Result<StepOutcome, JobError>> {
        async move {
            let app = job.app_id.as_str();
            match cursor.step {
                0 => self.mark(job).await,
                1 => self.settle(app).await,
                2 => self.webhooks(app, cursor).await,
                3 => self.sled(app, cursor).await,
                4 => {
                    self.live(app, cursor);
                    Ok(StepOutcome::Done)
                }
                5 => self.lake(app, cursor).await,
                6 => self.finish(job, cursor).await,
                n => Err(JobError::Fatal(format!("no step {n}"))),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_starts_with_its_job_as_the_admin_api_shows_it() {
        let job = Job::new(
            JobKind::AppDeletion,
            "app1",
            serde_json::Value::Null,
            crate::ids::Timestamp::from_micros(0),
        );
        let c = started("app1", &job, &Actor::Admin);
        assert_eq!(
            (c.kind.as_str(), c.subject.as_str(), c.app_id.as_str()),
            ("app.deletion.started", job.id.as_str(), "app1")
        );
        assert_eq!(c.actor, Actor::Admin);
        let shown = serde_json::to_value(JobView::from(&job)).unwrap();
        assert_eq!(c.data, serde_json::json!({"job": shown}));
        assert_eq!(c.data["job"]["state"], "queued");
    }

    #[tokio::test]
    async fn the_deletion_waits_for_the_apps_webhooks_and_no_longer_than_it_may() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _threads) = Store::open(&dir.path().join("db"), 1, 16, 8 << 20).unwrap();
        assert_eq!(
            webhooks_sent(&store, "app1", Duration::ZERO).await.unwrap(),
            0
        );
        let job = Job::new(
            JobKind::AppDeletion,
            "app1",
            serde_json::Value::Null,
            crate::ids::Timestamp::from_micros(0),
        );
        let change = started("app1", &job, &Actor::System);
        let seq = store
            .run(move |db| Ok(changes::CHANGES.push(db, changes::KIND, 0, &change.encode())?))
            .await
            .unwrap();
        let waited = tokio::time::Instant::now();
        let wait = Duration::from_millis(300);
        assert_eq!(webhooks_sent(&store, "app1", wait).await.unwrap(), 1);
        assert!(waited.elapsed() >= wait, "it waited");
        assert_eq!(
            webhooks_sent(&store, "app2", wait).await.unwrap(),
            0,
            "another app's"
        );
        store
            .run(move |db| Ok(changes::CHANGES.ack_through(db, seq)?))
            .await
            .unwrap();
        assert_eq!(webhooks_sent(&store, "app1", wait).await.unwrap(), 0);
    }
}
