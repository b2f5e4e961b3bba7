//! The admin token (its length at start-up, wrong ones throttled per address) and the headers
//! every answer carries.

use std::sync::Arc;

use reqwest::Method;
use serde_json::json;
use tributary::clock::SystemClock;
use tributary::startup::Application;

use crate::dashboard::owner;
use crate::helpers::*;

#[test]
fn an_admin_token_under_16_characters_refuses_to_start_the_server() {
    for (token, starts) in [
        ("x", false),
        ("fifteen-chars-x", false),
        ("sixteen-chars-xy", true),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut settings = test_settings(tmp.path());
        settings.admin_token = Some(token.into());
        let built = actix_web::rt::System::new()
            .block_on(async { Application::build(settings, Arc::new(SystemClock)).map(|_| ()) });
        match built {
            Ok(()) => assert!(starts, "{token:?} must be refused"),
            Err(e) => {
                assert!(!starts, "{token:?}: {e}");
                let said = e.to_string();
                assert!(
                    said.contains(&format!("is {} characters", token.len()))
                        && said.contains("at least 16"),
                    "{said}"
                );
            }
        }
    }
}

#[tokio::test]
async fn wrong_admin_tokens_are_throttled_per_address_with_retry_after() {
    let app = spawn_app();
    let wrong = [("authorization", "Bearer adm_not_the_token_at_all")];
    // A burst of 60, then one a second: on a slow machine the burst may take seconds, and
    // each of them brings one more try back.
    let started = std::time::Instant::now();
    let mut tries = 0;
    let (refused, sent) = loop {
        let sent = std::time::Instant::now();
        let a = app.send(Method::GET, "/admin/v1/apps", &wrong, None).await;
        if a.status == 429 {
            break (a, sent);
        }
        a.assert_error(401, "UNAUTHORIZED");
        assert!(a.header("retry-after").is_none(), "attempt {tries}");
        tries += 1;
        let allowed = 60 + started.elapsed().as_secs() + 1;
        assert!(
            tries <= allowed,
            "{tries} wrong tokens in {:?}",
            started.elapsed()
        );
    };
    assert!(tries >= 60, "refused after {tries} wrong tokens");
    refused.assert_error(429, "RATE_LIMITED");
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    // Blocked means blocked: the right token from that address waits too, so a guess that
    // happens to be right is not told apart from a wrong one. The block began after `sent` and
    // lasts `wait` seconds: an answer back before `sent + wait` was decided inside it (a
    // stalled machine may take longer; then there is nothing left to check).
    let blocked_until = sent + std::time::Duration::from_secs(wait);
    let get = app.admin(Method::GET, "/apps", None).await;
    let post = app
        .admin(Method::POST, "/apps", Some(json!({"name": "x"})))
        .await;
    if std::time::Instant::now() < blocked_until {
        get.assert_error(429, "RATE_LIMITED");
        post.assert_error(429, "RATE_LIMITED");
    } else {
        eprintln!("the block ended before both answers came back: not checked");
    }
    // A request without a token is not a guess.
    app.send(Method::GET, "/admin/v1/apps", &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn every_answer_says_nosniff_and_pages_allow_no_base_element() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["contacts:read"]).await;
    let answers = [
        app.send(Method::GET, "/healthz", &[], None).await,
        app.send(Method::GET, "/no/such/path", &[], None).await,
        app.send(Method::GET, "/admin/v1/apps", &[], None).await,
        app.api(&key, Method::GET, "/acq/v1/contacts", None).await,
    ];
    for a in &answers {
        assert_eq!(
            a.header("x-content-type-options"),
            Some("nosniff"),
            "{} {}",
            a.status,
            a.body
        );
    }
    let metrics = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.headers()["x-content-type-options"], "nosniff");
    let mut b = owner(&app).await;
    let export = b
        .get(&format!("/dashboard/apps/{app_id}/contacts.csv"))
        .await;
    assert_eq!(export.status, 200);
    assert_eq!(export.headers["x-content-type-options"], "nosniff");
    let page = b.get("/dashboard/apps").await;
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("base-uri 'none'"), "{csp}");
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
}
