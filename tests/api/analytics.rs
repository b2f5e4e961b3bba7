//! `GET /api/v1/analytics/traffic`: the rollups the shard writers keep, compared with the
//! traffic sent and with the lake, across a clean restart and `kill -9`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::binary::{start as start_binary, Rng};
use crate::collector::batch;
use crate::helpers::*;
use crate::lake;

fn page(id: &str, anon: &str, path: &str) -> Value {
    json!({"type": "page", "anonymousId": anon, "messageId": id,
           "timestamp": chrono::Utc::now().to_rfc3339(),
           "context": {"page": {"url": format!("https://shop.example{path}"), "path": path}}})
}

fn track(id: &str, anon: &str, name: &str) -> Value {
    json!({"type": "track", "event": name, "anonymousId": anon, "messageId": id})
}

fn identify(id: &str, anon: &str, user: &str) -> Value {
    json!({"type": "identify", "userId": user, "anonymousId": anon, "messageId": id})
}

/// What the rollups must show for a set of events: counts per type, distinct visitors,
/// identified visitors (anonymousIds seen with a userId), top pages and events.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    by_type: BTreeMap<String, u64>,
    visitors: BTreeSet<String>,
    identified: BTreeSet<String>,
    pages: BTreeMap<String, u64>,
    events: BTreeMap<String, u64>,
}

impl Expected {
    fn of(events: &[Value]) -> Expected {
        let mut x = Expected::default();
        let users: BTreeSet<String> = events
            .iter()
            .filter(|e| e["type"] == "identify")
            .map(|e| e["anonymousId"].as_str().unwrap().to_owned())
            .collect();
        for e in events {
            let kind = e["type"].as_str().unwrap().to_owned();
            let anon = e["anonymousId"].as_str().unwrap().to_owned();
            match kind.as_str() {
                "page" => {
                    *x.pages
                        .entry(e["context"]["page"]["path"].as_str().unwrap().into())
                        .or_default() += 1
                }
                "track" => {
                    *x.events
                        .entry(e["event"].as_str().unwrap().into())
                        .or_default() += 1
                }
                _ => {}
            }
            *x.by_type.entry(kind).or_default() += 1;
            if users.contains(&anon) {
                x.identified.insert(anon.clone());
            }
            x.visitors.insert(anon);
        }
        x
    }

    fn total(&self) -> u64 {
        self.by_type.values().sum()
    }
}

/// The top `n` of counts, by count then name, as the API lists them.
fn top(counts: &BTreeMap<String, u64>, key: &str) -> Value {
    let mut all: Vec<(&String, &u64)> = counts.iter().collect();
    all.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    all.into_iter()
        .take(10)
        .map(|(k, c)| json!({key: k, "count": c}))
        .collect()
}

/// Known traffic of one app: 12 visitors, 3 of them identified first, pages and events with a
/// skewed spread.
fn traffic_of(prefix: &str, visitors: usize) -> (Vec<Value>, Vec<Value>) {
    let anons: Vec<String> = (0..visitors)
        .map(|v| anon(&format!("{prefix}{v}")))
        .collect();
    let ids: Vec<Value> = (0..3.min(visitors))
        .map(|v| identify(&format!("msg_{prefix}_id{v}"), &anons[v], &format!("u{v}")))
        .collect();
    let mut rest = Vec::new();
    for (v, a) in anons.iter().enumerate() {
        for j in 0..(v % 4 + 1) {
            let path = format!("/{prefix}/p{}", (v + j) % 6);
            rest.push(page(&format!("msg_{prefix}_p{v}_{j}"), a, &path));
        }
        if v % 3 == 0 {
            rest.push(track(&format!("msg_{prefix}_s{v}"), a, "Signed Up"));
        }
        if v % 2 == 0 {
            rest.push(track(&format!("msg_{prefix}_c{v}"), a, "Clicked"));
        }
    }
    (ids, rest)
}

async fn traffic(app: &TestApp, key: &str, query: &str) -> Answer {
    app.api(
        key,
        Method::GET,
        &format!("/api/v1/analytics/traffic{query}"),
        None,
    )
    .await
}

/// Polls until the rollups hold `events` events (flushes are asynchronous), then returns the
/// answer.
async fn settled(app: &TestApp, key: &str, query: &str, events: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = traffic(app, key, query).await;
        assert_eq!(a.status, 200, "{}", a.body);
        if a.data()["totals"]["events"] == events {
            return a.data().clone();
        }
        assert!(
            Instant::now() < deadline,
            "rollups never reached {events} events: {}",
            a.data()["totals"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn assert_matches(data: &Value, x: &Expected) {
    let sum = |f: &dyn Fn(&Value) -> &Value| -> u64 {
        data["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| f(p).as_u64().unwrap())
            .sum()
    };
    assert_eq!(data["totals"]["events"], x.total());
    assert_eq!(sum(&|p| &p["events"]), x.total());
    for t in ["page", "track", "identify", "group"] {
        let want = x.by_type.get(t).copied().unwrap_or(0);
        assert_eq!(sum(&|p| &p["byType"][t]), want, "{t} events");
    }
    assert_eq!(
        data["totals"]["visitors"],
        x.visitors.len(),
        "few visitors are counted exactly"
    );
    assert_eq!(data["totals"]["identifiedVisitors"], x.identified.len());
    assert_eq!(data["topPages"], top(&x.pages, "path"));
    assert_eq!(data["topEvents"], top(&x.events, "event"));
}

#[tokio::test]
async fn traffic_equals_what_was_sent_per_app_in_hours_and_days_and_survives_a_restart() {
    let app = spawn_app_with(|s| s.collector.max_file_age_ms = 100);
    let (a_id, a_ik) = app.create_app("pro").await;
    let (b_id, b_ik) = app.create_app("pro").await;
    let (_, a_key) = app.create_key(&a_id, &["analytics:read"]).await;
    let (_, b_key) = app.create_key(&b_id, &["analytics:read"]).await;
    let (ids, rest) = traffic_of("a", 12);
    for events in [ids.clone(), rest.clone()] {
        let r = app.collect(&a_ik, batch(events.clone())).await;
        assert_eq!(r.counts(), (events.len() as u64, 0, 0), "{}", r.body);
    }
    let (b_ids, b_rest) = traffic_of("b", 2);
    let b_events: Vec<Value> = b_ids.into_iter().chain(b_rest).collect();
    assert_eq!(
        app.collect(&b_ik, batch(b_events.clone())).await.status,
        200
    );
    // A retry of a whole batch lands once in the lake, and so in the rollups.
    assert_eq!(
        app.collect(&a_ik, batch(rest.clone())).await.counts().1,
        rest.len() as u64
    );
    let a_all: Vec<Value> = ids.into_iter().chain(rest).collect();
    let (xa, xb) = (Expected::of(&a_all), Expected::of(&b_events));

    let data = settled(&app, &a_key, "", xa.total()).await;
    assert_eq!(data["interval"], "hour");
    assert_eq!(data["series"].as_array().unwrap().len(), 24);
    assert_matches(&data, &xa);
    let b = settled(&app, &b_key, "", xb.total()).await;
    assert_matches(&b, &xb);
    assert!(b["topPages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["path"].as_str().unwrap().starts_with("/b/")));

    let yesterday = (chrono::Utc::now() - chrono::Duration::days(1)).format("%Y-%m-%d");
    let days = format!("?interval=day&from={yesterday}");
    let data = settled(&app, &a_key, &days, xa.total()).await;
    assert_eq!(data["series"].as_array().unwrap().len(), 2);
    assert_eq!(data["from"], format!("{yesterday}T00:00:00.000Z"));
    assert_matches(&data, &xa);

    let app = app.restart().await;
    assert_matches(&settled(&app, &a_key, "", xa.total()).await, &xa);
    assert_matches(&settled(&app, &a_key, &days, xa.total()).await, &xa);
    assert_matches(&settled(&app, &b_key, "", xb.total()).await, &xb);
}

/// An event counts from its 200, long before its file is written (default settings: files
/// close after a minute), refused and repeated events never; once the files are written the
/// rollups equal the lake, and no answer on the way counts a row twice or misses one.
#[tokio::test]
async fn traffic_counts_an_event_within_5_s_of_its_200_and_equals_the_lake_once_written() {
    let app = spawn_app();
    let (id, ik) = app.create_app("pro").await;
    let (_, key) = app.create_key(&id, &["analytics:read"]).await;
    let (ids, rest) = traffic_of("l", 12);
    let all: Vec<Value> = ids.into_iter().chain(rest).collect();
    let mut sent = all.clone();
    sent.push(
        json!({"type": "page", "anonymousId": anon("x"), "messageId": "msg_refused",
                     "properties": {"blob": "y".repeat(33 * 1024)}}),
    );
    let r = app.collect(&ik, batch(sent)).await;
    assert_eq!(r.counts(), (all.len() as u64, 0, 1), "{}", r.body);
    let answered = Instant::now();
    let x = Expected::of(&all);
    loop {
        let a = traffic(&app, &key, "").await;
        if a.data()["totals"]["events"] == x.total() {
            assert_matches(a.data(), &x);
            break;
        }
        assert!(
            answered.elapsed() < Duration::from_secs(5),
            "not counted within 5 s of the 200: {}",
            a.data()["totals"]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lake_dir = app.data_dir.join("lake");
    assert!(
        lake::read_local(&lake_dir).rows.is_empty(),
        "counted before any file is written"
    );
    // A retry of the batch is all duplicates: counted nowhere.
    let again = app.collect(&ik, batch(all.clone())).await;
    assert_eq!(again.counts(), (0, all.len() as u64, 0), "{}", again.body);
    assert_matches(traffic(&app, &key, "").await.data(), &x);
    // The files age out on the clock: from live to stored, each row once at every moment.
    app.clock.advance(61_000_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    let view = loop {
        let a = traffic(&app, &key, "").await;
        assert_eq!(a.data()["totals"]["events"], x.total(), "every row once");
        let view = lake::read_local(&lake_dir);
        if view.rows.len() == all.len() {
            break view;
        }
        assert!(Instant::now() < deadline, "the files were never written");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let rows: Vec<Value> = view.rows.iter().map(as_sent).collect();
    assert_matches(traffic(&app, &key, "").await.data(), &Expected::of(&rows));
}

/// A lake row as the event that was sent (what `Expected::of` reads).
fn as_sent(r: &serde_json::Map<String, Value>) -> Value {
    let mut e = json!({"type": r["type"], "anonymousId": r["anonymous_id"], "event": r["event"]});
    e["context"] = json!({"page": {"path": r["page_path"]}});
    e
}

#[tokio::test]
async fn traffic_needs_analytics_read_and_rejects_bad_windows() {
    let app = spawn_app();
    let (id, _) = app.create_app("free").await;
    let (_, key) = app.create_key(&id, &["analytics:read"]).await;
    let (_, other) = app.create_key(&id, &["profiles:read"]).await;
    traffic(&app, "tk_bad_bad", "")
        .await
        .assert_error(401, "UNAUTHORIZED");
    let no = traffic(&app, &other, "").await;
    no.assert_error(403, "FORBIDDEN");
    assert_eq!(no.fields(), ["permission"]);
    let empty = traffic(&app, &key, "?interval=day").await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert_eq!(
        empty.data()["totals"],
        json!({"events": 0, "visitors": 0, "identifiedVisitors": 0})
    );
    assert_eq!(empty.data()["topPages"], json!([]));
    #[rustfmt::skip]
    let bad = [
        ("?from=yesterday", "from", "not a date"),
        ("?to=2026-02-30", "to", "no such day"),
        ("?interval=week", "interval", "unknown interval"),
        ("?from=2026-11-02&to=2026-11-01", "from", "from after to"),
        ("?from=2026-01-01&to=2026-06-01&interval=day", "to", "more than 92 days"),
        ("?limit=3", "limit", "unknown parameter"),
    ];
    for (query, field, why) in bad {
        let a = traffic(&app, &key, query).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field], "{why}: {}", a.body);
    }
}

/// Page views and events of 30 visitors, by a seeded generator.
fn load(rng: &mut Rng, batch_no: u64) -> Vec<Value> {
    (0..10)
        .map(|i| {
            let id = format!("msg_{batch_no}_{i}");
            let a = anon(&format!("k{}", rng.next(30)));
            match rng.next(4) {
                0 => track(&id, &a, &format!("E{}", rng.next(3))),
                _ => {
                    // Skewed: low page numbers are more frequent.
                    let spread = rng.next(12) + 1;
                    page(&id, &a, &format!("/k{}", rng.next(spread)))
                }
            }
        })
        .collect()
}

#[tokio::test]
async fn after_kill_9_at_random_moments_the_rollups_equal_the_lake() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("rollup crash test seed {seed}");
    let mut rng = Rng(seed);
    let started = chrono::Utc::now();
    let mut server = start_binary(tmp.path());
    let client = crate::helpers::test_client();
    let admin = |path: String, body: Value| {
        client
            .post(path)
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
    };
    let created: Value = admin(
        format!("{}/admin/v1/apps", server.base),
        json!({"name": "r", "plan": "enterprise"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (app_id, ik) = (
        created["data"]["id"].as_str().unwrap().to_owned(),
        created["data"]["integrationKey"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    let key: Value = admin(
        format!("{}/admin/v1/apps/{app_id}/keys", server.base),
        json!({"name": "k", "permissions": ["analytics:read"]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let key = key["data"]["key"].as_str().unwrap().to_owned();
    for round in 0..3u64 {
        let stop_at = Instant::now() + Duration::from_millis(300 + rng.next(600));
        let (client, base, ik) = (client.clone(), server.base.clone(), ik.clone());
        let mut r = Rng(seed ^ (round + 1));
        let sender = tokio::spawn(async move {
            for b in 0.. {
                let events = batch(load(&mut r, round * 1_000_000 + b));
                let sent = client
                    .post(format!("{base}/api/w/analytics/collect"))
                    .header("x-app-key", &ik)
                    .json(&events)
                    .send()
                    .await;
                match sent {
                    Ok(a) => assert!(matches!(a.status().as_u16(), 200 | 503), "{}", a.status()),
                    Err(_) => break, // the server is gone
                }
            }
        });
        tokio::time::sleep_until(stop_at.into()).await;
        server.kill_9();
        sender.await.unwrap();
        server = start_binary(tmp.path());
    }
    // A clean stop puts everything in the lake; a last start serves the rollups over it.
    server.terminate().await;
    let view = lake::read_local(&tmp.path().join("lake"));
    let mut server = start_binary(tmp.path());
    let window = format!(
        "?from={}&to={}",
        (started - chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        (chrono::Utc::now() + chrono::Duration::hours(1))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    let a: Value = client
        .get(format!("{}/api/v1/analytics/traffic{window}", server.base))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows: Vec<Value> = view.rows.iter().map(as_sent).collect();
    assert!(
        rows.len() >= 100,
        "the load was too small: {} rows",
        rows.len()
    );
    assert_matches(&a["data"], &Expected::of(&rows));
    server.terminate().await;
}
