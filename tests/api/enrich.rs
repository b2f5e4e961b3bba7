//! Enrichment at the edge, read back from the lake: the visitor's user agent parsed (browser,
//! OS, device class, bot flag), bots left out of the traffic rollups, and the IP policy.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::collector::batch;
use crate::helpers::*;
use crate::lake;

const DESKTOP_CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
const IPHONE_SAFARI: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
const ANDROID_CHROME: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn page(id: &str, visitor: &str) -> Value {
    json!({"type": "page", "anonymousId": anon(visitor), "messageId": id,
           "context": {"page": {"path": "/pricing"}}})
}

/// One batch sent with `user_agent` as the request's User-Agent.
async fn send_as(app: &TestApp, ik: &str, user_agent: &str, events: Vec<Value>) {
    let n = events.len() as u64;
    let a = app
        .send(
            Method::POST,
            "/api/w/analytics/collect",
            &[("x-app-key", ik), ("user-agent", user_agent)],
            Some(batch(events)),
        )
        .await;
    assert_eq!(a.counts(), (n, 0, 0), "{}", a.body);
}

/// browser, browser_version, os, device_class, is_bot of a lake row.
fn agent_of(row: &serde_json::Map<String, Value>) -> Value {
    json!([
        row["browser"],
        row["browser_version"],
        row["os"],
        row["device_class"],
        row["is_bot"]
    ])
}

#[tokio::test]
async fn the_visitors_user_agent_is_parsed_into_the_lake_and_bots_are_flagged() {
    let mut app = spawn_app_with(crate::events::slow_files);
    let (_, ik) = app.create_app("free").await;
    send_as(&app, &ik, DESKTOP_CHROME, vec![page("msg_chrome", "c")]).await;
    send_as(&app, &ik, IPHONE_SAFARI, vec![page("msg_iphone", "i")]).await;
    send_as(&app, &ik, ANDROID_CHROME, vec![page("msg_android", "a")]).await;
    send_as(&app, &ik, GOOGLEBOT, vec![page("msg_googlebot", "g")]).await;
    // A server SDK: its own HTTP library is no visitor; the browser it forwards is.
    let mut forwarded = page("msg_forwarded", "f");
    forwarded["context"]["userAgent"] = json!(IPHONE_SAFARI);
    let server = vec![forwarded, page("msg_server", "s")];
    send_as(&app, &ik, "analytics-node-next/latest", server).await;
    send_as(
        &app,
        &ik,
        "python-requests/2.32.3",
        vec![page("msg_python", "p")],
    )
    .await;
    app.stop().await;

    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.types["is_bot"], "Boolean");
    let expected = [
        (
            "msg_chrome",
            json!(["Chrome", "124.0.0.0", "Windows", "desktop", false]),
        ),
        (
            "msg_iphone",
            json!(["Safari", "17.4", "iOS", "mobile", false]),
        ),
        (
            "msg_android",
            json!(["Chrome", "124.0.6367.82", "Android", "mobile", false]),
        ),
        (
            "msg_googlebot",
            json!(["Googlebot", null, null, "bot", true]),
        ),
        (
            "msg_forwarded",
            json!(["Safari", "17.4", "iOS", "mobile", false]),
        ),
        ("msg_server", json!([null, null, null, null, null])),
        ("msg_python", json!([null, null, null, null, null])),
    ];
    for (id, want) in expected {
        assert_eq!(agent_of(view.row(id)), want, "{id}");
    }
    assert_eq!(view.row("msg_forwarded")["user_agent"], IPHONE_SAFARI);
    assert_eq!(view.row("msg_googlebot")["user_agent"], GOOGLEBOT);
}

/// Sends 2 page views from Chrome and 3 from Googlebot, waits until the lake holds all 5 (the
/// rollups are applied before a file reaches the lake), and returns the traffic's answer and
/// the Traffic page's Devices table.
async fn traffic_with_a_bot(count_bots: bool) -> (Value, String) {
    let app = spawn_app_with(|s| {
        s.collector.max_file_age_ms = 100;
        s.collector.count_bots = count_bots;
    });
    let (app_id, ik) = app.create_app("pro").await;
    let (_, key) = app.create_key(&app_id, &["analytics:read"]).await;
    let humans = vec![page("msg_h1", "h1"), page("msg_h2", "h2")];
    send_as(&app, &ik, DESKTOP_CHROME, humans).await;
    let bots = (0..3)
        .map(|i| page(&format!("msg_b{i}"), &format!("b{i}")))
        .collect();
    send_as(&app, &ik, GOOGLEBOT, bots).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while lake::read_local(&app.data_dir.join("lake")).rows.len() < 5 {
        assert!(
            Instant::now() < deadline,
            "the 5 events never reached the lake"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = app
        .api(&key, Method::GET, "/api/v1/analytics/traffic", None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let mut b = crate::dashboard::owner(&app).await;
    let page = b.get(&format!("/dashboard/apps/{app_id}/traffic")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let devices = &page.body[page.body.find(r#"id="devices""#).unwrap()..];
    let devices = devices[..devices.find("</section>").unwrap()].to_owned();
    (a.data().clone(), devices)
}

#[tokio::test]
async fn googlebot_is_left_out_of_the_traffic_rollups_unless_count_bots_keeps_it() {
    let (data, devices) = traffic_with_a_bot(false).await;
    let totals = &data["totals"];
    assert_eq!(
        (totals["events"].as_u64(), totals["visitors"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(data["devices"], json!([{"name": "desktop", "count": 2}]));
    assert!(
        devices.contains(r#"<td class="name">desktop</td><td class="num">2</td>"#),
        "{devices}"
    );
    assert!(!devices.contains("bot"), "{devices}");
    let (data, devices) = traffic_with_a_bot(true).await;
    let totals = &data["totals"];
    assert_eq!(
        (totals["events"].as_u64(), totals["visitors"].as_u64()),
        (Some(5), Some(5))
    );
    let both = json!([{"name": "bot", "count": 3}, {"name": "desktop", "count": 2}]);
    assert_eq!(data["devices"], both);
    assert!(
        devices.contains(r#"<td class="name">bot</td><td class="num">3</td>"#),
        "{devices}"
    );
}

#[tokio::test]
async fn with_the_default_ip_policy_no_full_address_reaches_the_lake() {
    let mut app = spawn_app_with(|s| {
        crate::events::slow_files(s);
        s.collector.trust_forwarded_for = true;
    });
    let (_, ik) = app.create_app("free").await;
    for (id, from) in [
        ("msg_v4", "203.0.113.77"),
        ("msg_v6", "2001:db8:85a3:8d3:1319:8a2e:370:7348"),
    ] {
        let a = app
            .send(
                Method::POST,
                "/api/w/analytics/collect",
                &[("x-app-key", &ik), ("x-forwarded-for", from)],
                Some(batch(vec![page(id, id)])),
            )
            .await;
        assert_eq!(a.counts(), (1, 0, 0), "{}", a.body);
    }
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.row("msg_v4")["ip"], "203.0.113.0");
    assert_eq!(view.row("msg_v6")["ip"], "2001:db8:85a3::");
    let everything = serde_json::to_string(&view.rows).unwrap();
    for full in ["203.0.113.77", "1319:8a2e"] {
        assert!(!everything.contains(full), "{full} is in the lake");
    }
}
