//! Webhooks in process: a receiver on 127.0.0.1 (a tiny HTTP server in the test) gets the
//! changes made through the API, signed; failures are retried in lane order and finally disable
//! the endpoint; the admin API validates, isolates apps and refuses private addresses unless
//! allowed (also after DNS, at delivery). The end-to-end proofs with real processes and the
//! `standardwebhooks` library are in `tests/interop`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::*;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    headers: HashMap<String, String>,
    raw: String,
    pub(crate) body: Value,
}

impl Received {
    fn id(&self) -> &str {
        &self.headers["webhook-id"]
    }
}

/// A receiver: records every request and answers the queued statuses, then 200.
#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    port: u16,
    got: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<VecDeque<u16>>>,
    /// Answer this status once the queue is empty.
    otherwise: Arc<Mutex<u16>>,
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let r = Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            port,
            got: Arc::default(),
            answers: Arc::default(),
            otherwise: Arc::new(Mutex::new(200)),
        };
        let me = r.clone();
        tokio::spawn(async move {
            loop {
                let (conn, _) = listener.accept().await.unwrap();
                let me = me.clone();
                tokio::spawn(async move { me.serve(conn).await });
            }
        });
        r
    }

    async fn serve(&self, mut conn: tokio::net::TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            let n = conn.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let headers: HashMap<String, String> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = conn.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let raw = String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned();
        let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
        let status = {
            let next = self.answers.lock().unwrap().pop_front();
            next.unwrap_or(*self.otherwise.lock().unwrap())
        };
        self.got
            .lock()
            .unwrap()
            .push(Received { headers, raw, body });
        let answer =
            format!("HTTP/1.1 {status} X\r\ncontent-length: 6\r\nconnection: close\r\n\r\nanswer");
        let _ = conn.write_all(answer.as_bytes()).await;
        let _ = conn.shutdown().await;
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (polling, with a deadline) until `done` holds of what was received.
    pub(crate) async fn wait(
        &self,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.got();
            if done(&got) {
                return got;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: got {:#?}",
                got.iter().map(|r| &r.body).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Polls `f` until it answers `Some`, with a deadline.
async fn until<T, F: std::future::Future<Output = Option<T>>>(what: &str, f: impl Fn() -> F) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of one line of `/metrics` (`name` with its labels), 0 when absent.
pub(crate) async fn metric(app: &TestApp, name: &str) -> f64 {
    let text = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A new app with a key holding every contact permission: (appId, key).
async fn contacts_app(app: &TestApp) -> (String, String) {
    let (id, _) = app.create_app("enterprise").await;
    let perms = ["contacts:read", "contacts:write", "contacts:delete"];
    let (_, key) = app.create_key(&id, &perms).await;
    (id, key)
}

/// Creates an endpoint; returns (webhookId, secret).
pub(crate) async fn endpoint(app: &TestApp, app_id: &str, body: Value) -> (String, String) {
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/webhooks"),
            Some(body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let d = a.data();
    (
        d["id"].as_str().unwrap().to_owned(),
        d["secret"].as_str().unwrap().to_owned(),
    )
}

/// The attempts log of the endpoint at `one` (`/apps/{appId}/webhooks/{webhookId}`), newest first.
async fn log_of(app: &TestApp, one: &str) -> Vec<Value> {
    let a = app
        .admin(Method::GET, &format!("{one}/attempts"), None)
        .await;
    a.data().as_array().cloned().unwrap_or_default()
}

/// Checks the Standard Webhooks signature `sig` (one `v1,...`) of `r` with `secret`.
fn signed_by(r: &Received, sig: &str, secret: &str) -> bool {
    let ts: i64 = r.headers["webhook-timestamp"].parse().unwrap();
    tributary::webhooks::sign::signature(secret, r.id(), ts, r.raw.as_bytes()).as_deref()
        == Some(sig)
}

#[tokio::test]
async fn a_change_reaches_only_the_endpoints_subscribed_to_it_signed_with_the_standard_headers() {
    let app = spawn_app();
    let rx = Receiver::start().await;
    let (app_id, key) = contacts_app(&app).await;
    let contacts = json!({"url": rx.url, "eventTypes": ["contact.created", "contact.updated"]});
    let (hook, secret) = endpoint(&app, &app_id, contacts).await;
    let ideas = json!({"url": format!("{}/ideas", rx.url), "eventTypes": ["idea.created"]});
    let (other, _) = endpoint(&app, &app_id, ideas).await;
    let c = app
        .create_contact(&key, json!({"email": "ada@example.com"}))
        .await;
    assert_eq!(c.status, 201);
    let got = rx.wait("the contact's event", |g| !g.is_empty()).await;
    let r = &got[0];
    assert_eq!(r.body["type"], "contact.created");
    assert_eq!(r.body["appId"], app_id.as_str());
    assert_eq!(r.body["data"]["contact"]["id"], c.data()["id"]);
    assert_eq!(r.body["id"].as_str(), Some(r.id()));
    assert!(r.id().starts_with("evt_"));
    assert!(r.body["sequence"].as_u64().is_some_and(|s| s > 0));
    assert_eq!(r.headers["content-type"], "application/json");
    assert!(r.headers["user-agent"].starts_with("Tributary-Webhooks/"));
    assert!(signed_by(r, &r.headers["webhook-signature"], &secret));
    let forged = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    assert!(!signed_by(r, &r.headers["webhook-signature"], forged));
    // The attempt is logged, the other endpoint got nothing (one fan-out made both).
    let one = format!("/apps/{app_id}/webhooks/{hook}");
    let log = until("the attempt logged", || async {
        let log = log_of(&app, &one).await;
        (!log.is_empty()).then_some(log)
    })
    .await;
    assert_eq!(log[0]["status"], 200);
    assert_eq!(log[0]["trigger"], "event");
    assert_eq!(log[0]["response"], "answer");
    let other = format!("/apps/{app_id}/webhooks/{other}");
    let o = app.admin(Method::GET, &other, None).await;
    assert_eq!(o.data()["pending"], 0);
    assert_eq!(log_of(&app, &other).await, Vec::<Value>::new());
    assert_eq!(rx.got().len(), 1);
    let delivered = "tributary_webhook_deliveries_total{result=\"delivered\"}";
    assert_eq!(metric(&app, delivered).await, 1.0);
}

#[tokio::test]
async fn a_subjects_events_arrive_in_order_through_failures_and_duplicates_keep_their_id() {
    let app = spawn_app_with(|s| s.webhooks.retry_schedule_secs = vec![0; 6]);
    let rx = Receiver::start().await;
    rx.answers.lock().unwrap().extend([500, 503, 500]);
    let (app_id, key) = contacts_app(&app).await;
    endpoint(&app, &app_id, json!({"url": rx.url, "eventTypes": ["*"]})).await;
    let c = app
        .create_contact(&key, json!({"email": "order@example.com"}))
        .await;
    let path = format!("/acq/v1/contacts/{}", c.data()["id"].as_str().unwrap());
    for score in 1..=4 {
        let u = app
            .api(&key, Method::PATCH, &path, Some(json!({"score": score})))
            .await;
        assert_eq!(u.status, 200, "{}", u.body);
    }
    let got = rx.wait("5 events delivered", |g| g.len() >= 8).await;
    // Three failures, each retried with the same id before anything else of the subject.
    let ids: Vec<&str> = got.iter().map(Received::id).collect();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[1], ids[2]);
    assert_eq!(ids[2], ids[3]);
    let mut distinct: Vec<&str> = ids.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "{ids:?}");
    let seqs: Vec<u64> = got
        .iter()
        .map(|r| r.body["sequence"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    let kinds: Vec<&str> = got[3..]
        .iter()
        .map(|r| r.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "contact.created");
    assert!(kinds[1..].iter().all(|k| *k == "contact.updated"));
    let scores: Vec<i64> = got[4..]
        .iter()
        .map(|r| r.body["data"]["contact"]["score"].as_i64().unwrap())
        .collect();
    assert_eq!(scores, [1, 2, 3, 4]);
}

#[tokio::test]
async fn after_the_last_retry_the_delivery_is_given_up_and_the_endpoint_disabled_until_reenabled() {
    // Retries after about a second: the update is queued behind the first event meanwhile.
    let app = spawn_app_with(|s| s.webhooks.retry_schedule_secs = vec![1, 1]);
    let rx = Receiver::start().await;
    *rx.otherwise.lock().unwrap() = 500;
    let (app_id, key) = contacts_app(&app).await;
    let (hook, _) = endpoint(&app, &app_id, json!({"url": rx.url, "eventTypes": ["*"]})).await;
    let one = format!("/apps/{app_id}/webhooks/{hook}");
    let c = app
        .create_contact(&key, json!({"email": "down@example.com"}))
        .await;
    let path = format!("/acq/v1/contacts/{}", c.data()["id"].as_str().unwrap());
    app.api(&key, Method::PATCH, &path, Some(json!({"score": 5})))
        .await;
    let disabled = until("the endpoint disabled", || async {
        let e = app.admin(Method::GET, &one, None).await;
        (e.data()["status"] == "disabled").then(|| e.data().clone())
    })
    .await;
    assert!(
        disabled["disabledReason"]
            .as_str()
            .is_some_and(|r| r.contains("3 attempts") && r.contains("HTTP 500")),
        "{disabled}"
    );
    assert!(disabled["disabledAt"].is_string());
    assert_eq!(
        disabled["pending"], 0,
        "the other waiting delivery is dropped"
    );
    // Only the first event was tried (three times): the update waited behind it in its lane.
    let ids: Vec<String> = rx.got().iter().map(|r| r.id().to_owned()).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.iter().all(|i| *i == ids[0]));
    let log = log_of(&app, &one).await;
    let triggers: Vec<&str> = log.iter().map(|a| a["trigger"].as_str().unwrap()).collect();
    assert_eq!(triggers, ["retry", "retry", "event"], "newest first");
    let attempt = log[0]["id"].as_str().unwrap();
    app.admin(
        Method::POST,
        &format!("{one}/attempts/{attempt}/redeliver"),
        None,
    )
    .await
    .assert_error(409, "CONFLICT");
    // Disabled: a new change is not queued; re-enabled: the next one is delivered.
    app.api(&key, Method::PATCH, &path, Some(json!({"score": 6})))
        .await;
    until("the change fanned out", || async {
        (metric(&app, "tributary_webhook_events_total").await == 3.0).then_some(())
    })
    .await;
    *rx.otherwise.lock().unwrap() = 200;
    let on = app
        .admin(Method::PATCH, &one, Some(json!({"status": "active"})))
        .await;
    assert_eq!(on.data()["status"], "active");
    assert!(on.data().get("disabledReason").is_none(), "{}", on.body);
    app.api(&key, Method::PATCH, &path, Some(json!({"score": 7})))
        .await;
    let got = rx
        .wait("the event after re-enabling", |g| g.len() >= 4)
        .await;
    assert_eq!(got[3].body["data"]["contact"]["score"], 7);
    let given_up = "tributary_webhook_deliveries_total{result=\"given_up\"}";
    assert_eq!(
        metric(&app, given_up).await,
        2.0,
        "the head and the update behind it"
    );
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_new_one_during_the_overlap_and_a_redeliver_keeps_the_id()
{
    let app = spawn_app_with(|s| s.webhooks.log_per_endpoint = 3);
    let rx = Receiver::start().await;
    let (app_id, _) = contacts_app(&app).await;
    let (hook, old) = endpoint(&app, &app_id, json!({"url": rx.url, "eventTypes": ["*"]})).await;
    let one = format!("/apps/{app_id}/webhooks/{hook}");
    let r = app
        .admin(
            Method::POST,
            &format!("{one}/secret"),
            Some(json!({"overlapSeconds": 3600})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let new = r.data()["secret"].as_str().unwrap().to_owned();
    assert!(r.data()["previousSecretExpiresAt"].is_string());
    let t = app.admin(Method::POST, &format!("{one}/test"), None).await;
    assert_eq!(t.status, 200, "{}", t.body);
    assert_eq!(t.data()["status"], 200);
    assert_eq!(t.data()["trigger"], "test");
    let got = rx.got();
    assert_eq!(got.len(), 1, "sent before the answer");
    let sigs: Vec<&str> = got[0].headers["webhook-signature"].split(' ').collect();
    assert_eq!(sigs.len(), 2);
    assert!(signed_by(&got[0], sigs[0], &new), "the new secret first");
    assert!(signed_by(&got[0], sigs[1], &old));
    assert_eq!(got[0].body["type"], "webhook.test");
    assert_eq!(got[0].body["data"]["webhookId"], hook.as_str());
    // Without overlap only the newest secret signs.
    let r = app
        .admin(
            Method::POST,
            &format!("{one}/secret"),
            Some(json!({"overlapSeconds": 0})),
        )
        .await;
    let newest = r.data()["secret"].as_str().unwrap().to_owned();
    app.admin(Method::POST, &format!("{one}/test"), None).await;
    let last = rx.got().pop().unwrap();
    assert!(signed_by(
        &last,
        &last.headers["webhook-signature"],
        &newest
    ));
    // Redeliver: the logged event again, same webhook-id and body.
    let attempt = t.data()["id"].as_str().unwrap();
    let re = app
        .admin(
            Method::POST,
            &format!("{one}/attempts/{attempt}/redeliver"),
            None,
        )
        .await;
    assert_eq!(re.status, 202, "{}", re.body);
    let got = rx.wait("the redelivery", |g| g.len() >= 3).await;
    assert_eq!(got[2].id(), got[0].id());
    assert_eq!(got[2].raw, got[0].raw);
    until("the redelivery logged", || async {
        let log = log_of(&app, &one).await;
        log.iter()
            .any(|x| x["trigger"] == "redeliver")
            .then_some(())
    })
    .await;
    // The log keeps the newest 3 (log_per_endpoint).
    for _ in 0..3 {
        app.admin(Method::POST, &format!("{one}/test"), None).await;
    }
    let log = log_of(&app, &one).await;
    assert_eq!(log.len(), 3);
    assert!(
        log.iter().all(|a| a["trigger"] == "test"),
        "newest first: {log:?}"
    );
    let page = app
        .admin(Method::GET, &format!("{one}/attempts?limit=2"), None)
        .await;
    assert_eq!(page.data().as_array().unwrap().len(), 2);
    let next = page.body["pagination"]["nextCursor"].as_str().unwrap();
    let rest = app
        .admin(
            Method::GET,
            &format!("{one}/attempts?limit=2&cursor={next}"),
            None,
        )
        .await;
    assert_eq!(rest.data()[0]["id"], log[2]["id"]);
}

#[tokio::test]
async fn every_invalid_field_is_a_400_and_another_apps_webhook_is_not_found() {
    let app = spawn_app_with(|s| s.webhooks.max_endpoints_per_app = 2);
    let (app_id, _) = contacts_app(&app).await;
    let (other_app, _) = contacts_app(&app).await;
    let list = format!("/apps/{app_id}/webhooks");
    let u = "http://127.0.0.1:9/";
    let cases = [
        (json!({"eventTypes": ["*"]}), vec!["url"]),
        (
            json!({"url": "gopher://x.example/", "eventTypes": ["*"]}),
            vec!["url"],
        ),
        (
            json!({"url": "https://a:b@x.example/", "eventTypes": ["*"]}),
            vec!["url"],
        ),
        (json!({"url": u, "eventTypes": []}), vec!["eventTypes"]),
        (
            json!({"url": u, "eventTypes": ["nope"]}),
            vec!["eventTypes[0]"],
        ),
        (json!({"url": u, "eventTypes": "*"}), vec!["eventTypes"]),
        (
            json!({"url": u, "eventTypes": ["*"], "includeInternalComments": "yes"}),
            vec!["includeInternalComments"],
        ),
        (
            json!({"url": u, "eventTypes": ["*"], "filters": {"surveyIds": [1]}}),
            vec!["filters.surveyIds[0]"],
        ),
        (
            json!({"url": 5, "eventTypes": ["*"], "pending": 3}),
            vec!["pending", "url"],
        ),
    ];
    for (body, fields) in cases {
        let a = app.admin(Method::POST, &list, Some(body.clone())).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), fields, "{body}");
    }
    let (hook, _) = endpoint(&app, &app_id, json!({"url": u, "eventTypes": ["*"]})).await;
    let bad = app
        .admin(
            Method::POST,
            &format!("{list}/{hook}/secret"),
            Some(json!({"overlapSeconds": 604801})),
        )
        .await;
    assert_eq!(bad.fields(), ["overlapSeconds"]);
    let theirs = format!("/apps/{other_app}/webhooks/{hook}");
    for (m, p) in [
        (Method::GET, theirs.clone()),
        (Method::PATCH, theirs.clone()),
        (Method::DELETE, theirs.clone()),
        (Method::POST, format!("{theirs}/test")),
        (Method::POST, format!("{theirs}/secret")),
        (Method::GET, format!("{theirs}/attempts")),
    ] {
        let body = (m == Method::PATCH).then(|| json!({"status": "paused"}));
        app.admin(m.clone(), &p, body)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    let listed = app
        .admin(Method::GET, &format!("/apps/{other_app}/webhooks"), None)
        .await;
    assert_eq!(listed.data(), &json!([]));
    endpoint(&app, &app_id, json!({"url": u, "eventTypes": ["*"]})).await;
    app.admin(
        Method::POST,
        &list,
        Some(json!({"url": u, "eventTypes": ["*"]})),
    )
    .await
    .assert_error(409, "CONFLICT");
    let gone = app
        .admin(Method::DELETE, &format!("{list}/{hook}"), None)
        .await;
    assert_eq!(gone.data()["deleted"], true);
    app.admin(Method::GET, &format!("{list}/{hook}"), None)
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn private_addresses_are_refused_when_saved_and_again_after_dns_at_delivery() {
    let mut app = spawn_app();
    let rx = Receiver::start().await;
    let (app_id, key) = contacts_app(&app).await;
    // Saved while private addresses were allowed: a name resolving to 127.0.0.1 and a literal.
    let by_name = format!("http://localhost:{}/hook", rx.port);
    let (named, _) = endpoint(&app, &app_id, json!({"url": by_name, "eventTypes": ["*"]})).await;
    let (literal, _) = endpoint(
        &app,
        &app_id,
        json!({"url": rx.url, "eventTypes": ["webhook.test"]}),
    )
    .await;
    app.stop().await;
    let strict = start(app.data_dir.clone(), |s| s.webhooks.allow_private = false);
    let list = format!("/apps/{app_id}/webhooks");
    for url in [
        "http://127.0.0.1:1/",
        "http://[::1]/",
        "http://10.0.0.7/",
        "http://169.254.169.254/",
        "http://localhost/",
    ] {
        let a = strict
            .admin(
                Method::POST,
                &list,
                Some(json!({"url": url, "eventTypes": ["*"]})),
            )
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), ["url"], "{url}");
    }
    let t = strict
        .admin(Method::POST, &format!("{list}/{named}/test"), None)
        .await;
    assert_eq!(t.status, 200, "{}", t.body);
    assert_eq!(t.data()["status"], Value::Null);
    assert!(
        t.data()["error"]
            .as_str()
            .is_some_and(|e| e.contains("loopback")),
        "{}",
        t.body
    );
    let t = strict
        .admin(Method::POST, &format!("{list}/{literal}/test"), None)
        .await;
    assert!(
        t.data()["error"]
            .as_str()
            .is_some_and(|e| e.contains("address refused")),
        "{}",
        t.body
    );
    // An event for the endpoint by name is attempted and refused the same way.
    strict
        .create_contact(&key, json!({"email": "ssrf@example.com"}))
        .await;
    until("the refused event attempt", || async {
        let log = log_of(&strict, &format!("{list}/{named}")).await;
        log.iter()
            .any(|x| {
                x["trigger"] == "event"
                    && x["error"].as_str().is_some_and(|e| e.contains("loopback"))
            })
            .then_some(())
    })
    .await;
    assert!(rx.got().is_empty(), "nothing reached the receiver");
}
