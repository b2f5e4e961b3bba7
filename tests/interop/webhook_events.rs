//! Each event type of the catalogue (README, "Webhooks"), caused through the public API, the
//! admin API and the dashboard's forms, reaches the endpoints subscribed to it and no other;
//! filters (a board, a survey, a contact status) hold; internal comments go only to an endpoint
//! that asked for them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::form_client::owner;
use crate::receiver::{firsts, Delivery, Receiver};
use crate::webhooks::{all_verified_and_duplicates_alike, in_order_per_subject, Tributary, QUICK};

/// The endpoints of the scenario: name, event types, filters and includeInternalComments.
fn endpoints(board_b: &str, survey_2: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "all",
            json!({"eventTypes": ["*"], "includeInternalComments": true}),
        ),
        (
            "ideas",
            json!({"eventTypes": ["idea.created", "idea.updated", "idea.merged", "idea.deleted"]}),
        ),
        (
            "votes",
            json!({"eventTypes": ["vote.created", "vote.deleted"]}),
        ),
        ("comments", json!({"eventTypes": ["comment.created"]})),
        (
            "surveys",
            json!({"eventTypes": ["survey.response.created", "survey.response.completed"]}),
        ),
        (
            "contacts",
            json!({"eventTypes": ["contact.created", "contact.updated", "contact.deleted"]}),
        ),
        (
            "jobs",
            json!({"eventTypes": ["erasure.completed", "erasure.failed", "app.deletion.started"]}),
        ),
        (
            "board-b",
            json!({"eventTypes": ["idea.created"], "filters": {"boardIds": [board_b]}}),
        ),
        (
            "survey-2",
            json!({"eventTypes": ["survey.response.created", "survey.response.completed"],
                   "filters": {"surveyIds": [survey_2]}}),
        ),
        (
            "customers",
            json!({"eventTypes": ["contact.created"], "filters": {"contactStatuses": ["customer"]}}),
        ),
    ]
}

fn author() -> Value {
    json!({"id": "user_1", "name": "User 1", "email": "user1@example.com"})
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_owned()
}

async fn idea(t: &Tributary, title: &str, board: Option<&str>) -> String {
    let mut body = json!({"title": title, "author": author()});
    if let Some(b) = board {
        body["boardId"] = json!(b);
    }
    id(&t.ok(Method::POST, "/api/v1/ideas", Some(body), 201).await)
}

/// An active NPS survey shown to everyone; its id.
async fn live_survey(t: &Tributary, title: &str) -> String {
    let body = json!({"title": title, "type": "nps", "targeting": {"percentage": 100},
        "questions": [{"id": "score", "text": "How likely?", "type": "scale"},
                      {"id": "why", "text": "Why?", "type": "text", "required": false}]});
    let a = t
        .admin(
            Method::POST,
            &format!("/apps/{}/surveys", t.app_id),
            Some(body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let s = id(a.data());
    let moved = t
        .admin(
            Method::POST,
            &format!("/apps/{}/surveys/{s}/transition", t.app_id),
            Some(json!({"status": "active"})),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    s
}

async fn respond(t: &Tributary, survey: &str, body: Value, status: u16) -> String {
    let a = t
        .api
        .send(
            Method::POST,
            &format!("/api/w/surveys/{survey}/responses"),
            &[("x-app-key", &t.ik)],
            Some(body),
        )
        .await;
    assert_eq!(a.status, status, "{}", a.body);
    id(a.data())
}

/// The status id of `name` on the default board.
async fn status_id(t: &Tributary, name: &str) -> String {
    let list = t.ok(Method::GET, "/api/v1/idea-statuses", None, 200).await;
    let found = list.as_array().unwrap().iter().find(|s| s["name"] == name);
    id(found.expect("the status"))
}

/// What the scenario caused, to check the deliveries against.
#[derive(Default)]
struct Caused {
    ideas: Vec<String>,
    ideas_b: Vec<String>,
    contacts_customer: Vec<String>,
    survey_2_responses: Vec<String>,
}

/// Causes every event type through the API (and the dashboard for three of them).
async fn cause_everything(t: &Tributary, board_b: &str, s1: &str, s2: &str) -> Caused {
    let mut c = Caused::default();
    let i1 = idea(t, "Dark mode", None).await;
    let i2 = idea(t, "Board B idea", Some(board_b)).await;
    let i3 = idea(t, "Dup of dark mode", None).await;
    let i4 = idea(t, "Doomed idea", None).await;
    c.ideas = vec![i1.clone(), i2.clone(), i3.clone(), i4.clone()];
    c.ideas_b = vec![i2.clone()];
    let planned = status_id(t, "Planned").await;
    let path = format!("/api/v1/ideas/{i1}");
    t.ok(
        Method::PATCH,
        &path,
        Some(json!({"statusId": planned})),
        200,
    )
    .await;
    let vote = t
        .ok(
            Method::POST,
            &format!("/api/v1/ideas/{i1}/votes"),
            Some(json!({"voter": {"id": "v1"}})),
            201,
        )
        .await;
    t.ok(
        Method::DELETE,
        &format!("/api/v1/ideas/{i1}/votes/{}", id(&vote)),
        None,
        200,
    )
    .await;
    for internal in [false, true] {
        t.ok(
            Method::POST,
            &format!("/api/v1/ideas/{i1}/comments"),
            Some(json!({"content": format!("internal {internal}"), "author": author(), "internal": internal})),
            201,
        )
        .await;
    }
    t.ok(
        Method::POST,
        &format!("/api/v1/ideas/{i3}/merge"),
        Some(json!({"intoId": i1})),
        200,
    )
    .await;
    t.ok(Method::DELETE, &format!("/api/v1/ideas/{i4}"), None, 200)
        .await;
    // Surveys: a partial answer completed later on s1; a complete one at once on s2.
    let partial = json!({"anonymousId": crate::helpers::anon("w1"), "completed": false,
        "answers": [{"questionId": "why", "value": "Fast"}]});
    let r1 = respond(t, s1, partial, 201).await;
    let done = json!({"anonymousId": crate::helpers::anon("w1"),
        "answers": [{"questionId": "score", "value": 9}]});
    assert_eq!(respond(t, s1, done, 200).await, r1);
    let whole = json!({"anonymousId": crate::helpers::anon("w2"),
        "answers": [{"questionId": "score", "value": 3}]});
    c.survey_2_responses = vec![respond(t, s2, whole, 201).await];
    // Contacts: one new (updated, deleted), one customer.
    let c1 = id(&t
        .ok(
            Method::POST,
            "/acq/v1/contacts",
            Some(json!({"email": "c1@example.com", "status": "new"})),
            201,
        )
        .await);
    let c2 = id(&t
        .ok(
            Method::POST,
            "/acq/v1/contacts",
            Some(json!({"email": "c2@example.com", "status": "customer"})),
            201,
        )
        .await);
    c.contacts_customer = vec![c2.clone()];
    let path = format!("/acq/v1/contacts/{c1}");
    t.ok(Method::PATCH, &path, Some(json!({"score": 5})), 200)
        .await;
    t.ok(Method::DELETE, &path, None, 200).await;
    // An erasure of someone unknown completes.
    let job = t
        .ok(
            Method::POST,
            "/api/v1/erasures",
            Some(json!({"userId": "nobody-at-all"})),
            202,
        )
        .await;
    assert!(job["id"].is_string(), "{job}");
    c
}

/// The dashboard, signed in as the owner: an idea's status moved by its select, an internal
/// comment, a contact edited.
async fn cause_from_the_dashboard(t: &Tributary, idea: &str, contact: &str) {
    let mut b = owner(&t.api).await;
    let app = &t.app_id;
    let board = b.get(&format!("/dashboard/apps/{app}/ideas")).await;
    assert_eq!(board.status, 200, "{}", board.body);
    let at = board
        .body
        .find(">In progress</option>")
        .expect("a status select");
    let in_progress = board.body[..at]
        .rsplit("value=\"")
        .next()
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let moved = b
        .post(
            &format!("/dashboard/apps/{app}/ideas/{idea}/status"),
            &[("status", &in_progress), ("csrf", &board.csrf())],
        )
        .await;
    assert_eq!(moved.status, 303, "{}", moved.body);
    let page = format!("/dashboard/apps/{app}/ideas/{idea}");
    let commented = b
        .submit(
            &page,
            &format!("{page}/comments"),
            &[("content", "From the team"), ("internal", "true")],
        )
        .await;
    assert_eq!(commented.status, 303, "{}", commented.body);
    let page = format!("/dashboard/apps/{app}/contacts/{contact}");
    let edited = b
        .submit(
            &page,
            &page,
            &[
                ("email", "c2@example.com"),
                ("firstName", "Carla"),
                ("status", "customer"),
                ("source", "api"),
                ("tags", ""),
                ("score", "40"),
            ],
        )
        .await;
    assert_eq!(edited.status, 303, "{}", edited.body);
}

fn kinds(log: &[Delivery]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for d in firsts(log) {
        *out.entry(d.kind().to_owned()).or_insert(0) += 1;
    }
    out
}

#[tokio::test]
async fn each_event_type_reaches_its_subscribers_only_and_filters_hold() {
    let receiver = Receiver::start();
    let t = Tributary::start(QUICK, &[]).await;
    let board_b = id(&t
        .admin(
            Method::POST,
            &format!("/apps/{}/boards", t.app_id),
            Some(json!({"name": "B"})),
        )
        .await
        .data()
        .clone());
    let s1 = live_survey(&t, "NPS one").await;
    let s2 = live_survey(&t, "NPS two").await;
    let mut subscribed: BTreeMap<&str, Value> = BTreeMap::new();
    for (name, body) in endpoints(&board_b, &s2) {
        subscribed.insert(name, t.subscribe(&receiver, name, body).await);
    }
    let caused = cause_everything(&t, &board_b, &s1, &s2).await;
    cause_from_the_dashboard(&t, &caused.ideas[0], &caused.contacts_customer[0]).await;
    // The app's deletion, in an app of its own.
    let (doomed, _) = t.api.create_app("pro").await;
    let gone = t
        .hook_in(
            &doomed,
            json!({"url": receiver.url("doomed"), "eventTypes": ["app.deletion.started"]}),
        )
        .await;
    receiver
        .ok("doomed", &[gone["secret"].as_str().unwrap()])
        .await;
    let deleted = t
        .admin(Method::DELETE, &format!("/apps/{doomed}"), None)
        .await;
    assert_eq!(deleted.status, 202, "{}", deleted.body);

    let expected: BTreeMap<&str, usize> = [
        ("idea.created", 4),
        ("idea.merged", 1),
        ("idea.deleted", 1),
        ("vote.created", 1),
        ("vote.deleted", 1),
        ("comment.created", 3),
        ("survey.response.created", 2),
        ("survey.response.completed", 2),
        ("contact.created", 2),
        ("contact.deleted", 1),
        ("erasure.completed", 1),
    ]
    .into();
    let log = receiver
        .until("all", "every type caused", Duration::from_secs(60), |l| {
            let got = kinds(l);
            expected.iter().all(|(k, n)| got.get(*k).unwrap_or(&0) >= n)
                && got.get("idea.updated").unwrap_or(&0) >= &2
                && got.get("contact.updated").unwrap_or(&0) >= &2
        })
        .await;
    all_verified_and_duplicates_alike(&log);
    in_order_per_subject(&log);
    let got = kinds(&log);
    for (k, n) in &expected {
        assert_eq!(got[*k], *n, "{k}: {got:?}");
    }
    receiver
        .until(
            "doomed",
            "app.deletion.started",
            Duration::from_secs(30),
            |l| firsts(l).iter().any(|d| d.kind() == "app.deletion.started"),
        )
        .await;

    // Every endpoint got at least one event of each type it subscribed to (among those
    // caused), and nothing else. Each endpoint's lanes deliver on their own (an endpoint's last
    // delivery may still be on its way after "all" got everything), so each is waited for.
    let all_types: BTreeSet<String> = got.keys().cloned().collect();
    let types_of = |log: &[Delivery]| -> BTreeSet<String> { kinds(log).keys().cloned().collect() };
    for (name, hook) in &subscribed {
        let wanted: BTreeSet<String> = hook["eventTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        let wanted = if wanted.contains("*") {
            all_types.clone()
        } else {
            wanted.intersection(&all_types).cloned().collect()
        };
        let filtered = hook["filters"].as_object().is_some_and(|f| !f.is_empty());
        let log = if filtered {
            receiver.log(name, false).await
        } else {
            let every = |l: &[Delivery]| types_of(l).is_superset(&wanted);
            receiver
                .until(name, "its types", Duration::from_secs(30), every)
                .await
        };
        all_verified_and_duplicates_alike(&log);
        let types = types_of(&log);
        if filtered {
            assert!(
                types.is_subset(&wanted),
                "{name}: {types:?} not within {wanted:?}"
            );
        } else {
            assert_eq!(types, wanted, "{name}");
        }
    }
    // A filtered endpoint gets exactly the subjects its filter lets through.
    let subjects_of = |l: &[Delivery]| -> BTreeSet<String> {
        firsts(l).iter().map(|d| d.subject().to_owned()).collect()
    };
    for (name, subjects) in [
        ("board-b", &caused.ideas_b),
        ("survey-2", &caused.survey_2_responses),
        ("customers", &caused.contacts_customer),
    ] {
        let wanted: BTreeSet<String> = subjects.iter().cloned().collect();
        let every = |l: &[Delivery]| subjects_of(l).is_superset(&wanted);
        let within = Duration::from_secs(30);
        let log = receiver.until(name, "its subjects", within, every).await;
        assert_eq!(subjects_of(&log), wanted, "{name}");
    }
    let some = |l: &[Delivery]| !firsts(l).is_empty();
    let comments = receiver
        .until("comments", "a comment", Duration::from_secs(30), some)
        .await;
    let comments = firsts(&comments)
        .iter()
        .map(|d| d.data["comment"]["internal"].clone())
        .collect::<Vec<_>>();
    assert_eq!(
        comments,
        [json!(false)],
        "internal comments only where asked for"
    );

    // Who made each change, and what a status change says.
    let firsts_all = firsts(&log);
    let of = |kind: &str| -> Vec<&&Delivery> {
        firsts_all.iter().filter(|d| d.kind() == kind).collect()
    };
    assert_eq!(of("idea.created")[0].actor["type"], "apiKey");
    let updates = of("idea.updated");
    let by_user: Vec<_> = updates
        .iter()
        .filter(|d| d.actor["type"] == "user")
        .collect();
    assert!(
        !by_user.is_empty(),
        "the dashboard's status change: {updates:?}"
    );
    assert!(
        by_user[0].data["statusChange"]["to"].is_string()
            || by_user[0].data["statusChange"]["to"].is_object()
    );
    let by_key = updates
        .iter()
        .find(|d| d.subject() == caused.ideas[0] && d.actor["type"] == "apiKey")
        .expect("the API's status change");
    assert!(!by_key.data["statusChange"].is_null(), "{:?}", by_key.data);
    assert_eq!(of("survey.response.created")[0].actor["type"], "visitor");
    let completed = of("survey.response.completed");
    let scores: BTreeSet<String> = completed
        .iter()
        .map(|d| d.data["score"].to_string())
        .collect();
    assert!(scores.contains("9") || scores.contains("9.0"), "{scores:?}");
    let merged = of("idea.merged")[0];
    assert_eq!(merged.subject(), caused.ideas[2]);
    assert_eq!(merged.data["into"]["id"], caused.ideas[0].as_str());
}
