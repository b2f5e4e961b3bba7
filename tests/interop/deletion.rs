//! App deletion against real readers: two apps with contacts, ideas with votes and comments, a
//! survey with responses, profiles, rollups and events in the lake (local, and S3 through moto);
//! one is deleted. Afterwards nothing of it is in sled (every tree scanned), the rollups or the
//! lake (DuckDB), and the other app's answers and rows are exactly as before. Then `kill -9` in
//! the middle of a deletion (the lake cut, so the job waits at its lake step) and a restart:
//! the job resumes from its cursor and completes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use reqwest::Method;
use serde_json::{json, Map, Value};
use tributary::config::{LakeKind, LakeSettings, Settings};

use crate::binary;
use crate::helpers::*;
use crate::populate::*;
use crate::proxy::Proxy;
use crate::python::{self, LakeView, Moto};

const BUCKET: &str = "deletion-lake";

/// Files reach the lake within a second of their events.
fn fresh_lake(s: &mut Settings) {
    s.collector.max_file_age_ms = 100;
    s.collector.lake_file_max_wait_ms = 200;
}

/// The rows of `app` in a lake read by DuckDB, by messageId.
fn rows_of(view: &LakeView, app: &str) -> Vec<Map<String, Value>> {
    let mut rows: Vec<_> = view
        .rows
        .iter()
        .filter(|r| r["app_id"] == json!(app))
        .cloned()
        .collect();
    rows.sort_by_key(|r| r["message_id"].as_str().unwrap_or_default().to_owned());
    rows
}

/// Polls DuckDB's view of the lake until it holds `n` rows of each app (at most 60 s).
async fn until_in_lake(read: &impl Fn() -> LakeView, apps: &[&str], n: usize) -> LakeView {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = tokio::task::block_in_place(read);
        if apps.iter().all(|a| rows_of(&view, a).len() == n) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "the lake never held {n} rows of each app"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The objects under `events/app_id=<app>/` of the lake `settings` names.
async fn lake_objects(settings: &LakeSettings, data_dir: &std::path::Path, app: &str) -> usize {
    let lake = tributary::collector::lake::open(settings, &data_dir.join("lake")).unwrap();
    let dir = tributary::collector::lake::app_dir(&settings.prefix, app);
    let found: Vec<_> = lake.list(Some(&dir)).try_collect().await.unwrap();
    found.len()
}

async fn deletion_scenario(
    lake: impl Fn(&mut LakeSettings) + Send + 'static,
    read: impl Fn(&std::path::Path) -> LakeView,
) {
    let mut app = spawn_app_with(|s| {
        fresh_lake(s);
        lake(&mut s.lake);
    });
    let mut settings = test_settings(&app.data_dir).lake;
    lake(&mut settings);
    let data_dir = app.data_dir.clone();
    let read = || read(&data_dir);
    let a = full_app(&app, "Doomed", "a", 3).await;
    let b = full_app(&app, "Kept", "b", 3).await;
    let before = until_in_lake(&read, &[&a.id, &b.id], 6).await;
    traffic_shows(&app, &a, 6).await;
    traffic_shows(&app, &b, 6).await;
    let b_before = snapshot(&app, &b).await;
    assert!(lake_objects(&settings, &app.data_dir, &a.id).await > 0);

    let del = app
        .admin(Method::DELETE, &format!("/apps/{}", a.id), None)
        .await;
    assert_eq!(del.status, 202, "{}", del.body);
    app.api(&a.key, Method::GET, "/api/v1/analytics/traffic", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    let job = del.data()["id"].as_str().unwrap().to_owned();
    let done = finished_job(&app, &job).await;
    assert_eq!(done["state"], "done", "{done}");
    assert!(done["report"]["lakeFiles"].as_u64().unwrap() >= 1, "{done}");
    assert!(done["report"]["rollups"].as_u64().unwrap() >= 1, "{done}");

    // The lake: nothing of the app, the other's rows exactly as before (DuckDB).
    assert_eq!(
        lake_objects(&settings, &app.data_dir, &a.id).await,
        0,
        "the prefix is gone"
    );
    let after = tokio::task::block_in_place(read);
    assert!(rows_of(&after, &a.id).is_empty());
    assert_eq!(rows_of(&after, &b.id), rows_of(&before, &b.id));
    assert_eq!(after.rows.len(), before.rows.len() - 6);
    // The other app's answers, traffic included, are what they were.
    assert_eq!(snapshot(&app, &b).await, b_before);
    // An app made again under the same name is a new app: nothing of the old one shows.
    let again = full_app(&app, "Doomed", "c", 0).await;
    let fresh = snapshot(&app, &again).await;
    assert_eq!(fresh["traffic"]["events"], 0, "{fresh}");
    assert_eq!(fresh["contacts"], json!([]));

    app.stop().await;
    if settings.kind == LakeKind::Local {
        let dir = app.data_dir.join(format!("lake/events/app_id={}", a.id));
        assert!(!dir.exists(), "a local lake drops the directory too");
    }
    assert_eq!(
        sled_traces(&app.data_dir, &a.id),
        [("jobs".to_owned(), job)],
        "nothing of the app in sled but its deletion's record"
    );
    assert!(sled_traces(&app.data_dir, &b.id).len() > 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_app_leaves_nothing_in_sled_the_rollups_or_a_local_lake() {
    deletion_scenario(|_| {}, |dir| python::read_local(&dir.join("lake"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_app_leaves_nothing_in_sled_the_rollups_or_s3() {
    let moto = Moto::start(BUCKET).await;
    let endpoint = moto.endpoint.clone();
    let reader = moto.endpoint.clone();
    deletion_scenario(
        move |lake| python::on_s3(lake, &endpoint, BUCKET),
        move |_| python::read_s3(&reader, BUCKET),
    )
    .await;
}

/// Polls the job until `done` says so (at most 60 s); returns it.
async fn job_until(app: &TestApp, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = app.admin(Method::GET, &format!("/jobs/{id}"), None).await;
        if a.status == 200 && done(a.data()) {
            return a.data().clone();
        }
        assert!(Instant::now() < deadline, "{what}: {}", a.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_killed_mid_job_resumes_after_the_restart_and_completes() {
    let moto = Moto::start(BUCKET).await;
    let upstream: SocketAddr = moto.endpoint.trim_start_matches("http://").parse().unwrap();
    let mut proxy = Proxy::start(upstream);
    let endpoint = proxy.endpoint();
    let mut env = python::s3_env(&endpoint, BUCKET);
    env.push(("TRIBUTARY__COLLECTOR__LAKE_FILE_MAX_WAIT_MS", "200"));
    let dir = tempfile::tempdir().unwrap();
    let mut server = binary::start_with(dir.path(), &env);
    let app = TestApp::remote(&server.base, dir.path().to_owned());
    let a = full_app(&app, "Doomed", "a", 3).await;
    let b = full_app(&app, "Kept", "b", 3).await;
    let read = || python::read_s3(&moto.endpoint, BUCKET);
    let before = until_in_lake(&read, &[&a.id, &b.id], 6).await;
    let b_before = snapshot(&app, &b).await;

    // The lake goes away; the deletion gets past sled and waits at its lake step.
    proxy.cut().await;
    let del = app
        .admin(Method::DELETE, &format!("/apps/{}", a.id), None)
        .await;
    assert_eq!(del.status, 202, "{}", del.body);
    app.api(&a.key, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    let job = del.data()["id"].as_str().unwrap().to_owned();
    let waiting = job_until(&app, &job, "the job waits for the lake", |j| {
        j["stepName"] == "lake" && j["attempts"].as_u64() >= Some(1)
    })
    .await;
    assert_eq!(waiting["state"], "running", "{waiting}");
    assert!(
        waiting["lastError"].as_str().unwrap().contains("lake"),
        "{waiting}"
    );
    assert!(
        waiting["report"]["contacts"].as_u64().unwrap() >= 3,
        "{waiting}"
    );
    server.kill_9();

    // Back with its lake: the job resumes at its lake step and completes.
    proxy.restore().await;
    let mut server = binary::start_with(dir.path(), &env);
    let app = TestApp::remote(&server.base, dir.path().to_owned());
    let done = job_until(&app, &job, "the job completes", |j| j["state"] == "done").await;
    assert_eq!(
        done["report"]["contacts"], waiting["report"]["contacts"],
        "sled not redone: {done}"
    );
    assert!(done["report"]["lakeFiles"].as_u64().unwrap() >= 1, "{done}");
    app.api(&a.key, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_eq!(snapshot(&app, &b).await, b_before);
    let after = tokio::task::block_in_place(read);
    assert!(rows_of(&after, &a.id).is_empty());
    assert_eq!(rows_of(&after, &b.id), rows_of(&before, &b.id));
    server.terminate().await;
    assert_eq!(sled_traces(dir.path(), &a.id), [("jobs".to_owned(), job)]);
}
