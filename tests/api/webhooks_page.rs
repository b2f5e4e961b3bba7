//! The dashboard's Webhooks pages over HTTP (forms, CSRF, redirects): an endpoint created with
//! its secret shown once and refusals next to their fields, edited, paused, resumed, rotated,
//! deleted; a test event's attempt and the log with its redeliver buttons; a disabled endpoint
//! shown as such and re-enabled; owners only; nothing typed is rendered unescaped.

use reqwest::Method;
use serde_json::{json, Value};

use crate::dashboard::{owner, Browser};
use crate::helpers::*;

/// A server that allows private addresses (its endpoints point at 127.0.0.1), with quick
/// retries given up after two (so an endpoint failing is disabled within seconds).
fn webhooks_app() -> TestApp {
    spawn_app_with(|s| {
        s.webhooks.allow_private = true;
        s.webhooks.retry_schedule_secs = vec![1, 1];
    })
}

/// A local address where nothing listens.
fn nowhere() -> String {
    let port = crate::binary::free_port();
    format!("http://127.0.0.1:{port}/hook")
}

/// The value of the input `id` on `body`.
fn input_value(body: &str, id: &str) -> Option<String> {
    let at = body.find(&format!("id=\"{id}\""))?;
    let tag = &body[body[..at].rfind('<')?..];
    let v = tag.find("value=\"")? + 7;
    Some(tag[v..].split('"').next()?.to_owned())
}

async fn endpoints(app: &TestApp, app_id: &str) -> Vec<Value> {
    let a = app
        .admin(Method::GET, &format!("/apps/{app_id}/webhooks"), None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.data().as_array().unwrap().clone()
}

#[tokio::test]
async fn an_endpoint_is_created_on_the_page_its_secret_shown_once_and_bad_fields_refused() {
    let app = webhooks_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let page = format!("/dashboard/apps/{app_id}/webhooks");
    let first = b.get("/dashboard/webhooks").await;
    assert_eq!(
        first.location(),
        page,
        "the nav goes to the first app's page"
    );
    let empty = b.get(&page).await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert!(empty.body.contains("No endpoints yet"));
    assert!(empty
        .body
        .contains(r#"href="/dashboard/webhooks" aria-current="page""#));

    let bad = b
        .submit(
            &page,
            &page,
            &[("url", "ftp://x.example"), ("description", "x")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("id=\"f-url-error\""), "{}", bad.body);
    assert!(
        bad.body.contains("ftp://x.example"),
        "what was typed is kept"
    );
    assert!(endpoints(&app, &app_id).await.is_empty());

    let url = nowhere();
    let made = b
        .submit(
            &page,
            &page,
            &[
                ("url", &url),
                ("description", "<script>alert(1)</script>"),
                ("eventTypes", "contact.created"),
                ("eventTypes", "idea.created"),
                ("contactStatuses", "customer"),
                ("includeInternalComments", "true"),
            ],
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let secret = input_value(&made.body, "new-webhook-secret").expect("the secret shown");
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(!made.body.contains("<script>alert(1)</script>"), "escaped");
    assert!(made.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let listed = endpoints(&app, &app_id).await;
    assert_eq!(listed.len(), 1);
    let e = &listed[0];
    assert_eq!(e["url"], url.as_str());
    assert_eq!(e["eventTypes"], json!(["contact.created", "idea.created"]));
    assert_eq!(e["filters"]["contactStatuses"], json!(["customer"]));
    assert_eq!(e["includeInternalComments"], true);
    let again = b.get(&page).await;
    assert!(!again.body.contains(&secret), "shown once");
    assert!(again.body.contains(&url));
    assert!(again
        .body
        .contains("<span class=\"badge ok\">active</span>"));

    // A form without its CSRF token changes nothing.
    let forged = b.post(&page, &[("url", &url)]).await;
    assert_eq!(forged.status, 403);
    assert_eq!(endpoints(&app, &app_id).await.len(), 1);
}

#[tokio::test]
async fn an_endpoint_is_edited_paused_resumed_rotated_and_deleted_from_its_page() {
    let app = webhooks_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let made = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/webhooks"),
            Some(json!({"url": nowhere(), "eventTypes": ["*"]})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.data()["id"].as_str().unwrap().to_owned();
    let old = made.data()["secret"].as_str().unwrap().to_owned();
    let page = format!("/dashboard/apps/{app_id}/webhooks/{id}");
    let shown = b.get(&page).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(!shown.body.contains(&old), "the secret is not on the page");

    let saved = b
        .submit(
            &page,
            &page,
            &[
                ("url", "https://hooks.example.com/in"),
                ("description", "CRM"),
                ("eventTypes", "vote.created"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let e = &endpoints(&app, &app_id).await[0];
    assert_eq!(
        (&e["url"], &e["description"], &e["eventTypes"]),
        (
            &json!("https://hooks.example.com/in"),
            &json!("CRM"),
            &json!(["vote.created"])
        )
    );
    let none = b
        .submit(&page, &page, &[("url", "https://hooks.example.com/in")])
        .await;
    assert_eq!(none.status, 400, "no event type: {}", none.body);

    for (status, label) in [("paused", "Resume"), ("active", "Pause")] {
        let moved = b
            .submit(&page, &format!("{page}/status"), &[("status", status)])
            .await;
        assert_eq!(moved.status, 303, "{}", moved.body);
        assert_eq!(endpoints(&app, &app_id).await[0]["status"], status);
        assert!(b
            .get(&page)
            .await
            .body
            .contains(&format!(">{label}</button>")));
    }

    let rotated = b
        .submit(&page, &format!("{page}/secret"), &[("overlapHours", "1")])
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new = input_value(&rotated.body, "new-webhook-secret").expect("the new secret");
    assert!(new.starts_with("whsec_") && new != old);
    assert!(!b.get(&page).await.body.contains(&new), "shown once");

    let gone = b.submit(&page, &format!("{page}/delete"), &[]).await;
    assert_eq!(gone.status, 303);
    assert_eq!(
        gone.location(),
        format!("/dashboard/apps/{app_id}/webhooks")
    );
    assert!(endpoints(&app, &app_id).await.is_empty());
    assert_eq!(b.get(&page).await.status, 404);
}

#[tokio::test]
async fn a_test_event_shows_its_attempt_and_a_failing_endpoint_is_shown_disabled_then_re_enabled() {
    let app = webhooks_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let key = app.create_key(&app_id, &["contacts:write"]).await.1;
    let made = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/webhooks"),
            Some(json!({"url": nowhere(), "eventTypes": ["contact.created"]})),
        )
        .await;
    let id = made.data()["id"].as_str().unwrap().to_owned();
    let page = format!("/dashboard/apps/{app_id}/webhooks/{id}");
    let tested = b.submit(&page, &format!("{page}/test"), &[]).await;
    assert_eq!(tested.status, 200, "{}", tested.body);
    assert!(tested.body.contains("Test event sent"), "{}", tested.body);
    assert!(tested.body.contains("failed"), "nothing listens there");
    let log = &tested.body[tested.body.find("id=\"attempts\"").expect("the log")..];
    assert!(log.contains("webhook.test") && log.contains(">Redeliver<"));

    // An event whose retries run out disables the endpoint; the page says so and re-enables it.
    let c = app
        .create_contact(&key, json!({"email": "x@example.com"}))
        .await;
    assert_eq!(c.status, 201);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while endpoints(&app, &app_id).await[0]["status"] != "disabled" {
        assert!(std::time::Instant::now() < deadline, "not disabled");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let shown = b.get(&page).await;
    assert!(shown
        .body
        .contains("<span class=\"badge danger\">disabled</span>"));
    assert!(shown.body.contains(">Re-enable</button>"));
    let list = b.get(&format!("/dashboard/apps/{app_id}/webhooks")).await;
    assert!(list.body.contains("disabled"));
    let back = b
        .submit(&page, &format!("{page}/status"), &[("status", "active")])
        .await;
    assert_eq!(back.status, 303);
    assert_eq!(endpoints(&app, &app_id).await[0]["status"], "active");
}

#[tokio::test]
async fn a_member_cannot_see_the_webhooks_pages() {
    let app = webhooks_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let team = b
        .submit(
            "/dashboard/team",
            "/dashboard/team",
            &[
                ("name", "Mel"),
                ("email", "mel@example.com"),
                ("password", "members only please"),
                ("role", "member"),
            ],
        )
        .await;
    assert!(
        team.status.is_success() || team.status == 303,
        "{}",
        team.body
    );
    let mut m = Browser::new(&app);
    m.sign_in("mel@example.com", "members only please").await;
    let page = m.get(&format!("/dashboard/apps/{app_id}/webhooks")).await;
    assert_eq!(page.status, 403);
    let home = m.get(&format!("/dashboard/apps/{app_id}/contacts")).await;
    assert!(!home.body.contains("/dashboard/webhooks"), "no nav entry");
}
