//! A durable job as stored and shown: its kind, app, state, where it is (the cursor) and what
//! it did so far (the report), plus how its steps answer the runner.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fields::names;
use crate::ids::{self, Timestamp};
use crate::storage::StoreError;

/// The prefix of a job's id: `job_<objectId>`.
pub const ID_PREFIX: &str = "job_";

names! {
    /// What a job does; each kind's steps live with the resources it touches.
    pub JobKind { Erasure = "erasure", AppDeletion = "app_deletion" }
}

names! {
    /// Where a job is: `queued` until the runner first takes it, `running` until its last step
    /// is done (also while a step waits to be retried), then `done` or `failed`.
    pub JobState { Queued = "queued", Running = "running", Done = "done", Failed = "failed" }
}

impl JobState {
    /// True once the job will never run again.
    pub fn finished(self) -> bool {
        matches!(self, JobState::Done | JobState::Failed)
    }
}

/// Where a job is inside its steps and what it removed or changed so far: saved after each step
/// and each piece of a long step, in one write, so counts always match the work recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cursor {
    /// The step to run next (0-based, an index into the kind's steps).
    pub step: usize,
    /// Inside the step: an opaque resume token (e.g. the last file done); `None` at its start.
    pub token: Option<String>,
    /// Counts per store or thing (e.g. `contacts: 12`), added to by the steps.
    pub report: BTreeMap<String, u64>,
}

impl Cursor {
    /// Adds `n` to the report's `what` (a zero is recorded too, so a report names every store
    /// a step looked at).
    pub fn count(&mut self, what: &str, n: u64) {
        *self.report.entry(what.to_owned()).or_default() += n;
    }
}

/// A job record as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    pub kind: JobKind,
    pub app_id: String,
    pub state: JobState,
    /// The name of the step the cursor is at (the last step's once the job is done).
    pub step_name: String,
    #[serde(flatten)]
    pub cursor: Cursor,
    /// The kind's input, as its submitter gave it (not shown by the API: see `JobView`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub params: serde_json::Value,
    /// The last error a step answered (kept after a later success, for the record).
    pub last_error: Option<String>,
    /// Failed attempts since the job last made progress.
    pub attempts: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Job {
    /// A queued job of `kind` on `app`, with the kind's `params`.
    pub fn new(kind: JobKind, app: &str, params: serde_json::Value, now: Timestamp) -> Job {
        Job {
            id: format!("{ID_PREFIX}{}", ids::object_id()),
            kind,
            app_id: app.to_owned(),
            state: JobState::Queued,
            step_name: String::new(),
            cursor: Cursor::default(),
            params,
            last_error: None,
            attempts: 0,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A job as the API shows it: the record without its params (an erasure's hold personal data).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: String,
    pub kind: JobKind,
    pub app_id: String,
    pub state: JobState,
    /// The name of the step the job is at (the last step's once it is done).
    pub step_name: String,
    /// The step the job is at, 0-based.
    pub step: usize,
    /// Counts per store of what the job removed or changed so far.
    pub report: BTreeMap<String, u64>,
    /// The last error a step answered (kept after a later success, for the record).
    pub last_error: Option<String>,
    /// Failed attempts since the job last made progress.
    pub attempts: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&Job> for JobView {
    fn from(j: &Job) -> JobView {
        JobView {
            id: j.id.clone(),
            kind: j.kind,
            app_id: j.app_id.clone(),
            state: j.state,
            step_name: j.step_name.clone(),
            step: j.cursor.step,
            report: j.cursor.report.clone(),
            last_error: j.last_error.clone(),
            attempts: j.attempts,
            created_at: j.created_at,
            updated_at: j.updated_at,
        }
    }
}

/// What a step answers when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// The step is finished: the cursor moves to the next step (its token cleared).
    Done,
    /// The step did a piece of its work and set the cursor's token past it: the cursor is saved
    /// and the step is called again.
    More,
}

/// Why a step did not finish.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Something is away (the lake, a busy store): the job stays `running` and the step is
    /// tried again after a backoff.
    #[error("{0}")]
    Retry(String),
    /// The step can never succeed: the job is `failed`.
    #[error("{0}")]
    Fatal(String),
}

impl From<StoreError> for JobError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt { .. } => JobError::Fatal(e.to_string()),
            StoreError::Busy | StoreError::Closed | StoreError::Sled(_) => {
                JobError::Retry(e.to_string())
            }
        }
    }
}

impl From<object_store::Error> for JobError {
    /// The lake answers errors while it is away or overloaded: always worth another try.
    fn from(e: object_store::Error) -> Self {
        JobError::Retry(format!("lake: {e}"))
    }
}
