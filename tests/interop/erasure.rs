//! Erasure against DuckDB over the lake, on a local lake and on S3 (moto): a person with an
//! identify and tracks over three hours (the server's clock moved), two anonymousIds, a
//! contact, a survey response, a vote and a comment, among 50 other visitors. After the job
//! every API that showed them shows nothing, the lake holds none of their rows and every other
//! row as before, and a later batch of theirs is refused. Then the real binary killed with
//! `kill -9` in the middle of the lake step, restarted: the job ends with the same result, and a
//! reader counting the lake in a loop meanwhile never sees a file missing or doubled.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Map, Value};
use tributary::config::{LakeSettings, Settings};

use crate::events::{batch, track};
use crate::helpers::*;
use crate::lake::LakeView;
use crate::observe;
use crate::python::{self, Moto};

const BUCKET: &str = "erasure-lake";
const HOUR: i64 = 3_600_000_000;
const PERMISSIONS: [&str; 10] = [
    "privacy:erase",
    "profiles:read",
    "contacts:read",
    "contacts:write",
    "ideas:read",
    "ideas:write",
    "votes:write",
    "comments:write",
    "responses:read",
    "surveys:read",
];

fn event(kind: &str, anon: &str, user: Option<&str>, id: &str) -> Value {
    let mut e = track(id);
    e["type"] = json!(kind);
    e["anonymousId"] = json!(anon);
    if let Some(u) = user {
        e["userId"] = json!(u);
    }
    e
}

/// Whether a lake row is the person's.
fn theirs(row: &Map<String, Value>, user: &str, anons: &[&str]) -> bool {
    row["user_id"] == json!(user)
        || row["anonymous_id"]
            .as_str()
            .is_some_and(|a| anons.contains(&a))
}

async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An active survey of `app_id`; its id.
async fn survey(app: &TestApp, app_id: &str) -> String {
    let body = json!({"title": "NPS", "type": "nps", "targeting": {"percentage": 100},
        "questions": [{"id": "score", "text": "How likely?", "type": "scale"}]});
    let path = format!("/apps/{app_id}/surveys");
    let made = app.admin(Method::POST, &path, Some(body)).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.data()["id"].as_str().unwrap().to_owned();
    let moved = app
        .admin(
            Method::POST,
            &format!("{path}/{id}/transition"),
            Some(json!({"status": "active"})),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    id
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> Value {
    let a = app.api(key, Method::POST, path, Some(body)).await;
    assert!(a.status.is_success(), "{path}: {}", a.body);
    a.data().clone()
}

async fn get(app: &TestApp, key: &str, path: &str) -> Answer {
    app.api(key, Method::GET, path, None).await
}

/// Polls the job until it is finished; its view.
async fn finished(app: &TestApp, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = get(app, key, &format!("/api/v1/erasures/{id}"))
            .await
            .data()
            .clone();
        if job["state"] == "done" || job["state"] == "failed" {
            return job;
        }
        assert!(Instant::now() < deadline, "the job did not finish: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The scenario on the lake `settings` names.
async fn erasure_scenario(
    lake_settings: impl Fn(&mut LakeSettings) + Send + 'static,
    read: impl Fn() -> LakeView,
) {
    let app = spawn_app_with(|s: &mut Settings| {
        s.collector.max_file_age_ms = 100;
        s.collector.lake_file_max_wait_ms = 1;
        lake_settings(&mut s.lake);
    });
    let (app_id, ik) = app.create_app("enterprise").await;
    let (_, key) = app.create_key(&app_id, &PERMISSIONS).await;
    let (a1, a2) = (anon("ada-laptop"), anon("ada-phone"));
    let survey = survey(&app, &app_id).await;
    let others: Vec<String> = (0..50).map(|i| anon(&format!("visitor-{i}"))).collect();
    let mut sent = 0;
    // Three hours: ada identifies on her laptop, then on her phone, and tracks on both.
    for hour in 0..3 {
        let mut events = vec![
            event("track", &a1, None, &format!("ada-a1-{hour}")),
            event("track", &a2, None, &format!("ada-a2-{hour}")),
        ];
        if hour < 2 {
            let a = if hour == 0 { &a1 } else { &a2 };
            events.push(event("identify", a, Some("ada"), &format!("ada-id-{hour}")));
        }
        for (i, o) in others.iter().enumerate() {
            let user = (i % 5 == 0).then(|| format!("user-{i}"));
            events.push(event("track", o, user.as_deref(), &format!("o{i}-{hour}")));
        }
        sent += events.len();
        assert_eq!(app.collect(&ik, batch(events)).await.status, 200);
        app.clock.advance(HOUR);
    }
    for (email, name) in [("ada@example.com", "ada"), ("bob@example.com", "bob")] {
        post(
            &app,
            &key,
            "/acq/v1/contacts",
            json!({"email": email, "firstName": name}),
        )
        .await;
    }
    for visitor in [&a1, &others[0]] {
        let body =
            json!({"anonymousId": visitor, "answers": [{"questionId": "score", "value": 9}]});
        let a = app
            .send(
                Method::POST,
                &format!("/api/w/surveys/{survey}/responses"),
                &[("x-app-key", &ik)],
                Some(body),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let bob = json!({"id": "user-0", "name": "Bob", "email": "bob@example.com"});
    let ada = json!({"id": "ada", "name": "Ada", "email": "ada@example.com"});
    let idea = post(
        &app,
        &key,
        "/api/v1/ideas",
        json!({"title": "Dark mode", "author": bob}),
    )
    .await;
    let idea = idea["id"].as_str().unwrap().to_owned();
    for who in [&ada, &bob] {
        post(
            &app,
            &key,
            &format!("/api/v1/ideas/{idea}/votes"),
            json!({"voter": who}),
        )
        .await;
        post(
            &app,
            &key,
            &format!("/api/v1/ideas/{idea}/comments"),
            json!({"content": "+1", "author": who}),
        )
        .await;
    }
    until("every event in the lake", || async {
        read().rows.len() == sent
    })
    .await;
    let before = read();
    let anons = [a1.as_str(), a2.as_str()];
    let expected: Vec<&Map<String, Value>> = before
        .rows
        .iter()
        .filter(|r| !theirs(r, "ada", &anons))
        .collect();
    let removed = before.rows.len() - expected.len();
    assert_eq!(removed, 8, "3 hours of two devices and two identifies");
    let hours: std::collections::BTreeSet<String> =
        before.rows.iter().map(|r| r["hour"].to_string()).collect();
    assert!(hours.len() >= 3, "three hours of files: {hours:?}");

    let started = post(
        &app,
        &key,
        "/api/v1/erasures",
        json!({"userId": "ada", "email": "ada@example.com"}),
    )
    .await;
    let done = finished(&app, &key, started["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "done", "{done}");
    let report = &done["report"];
    for (what, n) in [
        ("contacts", 1),
        ("profiles", 1),
        ("identityLinks", 2),
        ("surveyResponses", 1),
        ("votes", 1),
        ("comments", 1),
        ("lakeRows", removed as u64),
    ] {
        assert_eq!(report[what], json!(n), "{what}: {done}");
    }
    assert!(
        report["lakeFilesRewritten"].as_u64().unwrap() >= 3,
        "{done}"
    );

    // Every API that showed them shows nothing; the others are as they were.
    get(&app, &key, "/api/v1/profiles/ada")
        .await
        .assert_error(404, "NOT_FOUND");
    assert_eq!(get(&app, &key, "/api/v1/profiles/user-0").await.status, 200);
    let contacts = get(&app, &key, "/acq/v1/contacts").await;
    assert_eq!(contacts.data().as_array().unwrap().len(), 1);
    assert_eq!(contacts.data()[0]["email"], "bob@example.com");
    let responses = get(&app, &key, &format!("/api/v1/surveys/{survey}/responses")).await;
    let who: Vec<&Value> = responses
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["anonymousId"])
        .collect();
    assert_eq!(who, [&json!(others[0])]);
    for (list, field) in [("votes", "voter"), ("comments", "author")] {
        let l = get(&app, &key, &format!("/api/v1/ideas/{idea}/{list}")).await;
        let ids: Vec<&Value> = l
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|x| &x[field]["id"])
            .collect();
        assert_eq!(ids, [&json!("user-0")], "{list}");
    }
    // The lake: none of their rows, every other row exactly as before.
    let after = read();
    assert!(after.rows.iter().all(|r| !theirs(r, "ada", &anons)));
    assert_eq!(after.rows.iter().collect::<Vec<_>>(), expected);
    // Their raw events are in no file of the data dir either (the WAL, its spare, the parts):
    // the database's own files aside, whose deleted records sled rewrites in its own time.
    for id in ["msg_ada-", a1.as_str(), a2.as_str()] {
        let kept = observe::files_holding(&app.data_dir, &app.data_dir.join("db"), id.as_bytes());
        assert!(kept.is_empty(), "{id} still in {kept:?}");
    }

    // A late batch carrying their anonymousId: refused, counted, never in the lake.
    let late = vec![
        event("track", &a2, None, "late-ada"),
        event("track", &others[1], None, "late-other"),
    ];
    let a = app.collect(&ik, batch(late)).await;
    assert_eq!(a.counts(), (1, 0, 1), "{}", a.body);
    until("the other's late event in the lake", || async {
        read()
            .rows
            .iter()
            .any(|r| r["message_id"] == "msg_late-other")
    })
    .await;
    assert!(read()
        .rows
        .iter()
        .all(|r| r["message_id"] != "msg_late-ada"));
    let metrics = reqwest::get(format!("{}/metrics", app.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == "tributary_collector_rejected_total{reason=\"suppressed\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_erasure_removes_the_person_from_every_store_and_a_local_lake() {
    let tmp = tempfile::tempdir().unwrap();
    let lake_dir = tmp.path().to_path_buf();
    let path = lake_dir.to_str().unwrap().to_owned();
    erasure_scenario(
        move |lake| lake.path = path.clone(),
        move || python::read_local(&lake_dir),
    )
    .await;
}

#[tokio::test]
async fn an_erasure_removes_the_person_from_every_store_and_an_s3_lake() {
    let moto = Moto::start(BUCKET).await;
    let endpoint = moto.endpoint.clone();
    let read_endpoint = endpoint.clone();
    erasure_scenario(
        move |lake| python::on_s3(lake, &endpoint, BUCKET),
        move || python::read_s3(&read_endpoint, BUCKET),
    )
    .await;
}

/// The parquet files of a local lake.
fn lake_files(lake: &std::path::Path) -> usize {
    crate::observe::parquet_files(lake).len()
}

async fn call(
    client: &reqwest::Client,
    method: Method,
    url: String,
    auth: (&str, &str),
    body: Option<Value>,
) -> Value {
    let mut req = client.request(method, url).header(auth.0, auth.1);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.json().await.unwrap()
}

/// 40 lake files, each with one of the person's rows: the lake step takes long enough to be
/// killed in its middle.
const FILES: usize = 40;

#[tokio::test]
async fn an_erasure_killed_mid_lake_resumes_after_a_restart_and_readers_never_see_a_file_missing_or_doubled(
) {
    use crate::binary::start_with;
    let tmp = tempfile::tempdir().unwrap();
    let (dir, lake) = (tmp.path(), tmp.path().join("lake"));
    let env = [("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "6")];
    let client = crate::helpers::test_client();
    let mut server = start_with(dir, &env);
    let admin = ("authorization", &*format!("Bearer {ADMIN_TOKEN}"));
    let made = call(
        &client,
        Method::POST,
        format!("{}/admin/v1/apps", server.base),
        admin,
        Some(json!({"name": "kill", "plan": "enterprise"})),
    )
    .await;
    let (app_id, ik) = (
        made["data"]["id"].as_str().unwrap().to_owned(),
        made["data"]["integrationKey"].as_str().unwrap().to_owned(),
    );
    let made = call(
        &client,
        Method::POST,
        format!("{}/admin/v1/apps/{app_id}/keys", server.base),
        admin,
        Some(json!({"name": "k", "permissions": ["privacy:erase"]})),
    )
    .await;
    let key = made["data"]["key"].as_str().unwrap().to_owned();
    let (a1, a2) = (anon("kill-ada-1"), anon("kill-ada-2"));
    for i in 0..FILES {
        let mut events = vec![if i == 0 {
            event("identify", &a1, Some("ada"), "k-id")
        } else {
            event(
                "track",
                if i % 2 == 0 { &a1 } else { &a2 },
                None,
                &format!("k-ada-{i}"),
            )
        }];
        for v in 0..5 {
            events.push(event(
                "track",
                &anon(&format!("kill-{v}")),
                None,
                &format!("k-{i}-{v}"),
            ));
        }
        let url = format!("{}/api/w/analytics/collect", server.base);
        call(
            &client,
            Method::POST,
            url,
            ("x-app-key", &ik),
            Some(batch(events)),
        )
        .await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while lake_files(&lake) < i + 1 {
            assert!(Instant::now() < deadline, "file {i} never reached the lake");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let anons = [a1.as_str(), a2.as_str()];
    let deadline = Instant::now() + Duration::from_secs(30);
    // Every row in the lake, and the lake quiet: the same files at two reads 300 ms apart (a
    // shard's last parts may still be merged into a file just after the rows are all there).
    let mut settled: Option<Vec<String>> = None;
    let before = loop {
        let view = python::read_local(&lake);
        let all = view.rows.len() == FILES * 6;
        if all && settled.as_ref() == Some(&view.files) {
            break view;
        }
        settled = all.then(|| view.files.clone());
        assert!(
            Instant::now() < deadline,
            "{} rows in the lake",
            view.rows.len()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let n = before.files.len();
    assert!(n >= FILES, "{n} files");
    let expected: Vec<&Map<String, Value>> = before
        .rows
        .iter()
        .filter(|r| !theirs(r, "ada", &anons))
        .collect();
    let watcher = python::Watcher::start(&lake, &dir.join("stop-watching"), "ada", &anons);

    let url = format!("{}/api/v1/erasures", server.base);
    let k = ("x-api-key", key.as_str());
    let started = call(
        &client,
        Method::POST,
        url,
        k,
        Some(json!({"userId": "ada", "anonymousIds": [a2]})),
    )
    .await;
    let id = started["data"]["id"].as_str().unwrap().to_owned();
    let job_url = |base: &str| format!("{base}/api/v1/erasures/{id}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = call(&client, Method::GET, job_url(&server.base), k, None).await["data"].clone();
        assert_ne!(
            job["state"], "done",
            "the job ended before it could be killed: {job}"
        );
        let files_done = job["report"]["lakeFilesRewritten"].as_u64().unwrap_or(0);
        if job["stepName"] == "lake" && files_done >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "never in the lake step: {job}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill_9();
    let server = start_with(dir, &env);
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let job = call(&client, Method::GET, job_url(&server.base), k, None).await["data"].clone();
        if job["state"] == "done" {
            break job;
        }
        assert_ne!(job["state"], "failed", "{job}");
        assert!(
            Instant::now() < deadline,
            "the resumed job did not finish: {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let watched = watcher.finish();
    // The same result as without the kill: every file rewritten once, each row of theirs gone.
    let report = &job["report"];
    let (rewritten, skipped) = (
        report["lakeFilesRewritten"].as_u64().unwrap(),
        report["lakeFilesSkipped"].as_u64().unwrap(),
    );
    let after = python::read_local(&lake);
    assert_eq!(
        rewritten + skipped,
        n as u64,
        "each file counted once: {job}\nbefore {:?}\nafter {:?}",
        before.files,
        after.files
    );
    assert!(rewritten >= 3, "{job}");
    assert_eq!(report["lakeRows"], json!(FILES), "{job}");
    assert_eq!(after.files, before.files);
    assert_eq!(after.rows.iter().collect::<Vec<_>>(), expected);
    // The reader saw every file, once, and every other row, at every read.
    assert!(watched.errors.is_empty(), "{watched:?}");
    assert!(watched.reads >= 5, "{watched:?}");
    let only = format!("{n} {}", expected.len());
    assert_eq!(
        watched.seen.keys().collect::<Vec<_>>(),
        [&only],
        "{watched:?}"
    );
}
