//! Tracker events and batches for the collector tests, shared by the `api` and `interop` test
//! binaries.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

pub const ANON: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";
pub const ANON2: &str = "0d9b7c1e-2f3a-4b5c-9d8e-7f6a5b4c3d2e";

/// A valid track event with a unique messageId.
pub fn track(id: &str) -> Value {
    json!({
        "type": "track",
        "event": "Signed Up",
        "anonymousId": ANON,
        "messageId": format!("msg_{id}"),
        "sessionId": "ses_1",
        "timestamp": chrono::Utc::now().to_rfc3339(),
        "properties": {"plan": "pro", "seats": 3, "nested": {"a": [1, 2]}},
        "context": {
            "page": {"url": "https://shop.example/pricing?x=1", "path": "/pricing", "title": "Pricing", "referrer": ""},
            "device": {"type": "desktop"}, "locale": "en-US", "timezone": "Europe/Paris",
            "screen": {"width": 1440, "height": 900}, "library": {"name": "tributary.js", "version": "1.0.0"}
        }
    })
}

/// A batch of `n` track events with messageIds `msg_<prefix><i>`.
pub fn tracks(prefix: &str, n: usize) -> Value {
    batch((0..n).map(|i| track(&format!("{prefix}{i}"))).collect())
}

pub fn batch(events: Vec<Value>) -> Value {
    json!({"batch": events, "sentAt": chrono::Utc::now().to_rfc3339()})
}

impl TestApp {
    pub async fn collect(&self, key: &str, body: Value) -> Answer {
        self.send(
            Method::POST,
            "/api/w/analytics/collect",
            &[("x-app-key", key)],
            Some(body),
        )
        .await
    }
}

/// Files close only at shutdown unless a test wants otherwise.
pub fn slow_files(s: &mut tributary::config::Settings) {
    s.collector.max_file_age_ms = 3_600_000;
}
