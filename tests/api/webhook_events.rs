//! Every event type of the catalogue, caused through the public API, the widget, the admin API
//! and the dashboard, reaches an endpoint subscribed to `*` once, with its type, subject, actor
//! and the resource as the API shows it (README, "Webhooks", "Event types").

use reqwest::Method;
use serde_json::{json, Value};
use tributary::storage::changes::types;

use crate::dashboard::owner;
use crate::helpers::*;
use crate::surveys::{answer, live_nps};
use crate::webhooks::{endpoint, Received, Receiver};

/// The bodies received of type `kind`.
fn of<'a>(got: &'a [Received], kind: &str) -> Vec<&'a Value> {
    got.iter()
        .map(|r| &r.body)
        .filter(|b| b["type"] == kind)
        .collect()
}

/// The one body of type `kind` about `subject`.
fn one<'a>(got: &'a [Received], kind: &str, subject: &str) -> &'a Value {
    let found: Vec<&Value> = of(got, kind)
        .into_iter()
        .filter(|b| {
            let d = &b["data"];
            [&d["idea"]["id"], &d["vote"]["id"], &d["comment"]["id"]]
                .into_iter()
                .chain([&d["response"]["id"], &d["contact"]["id"]])
                .chain([&d["erasure"]["id"], &d["job"]["id"]])
                .any(|id| id == subject)
        })
        .collect();
    assert_eq!(found.len(), 1, "{kind} {subject}: {found:#?}");
    found[0]
}

#[tokio::test]
async fn every_event_type_caused_through_the_api_widget_admin_and_dashboard_arrives_once() {
    let app = spawn_app();
    let rx = Receiver::start().await;
    let (app_id, ik, _, survey) = live_nps(&app).await;
    let perms = [
        "ideas:read",
        "ideas:write",
        "ideas:moderate",
        "votes:write",
        "comments:write",
        "contacts:read",
        "contacts:write",
        "contacts:delete",
        "privacy:erase",
    ];
    let (key_id, key) = app.create_key(&app_id, &perms).await;
    let all = json!({"url": rx.url, "eventTypes": ["*"], "includeInternalComments": true});
    endpoint(&app, &app_id, all).await;
    let api_key = json!({"type": "apiKey", "id": key_id});
    let send = |m: Method, path: String, body: Option<Value>| {
        let (app, key) = (&app, &key);
        async move { app.api(key, m, &path, body).await }
    };

    // Ideas, votes, comments, a merge and a delete through the API.
    let author = json!({"id": "user_42", "name": "Ada", "email": "ada@example.com"});
    let idea = send(
        Method::POST,
        "/api/v1/ideas".into(),
        Some(json!({"title": "Dark mode", "author": author})),
    )
    .await;
    assert_eq!(idea.status, 201, "{}", idea.body);
    let idea = idea.data().clone();
    let id = idea["id"].as_str().unwrap().to_owned();
    let other = send(
        Method::POST,
        "/api/v1/ideas".into(),
        Some(json!({"title": "Night theme", "author": author})),
    )
    .await;
    let other = other.data()["id"].as_str().unwrap().to_owned();
    let board = app
        .admin(
            Method::GET,
            &format!(
                "/apps/{app_id}/boards/{}/statuses",
                idea["boardId"].as_str().unwrap()
            ),
            None,
        )
        .await;
    let status_of = |name: &str| -> String {
        board
            .data()
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {}", board.body))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let moved = send(
        Method::PATCH,
        format!("/api/v1/ideas/{id}"),
        Some(json!({"statusId": status_of("Planned")})),
    )
    .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let vote = send(
        Method::POST,
        format!("/api/v1/ideas/{id}/votes"),
        Some(json!({"voter": {"id": "user_7"}})),
    )
    .await;
    assert_eq!(vote.status, 201, "{}", vote.body);
    let vote_id = vote.data()["id"].as_str().unwrap().to_owned();
    let gone = send(
        Method::DELETE,
        format!("/api/v1/ideas/{id}/votes/{vote_id}"),
        None,
    )
    .await;
    assert_eq!(gone.status, 200, "{}", gone.body);
    let internal = json!({"content": "Team only", "author": author, "internal": true});
    let comment = send(
        Method::POST,
        format!("/api/v1/ideas/{id}/comments"),
        Some(internal),
    )
    .await;
    assert_eq!(comment.status, 201, "{}", comment.body);
    let merged = send(
        Method::POST,
        format!("/api/v1/ideas/{other}/merge"),
        Some(json!({"intoId": id})),
    )
    .await;
    assert_eq!(merged.status, 200, "{}", merged.body);
    let deleted = send(Method::DELETE, format!("/api/v1/ideas/{other}"), None).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);

    // Contacts through the API.
    let contact = app
        .create_contact(&key, json!({"email": "grace@example.com", "status": "new"}))
        .await;
    assert_eq!(contact.status, 201, "{}", contact.body);
    let cid = contact.data()["id"].as_str().unwrap().to_owned();
    let patched = send(
        Method::PATCH,
        format!("/acq/v1/contacts/{cid}"),
        Some(json!({"status": "qualified"})),
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    let removed = send(Method::DELETE, format!("/acq/v1/contacts/{cid}"), None).await;
    assert_eq!(removed.status, 200, "{}", removed.body);

    // A survey response through the widget: partial, then completed.
    let visitor = anon("webhook-visitor");
    let first = json!({"anonymousId": visitor, "answers": [{"questionId": "why", "value": "fast"}], "completed": false});
    assert_eq!(answer(&app, &ik, &survey, first).await.status, 201);
    let done = json!({"anonymousId": visitor, "answers": [{"questionId": "score", "value": 9}], "completed": true});
    let done = answer(&app, &ik, &survey, done).await;
    assert_eq!(done.status, 200, "{}", done.body);
    let response = done.data().clone();

    // The dashboard: an idea moved on the board.
    let mut b = owner(&app).await;
    let board_page = format!("/dashboard/apps/{app_id}/ideas");
    let move_to = format!("/dashboard/apps/{app_id}/ideas/{id}/status");
    let shipped = b
        .submit(
            &board_page,
            &move_to,
            &[("status", &status_of("In progress"))],
        )
        .await;
    assert_eq!(shipped.status, 303, "{}", shipped.body);

    // An erasure (a job's end) and the app's deletion last.
    let erasure = send(
        Method::POST,
        "/api/v1/erasures".into(),
        Some(json!({"userId": "nobody_here"})),
    )
    .await;
    assert_eq!(erasure.status, 202, "{}", erasure.body);
    let job = erasure.data()["id"].as_str().unwrap().to_owned();
    rx.wait("the erasure's end", |got| {
        !of(got, "erasure.completed").is_empty()
    })
    .await;
    let deletion = app
        .admin(Method::DELETE, &format!("/apps/{app_id}"), None)
        .await;
    assert_eq!(deletion.status, 202, "{}", deletion.body);
    let deletion_job = deletion.data()["id"].as_str().unwrap().to_owned();

    // Lanes deliver in parallel (in order only per subject): wait for every type's count.
    let got = rx
        .wait("every type", |got| {
            types::ALL.iter().all(|t| of(got, t).len() >= wanted(t))
        })
        .await;
    let created = one(&got, "idea.created", &id);
    assert_eq!(created["actor"], api_key);
    assert_eq!(created["appId"], json!(app_id));
    assert_eq!(
        created["data"]["idea"], idea,
        "the idea as the API answered it"
    );
    let updates = of(&got, "idea.updated");
    assert_eq!(updates.len(), 2, "{updates:#?}");
    assert_eq!(updates[0]["actor"], api_key);
    assert_eq!(updates[0]["data"]["idea"], moved.data().clone());
    assert_eq!(updates[0]["data"]["statusChange"]["from"]["name"], "Open");
    assert_eq!(updates[0]["data"]["statusChange"]["to"]["name"], "Planned");
    assert_eq!(updates[1]["actor"]["type"], "user", "from the dashboard");
    assert_eq!(updates[1]["actor"]["email"], "owner@example.com");
    assert_eq!(
        updates[1]["data"]["statusChange"]["to"]["name"],
        "In progress"
    );
    assert_eq!(
        one(&got, "vote.created", &vote_id)["data"]["vote"],
        vote.data().clone()
    );
    assert_eq!(
        one(&got, "vote.deleted", &vote_id)["data"]["ideaId"],
        json!(id)
    );
    let c = one(
        &got,
        "comment.created",
        comment.data()["id"].as_str().unwrap(),
    );
    assert_eq!(c["data"]["comment"], comment.data().clone());
    let m = one(&got, "idea.merged", &other);
    assert_eq!(m["data"]["into"], merged.data().clone());
    assert_eq!(m["data"]["idea"]["mergedIntoId"], json!(id));
    assert_eq!(
        one(&got, "idea.deleted", &other)["data"]["idea"]["id"],
        json!(other)
    );
    assert_eq!(
        one(&got, "contact.created", &cid)["data"]["contact"],
        contact.data().clone()
    );
    assert_eq!(
        one(&got, "contact.updated", &cid)["data"]["contact"],
        patched.data().clone()
    );
    assert_eq!(
        one(&got, "contact.deleted", &cid)["data"]["contact"]["status"],
        "qualified"
    );
    let rid = response["id"].as_str().unwrap();
    let r = one(&got, "survey.response.created", rid);
    assert_eq!(r["actor"], json!({"type": "visitor", "id": visitor}));
    assert_eq!(
        (r["data"]["surveyId"].clone(), r["data"]["score"].clone()),
        (json!(survey), json!(null))
    );
    let r = one(&got, "survey.response.completed", rid);
    assert_eq!(r["data"]["response"], response);
    assert_eq!(r["data"]["score"], json!(9.0));
    let e = one(&got, "erasure.completed", &job);
    assert_eq!(
        (e["actor"].clone(), e["data"]["erasure"]["state"].clone()),
        (json!({"type": "system"}), json!("done"))
    );
    let d = one(&got, "app.deletion.started", &deletion_job);
    assert_eq!(d["actor"], json!({"type": "admin"}));
    assert_eq!(d["data"]["job"], deletion.data().clone());
    for t in types::ALL {
        assert_eq!(of(&got, t).len(), wanted(t), "{t}");
    }
}

/// How many events of type `t` the test above causes.
fn wanted(t: &str) -> usize {
    match t {
        "idea.created" | "idea.updated" => 2,
        "erasure.failed" | "webhook.test" => 0,
        _ => 1,
    }
}
