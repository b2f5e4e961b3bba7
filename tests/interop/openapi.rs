//! `/openapi.json` tells the truth: a live answer of every operation, success and errors, is
//! validated against the response schema the document gives for it (with `jsonschema`, in
//! Python from `.venv`), so the document and the code cannot drift apart.

use std::path::Path;
use std::process::Command;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

/// The answers seen, each with the document's path template.
#[derive(Default)]
struct Samples(Vec<Value>);

impl Samples {
    fn add(&mut self, method: &Method, template: &str, a: &Answer) -> Value {
        self.0.push(json!({
            "method": method.as_str(), "path": template, "status": a.status.as_u16(),
            "contentType": a.header("content-type"), "body": a.body,
        }));
        a.data().clone()
    }
}

/// One request of a scenario: method, the document's path template, the path, the
/// credentials (header name and value) and the body.
type Step<'a> = (
    &'a str,
    &'a str,
    String,
    Option<(&'a str, &'a str)>,
    Option<Value>,
);

/// Sends each step and records its answer; returns the `data` of each answer.
async fn run(app: &TestApp, s: &mut Samples, steps: Vec<Step<'_>>) -> Vec<Value> {
    let mut data = Vec::new();
    for (method, template, path, who, body) in steps {
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let headers: Vec<(&str, &str)> = who.into_iter().collect();
        let a = app.send(method.clone(), &path, &headers, body).await;
        data.push(s.add(&method, template, &a));
    }
    data
}

async fn contacts_answers(app: &TestApp, s: &mut Samples) {
    let (app_id, _) = app.create_app("enterprise").await;
    let all = ["contacts:read", "contacts:write", "contacts:delete"];
    let (_, key) = app.create_key(&app_id, &all).await;
    let (_, none) = app.create_key(&app_id, &[]).await;
    let (k, no) = (
        Some(("x-api-key", key.as_str())),
        Some(("x-api-key", none.as_str())),
    );
    let bad = Some(("x-api-key", "tk_bad_bad"));
    let list = "/acq/v1/contacts";
    let first = json!({"email": "doc@example.com", "companyId": "c1", "tags": ["a"]});
    let created = run(app, s, vec![("POST", list, list.into(), k, Some(first))]).await;
    let id = created[0]["id"].as_str().unwrap();
    let (one, path) = ("/acq/v1/contacts/{id}", format!("/acq/v1/contacts/{id}"));
    let missing = "/acq/v1/contacts/000000000000000000000000".to_owned();
    let batch = "/acq/v1/contacts/batch";
    let items = json!({"mode": "upsert", "contacts": [
        {"email": "doc@example.com"}, {"email": "b@example.com"}, {"email": "bad"}]});
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", list, list.into(), k, Some(json!({"email": "doc@example.com"}))),
        ("POST", list, list.into(), k, Some(json!({"email": "nope", "score": 200}))),
        ("POST", list, list.into(), None, Some(json!({"email": "x@example.com"}))),
        ("POST", list, list.into(), no, Some(json!({}))),
        ("GET", list, format!("{list}?limit=1&sort=email"), k, None),
        ("GET", list, format!("{list}?status=vip"), k, None),
        ("GET", list, list.into(), bad, None),
        ("GET", list, list.into(), no, None),
        ("GET", one, path.clone(), k, None),
        ("GET", one, missing, k, None),
        ("PATCH", one, path.clone(), k, Some(json!({"status": "unsubscribed"}))),
        ("PATCH", one, path.clone(), k, Some(json!({"status": "new"}))),
        ("PATCH", one, path.clone(), k, Some(json!({"score": "x"}))),
        ("PATCH", one, "/acq/v1/contacts/x".into(), k, Some(json!({}))),
        ("POST", batch, batch.into(), k, Some(items)),
        ("POST", batch, batch.into(), k, Some(json!({"mode": "merge"}))),
        ("DELETE", one, path.clone(), k, None),
        ("DELETE", one, path.clone(), k, None),
        ("DELETE", one, path, no, None),
    ];
    run(app, s, steps).await;
    // 429: a free key with a tiny rate.
    let (free, _) = app.create_app("free").await;
    let (_, slow) = app.create_key(&free, &["contacts:read"]).await;
    let slow = Some(("x-api-key", slow.as_str()));
    let steps = (0..3).map(|_| ("GET", list, list.to_owned(), slow, None));
    run(app, s, steps.collect()).await;
}

async fn profile_and_collector_answers(app: &TestApp, s: &mut Samples) {
    let (app_id, ik) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["profiles:read"]).await;
    let collect = "/api/w/analytics/collect";
    let identify = json!({"batch": [{"type": "identify", "userId": "u-doc", "traits": {"plan": "pro"},
        "anonymousId": "7f1f8f0e-0a0b-4c3d-8e9f-0a1b2c3d4e5f", "messageId": "msg_doc_1"},
        {"type": "track", "anonymousId": "nope", "messageId": "msg_doc_2"}]});
    let big = json!({"batch": [{"type": "track", "event": "x",
        "properties": {"p": "x".repeat(600_000)}}]});
    for (key, body) in [
        (ik.as_str(), identify),
        (ik.as_str(), json!({"batch": []})),
        ("ik_bad_bad", json!({"batch": []})),
        (ik.as_str(), big),
    ] {
        let a = app.collect(key, body).await;
        s.add(&Method::POST, collect, &a);
    }
    let w = Some(("x-app-key", ik.as_str()));
    let bad = Some(("x-app-key", "ik_bad_bad"));
    let (single, settings) = ("/v1/{type}", "/v1/projects/{writeKey}/settings");
    let event = json!({"userId": "u-doc", "event": "Doc", "messageId": "segment-doc-1"});
    #[rustfmt::skip]
    let segment: Vec<Step> = vec![
        ("POST", single, "/v1/batch".into(), w, Some(json!({"batch": [{"type": "track", "userId": "u-doc", "event": "Doc"}], "context": {"library": {"name": "doc"}}}))),
        ("POST", single, "/v1/batch".into(), w, Some(json!({"batch": []}))),
        ("POST", single, "/v1/batch".into(), bad, Some(json!({"batch": [event.clone()]}))),
        ("POST", single, "/v1/track".into(), w, Some(event.clone())),
        ("POST", single, "/v1/screen".into(), w, Some(json!({"userId": "u-doc", "name": "Home"}))),
        ("POST", single, "/v1/jump".into(), w, Some(event)),
        ("POST", single, "/v1/alias".into(), bad, Some(json!({"userId": "u", "previousId": "p"}))),
        ("POST", single, "/v1/t".into(), w, Some(json!({"userId": "u-doc", "event": "Short"}))),
        ("GET", settings, format!("/v1/projects/{ik}/settings"), None, None),
        ("GET", settings, "/v1/projects/ik_bad_bad/settings".into(), None, None),
    ];
    run(app, s, segment).await;
    let k = Some(("x-api-key", key.as_str()));
    let t = "/api/v1/profiles/{userId}";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("GET", t, "/api/v1/profiles/u-doc".into(), k, None),
        ("GET", t, "/api/v1/profiles/nobody".into(), k, None),
        ("GET", t, "/api/v1/profiles/u-doc".into(), None, None),
    ];
    run(app, s, steps).await;
    let (_, analytics) = app.create_key(&app_id, &["analytics:read"]).await;
    let a = Some(("x-api-key", analytics.as_str()));
    let t = "/api/v1/analytics/traffic";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("GET", t, t.into(), a, None),
        ("GET", t, format!("{t}?interval=day&from=2026-11-01&to=2026-11-23"), a, None),
        ("GET", t, format!("{t}?interval=week"), a, None),
        ("GET", t, t.into(), k, None),
        ("GET", t, t.into(), None, None),
    ];
    run(app, s, steps).await;
}

async fn erasure_answers(app: &TestApp, s: &mut Samples) {
    let (app_id, _) = app.create_app("enterprise").await;
    let (_, key) = app.create_key(&app_id, &["privacy:erase"]).await;
    let (_, other) = app.create_key(&app_id, &["profiles:read"]).await;
    let (k, no) = (
        Some(("x-api-key", key.as_str())),
        Some(("x-api-key", other.as_str())),
    );
    let list = "/api/v1/erasures";
    let person = json!({"userId": "u-doc", "anonymousIds": ["7f1f8f0e-0a0b-4c3d-8e9f-0a1b2c3d4e5f"], "email": "doc@example.com"});
    #[rustfmt::skip]
    let started = run(app, s, vec![
        ("POST", list, list.into(), k, Some(person)),
        ("POST", list, list.into(), k, Some(json!({"userId": "", "email": "x"}))),
        ("POST", list, list.into(), no, Some(json!({"userId": "u"}))),
    ]).await;
    let id = started[0]["id"].as_str().unwrap();
    let one = "/api/v1/erasures/{id}";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("GET", list, list.into(), k, None),
        ("GET", list, format!("{list}?limit=0"), k, None),
        ("GET", one, format!("{list}/{id}"), k, None),
        ("GET", one, format!("{list}/job_000000000000000000000000"), k, None),
        ("GET", one, format!("{list}/{id}"), no, None),
    ];
    run(app, s, steps).await;
}

async fn fleet_answers(app: &TestApp, s: &mut Samples) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = Some(("authorization", auth.as_str()));
    let tokens = "/admin/v1/fleet/tokens";
    let created = run(
        app,
        s,
        vec![(
            "POST",
            tokens,
            tokens.into(),
            h,
            Some(json!({"name": "eu"})),
        )],
    )
    .await;
    let one = "/admin/v1/fleet/tokens/{tokenId}";
    let path = format!("{tokens}/{}", created[0]["id"].as_str().unwrap());
    let (nodes, usage) = ("/admin/v1/fleet/nodes", "/admin/v1/fleet/usage");
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", tokens, tokens.into(), h, Some(json!({"name": ""}))),
        ("POST", tokens, tokens.into(), h, Some(json!({"name": "x", "other": 1}))),
        ("POST", tokens, tokens.into(), None, Some(json!({"name": "x"}))),
        ("GET", tokens, tokens.into(), h, None),
        ("GET", tokens, tokens.into(), None, None),
        ("GET", nodes, nodes.into(), h, None),
        ("GET", nodes, nodes.into(), None, None),
        ("GET", usage, usage.into(), h, None),
        ("GET", usage, format!("{usage}?month=2026-11"), h, None),
        ("GET", usage, format!("{usage}?month=2026-13"), h, None),
        ("DELETE", one, path.clone(), h, None),
        ("DELETE", one, path, h, None),
    ];
    run(app, s, steps).await;
}

async fn webhooks_answers(app: &TestApp, s: &mut Samples) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = Some(("authorization", auth.as_str()));
    let (app_id, _) = app.create_app("free").await;
    let list = "/admin/v1/apps/{appId}/webhooks";
    let lp = format!("/admin/v1/apps/{app_id}/webhooks");
    let missing_app = "/admin/v1/apps/000000000000000000000000/webhooks".to_owned();
    // Port 9 on loopback: nothing listens, so the test event's attempt fails fast.
    let hook = json!({"url": "http://127.0.0.1:9/hook", "eventTypes": ["*"],
        "filters": {"boardIds": ["0123456789abcdef01234567"]}, "description": "doc"});
    let created = run(app, s, vec![("POST", list, lp.clone(), h, Some(hook))]).await;
    let id = created[0]["id"].as_str().unwrap();
    let one = "/admin/v1/apps/{appId}/webhooks/{webhookId}";
    let path = format!("{lp}/{id}");
    let gone = format!("{lp}/000000000000000000000000");
    let (secret, test) = (
        "/admin/v1/apps/{appId}/webhooks/{webhookId}/secret",
        "/admin/v1/apps/{appId}/webhooks/{webhookId}/test",
    );
    let attempts = "/admin/v1/apps/{appId}/webhooks/{webhookId}/attempts";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", list, lp.clone(), h, Some(json!({"url": "ftp://x", "eventTypes": []}))),
        ("POST", list, missing_app.clone(), h, Some(json!({"url": "http://127.0.0.1:9/", "eventTypes": ["*"]}))),
        ("GET", list, lp.clone(), h, None),
        ("GET", list, format!("{lp}?limit=0"), h, None),
        ("GET", list, missing_app, h, None),
        ("GET", one, path.clone(), h, None),
        ("GET", one, gone.clone(), h, None),
        ("PATCH", one, path.clone(), h, Some(json!({"status": "paused", "description": null}))),
        ("PATCH", one, path.clone(), h, Some(json!({"status": "disabled"}))),
        ("PATCH", one, gone.clone(), h, Some(json!({"status": "active"}))),
        ("POST", secret, format!("{path}/secret"), h, Some(json!({"overlapSeconds": 60}))),
        ("POST", secret, format!("{path}/secret"), h, None),
        ("POST", secret, format!("{path}/secret"), h, Some(json!({"overlapSeconds": -1}))),
        ("POST", secret, format!("{gone}/secret"), h, None),
        ("POST", test, format!("{path}/test"), h, None),
        ("POST", test, format!("{gone}/test"), h, None),
    ];
    run(app, s, steps).await;
    #[rustfmt::skip]
    let logged = run(app, s, vec![
        ("GET", attempts, format!("{path}/attempts"), h, None),
        ("GET", attempts, format!("{path}/attempts?cursor=nope"), h, None),
        ("GET", attempts, format!("{gone}/attempts"), h, None),
    ]).await;
    let attempt = logged[0][0]["id"].as_str().unwrap();
    let redeliver = "/admin/v1/apps/{appId}/webhooks/{webhookId}/attempts/{attemptId}/redeliver";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", redeliver, format!("{path}/attempts/{attempt}/redeliver"), h, None),
        ("POST", redeliver, format!("{path}/attempts/0000000000000000/redeliver"), h, None),
        ("DELETE", one, path.clone(), h, None),
        ("DELETE", one, path, h, None),
    ];
    run(app, s, steps).await;
}

async fn admin_answers(app: &TestApp, s: &mut Samples) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = Some(("authorization", auth.as_str()));
    let apps = "/admin/v1/apps";
    let doc = Some(json!({"name": "Doc"}));
    let created = run(app, s, vec![("POST", apps, apps.into(), h, doc)]).await;
    let id = created[0]["id"].as_str().unwrap();
    let (one, path) = ("/admin/v1/apps/{appId}", format!("/admin/v1/apps/{id}"));
    let missing = "/admin/v1/apps/000000000000000000000000";
    let (rotate, keys) = (
        "/admin/v1/apps/{appId}/integration-key",
        "/admin/v1/apps/{appId}/keys",
    );
    let kp = format!("{path}/keys");
    let new_key = json!({"name": "k", "permissions": ["contacts:read"]});
    let key = run(app, s, vec![("POST", keys, kp.clone(), h, Some(new_key))]).await;
    let one_key = "/admin/v1/apps/{appId}/keys/{keyId}";
    let key_path = format!("{kp}/{}", key[0]["id"].as_str().unwrap());
    let perms = |p: Value| Some(json!({ "permissions": p }));
    let named = |p: Value| Some(json!({ "name": "k", "permissions": p }));
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", apps, apps.into(), h, Some(json!({"name": ""}))),
        ("POST", apps, apps.into(), None, Some(json!({"name": "x"}))),
        ("GET", apps, format!("{apps}?limit=1"), h, None),
        ("GET", apps, format!("{apps}?limit=0"), h, None),
        ("GET", one, path.clone(), h, None),
        ("GET", one, missing.into(), h, None),
        ("PATCH", one, path.clone(), h, Some(json!({"plan": "pro"}))),
        ("PATCH", one, path.clone(), h, Some(json!({"plan": "gold"}))),
        ("PATCH", one, missing.into(), h, Some(json!({"plan": "pro"}))),
        ("POST", rotate, format!("{path}/integration-key"), h, None),
        ("POST", rotate, format!("{missing}/integration-key"), h, None),
        ("POST", keys, kp.clone(), h, named(json!(["x"]))),
        ("POST", keys, format!("{missing}/keys"), h, named(json!([]))),
        ("GET", keys, kp.clone(), h, None),
        ("GET", keys, format!("{kp}?cursor=x"), h, None),
        ("GET", keys, format!("{missing}/keys"), h, None),
        ("PATCH", one_key, key_path.clone(), h, perms(json!(["contacts:write"]))),
        ("PATCH", one_key, key_path.clone(), h, perms(json!("all"))),
        ("PATCH", one_key, format!("{kp}/x"), h, perms(json!([]))),
        ("DELETE", one_key, key_path, h, None),
        ("DELETE", one_key, format!("{kp}/x"), h, None),
        ("DELETE", one, path.clone(), None, None),
        ("DELETE", one, missing.into(), h, None),
        ("DELETE", one, path.clone(), h, None),
        ("GET", one, path.clone(), h, None),
    ];
    let answers = run(app, s, steps).await;
    // The deletion's job: while it runs, and once it is done.
    let job = answers[answers.len() - 2]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (jobs, job_path) = ("/admin/v1/jobs/{jobId}", format!("/admin/v1/jobs/{job}"));
    let first = run(app, s, vec![("GET", jobs, job_path.clone(), h, None)]).await;
    if first[0]["state"] != "done" {
        let done = crate::populate::finished_job(app, &job).await;
        assert_eq!(done["state"], "done", "{done}");
        run(app, s, vec![("GET", jobs, job_path, h, None)]).await;
    }
    #[rustfmt::skip]
    let errors: Vec<Step> = vec![
        ("GET", jobs, "/admin/v1/jobs/job_x".into(), h, None),
        ("GET", jobs, format!("/admin/v1/jobs/{job}"), None, None),
    ];
    run(app, s, errors).await;
}

/// The admin routes of one part of a board (`statuses`, `topics` or `tags`): list, add (and a
/// taken name), patch, delete; each with its errors.
async fn board_part_answers(app: &TestApp, s: &mut Samples, board: &str, part: &str, add: Value) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = Some(("authorization", auth.as_str()));
    let list_t = format!("/admin/v1/apps/{{appId}}/boards/{{boardId}}/{part}");
    let list_t = list_t.as_str();
    let item = match part {
        "statuses" => "statusId",
        "topics" => "topicId",
        _ => "tagId",
    };
    let one_t = format!("{list_t}/{{{item}}}");
    let one_t = one_t.as_str();
    let list = format!("{board}/{part}");
    let created = run(
        app,
        s,
        vec![("POST", list_t, list.clone(), h, Some(add.clone()))],
    )
    .await;
    let one = format!("{list}/{}", created[0]["id"].as_str().unwrap());
    let missing_board = board.rsplit_once('/').unwrap().0.to_owned() + "/000000000000000000000000";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", list_t, list.clone(), h, Some(add.clone())),
        ("POST", list_t, list.clone(), h, Some(json!({"name": ""}))),
        ("POST", list_t, list.clone(), None, Some(json!({"name": "x"}))),
        ("POST", list_t, format!("{missing_board}/{part}"), h, Some(add.clone())),
        ("GET", list_t, list.clone(), h, None),
        ("GET", list_t, format!("{missing_board}/{part}"), h, None),
        ("PATCH", one_t, one.clone(), h, Some(json!({"name": "Renamed"}))),
        ("PATCH", one_t, one.clone(), h, Some(json!({"name": 5}))),
        ("PATCH", one_t, format!("{list}/x"), h, Some(json!({"name": "y"}))),
        ("DELETE", one_t, one.clone(), h, None),
        ("DELETE", one_t, one, h, None),
    ];
    run(app, s, steps).await;
}

/// The admin board routes and the public reads of boards, statuses, topics and tags.
async fn boards_answers(app: &TestApp, s: &mut Samples) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = Some(("authorization", auth.as_str()));
    let (app_id, _) = app.create_app("pro").await;
    let (free, _) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["ideas:read"]).await;
    let (_, none) = app.create_key(&app_id, &[]).await;
    let (k, no) = (
        Some(("x-api-key", key.as_str())),
        Some(("x-api-key", none.as_str())),
    );
    let boards = "/admin/v1/apps/{appId}/boards";
    let (path, free_path) = (
        format!("/admin/v1/apps/{app_id}/boards"),
        format!("/admin/v1/apps/{free}/boards"),
    );
    let doc = Some(json!({"name": "Roadmap", "description": "Next"}));
    let created = run(app, s, vec![("POST", boards, path.clone(), h, doc)]).await;
    let board = format!("{path}/{}", created[0]["id"].as_str().unwrap());
    let one = "/admin/v1/apps/{appId}/boards/{boardId}";
    let missing_app = "/admin/v1/apps/000000000000000000000000/boards";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", boards, path.clone(), h, Some(json!({"name": ""}))),
        ("POST", boards, free_path, h, Some(json!({"name": "Second"}))),
        ("POST", boards, missing_app.into(), h, Some(json!({"name": "x"}))),
        ("POST", boards, path.clone(), None, Some(json!({"name": "x"}))),
        ("GET", boards, format!("{path}?limit=1"), h, None),
        ("GET", boards, format!("{path}?cursor=x"), h, None),
        ("GET", boards, missing_app.into(), h, None),
        ("GET", one, board.clone(), h, None),
        ("GET", one, format!("{path}/000000000000000000000000"), h, None),
        ("PATCH", one, board.clone(), h, Some(json!({"description": "Later"}))),
        ("PATCH", one, board.clone(), h, Some(json!({"name": 5}))),
        ("PATCH", one, format!("{path}/x"), h, Some(json!({"name": "y"}))),
    ];
    run(app, s, steps).await;
    let status = json!({"name": "Beta", "color": "#112233", "kind": "open"});
    board_part_answers(app, s, &board, "statuses", status).await;
    board_part_answers(app, s, &board, "topics", json!({"name": "Billing"})).await;
    let tag = json!({"name": "api", "color": "#445566"});
    board_part_answers(app, s, &board, "tags", tag).await;
    // The built-in Open status cannot be deleted.
    let statuses = app
        .admin(
            Method::GET,
            &format!("{}/statuses", &board["/admin/v1".len()..]),
            None,
        )
        .await;
    let open = statuses.data()[0]["id"].as_str().unwrap().to_owned();
    let one_status = "/admin/v1/apps/{appId}/boards/{boardId}/statuses/{statusId}";
    let built_in = format!("{board}/statuses/{open}");
    run(app, s, vec![("DELETE", one_status, built_in, h, None)]).await;
    for t in [
        "/api/v1/boards",
        "/api/v1/idea-statuses",
        "/api/v1/topics",
        "/api/v1/tags",
    ] {
        let bad = if t == "/api/v1/boards" {
            format!("{t}?limit=0")
        } else {
            format!("{t}?boardId=000000000000000000000000")
        };
        #[rustfmt::skip]
        let steps: Vec<Step> = vec![
            ("GET", t, t.into(), k, None),
            ("GET", t, bad, k, None),
            ("GET", t, t.into(), None, None),
            ("GET", t, t.into(), no, None),
        ];
        run(app, s, steps).await;
    }
}

const IDEAS_ALL: [&str; 5] = [
    "ideas:read",
    "ideas:write",
    "ideas:moderate",
    "votes:write",
    "comments:write",
];

/// `/api/v1/ideas` and its votes, comments, status history and merge.
async fn ideas_answers(app: &TestApp, s: &mut Samples) {
    let (app_id, _) = app.create_app("pro").await;
    let (_, key) = app.create_key(&app_id, &IDEAS_ALL).await;
    let (_, writer) = app
        .create_key(&app_id, &["ideas:read", "ideas:write"])
        .await;
    let (_, none) = app.create_key(&app_id, &[]).await;
    let (other_app, _) = app.create_app("pro").await;
    let (_, foreign) = app.create_key(&other_app, &IDEAS_ALL).await;
    let (k, w, no, f) = (
        Some(("x-api-key", key.as_str())),
        Some(("x-api-key", writer.as_str())),
        Some(("x-api-key", none.as_str())),
        Some(("x-api-key", foreign.as_str())),
    );
    let author = json!({"id": "u1", "name": "Ada", "email": "ada@example.com"});
    let list = "/api/v1/ideas";
    let first = json!({"title": "Dark mode", "description": "Please", "author": author});
    let second = json!({"title": "Night theme", "author": author});
    let created = run(
        app,
        s,
        vec![
            ("POST", list, list.into(), k, Some(first)),
            ("POST", list, list.into(), k, Some(second)),
            (
                "GET",
                "/api/v1/idea-statuses",
                "/api/v1/idea-statuses".into(),
                k,
                None,
            ),
        ],
    )
    .await;
    let (id, into) = (
        created[0]["id"].as_str().unwrap(),
        created[1]["id"].as_str().unwrap(),
    );
    let planned = created[2]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] != "Open" && s["kind"] == "open")
        .expect("a second open status")["id"]
        .clone();
    let one = "/api/v1/ideas/{id}";
    let (idea, other) = (format!("{list}/{id}"), format!("{list}/{into}"));
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", list, list.into(), k, Some(json!({"title": "x", "author": {}}))),
        ("POST", list, list.into(), None, Some(json!({"title": "Anon"}))),
        ("POST", list, list.into(), no, Some(json!({"title": "Nope"}))),
        ("GET", list, format!("{list}?limit=1&sort=trending"), k, None),
        ("GET", list, format!("{list}?sort=bogus"), k, None),
        ("GET", list, list.into(), no, None),
        ("GET", one, idea.clone(), k, None),
        ("GET", one, idea.clone(), f, None),
        ("GET", one, idea.clone(), None, None),
        ("PATCH", one, idea.clone(), w, Some(json!({"title": "Dark mode, please"}))),
        ("PATCH", one, idea.clone(), k, Some(json!({"statusId": planned}))),
        ("PATCH", one, idea.clone(), w, Some(json!({"statusId": planned}))),
        ("PATCH", one, idea.clone(), k, Some(json!({"title": ""}))),
        ("PATCH", one, idea.clone(), f, Some(json!({"title": "Foreign"}))),
    ];
    run(app, s, steps).await;
    let history = "/api/v1/ideas/{id}/status-history";
    let (votes, vote_one) = (
        "/api/v1/ideas/{id}/votes",
        "/api/v1/ideas/{id}/votes/{voteId}",
    );
    let voter = json!({"voter": {"id": "v1", "name": "Vi"}});
    let voted = run(
        app,
        s,
        vec![(
            "POST",
            votes,
            format!("{idea}/votes"),
            k,
            Some(voter.clone()),
        )],
    )
    .await;
    let vote = format!("{idea}/votes/{}", voted[0]["id"].as_str().unwrap());
    let (comments, comment_one) = (
        "/api/v1/ideas/{id}/comments",
        "/api/v1/ideas/{id}/comments/{commentId}",
    );
    let said = json!({"content": "Yes please", "author": author});
    let said = run(
        app,
        s,
        vec![("POST", comments, format!("{idea}/comments"), k, Some(said))],
    )
    .await;
    let comment = format!("{idea}/comments/{}", said[0]["id"].as_str().unwrap());
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("GET", history, format!("{idea}/status-history"), k, None),
        ("GET", history, format!("{idea}/status-history?limit=0"), k, None),
        ("GET", history, format!("{idea}/status-history"), f, None),
        ("POST", votes, format!("{idea}/votes"), k, Some(voter)),
        ("POST", votes, format!("{idea}/votes"), k, Some(json!({"voter": {}}))),
        ("POST", votes, format!("{idea}/votes"), w, Some(json!({"voter": {"id": "v2"}}))),
        ("POST", votes, format!("{idea}/votes"), f, Some(json!({"voter": {"id": "v3"}}))),
        ("GET", votes, format!("{idea}/votes?limit=1"), k, None),
        ("GET", votes, format!("{idea}/votes?cursor=x"), k, None),
        ("GET", votes, format!("{idea}/votes"), f, None),
        ("DELETE", vote_one, vote.clone(), w, None),
        ("DELETE", vote_one, vote.clone(), k, None),
        ("DELETE", vote_one, vote, k, None),
        ("POST", comments, format!("{idea}/comments"), k, Some(json!({"content": "", "author": author}))),
        ("POST", comments, format!("{idea}/comments"), w, Some(json!({"content": "x", "author": author}))),
        ("POST", comments, format!("{idea}/comments"), f, Some(json!({"content": "x", "author": author}))),
        ("GET", comments, format!("{idea}/comments?limit=1"), k, None),
        ("GET", comments, format!("{idea}/comments?limit=x"), k, None),
        ("GET", comments, format!("{idea}/comments"), f, None),
        ("PATCH", comment_one, comment.clone(), k, Some(json!({"content": "Yes, please"}))),
        ("PATCH", comment_one, comment.clone(), k, Some(json!({"content": " "}))),
        ("PATCH", comment_one, comment.clone(), w, Some(json!({"content": "Mine"}))),
        ("PATCH", comment_one, format!("{idea}/comments/x"), k, Some(json!({"content": "y"}))),
        ("DELETE", comment_one, comment.clone(), w, None),
        ("DELETE", comment_one, comment.clone(), k, None),
        ("DELETE", comment_one, comment, k, None),
    ];
    run(app, s, steps).await;
    let merge = "/api/v1/ideas/{id}/merge";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", merge, format!("{idea}/merge"), k, Some(json!({}))),
        ("POST", merge, format!("{idea}/merge"), w, Some(json!({"intoId": into}))),
        ("POST", merge, format!("{idea}/merge"), f, Some(json!({"intoId": into}))),
        ("POST", merge, format!("{idea}/merge"), k, Some(json!({"intoId": into}))),
        ("POST", merge, format!("{idea}/merge"), k, Some(json!({"intoId": into}))),
        ("DELETE", one, other.clone(), w, None),
        ("DELETE", one, other.clone(), k, None),
        ("DELETE", one, other, k, None),
    ];
    run(app, s, steps).await;
}

async fn survey_answers(app: &TestApp, s: &mut Samples) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = Some(("authorization", auth.as_str()));
    let (app_id, ik) = app.create_app("free").await;
    let (_, key) = app
        .create_key(&app_id, &["surveys:read", "responses:read"])
        .await;
    let w = Some(("x-app-key", ik.as_str()));
    let (_, none) = app.create_key(&app_id, &[]).await;
    let (k, no) = (
        Some(("x-api-key", key.as_str())),
        Some(("x-api-key", none.as_str())),
    );
    let list = "/admin/v1/apps/{appId}/surveys";
    let lp = format!("/admin/v1/apps/{app_id}/surveys");
    let nps = json!({"title": "NPS", "type": "nps", "questions": [
        {"id": "score", "text": "How likely?", "type": "scale"},
        {"id": "why", "text": "Why?", "type": "text", "required": false}],
        "targeting": {"percentage": 25, "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}]}});
    let poll = json!({"title": "Poll", "type": "poll", "questions": [{"id": "pick", "text": "Which?",
        "type": "single_choice", "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}]});
    let created = run(
        app,
        s,
        vec![
            ("POST", list, lp.clone(), h, Some(nps)),
            ("POST", list, lp.clone(), h, Some(poll.clone())),
            ("POST", list, lp.clone(), h, Some(poll)),
        ],
    )
    .await;
    let ids: Vec<&str> = created.iter().map(|c| c["id"].as_str().unwrap()).collect();
    let one = "/admin/v1/apps/{appId}/surveys/{surveyId}";
    let (live, second, third) = (
        format!("{lp}/{}", ids[0]),
        format!("{lp}/{}", ids[1]),
        format!("{lp}/{}", ids[2]),
    );
    let missing = format!("{lp}/000000000000000000000000");
    let tr = "/admin/v1/apps/{appId}/surveys/{surveyId}/transition";
    let to = |s: &str| Some(json!({"status": s}));
    let public = "/api/v1/surveys";
    let public_one = "/api/v1/surveys/{id}";
    let answer = "/api/w/surveys/{id}/responses";
    let responses = "/api/v1/surveys/{id}/responses";
    #[rustfmt::skip]
    let steps: Vec<Step> = vec![
        ("POST", list, lp.clone(), h, Some(json!({"title": "", "type": "quiz"}))),
        ("POST", list, lp.clone(), None, Some(json!({}))),
        ("GET", list, format!("{lp}?limit=1&status=draft"), h, None),
        ("GET", list, format!("{lp}?status=gone"), h, None),
        ("GET", one, live.clone(), h, None),
        ("GET", one, missing.clone(), h, None),
        ("PATCH", one, live.clone(), h, Some(json!({"title": "NPS Q4"}))),
        ("PATCH", one, live.clone(), h, Some(json!({"targeting": {"percentage": 0}}))),
        ("PATCH", one, live.clone(), h, Some(json!({"targeting": {"percentage": 100}}))),
        ("POST", tr, format!("{live}/transition"), h, to("active")),
        ("POST", tr, format!("{live}/transition"), h, to("draft")),
        ("POST", tr, format!("{second}/transition"), h, to("active")),
        ("POST", tr, format!("{missing}/transition"), h, to("active")),
        ("PATCH", one, live.clone(), h, Some(json!({"questions": []}))),
        ("DELETE", one, third.clone(), h, None),
        ("DELETE", one, third, h, None),
        ("DELETE", one, live.clone(), h, None),
        // The free plan's tiny request rate would answer the public reads 429.
        ("PATCH", "/admin/v1/apps/{appId}", format!("/admin/v1/apps/{app_id}"), h, Some(json!({"plan": "pro"}))),
        ("GET", public, format!("{public}?limit=1&type=nps"), k, None),
        ("GET", public, format!("{public}?sort=title"), k, None),
        ("GET", public, public.into(), no, None),
        ("GET", public, public.into(), None, None),
        ("GET", public_one, format!("{public}/{}", ids[0]), k, None),
        ("GET", public_one, format!("{public}/{}", ids[1]), k, None),
        ("POST", answer, format!("{public}/{}/responses", ids[0]).replace("/v1/", "/w/"), w, Some(json!({"anonymousId": anon("a1"), "completed": false, "answers": [{"questionId": "why", "value": "Fast"}], "metadata": {"url": "https://example.com/", "userAgent": "ignored"}, "attributes": {"plan": "pro"}}))),
        ("POST", answer, format!("{public}/{}/responses", ids[0]).replace("/v1/", "/w/"), w, Some(json!({"anonymousId": anon("a1"), "answers": [{"questionId": "score", "value": 9}]}))),
        ("POST", answer, format!("{public}/{}/responses", ids[0]).replace("/v1/", "/w/"), w, Some(json!({"anonymousId": anon("a1"), "answers": [{"questionId": "score", "value": 11}]}))),
        ("POST", answer, format!("{public}/{}/responses", ids[1]).replace("/v1/", "/w/"), w, Some(json!({"anonymousId": anon("a1"), "answers": []}))),
        ("POST", answer, format!("{public}/{}/responses", ids[0]).replace("/v1/", "/w/"), None, Some(json!({}))),
        ("GET", responses, format!("{public}/{}/responses?limit=1", ids[0]), k, None),
        ("GET", responses, format!("{public}/{}/responses?completed=maybe", ids[0]), k, None),
        ("GET", responses, format!("{public}/{}/responses", ids[1]), k, None),
        ("GET", "/api/v1/surveys/{id}/summary", format!("{public}/{}/summary", ids[0]), k, None),
        ("GET", "/api/v1/surveys/{id}/summary", format!("{public}/{}/summary", ids[1]), k, None),
        ("GET", "/api/w/surveys", format!("/api/w/surveys?anonymousId={}&attr.plan=pro", anon("a2")), w, None),
        ("GET", "/api/w/surveys", "/api/w/surveys".into(), w, None),
        ("GET", "/api/v1/surveys/{id}/responses.csv", format!("{public}/{}/responses.csv", ids[1]), k, None),
    ];
    run(app, s, steps).await;
    // The CSV export is not JSON: its success sample is recorded by hand, as /metrics.
    let csv = app
        .client
        .get(format!("{}{public}/{}/responses.csv", app.base, ids[0]))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap();
    let ct = csv.headers()["content-type"].to_str().unwrap().to_owned();
    s.0.push(
        json!({"method": "GET", "path": "/api/v1/surveys/{id}/responses.csv",
        "status": csv.status().as_u16(), "contentType": ct, "body": null}),
    );
}

/// `/readyz` and `/healthz` of a server whose lake refuses every connection.
async fn degraded_answers(s: &mut Samples) {
    let app = spawn_app_with(|s| {
        s.collector.max_file_rows = 1;
        s.lake.kind = tributary::config::LakeKind::S3;
        s.lake.s3_bucket = "nowhere".into();
        s.lake.s3_endpoint = "http://127.0.0.1:1".into();
        s.lake.s3_allow_http = true;
        s.lake.s3_access_key_id = "test".into();
        s.lake.s3_secret_access_key = "test".into();
        s.collector.shutdown_upload_timeout_ms = 0;
    });
    let (_, ik) = app.create_app("free").await;
    assert_eq!(
        app.collect(&ik, crate::events::tracks("r", 2)).await.status,
        200
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let ready = loop {
        let a = app.send(Method::GET, "/readyz", &[], None).await;
        if a.status == 503 {
            break a;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never degraded: {}",
            a.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(ready.header("retry-after").is_some());
    assert_eq!(ready.fields(), ["lake"], "{}", ready.body);
    s.add(&Method::GET, "/readyz", &ready);
    let health = app.send(Method::GET, "/healthz", &[], None).await;
    assert_eq!(health.data()["status"], "degraded");
    s.add(&Method::GET, "/healthz", &health);
}

#[tokio::test]
async fn every_operation_answers_as_its_openapi_schema_says() {
    let app = spawn_app_with(|s| s.plans.free.requests_per_minute = 2);
    let mut s = Samples::default();
    let service: Vec<Step> = vec![
        ("GET", "/healthz", "/healthz".into(), None, None),
        ("GET", "/readyz", "/readyz".into(), None, None),
        ("GET", "/openapi.json", "/openapi.json".into(), None, None),
    ];
    run(&app, &mut s, service).await;
    degraded_answers(&mut s).await;
    let metrics = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    let ct = metrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    s.0.push(json!({"method": "GET", "path": "/metrics", "status": 200, "contentType": ct, "body": null}));
    // The tracker script: 200, then 304 when revalidated with its ETag.
    let sdk = format!("{}/sdk/v1/analytics.js", app.base);
    let js = app.client.get(&sdk).send().await.unwrap();
    let header = |r: &reqwest::Response, n: &str| r.headers()[n].to_str().unwrap().to_owned();
    let (ct, etag) = (header(&js, "content-type"), header(&js, "etag"));
    s.0.push(json!({"method": "GET", "path": "/sdk/v1/analytics.js", "status": 200, "contentType": ct, "body": null}));
    let again = app
        .client
        .get(&sdk)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    s.0.push(json!({"method": "GET", "path": "/sdk/v1/analytics.js", "status": again.status().as_u16(), "contentType": null, "body": null}));
    contacts_answers(&app, &mut s).await;
    profile_and_collector_answers(&app, &mut s).await;
    admin_answers(&app, &mut s).await;
    fleet_answers(&app, &mut s).await;
    webhooks_answers(&app, &mut s).await;
    erasure_answers(&app, &mut s).await;
    boards_answers(&app, &mut s).await;
    ideas_answers(&app, &mut s).await;
    survey_answers(&app, &mut s).await;
    let doc = app.send(Method::GET, "/openapi.json", &[], None).await.body;
    let dir = tempfile::tempdir().unwrap();
    let (doc_file, samples_file) = (dir.path().join("doc.json"), dir.path().join("samples.json"));
    std::fs::write(&doc_file, doc.to_string()).unwrap();
    std::fs::write(&samples_file, Value::Array(s.0).to_string()).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(crate::python::venv_bin("python"))
        .arg(root.join("tests/support/openapi_check.py"))
        .args([&doc_file, &samples_file])
        .output()
        .expect("python from .venv runs");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
