//! The traffic rollups against DuckDB over the lake: counts per type equal, visitors within 2%
//! of `count(distinct anonymous_id)`, the same top 10 pages and events; and the same after a
//! `kill -9` with rows still in the WAL and a restart; and counted from their 200, before any
//! file is written, without counting twice after a `kill -9` and the replay.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::{start_with, Rng, Server};
use crate::events::batch;
use crate::helpers::{anon, ADMIN_TOKEN};
use crate::python;

/// Files close at 500 rows or after a minute: a `kill -9` leaves rows in the WAL.
const ENV: [(&str, &str); 2] = [
    ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "500"),
    ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "60000"),
];

/// One visitor's events: some identify first, then one to four page views (40 paths, a
/// skewed spread) and maybe a track event (8 names).
pub fn visitor(rng: &mut Rng, app: &str, v: u64) -> Vec<Value> {
    let a = anon(&format!("{app}-{v}"));
    let mut out = Vec::new();
    let id = |k: &str| format!("msg_{app}_{v}_{k}");
    if v.is_multiple_of(7) {
        out.push(json!({"type": "identify", "userId": format!("u{v}"), "anonymousId": a, "messageId": id("i")}));
    }
    for j in 0..=rng.next(4) {
        let spread = rng.next(40) + 1;
        let path = format!("/{app}/p{}", rng.next(spread));
        out.push(
            json!({"type": "page", "anonymousId": a, "messageId": id(&format!("p{j}")),
            "context": {"page": {"path": path, "url": format!("https://shop.example{path}")}}}),
        );
    }
    if rng.next(2) == 0 {
        let spread = rng.next(8) + 1;
        out.push(json!({"type": "track", "event": format!("E{}", rng.next(spread)), "anonymousId": a, "messageId": id("t")}));
    }
    out
}

pub async fn post(client: &reqwest::Client, url: String, auth: (&str, &str), body: Value) -> Value {
    let r = client
        .post(url)
        .header(auth.0, auth.1)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.json().await.unwrap()
}

/// Sends the events of `visitors` in batches of about 100.
pub async fn send(client: &reqwest::Client, s: &Server, ik: &str, events: Vec<Value>) {
    for chunk in events.chunks(100) {
        let url = format!("{}/api/w/analytics/collect", s.base);
        let a = post(client, url, ("x-app-key", ik), batch(chunk.to_vec())).await;
        assert_eq!(a["data"]["accepted"], chunk.len(), "{a}");
    }
}

/// The rollups of the key's app over the last day and the next hour.
pub async fn traffic(client: &reqwest::Client, s: &Server, key: &str, interval: &str) -> Value {
    let now = chrono::Utc::now();
    let iso =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let q = format!(
        "?interval={interval}&from={}&to={}",
        iso(now - chrono::Duration::hours(23)),
        iso(now + chrono::Duration::hours(1))
    );
    let r = client
        .get(format!("{}/api/v1/analytics/traffic{q}", s.base))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json::<Value>().await.unwrap()["data"].clone()
}

pub fn compare(ours: &Value, duck: &Value, what: &str) {
    let series = ours["series"].as_array().unwrap();
    for t in ["page", "track", "identify", "group"] {
        let sum: u64 = series
            .iter()
            .map(|p| p["byType"][t].as_u64().unwrap())
            .sum();
        assert_eq!(
            sum,
            duck["byType"][t].as_u64().unwrap_or(0),
            "{what}: {t} events"
        );
    }
    assert_eq!(ours["totals"]["events"], duck["events"], "{what}: events");
    for k in ["visitors", "identifiedVisitors"] {
        let (est, exact) = (
            ours["totals"][k].as_f64().unwrap(),
            duck[k].as_f64().unwrap(),
        );
        assert!(
            (est - exact).abs() <= 0.02 * exact,
            "{what}: {k} {est} vs DuckDB's {exact}"
        );
    }
    let pairs = |list: &Value, name: &str| -> Value {
        list.as_array()
            .unwrap()
            .iter()
            .map(|x| json!([x[name], x["count"]]))
            .collect()
    };
    assert_eq!(
        pairs(&ours["topPages"], "path"),
        duck["topPages"],
        "{what}: top pages"
    );
    assert_eq!(
        pairs(&ours["topEvents"], "event"),
        duck["topEvents"],
        "{what}: top events"
    );
}

/// Polls until the rollups hold `events` events (the last flushes are asynchronous).
async fn settled(client: &reqwest::Client, s: &Server, key: &str, events: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = traffic(client, s, key, "hour").await;
        if &t["totals"]["events"] == events {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "rollups stuck at {}",
            t["totals"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The defaults: files close at 100 000 rows or after a minute.
const DEFAULT_FLUSH: [(&str, &str); 2] = [
    ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "100000"),
    ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "60000"),
];

/// Creates an app on the enterprise plan and a key that reads its traffic: (id, integration
/// key, key).
pub async fn app_with_key(
    client: &reqwest::Client,
    s: &Server,
    name: &str,
) -> (String, String, String) {
    let admin = ("authorization", &*format!("Bearer {ADMIN_TOKEN}"));
    let body = json!({"name": name, "plan": "enterprise"});
    let app = post(client, format!("{}/admin/v1/apps", s.base), admin, body).await;
    let id = app["data"]["id"].as_str().unwrap().to_owned();
    let body = json!({"name": "k", "permissions": ["analytics:read"]});
    let url = format!("{}/admin/v1/apps/{id}/keys", s.base);
    let key = post(client, url, admin, body).await;
    let ik = app["data"]["integrationKey"].as_str().unwrap().to_owned();
    (id, ik, key["data"]["key"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn events_count_from_their_200_and_after_kill_9_and_replay_equal_duckdb_once_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, lake) = (tmp.path(), tmp.path().join("lake"));
    let client = crate::helpers::test_client();
    let mut server = start_with(dir, &DEFAULT_FLUSH);
    let (id, ik, key) = app_with_key(&client, &server, "live").await;
    let mut rng = Rng(11);
    let events: Vec<Value> = (0..300)
        .flat_map(|v| visitor(&mut rng, "live", v))
        .collect();
    send(&client, &server, &ik, events.clone()).await;
    let answered = Instant::now();
    let total = json!(events.len());
    while traffic(&client, &server, &key, "hour").await["totals"]["events"] != total {
        assert!(
            answered.elapsed() < Duration::from_secs(5),
            "not counted within 5 s of the 200"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !lake.exists() || python::read_local(&lake).rows.is_empty(),
        "no file yet"
    );
    // Killed before any flush: the restart replays the WAL into the live rollups (once), and
    // writes the files.
    server.kill_9();
    let server = start_with(dir, &DEFAULT_FLUSH);
    let deadline = Instant::now() + Duration::from_secs(60);
    let duck = loop {
        let ours = traffic(&client, &server, &key, "hour").await;
        assert_eq!(
            ours["totals"]["events"], total,
            "each row once after the replay"
        );
        let duck = python::rollup_by_sql(&lake, &id);
        if duck["events"] == total {
            break duck;
        }
        assert!(
            Instant::now() < deadline,
            "the replayed files never reached the lake"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let what = "after kill -9, the replay and the files written";
    compare(&traffic(&client, &server, &key, "hour").await, &duck, what);
    compare(&traffic(&client, &server, &key, "day").await, &duck, what);
}

#[tokio::test]
async fn rollups_match_duckdb_over_the_lake_before_and_after_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, lake) = (tmp.path(), tmp.path().join("lake"));
    let client = crate::helpers::test_client();
    let mut server = start_with(dir, &ENV);
    let mut apps = Vec::new();
    for name in ["big", "small"] {
        apps.push(app_with_key(&client, &server, name).await);
    }
    // 3 000 visitors of the big app (past the sketch's exact range), 40 of the small one; half
    // of the traffic, a kill -9 with rows in the WAL, then the other half.
    let mut rng = Rng(7);
    let big: Vec<Value> = (0..3_000)
        .flat_map(|v| visitor(&mut rng, "big", v))
        .collect();
    let small: Vec<Value> = (0..40)
        .flat_map(|v| visitor(&mut rng, "small", v))
        .collect();
    let half = big.len() / 2;
    send(&client, &server, &apps[0].1, big[..half].to_vec()).await;
    send(&client, &server, &apps[1].1, small).await;
    server.kill_9();
    let mut server = start_with(dir, &ENV);
    send(&client, &server, &apps[0].1, big[half..].to_vec()).await;
    server.terminate().await;

    let duck: Vec<Value> = apps
        .iter()
        .map(|(id, _, _)| python::rollup_by_sql(&lake, id))
        .collect();
    assert_eq!(duck[0]["events"], big.len());
    for round in ["after a clean stop", "after kill -9 and a restart"] {
        let mut server = start_with(dir, &ENV);
        for ((_, _, key), d) in apps.iter().zip(&duck) {
            compare(
                &settled(&client, &server, key, &d["events"]).await,
                d,
                round,
            );
            let days = traffic(&client, &server, key, "day").await;
            compare(&days, d, round);
        }
        // Nothing new is in the WAL here; the kill only checks nothing is applied twice.
        server.kill_9();
    }
    assert!(Path::new(&lake).exists());
}
