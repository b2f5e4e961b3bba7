//! The fleet as an operator sees it on the control node: the dashboard's Fleet page (edges,
//! fleet tokens), the Apps page's fleet-wide usage, and `/metrics` on both roles.

use reqwest::Method;
use serde_json::{json, Value};

use crate::collector::metrics_text;
use crate::dashboard::owner;
use crate::events::tracks;
use crate::fleet::{edge_of, fleet_token, within};
use crate::helpers::*;

fn heartbeat(node: &str, usage: Value) -> Value {
    json!({
        "nodeId": node,
        "version": "9.8.7",
        "acceptedTotal": 42,
        "eventsPerSecond": 12.5,
        "backlogBytes": 3 * 1024 * 1024,
        "outboxFiles": 4,
        "uplinkItems": 6,
        "uplinkLagSeconds": 2.0,
        "registryVersion": null,
        "usage": usage,
    })
}

async fn beat(app: &TestApp, token: &str, body: Value) -> Answer {
    let auth = format!("Bearer {token}");
    app.send(
        Method::POST,
        "/fleet/v1/heartbeat",
        &[("authorization", &auth)],
        Some(body),
    )
    .await
}

async fn registry_status(app: &TestApp, token: &str) -> u16 {
    app.client
        .get(format!("{}/fleet/v1/registry", app.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `value="<prefix>..."` of a page: the value that starts with `prefix`.
fn value_starting(body: &str, prefix: &str) -> String {
    let at = body
        .find(&format!("value=\"{prefix}"))
        .unwrap_or_else(|| panic!("no value {prefix}... in {body}"))
        + 7;
    body[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test]
async fn the_fleet_page_lists_an_edge_after_its_heartbeat_escaped_and_marked_stale_later() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let empty = b.get("/dashboard/fleet").await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert!(empty.body.contains("No edge has reported yet"));
    assert!(
        empty.body.contains("href=\"/dashboard/fleet\""),
        "linked from the nav"
    );
    let (_, token) = fleet_token(&app).await;
    let hostile = "<script>alert(1)</script>\"'&";
    assert_eq!(
        beat(&app, &token, heartbeat(hostile, json!([])))
            .await
            .status,
        200
    );
    let page = b.get("/dashboard/fleet").await;
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("<script>alert(1)"), "{}", page.body);
    assert!(
        page.body
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;'&amp;"),
        "{}",
        page.body
    );
    for shown in ["9.8.7", "12.5", "3.0 MiB", "0 s ago", "2 s behind"] {
        assert!(page.body.contains(shown), "{shown} missing: {}", page.body);
    }
    // It never pulled the registry: not current.
    assert!(page.body.contains("<span class=\"badge danger\">no</span>"));
    assert!(!page.body.contains(">stale<"));
    app.clock.advance(31_000_000);
    let later = b.get("/dashboard/fleet").await;
    assert!(later.body.contains(">stale<"), "{}", later.body);
}

#[tokio::test]
async fn a_fleet_token_from_the_dashboard_is_shown_once_and_authenticates_until_revoked() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let refused = b
        .post(
            "/dashboard/fleet/tokens",
            &[("name", "eu"), ("csrf", "0000")],
        )
        .await;
    assert_eq!(refused.status, 403, "no token without the CSRF token");
    let blank = b
        .submit(
            "/dashboard/fleet",
            "/dashboard/fleet/tokens",
            &[("name", " ")],
        )
        .await;
    assert_eq!(blank.status, 400, "{}", blank.body);
    let made = b
        .submit(
            "/dashboard/fleet",
            "/dashboard/fleet/tokens",
            &[("name", "EU west")],
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let token = value_starting(&made.body, "tft_");
    let command = value_starting(&made.body, "TRIBUTARY__FLEET__TOKEN=");
    assert_eq!(
        command,
        format!(
            "TRIBUTARY__FLEET__TOKEN={token} tributary serve --role edge --control-url {} --node-id eu-west-1",
            app.base
        )
    );
    assert_eq!(registry_status(&app, &token).await, 200);
    let page = b.get("/dashboard/fleet").await;
    assert!(
        page.body.contains("EU west") && !page.body.contains(&token),
        "shown once"
    );
    let id = token.split('_').nth(1).unwrap();
    let revoke = format!("/dashboard/fleet/tokens/{id}/revoke");
    let forged = b.post(&revoke, &[("csrf", "0000")]).await;
    assert_eq!(forged.status, 403);
    assert_eq!(registry_status(&app, &token).await, 200, "still live");
    let revoked = b.post(&revoke, &[("csrf", &page.csrf())]).await;
    assert_eq!(revoked.status, 303);
    assert_eq!(revoked.location(), "/dashboard/fleet");
    assert_eq!(registry_status(&app, &token).await, 401);
    let again = b.post(&revoke, &[("csrf", &page.csrf())]).await;
    assert_eq!(again.status, 404);
    assert!(!b.get("/dashboard/fleet").await.body.contains("EU west"));
}

#[tokio::test]
async fn the_apps_page_counts_the_events_of_the_whole_fleet_this_month() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let (app_id, ik) = app.create_app("free").await;
    assert_eq!(app.collect(&ik, tracks("own", 3)).await.status, 200);
    let (_, token) = fleet_token(&app).await;
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let usage = |n: u64| json!([{"appId": app_id, "month": month, "events": n}, {"appId": app_id, "month": "2001-01", "events": 5000}]);
    assert_eq!(
        beat(&app, &token, heartbeat("e1", usage(1000)))
            .await
            .status,
        200
    );
    // A heartbeat repeated replaces that edge's count.
    assert_eq!(
        beat(&app, &token, heartbeat("e2", usage(100))).await.status,
        200
    );
    assert_eq!(
        beat(&app, &token, heartbeat("e2", usage(231))).await.status,
        200
    );
    let page = b.get("/dashboard/apps").await;
    assert!(
        page.body.contains("1\u{202f}234 of"),
        "3 own + 1000 + 231: {}",
        page.body
    );
}

/// The value of the sample `line` (the whole text before the value) of a metrics text.
fn sample(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_say_the_same_things_about_the_fleet_on_the_control_node_and_an_edge() {
    let control = spawn_app();
    let idle = metrics_text(&control.client, &control.base).await;
    assert!(
        idle.contains("tributary_fleet_node_info{role=\"control\""),
        "{idle}"
    );
    assert_eq!(sample(&idle, "tributary_fleet_nodes"), Some(0.0));
    let (_, token) = fleet_token(&control).await;
    let edge = edge_of(&control, &token, "edge-a");
    let synced = |e: &str, c: &str| {
        sample(e, "tributary_fleet_control_reachable") == Some(1.0)
            && sample(c, "tributary_fleet_node_registry_current{node=\"edge-a\"}") == Some(1.0)
    };
    let metrics = || async {
        let e = metrics_text(&edge.client, &edge.base).await;
        (e, metrics_text(&control.client, &control.base).await)
    };
    within(20, "the edge synced, as both /metrics say", || async {
        let (e, c) = metrics().await;
        synced(&e, &c)
    })
    .await;
    let (on_edge, on_control) = metrics().await;
    assert!(on_edge.contains("tributary_fleet_node_info{role=\"edge\",node=\"edge-a\"} 1"));
    assert!(sample(&on_edge, "tributary_fleet_registry_changes_total").unwrap() >= 1.0);
    assert_eq!(
        sample(&on_edge, "tributary_fleet_sync_failures_total"),
        Some(0.0)
    );
    assert!(sample(&on_edge, "tributary_fleet_last_contact_age_seconds").unwrap() < 20.0);
    assert_eq!(sample(&on_control, "tributary_fleet_nodes"), Some(1.0));
    assert_eq!(
        sample(&on_control, "tributary_fleet_nodes_stale"),
        Some(0.0)
    );
    // What the edge says of its uplink, the control node says of that edge.
    let items = sample(&on_edge, "tributary_fleet_uplink_items").unwrap();
    let lag = sample(&on_edge, "tributary_fleet_uplink_lag_seconds").unwrap();
    let of = |name: &str| {
        sample(
            &on_control,
            &format!("tributary_fleet_node_{name}{{node=\"edge-a\"}}"),
        )
    };
    assert_eq!(of("uplink_items"), Some(items));
    assert_eq!(of("uplink_lag_seconds"), Some(lag));
    for name in [
        "last_contact_age_seconds",
        "events_per_second",
        "backlog_bytes",
        "outbox_files",
    ] {
        assert!(of(name).is_some(), "{name}: {on_control}");
    }
    // The collector's own metrics are still there, and the text has one end.
    assert!(on_edge.contains("tributary_collector_accepted_total"));
    assert_eq!(on_control.matches("# EOF").count(), 1);
    assert!(on_control.ends_with("# EOF\n"));
}
