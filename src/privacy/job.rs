//! The erasure job's steps (a `jobs::Work`), in order:
//!
//! 1. `resolve`: the anonymousIds linked to the userId join the person (and the suppression
//!    list, which the request's ids were put on before the job was queued).
//! 2. `settle`: every event of the app acknowledged before now is put in the lake
//!    (`Collector::settle`); while the lake is away the step is retried, the job `running`.
//! 3. `stores`: contacts, profile and identity links, survey responses, votes and comments,
//!    idempotency answers, refused events (`store.rs`).
//! 4. `lake`: each file of the app, in path order, one piece per file (`lake.rs`); the cursor's
//!    token is the last file done, so a resume never rewrites a recorded file again.
//! 5. `forget`: the person's ids are deleted; the job record keeps their hashes and the counts
//!    (the audit).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use object_store::path::Path;
use serde::{Deserialize, Serialize};

use super::lake::{self, Ids, Outcome, Rewriter};
use super::model::{Counted, Hashes, Person};
use super::store;
use crate::clock::Clock;
use crate::collector::Collector;
use crate::ids::Timestamp;
use crate::jobs::JobView;
use crate::jobs::{Cursor, Job, JobError, JobKind, JobState, Jobs, StepOutcome, Work};
use crate::state::AppState;
use crate::storage::changes::{self, types, Actor, Change};
use crate::storage::{Store, StoreError};
use crate::tenants::{Access, Suppressions};

const STEPS: &[&str] = &["resolve", "settle", "stores", "lake", "forget"];

/// An erasure job's params: no personal data (the ids wait in `store::SUBJECTS` under the
/// job's id until the job ends or fails).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Params {
    /// What the audit keeps of them.
    pub hashes: Hashes,
    /// Who asked: `key:<keyId>` or `user:<dashboard user id>`.
    pub requested_by: String,
}

/// An erasure job: its state, its step, and what it removed per store so far (`report`: counts
/// of contacts, profiles, identityLinks, surveyResponses, votes, comments, ideasAnonymised,
/// idempotencyAnswers,
/// refusedEvents, webhookEvents (what waited to go out, or was logged, naming the person), lakeRows, lakeFilesRewritten, lakeFilesSkipped, lakeFilesUnreadable: files
/// that are not readable Parquet, passed and logged with their path). The ids erased are never
/// shown or kept: only their SHA-256 (`hashes`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErasureView {
    #[serde(flatten)]
    pub job: JobView,
    pub hashes: Hashes,
    /// Who asked: `key:<keyId>` or `user:<dashboard user id>`.
    pub requested_by: String,
}

impl ErasureView {
    pub fn of(job: &Job) -> ErasureView {
        let params: Option<Params> = serde_json::from_value(job.params.clone()).ok();
        let (hashes, requested_by) =
            params.map_or_else(Default::default, |p| (p.hashes, p.requested_by));
        ErasureView {
            job: JobView::from(job),
            hashes,
            requested_by,
        }
    }
}

/// The end of a suppression that starts now: `privacy.suppress_days` later (`None`: for ever).
pub fn suppressed_until(now: Timestamp, days: u32) -> Option<Timestamp> {
    (days > 0).then(|| {
        Timestamp::from_micros(
            now.micros()
                .saturating_add(i64::from(days) * 86_400_000_000),
        )
    })
}

/// Starts an erasure of `person` in `app`: their ids are refused at ingest from now on, and
/// the job is queued with the ids kept (for the job) under its id, in one sled transaction, so
/// a crash leaves both or neither. Shared by the API and the dashboard.
pub async fn submit(
    state: &AppState,
    access: &Access,
    jobs: &Jobs,
    app: &str,
    person: Person,
    requested_by: String,
) -> Result<Job, StoreError> {
    let until = suppressed_until(state.now(), state.settings.privacy.suppress_days);
    let params = Params {
        hashes: person.hashes(app),
        requested_by,
    };
    let params = serde_json::to_value(params).unwrap_or_default();
    let list = access.suppressions.clone();
    let a = app.to_owned();
    jobs.submit_with(JobKind::Erasure, app, params, move |db, job| {
        list.add(db, &a, &person.ids(), until, &job.id)?;
        Ok((vec![store::subject_of(job, &person)], None))
    })
    .await
}

/// Records what the erasure of the lake file `path` did in `cursor` and moves its token past
/// the file. A file that is not Parquet (or is damaged) cannot hold rows any reader sees: it is
/// logged with its path, counted `lakeFilesUnreadable` and passed, not fatal to the erasure;
/// any other error is retried.
pub(super) fn tally(
    cursor: &mut Cursor,
    job: &str,
    path: &Path,
    outcome: Result<Outcome, lake::LakeError>,
) -> Result<(), JobError> {
    match outcome {
        Ok(Outcome::Skipped | Outcome::Clean) => {
            cursor.count(Counted::LakeFilesSkipped.name(), 1);
        }
        Ok(Outcome::Rewritten { rows }) => {
            cursor.count(Counted::LakeFilesRewritten.name(), 1);
            cursor.count(Counted::LakeRows.name(), rows);
        }
        Err(e @ lake::LakeError::Parquet { .. }) => {
            tracing::error!(job = %job, path = %path, error = %e, "erasure: a lake file cannot be read; passed (not erased)");
            cursor.count(Counted::LakeFilesUnreadable.name(), 1);
        }
        Err(other) => return Err(JobError::Retry(other.to_string())),
    }
    cursor.token = Some(path.to_string());
    Ok(())
}

/// `erasure.completed` (or `.failed`) of a job that ended: by Tributary, the job as the API
/// shows it (no personal data: the ids' hashes only).
fn ended(job: &Job) -> Change {
    let kind = match job.state {
        JobState::Done => types::ERASURE_COMPLETED,
        _ => types::ERASURE_FAILED,
    };
    let data = changes::data("erasure", &ErasureView::of(job));
    Change::new(
        kind,
        &job.app_id,
        &job.id,
        job.updated_at,
        &Actor::System,
        data,
    )
}

/// The erasure kind's work.
pub struct Erasure {
    pub store: Store,
    pub collector: Arc<Collector>,
    pub rewriter: Rewriter,
    pub prefix: String,
    pub suppressions: Arc<Suppressions>,
    pub clock: Arc<dyn Clock>,
    pub suppress_days: u32,
    /// Each running job's lake files, listed once per run of its `lake` step.
    files: Mutex<HashMap<String, Arc<Vec<Path>>>>,
}

impl Erasure {
    pub fn new(
        store: Store,
        collector: Arc<Collector>,
        rewriter: Rewriter,
        prefix: String,
        suppressions: Arc<Suppressions>,
        clock: Arc<dyn Clock>,
        suppress_days: u32,
    ) -> Erasure {
        Erasure {
            store,
            collector,
            rewriter,
            prefix,
            suppressions,
            clock,
            suppress_days,
            files: Mutex::default(),
        }
    }

    async fn person(&self, job: &Job) -> Result<Person, JobError> {
        let key = job.id.clone();
        self.store
            .run(move |db| store::subject(db, &key))
            .await?
            .ok_or_else(|| JobError::Fatal("the person's ids are gone".into()))
    }

    async fn resolve(&self, job: &Job) -> Result<StepOutcome, JobError> {
        let person = self.person(job).await?;
        let (app, id) = (job.app_id.clone(), job.id.clone());
        let until = suppressed_until(self.clock.now(), self.suppress_days);
        let list = self.suppressions.clone();
        self.store
            .run(move |db| {
                let all = store::resolve(db, &app, &person)?;
                list.add(db, &app, &all.ids(), until, &id)?;
                store::keep_subject(db, &id, &all)
            })
            .await?;
        Ok(StepOutcome::Done)
    }

    async fn settle(&self, job: &Job) -> Result<StepOutcome, JobError> {
        self.collector
            .settle(&job.app_id)
            .await
            .map_err(|e| JobError::Retry(format!("settle: {e}")))?;
        // The edges too: their suppressions came with the same registry as the request.
        crate::fleet::settle::fleet(&self.store, &job.app_id, &*self.collector.clock)
            .await
            .map_err(|e| JobError::Retry(format!("settle: {e}")))?;
        Ok(StepOutcome::Done)
    }

    async fn stores(&self, job: &Job, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let person = self.person(job).await?;
        let app = job.app_id.clone();
        let counts = self
            .store
            .run(move |db| Ok(store::erase(db, &app, &person)))
            .await?
            .map_err(|e| match e {
                store::EraseError::Store(e) => JobError::from(e),
                other => JobError::Retry(other.to_string()),
            })?;
        for (what, n) in counts {
            cursor.count(what.name(), n);
        }
        Ok(StepOutcome::Done)
    }

    /// One file past the cursor's token: erased, counted, recorded.
    async fn lake(&self, job: &Job, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let files = self.files_of(job).await?;
        let next = files
            .iter()
            .find(|p| cursor.token.as_deref().is_none_or(|t| p.as_ref() > t));
        let Some(path) = next else {
            for what in [
                Counted::LakeRows,
                Counted::LakeFilesRewritten,
                Counted::LakeFilesSkipped,
                Counted::LakeFilesUnreadable,
            ] {
                cursor.count(what.name(), 0);
            }
            self.files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&job.id);
            return Ok(StepOutcome::Done);
        };
        let ids = Ids::of(&self.person(job).await?);
        let outcome = self.rewriter.erase(path, &ids, &job.id).await;
        tally(cursor, &job.id, path, outcome)?;
        Ok(StepOutcome::More)
    }

    async fn files_of(&self, job: &Job) -> Result<Arc<Vec<Path>>, JobError> {
        if let Some(f) = self
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&job.id)
        {
            return Ok(f.clone());
        }
        let listed = Arc::new(lake::files(&*self.rewriter.lake, &self.prefix, &job.app_id).await?);
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(job.id.clone(), listed.clone());
        Ok(listed)
    }

    async fn step(&self, job: &Job, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        match STEPS.get(cursor.step).copied() {
            Some("resolve") => self.resolve(job).await,
            Some("settle") => self.settle(job).await,
            Some("stores") => self.stores(job, cursor).await,
            Some("lake") => self.lake(job, cursor).await,
            _ => {
                let key = job.id.clone();
                self.store
                    .run(move |db| store::forget_subject(db, &key))
                    .await?;
                Ok(StepOutcome::Done)
            }
        }
    }
}

impl Work for Erasure {
    fn steps(&self) -> &'static [&'static str] {
        STEPS
    }

    fn run<'a>(
        &'a self,
        job: &'a Job,
        cursor: &'a mut Cursor,
    ) -> BoxFuture<'a, Result<StepOutcome, JobError>> {
        self.step(job, cursor).boxed()
    }

    /// `erasure.completed` or `erasure.failed`: the job as the API shows it (no personal data:
    /// the ids' hashes only).
    fn ended(&self, job: &Job) -> Option<Change> {
        Some(ended(job))
    }

    /// A failed erasure forgets the person's ids too (its `forget` step will never run).
    fn failed<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, ()> {
        async move {
            let key = job.id.clone();
            if let Err(e) = self
                .store
                .run(move |db| store::forget_subject(db, &key))
                .await
            {
                tracing::warn!(job = %job.id, error = %e, "erasure failed; its subject stays until the next start");
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_erasure_ends_with_its_job_as_the_api_shows_it_and_no_id_of_the_person() {
        let person = Person::parse(
            serde_json::json!({"email": "ada@x.io", "userId": "ada-7"})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        let params = Params {
            hashes: person.hashes("app1"),
            requested_by: "key:k1".into(),
        };
        let params = serde_json::to_value(params).unwrap();
        let mut job = Job::new(JobKind::Erasure, "app1", params, Timestamp::t0());
        for (state, kind) in [
            (JobState::Done, "erasure.completed"),
            (JobState::Failed, "erasure.failed"),
        ] {
            job.state = state;
            let c = ended(&job);
            assert_eq!(
                (c.kind.as_str(), c.subject.as_str()),
                (kind, job.id.as_str())
            );
            assert_eq!(
                (c.actor.clone(), c.app_id.as_str()),
                (Actor::System, "app1")
            );
            let shown = serde_json::to_value(ErasureView::of(&job)).unwrap();
            assert_eq!(c.data, serde_json::json!({"erasure": shown}));
            let text = c.data.to_string();
            assert!(
                !text.contains("ada@x.io") && !text.contains("ada-7"),
                "{text}"
            );
        }
    }
}
