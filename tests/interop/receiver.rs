//! The webhook receiver of the tests (`tests/support/webhook_receiver.py`, Python from `.venv`):
//! every delivery verified with the Standard Webhooks reference library (`standardwebhooks`
//! from PyPI), answered as the test says (200, 500 until a time, slowly), and recorded.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::observe::eventually;
use crate::python::venv_bin;

/// One delivery as the receiver got it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// `webhook-id`.
    pub id: Option<String>,
    /// The body's `id`.
    pub body_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub sequence: Option<u64>,
    /// The resource it is about (from `data`, as the catalogue says).
    pub subject: Option<String>,
    pub actor: Value,
    pub data: Value,
    /// Verified with each of the receiver's secrets for this endpoint, in order.
    pub checks: Vec<bool>,
    /// Every check passed.
    pub verified: bool,
    /// The status the receiver answered.
    pub answered: u16,
    /// When it arrived (unix seconds).
    pub at: f64,
    pub timestamp: Option<String>,
    pub user_agent: Option<String>,
    /// With `full`: the raw body and the headers (lower case).
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub headers: Option<HashMap<String, String>>,
}

impl Delivery {
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("")
    }
    pub fn subject(&self) -> &str {
        self.subject.as_deref().unwrap_or("")
    }
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or("")
    }
}

#[derive(Deserialize)]
struct Log {
    records: Vec<Delivery>,
}

/// A running receiver; killed on drop.
pub struct Receiver {
    child: Child,
    pub base: String,
    http: reqwest::Client,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// Starts the receiver on a free port and waits until it listens.
    pub fn start() -> Receiver {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/webhook_receiver.py");
        let mut child = Command::new(venv_bin("python"))
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the receiver prints its port");
        let port = serde_json::from_str::<Value>(&line).expect("{\"port\": N}")["port"]
            .as_u64()
            .expect("a port");
        Receiver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: crate::helpers::test_client(),
        }
    }

    /// The URL deliveries for `name` go to.
    pub fn url(&self, name: &str) -> String {
        format!("{}/hook/{name}", self.base)
    }

    /// Sets `name`'s secrets and behaviour (`status`, `okAfter`, `delay`; see the script).
    pub async fn set(&self, name: &str, conf: Value) {
        let r = self
            .http
            .put(format!("{}/control/{name}", self.base))
            .json(&conf)
            .send()
            .await
            .expect("the receiver answers");
        assert!(r.status().is_success());
    }

    /// `name` verifies with `secrets` and answers 200.
    pub async fn ok(&self, name: &str, secrets: &[&str]) {
        self.set(
            name,
            json!({"secrets": secrets, "status": 200, "okAfter": null, "delay": 0}),
        )
        .await;
    }

    /// Every delivery `name` got so far (with bodies and headers when `full`).
    pub async fn log(&self, name: &str, full: bool) -> Vec<Delivery> {
        let full = if full { 1 } else { 0 };
        let r = self
            .http
            .get(format!("{}/log/{name}?full={full}", self.base))
            .send()
            .await
            .expect("the receiver answers");
        r.json::<Log>().await.expect("the log").records
    }

    /// Polls `name`'s log until `done` holds for it, within `within`; returns the log.
    pub async fn until(
        &self,
        name: &str,
        what: &str,
        within: Duration,
        done: impl Fn(&[Delivery]) -> bool,
    ) -> Vec<Delivery> {
        let what = format!("{name}: {what}");
        eventually(&what, within, None, async || {
            let log = self.log(name, false).await;
            done(&log).then_some(log)
        })
        .await
        .0
    }

    /// Posts a delivery to `name` as Tributary would (the body and headers given, e.g. a
    /// recorded delivery tampered with); the receiver records whether it verifies.
    pub async fn replay(&self, name: &str, body: &str, headers: &HashMap<String, String>) {
        let mut req = self.http.post(self.url(name)).body(body.to_owned());
        for k in [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "content-type",
        ] {
            if let Some(v) = headers.get(k) {
                req = req.header(k, v);
            }
        }
        req.send().await.expect("the receiver answers");
    }
}

/// The deliveries answered 2xx, each `webhook-id` once (the first), in arrival order.
pub fn firsts(log: &[Delivery]) -> Vec<&Delivery> {
    let mut seen = std::collections::HashSet::new();
    log.iter()
        .filter(|d| (200..300).contains(&d.answered) && seen.insert(d.id().to_owned()))
        .collect()
}

/// The distinct `webhook-id`s answered 2xx.
pub fn delivered_ids(log: &[Delivery]) -> std::collections::HashSet<String> {
    firsts(log).iter().map(|d| d.id().to_owned()).collect()
}
