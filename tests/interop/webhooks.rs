//! Webhooks end to end (issue 26), with real processes: `tributary serve` (killed with -9 and
//! restarted), and a receiver verifying every delivery with the `standardwebhooks` reference
//! library (`receiver.rs`). Signatures through a rotation, each event type to its subscribers
//! only, a receiver failing for two minutes, kill -9 with 1 000 events waiting and during a
//! burst, a slow receiver beside a fast one, 10 000 queued events in bounded memory, and the
//! private addresses refused.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::binary::{self, Server};
use crate::helpers::{Answer, TestApp};
use crate::receiver::{delivered_ids, firsts, Delivery, Receiver};

/// Every permission the scenarios' API calls need.
const PERMISSIONS: [&str; 12] = [
    "ideas:read",
    "ideas:write",
    "ideas:moderate",
    "votes:write",
    "comments:write",
    "contacts:read",
    "contacts:write",
    "contacts:delete",
    "surveys:read",
    "responses:read",
    "privacy:erase",
    "profiles:read",
];

/// `[webhooks]` of the tests: private addresses allowed (the receiver is on 127.0.0.1) and
/// quick retries (1, 2, 4 s, then every 5 s for about four minutes).
pub const QUICK: &str = "allow_private = true\nretry_schedule_secs = [1, 2, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]\n";

/// `tributary serve` over a data dir of its own, an app, a key with every permission.
pub struct Tributary {
    tmp: tempfile::TempDir,
    pub server: Server,
    pub api: TestApp,
    pub app_id: String,
    pub key: String,
    pub ik: String,
    env: Vec<(String, String)>,
}

/// Writes `[webhooks]` + `webhooks` to a config file in `dir`; returns its path.
fn config_file(dir: &Path, webhooks: &str) -> PathBuf {
    let path = dir.join("webhooks-test.toml");
    std::fs::write(&path, format!("[webhooks]\n{webhooks}")).unwrap();
    path
}

fn serve(data_dir: &Path, config: &Path, env: &[(String, String)]) -> Server {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    binary::start_bound(
        data_dir,
        "127.0.0.1:0",
        &["--config", config.to_str().unwrap()],
        &env,
    )
}

impl Tributary {
    /// Started with `webhooks` as its `[webhooks]` section and `env` on top.
    pub async fn start(webhooks: &str, env: &[(&str, &str)]) -> Tributary {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let config = config_file(tmp.path(), webhooks);
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let server = serve(&data, &config, &env);
        let api = TestApp::remote(&server.base, data);
        let (app_id, ik) = api.create_app("enterprise").await;
        let key = api.create_key(&app_id, &PERMISSIONS).await.1;
        Tributary {
            tmp,
            server,
            api,
            app_id,
            key,
            ik,
            env,
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    /// kill -9, then a new process over the same data dir with `webhooks` as its section.
    pub fn restart_killed(&mut self, webhooks: &str) {
        self.server.kill_9();
        self.start_again(webhooks);
    }

    /// A new process over the same data dir (the old one is gone).
    fn start_again(&mut self, webhooks: &str) {
        let config = config_file(self.tmp.path(), webhooks);
        self.server = serve(&self.data_dir(), &config, &self.env);
        self.api = TestApp::remote(&self.server.base, self.data_dir());
    }

    /// SIGTERM, then a new process with `webhooks` as its section.
    pub async fn restart_clean(&mut self, webhooks: &str) {
        self.server.terminate().await;
        self.start_again(webhooks);
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.api.api(&self.key, method, path, body).await
    }

    /// `call` that must answer `status`; its `data`.
    pub async fn ok(&self, method: Method, path: &str, body: Option<Value>, status: u16) -> Value {
        let a = self.call(method.clone(), path, body).await;
        assert_eq!(a.status, status, "{method} {path}: {}", a.body);
        a.data().clone()
    }

    /// `POST /admin/v1/apps/{app}/webhooks` with `body`; the created endpoint (with `secret`).
    pub async fn hook_in(&self, app: &str, body: Value) -> Value {
        let a = self
            .api
            .admin(Method::POST, &format!("/apps/{app}/webhooks"), Some(body))
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        assert!(
            a.data()["secret"]
                .as_str()
                .is_some_and(|s| s.starts_with("whsec_")),
            "{}",
            a.body
        );
        a.data().clone()
    }

    pub async fn hook(&self, body: Value) -> Value {
        self.hook_in(&self.app_id, body).await
    }

    /// The endpoint registered at `receiver.url(name)` for `types`, its receiver set to verify
    /// with its secret and answer 200; returns the endpoint (with `secret`).
    pub async fn subscribe(&self, receiver: &Receiver, name: &str, more: Value) -> Value {
        let mut body = json!({"url": receiver.url(name), "eventTypes": ["*"]});
        for (k, v) in more.as_object().unwrap() {
            body[k] = v.clone();
        }
        let hook = self.hook(body).await;
        receiver.ok(name, &[hook["secret"].as_str().unwrap()]).await;
        hook
    }

    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.api.admin(method, path, body).await
    }

    /// `GET` of the endpoint.
    pub async fn endpoint(&self, id: &str) -> Value {
        let a = self
            .admin(
                Method::GET,
                &format!("/apps/{}/webhooks/{id}", self.app_id),
                None,
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        a.data().clone()
    }

    /// Creates `n` contacts (batches of 100) whose emails start with `prefix`; returns their
    /// ids. About `pad` bytes of custom fields in each (notes of at most 1 000 characters).
    pub async fn contacts(&self, prefix: &str, n: usize, pad: usize) -> Vec<String> {
        let notes: serde_json::Map<String, Value> = (0..pad.div_ceil(900))
            .map(|i| (format!("note{i}"), json!("x".repeat(900))))
            .collect();
        let mut ids = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            let chunk: Vec<Value> = (i..n.min(i + 100))
                .map(
                    |j| json!({"email": format!("{prefix}{j}@example.com"), "customFields": notes}),
                )
                .collect();
            i += chunk.len();
            let d = self
                .ok(
                    Method::POST,
                    "/acq/v1/contacts/batch",
                    Some(json!({"mode": "create", "contacts": chunk})),
                    200,
                )
                .await;
            for r in d["results"].as_array().unwrap() {
                assert_eq!(r["result"], "created", "{r}");
                ids.push(r["id"].as_str().unwrap().to_owned());
            }
        }
        ids
    }
}

/// Every delivery verified, and each `webhook-id` carries one event (its body's `id`, type and
/// sequence every time it comes again).
pub fn all_verified_and_duplicates_alike(log: &[Delivery]) {
    let mut by_id: HashMap<&str, (&str, &str, Option<u64>)> = HashMap::new();
    for d in log {
        assert!(d.verified, "a delivery that does not verify: {d:?}");
        assert_eq!(
            d.id.as_ref(),
            d.body_id.as_ref(),
            "webhook-id is the event's id"
        );
        let this = (d.body_id.as_deref().unwrap_or(""), d.kind(), d.sequence);
        let first = *by_id.entry(d.id()).or_insert(this);
        assert_eq!(first, this, "a duplicate carries the same event");
    }
}

/// Per subject, the first 2xx deliveries arrive in increasing sequence.
pub fn in_order_per_subject(log: &[Delivery]) {
    let mut last: HashMap<&str, u64> = HashMap::new();
    for d in firsts(log) {
        let seq = d.sequence.expect("a sequence");
        if let Some(before) = last.insert(d.subject(), seq) {
            assert!(
                before < seq,
                "{} of {} arrived after sequence {before}: {seq}",
                d.kind(),
                d.subject()
            );
        }
    }
}

/// The types the endpoint got (first deliveries), counted.
fn types_of(log: &[Delivery]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for d in firsts(log) {
        *out.entry(d.kind().to_owned()).or_insert(0) += 1;
    }
    out
}

#[tokio::test]
async fn every_delivery_verifies_and_an_old_secret_still_does_during_the_overlap() {
    let receiver = Receiver::start();
    let t = Tributary::start(QUICK, &[]).await;
    let hook = t
        .subscribe(&receiver, "sig", json!({"eventTypes": ["contact.created"]}))
        .await;
    let id = hook["id"].as_str().unwrap();
    let old = hook["secret"].as_str().unwrap().to_owned();
    t.contacts("before", 3, 0).await;
    let log = receiver
        .until("sig", "3 deliveries", Duration::from_secs(30), |l| {
            firsts(l).len() >= 3
        })
        .await;
    all_verified_and_duplicates_alike(&log);
    let first = &log[0];
    assert!(first
        .user_agent
        .as_deref()
        .is_some_and(|u| u.starts_with("Tributary-Webhooks/")));
    let sig = &receiver.log("sig", true).await[0];
    let headers = sig.headers.as_ref().unwrap();
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(
        headers["webhook-signature"].split(' ').count(),
        1,
        "one live secret, one signature"
    );

    // Rotated with an hour's overlap: the old secret alone still verifies, and so does the
    // new one alone; both signatures are sent, the new one first.
    let rotated = t
        .admin(
            Method::POST,
            &format!("/apps/{}/webhooks/{id}/secret", t.app_id),
            Some(json!({"overlapSeconds": 3600})),
        )
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new = rotated.data()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated.data()["previousSecretExpiresAt"].is_string());
    receiver.ok("sig", &[&old]).await;
    t.contacts("after", 2, 0).await;
    let log = receiver
        .until("sig", "2 more deliveries", Duration::from_secs(30), |l| {
            firsts(l).len() >= 5
        })
        .await;
    all_verified_and_duplicates_alike(&log);
    let full = receiver.log("sig", true).await;
    let last = full.last().unwrap();
    let signatures = last.headers.as_ref().unwrap()["webhook-signature"].clone();
    assert_eq!(signatures.split(' ').count(), 2, "{signatures}");
    receiver.ok("sig", &[&new]).await;
    t.contacts("newonly", 1, 0).await;
    let log = receiver
        .until("sig", "1 more delivery", Duration::from_secs(30), |l| {
            firsts(l).len() >= 6
        })
        .await;
    assert!(log.last().unwrap().verified, "the new secret verifies");

    // Forged: the body tampered with, or signed with a secret that is not this endpoint's.
    receiver.ok("forged", &[&new]).await;
    let body = last.body.clone().unwrap();
    let tampered = body.replacen("after", "afteR", 1);
    assert_ne!(tampered, body);
    receiver
        .replay("forged", &tampered, last.headers.as_ref().unwrap())
        .await;
    let other = t
        .subscribe(
            &receiver,
            "other",
            json!({"eventTypes": ["contact.created"]}),
        )
        .await;
    receiver
        .replay("forged", &body, last.headers.as_ref().unwrap())
        .await;
    receiver
        .ok("forged", &[other["secret"].as_str().unwrap()])
        .await;
    receiver
        .replay("forged", &body, last.headers.as_ref().unwrap())
        .await;
    let forged = receiver.log("forged", false).await;
    assert_eq!(
        forged.iter().map(|d| d.verified).collect::<Vec<_>>(),
        [false, true, false],
        "a tampered body fails, the genuine one passes, another endpoint's secret fails"
    );

    // Once the overlap is over (a rotation with none), the old secret no longer verifies.
    let again = t
        .admin(
            Method::POST,
            &format!("/apps/{}/webhooks/{id}/secret", t.app_id),
            Some(json!({"overlapSeconds": 0})),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    let newest = again.data()["secret"].as_str().unwrap().to_owned();
    receiver.ok("sig", &[&new, &newest]).await;
    t.contacts("final", 1, 0).await;
    let log = receiver
        .until("sig", "the last delivery", Duration::from_secs(30), |l| {
            firsts(l).len() >= 7
        })
        .await;
    assert_eq!(
        log.last().unwrap().checks,
        [false, true],
        "only the newest secret signs"
    );
}

#[tokio::test]
async fn a_receiver_failing_for_two_minutes_then_ok_gets_every_event_in_order() {
    const FAILING: Duration = Duration::from_secs(120);
    let receiver = Receiver::start();
    let t = Tributary::start(QUICK, &[]).await;
    let hook = t.subscribe(&receiver, "flaky", json!({})).await;
    let ok_after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        + FAILING;
    receiver
        .set(
            "flaky",
            json!({"secrets": [hook["secret"]], "status": 500, "okAfter": ok_after.as_secs_f64()}),
        )
        .await;
    let started = Instant::now();
    // Changes to a few subjects, interleaved, spread over the first half of the outage: each
    // contact created, updated 3 times; ideas created, voted, updated.
    let contacts = t.contacts("flaky", 20, 0).await;
    let mut expected = contacts.len();
    for round in 0..3 {
        for c in &contacts {
            t.ok(
                Method::PATCH,
                &format!("/acq/v1/contacts/{c}"),
                Some(json!({"score": round * 10 + 1})),
                200,
            )
            .await;
            expected += 1;
        }
    }
    for n in 0..5 {
        let idea = t
            .ok(
                Method::POST,
                "/api/v1/ideas",
                Some(json!({"title": format!("Flaky {n}"), "author": {"id": "u1", "name": "U", "email": "u1@example.com"}})),
                201,
            )
            .await;
        let idea = idea["id"].as_str().unwrap();
        for v in 0..3 {
            t.ok(
                Method::POST,
                &format!("/api/v1/ideas/{idea}/votes"),
                Some(json!({"voter": {"id": format!("v{v}")}})),
                201,
            )
            .await;
        }
        t.ok(
            Method::PATCH,
            &format!("/api/v1/ideas/{idea}"),
            Some(json!({"title": format!("Flaky {n} again")})),
            200,
        )
        .await;
        expected += 5;
    }
    assert!(started.elapsed() < FAILING / 2, "the changes took too long");
    // Retries keep coming during the outage.
    let log = receiver
        .until(
            "flaky",
            "every event, after the outage",
            FAILING + Duration::from_secs(150),
            |l| delivered_ids(l).len() >= expected,
        )
        .await;
    let failed: Vec<&Delivery> = log.iter().filter(|d| d.answered == 500).collect();
    let last_failed = failed.iter().map(|d| d.at).fold(0.0, f64::max);
    assert!(
        last_failed >= ok_after.as_secs_f64() - 15.0,
        "retries went on through the outage: the last failed attempt at {last_failed}, ok after {}",
        ok_after.as_secs_f64()
    );
    let ids = delivered_ids(&log);
    assert_eq!(ids.len(), expected, "none lost, none invented");
    all_verified_and_duplicates_alike(&log);
    in_order_per_subject(&log);
    let types = types_of(&log);
    assert_eq!(types["contact.created"], 20);
    assert_eq!(types["contact.updated"], 60);
    assert_eq!(types["vote.created"], 15);
    // The endpoint stayed active, its deliveries done.
    let id = hook["id"].as_str().unwrap();
    let end = t.endpoint(id).await;
    assert_eq!(end["status"], "active", "{end}");
    let attempts = t
        .admin(
            Method::GET,
            &format!("/apps/{}/webhooks/{id}/attempts", t.app_id),
            None,
        )
        .await;
    assert_eq!(attempts.status, 200, "{}", attempts.body);
    let list = attempts.data().as_array().unwrap();
    assert!(!list.is_empty() && list.len() <= 100, "bounded log");
    assert!(list.iter().any(|a| a["status"] == 200), "{list:?}");
    eprintln!(
        "webhooks flaky: {} events, {} attempts seen, {} failed",
        expected,
        log.len(),
        failed.len()
    );
}

/// Creates `n` ideas in a burst from `clients` concurrent clients until `stop` (or `n` each);
/// returns the ids the API acknowledged (201).
async fn burst(
    t: &Tributary,
    clients: usize,
    n: usize,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Vec<String> {
    let mut tasks = Vec::new();
    for c in 0..clients {
        let http = reqwest::Client::builder()
            .pool_idle_timeout(crate::helpers::IDLE_CONNECTION)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let url = format!("{}/acq/v1/contacts", t.server.base);
        let key = t.key.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..n {
                if *stop.borrow() {
                    break;
                }
                let sent = http
                    .post(&url)
                    .header("x-api-key", &key)
                    .json(&json!({"email": format!("burst{c}_{i}@example.com")}))
                    .send()
                    .await;
                let Ok(r) = sent else { break };
                if r.status().as_u16() != 201 {
                    break;
                }
                let Ok(v) = r.json::<Value>().await else {
                    break;
                };
                acked.push(v["data"]["id"].as_str().unwrap().to_owned());
            }
            acked
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

#[tokio::test]
async fn kill_9_with_1000_events_waiting_then_every_one_arrives() {
    let receiver = Receiver::start();
    let mut t = Tributary::start(QUICK, &[]).await;
    let hook = t
        .subscribe(
            &receiver,
            "down",
            json!({"eventTypes": ["contact.created"]}),
        )
        .await;
    let secret = hook["secret"].as_str().unwrap().to_owned();
    receiver
        .set("down", json!({"secrets": [secret], "status": 503}))
        .await;
    let ids = t.contacts("waiting", 1000, 0).await;
    let id = hook["id"].as_str().unwrap().to_owned();
    crate::observe::eventually(
        "1 000 deliveries pending",
        Duration::from_secs(60),
        None,
        async || {
            let e = t.endpoint(&id).await;
            (e["pending"].as_u64().unwrap_or(0) >= 1000).then_some(())
        },
    )
    .await;
    t.restart_killed(QUICK);
    receiver.ok("down", &[&secret]).await;
    let log = receiver
        .until(
            "down",
            "all 1 000 after the restart",
            Duration::from_secs(120),
            |l| delivered_ids(l).len() >= 1000,
        )
        .await;
    all_verified_and_duplicates_alike(&log);
    let subjects: HashSet<&str> = firsts(&log).iter().map(|d| d.subject()).collect();
    assert_eq!(subjects, ids.iter().map(String::as_str).collect());
    assert_eq!(delivered_ids(&log).len(), 1000);
    crate::observe::eventually(
        "nothing pending",
        Duration::from_secs(30),
        None,
        async || (t.endpoint(&id).await["pending"] == 0).then_some(()),
    )
    .await;

    // kill -9 during a burst: every change the API acknowledged has its event delivered, and
    // every event delivered is of a contact that exists.
    let (tx, rx) = tokio::sync::watch::channel(false);
    let pid = t.server.child.id();
    let killer = async {
        crate::observe::eventually(
            "the burst under way",
            Duration::from_secs(60),
            None,
            async || {
                (delivered_ids(&receiver.log("down", false).await).len() >= 1100).then_some(())
            },
        )
        .await;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        assert!(killed.unwrap().success());
        let _ = tx.send(true);
    };
    let (acked, ()) = tokio::join!(burst(&t, 4, 400, &rx), killer);
    t.server.child.wait().unwrap();
    assert!(acked.len() > 50, "the burst got going: {}", acked.len());
    t.start_again(QUICK);
    let log = receiver
        .until(
            "down",
            "every acknowledged change's event",
            Duration::from_secs(120),
            |l| {
                let got: HashSet<&str> = firsts(l).iter().map(|d| d.subject()).collect();
                acked.iter().all(|a| got.contains(a.as_str()))
            },
        )
        .await;
    all_verified_and_duplicates_alike(&log);
    for d in firsts(&log) {
        if !ids.contains(&d.subject().to_owned()) {
            t.ok(
                Method::GET,
                &format!("/acq/v1/contacts/{}", d.subject()),
                None,
                200,
            )
            .await;
        }
    }
    eprintln!(
        "webhooks kill -9: {} acknowledged in the burst, {} delivered in all",
        acked.len(),
        delivered_ids(&log).len()
    );
}

/// The client's latencies of `n` contact creations, sorted.
async fn latencies(t: &Tributary, prefix: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let at = Instant::now();
        let a = t
            .call(
                Method::POST,
                "/acq/v1/contacts",
                Some(json!({"email": format!("{prefix}{i}@example.com")})),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        out.push(at.elapsed());
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_slow_receiver_slows_neither_the_api_nor_another_endpoint_nor_the_collector() {
    let receiver = Receiver::start();
    let t = Tributary::start(QUICK, &[]).await;
    let before = latencies(&t, "calm", 20).await;
    let slow = t
        .subscribe(
            &receiver,
            "slow",
            json!({"eventTypes": ["contact.created"]}),
        )
        .await;
    receiver
        .set(
            "slow",
            json!({"secrets": [slow["secret"]], "status": 200, "delay": 10}),
        )
        .await;
    t.subscribe(
        &receiver,
        "fast",
        json!({"eventTypes": ["contact.created"]}),
    )
    .await;
    // The slow endpoint's lanes busy for a while: 40 events, 10 s each.
    t.contacts("clog", 40, 0).await;
    receiver
        .until(
            "slow",
            "the first slow answers",
            Duration::from_secs(30),
            |l| !l.is_empty(),
        )
        .await;
    let during = latencies(&t, "busy", 20).await;
    let median = |v: &[Duration]| v[v.len() / 2];
    assert!(
        median(&during) < median(&before) * 5 + Duration::from_millis(500),
        "API latency: {:?} before, {:?} while a receiver is slow",
        median(&before),
        median(&during)
    );
    // Each event reaches the fast endpoint within seconds while the slow one takes minutes.
    for i in 0..5 {
        let sent = Instant::now();
        let id = t
            .ok(
                Method::POST,
                "/acq/v1/contacts",
                Some(json!({"email": format!("probe{i}@example.com")})),
                201,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        receiver
            .until("fast", "the probe", Duration::from_secs(15), |l| {
                l.iter().any(|d| d.subject() == id)
            })
            .await;
        eprintln!(
            "webhooks slow: probe {i} at the fast endpoint in {:?}",
            sent.elapsed()
        );
    }
    // The collector answers as usual.
    for b in 0..5 {
        let at = Instant::now();
        let a = t
            .api
            .collect(&t.ik, crate::events::tracks(&format!("slow{b}_"), 20))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(
            at.elapsed() < crate::load::ANSWER_WITHIN,
            "collect took {:?}",
            at.elapsed()
        );
    }
    let slow_log = receiver.log("slow", false).await;
    assert!(
        slow_log.len() < 40,
        "the slow endpoint is still working through its events: {}",
        slow_log.len()
    );
    all_verified_and_duplicates_alike(&receiver.log("fast", false).await);
}

#[tokio::test]
async fn ten_thousand_queued_events_stay_on_disk_not_in_memory() {
    const PAD: usize = 2700;
    let receiver = Receiver::start();
    // A small page cache so that what the outbox would hold in memory shows, and freed pages
    // given back at once (not kept an hour for reuse, `memory.rs`): RSS then follows what is
    // live, not the high-water mark of each round's passing work.
    let t = Tributary::start(
        "allow_private = true\nretry_schedule_secs = [3600]\n",
        &[
            ("TRIBUTARY__STORAGE__CACHE_MB", "8"),
            ("MIMALLOC_PURGE_DELAY", "0"),
        ],
    )
    .await;
    let pid = t.server.child.id();
    // Warm up: the same work without an endpoint (sled, the allocator, the HTTP layer).
    t.contacts("warm", 2000, PAD).await;
    let hook = t
        .subscribe(
            &receiver,
            "refusing",
            json!({"eventTypes": ["contact.created"]}),
        )
        .await;
    receiver
        .set(
            "refusing",
            json!({"secrets": [hook["secret"]], "status": 500}),
        )
        .await;
    let id = hook["id"].as_str().unwrap().to_owned();
    let mut rss = vec![crate::observe::rss_bytes(pid)];
    // Three rounds of 10 000 events queued behind a refusing receiver. A queue held in memory
    // keeps growing by its bodies (10 000 x ~3 KB = 30 MB a round). So did the deliveries'
    // bodies in the records that the pending counts walk, since sled keeps the pages a scan
    // reads (+51, +38, +28 MB before bodies were kept apart; +8, +5, +2 after).
    for round in 1..=3u64 {
        t.contacts(&format!("queued{round}_"), 10_000, PAD).await;
        crate::observe::eventually(
            "the round's deliveries pending",
            Duration::from_secs(120),
            None,
            async || {
                let e = t.endpoint(&id).await;
                (e["pending"].as_u64().unwrap_or(0) >= round * 10_000).then_some(())
            },
        )
        .await;
        rss.push(crate::observe::rss_bytes(pid));
    }
    // The gauge (read every 5 s) shows the counts kept with the deliveries: the endpoint's
    // (the 30 000, and any warm-up change the fan-out had not reached before the endpoint
    // existed).
    let node = crate::observe::Node::new(&t.server, &t.data_dir());
    // The fan-out may still be adding the warm-up's changes, so both are read again each time.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (pending, gauge) = loop {
        let pending = t.endpoint(&id).await["pending"].as_u64().unwrap_or(0);
        let n = node.metrics().await.named("tributary_webhook_pending");
        if n == Some(pending as f64) || std::time::Instant::now() > deadline {
            break (pending, n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!((30_000..32_000).contains(&pending), "pending: {pending}");
    assert_eq!(gauge, Some(pending as f64));
    let mb: Vec<u64> = rss.iter().map(|r| r >> 20).collect();
    eprintln!("webhooks memory: RSS (MB) before, then with 10 000, 20 000, 30 000 queued: {mb:?}");
    let last = rss[3].saturating_sub(rss[2]);
    assert!(
        last < 15 << 20,
        "the third 10 000 queued events grew RSS by {} MB: {mb:?}",
        last >> 20
    );
}

#[tokio::test]
async fn a_private_address_is_refused_unless_allowed() {
    let receiver = Receiver::start();
    let mut t = Tributary::start("allow_private = false\n", &[]).await;
    let port = receiver.base.rsplit(':').next().unwrap().to_owned();
    for url in [
        format!("http://127.0.0.1:{port}/hook/x"),
        "http://10.1.2.3/hook".to_owned(),
        format!("http://localhost:{port}/hook/x"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "http://[::1]/hook".to_owned(),
        "http://192.168.0.10/hook".to_owned(),
    ] {
        let a = t
            .admin(
                Method::POST,
                &format!("/apps/{}/webhooks", t.app_id),
                Some(json!({"url": url, "eventTypes": ["*"]})),
            )
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), ["url"], "{url}");
    }
    // Allowed: registered at 127.0.0.1 and at localhost.
    t.restart_clean("allow_private = true\n").await;
    let hook = t.subscribe(&receiver, "private", json!({})).await;
    let named = t
        .hook(json!({"url": format!("http://localhost:{port}/hook/named"), "eventTypes": ["contact.created"]}))
        .await;
    receiver
        .ok("named", &[named["secret"].as_str().unwrap()])
        .await;
    t.contacts("allowed", 1, 0).await;
    receiver
        .until(
            "private",
            "a delivery to 127.0.0.1",
            Duration::from_secs(30),
            |l| !l.is_empty(),
        )
        .await;
    receiver
        .until(
            "named",
            "a delivery to localhost",
            Duration::from_secs(30),
            |l| !l.is_empty(),
        )
        .await;
    // The same endpoints after a restart without allow_private: the delivery is refused after
    // DNS resolution, and the attempt logged with why.
    t.restart_clean("allow_private = false\nretry_schedule_secs = [3600]\n")
        .await;
    t.contacts("refused", 1, 0).await;
    let id = hook["id"].as_str().unwrap();
    let (attempt, _) = crate::observe::eventually(
        "a refused attempt in the log",
        Duration::from_secs(30),
        None,
        async || {
            let a = t
                .admin(
                    Method::GET,
                    &format!("/apps/{}/webhooks/{id}/attempts", t.app_id),
                    None,
                )
                .await;
            a.data()
                .as_array()?
                .iter()
                .find(|a| a["status"].is_null() && a["error"].is_string())
                .cloned()
        },
    )
    .await;
    eprintln!("webhooks private: refused with {}", attempt["error"]);
    let got = receiver.log("private", false).await;
    assert!(
        got.iter().all(
            |d| !d.subject().is_empty() && d.data["contact"]["email"] != "refused0@example.com"
        ),
        "nothing reached a private address: {got:?}"
    );
}

/// The dashboard's Webhooks page in headless Chromium (`tests/browser/webhooks.test.mjs`): an
/// endpoint created with its secret shown once, a test event sent and in the attempts log,
/// verified by the receiver with that secret, redelivered, paused, resumed, rotated.
#[tokio::test(flavor = "multi_thread")]
async fn the_webhooks_page_in_headless_chromium() {
    let receiver = Receiver::start();
    let t = Tributary::start(QUICK, &[]).await;
    crate::browser::node_test(
        "webhooks.test.mjs",
        vec![
            ("TRIBUTARY_BASE", t.server.base.clone()),
            ("RECEIVER_BASE", receiver.base.clone()),
        ],
    )
    .await;
}
