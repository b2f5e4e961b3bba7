//! The fleet (issue 25) with real processes: one control node (`tributary serve`) and edges
//! (`serve --role edge --control-url ... --node-id ...` with `TRIBUTARY__FLEET__TOKEN`), each
//! on its own 127.0.0.1 port and data dir, all with the lake in one moto bucket. `Fleet` starts
//! them, kills (SIGKILL) and restarts any of them on its port, and every wait polls with a
//! deadline. Each test has a fleet of its own (they run side by side):
//! - keys and apps changed on the control node reach both edges within 10 s; an edge serves only
//!   what browsers and SDKs call;
//! - traffic of two apps through both edges (the browser tracker in headless Chromium against
//!   edge 1, HTTP batches against edge 2): the bucket holds each acknowledged event once and the
//!   control node's rollups equal DuckDB over it;
//! - an identify through edge 1 decides a survey's targeting on edge 2, whose answer reaches
//!   the control node;
//! - a 10 000 events/month plan holds across both edges within edges x sync interval x rate;
//! - the control node killed for 60 s under load, an edge restarted meanwhile;
//! - an edge killed under load and restarted.
//!
//! Each test prints its figures (`eprintln!`, shown with `--no-capture`).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::binary::{self, Rng, Server};
use crate::browser::{node_test, read_manifest};
use crate::helpers::{anon, TestApp};
use crate::load::{self, Load, Outcome, Spec};
use crate::observe::eventually;
use crate::python::{self, Moto};
use crate::rollups;
use tributary::fleet::snapshot::CACHE_FOR;

const BUCKET: &str = "tributary-fleet";
/// `fleet.sync_interval_ms` of every edge (the default).
const SYNC: Duration = Duration::from_secs(1);
/// How soon a change on the control node must be in force on every edge (the issue).
const WITHIN: Duration = Duration::from_secs(10);
/// How soon the control node must show what the edges took (the issue).
const SETTLE: Duration = Duration::from_secs(120);
/// Every node: files close at 2 000 rows or after half a second (the bucket fills quickly).
const FILES: [(&str, &str); 2] = [
    ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "2000"),
    ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "500"),
];

/// One process of the fleet: its name, data dir, port and command line, so that it can be
/// killed and started again as it was.
pub struct Member {
    pub name: String,
    dir: tempfile::TempDir,
    /// `127.0.0.1:0` until the first start; then the address the kernel gave it, kept across
    /// restarts (the others call it there).
    bind: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    server: Option<Server>,
}

impl Member {
    async fn start(name: &str, args: Vec<String>, env: Vec<(String, String)>) -> Member {
        let mut m = Member {
            name: name.to_owned(),
            dir: tempfile::tempdir().unwrap(),
            bind: "127.0.0.1:0".to_owned(),
            args,
            env,
            server: None,
        };
        m.up().await;
        m
    }

    /// Starts the process (stopped) and waits until `/healthz` answers.
    pub async fn up(&mut self) {
        assert!(self.server.is_none(), "{} runs already", self.name);
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let server = binary::start_bound(self.dir.path(), &self.bind, &args, &env);
        // The port is the kernel's choice at the first start (no window in which another
        // process could take a port picked in advance), then the same one.
        self.bind = server.base.trim_start_matches("http://").to_owned();
        self.server = Some(server);
        let health = format!("{}/healthz", self.base());
        let client = crate::helpers::test_client();
        eventually(
            &format!("{} answers /healthz", self.name),
            Duration::from_secs(30),
            None,
            async || {
                let r = client.get(&health).send().await.ok()?;
                (r.status() == 200).then_some(())
            },
        )
        .await;
    }

    /// SIGKILL; waits until the process is gone.
    pub fn kill_9(&mut self) {
        self.server
            .take()
            .unwrap_or_else(|| panic!("{} is not running", self.name))
            .kill_9();
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.bind)
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("the node runs")
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The typed helpers of the `api` tests against this node.
    pub fn api(&self) -> TestApp {
        TestApp::remote(&self.base(), self.dir.path().to_path_buf())
    }
}

/// An app made on the control node: its id, integration key and an API key that reads its
/// traffic, profiles, surveys and responses.
pub struct FleetApp {
    pub id: String,
    pub ik: String,
    pub key: String,
}

/// One control node and its edges, sharing one moto bucket.
pub struct Fleet {
    pub control: Member,
    pub edges: Vec<Member>,
    /// The edges' fleet token.
    pub token: String,
    // Last: the nodes stop before the bucket goes.
    pub moto: Moto,
}

impl Fleet {
    /// Starts moto, the control node, a fleet token and `edges` edges, with `env` on every
    /// node; returns once every edge holds the control node's registry.
    pub async fn start(edges: usize, env: &[(&str, &str)]) -> Fleet {
        let moto = Moto::start(BUCKET).await;
        let mut common: Vec<(String, String)> = python::s3_env(&moto.endpoint, BUCKET)
            .into_iter()
            .chain(FILES)
            .chain(env.iter().copied())
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let control =
            Member::start("control", args(&["--node-id", "control"]), common.clone()).await;
        let made = control
            .api()
            .admin(
                Method::POST,
                "/fleet/tokens",
                Some(json!({"name": "the test's edges"})),
            )
            .await;
        assert_eq!(
            made.status, 201,
            "POST /admin/v1/fleet/tokens: {}",
            made.body
        );
        let token = made.data()["token"]
            .as_str()
            .expect("the fleet token")
            .to_owned();
        common.push(("TRIBUTARY__FLEET__TOKEN".into(), token.clone()));
        let control_url = control.base();
        let mut members = Vec::new();
        for i in 1..=edges {
            let name = format!("edge{i}");
            let a = args(&[
                "--role",
                "edge",
                "--control-url",
                &control_url,
                "--node-id",
                &name,
            ]);
            members.push(Member::start(&name, a, common.clone()).await);
        }
        let fleet = Fleet {
            control,
            edges: members,
            token,
            moto,
        };
        fleet.registry_current().await;
        fleet
    }

    /// `GET /admin/v1/fleet/nodes` of the control node.
    pub async fn nodes(&self) -> Vec<Value> {
        let a = self
            .control
            .api()
            .admin(Method::GET, "/fleet/nodes", None)
            .await;
        assert_eq!(a.status, 200, "GET /admin/v1/fleet/nodes: {}", a.body);
        a.data().as_array().expect("a list of nodes").clone()
    }

    /// Called after a change on the control node: waits (at most 10 s) until the control node
    /// lists every edge with the registry of now; returns how long it took. (The control node
    /// reuses its snapshot for `CACHE_FOR`: an answer sooner may judge by the one before.)
    pub async fn registry_current(&self) -> Duration {
        let names: Vec<&str> = self.edges.iter().map(|e| e.name.as_str()).collect();
        let changed = Instant::now();
        let (_, took) = eventually(
            "every edge holds the current registry (GET /admin/v1/fleet/nodes)",
            WITHIN,
            None,
            async || {
                let asked = changed.elapsed();
                let nodes = self.nodes().await;
                (asked > CACHE_FOR).then_some(())?;
                names
                    .iter()
                    .all(|n| {
                        nodes
                            .iter()
                            .any(|v| v["nodeId"] == *n && v["registryCurrent"] == true)
                    })
                    .then_some(())
            },
        )
        .await;
        took
    }

    /// An app on `plan`, made on the control node, with an API key reading everything the
    /// tests look at.
    pub async fn app(&self, plan: &str) -> FleetApp {
        let control = self.control.api();
        let (id, ik) = control.create_app(plan).await;
        let permissions = [
            "analytics:read",
            "profiles:read",
            "surveys:read",
            "responses:read",
        ];
        let (_, key) = control.create_key(&id, &permissions).await;
        FleetApp { id, ik, key }
    }

    /// Every row's messageId in the bucket (DuckDB).
    pub async fn bucket_ids(&self) -> python::S3Ids {
        let endpoint = self.moto.endpoint.clone();
        tokio::task::spawn_blocking(move || python::read_s3_ids(&endpoint, BUCKET))
            .await
            .unwrap()
    }

    /// Polls the bucket until it holds every one of `acked`, at most `within`; returns its
    /// messageIds then or at the deadline (the caller's checks name what is missing).
    pub async fn bucket_with(&self, acked: &[String], within: Duration) -> Vec<String> {
        let start = Instant::now();
        loop {
            let ids = self.bucket_ids().await.ids;
            let held: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
            if acked.iter().all(|id| held.contains(id.as_str())) || start.elapsed() > within {
                return ids;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// DuckDB's rollup figures of each app over the bucket, by app id.
    pub async fn bucket_rollups(&self, apps: &[&str]) -> serde_json::Map<String, Value> {
        let endpoint = self.moto.endpoint.clone();
        let apps: Vec<String> = apps.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let apps: Vec<&str> = apps.iter().map(String::as_str).collect();
            python::rollup_by_sql_s3(&endpoint, BUCKET, &apps)
        })
        .await
        .unwrap()
    }

    /// The fleet's events of `app` this month, as the control node counts them for the quota
    /// (`GET /admin/v1/fleet/usage`: its own and each edge's last report), by node (those with
    /// any).
    pub async fn usage(&self, app: &str) -> BTreeMap<String, u64> {
        let a = self
            .control
            .api()
            .admin(Method::GET, "/fleet/usage", None)
            .await;
        assert_eq!(a.status, 200, "GET /admin/v1/fleet/usage: {}", a.body);
        let mut by_node = BTreeMap::new();
        for u in a.data().as_array().expect("a list") {
            if u["appId"] != app {
                continue;
            }
            let nodes = u["byNode"].as_object().expect("byNode");
            let total: u64 = nodes.values().filter_map(Value::as_u64).sum();
            assert_eq!(u["events"], total, "the fleet's events are its nodes': {u}");
            for (node, n) in nodes {
                if n.as_u64() != Some(0) {
                    by_node.insert(node.clone(), n.as_u64().expect("a count"));
                }
            }
        }
        by_node
    }
}

/// `usage` as the tests want it: each edge's count, by node id.
fn per_edge(counts: &[u64]) -> BTreeMap<String, u64> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (format!("edge{}", i + 1), *n))
        .collect()
}

/// Polls `probe` every 100 ms until it gives `want`; fails after `within` with the last value it
/// gave. Returns how long it took.
async fn until_eq<T: PartialEq + std::fmt::Debug>(
    what: &str,
    want: T,
    within: Duration,
    mut probe: impl AsyncFnMut() -> T,
) -> Duration {
    let start = Instant::now();
    loop {
        let got = probe().await;
        if got == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{what}: {got:?} after {within:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The events of the control node's hourly rollups of the app of `key`.
async fn control_events(fleet: &Fleet, key: &str) -> Value {
    let client = crate::helpers::test_client();
    let t = rollups::traffic(&client, fleet.control.server(), key, "hour").await;
    t["totals"]["events"].clone()
}

/// One track event with messageId `msg_fleet_<id>`.
fn probe_event(id: &str) -> Value {
    json!({"type": "track", "event": "Probe", "anonymousId": anon("fleet prober"),
        "messageId": format!("msg_fleet_{id}")})
}

/// The status a collect of one fresh event with `ik` gets from `base`.
async fn collect_status(client: &reqwest::Client, base: &str, ik: &str, id: &str) -> u16 {
    load::post_batch(client, base, ik, vec![probe_event(id)])
        .await
        .map_or(0, |r| r.status().as_u16())
}

/// Polls every edge with `ik` until each answers `status`; fails 10 s after `since`. Returns
/// how long after `since` the last edge did.
async fn every_edge_answers(
    fleet: &Fleet,
    ik: &str,
    status: u16,
    what: &str,
    since: Instant,
) -> Duration {
    let client = crate::helpers::test_client();
    let mut n = 0u32;
    for edge in &fleet.edges {
        let base = edge.base();
        eventually(
            &format!("{} answers {status} to {what}", edge.name),
            WITHIN.saturating_sub(since.elapsed()),
            None,
            async || {
                n += 1;
                let id = format!("probe_{status}_{n}_{}", &ik[ik.len().saturating_sub(8)..]);
                (collect_status(&client, &base, ik, &id).await == status).then_some(())
            },
        )
        .await;
    }
    since.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_an_app_made_and_a_key_revoked_on_the_control_node_hold_on_both_edges_within_10_s() {
    let fleet = Fleet::start(2, &[]).await;
    let control = fleet.control.api();

    // An app made on the control node: both edges take its events within 10 s.
    let made = Instant::now();
    let app = fleet.app("enterprise").await;
    let accepted = every_edge_answers(&fleet, &app.ik, 200, "the new app's key", made).await;

    // Its integration key rotated (the old one revoked): refused by both edges within 10 s,
    // the new one taken.
    let revoked = Instant::now();
    let a = control
        .admin(
            Method::POST,
            &format!("/apps/{}/integration-key", app.id),
            None,
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let new_ik = a.data()["integrationKey"].as_str().unwrap().to_owned();
    let refused = every_edge_answers(&fleet, &app.ik, 401, "the revoked key", revoked).await;
    let taken = every_edge_answers(&fleet, &new_ik, 200, "the new key", revoked).await;
    eprintln!(
        "fleet: a new app accepted by both edges after {accepted:?}; a revoked key refused after \
         {refused:?}, its successor accepted after {taken:?}"
    );

    // An edge serves what browsers and SDKs call, and nothing else (404 with the envelope).
    let client = crate::helpers::test_client();
    for edge in &fleet.edges {
        for path in ["/healthz", "/readyz", "/metrics", "/sdk/v1/analytics.js"] {
            let r = client
                .get(format!("{}{path}", edge.base()))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{} {path}", edge.name);
        }
        let e = edge.api();
        for path in [
            "/acq/v1/contacts",
            "/dashboard",
            "/api/v1/analytics/traffic",
            "/admin/v1/apps",
        ] {
            let a = e
                .send(Method::GET, path, &[("x-api-key", &app.key)], None)
                .await;
            a.assert_error(404, "NOT_FOUND");
        }
    }

    // The control node's view of its edges.
    let nodes = fleet.nodes().await;
    for edge in &fleet.edges {
        let n = nodes
            .iter()
            .find(|n| n["nodeId"] == edge.name.as_str())
            .unwrap_or_else(|| panic!("{} is not listed: {nodes:?}", edge.name));
        assert_eq!(n["role"], "edge", "{n}");
        assert_eq!(n["version"], env!("CARGO_PKG_VERSION"), "{n}");
        let last = n["lastContactAt"].as_str().expect("lastContactAt");
        let last = chrono::DateTime::parse_from_rfc3339(last).expect("RFC 3339");
        let ago = chrono::Utc::now().signed_duration_since(last);
        assert!(
            ago < chrono::Duration::seconds(10),
            "{} last heard {ago} ago",
            edge.name
        );
        // The backlog counts the WAL with the parts and outbox files not in the lake yet.
        for k in [
            "eventsPerSecond",
            "backlogBytes",
            "uplinkItems",
            "uplinkLagSeconds",
        ] {
            assert!(n[k].is_number(), "{k} of {n}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_two_apps_through_both_edges_are_in_the_bucket_once_and_in_the_control_rollups() {
    let fleet = Fleet::start(2, &[]).await;
    let apps = [fleet.app("enterprise").await, fleet.app("enterprise").await];
    fleet.registry_current().await;

    // The browser tracker against edge 1 (visitors of both apps), HTTP batches against edge 2.
    let manifest = fleet.control.dir().join("browser-manifest.jsonl");
    let browser = node_test(
        "fleet.test.mjs",
        vec![
            ("TRIBUTARY_BASE", fleet.edges[0].base()),
            ("TRIBUTARY_APP_KEY", apps[0].ik.clone()),
            ("TRIBUTARY_APP_KEY_2", apps[1].ik.clone()),
            ("TRIBUTARY_MANIFEST", manifest.display().to_string()),
        ],
    );
    let http = async {
        let client = crate::helpers::test_client();
        let mut rng = Rng(25);
        let mut sent = Vec::new();
        for (app, (name, visitors)) in apps.iter().zip([("shop", 400), ("blog", 60)]) {
            let events: Vec<Value> = (0..visitors)
                .flat_map(|v| rollups::visitor(&mut rng, name, v))
                .collect();
            sent.extend(
                events
                    .iter()
                    .map(|e| e["messageId"].as_str().unwrap().to_owned()),
            );
            rollups::send(&client, fleet.edges[1].server(), &app.ik, events).await;
        }
        sent
    };
    let ((), mut acked) = tokio::join!(browser, http);
    let last = Instant::now();
    let browser_events = read_manifest(&manifest).present;
    assert!(!browser_events.is_empty(), "the browser's events");
    acked.extend(browser_events.iter().cloned());

    // The bucket: every acknowledged event, each once.
    let ids = fleet.bucket_with(&acked, SETTLE).await;
    let in_bucket = last.elapsed();
    assert_once(&ids, &acked);

    // The control node's rollups equal DuckDB over the bucket within 2 minutes.
    let ids_of: Vec<&str> = apps.iter().map(|a| a.id.as_str()).collect();
    let duck = fleet.bucket_rollups(&ids_of).await;
    let control = fleet.control.server();
    let client = crate::helpers::test_client();
    for app in &apps {
        let want = &duck[&app.id];
        until_eq(
            "the control node's rollups: events",
            want["events"].clone(),
            SETTLE.saturating_sub(last.elapsed()),
            async || control_events(&fleet, &app.key).await,
        )
        .await;
        let ours = rollups::traffic(&client, control, &app.key, "hour").await;
        rollups::compare(&ours, want, "the control node's hourly rollups");
        let days = rollups::traffic(&client, control, &app.key, "day").await;
        rollups::compare(&days, want, "the control node's daily rollups");
    }
    eprintln!(
        "fleet: {} events acknowledged ({} from Chromium via edge 1), in the bucket after {in_bucket:?}, \
         in the control node's rollups {:?} after the last batch",
        acked.len(),
        browser_events.len(),
        last.elapsed()
    );
}

/// Asserts the bucket's `ids` hold each of `acked` once and no messageId twice.
fn assert_once(ids: &[String], acked: &[String]) {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for id in ids {
        *count.entry(id.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = count.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(
        twice.is_empty(),
        "{} rows are duplicates, e.g. {twice:?}",
        ids.len() - count.len()
    );
    let missing: Vec<_> = acked
        .iter()
        .filter(|id| !count.contains_key(id.as_str()))
        .take(5)
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged, not in the bucket: {missing:?}"
    );
}

/// The survey widget's list on `base` for a visitor: the ids of the surveys offered.
async fn offered(client: &reqwest::Client, base: &str, ik: &str, query: &str) -> Vec<String> {
    let r = client
        .get(format!("{base}/api/w/surveys?{query}"))
        .header("x-app-key", ik)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "GET /api/w/surveys?{query}");
    let body: Value = r.json().await.unwrap();
    body["data"]
        .as_array()
        .expect("a list of surveys")
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_an_identify_on_edge_1_decides_a_survey_on_edge_2_whose_answer_reaches_the_control() {
    let fleet = Fleet::start(2, &[]).await;
    let app = fleet.app("enterprise").await;
    let control = fleet.control.api();
    let body = json!({"title": "Pro only", "type": "nps",
        "targeting": {"percentage": 100, "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}]},
        "questions": [{"id": "score", "text": "How likely?", "type": "scale"}]});
    let made = control
        .admin(
            Method::POST,
            &format!("/apps/{}/surveys", app.id),
            Some(body),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let survey = made.data()["id"].as_str().unwrap().to_owned();
    let path = format!("/apps/{}/surveys/{survey}/transition", app.id);
    let a = control
        .admin(Method::POST, &path, Some(json!({"status": "active"})))
        .await;
    assert!(a.status.is_success(), "{}", a.body);
    fleet.registry_current().await;

    let client = crate::helpers::test_client();
    let (edge1, edge2) = (fleet.edges[0].base(), fleet.edges[1].base());
    let visitor = anon("fleet survey visitor");
    let query = format!("anonymousId={visitor}");
    assert!(
        offered(&client, &edge2, &app.ik, &query).await.is_empty(),
        "not offered before the identify"
    );
    let identify = json!({"type": "identify", "userId": "fleet-pro", "anonymousId": visitor,
        "messageId": "msg_fleet_identify", "traits": {"plan": "pro"}});
    let r = load::post_batch(&client, &edge1, &app.ik, vec![identify])
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let identified = Instant::now();
    // Within the sync interval, give or take the uplink's own tick (printed below); the
    // deadline leaves room for a loaded machine's three servers.
    let (_, took) = eventually(
        "the survey offered on edge 2 after the identify on edge 1",
        2 * SYNC + Duration::from_secs(4),
        None,
        async || {
            let ids = offered(&client, &edge2, &app.ik, &query).await;
            ids.contains(&survey).then_some(())
        },
    )
    .await;

    // The answer, as the widget sends it from the list it got (no attributes of its own).
    let answer = json!({"anonymousId": visitor, "userId": "fleet-pro",
        "answers": [{"questionId": "score", "value": 9}]});
    let r = client
        .post(format!("{edge2}/api/w/surveys/{survey}/responses"))
        .header("x-app-key", &app.ik)
        .json(&answer)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "the answer on edge 2: {status} {text}");
    let answered = Instant::now();
    let responses = format!("/api/v1/surveys/{survey}/responses");
    let (_, reached) = eventually(
        "the answer in the control node's responses",
        WITHIN,
        None,
        async || {
            let a = control.api(&app.key, Method::GET, &responses, None).await;
            a.data()
                .as_array()?
                .iter()
                .any(|r| r["anonymousId"] == visitor.as_str() && r["score"] == 9.0)
                .then_some(())
        },
    )
    .await;
    eprintln!(
        "fleet: the survey offered on edge 2 {took:?} after the identify on edge 1 ({:?} in all); \
         the answer in the control node's responses {reached:?} after it was sent ({:?})",
        identified.elapsed(),
        answered.elapsed()
    );
}

/// One client's share of the quota test: `batches` batches of `per_batch` fresh events to
/// `base`, one every `every`; returns the events accepted.
async fn spend(
    base: String,
    ik: String,
    client: usize,
    batches: usize,
    per_batch: usize,
    every: Duration,
) -> u64 {
    let http = crate::helpers::test_client();
    let mut tick = tokio::time::interval(every);
    // A client held up by a loaded machine goes on at its pace, not in a burst that catches up.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut accepted = 0;
    for b in 0..batches {
        tick.tick().await;
        let events = (0..per_batch)
            .map(|i| probe_event(&format!("quota_{client}_{b}_{i}")))
            .collect();
        let r = load::post_batch(&http, &base, &ik, events).await.unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or_default();
        match status {
            200 => accepted += body["data"]["accepted"].as_u64().expect("accepted"),
            403 => assert_eq!(body["error"]["code"], "PLAN_LIMIT_REACHED", "{body}"),
            _ => panic!("collect answered {status}: {body}"),
        }
    }
    accepted
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_a_plan_of_10000_events_a_month_holds_across_edges_within_the_stated_overshoot() {
    const LIMIT: u64 = 10_000;
    let fleet = Fleet::start(2, &[("TRIBUTARY__PLANS__FREE__EVENTS_PER_MONTH", "10000")]).await;
    let app = fleet.app("free").await;
    fleet.registry_current().await;
    // Two clients per edge, 60 batches of 100 events each, one every 250 ms: 24 000 events in
    // about 15 s, well past the limit.
    let (clients, batches, per_batch) = (2, 60, 100);
    let every = Duration::from_millis(250);
    let started = Instant::now();
    let spenders: Vec<_> = fleet
        .edges
        .iter()
        .enumerate()
        .flat_map(|(i, e)| (0..clients).map(move |c| (i, e.base(), c)))
        .map(|(i, base, c)| {
            let spent = spend(
                base,
                app.ik.clone(),
                i * clients + c,
                batches,
                per_batch,
                every,
            );
            (i, tokio::spawn(spent))
        })
        .collect();
    let mut by_edge = vec![0; fleet.edges.len()];
    for (i, s) in spenders {
        by_edge[i] += s.await.unwrap();
    }
    let accepted: u64 = by_edge.iter().sum();
    let took = started.elapsed();
    let sent = (fleet.edges.len() * clients * batches * per_batch) as f64;
    let rate = sent / took.as_secs_f64();
    let overshoot = fleet.edges.len() as f64 * SYNC.as_secs_f64() * rate;
    eprintln!(
        "fleet: {sent} events sent in {took:?} ({rate:.0}/s) through {} edges; {accepted} accepted \
         of a {LIMIT} limit (allowed overshoot {overshoot:.0})",
        fleet.edges.len()
    );
    assert!(accepted >= LIMIT, "only {accepted} of {LIMIT} accepted");
    until_eq(
        "the fleet's usage of the app (GET /admin/v1/fleet/usage)",
        per_edge(&by_edge),
        WITHIN,
        async || fleet.usage(&app.id).await,
    )
    .await;
    assert!(
        accepted as f64 <= LIMIT as f64 + overshoot,
        "{accepted} accepted: over {LIMIT} + edges x sync interval x rate = {overshoot:.0}"
    );
}

/// Sends an identify with traits for `user` through `base`; asserts it is taken.
async fn identify(client: &reqwest::Client, base: &str, ik: &str, user: &str, traits: Value) {
    let e = json!({"type": "identify", "userId": user, "anonymousId": anon(user),
        "messageId": format!("msg_fleet_identify_{user}"), "traits": traits});
    load::post_until_taken(client, base, ik, vec![e]).await;
}

/// Steady load for the outage tests: a few clients, a batch of 10 events every 250 ms each.
fn steady(prefix: &'static str) -> Spec {
    Spec {
        prefix,
        clients: 2,
        events_per_batch: 10,
        every: Some(Duration::from_millis(250)),
        pad: 0,
    }
}

/// The messageIds of every event the loads' answers acknowledged.
fn acked_ids(loads: &[&Outcome]) -> Vec<String> {
    loads
        .iter()
        .flat_map(|&o| {
            o.acked.iter().flat_map(move |&(c, b)| {
                (0..o.spec.events_per_batch).map(move |i| load::message_id(o.spec.prefix, c, b, i))
            })
        })
        .collect()
}

/// Asserts every request of `o` was answered 200.
fn all_200(o: &Outcome, what: &str) {
    let failed = o.replies.len() - o.count(200);
    assert_eq!(
        failed,
        0,
        "{what}: {failed} requests not answered 200: {}",
        o.figures()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_the_control_node_killed_for_60_s_under_load_loses_nothing_and_catches_up() {
    const OUTAGE: Duration = Duration::from_secs(60);
    let mut fleet = Fleet::start(2, &[]).await;
    let app = fleet.app("enterprise").await;
    fleet.registry_current().await;
    let client = crate::helpers::test_client();
    let l1 = Load::start(&fleet.edges[0].base(), &app.ik, steady("edge1"));
    let l2 = Load::start(&fleet.edges[1].base(), &app.ik, steady("edge2"));
    eventually(
        "both edges take the load",
        Duration::from_secs(30),
        Some(&l1),
        async || (l1.acked_events() > 0 && l2.acked_events() > 0).then_some(()),
    )
    .await;

    fleet.control.kill_9();
    let down = Instant::now();
    for (i, edge) in fleet.edges.iter().enumerate() {
        let traits = json!({"plan": "pro", "edge": i + 1});
        identify(
            &client,
            &edge.base(),
            &app.ik,
            &format!("outage-{}", i + 1),
            traits,
        )
        .await;
    }
    // Edge 2 restarted during the outage: it serves from the registry on its disk.
    let o2 = l2.stop().await;
    fleet.edges[1].kill_9();
    fleet.edges[1].up().await;
    let l3 = Load::start(&fleet.edges[1].base(), &app.ik, steady("edge2again"));
    let (_, accepting) = eventually(
        "the restarted edge takes events with the control node down",
        Duration::from_secs(30),
        Some(&l3),
        async || (l3.acked_events() > 0).then_some(()),
    )
    .await;
    let traits = json!({"plan": "enterprise"});
    identify(&client, &fleet.edges[1].base(), &app.ik, "outage-3", traits).await;
    // The rest of the minute, both loads checked all along.
    eventually(
        "the outage's minute",
        OUTAGE + Duration::from_secs(30),
        Some(&l1),
        async || {
            l3.check();
            (down.elapsed() >= OUTAGE).then_some(())
        },
    )
    .await;
    fleet.control.up().await;
    let back = Instant::now();
    let o1 = l1.stop().await;
    let o3 = l3.stop().await;
    for (o, what) in [(&o1, "edge 1"), (&o2, "edge 2"), (&o3, "edge 2 restarted")] {
        all_200(o, what);
    }
    let sent = (o1.acked_events() + o2.acked_events() + o3.acked_events() + 3) as u64;

    // The bucket: each acknowledged event once (the edges wrote it with the control node away).
    let loads = [&o1, &o2, &o3];
    let mut acked = acked_ids(&loads);
    acked.extend((1..=3).map(|i| format!("msg_fleet_identify_outage-{i}")));
    let ids = fleet.bucket_with(&acked, SETTLE).await;
    let of_loads: Vec<String> = ids
        .iter()
        .filter(|id| !id.starts_with("msg_fleet_"))
        .cloned()
        .collect();
    load::assert_every_acknowledged_event_once(&of_loads, &loads);
    assert_eq!(ids.len() as u64, sent, "the bucket's rows");

    // Within 2 minutes of its return the control node shows the same: usage, profiles, rollups.
    let settle = || SETTLE.saturating_sub(back.elapsed());
    let counted = until_eq(
        "the fleet's usage of the app (GET /admin/v1/fleet/usage)",
        per_edge(&[
            o1.acked_events() as u64 + 1,
            (o2.acked_events() + o3.acked_events()) as u64 + 2,
        ]),
        settle(),
        async || fleet.usage(&app.id).await,
    )
    .await;
    let api = fleet.control.api();
    for (user, key, want) in [
        ("outage-1", "plan", json!("pro")),
        ("outage-2", "edge", json!(2)),
        ("outage-3", "plan", json!("enterprise")),
    ] {
        until_eq(
            &format!("the trait {key} of {user}'s profile on the control node"),
            want,
            settle(),
            async || {
                let path = format!("/api/v1/profiles/{user}");
                let a = api.api(&app.key, Method::GET, &path, None).await;
                if a.status == 200 {
                    a.data()["traits"][key].clone()
                } else {
                    json!(format!("{} {}", a.status, a.code()))
                }
            },
        )
        .await;
    }
    let rolled = until_eq(
        "the control node's rollups: events",
        json!(sent),
        settle(),
        async || control_events(&fleet, &app.key).await,
    )
    .await;
    let duck = fleet.bucket_rollups(&[&app.id]).await;
    let ours = rollups::traffic(&client, fleet.control.server(), &app.key, "hour").await;
    rollups::compare(&ours, &duck[&app.id], "the control node after its outage");
    eprintln!(
        "fleet: control node down {OUTAGE:?}: edge 1 {}; edge 2 {}; edge 2 restarted (taking events \
         {accepting:?} after its start) {}; after the return: rollups {rolled:?}, usage {counted:?}",
        o1.figures(),
        o2.figures(),
        o3.figures()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_an_edge_killed_under_load_loses_nothing_and_the_retries_duplicate_nothing() {
    let mut fleet = Fleet::start(2, &[]).await;
    let app = fleet.app("enterprise").await;
    fleet.registry_current().await;
    // Edge 1 as fast as it answers (its clients send a batch again when no answer comes), edge
    // 2 steady beside it.
    let spec = Spec {
        prefix: "killed",
        clients: 3,
        events_per_batch: 20,
        every: None,
        pad: 0,
    };
    let hit = Load::start_retrying(&fleet.edges[0].base(), &app.ik, spec);
    let calm = Load::start(&fleet.edges[1].base(), &app.ik, steady("calm"));
    eventually(
        "edge 1 takes 2 000 events",
        Duration::from_secs(60),
        Some(&calm),
        async || (hit.acked_events() >= 2_000).then_some(()),
    )
    .await;
    fleet.edges[0].kill_9();
    let killed = Instant::now();
    let before = hit.acked_events();
    fleet.edges[0].up().await;
    let (_, resumed) = eventually(
        "edge 1 takes 2 000 more events after its restart",
        Duration::from_secs(60),
        Some(&calm),
        async || (hit.acked_events() >= before + 2_000).then_some(()),
    )
    .await;
    let hit = hit.stop().await;
    let calm = calm.stop().await;
    all_200(&calm, "edge 2");
    let lost = hit.count(0);

    let ids = fleet.bucket_with(&acked_ids(&[&hit, &calm]), SETTLE).await;
    let rows = load::assert_every_acknowledged_event_once(&ids, &[&hit, &calm]);
    // The control node's rollups count each row once, whatever the edge sent twice.
    until_eq(
        "the control node's rollups: events",
        json!(rows),
        SETTLE,
        async || control_events(&fleet, &app.key).await,
    )
    .await;
    eprintln!(
        "fleet: edge 1 killed under load: {}, {lost} requests without an answer, back {resumed:?} \
         after the kill ({:?} ago); edge 2: {}; bucket: {rows} rows, none twice",
        hit.figures(),
        killed.elapsed(),
        calm.figures()
    );
}
