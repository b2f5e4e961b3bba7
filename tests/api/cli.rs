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
