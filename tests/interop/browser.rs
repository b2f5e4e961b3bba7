//! The browser tracker in headless Chromium against the real server: this test starts the
//! server, runs `node --test` in `tests/browser/` (playwright-core drives `/usr/bin/chromium`;
//! the JS tests assert what reaches the server through a recording proxy), then stops the
//! server and checks the lake against the manifest the JS tests wrote: each expected event
//! once, each dropped one absent, no messageId twice.
//!
//! Needs Debian's `chromium` and `tests/browser/node_modules`, which `tests/run` installs;
//! without them it fails at once with one line saying so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::events::slow_files;
use crate::helpers::*;
use crate::lake::read_local;

const CHROMIUM: &str = "/usr/bin/chromium";

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// What is missing to run the browser tests, if anything.
fn missing() -> Option<String> {
    let dir = browser_dir();
    if !Path::new(CHROMIUM).exists() {
        return Some(format!("{CHROMIUM} is missing"));
    }
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        return Some(format!("{} is missing", dir.join("node_modules").display()));
    }
    match Command::new("node").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("node is missing".into()),
    }
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("screenshots")
}

#[derive(Default)]
pub struct Manifest {
    pub present: Vec<String>,
    pub absent: Vec<String>,
    /// messageId -> column -> the value its lake row must hold.
    pub rows: HashMap<String, serde_json::Map<String, Value>>,
}

pub fn read_manifest(path: &Path) -> Manifest {
    let mut m = Manifest::default();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).expect("manifest line");
        let strings = |k: &str| -> Vec<String> {
            v[k].as_array()
                .into_iter()
                .flatten()
                .map(|s| s.as_str().expect("a messageId").to_owned())
                .collect()
        };
        m.present.extend(strings("present"));
        m.absent.extend(strings("absent"));
        if let Some(rows) = v["rows"].as_object() {
            for (id, cols) in rows {
                m.rows
                    .insert(id.clone(), cols.as_object().expect("columns").clone());
            }
        }
    }
    m
}

/// Runs one file of `tests/browser` with node's test runner against the server at
/// `TRIBUTARY_BASE` (in `env`), with the admin token and the screenshot directory; fails with
/// node's report when any of its tests fails.
pub async fn node_test(file: &'static str, env: Vec<(&'static str, String)>) {
    if let Some(what) = missing() {
        panic!("browser tests cannot run: {what}; run tests/run once (it installs chromium and tests/browser/node_modules)");
    }
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .args([
                "--test",
                "--test-concurrency=1",
                "--test-timeout=120000",
                file,
            ])
            .current_dir(browser_dir())
            .envs(env)
            .env("TRIBUTARY_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("SCREENSHOT_DIR", screenshot_dir())
            .output()
            .expect("node runs")
    })
    .await
    .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "node --test tests/browser/{file} failed:\n{report}"
    );
    println!("{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_browser_tracker_in_headless_chromium() {
    let mut app = spawn_app_with(slow_files);
    let (_, key) = app.create_app("enterprise").await;
    let manifest = app.data_dir.join("browser-manifest.jsonl");
    node_test(
        "tracker.test.mjs",
        vec![
            ("TRIBUTARY_BASE", app.base.clone()),
            ("TRIBUTARY_APP_KEY", key),
            ("TRIBUTARY_MANIFEST", manifest.display().to_string()),
        ],
    )
    .await;
    app.stop().await;
    let m = read_manifest(&manifest);
    assert!(
        m.present.len() > 100,
        "the JS tests named what the lake must hold"
    );
    assert_lake_holds(&app, &m);
}

/// The lake of a stopped `app` holds each of the manifest's present events once, with the
/// columns it names, none of its absent ones, and no messageId twice.
fn assert_lake_holds(app: &TestApp, m: &Manifest) {
    let lake = read_local(&app.data_dir.join("lake"));
    let ids = lake.message_ids();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for id in &ids {
        *count.entry(id.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = count.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "messageIds twice in the lake: {twice:?}");
    for id in &m.present {
        assert_eq!(count.get(id.as_str()), Some(&1), "{id} not in the lake");
    }
    for id in &m.absent {
        assert_eq!(count.get(id.as_str()), None, "{id} must not be in the lake");
    }
    for (id, cols) in &m.rows {
        let row = lake.row(id);
        for (col, want) in cols {
            assert_eq!(&row[col], want, "{id}: column {col}");
        }
    }
}

/// The operator's paths (`collector.script_path`, `collect_path`) in headless Chromium:
/// `tests/browser/paths.test.mjs` blocks the default paths as an ad blocker would, loads the
/// tracker from the operator's script path (and a copy hosted elsewhere with
/// `data-collect-path`), and checks that its events go to the operator's collect path only;
/// here, that they are in the lake.
#[tokio::test(flavor = "multi_thread")]
async fn the_tracker_under_the_operators_paths_in_headless_chromium() {
    let (script, collect) = ("/lib/site.js", "/t/e");
    let mut app = spawn_app_with(|s| {
        slow_files(s);
        s.collector.script_path = script.into();
        s.collector.collect_path = collect.into();
    });
    let (_, key) = app.create_app("enterprise").await;
    let manifest = app.data_dir.join("browser-manifest.jsonl");
    node_test(
        "paths.test.mjs",
        vec![
            ("TRIBUTARY_BASE", app.base.clone()),
            ("TRIBUTARY_APP_KEY", key),
            ("TRIBUTARY_MANIFEST", manifest.display().to_string()),
            ("TRIBUTARY_SCRIPT_PATH", script.into()),
            ("TRIBUTARY_COLLECT_PATH", collect.into()),
        ],
    )
    .await;
    app.stop().await;
    let m = read_manifest(&manifest);
    assert!(
        m.present.len() >= 4,
        "the JS tests named what the lake must hold"
    );
    assert_lake_holds(&app, &m);
}

/// The dashboard in headless Chromium: `tests/browser/dashboard.test.mjs` drives every flow
/// (setup, apps, keys used on the API, the CSRF refusal, a CSV import of 1 000 contacts with 3
/// bad rows, the contacts table, a member without keys, sign-out and sign-in) against a fresh
/// server and saves screenshots of every page, light and dark, under `target/screenshots/`.
#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_in_headless_chromium() {
    // Files (and the rollups with them) flush within 100 ms, so traffic shows at once.
    let mut app = spawn_app_with(|s| s.collector.max_file_age_ms = 100);
    node_test(
        "dashboard.test.mjs",
        vec![("TRIBUTARY_BASE", app.base.clone())],
    )
    .await;
    app.stop().await;
}

/// The survey popover of the tracker in headless Chromium: `tests/browser/surveys.test.mjs`
/// answers one survey of each type with the keyboard, checks the answers and scores through
/// the API, that nothing completed or dismissed shows again, targeting and `surveys(false)`,
/// and saves screenshots of each popover under `target/screenshots/`.
#[tokio::test(flavor = "multi_thread")]
async fn the_survey_popover_in_headless_chromium() {
    // The tests make their own app, key and surveys through the admin API; the harness wants
    // an app key and a manifest all the same (these tests write none).
    let mut app = spawn_app();
    let (_, key) = app.create_app("enterprise").await;
    let manifest = app.data_dir.join("browser-manifest.jsonl");
    node_test(
        "surveys.test.mjs",
        vec![
            ("TRIBUTARY_BASE", app.base.clone()),
            ("TRIBUTARY_APP_KEY", key),
            ("TRIBUTARY_MANIFEST", manifest.display().to_string()),
        ],
    )
    .await;
    app.stop().await;
}
