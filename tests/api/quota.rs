//! The collector's plan quota under concurrency, and the quarantine of refused events: a batch
//! answered 200 keeps what it refused where a user finds it (the dashboard, `/metrics`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::dashboard::owner;
use crate::events::*;
use crate::helpers::*;
use crate::lake;

/// A `/metrics` value (the sum over its label sets when `name` leaves some out).
async fn metric(app: &TestApp, name: &str) -> f64 {
    let text = crate::collector::metrics_text(&app.client, &app.base).await;
    let name = format!("tributary_collector_{name}");
    text.lines()
        .filter(|l| l.starts_with(&name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls a `/metrics` value until it reads `want` (10 s at most).
async fn metric_reaches(app: &TestApp, name: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = metric(app, name).await;
        if now == want || Instant::now() > deadline {
            assert_eq!(now, want, "{name}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn twenty_concurrent_one_event_batches_against_a_limit_of_10_accept_exactly_10() {
    let mut app = spawn_app_with(|s| s.plans.free.events_per_month = 10);
    let (_, ik) = app.create_app("free").await;
    let answers = futures_util::future::join_all(
        (0..20).map(|i| app.collect(&ik, batch(vec![track(&format!("c{i}"))]))),
    )
    .await;
    let accepted = answers.iter().filter(|a| a.status == 200).count();
    assert_eq!(accepted, 10, "exactly the limit");
    for a in &answers {
        match a.status.as_u16() {
            200 => assert_eq!(a.counts(), (1, 0, 0)),
            _ => {
                a.assert_error(403, "PLAN_LIMIT_REACHED");
                assert_eq!(
                    a.body["error"]["details"],
                    json!([{"field": "events_per_month", "message": "limit 10, current 10"}])
                );
            }
        }
    }
    assert_eq!(
        metric(&app, "rejected_total{reason=\"plan_limit\"}").await,
        10.0
    );
    assert_eq!(metric(&app, "quarantined_total").await, 0.0);
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.rows.len(), 10, "the lake holds what was accepted");
}

#[tokio::test]
async fn a_batch_crossing_the_limit_takes_what_is_left_and_refuses_the_rest_one_by_one() {
    let mut app = spawn_app_with(|s| s.plans.free.events_per_month = 15);
    let (_, ik) = app.create_app("free").await;
    assert_eq!(app.collect(&ik, tracks("q", 10)).await.counts(), (10, 0, 0));
    // A retry is deduplicated and takes nothing from the allowance.
    assert_eq!(app.collect(&ik, tracks("q", 10)).await.counts(), (0, 10, 0));
    // 5 left; an invalid event among them is refused for itself, not for the plan.
    let mut events: Vec<Value> = (10..14).map(|i| track(&format!("q{i}"))).collect();
    events.insert(1, json!({"type": "dance", "anonymousId": ANON}));
    events.extend((14..20).map(|i| track(&format!("q{i}"))));
    let crossing = app.collect(&ik, batch(events)).await;
    assert_eq!(crossing.status, 200, "{}", crossing.body);
    assert_eq!(crossing.counts(), (5, 0, 6));
    let errors: Vec<(u64, &str)> = crossing.data()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["index"].as_u64().unwrap(), e["field"].as_str().unwrap()))
        .collect();
    let over = (6..11).map(|i| (i, "events_per_month"));
    assert_eq!(
        errors,
        [(1, "type")].into_iter().chain(over).collect::<Vec<_>>()
    );
    assert_eq!(
        crossing.data()["errors"][1]["message"],
        "over the plan's monthly events: limit 15, current 15"
    );
    // The events over the plan are quarantined (the invalid one too); a 403's are not.
    metric_reaches(&app, r#"quarantined_total{reason="plan_limit"}"#, 5.0).await;
    metric_reaches(&app, r#"quarantined_total{reason="invalid_event"}"#, 1.0).await;
    let full = app.collect(&ik, tracks("late", 1)).await;
    full.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        full.body["error"]["details"],
        json!([{"field": "events_per_month", "message": "limit 15, current 15"}])
    );
    // The count outlives a restart (seeded from what the writers stored).
    app.stop().await;
    let mut again = start(app.data_dir.clone(), |s| s.plans.free.events_per_month = 15);
    again
        .collect(&ik, tracks("after", 1))
        .await
        .assert_error(403, "PLAN_LIMIT_REACHED");
    again.stop().await;
    let mut ids = lake::read_local(&app.data_dir.join("lake")).message_ids();
    ids.sort();
    let mut expected: Vec<String> = (0..15).map(|i| format!("msg_q{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "the first 15 events, once each");
}

/// Polls the app's Refused events page until it lists `n` events.
async fn refused_page(b: &mut crate::dashboard::Browser<'_>, app_id: &str, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let page = b.get(&format!("/dashboard/apps/{app_id}/refused")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let shown = page.body.matches("<article class=\"card refused\"").count();
        if shown >= n || Instant::now() > deadline {
            assert_eq!(shown, n, "{}", page.body);
            return page.body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn three_bad_events_among_ten_leave_seven_in_the_lake_and_three_on_the_refused_page() {
    let mut app = spawn_app();
    let (app_id, ik) = app.create_app("free").await;
    let mut events: Vec<Value> = (0..7).map(|i| track(&format!("good{i}"))).collect();
    events.insert(
        2,
        json!({"type": "track", "anonymousId": ANON, "messageId": "msg_noname"}),
    );
    events.insert(
        5,
        json!({"type": "<script>alert(1)</script>", "anonymousId": ANON}),
    );
    let mut big = track("big");
    big["properties"]["blob"] = json!("x".repeat(40_000));
    events.insert(8, big);
    let a = app.collect(&ik, batch(events)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.counts(), (7, 0, 3));
    let request_id = a.body["meta"]["requestId"].as_str().unwrap().to_owned();

    let mut b = owner(&app).await;
    let traffic = b.get(&format!("/dashboard/apps/{app_id}/traffic")).await;
    assert!(traffic
        .body
        .contains(&format!(r#"href="/dashboard/apps/{app_id}/refused""#)));
    let body = refused_page(&mut b, &app_id, 3).await;
    for (index, reason, why) in [
        (
            8,
            "too large",
            "<code>body</code>: event larger than 32768 bytes",
        ),
        (5, "invalid event", "<code>type</code>: must be one of"),
        (2, "invalid event", "<code>event</code>: "),
    ] {
        let at = body
            .find(&format!("Event {index} of its batch"))
            .unwrap_or_else(|| panic!("event {index} listed: {body}"));
        let card = &body[at..];
        let card = &card[..card.find("</article>").unwrap()];
        assert!(card.contains(reason) && card.contains(why), "{card}");
        assert!(card.contains(&request_id), "{card}");
    }
    assert!(body.contains("msg_noname"), "the event's JSON as sent");
    assert!(
        body.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !body.contains("<script>alert"),
        "escaped"
    );
    assert!(body.contains("…"), "the 40 KB event is cut");
    // The keeper counts a record just after it stores it: the page may show it first.
    metric_reaches(&app, "quarantined_total{reason=\"invalid_event\"}", 2.0).await;
    metric_reaches(&app, "quarantined_total{reason=\"too_large\"}", 1.0).await;
    assert_eq!(metric(&app, "quarantine_dropped_total").await, 0.0);
    // A beacon's lone event, refused: 400 (nothing valid), kept too, without its key.
    let lone = json!({"type": "jump", "anonymousId": ANON, "writeKey": ik});
    let beacon = app
        .raw(
            reqwest::Method::POST,
            "/api/w/analytics/collect",
            &[("content-type", "text/plain")],
            serde_json::to_vec(&lone).unwrap(),
        )
        .await;
    beacon.assert_error(400, "VALIDATION_ERROR");
    let body = refused_page(&mut b, &app_id, 4).await;
    assert!(body.contains("jump"), "{body}");
    assert!(!body.contains(&ik), "the integration key is not kept");
    // Another app sees none of them.
    let (other, _) = app.create_app("free").await;
    refused_page(&mut b, &other, 0).await;
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.rows.len(), 7);
    assert!(view.message_ids().iter().all(|m| m.starts_with("msg_good")));
}

#[tokio::test]
async fn a_batch_answered_503_gives_its_share_of_the_plan_back() {
    const LIMIT: u64 = 100;
    let app = spawn_app_with(|s| {
        s.plans.free.events_per_month = LIMIT as i64;
        s.collector.max_backlog_mb = 1;
        // Files close when the test moves the clock, not while a slow machine posts.
        s.collector.max_file_age_ms = 60_000;
    });
    let (_, ik) = app.create_app("free").await;
    // Big events until the backlog (the WAL, before its files reach the lake) is over 1 MB.
    let mut accepted = 0;
    for b in 0..4 {
        let events: Vec<Value> = (0..15)
            .map(|i| {
                let mut e = track(&format!("big{b}_{i}"));
                e["properties"]["blob"] = json!("x".repeat(30_000));
                e
            })
            .collect();
        let a = app.collect(&ik, batch(events)).await;
        if a.status == 503 {
            break;
        }
        assert_eq!(a.counts(), (15, 0, 0), "{}", a.body);
        accepted += 15;
    }
    let rest = (LIMIT - accepted) as usize;
    let probe = tracks("rest", rest);
    let first = app.collect(&ik, probe.clone()).await;
    first.assert_error(503, "SERVICE_UNAVAILABLE");
    app.clock.advance(61_000_000);
    // Once the files are in the lake the same batch is taken whole: every 503 gave its share back.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = app.collect(&ik, probe.clone()).await;
        if a.status == 200 {
            assert_eq!(a.counts(), (rest as u64, 0, 0), "{}", a.body);
            break;
        }
        a.assert_error(503, "SERVICE_UNAVAILABLE");
        assert!(Instant::now() < deadline, "the backlog drains");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.collect(&ik, tracks("over", 1))
        .await
        .assert_error(403, "PLAN_LIMIT_REACHED");
}
