//! Erasure through the API: `POST /api/v1/erasures` validates every field, needs
//! `privacy:erase`, stays in its app, removes the person from the stores that showed them, and
//! their events are refused at ingest afterwards (counted in `/metrics`, not quarantined).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::collector::metrics_text;
use crate::events::{batch, track, ANON, ANON2};
use crate::helpers::*;

const ALL: [&str; 8] = [
    "privacy:erase",
    "profiles:read",
    "contacts:read",
    "contacts:write",
    "ideas:read",
    "ideas:write",
    "votes:write",
    "comments:write",
];

async fn erase(app: &TestApp, key: &str, body: Value) -> Answer {
    app.api(key, Method::POST, "/api/v1/erasures", Some(body))
        .await
}

/// Polls the job until it is done (or failed), within 30 s.
async fn finished(app: &TestApp, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = app
            .api(key, Method::GET, &format!("/api/v1/erasures/{id}"), None)
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        let state = a.data()["state"].as_str().unwrap().to_owned();
        if state == "done" || state == "failed" {
            return a.data().clone();
        }
        assert!(Instant::now() < deadline, "still {state}: {}", a.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn event(kind: &str, anon: &str, user: Option<&str>, id: &str) -> Value {
    let mut e = track(id);
    e["type"] = json!(kind);
    e["anonymousId"] = json!(anon);
    if let Some(u) = user {
        e["userId"] = json!(u);
    }
    e
}

/// The `rejected{reason="suppressed"}` counter of `/metrics`.
async fn suppressed(app: &TestApp) -> u64 {
    let text = metrics_text(&app.client, &app.base).await;
    text.lines()
        .find(|l| l.starts_with("tributary_collector_rejected_total{reason=\"suppressed\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn every_bad_field_is_named_and_the_permission_is_needed() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["privacy:erase"]).await;
    let a = erase(&app, &key, json!({})).await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["body"]);
    let a = erase(
        &app,
        &key,
        json!({"userId": "", "anonymousIds": "x", "email": "not an address", "other": 1}),
    )
    .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["anonymousIds", "email", "other", "userId"]);
    let a = erase(
        &app,
        &key,
        json!({"anonymousIds": ["ffffffff-ffff-ffff-ffff-ffffffffffff"]}),
    )
    .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["anonymousIds[0]"]);
    let (_, reader) = app
        .create_key(&app_id, &["profiles:read", "contacts:read"])
        .await;
    let a = erase(&app, &reader, json!({"userId": "u1"})).await;
    a.assert_error(403, "FORBIDDEN");
    app.api(&reader, Method::GET, "/api/v1/erasures", None)
        .await
        .assert_error(403, "FORBIDDEN");
    app.api(
        &key,
        Method::GET,
        "/api/v1/erasures/job_000000000000000000000000",
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn another_apps_key_neither_sees_nor_lists_the_job() {
    let app = spawn_app();
    let (a_id, _) = app.create_app("free").await;
    let (b_id, _) = app.create_app("free").await;
    let (_, a_key) = app.create_key(&a_id, &["privacy:erase"]).await;
    let (_, b_key) = app.create_key(&b_id, &["privacy:erase"]).await;
    let started = erase(&app, &a_key, json!({"userId": "u1"})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        started.header("location"),
        Some(&*format!("/api/v1/erasures/{id}"))
    );
    app.api(&b_key, Method::GET, &format!("/api/v1/erasures/{id}"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    let listed = app.api(&b_key, Method::GET, "/api/v1/erasures", None).await;
    assert_eq!(listed.data(), &json!([]));
    let listed = app
        .api(&a_key, Method::GET, "/api/v1/erasures?limit=1", None)
        .await;
    assert_eq!(listed.data()[0]["id"], json!(id));
    assert_eq!(listed.body["pagination"]["hasMore"], json!(false));
}

#[tokio::test]
async fn an_erased_person_is_gone_from_every_api_and_their_events_are_refused_afterwards() {
    let app = spawn_app_with(crate::events::slow_files);
    let (app_id, ik) = app.create_app("pro").await;
    let (_, key) = app.create_key(&app_id, &ALL).await;
    let other_user = crate::helpers::anon("someone else");
    let events = vec![
        event("identify", ANON, Some("ada"), "i1"),
        event("track", ANON, None, "t1"),
        event("identify", ANON2, Some("ada"), "i2"),
        event("identify", &other_user, Some("bob"), "i3"),
    ];
    assert_eq!(app.collect(&ik, batch(events)).await.counts(), (4, 0, 0));
    for email in ["ada@example.com", "bob@example.com"] {
        let c = app.create_contact(&key, json!({"email": email})).await;
        assert_eq!(c.status, 201, "{}", c.body);
    }
    let idea = app
        .api(
            &key,
            Method::POST,
            "/api/v1/ideas",
            Some(json!({"title": "Dark mode",
            "author": {"id": "bob", "name": "Bob", "email": "bob@example.com"}})),
        )
        .await;
    let idea = idea.data()["id"].as_str().unwrap().to_owned();
    let ada = json!({"id": "ada", "name": "Ada", "email": "ada@example.com"});
    let hers = app
        .api(
            &key,
            Method::POST,
            "/api/v1/ideas",
            Some(json!({"title": "Offline mode", "author": ada})),
        )
        .await;
    assert_eq!(hers.status, 201, "{}", hers.body);
    let hers = hers.data()["id"].as_str().unwrap().to_owned();
    for (path, body) in [
        ("votes", json!({"voter": ada})),
        ("votes", json!({"voter": {"id": "bob"}})),
        ("comments", json!({"content": "Yes please", "author": ada})),
        (
            "comments",
            json!({"content": "Me too", "author": {"id": "bob", "name": "Bob", "email": "bob@example.com"}}),
        ),
    ] {
        let a = app
            .api(
                &key,
                Method::POST,
                &format!("/api/v1/ideas/{idea}/{path}"),
                Some(body),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }

    let started = erase(
        &app,
        &key,
        json!({"userId": "ada", "email": "Ada@Example.com"}),
    )
    .await;
    assert_eq!(started.status, 202, "{}", started.body);
    assert!(
        // As JSON strings: the hashes are random hex, which may hold the letters "ada".
        !started.body.to_string().contains("\"ada\"")
            && !started.body.to_string().contains("@example.com"),
        "no id in the answer: {}",
        started.body
    );
    let id = started.data()["id"].as_str().unwrap().to_owned();
    let done = finished(&app, &key, &id).await;
    assert_eq!(done["state"], "done", "{done}");
    let report = &done["report"];
    for (what, n) in [
        ("contacts", 1),
        ("profiles", 1),
        ("identityLinks", 2),
        ("votes", 1),
        ("comments", 1),
        ("ideasAnonymised", 1),
    ] {
        assert_eq!(report[what], json!(n), "{what}: {done}");
    }
    assert_eq!(
        done["hashes"]["anonymousIds"],
        json!([]),
        "the request named none"
    );
    assert!(done["requestedBy"].as_str().unwrap().starts_with("key:"));

    app.api(&key, Method::GET, "/api/v1/profiles/ada", None)
        .await
        .assert_error(404, "NOT_FOUND");
    assert_eq!(
        app.api(&key, Method::GET, "/api/v1/profiles/bob", None)
            .await
            .status,
        200
    );
    let contacts = app.api(&key, Method::GET, "/acq/v1/contacts", None).await;
    let emails: Vec<&str> = contacts
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["bob@example.com"]);
    // The idea she wrote stays, its author anonymous; Bob's keeps his name.
    let kept = app
        .api(&key, Method::GET, &format!("/api/v1/ideas/{hers}"), None)
        .await;
    assert_eq!(kept.status, 200, "{}", kept.body);
    assert_eq!(kept.data()["title"], "Offline mode");
    assert_eq!(
        kept.data()["author"],
        json!({"id": "anonymous", "name": "Anonymous", "email": ""})
    );
    let listed = app.api(&key, Method::GET, "/api/v1/ideas", None).await;
    let text = listed.body.to_string();
    assert!(
        !text.contains("ada@example.com") && !text.contains("\"Ada\""),
        "{text}"
    );
    assert!(text.contains("bob@example.com"), "{text}");
    for (list, who) in [("votes", "voter"), ("comments", "author")] {
        let l = app
            .api(
                &key,
                Method::GET,
                &format!("/api/v1/ideas/{idea}/{list}"),
                None,
            )
            .await;
        let ids: Vec<&Value> = l
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|x| &x[who]["id"])
            .collect();
        assert_eq!(ids, [&json!("bob")], "{list}");
    }

    // Their ids, the anonymousIds linked to the userId included, are refused at ingest.
    let before = suppressed(&app).await;
    let late = vec![
        event("track", ANON2, None, "late1"),
        event("track", &other_user, None, "late2"),
        event("track", &crate::helpers::anon("new"), Some("ada"), "late3"),
    ];
    let a = app.collect(&ik, batch(late)).await;
    assert_eq!(a.counts(), (1, 0, 2), "{}", a.body);
    let fields: Vec<&Value> = a.data()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["field"])
        .collect();
    assert_eq!(fields, [&json!("anonymousId"), &json!("userId")]);
    assert_eq!(suppressed(&app).await, before + 2);
    // A batch of theirs only is answered 200, all refused.
    let a = app
        .collect(&ik, batch(vec![event("page", ANON, None, "late4")]))
        .await;
    assert_eq!(
        (a.status.as_u16(), a.counts()),
        (200, (0, 0, 1)),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn the_dashboard_erases_a_person_through_its_form_and_lists_the_job() {
    let app = spawn_app();
    let mut b = crate::dashboard::owner(&app).await;
    let (app_id, ik) = app.create_app("free").await;
    let events = vec![event("identify", ANON, Some("ada"), "d1")];
    assert_eq!(app.collect(&ik, batch(events)).await.counts(), (1, 0, 0));
    let page = format!("/dashboard/apps/{app_id}/erasures");
    let shown = b.get(&page).await;
    assert_eq!(shown.status, 200);
    assert!(shown.body.contains("No erasures yet"), "{}", shown.body);
    let forged = b.post(&page, &[("userId", "ada")]).await;
    assert_eq!(forged.status, 403, "no CSRF token");
    let bad = b
        .submit(
            &page,
            &page,
            &[("userId", ""), ("anonymousIds", ""), ("email", "<b>x")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("id=\"f-email-error\""), "{}", bad.body);
    assert!(
        bad.body.contains("&lt;b&gt;x") && !bad.body.contains("<b>x"),
        "escaped"
    );
    let done = b
        .submit(
            &page,
            &page,
            &[("userId", "ada"), ("anonymousIds", ""), ("email", "")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let shown = b.get(&page).await;
        if shown.body.contains(">done<") {
            assert!(shown.body.contains("profiles: 1"), "{}", shown.body);
            assert!(!shown.body.contains(ANON), "no id shown");
            break;
        }
        assert!(Instant::now() < deadline, "{}", shown.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = app
        .collect(&ik, batch(vec![event("track", ANON, None, "d2")]))
        .await;
    assert_eq!(a.counts(), (0, 0, 1), "the linked anonymousId is refused");
}

#[tokio::test]
async fn the_widget_refuses_a_survey_response_from_an_erased_visitor() {
    let app = spawn_app();
    let (app_id, ik, reader, survey) = crate::surveys::live_nps(&app).await;
    let (_, key) = app.create_key(&app_id, &["privacy:erase"]).await;
    let (gone, kept) = (crate::helpers::anon("erased"), crate::helpers::anon("kept"));
    let started = erase(&app, &key, json!({"anonymousIds": [gone]})).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(finished(&app, &key, &id).await["state"], "done");

    let body =
        |who: &str| json!({"anonymousId": who, "answers": [{"questionId": "score", "value": 9}]});
    let refused = crate::surveys::answer(&app, &ik, &survey, body(&gone)).await;
    refused.assert_error(403, "FORBIDDEN");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("erased"),
        "{}",
        refused.body
    );
    let taken = crate::surveys::answer(&app, &ik, &survey, body(&kept)).await;
    assert_eq!(taken.status, 201, "{}", taken.body);
    let list = app
        .api(
            &reader,
            Method::GET,
            &format!("/api/v1/surveys/{survey}/responses"),
            None,
        )
        .await;
    let visitors: Vec<&Value> = list
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["anonymousId"])
        .collect();
    assert_eq!(visitors, [&json!(kept)], "nothing of theirs was stored");
}
