//! `tributary apps ...` / `tributary keys ...` against a running server.

use std::process::Command;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

fn tributary(app: &TestApp, args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(args)
        .env("TRIBUTARY_URL", &app.base)
        .env("TRIBUTARY_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("tributary runs");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_creates_apps_and_keys_that_work() {
    let app = spawn_app();
    let server = &app;
    let (ok, created, err) = tokio::task::block_in_place(|| {
        tributary(
            server,
            &["apps", "create", "--name", "Shop", "--plan", "pro"],
        )
    });
    assert!(ok, "{err}");
    assert_eq!(created["plan"], "pro");
    let app_id = created["id"].as_str().unwrap().to_owned();
    let (ok, key, err) = tokio::task::block_in_place(|| {
        tributary(
            server,
            &[
                "keys",
                "create",
                "--app",
                &app_id,
                "--name",
                "crm",
                "--permissions",
                "contacts:read,contacts:write",
            ],
        )
    });
    assert!(ok, "{err}");
    let secret = key["key"].as_str().unwrap();
    assert_eq!(
        app.create_contact(secret, json!({"email": "cli@example.com"}))
            .await
            .status,
        201
    );
    let (ok, _, err) = tokio::task::block_in_place(|| {
        tributary(
            server,
            &[
                "keys",
                "revoke",
                "--app",
                &app_id,
                key["id"].as_str().unwrap(),
            ],
        )
    });
    assert!(ok, "{err}");
    app.api(secret, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    let (ok, _, err) =
        tokio::task::block_in_place(|| tributary(server, &["apps", "set-plan", &app_id, "gold"]));
    assert!(!ok && err.contains("VALIDATION_ERROR"), "{err}");
}

/// Runs the CLI from an empty directory with no TRIBUTARY_* variables.
fn bare_tributary(args: &[&str]) -> (bool, Value, String) {
    let cwd = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tributary"));
    cmd.args(args).current_dir(cwd.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("TRIBUTARY") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("tributary runs");
    (
        out.status.success(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_finds_the_admin_token_through_data_dir_or_config_and_takes_options_anywhere() {
    let app = spawn_app();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("admin_token"), format!("{ADMIN_TOKEN}\n")).unwrap();
    let dir = data.path().to_str().unwrap().to_owned();
    let base = app.base.clone();
    // --url and --data-dir after the subcommand (and before it).
    let (ok, created, err) = tokio::task::block_in_place(|| {
        bare_tributary(&[
            "apps",
            "create",
            "--url",
            &base,
            "--name",
            "x",
            "--data-dir",
            &dir,
        ])
    });
    assert!(ok, "{err}");
    let app_id = created["id"].as_str().unwrap().to_owned();
    let (ok, _, err) = tokio::task::block_in_place(|| {
        bare_tributary(&[
            "keys",
            "--url",
            &base,
            "--token",
            ADMIN_TOKEN,
            "create",
            "--app",
            &app_id,
            "--name",
            "k",
            "--permissions",
            "contacts:read",
        ])
    });
    assert!(ok, "{err}");
    // A configuration file names the data dir and, through server.bind, the URL.
    let config = data.path().join("tributary.toml");
    let bind = base.trim_start_matches("http://");
    std::fs::write(
        &config,
        format!("[server]\nbind = \"{bind}\"\n[storage]\ndata_dir = \"{dir}\"\n"),
    )
    .unwrap();
    let (ok, keys, err) = tokio::task::block_in_place(|| {
        bare_tributary(&[
            "keys",
            "list",
            "--app",
            &app_id,
            "--config",
            config.to_str().unwrap(),
        ])
    });
    assert!(ok, "{err}");
    assert_eq!(keys.as_array().map(Vec::len), Some(1), "{keys}");
    // Without any source of the token, the error says where it looked.
    let (ok, _, err) =
        tokio::task::block_in_place(|| bare_tributary(&["apps", "list", "--url", &base]));
    assert!(!ok);
    assert!(
        err.contains("admin_token") && err.contains("--data-dir"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_create_makes_the_first_owner_who_signs_in_on_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let create = |email: &str, password: &str| {
        Command::new(env!("CARGO_BIN_EXE_tributary"))
            .args([
                "admin",
                "create",
                "--email",
                email,
                "--name",
                "Ann Admin",
                "--data-dir",
            ])
            .arg(dir.path())
            .env("TRIBUTARY_ADMIN_PASSWORD", password)
            .output()
            .expect("tributary runs")
    };
    let short = create("ann@example.com", "short");
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("password"));
    let made = create("ann@example.com", "a long enough secret");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let shown: Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(shown["role"], "owner");
    assert!(
        !create("ann@example.com", "a long enough secret")
            .status
            .success(),
        "e-mails are unique"
    );
    let app = start(dir.path().to_path_buf(), |_| {});
    let mut b = crate::dashboard::Browser::new(&app);
    let setup = b.get("/dashboard/setup").await;
    assert_eq!(
        setup.location(),
        "/dashboard/sign-in",
        "the setup page is spent"
    );
    let signed = b.sign_in("ann@example.com", "a long enough secret").await;
    assert_eq!(signed.status, 303);
    assert_eq!(b.get("/dashboard/team").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_deletes_an_app_and_waits_for_its_job() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("free").await;
    let (ok, job, err) =
        tokio::task::block_in_place(|| tributary(&app, &["apps", "delete", &app_id, "--wait"]));
    assert!(ok, "{err}");
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(job["appId"], json!(app_id));
    app.admin(Method::GET, &format!("/apps/{app_id}"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    let batch = json!({"batch": [{"type": "track", "event": "x", "anonymousId": anon("v")}]});
    app.send(
        Method::POST,
        "/api/w/analytics/collect",
        &[("x-app-key", &ik)],
        Some(batch),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    let (ok, _, err) =
        tokio::task::block_in_place(|| tributary(&app, &["apps", "delete", &app_id]));
    assert!(!ok && err.contains("NOT_FOUND"), "{err}");
}
