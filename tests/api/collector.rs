//! `POST /api/w/analytics/collect`, end to end, with the lake read back by the `parquet` crate
//! (DuckDB, Spark and S3 are in the `interop` tests).

use std::io::Write;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::lake;

pub use crate::events::*;

/// The Arrow type of the lake's timestamp columns.
const UTC_MICROS: &str = r#"Timestamp(µs, "UTC")"#;

#[tokio::test]
async fn accepted_events_land_in_the_lake_once_with_every_column() {
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let mut sent = Vec::new();
    for b in 0..5 {
        let events: Vec<Value> = (0..10).map(|i| track(&format!("{b}_{i}"))).collect();
        let a = app.collect(&ik, batch(events)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.data()["accepted"], 10);
        sent.extend((0..10).map(|i| format!("msg_{b}_{i}")));
    }
    // A client retry of a whole batch lands once.
    let retry: Vec<Value> = (0..10).map(|i| track(&format!("0_{i}"))).collect();
    let a = app.collect(&ik, batch(retry)).await;
    assert_eq!(a.counts(), (0, 10, 0));

    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    let mut ids = view.message_ids();
    ids.sort();
    sent.sort();
    assert_eq!(ids, sent, "every accepted event exactly once");
    assert_eq!(view.types["timestamp"], UTC_MICROS);
    assert_eq!(view.types["received_at"], UTC_MICROS);
    let logical = view.timestamp_logical.clone().unwrap();
    assert!(
        logical.contains("MICROS") && logical.contains("is_adjusted_to_u_t_c: true"),
        "{logical}"
    );
    let row = view.row("msg_1_3");
    assert_eq!(row["app_id"], json!(app_id));
    assert_eq!(row["valid_properties"], json!(true));
    let props: Value = serde_json::from_str(row["properties"].as_str().unwrap()).unwrap();
    assert_eq!(
        props,
        json!({"plan": "pro", "seats": 3, "nested": {"a": [1, 2]}})
    );
    assert_eq!(row["page_path"], "/pricing");
    assert_eq!(row["page_referrer"], "");
    assert_eq!(
        (row["screen_width"].as_i64(), row["screen_height"].as_i64()),
        (Some(1440), Some(900))
    );
    assert_eq!(
        (row["locale"].as_str(), row["timezone"].as_str()),
        (Some("en-US"), Some("Europe/Paris"))
    );
    assert_eq!(row["ip"], "127.0.0.0", "the default ip_policy truncates");
    let context: Value = serde_json::from_str(row["context"].as_str().unwrap()).unwrap();
    assert_eq!(
        context,
        json!({"library": {"name": "tributary.js", "version": "1.0.0"}})
    );
    assert!(
        view.files
            .iter()
            .all(|f| f.starts_with(&format!("events/app_id={app_id}/dt="))),
        "{:?}",
        view.files
    );
    let received =
        chrono::DateTime::from_timestamp_micros(row["received_at"].as_i64().unwrap()).unwrap();
    assert_eq!(row["dt"], received.format("%Y-%m-%d").to_string());
}

#[tokio::test]
async fn a_beacon_sends_text_plain_with_the_key_in_the_query_or_the_body() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    let body = serde_json::to_vec(&batch(vec![track("b1")])).unwrap();
    let a = app
        .raw(
            Method::POST,
            &format!("/api/w/analytics/collect?appKey={ik}"),
            &[("content-type", "text/plain;charset=UTF-8")],
            body,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data()["accepted"], 1);
    let mut with_key = batch(vec![track("b2")]);
    with_key["writeKey"] = json!(ik);
    let a = app
        .raw(
            Method::POST,
            "/api/w/analytics/collect",
            &[("content-type", "text/plain")],
            serde_json::to_vec(&with_key).unwrap(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    // A bad key anywhere is 401.
    app.raw(
        Method::POST,
        "/api/w/analytics/collect?appKey=ik_nope",
        &[("content-type", "text/plain")],
        b"{}".to_vec(),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    app.collect("ik_bad_key", batch(vec![track("x")]))
        .await
        .assert_error(401, "UNAUTHORIZED");
    let mut no_key = batch(vec![track("b3")]);
    no_key["writeKey"] = json!("tk_api_keys_are_not_integration_keys");
    app.raw(
        Method::POST,
        "/api/w/analytics/collect",
        &[("content-type", "text/plain")],
        serde_json::to_vec(&no_key).unwrap(),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn cors_preflight_is_answered_for_any_origin() {
    let app = spawn_app();
    let res = app
        .client
        .request(
            Method::OPTIONS,
            format!("{}/api/w/analytics/collect", app.base),
        )
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-app-key, content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let h = |n: &str| {
        res.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(h("access-control-allow-origin"), "https://shop.example");
    assert_eq!(
        h("access-control-allow-methods"),
        "POST, OPTIONS",
        "only what the path answers"
    );
    let allowed = h("access-control-allow-headers").to_lowercase();
    assert!(
        allowed.contains("x-app-key") && allowed.contains("content-type"),
        "{allowed}"
    );
    // Answers, errors included, carry the origin too so the tracker can read them.
    let a = app
        .send(
            Method::POST,
            "/api/w/analytics/collect",
            &[("origin", "https://shop.example")],
            Some(json!({})),
        )
        .await;
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://shop.example")
    );
}

#[tokio::test]
async fn gzip_bodies_are_accepted_and_capped_once_decompressed() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    let gz = |v: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(v).unwrap();
        e.finish().unwrap()
    };
    let body = gz(&serde_json::to_vec(&tracks("g", 10)).unwrap());
    let a = app
        .raw(
            Method::POST,
            "/api/w/analytics/collect",
            &[
                ("x-app-key", &ik),
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            body,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data()["accepted"], 10);
    // 600 KiB of JSON that gzips to a few KiB: refused once inflated.
    let mut bomb = batch(vec![track("big")]);
    bomb["padding"] = json!("x".repeat(600 * 1024));
    let body = gz(&serde_json::to_vec(&bomb).unwrap());
    assert!(body.len() < 20_000);
    app.raw(
        Method::POST,
        "/api/w/analytics/collect",
        &[
            ("x-app-key", &ik),
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
        body,
    )
    .await
    .assert_error(413, "PAYLOAD_TOO_LARGE");
    app.raw(
        Method::POST,
        "/api/w/analytics/collect",
        &[
            ("x-app-key", &ik),
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
        b"not gzip".to_vec(),
    )
    .await
    .assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn oversized_batches_and_events_are_413_and_the_rest_of_a_batch_is_kept() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    let big = |id: &str| {
        let mut e = track(id);
        e["properties"]["blob"] = json!("y".repeat(33 * 1024));
        e
    };
    let too_big: Vec<Value> = (0..20).map(|i| big(&format!("tb{i}"))).collect();
    app.collect(&ik, batch(too_big))
        .await
        .assert_error(413, "PAYLOAD_TOO_LARGE");
    app.collect(&ik, big("single"))
        .await
        .assert_error(413, "PAYLOAD_TOO_LARGE");
    let mixed = app
        .collect(&ik, batch(vec![track("ok1"), big("huge"), track("ok2")]))
        .await;
    assert_eq!(mixed.status, 200, "{}", mixed.body);
    assert_eq!(mixed.counts(), (2, 0, 1));
    assert_eq!(mixed.data()["errors"][0]["index"], 1);
}

#[tokio::test]
async fn a_batch_context_merged_into_its_events_is_bounded_by_the_batch_limit() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    // 100 KB of batch context merged into 20 events would be 2 MB: the events whose merged
    // context no longer fits within the batch limit (500 KiB) are refused for their size.
    let mut body = tracks("ctx", 20);
    body["context"] = json!({"campaign": {"name": "c".repeat(100_000)}});
    let a = app.collect(&ik, body).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let (accepted, duplicates, rejected) = a.counts();
    assert!((1..=5).contains(&accepted), "{}", a.body);
    assert_eq!((duplicates, accepted + rejected), (0, 20));
    let first = &a.data()["errors"][0];
    assert_eq!(first["field"], "context", "{}", a.body);
    assert!(first["message"].as_str().unwrap().starts_with("too large"));
}

#[tokio::test]
async fn invalid_events_are_rejected_one_by_one_with_their_index_and_field() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    let mut bad_ts = track("t");
    bad_ts["timestamp"] = json!("yesterday");
    let mut bad_ctx = track("c");
    bad_ctx["context"]["screen"]["width"] = json!("wide");
    let events = vec![
        track("good1"),
        json!({"type": "track", "anonymousId": ANON, "messageId": "msg_noname"}),
        json!({"type": "page", "anonymousId": "not\na-visitor"}),
        json!({"type": "page", "anonymousId": ANON, "messageId": ""}),
        json!({"type": "page", "anonymousId": ANON, "sessionId": "s1"}),
        bad_ts,
        bad_ctx,
        json!({"type": "dance", "anonymousId": ANON}),
        json!({"type": "identify", "anonymousId": ANON}),
        json!({"type": "group", "userId": "u1"}),
        json!("not an object"),
        track("good2"),
    ];
    let a = app.collect(&ik, batch(events)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.counts(), (2, 0, 10));
    let got: Vec<(u64, String)> = a.data()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(u64, String)> = [
        (1, "event"),
        (2, "anonymousId"),
        (3, "messageId"),
        (4, "sessionId"),
        (5, "timestamp"),
        (6, "context.screen.width"),
        (7, "type"),
        (8, "userId"),
        (9, "groupId"),
        (10, "body"),
    ]
    .into_iter()
    .map(|(i, f)| (i, f.to_owned()))
    .collect();
    assert_eq!(got, expected);
    // Nothing valid left: 400, with the reasons as details.
    let none = app
        .collect(
            &ik,
            batch(vec![json!({"type": "dance", "anonymousId": ANON})]),
        )
        .await;
    none.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(none.fields(), ["batch[0].type"]);
    app.raw(
        Method::POST,
        "/api/w/analytics/collect",
        &[("x-app-key", &ik), ("content-type", "application/json")],
        b"{\"batch\": [".to_vec(),
    )
    .await
    .assert_error(400, "VALIDATION_ERROR");
    app.raw(
        Method::POST,
        "/api/w/analytics/collect",
        &[("x-app-key", &ik), ("content-type", "application/xml")],
        b"<a/>".to_vec(),
    )
    .await
    .assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn a_client_clock_one_hour_ahead_is_corrected() {
    let mut app = spawn_app_with(slow_files);
    let (_, ik) = app.create_app("free").await;
    let skew = chrono::Duration::hours(1);
    let client_now = chrono::Utc::now() + skew;
    let mut e = track("skewed");
    e["timestamp"] = json!((client_now - chrono::Duration::seconds(30)).to_rfc3339());
    let a = app
        .collect(
            &ik,
            json!({"batch": [e], "sentAt": client_now.to_rfc3339()}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    let row = view.row("msg_skewed");
    let (ts, received, original) = (
        row["timestamp"].as_i64().unwrap(),
        row["received_at"].as_i64().unwrap(),
        row["original_timestamp"].as_i64().unwrap(),
    );
    assert_eq!(
        received - ts,
        30_000_000,
        "timestamp = receivedAt - (sentAt - originalTimestamp)"
    );
    assert!(
        (original - received - 3_570_000_000).abs() < 60_000_000,
        "the client's own timestamp is kept"
    );
    assert!(row["sent_at"].as_i64().is_some());
}

#[tokio::test]
async fn identify_links_later_events_to_the_user_and_merges_the_profile() {
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["profiles:read"]).await;
    let before = track("before");
    let identify = json!({"type": "identify", "userId": "user_42", "anonymousId": ANON, "messageId": "msg_id1",
                          "traits": {"email": "ada@example.com", "plan": "free"}});
    let mut after = track("after");
    after["event"] = json!("Upgraded");
    let a = app.collect(&ik, batch(vec![before, identify])).await;
    assert_eq!(a.data()["accepted"], 2);
    let a = app.collect(&ik, batch(vec![after])).await;
    assert_eq!(a.data()["accepted"], 1);
    // A second device identifies as the same user; a group call adds the company.
    let identify2 = json!({"type": "identify", "userId": "user_42", "anonymousId": ANON2, "messageId": "msg_id2",
                           "traits": {"plan": "pro", "name": "Ada"}});
    let group = json!({"type": "group", "userId": "user_42", "anonymousId": ANON2, "groupId": "acme", "messageId": "msg_g1",
                       "traits": {"name": "Acme Inc"}});
    assert_eq!(
        app.collect(&ik, batch(vec![identify2, group])).await.data()["accepted"],
        2
    );

    let p = app
        .api(&key, Method::GET, "/api/v1/profiles/user_42", None)
        .await;
    assert_eq!(p.status, 200, "{}", p.body);
    let d = p.data();
    assert_eq!(
        d["traits"],
        json!({"email": "ada@example.com", "plan": "pro", "name": "Ada"})
    );
    assert_eq!(d["anonymousIds"], json!([ANON, ANON2]));
    assert_eq!(
        d["groups"],
        json!([{"groupId": "acme", "traits": {"name": "Acme Inc"}}])
    );
    assert!(d["firstSeen"].as_str().unwrap() <= d["lastSeen"].as_str().unwrap());
    app.api(&key, Method::GET, "/api/v1/profiles/nobody", None)
        .await
        .assert_error(404, "NOT_FOUND");
    let other_app_key = app.contacts_key("free").await;
    app.api(
        &other_app_key,
        Method::GET,
        "/api/v1/profiles/user_42",
        None,
    )
    .await
    .assert_error(403, "FORBIDDEN");

    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(
        view.row("msg_before")["user_id"],
        Value::Null,
        "events before identify stay anonymous"
    );
    assert_eq!(
        view.row("msg_after")["user_id"],
        "user_42",
        "later events carry the userId"
    );
    assert_eq!(view.row("msg_g1")["group_id"], "acme");
    let traits: Value =
        serde_json::from_str(view.row("msg_id1")["traits"].as_str().unwrap()).unwrap();
    assert_eq!(traits["email"], "ada@example.com");
}

#[tokio::test]
async fn the_monthly_event_quota_is_403_plan_limit_reached_once_nothing_is_left() {
    let app = spawn_app_with(|s| s.plans.free.events_per_month = 15);
    let (_, ik) = app.create_app("free").await;
    assert_eq!(app.collect(&ik, tracks("q", 10)).await.status, 200);
    let crossing = app
        .collect(
            &ik,
            batch((10..20).map(|i| track(&format!("q{i}"))).collect()),
        )
        .await;
    assert_eq!(crossing.counts(), (5, 0, 5), "{}", crossing.body);
    let over = app.collect(&ik, tracks("late", 3)).await;
    over.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        over.body["error"]["details"],
        json!([{"field": "events_per_month", "message": "limit 15, current 15"}])
    );
}

#[tokio::test]
async fn metrics_count_what_the_collector_did() {
    let mut app = spawn_app_with(|s| s.collector.max_file_rows = 5);
    let (_, ik) = app.create_app("free").await;
    app.collect(&ik, tracks("m", 10)).await;
    app.collect(&ik, batch(vec![track("m0"), json!({"type": "nope"})]))
        .await;
    let text = metrics_text(&app.client, &app.base).await;
    let sum = |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("tributary_collector_{name}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(sum("accepted_total"), 10.0);
    assert_eq!(sum("duplicates_total"), 1.0);
    assert_eq!(sum("rejected_total{reason=\"invalid_event\"}"), 1.0);
    assert!(sum("wal_fsync_seconds_count") >= 1.0 && sum("wal_bytes_total") > 0.0);
    assert!(sum("request_seconds_count") >= 2.0);
    assert!(text.ends_with("# EOF\n"), "OpenMetrics text");
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.rows.len(), 10);
}

#[tokio::test]
async fn a_retry_after_a_restart_is_still_a_duplicate() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    let events = || tracks("r", 10);
    assert_eq!(app.collect(&ik, events()).await.data()["accepted"], 10);
    // A clean restart moves the events to the lake and trims the WAL: only the dedupe files
    // remember them now.
    let mut app = app.restart().await;
    let again = app.collect(&ik, events()).await;
    assert_eq!(again.counts(), (0, 10, 0));
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.rows.len(), 10);
}

#[tokio::test]
async fn huge_batches_of_tiny_events_are_refused_and_echoed_errors_are_capped() {
    let app = spawn_app();
    let (_, ik) = app.create_app("free").await;
    let many: Vec<Value> = (0..2001).map(|_| json!({})).collect();
    app.collect(&ik, batch(many))
        .await
        .assert_error(413, "PAYLOAD_TOO_LARGE");
    let mut events: Vec<Value> = (0..150).map(|_| json!({"type": "nope"})).collect();
    events.push(track("one_good"));
    let a = app.collect(&ik, batch(events)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.counts(), (1, 0, 150));
    assert_eq!(a.data()["errors"].as_array().unwrap().len(), 100);
}

#[tokio::test]
async fn rotating_the_integration_key_revokes_the_old_one() {
    let app = spawn_app();
    let (app_id, old) = app.create_app("free").await;
    let r = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/integration-key"),
            None,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let new = r.data()["integrationKey"].as_str().unwrap().to_owned();
    app.collect(&old, batch(vec![track("rot1")]))
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_eq!(
        app.collect(&new, batch(vec![track("rot2")])).await.status,
        200
    );
    let got = app
        .admin(Method::GET, &format!("/apps/{app_id}"), None)
        .await;
    assert_eq!(got.data()["integrationKeyId"], r.data()["integrationKeyId"]);
    app.admin(
        Method::POST,
        "/apps/0123456789abcdef01234567/integration-key",
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}

/// The OpenMetrics text of `GET /metrics`.
pub async fn metrics_text(client: &reqwest::Client, base: &str) -> String {
    let answer = client.get(format!("{base}/metrics")).send().await.unwrap();
    answer.text().await.unwrap()
}

/// The release counters of `GET /metrics`, by thread kind.
async fn idle_releases(
    client: &reqwest::Client,
    base: &str,
) -> std::collections::HashMap<String, f64> {
    metrics_text(client, base)
        .await
        .lines()
        .filter_map(|l| l.strip_prefix("tributary_collector_idle_memory_releases_total{thread=\""))
        .filter_map(|l| {
            let (thread, rest) = l.split_once('"')?;
            Some((thread.to_owned(), rest.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

/// Polls until the release counters read `want` for each kind of thread (30 s at most).
async fn releases_reach(client: &reqwest::Client, base: &str, want: f64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let want: std::collections::HashMap<String, f64> =
        ["writer", "encoder", "stager", "uploader", "store", "http"]
            .into_iter()
            .map(|k| (k.to_owned(), want))
            .collect();
    loop {
        let now = idle_releases(client, base).await;
        if now == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "want {want:?} idle releases within 30 s, have {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn every_thread_gives_memory_back_once_per_quiet_period() {
    // Two of each: shard writers, their encoders, stagers and uploaders, store threads, HTTP
    // workers.
    let tmp = tempfile::tempdir().unwrap();
    let mut server = crate::binary::start_with(
        tmp.path(),
        &[
            ("TRIBUTARY__COLLECTOR__RELEASE_MEMORY_AFTER_IDLE_SECS", "3"),
            ("TRIBUTARY__STORAGE__STORE_THREADS", "2"),
            ("TRIBUTARY__SERVER__WORKERS", "2"),
            // Parts wait for their hour: no merge and upload a poll (3 s) after the batch, when
            // the threads release, which would start a second quiet period.
            ("TRIBUTARY__COLLECTOR__LAKE_FILE_MAX_WAIT_MS", "0"),
        ],
    );
    let client = crate::helpers::test_client();
    let key = server.create_app(&client, "idle").await;
    // Quiet since the start: each thread gives back what starting took, once.
    releases_reach(&client, &server.base, 2.0).await;
    let send = |label: &'static str| {
        client
            .post(format!("{}/api/w/analytics/collect", server.base))
            .header("x-app-key", &key)
            .json(&tracks(label, 10))
            .send()
    };
    assert_eq!(send("a").await.unwrap().status(), 200);
    // The batch (and its part, flushed 150 ms later) restart every idle clock.
    releases_reach(&client, &server.base, 4.0).await;
    // That it is once per quiet period, however long the quiet lasts, is the idle clock's rule,
    // tested with explicit instants in `memory.rs` (no waiting here): the next batch starts a
    // new period, and each thread gives back once more.
    assert_eq!(send("b").await.unwrap().status(), 200);
    releases_reach(&client, &server.base, 6.0).await;
    server.terminate().await;
}
