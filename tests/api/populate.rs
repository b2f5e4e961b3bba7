//! An app with some of everything (contacts, the first made with an idempotency key, ideas with
//! votes and comments, a survey with
//! responses, events with an identify, so a profile and traffic, and a finished erasure, so a
//! suppression list and an erasure job) and a snapshot of what its
//! APIs show, for the deletion tests. Shared by the `api` and `interop` test binaries.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::events::{batch, track};
use crate::helpers::*;

/// Every permission: the snapshot reads everything.
pub const ALL: [&str; 13] = [
    "surveys:read",
    "responses:read",
    "contacts:read",
    "contacts:write",
    "contacts:delete",
    "ideas:read",
    "ideas:write",
    "ideas:moderate",
    "votes:write",
    "comments:write",
    "profiles:read",
    "analytics:read",
    "privacy:erase",
];

/// A populated app: its id, integration key, API key (every permission) and survey.
#[derive(Debug, Clone)]
pub struct Full {
    pub id: String,
    pub ik: String,
    pub key: String,
    pub survey: String,
}

async fn ok(a: Answer, what: &str) -> Value {
    assert!(a.status.is_success(), "{what}: {} {}", a.status, a.body);
    a.data().clone()
}

/// An enterprise app named `name` with `n` of each thing; events carry messageIds `<tag>_<i>`.
pub async fn full_app(app: &TestApp, name: &str, tag: &str, n: usize) -> Full {
    let made = app
        .admin(
            Method::POST,
            "/apps",
            Some(json!({"name": name, "plan": "enterprise"})),
        )
        .await;
    let made = ok(made, "app").await;
    let id = made["id"].as_str().unwrap().to_owned();
    let ik = made["integrationKey"].as_str().unwrap().to_owned();
    let key = app.create_key(&id, &ALL).await.1;
    for i in 0..n {
        let c = json!({"email": format!("{tag}{i}@example.com"), "firstName": "Ada"});
        // The first with an Idempotency-Key: its kept answer and expiry entry are the app's.
        let idem = format!("populate-{tag}{i}");
        let mut headers = vec![("x-api-key", key.as_str())];
        if i == 0 {
            headers.push(("idempotency-key", idem.as_str()));
        }
        let made = app
            .send(Method::POST, "/acq/v1/contacts", &headers, Some(c))
            .await;
        ok(made, "contact").await;
        let author =
            json!({"id": format!("u{i}"), "name": "Ada", "email": format!("{tag}{i}@example.com")});
        let idea = json!({"title": format!("Idea {tag} {i}"), "author": author.clone()});
        let idea = ok(
            app.api(&key, Method::POST, "/api/v1/ideas", Some(idea))
                .await,
            "idea",
        )
        .await;
        let idea = idea["id"].as_str().unwrap();
        let votes = format!("/api/v1/ideas/{idea}/votes");
        ok(
            app.api(
                &key,
                Method::POST,
                &votes,
                Some(json!({"voter": author.clone()})),
            )
            .await,
            "vote",
        )
        .await;
        let comments = format!("/api/v1/ideas/{idea}/comments");
        let comment = json!({"content": format!("Yes {i}"), "author": author});
        ok(
            app.api(&key, Method::POST, &comments, Some(comment)).await,
            "comment",
        )
        .await;
    }
    let body = json!({"title": "NPS", "type": "nps", "targeting": {"percentage": 100},
        "questions": [{"id": "score", "text": "How likely?", "type": "scale"}]});
    let survey = ok(
        app.admin(Method::POST, &format!("/apps/{id}/surveys"), Some(body))
            .await,
        "survey",
    )
    .await;
    let survey = survey["id"].as_str().unwrap().to_owned();
    let active = json!({"status": "active"});
    let path = format!("/apps/{id}/surveys/{survey}/transition");
    ok(
        app.admin(Method::POST, &path, Some(active)).await,
        "activate",
    )
    .await;
    let mut events = Vec::new();
    for i in 0..n {
        let visitor = anon(&format!("{tag}-visitor-{i}"));
        let answer =
            json!({"anonymousId": visitor, "answers": [{"questionId": "score", "value": 9}]});
        let path = format!("/api/w/surveys/{survey}/responses");
        ok(
            app.send(Method::POST, &path, &[("x-app-key", &ik)], Some(answer))
                .await,
            "response",
        )
        .await;
        let mut t = track(&format!("{tag}_{i}"));
        t["anonymousId"] = json!(visitor);
        events.push(t);
        events.push(json!({"type": "identify", "userId": format!("user_{i}"), "anonymousId": visitor,
            "messageId": format!("msg_{tag}_id{i}"), "traits": {"email": format!("{tag}{i}@example.com")}}));
    }
    if n > 0 {
        let path = "/api/w/analytics/collect";
        let sent = app
            .send(
                Method::POST,
                path,
                &[("x-app-key", &ik)],
                Some(batch(events)),
            )
            .await;
        assert_eq!(ok(sent, "collect").await["accepted"], json!(2 * n));
    }
    erase_someone(app, &key, tag).await;
    Full {
        id,
        ik,
        key,
        survey,
    }
}

/// Erases a person who never came (so the app has an erasure job and a suppression entry, and
/// its answers stay as they were) and waits until the job is done (at most 60 s).
async fn erase_someone(app: &TestApp, key: &str, tag: &str) {
    let who =
        json!({"userId": format!("gone_{tag}"), "anonymousIds": [anon(&format!("gone-{tag}"))]});
    let started = app
        .api(key, Method::POST, "/api/v1/erasures", Some(who))
        .await;
    let id = ok(started, "erasure").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = app
            .api(key, Method::GET, &format!("/api/v1/erasures/{id}"), None)
            .await;
        if ok(a, "erasure").await["state"] == "done" {
            return;
        }
        assert!(Instant::now() < deadline, "the erasure never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Everything the app's APIs show: contacts, ideas (with their counts), votes, comments,
/// responses, the profile of `user_0` and the traffic of the last day.
pub async fn snapshot(app: &TestApp, f: &Full) -> Value {
    let get = |path: String| async move {
        let a = app.api(&f.key, Method::GET, &path, None).await;
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        a.data().clone()
    };
    let ideas = get("/api/v1/ideas?limit=100".into()).await;
    let mut engagement = Vec::new();
    for idea in ideas.as_array().unwrap() {
        let id = idea["id"].as_str().unwrap();
        engagement.push(get(format!("/api/v1/ideas/{id}/votes?limit=100")).await);
        engagement.push(get(format!("/api/v1/ideas/{id}/comments?limit=100")).await);
    }
    let to = chrono::Utc::now() + chrono::Duration::hours(1);
    let from = to - chrono::Duration::days(1);
    let fmt = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:00:00Z").to_string();
    let traffic = get(format!(
        "/api/v1/analytics/traffic?interval=hour&from={}&to={}",
        fmt(from),
        fmt(to)
    ))
    .await;
    // `null` for an app without it.
    let profile = app
        .api(&f.key, Method::GET, "/api/v1/profiles/user_0", None)
        .await;
    let profile = if profile.status == 404 {
        Value::Null
    } else {
        profile.data().clone()
    };
    json!({
        "contacts": get("/acq/v1/contacts?limit=100".into()).await,
        "ideas": ideas,
        "engagement": engagement,
        "responses": get(format!("/api/v1/surveys/{}/responses?limit=100", f.survey)).await,
        "profile": profile,
        "traffic": traffic["totals"],
    })
}

/// Polls the job at `/admin/v1/jobs/{id}` until it is finished (at most 60 s); returns it.
pub async fn finished_job(app: &TestApp, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = app.admin(Method::GET, &format!("/jobs/{id}"), None).await;
        assert_eq!(a.status, 200, "{}", a.body);
        if matches!(a.data()["state"].as_str(), Some("done" | "failed")) {
            return a.data().clone();
        }
        assert!(
            Instant::now() < deadline,
            "job not finished within 60 s: {}",
            a.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until the traffic API shows `events` events for `f` over the last day (at most 30 s).
pub async fn traffic_shows(app: &TestApp, f: &Full, events: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while snapshot(app, f).await["traffic"]["events"] != json!(events) {
        assert!(
            Instant::now() < deadline,
            "traffic never showed {events} events"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every `(tree, key)` of the sled database under `data_dir` (the server stopped) whose key or
/// value holds `app`.
pub fn sled_traces(data_dir: &std::path::Path, app: &str) -> Vec<(String, String)> {
    let db = crate::helpers::open_stopped_db(data_dir);
    tributary::deletion::sled::traces(&db, app).unwrap()
}
