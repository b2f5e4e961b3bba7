//! One HTTP attempt: `POST <url>` with the Standard Webhooks headers, through a client that
//! resolves names with the guard (`guard.rs`), follows no redirect, uses no proxy, gives up
//! after `webhooks.timeout_ms`, and reads at most `webhooks.max_answer_bytes` of the answer.

use std::time::{Duration, Instant};

use super::guard::{self, GuardedResolver};
use super::model::LOGGED_ANSWER_BYTES;
use super::sign;
use crate::config::WebhookSettings;

/// What an attempt got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The HTTP status, `None` when no answer came.
    pub status: Option<u16>,
    pub error: Option<String>,
    pub latency_ms: u64,
    /// The first 1 KiB of the answer.
    pub response: Vec<u8>,
}

impl Outcome {
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    fn failed(error: String, started: Instant) -> Outcome {
        Outcome {
            status: None,
            error: Some(error),
            latency_ms: started.elapsed().as_millis() as u64,
            response: Vec::new(),
        }
    }
}

/// The delivery client.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    allow_private: bool,
    max_answer: usize,
}

/// The message of an error with its causes (reqwest's own says only "error sending request").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

impl Sender {
    pub fn new(s: &WebhookSettings) -> Sender {
        let client = reqwest::Client::builder()
            .dns_resolver(GuardedResolver {
                allow_private: s.allow_private,
            })
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_millis(s.timeout_ms.max(1)))
            .user_agent(concat!("Tributary-Webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the webhook client builds");
        Sender {
            client,
            allow_private: s.allow_private,
            max_answer: s.max_answer_bytes,
        }
    }

    /// Sends `body` as event `id` signed with `secrets` at `timestamp` (unix seconds).
    pub async fn send(
        &self,
        url: &str,
        id: &str,
        body: &str,
        secrets: &[&str],
        timestamp: i64,
    ) -> Outcome {
        let started = Instant::now();
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) => u,
            Err(e) => return Outcome::failed(format!("bad url: {e}"), started),
        };
        if let Err(m) = guard::check_literal(&parsed, self.allow_private) {
            return Outcome::failed(format!("address refused: {m}"), started);
        }
        let signature = sign::header(secrets, id, timestamp, body.as_bytes());
        let sent = self
            .client
            .post(parsed)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_owned())
            .send()
            .await;
        let mut answer = match sent {
            Ok(a) => a,
            Err(e) => return Outcome::failed(chain(&e), started),
        };
        let status = answer.status().as_u16();
        let (response, error) = self.read(&mut answer).await;
        Outcome {
            status: Some(status),
            error,
            latency_ms: started.elapsed().as_millis() as u64,
            response,
        }
    }

    /// Reads at most `max_answer` bytes of the answer (the rest is left unread); keeps the first
    /// 1 KiB.
    async fn read(&self, answer: &mut reqwest::Response) -> (Vec<u8>, Option<String>) {
        let (mut kept, mut read) = (Vec::new(), 0);
        while read < self.max_answer {
            match answer.chunk().await {
                Ok(Some(c)) => {
                    read += c.len();
                    let room = LOGGED_ANSWER_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&c[..c.len().min(room)]);
                }
                Ok(None) => break,
                Err(e) => return (kept, Some(format!("reading the answer: {}", chain(&e)))),
            }
        }
        (kept, None)
    }
}
