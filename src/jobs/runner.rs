//! The runner: one async task on the server's runtime that takes the unfinished jobs oldest
//! first and runs them one at a time, step by step, saving the cursor after each step and each
//! piece of a long step. At start it resumes every unfinished job from its cursor, so a
//! `kill -9` at any point redoes at most the piece in flight (steps are idempotent for the part
//! not yet recorded). A step that answers `Retry` leaves its job `running` and waits a backoff
//! (`backoff.rs`: doubling up to its max, reset by progress); meanwhile the next job runs, so
//! a job waiting for its lake holds up no other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::storage::changes::Change;
use crate::storage::{Store, StoreError};

use super::model::{Cursor, Job, JobError, JobKind, JobState, StepOutcome};
use super::store;

/// One kind of job: its steps, in order. Implemented above the resources the steps touch.
pub trait Work: Send + Sync + 'static {
    /// The steps' names, in order; `cursor.step` indexes them.
    fn steps(&self) -> &'static [&'static str];

    /// Runs the step `cursor.step` of `job` from `cursor.token`, adding what it did to
    /// `cursor.report`. On `More`, the step has set `cursor.token` past the piece it did. On an
    /// error, whatever it changed in `cursor` is dropped: the step must be idempotent for the
    /// part it did not record.
    fn run<'a>(
        &'a self,
        job: &'a Job,
        cursor: &'a mut Cursor,
    ) -> BoxFuture<'a, Result<StepOutcome, JobError>>;

    /// Called once `job` has failed for good (a step answered `Fatal`), after its record is
    /// saved: what the job kept for its last steps (e.g. an erasure's subject) goes now.
    fn failed<'a>(&'a self, _job: &'a Job) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The change to record with `job`'s final record (done or failed), in the same
    /// transaction: its webhook event, if its kind has one.
    fn ended(&self, _job: &Job) -> Option<Change> {
        None
    }
}

/// The kinds a runner knows, each with its work.
#[derive(Default, Clone)]
pub struct Kinds(HashMap<JobKind, Arc<dyn Work>>);

impl Kinds {
    pub fn with(mut self, kind: JobKind, work: Arc<dyn Work>) -> Kinds {
        self.0.insert(kind, work);
        self
    }
}

/// The handle to the jobs: submit one, read them, start the runner. Cheap to clone.
#[derive(Clone)]
pub struct Jobs {
    store: Store,
    clock: Arc<dyn Clock>,
    wake: Arc<Notify>,
}

impl Jobs {
    pub fn new(store: Store, clock: Arc<dyn Clock>) -> Jobs {
        Jobs {
            store,
            clock,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Stores a queued job of `kind` on `app` and wakes the runner.
    pub async fn submit(
        &self,
        kind: JobKind,
        app: &str,
        params: serde_json::Value,
    ) -> Result<Job, StoreError> {
        self.submit_with(kind, app, params, |_, _| Ok((Vec::new(), None)))
            .await
    }

    /// Like `submit`, with `before` run in the same store closure first: the records it answers,
    /// and the change (its webhook event) if any, are written with the job in one transaction;
    /// when it fails, no job is stored.
    pub async fn submit_with<F>(
        &self,
        kind: JobKind,
        app: &str,
        params: serde_json::Value,
        before: F,
    ) -> Result<Job, StoreError>
    where
        F: FnOnce(&sled::Db, &Job) -> Result<(Vec<store::Companion>, Option<Change>), StoreError>
            + Send
            + 'static,
    {
        let job = Job::new(kind, app, params, self.clock.now());
        let stored = job.clone();
        self.store
            .run(move |db| {
                let (companions, change) = before(db, &stored)?;
                store::insert_with(db, &stored, &companions, change.as_ref())
            })
            .await?;
        self.wake.notify_one();
        Ok(job)
    }

    /// The job `id`, if there is one.
    pub async fn get(&self, id: &str) -> Result<Option<Job>, StoreError> {
        let id = id.to_owned();
        self.store.run(move |db| store::get(db, &id)).await
    }

    /// Every job of `app` (of `kind` only, if given), oldest first.
    pub async fn of_app(&self, app: &str, kind: Option<JobKind>) -> Result<Vec<Job>, StoreError> {
        let app = app.to_owned();
        self.store
            .run(move |db| store::of_app(db, &app, kind))
            .await
    }

    /// Starts the runner for `kinds` (jobs of other kinds wait, untouched).
    pub fn start(&self, kinds: Kinds, backoff: Backoff) -> tokio::task::JoinHandle<()> {
        let runner = Runner {
            jobs: self.clone(),
            kinds,
            backoff,
            waiting: HashMap::new(),
        };
        tokio::spawn(runner.run())
    }
}

/// A job whose step asked to be retried: not before `until`; `delay` is the wait it got.
struct Wait {
    until: Instant,
    delay: Duration,
}

struct Runner {
    jobs: Jobs,
    kinds: Kinds,
    backoff: Backoff,
    waiting: HashMap<String, Wait>,
}

impl Runner {
    async fn run(mut self) {
        loop {
            let pending = match self.jobs.store.run(store::unfinished).await {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::warn!(error = %e, "jobs: the store could not be read; retrying");
                    self.sleep(Some(Instant::now() + self.backoff.max)).await;
                    continue;
                }
            };
            let pending: Vec<Job> = pending
                .into_iter()
                .filter(|j| self.kinds.0.contains_key(&j.kind))
                .collect();
            self.waiting
                .retain(|id, _| pending.iter().any(|j| &j.id == id));
            let now = Instant::now();
            let ready = pending
                .into_iter()
                .find(|j| self.waiting.get(&j.id).is_none_or(|w| w.until <= now));
            match ready {
                Some(job) => self.advance(job).await,
                None => {
                    let until = self.waiting.values().map(|w| w.until).min();
                    self.sleep(until).await;
                }
            }
        }
    }

    /// Waits until `until` (for ever if `None`) or a submit, whichever comes first.
    async fn sleep(&self, until: Option<Instant>) {
        match until {
            Some(t) => {
                tokio::select! {
                    _ = self.jobs.wake.notified() => {}
                    _ = tokio::time::sleep_until(t) => {}
                }
            }
            None => self.jobs.wake.notified().await,
        }
    }

    /// Runs `job`'s steps until it is finished, a step asks to be retried, or it is gone.
    async fn advance(&mut self, mut job: Job) {
        let Some(work) = self.kinds.0.get(&job.kind).cloned() else {
            return;
        };
        let steps = work.steps();
        if job.state == JobState::Queued {
            job.state = JobState::Running;
            if !self.save(&mut job, &*work).await {
                return;
            }
        }
        loop {
            let Some(name) = steps.get(job.cursor.step) else {
                job.state = JobState::Done;
                job.step_name = steps.last().copied().unwrap_or_default().to_owned();
                self.save(&mut job, &*work).await;
                tracing::info!(job = %job.id, kind = job.kind.name(), app_id = %job.app_id, report = ?job.cursor.report, "job done");
                return;
            };
            job.step_name = (*name).to_owned();
            let mut cursor = job.cursor.clone();
            match work.run(&job, &mut cursor).await {
                Ok(outcome) => {
                    if outcome == StepOutcome::Done {
                        cursor.step += 1;
                        cursor.token = None;
                    }
                    job.cursor = cursor;
                    job.attempts = 0;
                    self.waiting.remove(&job.id);
                }
                Err(JobError::Retry(e)) => {
                    tracing::warn!(job = %job.id, step = %job.step_name, error = %e, "job step failed; retried later");
                    job.attempts += 1;
                    job.last_error = Some(e);
                    self.save(&mut job, &*work).await;
                    self.wait(&job.id);
                    return;
                }
                Err(JobError::Fatal(e)) => {
                    tracing::error!(job = %job.id, step = %job.step_name, error = %e, "job failed");
                    job.state = JobState::Failed;
                    job.last_error = Some(e);
                    if self.save(&mut job, &*work).await {
                        work.failed(&job).await;
                    }
                    return;
                }
            }
            if !self.save(&mut job, &*work).await {
                return;
            }
        }
    }

    /// Puts `id` off by its next backoff delay.
    fn wait(&mut self, id: &str) {
        let delay = match self.waiting.get(id) {
            Some(w) => self.backoff.after(w.delay),
            None => self.backoff.first,
        };
        let until = Instant::now() + delay;
        self.waiting.insert(id.to_owned(), Wait { until, delay });
    }

    /// Saves `job` (stamped now; once it has ended, with the change `work` records for its
    /// end); false when it cannot go on: it was deleted meanwhile, or the store failed (then it
    /// is retried after a backoff, from its last saved cursor).
    async fn save(&mut self, job: &mut Job, work: &dyn Work) -> bool {
        job.updated_at = self.jobs.clock.now();
        let record = job.clone();
        let change = job.state.finished().then(|| work.ended(job)).flatten();
        match self
            .jobs
            .store
            .run(move |db| store::save_with(db, &record, change.as_ref()))
            .await
        {
            Ok(true) => true,
            Ok(false) => {
                self.waiting.remove(&job.id);
                false
            }
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "job not saved; retried later");
                self.wait(&job.id);
                false
            }
        }
    }
}
