//! The real server SDKs against a spawned server, each with its defaults and only the host set:
//! Segment's `@segment/analytics-node` 3.1 and RudderStack's `@rudderstack/rudder-sdk-node` 3.0
//! (npm, `tests/sdks/node_modules`) and `segment-analytics-python` 2.4 (PyPI, `.venv`), all of
//! which `tests/run` installs. `tests/sdks/send.mjs` and `send.py` make the calls and print what
//! was sent (the SDK's own messageIds); the lake, read by DuckDB, must hold each call exactly
//! once with the values sent.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Map, Value};

use crate::events::*;
use crate::helpers::*;
use crate::python;

fn sdks_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdks")
}

/// Runs one SDK's script against `base` with `key`; returns each call as sent.
async fn send(sdk: &'static str, base: String, key: String) -> Vec<Map<String, Value>> {
    let dir = sdks_dir();
    let mut cmd = if sdk == "python" {
        let mut c = Command::new(python::venv_bin("python"));
        c.arg(dir.join("send.py"));
        c
    } else {
        assert!(
            dir.join("node_modules/@segment/analytics-node").exists()
                && dir
                    .join("node_modules/@rudderstack/rudder-sdk-node")
                    .exists(),
            "the SDK tests need tests/sdks/node_modules: run tests/run once (it installs them)"
        );
        let mut c = Command::new("node");
        c.arg(dir.join("send.mjs")).arg(sdk);
        c
    };
    cmd.args([&base, &key]).current_dir(&dir);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("the SDK script runs"))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{sdk}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{sdk} prints JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(
        report["failures"],
        json!([]),
        "{sdk}: every call is answered 2xx"
    );
    let sent: Vec<Map<String, Value>> = serde_json::from_value(report["sent"].clone()).unwrap();
    assert_eq!(sent.len(), 8, "{sdk}: {sent:?}");
    sent
}

/// JSON text of the lake parsed (`null` stays null).
fn parsed(v: &Value) -> Value {
    v.as_str()
        .map_or(Value::Null, |s| serde_json::from_str(s).unwrap())
}

/// Checks one call's row against what the SDK sent.
fn check_row(sdk: &str, call: &Map<String, Value>, row: &Map<String, Value>) {
    let kind = call["type"].as_str().unwrap();
    let p = call["params"].as_object().unwrap();
    let what = format!("{sdk} {kind} {p:?}");
    assert_eq!(row["type"], json!(kind), "{what}");
    for (param, col) in [
        ("userId", "user_id"),
        ("anonymousId", "anonymous_id"),
        ("event", "event"),
        ("groupId", "group_id"),
        ("previousId", "previous_id"),
        ("name", "name"),
        ("category", "category"),
    ] {
        if let Some(v) = p.get(param) {
            assert_eq!(&row[col], v, "{what}: {col}");
        }
    }
    // Every key sent, with its value (an SDK may add some: Segment's puts a page's category
    // in its properties too).
    for (param, col) in [("properties", "properties"), ("traits", "traits")] {
        if let Some(v) = p.get(param) {
            let stored = parsed(&row[col]);
            for (key, value) in v.as_object().unwrap() {
                assert_eq!(&stored[key], value, "{what}: {col}.{key} in {stored}");
            }
        }
    }
    if kind == "page" {
        let props = &p["properties"];
        for (key, col) in [
            ("url", "page_url"),
            ("path", "page_path"),
            ("title", "page_title"),
            ("referrer", "page_referrer"),
        ] {
            assert_eq!(row[col], props[key], "{what}: {col}");
        }
    }
    // The client's time (the call's), within 2 s: the skew-corrected event time.
    let at = call["at"].as_i64().unwrap() * 1000;
    let ts = row["timestamp"].as_i64().unwrap();
    assert!(
        (ts - at).abs() < 2_000_000,
        "{what}: timestamp {ts} vs call at {at}"
    );
    assert!(
        row["original_timestamp"].is_i64(),
        "{what}: the SDK's time is kept"
    );
}

async fn sdk_calls_land_once_under_their_own_message_ids(sdk: &'static str) {
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let sent = send(sdk, app.base.clone(), ik).await;
    app.stop().await;
    let view = python::read_local(&app.data_dir.join("lake"));
    assert_eq!(
        view.rows.len(),
        sent.len(),
        "{sdk}: one row per call, no more"
    );
    for call in &sent {
        let id = call["messageId"]
            .as_str()
            .unwrap_or_else(|| panic!("{sdk}: no messageId in {call:?}"));
        let rows: Vec<_> = view
            .rows
            .iter()
            .filter(|r| r["message_id"] == json!(id))
            .collect();
        assert_eq!(rows.len(), 1, "{sdk}: {id} once in the lake");
        assert_eq!(rows[0]["app_id"], json!(app_id));
        check_row(sdk, call, rows[0]);
    }
}

#[tokio::test]
async fn segment_analytics_node_lands_every_call_once() {
    sdk_calls_land_once_under_their_own_message_ids("segment").await;
}

#[tokio::test]
async fn rudderstack_node_sdk_lands_every_call_once() {
    sdk_calls_land_once_under_their_own_message_ids("rudder").await;
}

#[tokio::test]
async fn segment_analytics_python_lands_every_call_once() {
    sdk_calls_land_once_under_their_own_message_ids("python").await;
}

#[tokio::test]
async fn segment_analytics_js_in_chromium_sends_its_batch_with_the_served_settings() {
    assert!(
        Path::new("/usr/bin/chromium").exists()
            && sdks_dir()
                .join("node_modules/@segment/analytics-next")
                .exists(),
        "analytics.js's test needs chromium and tests/sdks/node_modules: run tests/run once"
    );
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let mut cmd = Command::new("node");
    cmd.arg(sdks_dir().join("browser.mjs"))
        .args([&app.base, &ik])
        .current_dir(sdks_dir());
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("node runs"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["failures"], json!([]), "{report}");
    assert_eq!(report["status"], 200, "{report}");
    assert_eq!(report["answer"]["data"]["accepted"], 3, "{report}");
    app.stop().await;
    let view = python::read_local(&app.data_dir.join("lake"));
    assert_eq!(view.rows.len(), 3);
    let mut anonymous = None;
    for call in report["sent"].as_array().unwrap() {
        let id = call["messageId"].as_str().unwrap();
        let row = view.row(id);
        assert_eq!(row["app_id"], json!(app_id));
        assert_eq!(row["type"], call["type"], "{id}");
        let at = call["at"].as_i64().unwrap() * 1000;
        let ts = row["timestamp"].as_i64().unwrap();
        assert!(
            (ts - at).abs() < 2_000_000,
            "{id}: timestamp {ts} vs call at {at}"
        );
        // One visitor, a UUID from analytics.js, kept as sent.
        let anon = row["anonymous_id"].as_str().unwrap().to_owned();
        assert_eq!(anonymous.get_or_insert(anon.clone()), &anon);
        assert_eq!(row["anonymous_id"], call["event"]["anonymousId"]);
    }
    let page = view.rows.iter().find(|r| r["type"] == "page").unwrap();
    assert_eq!(page["name"], json!("Pricing"));
    assert_eq!(page["category"], json!("Docs"));
    assert!(
        page["page_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{page:?}"
    );
    assert_eq!(page["page_title"], json!("Pricing"));
    let track = view.rows.iter().find(|r| r["type"] == "track").unwrap();
    assert_eq!(track["event"], json!("Signed Up"));
    assert_eq!(
        parsed(&track["properties"]),
        json!({"plan": "pro", "seats": 3})
    );
    let identify = view.rows.iter().find(|r| r["type"] == "identify").unwrap();
    assert_eq!(identify["user_id"], json!("browser-user"));
    assert_eq!(
        parsed(&identify["traits"])["email"],
        json!("ada@example.com")
    );
}
