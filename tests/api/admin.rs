//! `/admin/v1`: apps and keys.

use reqwest::Method;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn the_admin_api_needs_the_admin_token() {
    let app = spawn_app();
    app.send(Method::GET, "/admin/v1/apps", &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.send(
        Method::GET,
        "/admin/v1/apps",
        &[("authorization", "Bearer wrong")],
        None,
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    // An API key is not an admin token.
    let key = app.contacts_key("free").await;
    app.send(
        Method::GET,
        "/admin/v1/apps",
        &[("authorization", &format!("Bearer {key}"))],
        None,
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn apps_and_keys_are_managed_and_secrets_are_shown_once() {
    let app = spawn_app();
    let created = app
        .admin(
            Method::POST,
            "/apps",
            Some(json!({"name": "Shop", "plan": "pro"})),
        )
        .await;
    assert_eq!(created.status, 201);
    let d = created.data();
    assert_eq!(
        (d["name"].as_str(), d["plan"].as_str()),
        (Some("Shop"), Some("pro"))
    );
    assert!(d["integrationKey"].as_str().unwrap().starts_with("ik_"));
    let app_id = d["id"].as_str().unwrap().to_owned();

    let bad = app
        .admin(
            Method::POST,
            "/apps",
            Some(json!({"name": "", "plan": "gold"})),
        )
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["name", "plan"]);

    let k = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/keys"),
            Some(json!({"name": "crm", "permissions": ["contacts:read"]})),
        )
        .await;
    assert_eq!(k.status, 201);
    let key = k.data()["key"].as_str().unwrap().to_owned();
    let key_id = k.data()["id"].as_str().unwrap().to_owned();
    let bad = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/keys"),
            Some(json!({"name": "x", "permissions": ["contacts:fly"]})),
        )
        .await;
    assert_eq!(bad.fields(), ["permissions[0]"]);

    let list = app
        .admin(Method::GET, &format!("/apps/{app_id}/keys"), None)
        .await;
    assert_eq!(list.data().as_array().unwrap().len(), 1);
    assert!(
        !list.body.to_string().contains(&key[key.len() - 20..]),
        "the secret must never be listed"
    );

    // A permission change takes effect on the next request.
    app.create_contact(&key, json!({"email": "a@b.co"}))
        .await
        .assert_error(403, "FORBIDDEN");
    let p = app
        .admin(
            Method::PATCH,
            &format!("/apps/{app_id}/keys/{key_id}"),
            Some(json!({"permissions": ["contacts:read", "contacts:write"]})),
        )
        .await;
    assert_eq!(p.status, 200, "{}", p.body);
    assert_eq!(
        app.create_contact(&key, json!({"email": "a@b.co"}))
            .await
            .status,
        201
    );

    app.admin(Method::GET, "/apps/0123456789abcdef01234567", None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.admin(
        Method::DELETE,
        &format!("/apps/{app_id}/keys/0123456789abcdef01234567"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    let patched = app
        .admin(
            Method::PATCH,
            &format!("/apps/{app_id}"),
            Some(json!({"plan": "enterprise"})),
        )
        .await;
    assert_eq!(patched.data()["plan"], "enterprise");
}

#[tokio::test]
async fn the_app_list_pages_with_a_cursor() {
    let app = spawn_app();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(app.create_app("free").await.0);
    }
    let mut seen = Vec::new();
    let mut path = "/apps?limit=2".to_owned();
    loop {
        let page = app.admin(Method::GET, &path, None).await;
        seen.extend(
            page.data()
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_owned()),
        );
        match page.body["pagination"]["nextCursor"].as_str() {
            Some(c) => path = format!("/apps?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ids);
}

#[tokio::test]
async fn the_bearer_scheme_of_the_admin_token_is_case_insensitive() {
    let app = spawn_app();
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR", "Bearer  "] {
        let auth = format!("{scheme} {ADMIN_TOKEN}");
        let a = app
            .send(
                Method::GET,
                "/admin/v1/apps",
                &[("authorization", &auth)],
                None,
            )
            .await;
        assert_eq!(a.status, 200, "{scheme:?}: {}", a.body);
    }
    for auth in [
        format!("Basic {ADMIN_TOKEN}"),
        format!("Bearer{ADMIN_TOKEN}"),
        ADMIN_TOKEN.to_owned(),
        "bearer ".to_owned(),
    ] {
        app.send(
            Method::GET,
            "/admin/v1/apps",
            &[("authorization", &auth)],
            None,
        )
        .await
        .assert_error(401, "UNAUTHORIZED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_patch_racing_a_revocation_never_brings_the_key_back() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("enterprise").await;
    let mut keys = Vec::new();
    for round in 0..40 {
        let (key_id, key) = app.create_key(&app_id, &["contacts:read"]).await;
        let path = format!("/apps/{app_id}/keys/{key_id}");
        let patch = json!({"permissions": ["contacts:read", "contacts:write"]});
        let (patched, revoked) = tokio::join!(
            app.admin(Method::PATCH, &path, Some(patch)),
            app.admin(Method::DELETE, &path, None),
        );
        assert_eq!(revoked.status, 200, "round {round}: {}", revoked.body);
        // Before the revocation the PATCH lands (200); after it, the key is gone (404).
        assert!(
            [200, 404].contains(&patched.status.as_u16()),
            "round {round}: {}",
            patched.body
        );
        app.api(&key, Method::GET, "/acq/v1/contacts", None)
            .await
            .assert_error(401, "UNAUTHORIZED");
        keys.push((key_id, key));
    }
    let listed = app
        .admin(Method::GET, &format!("/apps/{app_id}/keys?limit=100"), None)
        .await;
    let listed = listed.data().as_array().unwrap().clone();
    assert_eq!(listed.len(), keys.len());
    assert!(
        listed.iter().all(|k| k["revokedAt"].is_string()),
        "{listed:?}"
    );
    let app = app.restart().await;
    for (_, key) in &keys {
        app.api(key, Method::GET, "/acq/v1/contacts", None)
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
}

#[tokio::test]
async fn a_key_cursor_is_opaque_and_bound_to_its_app() {
    let app = spawn_app();
    let (mine, _) = app.create_app("free").await;
    let (other, _) = app.create_app("free").await;
    for _ in 0..2 {
        app.create_key(&mine, &["contacts:read"]).await;
        app.create_key(&other, &["contacts:read"]).await;
    }
    let page = app
        .admin(Method::GET, &format!("/apps/{mine}/keys?limit=1"), None)
        .await;
    let cursor = page.body["pagination"]["nextCursor"].as_str().unwrap();
    let first = page.data()[0]["id"].as_str().unwrap();
    assert_ne!(cursor, first, "a cursor is not a record id");
    let own = app
        .admin(
            Method::GET,
            &format!("/apps/{mine}/keys?cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(own.status, 200, "{}", own.body);
    let foreign = app
        .admin(
            Method::GET,
            &format!("/apps/{other}/keys?cursor={cursor}"),
            None,
        )
        .await;
    foreign.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(foreign.fields(), ["cursor"]);
    // Nor does a key cursor page the app list.
    let apps = app
        .admin(Method::GET, &format!("/apps?cursor={cursor}"), None)
        .await;
    assert_eq!(apps.fields(), ["cursor"]);
}

#[tokio::test]
async fn an_apps_keys_are_listed_alone_page_by_page_with_real_cursors() {
    let app = spawn_app();
    let (mine, _) = app.create_app("free").await;
    let (other, _) = app.create_app("free").await;
    let mut created = Vec::new();
    for i in 0..23 {
        created.push(app.create_key(&mine, &["contacts:read"]).await.0);
        if i % 3 == 0 {
            app.create_key(&other, &["contacts:read"]).await;
        }
    }
    let mut seen = Vec::new();
    let mut path = format!("/apps/{mine}/keys?limit=10");
    let mut pages = 0;
    loop {
        let page = app.admin(Method::GET, &path, None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(page.body["pagination"]["limit"], 10);
        let items = page.data().as_array().unwrap();
        assert!(items.len() <= 10);
        seen.extend(items.iter().map(|k| k["id"].as_str().unwrap().to_owned()));
        pages += 1;
        let more = page.body["pagination"]["hasMore"].as_bool().unwrap();
        match page.body["pagination"]["nextCursor"].as_str() {
            Some(c) => {
                assert!(more);
                path = format!("/apps/{mine}/keys?limit=10&cursor={c}");
            }
            None => {
                assert!(!more);
                break;
            }
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen, created,
        "every key of the app once, oldest first, no other app's"
    );
    let bad = app
        .admin(Method::GET, &format!("/apps/{mine}/keys?cursor=nope"), None)
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["cursor"]);
    let bad = app
        .admin(Method::GET, &format!("/apps/{mine}/keys?limit=0"), None)
        .await;
    assert_eq!(bad.fields(), ["limit"]);
    let all = app
        .admin(Method::GET, &format!("/apps/{other}/keys?limit=100"), None)
        .await;
    assert_eq!(all.data().as_array().unwrap().len(), 8);
}

#[tokio::test]
async fn a_revoked_key_is_gone_for_patch_and_delete_but_still_listed() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("free").await;
    let (key_id, _) = app.create_key(&app_id, &["contacts:read"]).await;
    let path = format!("/apps/{app_id}/keys/{key_id}");
    assert_eq!(app.admin(Method::DELETE, &path, None).await.status, 200);
    app.admin(Method::DELETE, &path, None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.admin(Method::PATCH, &path, Some(json!({"permissions": []})))
        .await
        .assert_error(404, "NOT_FOUND");
    let listed = app
        .admin(Method::GET, &format!("/apps/{app_id}/keys"), None)
        .await;
    assert!(listed.data()[0]["revokedAt"].is_string(), "{}", listed.body);
    assert_eq!(listed.data()[0]["permissions"], json!(["contacts:read"]));
}

#[tokio::test]
async fn app_and_key_names_with_control_characters_are_refused() {
    let app = spawn_app();
    for name in ["Shop\u{0}", "\u{1b}[31mShop", "Sh\u{85}op"] {
        let bad = app
            .admin(Method::POST, "/apps", Some(json!({ "name": name })))
            .await;
        bad.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(bad.fields(), ["name"], "{name:?}");
    }
    let created = app
        .admin(Method::POST, "/apps", Some(json!({"name": " Shop "})))
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.data()["name"], "Shop");
    let id = created.data()["id"].as_str().unwrap().to_owned();
    let renamed = app
        .admin(
            Method::PATCH,
            &format!("/apps/{id}"),
            Some(json!({"name": "Shop\u{0}"})),
        )
        .await;
    renamed.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(renamed.fields(), ["name"]);
    let key = app
        .admin(
            Method::POST,
            &format!("/apps/{id}/keys"),
            Some(json!({"name": "ci\u{1b}", "permissions": ["contacts:read"]})),
        )
        .await;
    key.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(key.fields(), ["name"]);
}
