//! `spawn_app()`: the real server on port 0 with a temporary data directory, plus typed helpers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tributary::clock::ShiftedClock;
use tributary::config::Settings;
use tributary::startup::Application;

pub const ADMIN_TOKEN: &str = "adm_test_token_for_the_suite";

/// A visitor's anonymousId (a UUID, as the collector and the survey widget require) named by a
/// readable label: the same label always gives the same id.
pub fn anon(label: &str) -> String {
    let h = <sha2::Sha256 as sha2::Digest>::digest(label.as_bytes());
    let bytes: [u8; 16] = h[..16].try_into().expect("16 bytes");
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub data_dir: PathBuf,
    /// The server's clock: a test moves it forward instead of waiting.
    pub clock: Arc<ShiftedClock>,
    handle: Option<actix_web::dev::ServerHandle>,
    thread: Option<std::thread::JoinHandle<()>>,
    _tmp: Option<tempfile::TempDir>,
}

/// One HTTP answer: status, headers and the parsed JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
    /// `(accepted, duplicates, rejected)` of a collector answer.
    pub fn counts(&self) -> (u64, u64, u64) {
        let n = |k: &str| self.body["data"][k].as_u64().unwrap_or(u64::MAX);
        (n("accepted"), n("duplicates"), n("rejected"))
    }

    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    /// The `details[].field` names of an error.
    pub fn fields(&self) -> Vec<String> {
        let mut f: Vec<String> = self.body["error"]["details"]
            .as_array()
            .map(|d| {
                d.iter()
                    .map(|x| x["field"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default();
        f.sort();
        f
    }
    /// Asserts the envelope of an error: status, code, and a requestId equal to the header.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.body["success"], json!(false), "body: {}", self.body);
        assert_eq!(self.code(), code, "body: {}", self.body);
        assert!(self.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        let rid = self.body["meta"]["requestId"]
            .as_str()
            .expect("meta.requestId");
        assert_eq!(Some(rid), self.header("x-request-id"));
    }
}

/// Settings for a test server: defaults, port 0, a given data dir.
/// `open` again while it fails on sled's file lock, for up to 20 s: a server stopped in this
/// process may hold the lock a moment after its last handle is gone (sled's I/O threads).
fn while_locked<T, E: std::fmt::Debug>(mut open: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match open() {
            Err(e)
                if format!("{e:?}").contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            done => return done,
        }
    }
}

/// The sled database of a server stopped in this process (`data_dir/db`).
pub fn open_stopped_db(data_dir: &std::path::Path) -> sled::Db {
    while_locked(|| sled::open(data_dir.join("db")))
        .unwrap_or_else(|e| panic!("the stopped server's database does not open: {e}"))
}

pub fn test_settings(data_dir: &std::path::Path) -> Settings {
    let mut s = Settings::load(None).expect("default settings load");
    s.server.bind = "127.0.0.1:0".into();
    s.server.workers = 2;
    // Two shards whatever the machine, so every test crosses shards as a bigger box would.
    s.collector.shards = 2;
    // Parts merged into the lake as soon as they are flushed (tests of hourly files set 0).
    s.collector.lake_file_max_wait_ms = 1;
    s.server.shutdown_timeout_secs = 5;
    s.storage.data_dir = data_dir.to_path_buf();
    s.admin_token = Some(ADMIN_TOKEN.into());
    // Webhook receivers in the tests listen on 127.0.0.1.
    s.webhooks.allow_private = true;
    s
}

pub fn spawn_app() -> TestApp {
    spawn_app_with(|_| {})
}

pub fn spawn_app_with(tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = start(tmp.path().to_path_buf(), tweak);
    app._tmp = Some(tmp);
    app
}

/// Starts a server over an existing data dir (used to restart).
pub fn start(data_dir: PathBuf, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    start_on(data_dir, tweak, Arc::default())
}

/// Starts a server over `data_dir` whose time is `clock`.
fn start_on(
    data_dir: PathBuf,
    tweak: impl FnOnce(&mut Settings),
    clock: Arc<ShiftedClock>,
) -> TestApp {
    let mut settings = test_settings(&data_dir);
    tweak(&mut settings);
    let (tx, rx) = std::sync::mpsc::channel();
    let server_clock = clock.clone();
    let thread = std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            // After a restart, the previous server may hold the store's lock a moment longer.
            let app = while_locked(|| Application::build(settings.clone(), server_clock.clone()))
                .unwrap_or_else(|e| panic!("server builds: {e:?}"));
            tx.send((app.port(), app.handle())).unwrap();
            app.run_until_stopped().await.expect("server runs");
        })
    });
    let (port, handle) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("server started");
    TestApp {
        base: format!("http://127.0.0.1:{port}"),
        client: test_client(),
        data_dir,
        clock,
        handle: Some(handle),
        thread: Some(thread),
        _tmp: None,
    }
}

/// How long every test's HTTP client keeps an idle connection: below the server's keep-alive
/// (5 s), so a test that waited never reuses a connection the server is closing (a send that
/// fails with IncompleteMessage). `reqwest::Client::new()`'s pool would keep one 90 s.
pub const IDLE_CONNECTION: Duration = Duration::from_secs(2);

/// The tests' HTTP client, every test's.
pub fn test_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_idle_timeout(IDLE_CONNECTION)
        .build()
        .unwrap()
}

impl TestApp {
    /// A client of a server started elsewhere (the binary, `binary.rs`) at `base`: the helpers
    /// work against it; `stop` and `restart` do nothing to it.
    pub fn remote(base: &str, data_dir: PathBuf) -> TestApp {
        TestApp {
            base: base.to_owned(),
            client: test_client(),
            data_dir,
            clock: Arc::default(),
            handle: None,
            thread: None,
            _tmp: None,
        }
    }

    /// Graceful stop; waits until the store is flushed and closed.
    pub async fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.stop(true).await;
        }
        if let Some(t) = self.thread.take() {
            tokio::task::spawn_blocking(move || t.join().expect("server thread"))
                .await
                .unwrap();
        }
    }

    /// Stops and starts again over the same data dir, on the same clock.
    pub async fn restart(mut self) -> TestApp {
        self.stop().await;
        let tmp = self._tmp.take();
        let mut next = start_on(self.data_dir.clone(), |_| {}, self.clock.clone());
        next._tmp = tmp;
        next
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> Answer {
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        finish(req, headers).await
    }

    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Answer {
        finish(
            self.client
                .request(method, format!("{}{}", self.base, path))
                .body(body),
            headers,
        )
        .await
    }

    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        self.send(
            method,
            &format!("/admin/v1{path}"),
            &[("authorization", &auth)],
            body,
        )
        .await
    }

    /// Creates an app on `plan`; returns (appId, integrationKey).
    pub async fn create_app(&self, plan: &str) -> (String, String) {
        let a = self
            .admin(
                Method::POST,
                "/apps",
                Some(json!({"name": "Test app", "plan": plan})),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        (
            a.data()["id"].as_str().unwrap().into(),
            a.data()["integrationKey"].as_str().unwrap().into(),
        )
    }

    /// Creates an API key with the given permissions; returns (keyId, key).
    pub async fn create_key(&self, app_id: &str, permissions: &[&str]) -> (String, String) {
        let a = self
            .admin(
                Method::POST,
                &format!("/apps/{app_id}/keys"),
                Some(json!({"name": "k", "permissions": permissions})),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        (
            a.data()["id"].as_str().unwrap().into(),
            a.data()["key"].as_str().unwrap().into(),
        )
    }

    /// A fresh app with a key holding every contact permission; returns the key.
    pub async fn contacts_key(&self, plan: &str) -> String {
        let (app, _) = self.create_app(plan).await;
        self.create_key(
            &app,
            &["contacts:read", "contacts:write", "contacts:delete"],
        )
        .await
        .1
    }

    pub async fn api(&self, key: &str, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.send(method, path, &[("x-api-key", key)], body).await
    }

    pub async fn create_contact(&self, key: &str, body: Value) -> Answer {
        self.api(key, Method::POST, "/acq/v1/contacts", Some(body))
            .await
    }
}

async fn finish(mut req: reqwest::RequestBuilder, headers: &[(&str, &str)]) -> Answer {
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.expect("request sent");
    let status = res.status();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    let body =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text:?}"));
    Answer {
        status,
        headers,
        body,
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            // Not awaited: the runtime may be gone. The thread ends with the process.
            drop(h.stop(false));
        }
    }
}
