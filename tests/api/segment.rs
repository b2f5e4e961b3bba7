//! Segment's HTTP tracking API (`/v1/batch`, `/v1/{type}`) as Segment's and RudderStack's SDKs
//! call it: Basic auth, gzip labelled as a form, the type from the path, the lake's new columns.
//! The real SDKs run against the server in `tests/interop/sdks.rs`.

use std::io::Write;

use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use crate::events::*;
use crate::helpers::*;
use crate::lake;

fn basic(key: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{key}:"));
    format!("Basic {token}")
}

fn gzip(body: &Value) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(body.to_string().as_bytes()).unwrap();
    z.finish().unwrap()
}

#[tokio::test]
async fn segment_paths_take_basic_auth_gzip_under_any_label_and_the_path_type() {
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let auth = basic(&ik);
    let now = chrono::Utc::now().to_rfc3339();
    // RudderStack's shape: Basic auth only, gzip labelled as a form, originalTimestamp.
    let body = json!({"batch": [
        {"type": "identify", "userId": "u1", "anonymousId": "anon-cookie-123", "traits": {"plan": "pro"},
         "messageId": "node-1", "originalTimestamp": now},
        {"type": "screen", "userId": "u1", "name": "Home", "messageId": "node-2", "originalTimestamp": now},
        {"type": "alias", "userId": "u1", "previousId": "anon-cookie-123", "messageId": "node-3"}
    ], "sentAt": now, "context": {"library": {"name": "analytics-node"}}});
    for (encoding, id) in [(None, "a"), (Some("gzip"), "b")] {
        let mut body = body.clone();
        for e in body["batch"].as_array_mut().unwrap() {
            e["messageId"] = json!(format!("{}{id}", e["messageId"].as_str().unwrap()));
        }
        let mut headers = vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/x-www-form-urlencoded"),
        ];
        headers.extend(encoding.map(|e| ("content-encoding", e)));
        let a = app
            .raw(Method::POST, "/v1/batch", &headers, gzip(&body))
            .await;
        assert_eq!(a.status, 200, "{encoding:?}: {}", a.body);
        assert_eq!(a.counts(), (3, 0, 0), "{}", a.body);
    }
    // One event per body, its type from the path, JSON under any content type.
    let single = [
        (
            "track",
            json!({"userId": "u1", "event": "Bought", "messageId": "one-track", "properties": {"price": 9}}),
        ),
        (
            "page",
            json!({"anonymousId": ANON, "name": "Pricing", "category": "Docs", "messageId": "one-page",
            "properties": {"url": "https://x.io/pricing", "path": "/pricing", "title": "Pricing", "referrer": ""}}),
        ),
        (
            "group",
            json!({"userId": "u1", "groupId": "g1", "traits": {"n": 1}, "messageId": "one-group"}),
        ),
    ];
    for (kind, event) in single {
        let a = app
            .raw(
                Method::POST,
                &format!("/v1/{kind}"),
                &[
                    ("authorization", &auth),
                    ("content-type", "application/octet-stream"),
                ],
                event.to_string().into_bytes(),
            )
            .await;
        assert_eq!(a.status, 200, "{kind}: {}", a.body);
        assert_eq!(a.counts(), (1, 0, 0), "{kind}");
    }
    // The same messageId again on the other path: a duplicate, as on the collector's own.
    let again = app
        .send(Method::POST, "/v1/batch", &[("authorization", &auth)],
            Some(json!({"batch": [{"type": "track", "userId": "u1", "event": "Bought", "messageId": "one-track"}]})))
        .await;
    assert_eq!(again.counts(), (0, 1, 0), "{}", again.body);
    // A type in the body that is not the path's refuses the event; an unknown type is 400.
    let wrong = app
        .send(
            Method::POST,
            "/v1/track",
            &[("authorization", &auth)],
            Some(json!({"type": "page", "userId": "u1"})),
        )
        .await;
    wrong.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(wrong.fields(), ["batch[0].type"]);
    app.send(
        Method::POST,
        "/v1/jump",
        &[("authorization", &auth)],
        Some(json!({"userId": "u"})),
    )
    .await
    .assert_error(400, "VALIDATION_ERROR");
    // Keys: a wrong Basic user is 401; the body's writeKey and ?appKey= work on these paths too.
    app.send(
        Method::POST,
        "/v1/track",
        &[("authorization", &basic("ik_nope"))],
        Some(json!({"userId": "u1", "event": "x"})),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    let a = app
        .send(
            Method::POST,
            "/v1/track",
            &[],
            Some(json!({"userId": "u1", "event": "x", "writeKey": ik})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let a = app
        .send(
            Method::POST,
            &format!("/v1/track?appKey={ik}"),
            &[],
            Some(json!({"userId": "u1", "event": "x"})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);

    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.rows.len(), 11);
    assert!(view.rows.iter().all(|r| r["app_id"] == json!(app_id)));
    let identify = view.row("node-1a");
    assert_eq!(identify["anonymous_id"], json!("anon-cookie-123"));
    assert_eq!(identify["traits"], json!(r#"{"plan":"pro"}"#));
    assert_eq!(
        identify["context"],
        json!(r#"{"library":{"name":"analytics-node"}}"#)
    );
    assert_eq!(
        identify["original_timestamp"].as_i64(),
        Some(
            chrono::DateTime::parse_from_rfc3339(&now)
                .unwrap()
                .timestamp_micros()
        )
    );
    assert_eq!(view.row("node-2b")["type"], json!("screen"));
    assert_eq!(view.row("node-2b")["name"], json!("Home"));
    assert_eq!(view.row("node-3a")["previous_id"], json!("anon-cookie-123"));
    let page = view.row("one-page");
    for (col, want) in [
        ("type", "page"),
        ("name", "Pricing"),
        ("category", "Docs"),
        ("page_path", "/pricing"),
        ("page_url", "https://x.io/pricing"),
        ("page_referrer", ""),
    ] {
        assert_eq!(page[col], json!(want), "{col}");
    }
    assert_eq!(view.row("one-track")["type"], json!("track"));
    assert_eq!(view.row("one-group")["group_id"], json!("g1"));
}

#[tokio::test]
async fn analytics_js_reads_its_settings_and_sends_on_its_short_paths() {
    let mut app = spawn_app_with(slow_files);
    let (_, ik) = app.create_app("free").await;
    let a = app
        .send(
            Method::GET,
            &format!("/v1/projects/{ik}/settings"),
            &[("origin", "https://shop.example")],
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let host = app.base.trim_start_matches("http://");
    let io = &a.body["integrations"]["Segment.io"];
    assert_eq!(io["apiKey"], json!(ik));
    assert_eq!(io["apiHost"], json!(format!("{host}/v1")));
    assert_eq!(io["protocol"], json!("http"));
    assert_eq!(io["deliveryStrategy"]["strategy"], json!("batching"));
    assert_eq!(
        a.body["metrics"]["sampleRate"],
        json!(0.0),
        "no telemetry to Segment"
    );
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://shop.example")
    );
    app.send(Method::GET, "/v1/projects/ik_nope/settings", &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    // analytics.js posts text/plain with the key in the body, one event per `/v1/<letter>`
    // (or a batch to `/v1/b`).
    for (path, event, id) in [
        (
            "t",
            json!({"event": "Clicked", "anonymousId": ANON}),
            "ajs-t",
        ),
        ("p", json!({"name": "Home", "anonymousId": ANON}), "ajs-p"),
        ("i", json!({"userId": "u1", "anonymousId": ANON}), "ajs-i"),
        ("s", json!({"name": "Home", "userId": "u1"}), "ajs-s"),
        ("g", json!({"groupId": "g1", "userId": "u1"}), "ajs-g"),
        ("a", json!({"previousId": "p1", "userId": "u1"}), "ajs-a"),
    ] {
        let mut event = event;
        event["messageId"] = json!(id);
        event["writeKey"] = json!(ik);
        let a = app
            .raw(
                Method::POST,
                &format!("/v1/{path}"),
                &[("content-type", "text/plain")],
                event.to_string().into_bytes(),
            )
            .await;
        assert_eq!(a.counts(), (1, 0, 0), "/v1/{path}: {}", a.body);
    }
    let batch = json!({"batch": [{"type": "track", "event": "B", "anonymousId": ANON, "messageId": "ajs-b"}], "writeKey": ik});
    let a = app
        .raw(
            Method::POST,
            "/v1/b",
            &[("content-type", "text/plain")],
            batch.to_string().into_bytes(),
        )
        .await;
    assert_eq!(a.counts(), (1, 0, 0), "{}", a.body);
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    for (id, kind) in [
        ("ajs-t", "track"),
        ("ajs-p", "page"),
        ("ajs-i", "identify"),
        ("ajs-s", "screen"),
        ("ajs-g", "group"),
        ("ajs-a", "alias"),
        ("ajs-b", "track"),
    ] {
        assert_eq!(view.row(id)["type"], json!(kind), "{id}");
    }
}

#[tokio::test]
async fn screens_and_aliases_count_in_the_traffic_rollups_by_type() {
    let app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["analytics:read"]).await;
    let body = json!({"batch": [
        {"type": "screen", "userId": "u1", "anonymousId": ANON, "name": "Home"},
        {"type": "screen", "userId": "u1", "anonymousId": ANON, "name": "Cart"},
        {"type": "alias", "userId": "u1", "previousId": "anon-cookie-1"},
        {"type": "track", "anonymousId": ANON, "event": "Bought"}
    ]});
    let a = app
        .send(Method::POST, "/v1/batch", &[("x-app-key", &ik)], Some(body))
        .await;
    assert_eq!(a.counts(), (4, 0, 0), "{}", a.body);
    // The shutdown flushes the files, and with them the rollups.
    let app = app.restart().await;
    let a = app
        .api(&key, Method::GET, "/api/v1/analytics/traffic", None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data()["totals"]["events"], 4, "{}", a.body);
    let sum = |t: &str| -> u64 {
        a.data()["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["byType"][t].as_u64().unwrap())
            .sum()
    };
    let counts: Vec<u64> = ["page", "track", "identify", "group", "screen", "alias"]
        .iter()
        .map(|t| sum(t))
        .collect();
    assert_eq!(counts, [0, 1, 0, 0, 2, 1]);
}
