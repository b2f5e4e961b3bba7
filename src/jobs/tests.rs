//! The runner against a test kind: resume after a stop, retry, one job at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;

use super::*;
use crate::backoff::Backoff;
use crate::clock::{Clock, SystemClock};
use crate::storage::changes::Change;
use crate::storage::{Store, StoreThreads};

const FAST: Backoff = Backoff {
    first: Duration::from_millis(5),
    max: Duration::from_millis(20),
};

/// A kind of three steps: `a`, then `b` in three pieces (tokens "1" to "3"), then `c`. Every
/// run is logged as `step:token`; `fail` makes that many runs answer `Retry` first, `stop_at`
/// makes the run at that log entry hang (a process that stops mid-step), `fatal` fails `c`.
#[derive(Default)]
struct Test {
    log: Mutex<Vec<String>>,
    fail: AtomicUsize,
    stop_at: Option<String>,
    /// The run at this log entry waits for the notify.
    gate: Option<(String, tokio::sync::Notify)>,
    fatal: bool,
    running: AtomicUsize,
    most: AtomicUsize,
}

impl Test {
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    async fn step(&self, job: &Job, cursor: &mut Cursor) -> Result<StepOutcome, JobError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        // Give another job's step the chance to run meanwhile, were the runner to allow it.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        let entry = format!(
            "{}:{}:{}",
            job.app_id,
            cursor.step,
            cursor.token.as_deref().unwrap_or("-")
        );
        self.log.lock().unwrap().push(entry.clone());
        if self.stop_at.as_deref() == Some(entry.as_str()) {
            std::future::pending::<()>().await;
        }
        if let Some((at, open)) = &self.gate {
            if *at == entry {
                open.notified().await;
            }
        }
        if self.fail.load(Ordering::SeqCst) > 0 {
            self.fail.fetch_sub(1, Ordering::SeqCst);
            return Err(JobError::Retry("the lake is away".into()));
        }
        match (cursor.step, cursor.token.as_deref()) {
            (1, t) => {
                let next = t.map_or(1, |t| t.parse::<u32>().unwrap() + 1);
                cursor.count("pieces", 1);
                if next == 3 {
                    return Ok(StepOutcome::Done);
                }
                cursor.token = Some(next.to_string());
                Ok(StepOutcome::More)
            }
            (2, _) if self.fatal => Err(JobError::Fatal("cannot".into())),
            (s, _) => {
                cursor.count(&format!("step{s}"), 1);
                Ok(StepOutcome::Done)
            }
        }
    }
}

impl Work for Test {
    fn steps(&self) -> &'static [&'static str] {
        &["a", "b", "c"]
    }

    fn run<'a>(
        &'a self,
        job: &'a Job,
        cursor: &'a mut Cursor,
    ) -> BoxFuture<'a, Result<StepOutcome, JobError>> {
        self.step(job, cursor).boxed()
    }

    fn failed<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, ()> {
        let entry = format!("{}:failed:{:?}", job.app_id, job.state);
        self.log.lock().unwrap().push(entry);
        Box::pin(async {})
    }

    fn ended(&self, job: &Job) -> Option<Change> {
        let data = crate::storage::changes::data("job", &JobView::from(job));
        let actor = crate::storage::changes::Actor::System;
        Some(Change::new(
            "test.ended",
            &job.app_id,
            &job.id,
            job.updated_at,
            &actor,
            data,
        ))
    }
}

/// The changes recorded so far.
async fn recorded(store: &Store) -> Vec<Change> {
    store
        .run(|db| Ok(crate::storage::changes::recorded(db)))
        .await
        .unwrap()
}

fn store() -> (Store, StoreThreads, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (store, threads) = Store::open(&dir.path().join("db"), 1, 16, 8 << 20).unwrap();
    (store, threads, dir)
}

fn start(store: &Store, work: Arc<Test>) -> (Jobs, tokio::task::JoinHandle<()>) {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let jobs = Jobs::new(store.clone(), clock);
    let task = jobs.start(Kinds::default().with(JobKind::AppDeletion, work), FAST);
    (jobs, task)
}

/// Polls the job until `done` says so, for at most 10 s.
async fn until(jobs: &Jobs, id: &str, done: impl Fn(&Job) -> bool) -> Job {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let job = jobs.get(id).await.unwrap().expect("the job exists");
        if done(&job) {
            return job;
        }
        assert!(tokio::time::Instant::now() < deadline, "job stuck: {job:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn finished(j: &Job) -> bool {
    j.state.finished()
}

#[tokio::test]
async fn a_job_runs_its_steps_in_order_and_reports_what_they_did() {
    let (store, _threads, _dir) = store();
    let work = Arc::new(Test::default());
    let (jobs, _task) = start(&store, work.clone());
    let job = jobs
        .submit(JobKind::AppDeletion, "app1", serde_json::Value::Null)
        .await
        .unwrap();
    assert!(job.id.starts_with("job_"), "{}", job.id);
    assert_eq!(job.state, JobState::Queued);
    let job = until(&jobs, &job.id, finished).await;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(job.step_name, "c");
    assert_eq!(
        job.cursor.report,
        [
            ("pieces".into(), 3),
            ("step0".into(), 1),
            ("step2".into(), 1)
        ]
        .into()
    );
    assert_eq!(
        work.log(),
        ["app1:0:-", "app1:1:-", "app1:1:1", "app1:1:2", "app1:2:-"]
    );
    let view = JobView::from(&job);
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["kind"], "app_deletion");
    assert_eq!(json["state"], "done");
    assert_eq!(json["report"]["pieces"], 3);
    // The end's change is recorded once, with the job as its final record shows it.
    let [c] = &recorded(&store).await[..] else {
        panic!("one change")
    };
    assert_eq!(
        (c.kind.as_str(), c.subject.as_str()),
        ("test.ended", job.id.as_str())
    );
    assert_eq!(c.data, serde_json::json!({"job": json}));
}

#[tokio::test]
async fn a_stopped_job_resumes_from_its_cursor_without_redoing_finished_work() {
    let (store, _threads, _dir) = store();
    // The first runner stops in the middle of step b, after its first piece was recorded.
    let first = Arc::new(Test {
        stop_at: Some("app1:1:1".into()),
        ..Test::default()
    });
    let (jobs, task) = start(&store, first.clone());
    let job = jobs
        .submit(JobKind::AppDeletion, "app1", serde_json::Value::Null)
        .await
        .unwrap();
    let seen = until(&jobs, &job.id, |j| j.cursor.token.as_deref() == Some("1")).await;
    assert_eq!(seen.state, JobState::Running);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !first.log().contains(&"app1:1:1".to_owned()) {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    let _ = task.await;
    // A new runner (a restart) picks the job up at the piece that was in flight.
    let second = Arc::new(Test::default());
    let (jobs, _task) = start(&store, second.clone());
    let job = until(&jobs, &job.id, finished).await;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(second.log(), ["app1:1:1", "app1:1:2", "app1:2:-"]);
    assert_eq!(job.cursor.report["pieces"], 3, "each piece counted once");
    assert_eq!(job.cursor.report["step0"], 1, "step a ran once in all");
}

#[tokio::test]
async fn a_retryable_failure_keeps_the_job_running_and_retries_with_backoff() {
    let (store, _threads, _dir) = store();
    let work = Arc::new(Test {
        fail: AtomicUsize::new(3),
        ..Test::default()
    });
    let (jobs, _task) = start(&store, work.clone());
    let job = jobs
        .submit(JobKind::AppDeletion, "app1", serde_json::Value::Null)
        .await
        .unwrap();
    let failing = until(&jobs, &job.id, |j| j.attempts >= 2).await;
    assert_eq!(failing.state, JobState::Running);
    assert_eq!(failing.last_error.as_deref(), Some("the lake is away"));
    let job = until(&jobs, &job.id, finished).await;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(job.attempts, 0, "progress resets the attempts");
    assert_eq!(job.last_error.as_deref(), Some("the lake is away"));
    let log = work.log();
    assert_eq!(&log[..4], ["app1:0:-"; 4], "step a tried until it worked");
    assert_eq!(job.cursor.report["step0"], 1);
}

#[tokio::test]
async fn a_fatal_failure_fails_the_job_and_then_tells_its_work() {
    let (store, _threads, _dir) = store();
    let work = Arc::new(Test {
        fatal: true,
        ..Test::default()
    });
    let (jobs, _task) = start(&store, work.clone());
    let job = jobs
        .submit(JobKind::AppDeletion, "app1", serde_json::Value::Null)
        .await
        .unwrap();
    let job = until(&jobs, &job.id, finished).await;
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.step_name, "c");
    assert_eq!(job.last_error.as_deref(), Some("cannot"));
    // `failed` runs once the record says so (an erasure forgets its subject there).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !work.log().iter().any(|e| e.contains("failed")) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", work.log());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let failed: Vec<String> = work
        .log()
        .into_iter()
        .filter(|e| e.contains("failed"))
        .collect();
    assert_eq!(failed, ["app1:failed:Failed"]);
    let [c] = &recorded(&store).await[..] else {
        panic!("one change")
    };
    assert_eq!(
        c.data["job"],
        serde_json::to_value(JobView::from(&job)).unwrap()
    );
    assert_eq!(c.data["job"]["state"], "failed");
}

#[tokio::test]
async fn a_job_submitted_with_companions_stores_them_in_the_same_transaction() {
    let (store, _threads, _dir) = store();
    let jobs = Jobs::new(store.clone(), Arc::new(SystemClock));
    let job = jobs
        .submit_with(
            JobKind::AppDeletion,
            "app1",
            serde_json::Value::Null,
            |_, j| {
                let side = vec![("side", j.id.as_bytes().to_vec(), b"v".to_vec())];
                let by = crate::storage::changes::Actor::Admin;
                let data = serde_json::json!({"job": j.id});
                Ok((
                    side,
                    Some(Change::new("t", &j.app_id, &j.id, j.created_at, &by, data)),
                ))
            },
        )
        .await
        .unwrap();
    let id = job.id.clone();
    let side = store
        .run(move |db| Ok(db.open_tree("side")?.get(id.as_bytes())?))
        .await
        .unwrap();
    assert_eq!(side.as_deref(), Some(&b"v"[..]));
    assert!(jobs.get(&job.id).await.unwrap().is_some());
    let refused = jobs
        .submit_with(
            JobKind::AppDeletion,
            "app2",
            serde_json::Value::Null,
            |_, _| Err(crate::storage::StoreError::Busy),
        )
        .await;
    assert!(refused.is_err());
    assert!(jobs.of_app("app2", None).await.unwrap().is_empty());
    let [c] = &recorded(&store).await[..] else {
        panic!("one change")
    };
    assert_eq!(
        (c.subject.as_str(), c.data["job"].as_str()),
        (job.id.as_str(), Some(job.id.as_str()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_run_one_at_a_time_oldest_first() {
    let (store, _threads, _dir) = store();
    let work = Arc::new(Test::default());
    let (jobs, _task) = start(&store, work.clone());
    let mut ids = Vec::new();
    for app in ["a1", "a2", "a3"] {
        let job = jobs
            .submit(JobKind::AppDeletion, app, serde_json::Value::Null)
            .await
            .unwrap();
        ids.push(job.id);
    }
    for id in &ids {
        until(&jobs, id, finished).await;
    }
    assert_eq!(
        work.most.load(Ordering::SeqCst),
        1,
        "never two steps at once"
    );
    let apps: Vec<String> = work.log().iter().map(|e| e[..2].to_owned()).collect();
    let mut sorted = apps.clone();
    sorted.sort();
    assert_eq!(apps, sorted, "each job finished before the next began");
    assert_eq!(jobs.of_app("a2", None).await.unwrap().len(), 1);
    assert!(jobs
        .of_app("a2", Some(JobKind::Erasure))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_job_that_waits_for_a_retry_holds_up_no_other() {
    let (store, _threads, _dir) = store();
    // The first job's step fails for ever (every run answers Retry); the second still runs.
    let work = Arc::new(Test {
        fail: AtomicUsize::new(usize::MAX / 2),
        ..Test::default()
    });
    let (jobs, _task) = start(&store, work.clone());
    let stuck = jobs
        .submit(JobKind::AppDeletion, "a1", serde_json::Value::Null)
        .await
        .unwrap();
    until(&jobs, &stuck.id, |j| j.attempts >= 1).await;
    work.fail.store(0, Ordering::SeqCst);
    let other = jobs
        .submit(JobKind::AppDeletion, "a2", serde_json::Value::Null)
        .await
        .unwrap();
    let other = until(&jobs, &other.id, finished).await;
    assert_eq!(other.state, JobState::Done);
    let stuck = until(&jobs, &stuck.id, finished).await;
    assert_eq!(stuck.state, JobState::Done);
}

#[tokio::test]
async fn a_deleted_job_is_dropped_and_jobs_of_unknown_kinds_wait() {
    let (store, _threads, _dir) = store();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let jobs = Jobs::new(store.clone(), clock);
    let erasure = jobs
        .submit(JobKind::Erasure, "a1", serde_json::json!({"userId": "u"}))
        .await
        .unwrap();
    let work = Arc::new(Test {
        gate: Some(("a2:1:-".into(), tokio::sync::Notify::new())),
        ..Test::default()
    });
    let _task = jobs.start(
        Kinds::default().with(JobKind::AppDeletion, work.clone()),
        FAST,
    );
    let gone = jobs
        .submit(JobKind::AppDeletion, "a2", serde_json::Value::Null)
        .await
        .unwrap();
    until(&jobs, &gone.id, |j| j.cursor.step == 1).await;
    assert!(store.db().with(|db| store::delete(db, &gone.id)).unwrap());
    let after = jobs
        .submit(JobKind::AppDeletion, "a3", serde_json::Value::Null)
        .await
        .unwrap();
    // The runner is in a2's step (held at the gate), so a3 waits: one at a time.
    assert_eq!(
        jobs.get(&after.id).await.unwrap().unwrap().state,
        JobState::Queued
    );
    work.gate.as_ref().unwrap().1.notify_one();
    until(&jobs, &after.id, finished).await;
    assert_eq!(
        jobs.get(&gone.id).await.unwrap(),
        None,
        "a deleted job is not written back"
    );
    assert!(!work.log().contains(&"a2:1:1".to_owned()), "nor run on");
    let erasure = jobs.get(&erasure.id).await.unwrap().unwrap();
    assert_eq!(erasure.state, JobState::Queued, "no work for erasures here");
    assert_eq!(erasure.params["userId"], "u");
}

/// The ids of the jobs `store::unfinished` answers.
fn unfinished_ids(db: &sled::Db) -> Vec<String> {
    let jobs = store::unfinished(db).unwrap();
    jobs.into_iter().map(|j| j.id).collect()
}

#[test]
fn the_unfinished_jobs_are_read_from_their_index_not_from_every_job() {
    let db = sled::Config::new().temporary(true).open().unwrap();
    assert_eq!(store::index_once(&db).unwrap(), 0);
    let now = crate::ids::Timestamp::t0();
    let jobs: Vec<Job> = (0..4)
        .map(|i| {
            Job::new(
                JobKind::AppDeletion,
                &format!("app{i}"),
                serde_json::Value::Null,
                now,
            )
        })
        .collect();
    for j in &jobs {
        store::insert_with(&db, j, &[], None).unwrap();
    }
    let mut done = jobs[1].clone();
    done.state = JobState::Done;
    assert!(store::save(&db, &done).unwrap());
    let mut running = jobs[2].clone();
    running.state = JobState::Running;
    assert!(store::save(&db, &running).unwrap());
    assert!(store::delete(&db, &jobs[3].id).unwrap());
    assert_eq!(
        unfinished_ids(&db),
        [jobs[0].id.clone(), jobs[2].id.clone()]
    );
    let index = db.open_tree(store::UNFINISHED).unwrap();
    assert_eq!(
        index.len(),
        3,
        "the two unfinished jobs' ids and the marker"
    );
    // A record the index does not name (none is written so): a walk of every job would find it.
    let stray = Job::new(JobKind::AppDeletion, "stray", serde_json::Value::Null, now);
    let tree = db.open_tree(store::TREE).unwrap();
    tree.insert(stray.id.as_bytes(), crate::storage::encode(&stray))
        .unwrap();
    assert_eq!(
        unfinished_ids(&db),
        [jobs[0].id.clone(), jobs[2].id.clone()]
    );
}

#[test]
fn a_store_of_an_earlier_version_has_its_unfinished_jobs_indexed_once() {
    let db = sled::Config::new().temporary(true).open().unwrap();
    let now = crate::ids::Timestamp::t0();
    let tree = db.open_tree(store::TREE).unwrap();
    let mut old = Vec::new();
    for state in [
        JobState::Done,
        JobState::Queued,
        JobState::Failed,
        JobState::Running,
    ] {
        let mut j = Job::new(JobKind::AppDeletion, "app", serde_json::Value::Null, now);
        j.state = state;
        tree.insert(j.id.as_bytes(), crate::storage::encode(&j))
            .unwrap();
        old.push(j.id);
    }
    assert!(unfinished_ids(&db).is_empty(), "not indexed yet");
    assert_eq!(store::index_once(&db).unwrap(), 2);
    assert_eq!(store::index_once(&db).unwrap(), 0, "once");
    assert_eq!(unfinished_ids(&db), [old[1].clone(), old[3].clone()]);
}
