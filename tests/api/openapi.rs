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

/// Sends a request and records its answer under `template`.
async fn call(
    app: &TestApp,
    s: &mut Samples,
    method: Method,
    (template, path): (&str, &str),
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Value {
    let a = app.send(method.clone(), path, headers, body).await;
    s.add(&method, template, &a)
}

async fn contacts_answers(app: &TestApp, s: &mut Samples) {
    let (app_id, _) = app.create_app("enterprise").await;
    let (_, key) = app
        .create_key(
            &app_id,
            &["contacts:read", "contacts:write", "contacts:delete"],
        )
        .await;
    let (_, none) = app.create_key(&app_id, &[]).await;
    let k = [("x-api-key", key.as_str())];
    let list = "/acq/v1/contacts";
    let c = call(
        app,
        s,
        Method::POST,
        (list, list),
        &k,
        Some(json!({"email": "doc@example.com", "companyId": "c1", "tags": ["a"]})),
    )
    .await;
    let id = c["id"].as_str().unwrap().to_owned();
    call(
        app,
        s,
        Method::POST,
        (list, list),
        &k,
        Some(json!({"email": "doc@example.com"})),
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (list, list),
        &k,
        Some(json!({"email": "nope", "score": 200})),
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (list, list),
        &[],
        Some(json!({"email": "x@example.com"})),
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (list, list),
        &[("x-api-key", &none)],
        Some(json!({})),
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (list, "/acq/v1/contacts?limit=1&sort=email"),
        &k,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (list, "/acq/v1/contacts?status=vip"),
        &k,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (list, list),
        &[("x-api-key", "tk_bad_bad")],
        None,
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (list, list),
        &[("x-api-key", &none)],
        None,
    )
    .await;
    let one = "/acq/v1/contacts/{id}";
    let path = format!("/acq/v1/contacts/{id}");
    call(app, s, Method::GET, (one, &path), &k, None).await;
    call(
        app,
        s,
        Method::GET,
        (one, "/acq/v1/contacts/000000000000000000000000"),
        &k,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one, &path),
        &k,
        Some(json!({"status": "unsubscribed"})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one, &path),
        &k,
        Some(json!({"status": "new"})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one, &path),
        &k,
        Some(json!({"score": "x"})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one, "/acq/v1/contacts/x"),
        &k,
        Some(json!({})),
    )
    .await;
    let batch = "/acq/v1/contacts/batch";
    let items = json!({"mode": "upsert", "contacts": [{"email": "doc@example.com"}, {"email": "b@example.com"}, {"email": "bad"}]});
    call(app, s, Method::POST, (batch, batch), &k, Some(items)).await;
    call(
        app,
        s,
        Method::POST,
        (batch, batch),
        &k,
        Some(json!({"mode": "merge"})),
    )
    .await;
    call(app, s, Method::DELETE, (one, &path), &k, None).await;
    call(app, s, Method::DELETE, (one, &path), &k, None).await;
    call(
        app,
        s,
        Method::DELETE,
        (one, &path),
        &[("x-api-key", &none)],
        None,
    )
    .await;
    // 429: a free key with a tiny rate.
    let (free, _) = app.create_app("free").await;
    let (_, slow) = app.create_key(&free, &["contacts:read"]).await;
    for _ in 0..3 {
        call(
            app,
            s,
            Method::GET,
            (list, list),
            &[("x-api-key", &slow)],
            None,
        )
        .await;
    }
}

async fn profile_and_collector_answers(app: &TestApp, s: &mut Samples) {
    let (app_id, ik) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["profiles:read"]).await;
    let collect = "/api/w/analytics/collect";
    let identify = json!({"batch": [{"type": "identify", "userId": "u-doc", "traits": {"plan": "pro"},
        "anonymousId": "7f1f8f0e-0a0b-4c3d-8e9f-0a1b2c3d4e5f", "messageId": "msg_doc_1"},
        {"type": "track", "anonymousId": "nope", "messageId": "msg_doc_2"}]});
    let a = app.collect(&ik, identify).await;
    s.add(&Method::POST, collect, &a);
    let a = app.collect(&ik, json!({"batch": []})).await;
    s.add(&Method::POST, collect, &a);
    let a = app.collect("ik_bad_bad", json!({"batch": []})).await;
    s.add(&Method::POST, collect, &a);
    let big = json!({"batch": [{"type": "track", "event": "x", "properties": {"p": "x".repeat(600_000)}}]});
    let a = app.collect(&ik, big).await;
    s.add(&Method::POST, collect, &a);
    let k = [("x-api-key", key.as_str())];
    let t = "/api/v1/profiles/{userId}";
    call(app, s, Method::GET, (t, "/api/v1/profiles/u-doc"), &k, None).await;
    call(
        app,
        s,
        Method::GET,
        (t, "/api/v1/profiles/nobody"),
        &k,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (t, "/api/v1/profiles/u-doc"),
        &[],
        None,
    )
    .await;
}

async fn admin_answers(app: &TestApp, s: &mut Samples) {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let h = [("authorization", auth.as_str())];
    let apps = "/admin/v1/apps";
    let created = call(
        app,
        s,
        Method::POST,
        (apps, apps),
        &h,
        Some(json!({"name": "Doc"})),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    call(
        app,
        s,
        Method::POST,
        (apps, apps),
        &h,
        Some(json!({"name": ""})),
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (apps, apps),
        &[],
        Some(json!({"name": "x"})),
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (apps, "/admin/v1/apps?limit=1"),
        &h,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (apps, "/admin/v1/apps?limit=0"),
        &h,
        None,
    )
    .await;
    let one = "/admin/v1/apps/{appId}";
    let path = format!("/admin/v1/apps/{id}");
    let missing = "/admin/v1/apps/000000000000000000000000";
    call(app, s, Method::GET, (one, &path), &h, None).await;
    call(app, s, Method::GET, (one, missing), &h, None).await;
    call(
        app,
        s,
        Method::PATCH,
        (one, &path),
        &h,
        Some(json!({"plan": "pro"})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one, &path),
        &h,
        Some(json!({"plan": "gold"})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one, missing),
        &h,
        Some(json!({"plan": "pro"})),
    )
    .await;
    let rotate = "/admin/v1/apps/{appId}/integration-key";
    call(
        app,
        s,
        Method::POST,
        (rotate, &format!("{path}/integration-key")),
        &h,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (rotate, &format!("{missing}/integration-key")),
        &h,
        None,
    )
    .await;
    let keys = "/admin/v1/apps/{appId}/keys";
    let kp = format!("{path}/keys");
    let key = call(
        app,
        s,
        Method::POST,
        (keys, &kp),
        &h,
        Some(json!({"name": "k", "permissions": ["contacts:read"]})),
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (keys, &kp),
        &h,
        Some(json!({"name": "k", "permissions": ["x"]})),
    )
    .await;
    call(
        app,
        s,
        Method::POST,
        (keys, &format!("{missing}/keys")),
        &h,
        Some(json!({"name": "k", "permissions": []})),
    )
    .await;
    call(app, s, Method::GET, (keys, &kp), &h, None).await;
    call(
        app,
        s,
        Method::GET,
        (keys, &format!("{kp}?cursor=x")),
        &h,
        None,
    )
    .await;
    call(
        app,
        s,
        Method::GET,
        (keys, &format!("{missing}/keys")),
        &h,
        None,
    )
    .await;
    let one_key = "/admin/v1/apps/{appId}/keys/{keyId}";
    let key_path = format!("{kp}/{}", key["id"].as_str().unwrap());
    call(
        app,
        s,
        Method::PATCH,
        (one_key, &key_path),
        &h,
        Some(json!({"permissions": ["contacts:write"]})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one_key, &key_path),
        &h,
        Some(json!({"permissions": "all"})),
    )
    .await;
    call(
        app,
        s,
        Method::PATCH,
        (one_key, &format!("{kp}/x")),
        &h,
        Some(json!({"permissions": []})),
    )
    .await;
    call(app, s, Method::DELETE, (one_key, &key_path), &h, None).await;
    call(
        app,
        s,
        Method::DELETE,
        (one_key, &format!("{kp}/x")),
        &h,
        None,
    )
    .await;
}

#[tokio::test]
async fn every_operation_answers_as_its_openapi_schema_says() {
    let app = spawn_app_with(|s| s.plans.free.requests_per_minute = 2);
    let mut s = Samples::default();
    call(
        &app,
        &mut s,
        Method::GET,
        ("/healthz", "/healthz"),
        &[],
        None,
    )
    .await;
    call(
        &app,
        &mut s,
        Method::GET,
        ("/openapi.json", "/openapi.json"),
        &[],
        None,
    )
    .await;
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
    contacts_answers(&app, &mut s).await;
    profile_and_collector_answers(&app, &mut s).await;
    admin_answers(&app, &mut s).await;
    let doc = app.send(Method::GET, "/openapi.json", &[], None).await.body;
    let dir = tempfile::tempdir().unwrap();
    let (doc_file, samples_file) = (dir.path().join("doc.json"), dir.path().join("samples.json"));
    std::fs::write(&doc_file, doc.to_string()).unwrap();
    std::fs::write(&samples_file, Value::Array(s.0).to_string()).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join(".venv/bin/python"))
        .arg(root.join("tests/support/openapi_check.py"))
        .args([&doc_file, &samples_file])
        .output()
        .expect(".venv/bin/python runs (tests/run sets it up)");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
