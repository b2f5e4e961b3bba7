//! The operator's paths (`collector.script_path`, `collector.collect_path`): the tracker and the
//! collector under paths ad blockers' lists do not name, beside the defaults.

use std::io::Read;
use std::sync::Arc;

use reqwest::Method;
use serde_json::json;

use crate::dashboard::owner;
use crate::events::*;
use crate::helpers::*;
use crate::lake;

const SCRIPT: &str = "/lib/site.js";
const COLLECT: &str = "/t/e";

fn custom_paths(s: &mut tributary::config::Settings) {
    slow_files(s);
    s.collector.script_path = SCRIPT.into();
    s.collector.collect_path = COLLECT.into();
}

#[tokio::test]
async fn the_tracker_at_the_operators_path_sends_to_the_operators_collect_path() {
    let app = spawn_app_with(custom_paths);
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut req = app.client.get(format!("{}{path}", app.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send()
    };
    let plain = get(SCRIPT, &[]).await.unwrap();
    assert_eq!(plain.status(), 200);
    let h = plain.headers().clone();
    assert_eq!(h["content-type"], "application/javascript; charset=utf-8");
    assert_eq!(h["cache-control"], "public, max-age=300");
    let etag = h["etag"].to_str().unwrap().to_owned();
    let text = plain.text().await.unwrap();
    assert!(
        text.contains("var SCRIPT_PATH = '/lib/site.js', COLLECT_PATH = '/t/e';"),
        "the served tracker names the operator's paths"
    );
    for default in ["/sdk/v1/analytics.js", "/api/w/analytics/collect"] {
        assert!(!text.contains(default), "{default} left in the tracker");
    }
    assert_ne!(text, tributary::sdk::ANALYTICS_JS);

    // The default path serves the same tracker (an old snippet's events move too).
    let old = get("/sdk/v1/analytics.js", &[]).await.unwrap();
    assert_eq!(old.headers()["etag"].to_str().unwrap(), etag);
    assert_eq!(old.text().await.unwrap(), text);

    // Gzip and revalidation as on the default path.
    let zipped = get(SCRIPT, &[("accept-encoding", "gzip")]).await.unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    assert_eq!(zipped.headers()["etag"].to_str().unwrap(), etag);
    let mut unzipped = String::new();
    flate2::read::GzDecoder::new(&zipped.bytes().await.unwrap()[..])
        .read_to_string(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, text);
    let again = get(SCRIPT, &[("if-none-match", &etag)]).await.unwrap();
    assert_eq!(again.status(), 304);

    // Other methods answer as on the default path.
    let posted = app.raw(Method::POST, SCRIPT, &[], b"{}".to_vec()).await;
    posted.assert_error(405, "METHOD_NOT_ALLOWED");
    assert_eq!(posted.header("allow"), Some("GET, HEAD"));
    app.send(Method::GET, &format!("{SCRIPT}/"), &[], None)
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn a_batch_posted_to_the_operators_collect_path_lands_with_cors_and_every_key_source() {
    let mut app = spawn_app_with(custom_paths);
    let (_, ik) = app.create_app("free").await;

    let a = app
        .send(
            Method::POST,
            COLLECT,
            &[("x-app-key", &ik), ("origin", "https://shop.example")],
            Some(tracks("custom_", 3)),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.counts(), (3, 0, 0));
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://shop.example")
    );
    // A beacon: text/plain, the key in the query.
    let beacon = app
        .raw(
            Method::POST,
            &format!("{COLLECT}?appKey={ik}"),
            &[("content-type", "text/plain;charset=UTF-8")],
            serde_json::to_vec(&batch(vec![track("beacon")])).unwrap(),
        )
        .await;
    assert_eq!(beacon.counts(), (1, 0, 0), "{}", beacon.body);
    // The key in the body; a retry on the default path is the same collector (deduplicated).
    let mut with_key = batch(vec![track("custom_0"), track("body")]);
    with_key["writeKey"] = json!(ik);
    let both = app
        .send(
            Method::POST,
            "/api/w/analytics/collect",
            &[],
            Some(with_key),
        )
        .await;
    assert_eq!(both.counts(), (1, 1, 0), "{}", both.body);
    app.send(
        Method::POST,
        COLLECT,
        &[("x-app-key", "ik_nope")],
        Some(tracks("x", 1)),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");

    // The preflight names what the path answers.
    let res = app
        .client
        .request(Method::OPTIONS, format!("{}{COLLECT}", app.base))
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-app-key, content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let h = |n: &str| res.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        h("access-control-allow-origin").as_deref(),
        Some("https://shop.example")
    );
    assert_eq!(
        h("access-control-allow-methods").as_deref(),
        Some("POST, OPTIONS")
    );
    assert!(h("access-control-allow-headers")
        .unwrap()
        .to_lowercase()
        .contains("x-app-key"));
    let got = app.send(Method::GET, COLLECT, &[], None).await;
    got.assert_error(405, "METHOD_NOT_ALLOWED");
    assert_eq!(got.header("allow"), Some("POST"));

    // The document describes the default paths only.
    let doc = app.send(Method::GET, "/openapi.json", &[], None).await.body;
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.contains_key("/api/w/analytics/collect"));
    assert!(!paths.contains_key(COLLECT) && !paths.contains_key(SCRIPT));

    app.stop().await;
    let mut ids = lake::read_local(&app.data_dir.join("lake")).message_ids();
    ids.sort();
    assert_eq!(
        ids,
        [
            "msg_beacon",
            "msg_body",
            "msg_custom_0",
            "msg_custom_1",
            "msg_custom_2"
        ]
    );
}

#[tokio::test]
async fn the_dashboards_snippet_loads_the_tracker_from_the_operators_path() {
    for (tweak, path) in [
        (custom_paths as fn(&mut _), SCRIPT),
        (slow_files, "/sdk/v1/analytics.js"),
    ] {
        let app = spawn_app_with(tweak);
        let mut b = owner(&app).await;
        let made = b
            .submit(
                "/dashboard/apps",
                "/dashboard/apps",
                &[("name", "Shop"), ("plan", "free")],
            )
            .await;
        assert_eq!(made.status, 200);
        let snippet = made.body.split("id=\"snippet\"").nth(1).expect("a snippet");
        let snippet = &snippet[..snippet.find("</pre>").unwrap()];
        assert!(
            snippet.contains(&format!("e.src=s+&quot;{path}&quot;")),
            "{snippet}"
        );
        assert_eq!(snippet.contains("/sdk/v1/analytics.js"), path != SCRIPT);
    }
}

#[tokio::test]
async fn an_operators_path_on_a_route_of_the_service_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = test_settings(tmp.path());
    s.collector.collect_path = "/api/w/collect".into();
    let clock = Arc::new(tributary::clock::SystemClock);
    let e = tributary::startup::Application::build(s.clone(), clock.clone())
        .err()
        .expect("refused")
        .to_string();
    assert_eq!(
        e,
        "configuration: collector.collect_path = \"/api/w/collect\": /api is the service's own; \
         choose a path outside /acq, /admin, /api, /dashboard, /fleet, /healthz, /metrics, \
         /openapi.json, /readyz, /sdk, /v1"
    );
    s.collector.collect_path = SCRIPT.into();
    s.collector.script_path = SCRIPT.into();
    let e = tributary::startup::Application::build(s, clock)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("must differ"), "{e}");
}

#[tokio::test]
async fn the_paths_come_from_the_environment_and_a_bad_one_stops_serve_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(tmp.path())
        .env("TRIBUTARY_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("TRIBUTARY__COLLECTOR__SCRIPT_PATH", "/js/a b.js")
        .output()
        .expect("tributary runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("collector.script_path = \"/js/a b.js\": ' ' is not allowed"),
        "{err}"
    );

    let server = crate::binary::start_with(
        tmp.path(),
        &[
            ("TRIBUTARY__COLLECTOR__SCRIPT_PATH", SCRIPT),
            ("TRIBUTARY__COLLECTOR__COLLECT_PATH", COLLECT),
        ],
    );
    let text = reqwest::get(format!("{}{SCRIPT}", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("COLLECT_PATH = '/t/e'"));
}
