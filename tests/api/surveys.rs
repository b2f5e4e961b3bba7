//! Surveys end to end: the admin API (create, edit, transitions, delete, validation, plan
//! limit) and the public reads (active only, filters, cursor), with tenant isolation.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

/// A fresh app on `plan`; returns (appId, key with surveys:read).
async fn surveys_app(app: &TestApp, plan: &str) -> (String, String) {
    let (id, _) = app.create_app(plan).await;
    let key = app.create_key(&id, &["surveys:read"]).await.1;
    (id, key)
}

fn nps(title: &str) -> Value {
    json!({
        "title": title,
        "type": "nps",
        "questions": [
            {"id": "score", "text": "How likely are you to recommend us?", "type": "scale"},
            {"id": "why", "text": "Why?", "type": "text", "required": false}
        ],
        "targeting": {"percentage": 25, "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}]}
    })
}

/// The NPS fixture shown to every visitor (no sampling, no rule), for tests that answer it.
fn nps_for_all(title: &str) -> Value {
    let mut body = nps(title);
    body["targeting"] = json!({"percentage": 100});
    body
}

fn poll(title: &str) -> Value {
    json!({
        "title": title,
        "type": "poll",
        "questions": [{"id": "pick", "text": "Which?", "type": "multiple_choice",
            "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}]
    })
}

async fn create(app: &TestApp, app_id: &str, body: Value) -> Value {
    let a = app
        .admin(Method::POST, &format!("/apps/{app_id}/surveys"), Some(body))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    a.data().clone()
}

async fn transition(app: &TestApp, app_id: &str, id: &str, status: &str) -> Answer {
    app.admin(
        Method::POST,
        &format!("/apps/{app_id}/surveys/{id}/transition"),
        Some(json!({"status": status})),
    )
    .await
}

pub(crate) async fn moved(app: &TestApp, app_id: &str, id: &str, status: &str) {
    let a = transition(app, app_id, id, status).await;
    assert_eq!(a.status, 200, "{status}: {}", a.body);
    assert_eq!(a.data()["status"], status);
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_survey_is_created_in_draft_with_every_field() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "pro").await;
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/surveys"),
            Some(nps("NPS Q4")),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let s = a.data();
    let id = id_of(s);
    assert_eq!(
        a.header("location"),
        Some(format!("/admin/v1/apps/{app_id}/surveys/{id}").as_str())
    );
    assert_eq!(s["status"], "draft");
    assert_eq!(s["type"], "nps");
    assert_eq!(s["boardId"], Value::Null);
    assert_eq!(s["responseCount"], 0);
    assert_eq!(s["targeting"]["percentage"], 25.0);
    assert_eq!(s["targeting"]["attributes"][0]["operator"], "equals");
    assert_eq!(s["questions"][0]["min"], 0);
    assert_eq!(s["questions"][0]["max"], 10);
    assert_eq!(s["questions"][0]["required"], true);
    assert_eq!(s["questions"][1]["required"], false);
    for f in ["createdAt", "updatedAt"] {
        assert!(s[f].as_str().unwrap().ends_with('Z'), "{f}");
    }
    let got = app
        .admin(Method::GET, &format!("/apps/{app_id}/surveys/{id}"), None)
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.data(), s);
}

#[tokio::test]
async fn every_invalid_field_is_400_with_details_naming_it() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "pro").await;
    let path = format!("/apps/{app_id}/surveys");
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({}), vec!["questions", "title", "type"]),
        (
            json!({"title": 3, "type": "quiz", "questions": [], "color": "red"}),
            vec!["color", "questions", "title", "type"],
        ),
        (
            json!({"title": "t", "type": "poll", "questions": [
                {"id": "a", "text": "Pick", "type": "single_choice"},
                {"id": "b", "text": "Pick", "type": "single_choice", "options": [{"id": "x", "label": "X"}, {"id": "x", "label": "Y"}]},
                {"id": "c", "text": "Pick", "type": "multiple_choice", "options": [{"id": "x"}, {"id": "y", "label": "Y"}]},
                {"id": "c", "text": "", "type": "stars"}
            ]}),
            vec![
                "questions[0].options",
                "questions[1].options[1].id",
                "questions[2].options[0].label",
                "questions[3].text",
                "questions[3].type",
            ],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [
                {"id": "a", "text": "Say", "type": "text", "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}], "min": 1}
            ]}),
            vec!["questions[0].min", "questions[0].options"],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [
                {"id": "a", "text": "Say", "type": "text"}, {"id": "a", "text": "Again", "type": "text"}
            ]}),
            vec!["questions[1].id"],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [{"text": "Say", "type": "text"}],
            "targeting": {"percentage": 0, "attributes": [
                {"key": "plan", "operator": "like", "value": "pro"},
                {"key": "seats", "operator": "greaterThan", "value": "ten"},
                {"key": "", "operator": "isSet"},
                {"key": "email", "operator": "endsWith"}
            ]}}),
            vec![
                "targeting.attributes[0].operator",
                "targeting.attributes[1].value",
                "targeting.attributes[2].key",
                "targeting.attributes[3].value",
                "targeting.percentage",
            ],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [{"text": "Say", "type": "text"}],
                "targeting": {"percentage": 100.5}}),
            vec!["targeting.percentage"],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [{"text": "Say", "type": "text"}],
            "targeting": {"urls": [
                {"operator": "matchesRegex", "value": "/pricing"},
                {"operator": "contains", "value": " "},
                "/blog",
                {"operator": "equals", "value": 3},
                {"operator": "endsWith", "value": "x".repeat(501)},
                {"operator": "startsWith", "value": "/a", "caseSensitive": false},
                {"operator": "contains"}
            ]}}),
            vec![
                "targeting.urls[0].operator",
                "targeting.urls[1].value",
                "targeting.urls[2]",
                "targeting.urls[3].value",
                "targeting.urls[4].value",
                "targeting.urls[5].caseSensitive",
                "targeting.urls[6].value",
            ],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [{"text": "Say", "type": "text"}],
                "targeting": {"urls": vec![json!({"operator": "contains", "value": "/a"}); 21]}}),
            vec!["targeting.urls"],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [{"text": "Say", "type": "text"}],
                "targeting": {"urls": {"operator": "contains", "value": "/a"}}}),
            vec!["targeting.urls"],
        ),
        (
            json!({"title": "t", "type": "open", "boardId": "000000000000000000000000",
                "questions": [{"text": "Say", "type": "text"}]}),
            vec!["boardId"],
        ),
        // The type conventions.
        (
            json!({"title": "t", "type": "nps", "questions": [{"text": "Rate", "type": "scale", "min": 1, "max": 5}]}),
            vec!["questions[0]"],
        ),
        (
            json!({"title": "t", "type": "nps", "questions": [{"text": "Rate", "type": "rating"}]}),
            vec!["questions[0]"],
        ),
        (
            json!({"title": "t", "type": "csat", "questions": [{"text": "Rate", "type": "scale"}]}),
            vec!["questions[0]"],
        ),
        (
            json!({"title": "t", "type": "csat", "questions": [
                {"id": "a", "text": "Rate", "type": "rating"}, {"id": "b", "text": "Again", "type": "rating"}]}),
            vec!["questions"],
        ),
        (
            json!({"title": "t", "type": "pmf", "questions": [{"text": "How?", "type": "single_choice",
                "options": [{"id": "very_disappointed", "label": "Very"}, {"id": "meh", "label": "Meh"}]}]}),
            vec!["questions[0]"],
        ),
        (
            json!({"title": "t", "type": "poll", "questions": [{"text": "Say", "type": "text"}]}),
            vec!["questions[0].type"],
        ),
        (
            json!({"title": "t", "type": "open", "questions": [{"text": "Rate", "type": "rating"}]}),
            vec!["questions[0].type"],
        ),
    ];
    for (body, fields) in cases {
        let a = app.admin(Method::POST, &path, Some(body.clone())).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), fields, "{body}: {}", a.body);
    }
    // The conventions, met: csat and pmf as api.md §4 describes them.
    create(
        &app,
        &app_id,
        json!({"title": "CSAT", "type": "csat", "questions": [{"text": "How satisfied?", "type": "rating"}]}),
    )
    .await;
    create(
        &app,
        &app_id,
        json!({"title": "PMF", "type": "pmf", "questions": [{"text": "How would you feel?", "type": "single_choice",
            "options": [{"id": "very_disappointed", "label": "Very disappointed"},
                {"id": "somewhat_disappointed", "label": "Somewhat disappointed"},
                {"id": "not_disappointed", "label": "Not disappointed"}]}]}),
    )
    .await;
    // Nothing invalid was stored.
    let list = app.admin(Method::GET, &path, None).await;
    assert_eq!(list.data().as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_survey_names_a_board_of_its_app() {
    let app = spawn_app();
    let (app_id, key) = surveys_app(&app, "pro").await;
    let (other, _) = surveys_app(&app, "pro").await;
    let boards = app
        .admin(Method::GET, &format!("/apps/{app_id}/boards"), None)
        .await;
    let board = boards.data()[0]["id"].as_str().unwrap().to_owned();
    let mut body = poll("On a board");
    body["boardId"] = json!(board);
    let s = create(&app, &app_id, body.clone()).await;
    assert_eq!(s["boardId"], board.as_str());
    // Another app's board is refused.
    let a = app
        .admin(Method::POST, &format!("/apps/{other}/surveys"), Some(body))
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["boardId"]);
    // The public list filters by board.
    moved(&app, &app_id, &id_of(&s), "active").await;
    let list = app
        .api(
            &key,
            Method::GET,
            &format!("/api/v1/surveys?boardId={board}"),
            None,
        )
        .await;
    assert_eq!(list.data().as_array().unwrap().len(), 1);
    let bad = app
        .api(
            &key,
            Method::GET,
            "/api/v1/surveys?boardId=000000000000000000000000",
            None,
        )
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["boardId"]);
}

#[tokio::test]
async fn every_illegal_transition_is_409_naming_the_allowed_moves() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "pro").await;
    let legal: HashSet<(&str, &str)> = [
        ("draft", "active"),
        ("active", "paused"),
        ("paused", "active"),
        ("active", "closed"),
        ("paused", "closed"),
    ]
    .into();
    // The path that reaches each status from a fresh draft.
    let reach = |s: &str| -> Vec<&'static str> {
        match s {
            "draft" => vec![],
            "active" => vec!["active"],
            "paused" => vec!["active", "paused"],
            _ => vec!["active", "closed"],
        }
    };
    let all = ["draft", "active", "paused", "closed"];
    for from in all {
        for to in all {
            let s = create(&app, &app_id, poll(&format!("{from} -> {to}"))).await;
            let id = id_of(&s);
            for step in reach(from) {
                moved(&app, &app_id, &id, step).await;
            }
            let a = transition(&app, &app_id, &id, to).await;
            if legal.contains(&(from, to)) {
                assert_eq!(a.status, 200, "{from} -> {to}: {}", a.body);
                assert_eq!(a.data()["status"], to);
            } else {
                a.assert_error(409, "CONFLICT");
                let m = a.body["error"]["message"].as_str().unwrap();
                assert!(m.contains("allowed"), "{from} -> {to}: {m}");
                let allowed: Vec<&str> = all
                    .into_iter()
                    .filter(|t| legal.contains(&(from, *t)))
                    .collect();
                for t in &allowed {
                    assert!(m.contains(t), "{from} -> {to}: {m} does not name {t}");
                }
            }
            // Active and paused surveys are closed to keep the plan's slots free.
            let now = app
                .admin(Method::GET, &format!("/apps/{app_id}/surveys/{id}"), None)
                .await;
            if matches!(now.data()["status"].as_str(), Some("active" | "paused")) {
                moved(&app, &app_id, &id, "closed").await;
            }
        }
    }
    // A bad status is 400, not 409.
    let s = create(&app, &app_id, poll("bad")).await;
    for body in [
        json!({"status": "archived"}),
        json!({}),
        json!({"status": "active", "x": 1}),
    ] {
        let a = app
            .admin(
                Method::POST,
                &format!("/apps/{app_id}/surveys/{}/transition", id_of(&s)),
                Some(body),
            )
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
    }
}

#[tokio::test]
async fn questions_are_editable_only_in_draft_and_nothing_once_closed() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "pro").await;
    let s = create(&app, &app_id, poll("Poll")).await;
    let path = format!("/apps/{app_id}/surveys/{}", id_of(&s));
    let questions = json!([{"id": "pick", "text": "Which one?", "type": "single_choice",
        "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}]}]);
    let a = app
        .admin(
            Method::PATCH,
            &path,
            Some(json!({"questions": questions, "title": "Renamed"})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data()["title"], "Renamed");
    assert_eq!(a.data()["questions"][0]["options"][2]["id"], "c");
    // A PATCH that breaks the conventions is 400 and changes nothing.
    let bad = app
        .admin(
            Method::PATCH,
            &path,
            Some(json!({"questions": [{"text": "Say", "type": "text"}]})),
        )
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["questions[0].type"]);
    moved(&app, &app_id, &id_of(&s), "active").await;
    let a = app
        .admin(Method::PATCH, &path, Some(json!({"questions": questions})))
        .await;
    a.assert_error(409, "CONFLICT");
    let a = app
        .admin(
            Method::PATCH,
            &path,
            Some(json!({"title": "Live", "targeting": {"percentage": 50}})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data()["title"], "Live");
    assert_eq!(
        a.data()["targeting"],
        json!({"percentage": 50.0, "attributes": [], "urls": []})
    );
    moved(&app, &app_id, &id_of(&s), "closed").await;
    let a = app
        .admin(Method::PATCH, &path, Some(json!({"title": "Late"})))
        .await;
    a.assert_error(409, "CONFLICT");
    let now = app.admin(Method::GET, &path, None).await;
    assert_eq!(now.data()["title"], "Live");
}

#[tokio::test]
async fn only_drafts_can_be_deleted() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "pro").await;
    let draft = create(&app, &app_id, poll("Draft")).await;
    let path = format!("/apps/{app_id}/surveys/{}", id_of(&draft));
    let a = app.admin(Method::DELETE, &path, None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data(), &json!({"id": id_of(&draft), "deleted": true}));
    app.admin(Method::DELETE, &path, None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.admin(Method::GET, &path, None)
        .await
        .assert_error(404, "NOT_FOUND");
    let live = create(&app, &app_id, poll("Live")).await;
    let path = format!("/apps/{app_id}/surveys/{}", id_of(&live));
    for step in ["active", "paused", "closed"] {
        moved(&app, &app_id, &id_of(&live), step).await;
        let a = app.admin(Method::DELETE, &path, None).await;
        a.assert_error(409, "CONFLICT");
    }
}

#[tokio::test]
async fn the_free_plan_runs_one_survey_at_a_time() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "free").await;
    let first = id_of(&create(&app, &app_id, poll("First")).await);
    let second = id_of(&create(&app, &app_id, poll("Second")).await);
    moved(&app, &app_id, &first, "active").await;
    let a = transition(&app, &app_id, &second, "active").await;
    a.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "active_surveys", "message": "limit 1, current 1"}])
    );
    // A paused survey keeps its slot; pausing and resuming it is no new activation.
    moved(&app, &app_id, &first, "paused").await;
    transition(&app, &app_id, &second, "active")
        .await
        .assert_error(403, "PLAN_LIMIT_REACHED");
    moved(&app, &app_id, &first, "active").await;
    // Closing frees the slot.
    moved(&app, &app_id, &first, "closed").await;
    moved(&app, &app_id, &second, "active").await;
}

#[tokio::test]
async fn the_public_list_shows_only_active_surveys() {
    let app = spawn_app();
    let (app_id, key) = surveys_app(&app, "pro").await;
    let draft = id_of(&create(&app, &app_id, poll("Draft")).await);
    let active = id_of(&create(&app, &app_id, poll("Active")).await);
    let paused = id_of(&create(&app, &app_id, poll("Paused")).await);
    let closed = id_of(&create(&app, &app_id, poll("Closed")).await);
    let active_nps = id_of(&create(&app, &app_id, nps("NPS")).await);
    moved(&app, &app_id, &active, "active").await;
    moved(&app, &app_id, &active_nps, "active").await;
    for step in ["active", "paused"] {
        moved(&app, &app_id, &paused, step).await;
    }
    for step in ["active", "closed"] {
        moved(&app, &app_id, &closed, step).await;
    }
    let list = app.api(&key, Method::GET, "/api/v1/surveys", None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    let ids: Vec<&str> = list
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    // Newest first by default.
    assert_eq!(ids, [active_nps.as_str(), active.as_str()]);
    assert_eq!(
        list.body["pagination"],
        json!({"limit": 20, "nextCursor": null, "hasMore": false})
    );
    let typed = app
        .api(&key, Method::GET, "/api/v1/surveys?type=nps,csat", None)
        .await;
    assert_eq!(typed.data().as_array().unwrap().len(), 1);
    assert_eq!(typed.data()[0]["id"], active_nps.as_str());
    let oldest = app
        .api(&key, Method::GET, "/api/v1/surveys?sort=createdAt", None)
        .await;
    assert_eq!(oldest.data()[0]["id"], active.as_str());
    for id in [&draft, &paused, &closed] {
        app.api(&key, Method::GET, &format!("/api/v1/surveys/{id}"), None)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    let one = app
        .api(
            &key,
            Method::GET,
            &format!("/api/v1/surveys/{active}"),
            None,
        )
        .await;
    assert_eq!(one.status, 200);
    assert_eq!(one.data()["status"], "active");
    // Bad filters, sorts, limits and cursors are 400 naming them.
    for (q, field) in [
        ("type=quiz", "type"),
        ("sort=title", "sort"),
        ("limit=0", "limit"),
        ("cursor=nope", "cursor"),
        ("status=draft", "status"),
    ] {
        let a = app
            .api(&key, Method::GET, &format!("/api/v1/surveys?{q}"), None)
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field], "{q}");
    }
    // The admin list shows every status and filters by status and type.
    let admin = |q: &'static str| {
        let path = format!("/apps/{app_id}/surveys{q}");
        let app = &app;
        async move { app.admin(Method::GET, &path, None).await }
    };
    assert_eq!(admin("").await.data().as_array().unwrap().len(), 5);
    let d = admin("?status=draft,closed").await;
    let got: HashSet<&str> = d
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, HashSet::from([draft.as_str(), closed.as_str()]));
    assert_eq!(admin("?type=nps").await.data().as_array().unwrap().len(), 1);
    admin("?status=archived")
        .await
        .assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn the_public_api_needs_the_surveys_read_permission() {
    let app = spawn_app();
    let (app_id, _) = surveys_app(&app, "pro").await;
    let (_, key) = app.create_key(&app_id, &["ideas:read"]).await;
    let a = app.api(&key, Method::GET, "/api/v1/surveys", None).await;
    a.assert_error(403, "FORBIDDEN");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "permission", "message": "surveys:read required"}])
    );
    app.send(Method::GET, "/api/v1/surveys", &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn a_cursor_walk_sees_every_active_survey_once() {
    let app = spawn_app();
    let (app_id, key) = surveys_app(&app, "enterprise").await;
    let mut made = HashSet::new();
    for n in 0..23 {
        let id = id_of(&create(&app, &app_id, poll(&format!("Poll {n}"))).await);
        moved(&app, &app_id, &id, "active").await;
        made.insert(id);
    }
    // Drafts between them are never walked.
    for n in 0..3 {
        create(&app, &app_id, poll(&format!("Draft {n}"))).await;
    }
    for sort in ["-createdAt", "createdAt", "-updatedAt", "responseCount"] {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut path = format!("/api/v1/surveys?limit=5&sort={sort}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let a = app.api(&key, Method::GET, &path, None).await;
            assert_eq!(a.status, 200, "{}", a.body);
            pages += 1;
            seen.extend(
                a.data()
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["id"].as_str().unwrap().to_owned()),
            );
            let p = &a.body["pagination"];
            assert_eq!(p["limit"], 5);
            match p["nextCursor"].as_str() {
                Some(c) => {
                    assert_eq!(p["hasMore"], true);
                    cursor = Some(c.to_owned());
                }
                None => {
                    assert_eq!(p["hasMore"], false);
                    break;
                }
            }
        }
        assert_eq!(pages, 5, "{sort}");
        assert_eq!(seen.len(), 23, "{sort}");
        assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), made, "{sort}");
    }
    // A cursor of one sort order, or of another app, is refused.
    let first = app
        .api(&key, Method::GET, "/api/v1/surveys?limit=5", None)
        .await;
    let c = first.body["pagination"]["nextCursor"].as_str().unwrap();
    let a = app
        .api(
            &key,
            Method::GET,
            &format!("/api/v1/surveys?limit=5&sort=createdAt&cursor={c}"),
            None,
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["cursor"]);
    let (_, other_key) = surveys_app(&app, "pro").await;
    let a = app
        .api(
            &other_key,
            Method::GET,
            &format!("/api/v1/surveys?limit=5&cursor={c}"),
            None,
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn another_apps_survey_is_not_found_anywhere() {
    let app = spawn_app();
    let (mine, _) = surveys_app(&app, "pro").await;
    let (theirs, their_key) = surveys_app(&app, "pro").await;
    let s = id_of(&create(&app, &mine, poll("Mine")).await);
    moved(&app, &mine, &s, "active").await;
    let foreign = format!("/apps/{theirs}/surveys/{s}");
    app.admin(Method::GET, &foreign, None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.admin(Method::PATCH, &foreign, Some(json!({"title": "Hijack"})))
        .await
        .assert_error(404, "NOT_FOUND");
    transition(&app, &theirs, &s, "paused")
        .await
        .assert_error(404, "NOT_FOUND");
    app.admin(Method::DELETE, &foreign, None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(
        &their_key,
        Method::GET,
        &format!("/api/v1/surveys/{s}"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    let list = app
        .api(&their_key, Method::GET, "/api/v1/surveys", None)
        .await;
    assert_eq!(list.data(), &json!([]));
    // An unknown app is 404 too.
    app.admin(Method::GET, "/apps/000000000000000000000000/surveys", None)
        .await
        .assert_error(404, "NOT_FOUND");
    // The survey is unchanged.
    let mine_now = app
        .admin(Method::GET, &format!("/apps/{mine}/surveys/{s}"), None)
        .await;
    assert_eq!(mine_now.data()["title"], "Mine");
    assert_eq!(mine_now.data()["status"], "active");
}

#[tokio::test]
async fn surveys_survive_a_restart() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("free").await;
    let key = app.create_key(&app_id, &["surveys:read"]).await.1;
    let s = id_of(&create(&app, &app_id, nps_for_all("NPS")).await);
    moved(&app, &app_id, &s, "active").await;
    let other = id_of(&create(&app, &app_id, poll("Other")).await);
    let body =
        json!({"anonymousId": anon("kept"), "answers": [{"questionId": "score", "value": 8}]});
    assert_eq!(answer(&app, &ik, &s, body.clone()).await.status, 201);
    let app = app.restart().await;
    assert_eq!(
        answer(&app, &ik, &s, body).await.status,
        200,
        "the visitor is remembered"
    );
    assert_eq!(survey_count(&app, &key, &s).await, 1);
    let one = app
        .api(&key, Method::GET, &format!("/api/v1/surveys/{s}"), None)
        .await;
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.data()["questions"][0]["id"], "score");
    // The count of live surveys survives too.
    transition(&app, &app_id, &other, "active")
        .await
        .assert_error(403, "PLAN_LIMIT_REACHED");
}

#[tokio::test]
async fn the_openapi_document_describes_the_survey_routes() {
    let app = spawn_app();
    let doc = app.send(Method::GET, "/openapi.json", &[], None).await.body;
    for (path, method) in [
        ("/api/v1/surveys", "get"),
        ("/api/v1/surveys/{id}", "get"),
        ("/admin/v1/apps/{appId}/surveys", "get"),
        ("/admin/v1/apps/{appId}/surveys", "post"),
        ("/admin/v1/apps/{appId}/surveys/{surveyId}", "get"),
        ("/admin/v1/apps/{appId}/surveys/{surveyId}", "patch"),
        ("/admin/v1/apps/{appId}/surveys/{surveyId}", "delete"),
        (
            "/admin/v1/apps/{appId}/surveys/{surveyId}/transition",
            "post",
        ),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} missing from openapi.json"
        );
    }
    let list = &doc["paths"]["/api/v1/surveys"]["get"]["responses"]["200"]["content"]
        ["application/json"]["schema"];
    let text = list.to_string();
    assert!(text.contains("pagination"), "{text}");
    assert!(doc["components"]["schemas"]["Survey"].is_object());
}

/// A fresh pro app with an active NPS survey; returns (appId, integration key, key with
/// surveys:read and responses:read, survey id).
pub(crate) async fn live_nps(app: &TestApp) -> (String, String, String, String) {
    let (app_id, ik) = app.create_app("pro").await;
    let key = app
        .create_key(&app_id, &["surveys:read", "responses:read"])
        .await
        .1;
    let id = id_of(&create(app, &app_id, nps_for_all("NPS")).await);
    moved(app, &app_id, &id, "active").await;
    (app_id, ik, key, id)
}

pub(crate) async fn answer(app: &TestApp, ik: &str, survey: &str, body: Value) -> Answer {
    app.send(
        Method::POST,
        &format!("/api/w/surveys/{survey}/responses"),
        &[("x-app-key", ik), ("user-agent", "widget-test/1.0")],
        Some(body),
    )
    .await
}

#[tokio::test]
async fn the_widget_decodes_a_gzip_body_and_refuses_other_encodings() {
    use std::io::Write;
    let app = spawn_app();
    let (_, ik, key, id) = live_nps(&app).await;
    let body = json!({"anonymousId": anon("gz"), "answers": [{"questionId": "score", "value": 9}]});
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(body.to_string().as_bytes()).unwrap();
    let path = format!("/api/w/surveys/{id}/responses");
    let send = |encoding: &'static str, bytes: Vec<u8>| {
        let (app, path, ik) = (&app, &path, &ik);
        async move {
            let headers = [
                ("x-app-key", ik.as_str()),
                ("content-type", "application/json"),
                ("content-encoding", encoding),
            ];
            app.raw(Method::POST, path, &headers, bytes).await
        }
    };
    let made = send("gzip", e.finish().unwrap()).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let refused = send("br", body.to_string().into_bytes()).await;
    refused.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(refused.fields(), ["Content-Encoding"]);
    assert_eq!(survey_count(&app, &key, &id).await, 1);
}

async fn survey_count(app: &TestApp, key: &str, id: &str) -> u64 {
    let a = app
        .api(key, Method::GET, &format!("/api/v1/surveys/{id}"), None)
        .await;
    a.data()["responseCount"].as_u64().unwrap()
}

#[tokio::test]
async fn one_response_per_visitor_completed_later_and_counted_once() {
    let app = spawn_app();
    let (_, ik, key, id) = live_nps(&app).await;
    let partial = json!({"anonymousId": anon("anon-1"), "completed": false,
        "answers": [{"questionId": "why", "value": "Fast"}],
        "metadata": {"url": "https://example.com/pricing", "device": "desktop", "locale": "en-GB"}});
    let a = answer(&app, &ik, &id, partial).await;
    assert_eq!(a.status, 201, "{}", a.body);
    let r = a.data().clone();
    assert!(r["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(r["surveyId"], id.as_str());
    assert_eq!(r["completed"], false);
    assert_eq!(r["score"], Value::Null);
    assert_eq!(r["userId"], Value::Null);
    assert_eq!(
        r["metadata"],
        json!({"url": "https://example.com/pricing", "device": "desktop", "locale": "en-GB", "userAgent": "widget-test/1.0"})
    );
    assert_eq!(survey_count(&app, &key, &id).await, 1);
    // Completing without the required score is refused.
    let a = answer(
        &app,
        &ik,
        &id,
        json!({"anonymousId": anon("anon-1"), "answers": []}),
    )
    .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["answers.score"]);
    let a = answer(
        &app,
        &ik,
        &id,
        json!({"anonymousId": anon("anon-1"), "answers": [{"questionId": "score", "value": 9}]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data()["id"], r["id"]);
    assert_eq!(a.data()["completed"], true);
    assert_eq!(a.data()["score"], 9.0);
    assert_eq!(
        a.data()["answers"],
        json!([{"questionId": "score", "type": "scale", "value": 9},
               {"questionId": "why", "type": "text", "value": "Fast"}])
    );
    assert_eq!(a.data()["metadata"]["url"], "https://example.com/pricing");
    assert_eq!(survey_count(&app, &key, &id).await, 1);
    // Another visitor counts.
    let b = answer(
        &app,
        &ik,
        &id,
        json!({"anonymousId": anon("anon-2"), "userId": "u2", "answers": [{"questionId": "score", "value": 3}]}),
    )
    .await;
    assert_eq!(b.status, 201, "{}", b.body);
    assert_eq!(b.data()["userId"], "u2");
    assert_eq!(survey_count(&app, &key, &id).await, 2);
    // A response belongs to the device (anonymousId) that made it: the same userId on another
    // device is another response.
    let c = answer(
        &app,
        &ik,
        &id,
        json!({"anonymousId": anon("anon-3"), "userId": "u2", "answers": [{"questionId": "score", "value": 4}]}),
    )
    .await;
    assert_eq!(c.status, 201, "{}", c.body);
    assert_ne!(c.data()["id"], b.data()["id"]);
    assert_eq!(survey_count(&app, &key, &id).await, 3);
    let list = app
        .api(
            &key,
            Method::GET,
            &format!("/api/v1/surveys/{id}/responses"),
            None,
        )
        .await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.data().as_array().unwrap().len(), 3);
}

/// The responses of survey `id` given by `anonymous_id`.
async fn responses_of(app: &TestApp, key: &str, id: &str, anonymous_id: &str) -> Vec<Value> {
    let a = app
        .api(
            key,
            Method::GET,
            &format!("/api/v1/surveys/{id}/responses?anonymousId={anonymous_id}"),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.data().as_array().unwrap().clone()
}

#[tokio::test]
async fn a_visitor_claiming_another_users_id_cannot_replace_their_answers() {
    let app = spawn_app();
    let (_, ik, key, id) = live_nps(&app).await;
    let (victim, attacker) = (anon("victim-laptop"), anon("attacker"));
    let mine = json!({"anonymousId": victim, "userId": "victim",
        "answers": [{"questionId": "score", "value": 10}, {"questionId": "why", "value": "Love it"}]});
    let first = answer(&app, &ik, &id, mine).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let forged = json!({"anonymousId": attacker, "userId": "victim",
        "answers": [{"questionId": "score", "value": 0}, {"questionId": "why", "value": "Awful"}]});
    let a = answer(&app, &ik, &id, forged).await;
    assert_eq!(
        a.status, 201,
        "another visitor makes its own response: {}",
        a.body
    );
    assert_ne!(a.data()["id"], first.data()["id"]);
    let kept = responses_of(&app, &key, &id, &victim).await;
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["id"], first.data()["id"]);
    assert_eq!(kept[0]["score"], 10.0);
    assert_eq!(kept[0]["answers"][1]["value"], "Love it");
    assert_eq!(kept[0]["anonymousId"], victim.as_str());
    // The victim's own device still updates its response.
    let again = json!({"anonymousId": victim, "userId": "victim",
        "answers": [{"questionId": "why", "value": "Still love it"}]});
    let b = answer(&app, &ik, &id, again).await;
    assert_eq!(b.status, 200, "{}", b.body);
    assert_eq!(b.data()["id"], first.data()["id"]);
    assert_eq!(b.data()["score"], 10.0);
    assert_eq!(survey_count(&app, &key, &id).await, 2);
}

#[tokio::test]
async fn a_visitor_outside_the_targeting_cannot_answer() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let key = app.create_key(&app_id, &["responses:read"]).await.1;
    let live = |targeting: Value| {
        let mut body = poll("Targeted");
        body["targeting"] = targeting;
        body
    };
    let pick = json!([{"questionId": "pick", "value": ["a"]}]);
    // Sampling: a visitor the list leaves out of a quarter is refused, one it shows answers.
    let quarter = id_of(&create(&app, &app_id, live(json!({"percentage": 25}))).await);
    moved(&app, &app_id, &quarter, "active").await;
    let (mut inside, mut outside) = (None, None);
    for n in 0..64 {
        let v = anon(&format!("sample-{n}"));
        let shown = eligible(&app, &ik, &format!("anonymousId={v}")).await;
        match shown.contains(&quarter) {
            true => inside = inside.or(Some(v)),
            false => outside = outside.or(Some(v)),
        }
    }
    let (inside, outside) = (inside.unwrap(), outside.unwrap());
    let a = answer(
        &app,
        &ik,
        &quarter,
        json!({"anonymousId": outside, "answers": pick}),
    )
    .await;
    a.assert_error(403, "FORBIDDEN");
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sample"),
        "{}",
        a.body
    );
    let a = answer(
        &app,
        &ik,
        &quarter,
        json!({"anonymousId": inside, "answers": pick}),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // An attribute rule: from the body's attributes (the list's attr.<key>).
    let pro = json!({"percentage": 100, "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}]});
    let pro = id_of(&create(&app, &app_id, live(pro)).await);
    moved(&app, &app_id, &pro, "active").await;
    for attributes in [json!({}), json!({"plan": "free"})] {
        let body = json!({"anonymousId": anon("free"), "answers": pick, "attributes": attributes});
        answer(&app, &ik, &pro, body)
            .await
            .assert_error(403, "FORBIDDEN");
    }
    let body = json!({"anonymousId": anon("pro"), "answers": pick, "attributes": {"plan": "pro"}});
    assert_eq!(answer(&app, &ik, &pro, body).await.status, 201);
    // URL rules: the page the widget reports in metadata.url.
    let pricing =
        json!({"percentage": 100, "urls": [{"operator": "contains", "value": "/pricing"}]});
    let pricing = id_of(&create(&app, &app_id, live(pricing)).await);
    moved(&app, &app_id, &pricing, "active").await;
    let on = |url: Option<&str>, completed: bool| {
        let mut b = json!({"anonymousId": anon("reader"), "completed": completed, "answers": []});
        if let Some(u) = url {
            b["metadata"] = json!({"url": u});
        }
        b
    };
    for url in [None, Some("https://example.com/blog")] {
        answer(&app, &ik, &pricing, on(url, false))
            .await
            .assert_error(403, "FORBIDDEN");
    }
    let a = answer(
        &app,
        &ik,
        &pricing,
        on(Some("https://example.com/pricing"), false),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // An admitted visitor finishes their response from another page.
    let mut done = on(Some("https://example.com/blog"), true);
    done["answers"] = pick.clone();
    let a = answer(&app, &ik, &pricing, done).await;
    assert_eq!(a.status, 200, "{}", a.body);
    for s in [&quarter, &pro, &pricing] {
        let a = app
            .api(
                &key,
                Method::GET,
                &format!("/api/v1/surveys/{s}/responses"),
                None,
            )
            .await;
        assert_eq!(a.data().as_array().unwrap().len(), 1, "{s}");
    }
}

#[tokio::test]
async fn the_widget_takes_the_user_agent_from_the_header_not_the_body() {
    let app = spawn_app();
    let (_, ik, _, id) = live_nps(&app).await;
    let body = json!({"anonymousId": anon("ua"), "answers": [{"questionId": "score", "value": 7}],
        "metadata": {"url": "https://example.com/", "userAgent": "forged/6.6"}});
    let a = answer(&app, &ik, &id, body).await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.data()["metadata"]["userAgent"], "widget-test/1.0");
    assert_eq!(a.data()["metadata"]["url"], "https://example.com/");
}

#[tokio::test]
async fn every_invalid_answer_is_400_naming_the_question() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let body = json!({"title": "Poll", "type": "poll", "questions": [
        {"id": "one", "text": "One?", "type": "single_choice", "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]},
        {"id": "many", "text": "Many?", "type": "multiple_choice", "required": false,
            "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}]}]});
    let poll_id = id_of(&create(&app, &app_id, body).await);
    moved(&app, &app_id, &poll_id, "active").await;
    let open = json!({"title": "Open", "type": "open", "questions": [{"id": "say", "text": "Say", "type": "text"}]});
    let open_id = id_of(&create(&app, &app_id, open).await);
    moved(&app, &app_id, &open_id, "active").await;
    let csat = json!({"title": "CSAT", "type": "csat", "questions": [{"id": "sat", "text": "Happy?", "type": "rating"}]});
    let csat_id = id_of(&create(&app, &app_id, csat).await);
    moved(&app, &app_id, &csat_id, "active").await;
    let v = |q: &str, v: Value| json!({"anonymousId": anon("a1"), "answers": [{"questionId": q, "value": v}]});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (&poll_id, v("one", json!("c")), vec!["answers.one"]),
        (&poll_id, v("one", json!(["a"])), vec!["answers.one"]),
        (
            &poll_id,
            json!({"anonymousId": anon("a1"), "answers": [{"questionId": "one", "value": "a"}, {"questionId": "many", "value": ["x", "z"]}]}),
            vec!["answers.many"],
        ),
        (
            &poll_id,
            json!({"anonymousId": anon("a1"), "answers": [{"questionId": "one", "value": "a"}, {"questionId": "many", "value": ["x", "x"]}]}),
            vec!["answers.many"],
        ),
        (
            &poll_id,
            json!({"anonymousId": anon("a1"), "answers": [{"questionId": "many", "value": ["x"]}]}),
            vec!["answers.one"],
        ),
        (
            &poll_id,
            v("nope", json!("a")),
            vec!["answers.nope", "answers.one"],
        ),
        (
            &open_id,
            v("say", json!("x".repeat(5001))),
            vec!["answers.say"],
        ),
        (&open_id, v("say", json!(3)), vec!["answers.say"]),
        (&open_id, v("say", json!("  ")), vec!["answers.say"]),
        (&csat_id, v("sat", json!(6)), vec!["answers.sat"]),
        (&csat_id, v("sat", json!(0)), vec!["answers.sat"]),
        (&csat_id, v("sat", json!(4.5)), vec!["answers.sat"]),
        (&csat_id, v("sat", json!("4")), vec!["answers.sat"]),
        (
            &csat_id,
            json!({"answers": [{"questionId": "sat", "value": 4}]}),
            vec!["anonymousId"],
        ),
        (
            &csat_id,
            json!({"anonymousId": anon("a1"), "answers": [{"questionId": "sat", "value": 4}], "completed": "yes", "metadata": {"os": "x"}}),
            vec!["completed", "metadata.os"],
        ),
    ];
    for (survey, body, fields) in cases {
        let a = answer(&app, &ik, survey, body.clone()).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), fields, "{body}: {}", a.body);
    }
    // Nothing was stored.
    let admin = app
        .admin(Method::GET, &format!("/apps/{app_id}/surveys"), None)
        .await;
    for s in admin.data().as_array().unwrap() {
        assert_eq!(s["responseCount"], 0, "{s}");
    }
    let ok = answer(&app, &ik, &csat_id, v("sat", json!(5))).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    assert_eq!(ok.data()["score"], 5.0);
}

#[tokio::test]
async fn only_an_active_survey_takes_responses_and_a_paused_ones_stay_readable() {
    let app = spawn_app();
    let (app_id, ik, key, id) = live_nps(&app).await;
    let body =
        json!({"anonymousId": anon("a1"), "answers": [{"questionId": "score", "value": 10}]});
    assert_eq!(answer(&app, &ik, &id, body.clone()).await.status, 201);
    let path = format!("/api/v1/surveys/{id}/responses");
    moved(&app, &app_id, &id, "paused").await;
    answer(&app, &ik, &id, body.clone())
        .await
        .assert_error(409, "CONFLICT");
    let a = app.api(&key, Method::GET, &path, None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data().as_array().unwrap().len(), 1);
    moved(&app, &app_id, &id, "closed").await;
    answer(&app, &ik, &id, body.clone())
        .await
        .assert_error(409, "CONFLICT");
    assert_eq!(app.api(&key, Method::GET, &path, None).await.status, 200);
    // A draft takes none and shows none.
    let draft = id_of(&create(&app, &app_id, nps("Draft")).await);
    answer(&app, &ik, &draft, body.clone())
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(
        &key,
        Method::GET,
        &format!("/api/v1/surveys/{draft}/responses"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    answer(&app, &ik, "000000000000000000000000", body.clone())
        .await
        .assert_error(404, "NOT_FOUND");
    answer(&app, "ik_bad_bad", &id, body)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn responses_are_isolated_between_apps_and_need_their_permission() {
    let app = spawn_app();
    let (_, _, _, id) = live_nps(&app).await;
    let (other, other_ik, other_key, _) = live_nps(&app).await;
    let body =
        json!({"anonymousId": anon("a1"), "answers": [{"questionId": "score", "value": 10}]});
    answer(&app, &other_ik, &id, body)
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(
        &other_key,
        Method::GET,
        &format!("/api/v1/surveys/{id}/responses"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    for tail in ["summary", "responses.csv"] {
        app.api(
            &other_key,
            Method::GET,
            &format!("/api/v1/surveys/{id}/{tail}"),
            None,
        )
        .await
        .assert_error(404, "NOT_FOUND");
    }
    let (_, reader) = app.create_key(&other, &["surveys:read"]).await;
    let a = app
        .api(
            &reader,
            Method::GET,
            &format!("/api/v1/surveys/{id}/responses"),
            None,
        )
        .await;
    a.assert_error(403, "FORBIDDEN");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "permission", "message": "responses:read required"}])
    );
}

#[tokio::test]
async fn a_cursor_walk_over_300_responses_with_filters() {
    let app = spawn_app();
    let (_, ik, key, id) = live_nps(&app).await;
    let mut made = HashSet::new();
    for n in 0..300 {
        let mut body = json!({"anonymousId": anon(&format!("anon-{n}")), "answers": [{"questionId": "score", "value": n % 11}]});
        if n % 3 == 0 {
            body["completed"] = json!(false);
            body["answers"] = json!([{"questionId": "why", "value": "later"}]);
        }
        if n < 5 {
            body["userId"] = json!(format!("user-{n}"));
        }
        let a = answer(&app, &ik, &id, body).await;
        assert_eq!(a.status, 201, "{}", a.body);
        made.insert(a.data()["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(survey_count(&app, &key, &id).await, 300);
    let walk = |query: String| {
        let (app, key, id) = (&app, &key, &id);
        async move {
            let mut seen = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut path = format!("/api/v1/surveys/{id}/responses?limit=100&{query}");
                if let Some(c) = &cursor {
                    path.push_str(&format!("&cursor={c}"));
                }
                let a = app.api(key, Method::GET, &path, None).await;
                assert_eq!(a.status, 200, "{}", a.body);
                seen.extend(
                    a.data()
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r["id"].as_str().unwrap().to_owned()),
                );
                match a.body["pagination"]["nextCursor"].as_str() {
                    Some(c) => cursor = Some(c.to_owned()),
                    None => break seen,
                }
            }
        }
    };
    for sort in ["-createdAt", "createdAt", "-updatedAt"] {
        let seen = walk(format!("sort={sort}")).await;
        assert_eq!(seen.len(), 300, "{sort}");
        assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), made, "{sort}");
    }
    assert_eq!(walk("completed=false".into()).await.len(), 100);
    assert_eq!(walk("completed=true".into()).await.len(), 200);
    assert_eq!(walk("userId=user-1,user-2".into()).await.len(), 2);
    assert_eq!(
        walk(format!("anonymousId={}", anon("anon-7"))).await.len(),
        1
    );
    assert_eq!(walk("since=2000-01-01T00:00:00Z".into()).await.len(), 300);
    assert_eq!(walk("until=2000-01-01T00:00:00Z".into()).await.len(), 0);
    for (q, field) in [
        ("completed=maybe", "completed"),
        ("since=yesterday", "since"),
        ("sort=responseCount", "sort"),
        ("cursor=zzz", "cursor"),
    ] {
        let a = app
            .api(
                &key,
                Method::GET,
                &format!("/api/v1/surveys/{id}/responses?{q}"),
                None,
            )
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field], "{q}");
    }
}

#[tokio::test]
async fn the_free_plan_takes_a_limited_number_of_responses_a_month() {
    let app = spawn_app_with(|s| s.plans.free.responses_per_month = 2);
    let (app_id, ik) = app.create_app("free").await;
    let id = id_of(&create(&app, &app_id, nps_for_all("NPS")).await);
    moved(&app, &app_id, &id, "active").await;
    let body = |n: u32| json!({"anonymousId": anon(&format!("a{n}")), "answers": [{"questionId": "score", "value": 7}]});
    assert_eq!(answer(&app, &ik, &id, body(1)).await.status, 201);
    assert_eq!(answer(&app, &ik, &id, body(2)).await.status, 201);
    let a = answer(&app, &ik, &id, body(3)).await;
    a.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "responses_per_month", "message": "limit 2, current 2"}])
    );
    // An update is no new response.
    assert_eq!(answer(&app, &ik, &id, body(1)).await.status, 200);
}

async fn summary(app: &TestApp, key: &str, id: &str) -> Value {
    let a = app
        .api(
            key,
            Method::GET,
            &format!("/api/v1/surveys/{id}/summary"),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.data().clone()
}

/// Answers survey `id`'s question `q` once per value, one visitor each.
async fn answer_all(app: &TestApp, ik: &str, id: &str, q: &str, values: &[Value]) {
    for (n, v) in values.iter().enumerate() {
        let body = json!({"anonymousId": anon(&format!("v{n}")), "answers": [{"questionId": q, "value": v}]});
        let a = answer(app, ik, id, body).await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
}

#[tokio::test]
async fn the_nps_score_equals_the_hand_computed_one() {
    let app = spawn_app();
    let (app_id, ik, key, id) = live_nps(&app).await;
    // No answers: null.
    let s = summary(&app, &key, &id).await;
    assert_eq!(s["score"], json!({"kind": "nps", "value": null}));
    assert_eq!(s["responseCount"], 0);
    assert_eq!(s["questions"][0]["mean"], Value::Null);
    // 10, 9, 9 promoters; 7, 8 passives; 0, 6 detractors: (3 - 2) / 7 = 14.285..% -> 14.3.
    let values: Vec<Value> = [10, 9, 9, 7, 8, 0, 6]
        .into_iter()
        .map(Value::from)
        .collect();
    answer_all(&app, &ik, &id, "score", &values).await;
    // A partial response without the score changes nothing.
    let partial = json!({"anonymousId": anon("p"), "completed": false, "answers": [{"questionId": "why", "value": "hm"}]});
    assert_eq!(answer(&app, &ik, &id, partial).await.status, 201);
    let s = summary(&app, &key, &id).await;
    assert_eq!(s["surveyId"], id.as_str());
    assert_eq!(s["score"], json!({"kind": "nps", "value": 14.3}));
    assert_eq!(s["responseCount"], 8);
    assert_eq!(s["completedCount"], 7);
    let q = &s["questions"][0];
    assert_eq!(q["questionId"], "score");
    assert_eq!(q["answered"], 7);
    assert_eq!(q["mean"], json!(round2(49.0 / 7.0)));
    assert_eq!(q["distribution"]["9"], 2);
    assert_eq!(q["distribution"]["1"], 0);
    assert_eq!(q["distribution"].as_object().unwrap().len(), 11);
    assert_eq!(
        s["questions"][1],
        json!({"questionId": "why", "answered": 1})
    );
    // Still readable once closed.
    moved(&app, &app_id, &id, "closed").await;
    assert_eq!(summary(&app, &key, &id).await["score"]["value"], 14.3);
    // All promoters: 100; all detractors: -100.
    for (values, expected) in [(vec![9, 10, 10], 100.0), (vec![0, 3, 6], -100.0)] {
        let (_, ik, key, id) = live_nps(&app).await;
        let values: Vec<Value> = values.into_iter().map(Value::from).collect();
        answer_all(&app, &ik, &id, "score", &values).await;
        assert_eq!(summary(&app, &key, &id).await["score"]["value"], expected);
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[tokio::test]
async fn the_csat_and_pmf_scores_equal_the_hand_computed_ones() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("enterprise").await;
    let key = app.create_key(&app_id, &["responses:read"]).await.1;
    let csat = json!({"title": "CSAT", "type": "csat", "questions": [{"id": "sat", "text": "Happy?", "type": "rating"}]});
    let csat = id_of(&create(&app, &app_id, csat).await);
    moved(&app, &app_id, &csat, "active").await;
    assert_eq!(
        summary(&app, &key, &csat).await["score"],
        json!({"kind": "csat", "value": null})
    );
    // 4, 5, 5 satisfied of 6: 50%.
    let values: Vec<Value> = [4, 5, 5, 1, 2, 3].into_iter().map(Value::from).collect();
    answer_all(&app, &ik, &csat, "sat", &values).await;
    let s = summary(&app, &key, &csat).await;
    assert_eq!(s["score"]["value"], 50.0);
    assert_eq!(s["questions"][0]["mean"], json!(round2(20.0 / 6.0)));
    let pmf = json!({"title": "PMF", "type": "pmf", "questions": [{"id": "pmf", "text": "How would you feel?", "type": "single_choice",
        "options": [{"id": "very_disappointed", "label": "Very"}, {"id": "somewhat_disappointed", "label": "Somewhat"},
            {"id": "not_disappointed", "label": "Not"}]}]});
    let pmf = id_of(&create(&app, &app_id, pmf).await);
    moved(&app, &app_id, &pmf, "active").await;
    assert_eq!(
        summary(&app, &key, &pmf).await["score"]["value"],
        Value::Null
    );
    // 1 very of 3: 33.3%.
    let values = [
        json!("very_disappointed"),
        json!("not_disappointed"),
        json!("somewhat_disappointed"),
    ];
    answer_all(&app, &ik, &pmf, "pmf", &values).await;
    let s = summary(&app, &key, &pmf).await;
    assert_eq!(s["score"], json!({"kind": "pmf", "value": 33.3}));
    assert_eq!(
        s["questions"][0]["options"],
        json!([{"id": "very_disappointed", "label": "Very", "count": 1},
               {"id": "somewhat_disappointed", "label": "Somewhat", "count": 1},
               {"id": "not_disappointed", "label": "Not", "count": 1}])
    );
    // A poll has no score; its options count every choice.
    let poll_id = id_of(&create(&app, &app_id, poll("Poll")).await);
    moved(&app, &app_id, &poll_id, "active").await;
    answer_all(
        &app,
        &ik,
        &poll_id,
        "pick",
        &[json!(["a", "b"]), json!(["b"])],
    )
    .await;
    let s = summary(&app, &key, &poll_id).await;
    assert_eq!(s["score"], Value::Null);
    assert_eq!(s["questions"][0]["options"][0]["count"], 1);
    assert_eq!(s["questions"][0]["options"][1]["count"], 2);
    // Drafts have no summary.
    let draft = id_of(&create(&app, &app_id, poll("Draft")).await);
    app.api(
        &key,
        Method::GET,
        &format!("/api/v1/surveys/{draft}/summary"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
}

/// `s` percent-encoded for a query string.
fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn eligible(app: &TestApp, ik: &str, query: &str) -> Vec<String> {
    let a = app
        .send(
            Method::GET,
            &format!("/api/w/surveys?{query}"),
            &[("x-app-key", ik)],
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{query}: {}", a.body);
    a.data()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn sampling_is_deterministic_and_near_the_percentage() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let mut body = poll("A quarter");
    body["targeting"] = json!({"percentage": 25});
    let id = id_of(&create(&app, &app_id, body).await);
    moved(&app, &app_id, &id, "active").await;
    let mut first = Vec::new();
    for n in 0..10_000 {
        let got = eligible(
            &app,
            &ik,
            &format!("anonymousId={}", anon(&format!("visitor-{n}"))),
        )
        .await;
        first.push(got.contains(&id));
    }
    let n = first.iter().filter(|x| **x).count();
    assert!((2_300..=2_700).contains(&n), "{n} of 10 000 eligible");
    // Every visitor gets the same answer on every call.
    for (n, was) in first.iter().enumerate().step_by(7) {
        let got = eligible(
            &app,
            &ik,
            &format!("anonymousId={}", anon(&format!("visitor-{n}"))),
        )
        .await;
        assert_eq!(got.contains(&id), *was, "visitor-{n}");
    }
}

#[tokio::test]
async fn an_identify_through_the_collector_decides_an_attribute_rule() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let mut body = poll("Pro only");
    body["targeting"] = json!({"percentage": 100, "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}]});
    let id = id_of(&create(&app, &app_id, body).await);
    moved(&app, &app_id, &id, "active").await;
    let (pro, free) = (
        "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        "2c5f39cb-3ab2-12e3-994a-0127e4ddb538",
    );
    assert!(eligible(&app, &ik, &format!("anonymousId={pro}"))
        .await
        .is_empty());
    for (anon, user, plan) in [(pro, "u-pro", "pro"), (free, "u-free", "free")] {
        let a = app
            .collect(
                &ik,
                json!({"batch": [{"type": "identify", "userId": user, "anonymousId": anon,
                    "traits": {"plan": plan}}]}),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    // Profiles are written by the collector's shard writers: wait for them.
    let mut shown = Vec::new();
    for _ in 0..100 {
        shown = eligible(&app, &ik, &format!("anonymousId={pro}")).await;
        if !shown.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(shown, vec![id.clone()]);
    assert_eq!(
        eligible(
            &app,
            &ik,
            &format!("anonymousId={}&userId=u-pro", anon("x"))
        )
        .await,
        vec![id.clone()]
    );
    assert!(eligible(&app, &ik, &format!("anonymousId={free}"))
        .await
        .is_empty());
    assert!(eligible(
        &app,
        &ik,
        &format!("anonymousId={}&userId=u-free", anon("x"))
    )
    .await
    .is_empty());
    // Query attributes count too, and override the traits.
    assert_eq!(
        eligible(
            &app,
            &ik,
            &format!("anonymousId={}&attr.plan=pro", anon("new"))
        )
        .await,
        vec![id.clone()]
    );
    assert!(eligible(
        &app,
        &ik,
        &format!("anonymousId={}&userId=u-pro&attr.plan=free", anon("x"))
    )
    .await
    .is_empty());
    // A completed survey is not shown again; a partial one is. The widget's answer tells the
    // attributes it listed the survey with; without them the visitor is outside the rule.
    let unknown = json!({"anonymousId": anon("new"), "completed": false, "answers": []});
    answer(&app, &ik, &id, unknown)
        .await
        .assert_error(403, "FORBIDDEN");
    let partial = json!({"anonymousId": anon("new"), "completed": false, "answers": [],
        "attributes": {"plan": "pro"}});
    assert_eq!(answer(&app, &ik, &id, partial).await.status, 201);
    assert_eq!(
        eligible(
            &app,
            &ik,
            &format!("anonymousId={}&attr.plan=pro", anon("new"))
        )
        .await,
        vec![id.clone()]
    );
    let done =
        json!({"anonymousId": anon("new"), "answers": [{"questionId": "pick", "value": ["a"]}]});
    assert_eq!(answer(&app, &ik, &id, done).await.status, 200);
    assert!(eligible(
        &app,
        &ik,
        &format!("anonymousId={}&attr.plan=pro", anon("new"))
    )
    .await
    .is_empty());
    // Paused surveys are not shown; bad queries are 400; a bad key 401.
    moved(&app, &app_id, &id, "paused").await;
    assert!(eligible(
        &app,
        &ik,
        &format!("anonymousId={}&attr.plan=pro", anon("y"))
    )
    .await
    .is_empty());
    for q in ["", "anonymousId=a&color=red", "anonymousId=not-a-uuid"] {
        app.send(
            Method::GET,
            &format!("/api/w/surveys?{q}"),
            &[("x-app-key", &ik)],
            None,
        )
        .await
        .assert_error(400, "VALIDATION_ERROR");
    }
    app.send(
        Method::GET,
        "/api/w/surveys?anonymousId=a",
        &[("x-app-key", "ik_x_y")],
        None,
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn concurrent_responses_keep_the_count_exact() {
    let app = spawn_app();
    let (_, ik, key, id) = live_nps(&app).await;
    // 40 visitors, each answering three times at once: 40 responses, counted once each.
    let calls = (0..120).map(|n| {
        let body = json!({"anonymousId": anon(&format!("c{}", n % 40)), "answers": [{"questionId": "score", "value": n % 11}]});
        let (app, ik, id) = (&app, &ik, &id);
        async move { answer(app, ik, id, body).await.status.as_u16() }
    });
    let statuses = futures_util::future::join_all(calls).await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        40,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 200),
        "{statuses:?}"
    );
    assert_eq!(survey_count(&app, &key, &id).await, 40);
    let list = app
        .api(
            &key,
            Method::GET,
            &format!("/api/v1/surveys/{id}/responses?limit=100"),
            None,
        )
        .await;
    assert_eq!(list.data().as_array().unwrap().len(), 40);
}

#[tokio::test]
async fn the_widget_sees_only_its_own_apps_surveys() {
    let app = spawn_app();
    let (_, ik, _, id) = live_nps(&app).await;
    let (_, other_ik, _, other_id) = live_nps(&app).await;
    // The NPS fixture targets plan=pro at 25%: 40 visitors with that attribute reach it.
    let mut seen = HashSet::new();
    for n in 0..40 {
        let q = format!("anonymousId={}&attr.plan=pro", anon(&format!("iso-{n}")));
        seen.extend(eligible(&app, &ik, &q).await);
    }
    assert_eq!(seen, HashSet::from([id.clone()]));
    let mut seen = HashSet::new();
    for n in 0..40 {
        let q = format!("anonymousId={}&attr.plan=pro", anon(&format!("iso-{n}")));
        seen.extend(eligible(&app, &other_ik, &q).await);
    }
    assert_eq!(seen, HashSet::from([other_id]));
}

#[tokio::test]
async fn url_rules_show_a_survey_on_matching_pages_only() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let mut body = poll("Pricing pages");
    body["targeting"] = json!({"percentage": 100, "urls": [
        {"operator": "contains", "value": "/pricing"},
        {"operator": "endsWith", "value": "/checkout?step=2"}
    ]});
    let s = create(&app, &app_id, body).await;
    assert_eq!(
        s["targeting"]["urls"],
        json!([{"operator": "contains", "value": "/pricing"},
               {"operator": "endsWith", "value": "/checkout?step=2"}])
    );
    let id = id_of(&s);
    moved(&app, &app_id, &id, "active").await;
    let mut everywhere = poll("Everywhere");
    everywhere["targeting"] = json!({"percentage": 100, "urls": []});
    let all_pages = id_of(&create(&app, &app_id, everywhere).await);
    moved(&app, &app_id, &all_pages, "active").await;
    let mut not_blog = poll("Not on the blog");
    not_blog["targeting"] = json!({"percentage": 100,
        "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}],
        "urls": [{"operator": "doesNotContain", "value": "/blog"}]});
    let not_blog = id_of(&create(&app, &app_id, not_blog).await);
    moved(&app, &app_id, &not_blog, "active").await;

    let visitor = anon("url-visitor");
    let on = |url: &str, extra: &str| {
        let q = format!("anonymousId={visitor}&url={}{extra}", query_value(url));
        let (app, ik) = (&app, &ik);
        async move {
            let mut got = eligible(app, ik, &q).await;
            got.sort();
            got
        }
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // Rules OR together: either matches; no rule means any page.
    assert_eq!(
        on("https://shop.example/pricing", "").await,
        sorted(vec![id.clone(), all_pages.clone()])
    );
    assert_eq!(
        on("https://shop.example/en/pricing?plan=pro#faq", "").await,
        sorted(vec![id.clone(), all_pages.clone()])
    );
    assert_eq!(
        on("https://shop.example/checkout?step=2", "").await,
        sorted(vec![id.clone(), all_pages.clone()])
    );
    assert_eq!(
        on("https://shop.example/blog", "").await,
        vec![all_pages.clone()]
    );
    // The full URL is matched, case-sensitively (as Formbricks does).
    assert_eq!(
        on("https://shop.example/PRICING", "").await,
        vec![all_pages.clone()]
    );
    // URL rules AND with the attribute rules.
    assert_eq!(
        on("https://shop.example/docs", "&attr.plan=pro").await,
        sorted(vec![all_pages.clone(), not_blog.clone()])
    );
    assert_eq!(
        on("https://shop.example/blog/post", "&attr.plan=pro").await,
        vec![all_pages.clone()]
    );
    // Without a URL, a survey with URL rules is not shown.
    let mut no_url = eligible(&app, &ik, &format!("anonymousId={visitor}&attr.plan=pro")).await;
    no_url.sort();
    assert_eq!(no_url, vec![all_pages.clone()]);
    // A URL over 4 096 characters is refused.
    let long = format!("https://x.example/{}", "a".repeat(4100));
    let a = app
        .send(
            Method::GET,
            &format!("/api/w/surveys?anonymousId={visitor}&url={long}"),
            &[("x-app-key", &ik)],
            None,
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["url"]);
    // An invalid rule in a PATCH names its path.
    let a = app
        .admin(
            Method::PATCH,
            &format!("/apps/{app_id}/surveys/{id}"),
            Some(json!({"targeting": {"urls": [{"operator": "like", "value": "/pricing"}]}})),
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["targeting.urls[0].operator"]);
}

#[tokio::test]
async fn the_widget_canonicalises_the_anonymous_id_as_the_collector_does() {
    let app = spawn_app();
    let (app_id, ik, key, id) = live_nps(&app).await;
    let canonical = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b";
    let forms = [
        "6F1C2B3A-4D5E-4F60-8A7B-9C0D1E2F3A4B",
        "{6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b}",
        "urn:uuid:6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b",
        "6f1c2b3a4d5e4f608a7b9c0d1e2f3a4b",
    ];
    let body = |anon: &str, score: u32, done: bool| json!({"anonymousId": anon, "completed": done, "answers": [{"questionId": "score", "value": score}]});
    let first = answer(&app, &ik, &id, body(forms[0], 3, false)).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.data()["anonymousId"], canonical);
    for (n, form) in forms.iter().enumerate().skip(1) {
        let a = answer(&app, &ik, &id, body(form, n as u32 + 4, false)).await;
        assert_eq!(a.status, 200, "{form}: {}", a.body);
        assert_eq!(
            a.data()["id"],
            first.data()["id"],
            "{form}: the same visitor"
        );
        assert_eq!(a.data()["anonymousId"], canonical);
    }
    assert_eq!(survey_count(&app, &key, &id).await, 1);
    // The response list finds the visitor under any form too.
    let list = app
        .api(
            &key,
            Method::GET,
            &format!(
                "/api/v1/surveys/{id}/responses?anonymousId={}",
                query_value(forms[0])
            ),
            None,
        )
        .await;
    assert_eq!(list.data().as_array().unwrap().len(), 1, "{}", list.body);
    // Completed under one form, a survey is offered to no form.
    let everyone = id_of(&create(&app, &app_id, poll("Everyone")).await);
    moved(&app, &app_id, &everyone, "active").await;
    let shown = |form: &str| {
        let q = format!("anonymousId={}", query_value(form));
        let (app, ik) = (&app, &ik);
        async move { eligible(app, ik, &q).await }
    };
    for form in forms {
        assert!(shown(form).await.contains(&everyone), "{form}");
    }
    let pick =
        json!({"anonymousId": forms[3], "answers": [{"questionId": "pick", "value": ["a"]}]});
    let done = answer(&app, &ik, &everyone, pick).await;
    assert_eq!(done.status, 201, "{}", done.body);
    assert_eq!(done.data()["anonymousId"], canonical);
    for form in forms {
        assert!(!shown(form).await.contains(&everyone), "{form}: completed");
    }
    // What the collector refuses, the widget refuses.
    for bad in [
        "not-a-uuid",
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
    ] {
        let a = answer(&app, &ik, &id, body(bad, 5, true)).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), ["anonymousId"], "{bad}");
        let a = app
            .send(
                Method::GET,
                &format!("/api/w/surveys?anonymousId={bad}"),
                &[("x-app-key", &ik)],
                None,
            )
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), ["anonymousId"], "{bad}");
    }
}
