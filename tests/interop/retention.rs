//! Retention, on a local lake and on S3 (moto): with the clock moved five days on, the sweep
//! removes a free app's `dt=` partitions, hourly rollup buckets, survey responses and lake-file
//! records older than its plan's days, and leaves the newer ones, its daily buckets (kept for
//! ever here) and an enterprise app's data untouched.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use object_store::ObjectStore;
use reqwest::Method;
use serde_json::json;
use tributary::clock::Clock;
use tributary::config::{LakeSettings, Retention, Settings};

use crate::events::tracks;
use crate::helpers::*;
use crate::python::Moto;

const DAY_MICROS: i64 = 86_400_000_000;
const BUCKET: &str = "retention-lake";

/// Short limits for the free plan; the sweep every second.
fn short_retention(s: &mut Settings) {
    s.collector.max_file_age_ms = 100;
    s.retention.sweep_interval_secs = 1;
    s.plans.free.retention = Retention {
        lake_days: 3,
        hourly_rollup_days: 2,
        daily_rollup_days: 0,
        responses_days: 3,
        lake_file_records_days: 2,
    };
}

/// The app's lake files by `dt=` day, read through the object store as the server writes it.
async fn partitions(lake: &Arc<dyn ObjectStore>, app_id: &str) -> BTreeMap<String, usize> {
    let dir = tributary::collector::lake::app_dir("", app_id);
    let files: Vec<String> = lake
        .list(Some(&dir))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for f in files {
        let dt = f.split('/').find(|p| p.starts_with("dt=")).unwrap();
        *out.entry(dt.to_owned()).or_default() += 1;
    }
    out
}

/// Polls `check` until it holds, for at most 30 s.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn dt(micros: i64) -> String {
    let t = chrono::DateTime::from_timestamp_micros(micros).unwrap();
    format!("dt={}", t.format("%Y-%m-%d"))
}

/// The hour series' events and the totals of day `micros`'s whole-day window.
async fn day_traffic(app: &TestApp, key: &str, micros: i64) -> (u64, u64) {
    let day = chrono::DateTime::from_timestamp_micros(micros)
        .unwrap()
        .format("%Y-%m-%d");
    let query = format!("?interval=hour&from={day}T00:00:00Z&to={day}T23:00:00Z");
    let a = app
        .api(
            key,
            Method::GET,
            &format!("/api/v1/analytics/traffic{query}"),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let series: u64 = a.data()["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["events"].as_u64().unwrap())
        .sum();
    (series, a.data()["totals"]["events"].as_u64().unwrap())
}

/// A free app with an active survey answered by `anonymous_id`; returns (appId, integration
/// key, key reading traffic and responses, survey id).
async fn free_app_with_survey(app: &TestApp) -> (String, String, String, String) {
    let (id, ik) = app.create_app("free").await;
    let perms = ["analytics:read", "surveys:read", "responses:read"];
    let key = app.create_key(&id, &perms).await.1;
    let body = json!({"title": "NPS", "type": "nps", "targeting": {"percentage": 100},
        "questions": [{"id": "score", "text": "How likely?", "type": "scale"}]});
    let made = app
        .admin(Method::POST, &format!("/apps/{id}/surveys"), Some(body))
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let survey = made.data()["id"].as_str().unwrap().to_owned();
    let moved = app
        .admin(
            Method::POST,
            &format!("/apps/{id}/surveys/{survey}/transition"),
            Some(json!({"status": "active"})),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    (id, ik, key, survey)
}

async fn respond(app: &TestApp, ik: &str, survey: &str, visitor: &str) {
    let body =
        json!({"anonymousId": anon(visitor), "answers": [{"questionId": "score", "value": 9}]});
    let a = app
        .send(
            Method::POST,
            &format!("/api/w/surveys/{survey}/responses"),
            &[("x-app-key", ik)],
            Some(body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
}

async fn responders(app: &TestApp, key: &str, survey: &str) -> Vec<String> {
    let path = format!("/api/v1/surveys/{survey}/responses");
    let a = app.api(key, Method::GET, &path, None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let mut ids: Vec<String> = a
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["anonymousId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

async fn metric(app: &TestApp, kind: &str) -> u64 {
    let answer = reqwest::get(format!("{}/metrics", app.base)).await;
    let text = answer.unwrap().text().await.unwrap();
    let name = format!("tributary_collector_retention_removed_total{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&name))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// The scenario on the lake `settings` names.
async fn sweep_scenario(lake_settings: impl Fn(&mut LakeSettings) + Send + 'static) {
    let app = spawn_app_with(|s| {
        short_retention(s);
        lake_settings(&mut s.lake);
    });
    let mut lake = test_settings(&app.data_dir).lake;
    lake_settings(&mut lake);
    let lake = tributary::collector::lake::open(&lake, &app.data_dir.join("lake")).unwrap();
    let (a, a_ik, a_key, survey) = free_app_with_survey(&app).await;
    let (b, b_ik) = app.create_app("enterprise").await;
    let b_key = app.create_key(&b, &["analytics:read"]).await.1;
    let day0 = app.clock.now_micros();
    for (ik, prefix) in [(&a_ik, "a0_"), (&b_ik, "b0_")] {
        let sent = app.collect(ik, tracks(prefix, 6)).await;
        assert_eq!(sent.status, 200, "{}", sent.body);
    }
    respond(&app, &a_ik, &survey, "early").await;
    until("day 0's files in the lake", || async {
        partitions(&lake, &a).await.contains_key(&dt(day0))
            && partitions(&lake, &b).await.contains_key(&dt(day0))
            && day_traffic(&app, &a_key, day0).await == (6, 6)
    })
    .await;
    let a_day0_files = partitions(&lake, &a).await[&dt(day0)];

    app.clock.advance(5 * DAY_MICROS);
    let day5 = app.clock.now_micros();
    let sent = app.collect(&a_ik, tracks("a5_", 4)).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    respond(&app, &a_ik, &survey, "late").await;
    until("the sweep of day 0", || async {
        let parts = partitions(&lake, &a).await;
        !parts.contains_key(&dt(day0)) && parts.contains_key(&dt(day5))
    })
    .await;

    // The free app: day 0 gone from the lake, its hours and the early response; day 5, the
    // daily bucket of day 0 (kept for ever) and the late response stay.
    assert_eq!(
        partitions(&lake, &a).await.keys().collect::<Vec<_>>(),
        [&dt(day5)]
    );
    until("day 0's hours swept", || async {
        day_traffic(&app, &a_key, day0).await == (0, 6)
    })
    .await;
    until("day 5's events counted", || async {
        day_traffic(&app, &a_key, day5).await.0 == 4
    })
    .await;
    assert_eq!(responders(&app, &a_key, &survey).await, [anon("late")]);
    let on_disk = app
        .data_dir
        .join(format!("lake/events/app_id={a}/{}", dt(day0)));
    assert!(!on_disk.exists(), "a local lake drops the directory too");
    // The enterprise app keeps everything.
    assert_eq!(
        partitions(&lake, &b).await.keys().collect::<Vec<_>>(),
        [&dt(day0)]
    );
    assert_eq!(day_traffic(&app, &b_key, day0).await, (6, 6));
    // What went is counted.
    assert_eq!(metric(&app, "lake_partitions").await, 1);
    assert_eq!(metric(&app, "lake_files").await, a_day0_files as u64);
    assert!(metric(&app, "hourly_buckets").await >= 1);
    assert_eq!(metric(&app, "responses").await, 1);
    assert_eq!(metric(&app, "daily_buckets").await, 0);
    assert!(metric(&app, "lake_file_records").await >= 1);
}

#[tokio::test]
async fn the_sweep_removes_what_the_plan_keeps_no_longer_from_a_local_lake() {
    sweep_scenario(|_| {}).await;
}

#[tokio::test]
async fn the_sweep_removes_what_the_plan_keeps_no_longer_from_s3() {
    let moto = Moto::start(BUCKET).await;
    let endpoint = moto.endpoint.clone();
    sweep_scenario(move |lake| crate::python::on_s3(lake, &endpoint, BUCKET)).await;
}
