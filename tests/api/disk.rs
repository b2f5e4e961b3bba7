//! A full disk under load (issue 22), with the real binary: the data dir on a 64 MiB tmpfs,
//! collect batches and contact writes running, then a filler file takes every free byte. Every
//! answer is 200/201, or 503 with Retry-After, within 5 s (never 500, never a hang); once the
//! filler is removed, collection and the REST API work again without a restart; after SIGTERM
//! (exit 0) the lake holds every acknowledged event exactly once.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::start_with;
use crate::events::batch;
use crate::helpers::{anon, ADMIN_TOKEN};
use crate::lake;

/// A tmpfs of `size` mounted on a temporary directory (the tests run as root), unmounted when
/// dropped, also when the test panics.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mounting a tmpfs needs root");
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a server still running after a failed assertion keeps files open.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the disk: appends to `path` until a write fails with ENOSPC, then keeps taking any
/// space freed (the server trims its WAL) until `stop`; removes the file at the end.
fn filler(path: PathBuf, full: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0xA5u8; 64 << 10];
    while !stop.load(Ordering::SeqCst) {
        match f.write(&chunk) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => {
                full.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("filler: {e}"),
        }
    }
    drop(f);
    std::fs::remove_file(&path).unwrap();
}

/// One answer of the load.
struct Answered {
    what: &'static str,
    /// 0: no answer (a connection error or the client's 10 s timeout).
    status: u16,
    retry_after: bool,
    took: Duration,
    at: Instant,
}

#[derive(Default)]
struct Load {
    sent: Mutex<HashSet<String>>,
    acked: Mutex<HashSet<String>>,
    /// Contacts acknowledged (201): id and e-mail.
    contacts: Mutex<Vec<(String, String)>>,
    answers: Mutex<Vec<Answered>>,
    next: AtomicU64,
    stop: AtomicBool,
}

impl Load {
    /// Sends `req` and records its answer as `what`; returns the status (0: no answer) and body.
    async fn send(&self, what: &'static str, req: reqwest::RequestBuilder) -> (u16, Value) {
        let started = Instant::now();
        let (status, retry_after, body) = match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let retry_after = r.headers().contains_key("retry-after");
                (status, retry_after, r.json().await.unwrap_or_default())
            }
            Err(_) => (0, false, Value::Null),
        };
        self.answers.lock().unwrap().push(Answered {
            what,
            status,
            retry_after,
            took: started.elapsed(),
            at: Instant::now(),
        });
        (status, body)
    }

    /// The first `ok` answer to `what` after `since`, if any.
    fn first_ok_after(&self, what: &str, ok: u16, since: Instant) -> Option<Instant> {
        let answers = self.answers.lock().unwrap();
        let mut oks = answers.iter().filter(|a| a.what == what && a.status == ok);
        oks.find(|a| a.at - a.took > since).map(|a| a.at)
    }

    fn count(&self, what: &str, status: u16, since: Instant) -> usize {
        self.matching(since, |a| a.what == what && a.status == status)
    }

    /// Answers to `what` since `since` that are not `ok` (no answer included).
    fn refused(&self, what: &str, ok: u16, since: Instant) -> usize {
        self.matching(since, |a| a.what == what && a.status != ok)
    }

    fn matching(&self, since: Instant, test: impl Fn(&Answered) -> bool) -> usize {
        let answers = self.answers.lock().unwrap();
        answers.iter().filter(|a| a.at > since && test(a)).count()
    }
}

/// Ten events of batch `b`, from one of 16 visitors (so both shards write).
fn events(b: u64) -> Vec<Value> {
    let visitor = anon(&format!("disk-{}", b % 16));
    (0..10)
        .map(|i| {
            json!({"type": "track", "event": "Filled", "anonymousId": visitor,
                   "messageId": format!("msg_{b}_{i}"), "timestamp": chrono::Utc::now().to_rfc3339(),
                   "properties": {"batch": b, "i": i, "pad": "x".repeat(200)}})
        })
        .collect()
}

/// Sends batches until `stop`; a batch not acknowledged is sent again (a real client retries).
async fn collect_load(load: Arc<Load>, client: reqwest::Client, base: String, key: String) {
    let mut retry = None;
    while !load.stop.load(Ordering::SeqCst) {
        let b = retry
            .take()
            .unwrap_or_else(|| load.next.fetch_add(1, Ordering::SeqCst));
        let evs = events(b);
        let ids: Vec<String> = evs
            .iter()
            .map(|e| e["messageId"].as_str().unwrap().to_owned())
            .collect();
        load.sent.lock().unwrap().extend(ids.iter().cloned());
        let url = format!("{base}/api/w/analytics/collect");
        let req = client.post(url).header("x-app-key", &key).json(&batch(evs));
        let (status, body) = load.send("collect", req).await;
        if status == 200 {
            let d = &body["data"];
            let total = d["accepted"].as_u64().unwrap_or(0) + d["duplicates"].as_u64().unwrap_or(0);
            assert_eq!(total, 10, "every event accepted or a duplicate: {body}");
            load.acked.lock().unwrap().extend(ids);
        } else {
            retry = Some(b);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Creates contacts until `stop`, each with a new e-mail (a 503 may still have been written).
async fn contact_load(load: Arc<Load>, client: reqwest::Client, base: String, key: String) {
    let mut n = 0;
    while !load.stop.load(Ordering::SeqCst) {
        n += 1;
        let email = format!("filled-{n}@example.com");
        let contact = json!({"email": email, "firstName": "Disk", "tags": ["full"]});
        let url = format!("{base}/acq/v1/contacts");
        let req = client.post(url).header("x-api-key", &key).json(&contact);
        let (status, body) = load.send("contact", req).await;
        if status == 201 {
            let id = body["data"]["id"].as_str().unwrap().to_owned();
            load.contacts.lock().unwrap().push((id, email));
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Load {
    /// The answers since `since`, counted by kind and status.
    fn summary(&self, since: Instant) -> String {
        let answers = self.answers.lock().unwrap();
        let mut counts = std::collections::BTreeMap::<(&str, u16), usize>::new();
        for a in answers.iter().filter(|a| a.at > since) {
            *counts.entry((a.what, a.status)).or_default() += 1;
        }
        format!("{counts:?}")
    }

    /// Polls `done` every 50 ms until it holds; fails after `limit`, with the answers since
    /// `since`.
    async fn wait_for(
        &self,
        what: &str,
        since: Instant,
        limit: Duration,
        mut done: impl FnMut() -> bool,
    ) -> Duration {
        let started = Instant::now();
        while !done() {
            assert!(
                started.elapsed() < limit,
                "{what}: not within {limit:?}; answers since: {}",
                self.summary(since)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        started.elapsed()
    }
}

/// An app on the enterprise plan and a contacts key: (integration key, API key).
async fn keys(client: &reqwest::Client, base: &str) -> (String, String) {
    let admin = |path: &str, body: Value| {
        client
            .post(format!("{base}/admin/v1{path}"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
    };
    let app: Value = admin("/apps", json!({"name": "disk", "plan": "enterprise"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = app["data"]["id"].as_str().unwrap();
    let perms = json!({"name": "k", "permissions": ["contacts:read", "contacts:write"]});
    let key: Value = admin(&format!("/apps/{id}/keys"), perms)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        app["data"]["integrationKey"].as_str().unwrap().to_owned(),
        key["data"]["key"].as_str().unwrap().to_owned(),
    )
}

/// A small sled cache; a shutdown gives up on uploads after 3 s (the events stay in the WAL).
const SETTINGS: &[(&str, &str)] = &[
    ("TRIBUTARY__STORAGE__CACHE_MB", "16"),
    ("TRIBUTARY__COLLECTOR__SHUTDOWN_UPLOAD_TIMEOUT_MS", "3000"),
];

/// The checks `/healthz` names as failing.
fn checks(health: &Value) -> Vec<String> {
    let problems = health["data"]["problems"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    problems
        .iter()
        .filter_map(|p| p["check"].as_str().map(str::to_owned))
        .collect()
}

/// The disk being filled: a filler thread, stopped (and its file removed) by `free`.
struct Filling {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Filling {
    fn free(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}

/// The server on a 64 MiB tmpfs under collect and contact load.
struct Scenario {
    server: crate::binary::Server,
    client: reqwest::Client,
    api_key: String,
    load: Arc<Load>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    t0: Instant,
    data: PathBuf,
    // Last: unmounted after the server is gone.
    fs: Tmpfs,
}

impl Scenario {
    /// Starts the server, the load (two collect clients, one creating contacts), and waits
    /// until both kinds of writes succeed.
    async fn start() -> Scenario {
        let fs = Tmpfs::mount("64m");
        let data = fs.path().join("data");
        let server = start_with(&data, SETTINGS);
        let client = reqwest::Client::builder()
            .pool_idle_timeout(crate::helpers::IDLE_CONNECTION)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let (ikey, api_key) = keys(&client, &server.base).await;
        let load = Arc::new(Load::default());
        let (base, l, c) = (&server.base, &load, &client);
        let mut workers: Vec<_> = (0..2)
            .map(|_| {
                tokio::spawn(collect_load(
                    l.clone(),
                    c.clone(),
                    base.clone(),
                    ikey.clone(),
                ))
            })
            .collect();
        let contacts = contact_load(l.clone(), c.clone(), base.clone(), api_key.clone());
        workers.push(tokio::spawn(contacts));
        let s = Scenario {
            server,
            client,
            api_key,
            load,
            workers,
            t0: Instant::now(),
            data,
            fs,
        };
        s.both_succeed("load under way", s.t0, Duration::from_secs(30))
            .await;
        s
    }

    /// Waits until at least 20 batches and 5 contacts were written since `since`.
    async fn both_succeed(&self, what: &str, since: Instant, limit: Duration) -> Duration {
        let load = &self.load;
        load.wait_for(what, since, limit, || {
            load.count("collect", 200, since) >= 20 && load.count("contact", 201, since) >= 5
        })
        .await
    }

    /// Fills the disk, and waits until both kinds of writes were refused 40 times (about two
    /// seconds of a full disk at the clients' pace).
    async fn fill(&self) -> Filling {
        let full = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (path, full, stop) = (self.fs.path().join("filler"), full.clone(), stop.clone());
            std::thread::spawn(move || filler(path, full, stop))
        };
        let load = &self.load;
        let full_now = || full.load(Ordering::SeqCst);
        load.wait_for("disk full", self.t0, Duration::from_secs(30), full_now)
            .await;
        let filled = Instant::now();
        eprintln!("disk full after {:?} of load", filled - self.t0);
        // The statuses are checked at the end.
        load.wait_for("writes refused", filled, Duration::from_secs(30), || {
            load.refused("collect", 200, filled) >= 40 && load.refused("contact", 201, filled) >= 40
        })
        .await;
        // The store is down (reads too), and says so; a load balancer is told to steer away.
        self.wait_health("store reported", |h| {
            checks(h).contains(&"store".to_owned())
        })
        .await;
        self.wait_ready(503).await;
        Filling { stop, thread }
    }

    /// Polls `/healthz` (always 200) until `test` holds of its body, for at most 30 s.
    async fn wait_health(&self, what: &str, test: impl Fn(&Value) -> bool) {
        let started = Instant::now();
        loop {
            let got = self.client.get(format!("{}/healthz", self.server.base));
            let got = got.send().await.unwrap();
            assert_eq!(got.status(), 200, "the process serves");
            let body: Value = got.json().await.unwrap();
            if test(&body) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{what}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls `/readyz` until it answers `status` (a 503 with Retry-After), for at most 30 s.
    async fn wait_ready(&self, status: u16) {
        let started = Instant::now();
        loop {
            let got = self.client.get(format!("{}/readyz", self.server.base));
            let got = got.send().await.unwrap();
            if got.status() == status {
                assert!(status == 200 || got.headers().contains_key("retry-after"));
                return;
            }
            let body = got.text().await.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "readyz: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop_load(&mut self) {
        self.load.stop.store(true, Ordering::SeqCst);
        for w in self.workers.drain(..) {
            w.await.unwrap();
        }
    }

    /// Every answer: 200/201, or 503 with Retry-After, within 5 s.
    fn check_answers(&self) {
        eprintln!("answers: {}", self.load.summary(self.t0));
        let answers = self.load.answers.lock().unwrap();
        let slowest = answers.iter().map(|a| a.took).max().unwrap_or_default();
        eprintln!("slowest answer: {slowest:?}");
        drop(answers);
        for a in self.load.answers.lock().unwrap().iter() {
            let ok = matches!((a.what, a.status), ("collect", 200) | ("contact", 201));
            assert!(
                ok || (a.status == 503 && a.retry_after),
                "{} answered {} (Retry-After: {}) {:?} into the test",
                a.what,
                a.status,
                a.retry_after,
                a.at - self.t0
            );
            assert!(
                a.took < Duration::from_secs(6),
                "{} took {:?}",
                a.what,
                a.took
            );
        }
    }

    /// Every contact acknowledged reads back.
    async fn check_contacts(&self) {
        let contacts = self.load.contacts.lock().unwrap().clone();
        for (id, email) in &contacts {
            let got = self
                .client
                .get(format!("{}/acq/v1/contacts/{id}", self.server.base))
                .header("x-api-key", &self.api_key)
                .send()
                .await
                .unwrap();
            let got: Value = got.json().await.unwrap();
            assert_eq!(got["data"]["email"], json!(email), "contact {id}: {got}");
        }
    }

    /// SIGTERM: exit 0 within the shutdown timeout (30 s).
    async fn terminate(&mut self) {
        let stopping = Instant::now();
        self.server.terminate().await;
        let stopped = stopping.elapsed();
        eprintln!("SIGTERM: exit 0 after {stopped:?}");
        assert!(
            stopped < Duration::from_secs(30),
            "shutdown took {stopped:?}"
        );
    }

    /// After the last stop: every acknowledged event is in the lake once.
    fn check_lake(&self) {
        let view = lake::read_local(&self.data.join("lake"));
        let ids = view.message_ids();
        let unique: HashSet<String> = ids.iter().cloned().collect();
        assert_eq!(unique.len(), ids.len(), "duplicated rows in the lake");
        let acked = self.load.acked.lock().unwrap();
        let missing: Vec<_> = acked.difference(&unique).take(5).collect();
        assert!(
            missing.is_empty(),
            "acknowledged, not in the lake: {missing:?}"
        );
        assert!(unique.is_subset(&self.load.sent.lock().unwrap()));
        let contacts = self.load.contacts.lock().unwrap().len();
        eprintln!("{} events acknowledged, {contacts} contacts", acked.len());
    }
}

impl Drop for Scenario {
    /// A failed assertion leaves no server running on the tmpfs.
    fn drop(&mut self) {
        let _ = self.server.child.kill();
        let _ = self.server.child.wait();
    }
}

#[tokio::test]
async fn a_full_disk_answers_503_and_collection_and_the_api_recover_once_space_is_freed() {
    let mut s = Scenario::start().await;
    let filling = s.fill().await;
    filling.free();
    let freed = Instant::now();
    // Both recover without a restart, and keep working.
    let load = s.load.clone();
    let recovered = |what: &str, ok: u16| load.first_ok_after(what, ok, freed).is_some();
    let limit = Duration::from_secs(60);
    load.wait_for("collection recovers", freed, limit, || {
        recovered("collect", 200)
    })
    .await;
    load.wait_for("contacts recover", freed, limit, || {
        recovered("contact", 201)
    })
    .await;
    for (what, ok) in [("collect", 200), ("contact", 201)] {
        let at = load.first_ok_after(what, ok, freed).unwrap();
        eprintln!(
            "{what}: first {ok} {:?} after the filler was removed",
            at - freed
        );
    }
    s.both_succeed("steady again", freed, limit).await;
    s.wait_health("healthy again", |h| h["data"]["status"] == "ok")
        .await;
    s.wait_ready(200).await;
    s.stop_load().await;
    s.check_contacts().await;
    s.check_answers();
    s.terminate().await;
    s.check_lake();
}

/// SIGTERM while the disk is still full: the store cannot flush and the lake files cannot be
/// written, yet the server exits 0 in time; a restart with space writes every event.
#[tokio::test]
async fn sigterm_on_a_full_disk_exits_0_and_a_restart_loses_nothing() {
    let mut s = Scenario::start().await;
    let filling = s.fill().await;
    s.stop_load().await;
    s.check_answers();
    s.terminate().await;
    filling.free();
    s.server = start_with(&s.data, SETTINGS);
    s.check_contacts().await;
    s.terminate().await;
    s.check_lake();
}
