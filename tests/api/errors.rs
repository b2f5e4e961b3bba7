//! The error envelope and the statuses of interface §7, on every kind of failure.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test]
async fn health_answers_200_with_a_request_id_equal_to_the_header() {
    let app = spawn_app();
    let a = app.send(Method::GET, "/healthz", &[], None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["success"], json!(true));
    let rid = a.body["meta"]["requestId"].as_str().unwrap();
    assert!(rid.starts_with("req_"));
    assert_eq!(a.header("x-request-id"), Some(rid));
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_in_the_envelope() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    app.send(Method::GET, "/nowhere", &[], None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(&key, Method::GET, "/acq/v1/contacts/not-an-id", None)
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn a_known_path_asked_with_another_method_is_405_with_allow() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let trace = Method::from_bytes(b"TRACE").unwrap();
    for (method, path, allow) in [
        (Method::PUT, "/acq/v1/contacts", "GET, HEAD, POST"),
        (
            Method::OPTIONS,
            "/acq/v1/contacts/0123456789abcdef01234567",
            "DELETE, GET, HEAD, PATCH",
        ),
        (trace.clone(), "/healthz", "GET, HEAD"),
        (trace, "/metrics", "GET, HEAD"),
        (Method::DELETE, "/admin/v1/apps", "GET, HEAD, POST"),
    ] {
        let a = app.api(&key, method.clone(), path, None).await;
        a.assert_error(405, "METHOD_NOT_ALLOWED");
        assert_eq!(a.header("allow"), Some(allow), "{method} {path}");
    }
}

#[tokio::test]
async fn a_trailing_slash_is_an_unknown_path_on_every_path_never_a_405() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    for (method, path) in [
        (Method::GET, "/acq/v1/contacts/"),
        (Method::POST, "/acq/v1/contacts/"),
        (Method::GET, "/acq/v1/contacts/0123456789abcdef01234567/"),
        (Method::POST, "/acq/v1/contacts/batch/"),
        (Method::GET, "/api/v1/ideas/"),
        (Method::GET, "/admin/v1/apps/"),
        (Method::GET, "/healthz/"),
    ] {
        let a = app.api(&key, method.clone(), path, None).await;
        a.assert_error(404, "NOT_FOUND");
        assert_eq!(a.header("allow"), None, "{method} {path}");
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(path.trim_end_matches('/')),
            "{method} {path}: {message}"
        );
    }
}

fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(body).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn a_gzip_body_is_decoded_capped_once_inflated_and_other_encodings_refused() {
    let app = spawn_app_with(|s| s.server.max_body_bytes = 64 * 1024);
    let key = app.contacts_key("free").await;
    let send = |encoding: &'static str, body: Vec<u8>| {
        let headers = [
            ("x-api-key", key.as_str()),
            ("content-type", "application/json"),
            ("content-encoding", encoding),
        ];
        let app = &app;
        async move {
            app.raw(Method::POST, "/acq/v1/contacts", &headers, body)
                .await
        }
    };
    let contact = br#"{"email": "gzip.body@example.com", "firstName": "Gzip"}"#;
    let made = send("gzip", gzip(contact)).await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.data()["firstName"], "Gzip");
    // Under the limit compressed, over it once inflated: refused, never parsed.
    let bomb = format!(
        r#"{{"email": "big@example.com", "notes": "{}"}}"#,
        "a".repeat(200 * 1024)
    );
    let a = send("gzip", gzip(bomb.as_bytes())).await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["body"]);
    assert!(a.body["error"]["details"][0]["message"]
        .as_str()
        .unwrap()
        .contains("decompressed"));
    let a = send("gzip", contact.to_vec()).await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["body"], "not gzip");
    for unknown in ["br", "deflate", "zstd"] {
        let a = send(unknown, contact.to_vec()).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), ["Content-Encoding"], "{unknown}");
    }
}

#[tokio::test]
async fn a_malformed_json_body_is_400_in_the_envelope() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let a = app
        .raw(
            Method::POST,
            "/acq/v1/contacts",
            &[("x-api-key", &key), ("content-type", "application/json")],
            b"{\"email\": ".to_vec(),
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["body"]);
}

#[tokio::test]
async fn bad_content_types_bodies_and_query_parameters_are_400_with_the_field() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let mut cases: Vec<(Answer, &str, &str)> = vec![
        (
            app.raw(
                Method::POST,
                "/acq/v1/contacts",
                &[("x-api-key", &key), ("content-type", "text/plain")],
                b"{}".to_vec(),
            )
            .await,
            "Content-Type",
            "a body that is not declared JSON",
        ),
        (
            app.raw(
                Method::POST,
                "/acq/v1/contacts",
                &[("x-api-key", &key), ("content-type", "application/json")],
                b"[1]".to_vec(),
            )
            .await,
            "body",
            "a JSON array instead of an object",
        ),
        (
            app.raw(
                Method::POST,
                "/acq/v1/contacts",
                &[("x-api-key", &key), ("content-type", "application/json")],
                format!(
                    "{{\"email\": \"a@b.co\", \"address\": \"{}\"}}",
                    "x".repeat(1_100_000)
                )
                .into_bytes(),
            )
            .await,
            "body",
            "a body over 1 MiB",
        ),
    ];
    for (query, field, why) in [
        ("limit=0", "limit", "limit below 1"),
        ("limit=101", "limit", "limit above 100"),
        ("limit=ten", "limit", "limit not a number"),
        ("cursor=%%%", "cursor", "cursor not base64"),
        ("cursor=YWJj", "cursor", "cursor of nothing"),
        ("sort=phone", "sort", "sort field not allowed"),
        ("status=vip", "status", "unknown status"),
        ("scoreMin=-1", "scoreMin", "score out of range"),
        ("createdAfter=soon", "createdAfter", "not a date"),
        ("colour=red", "colour", "unknown parameter"),
    ] {
        let path = format!("/acq/v1/contacts?{query}");
        cases.push((app.api(&key, Method::GET, &path, None).await, field, why));
    }
    for (answer, field, why) in cases {
        assert_eq!(answer.status, 400, "{why}: {}", answer.body);
        answer.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(answer.fields(), [field], "{why}");
    }
}

#[tokio::test]
async fn missing_invalid_and_revoked_keys_are_401() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("free").await;
    let (key_id, key) = app.create_key(&app_id, &["contacts:read"]).await;
    app.send(Method::GET, "/acq/v1/contacts", &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.api("tk_nope", Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    let forged = format!("{}0", &key[..key.len() - 1]);
    let forged = if forged == key {
        format!("{}1", &key[..key.len() - 1])
    } else {
        forged
    };
    app.api(&forged, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_eq!(
        app.api(&key, Method::GET, "/acq/v1/contacts", None)
            .await
            .status,
        200
    );
    let revoked = app
        .admin(
            Method::DELETE,
            &format!("/apps/{app_id}/keys/{key_id}"),
            None,
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    app.api(&key, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn a_key_without_the_permission_is_403_forbidden_naming_it() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("free").await;
    let (_, reader) = app.create_key(&app_id, &["contacts:read"]).await;
    let a = app
        .create_contact(&reader, json!({"email": "a@b.co"}))
        .await;
    a.assert_error(403, "FORBIDDEN");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "permission", "message": "contacts:write required"}])
    );
    app.api(
        &reader,
        Method::DELETE,
        "/acq/v1/contacts/0123456789abcdef01234567",
        None,
    )
    .await
    .assert_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn the_plan_limit_is_403_with_the_usage_and_a_bigger_plan_lifts_it() {
    let app = spawn_app_with(|s| s.plans.free.contacts = 3);
    let (app_id, _) = app.create_app("free").await;
    let (_, key) = app
        .create_key(&app_id, &["contacts:write", "contacts:delete"])
        .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let a = app
            .create_contact(&key, json!({"email": format!("u{i}@example.com")}))
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        ids.push(a.data()["id"].as_str().unwrap().to_owned());
    }
    let over = app
        .create_contact(&key, json!({"email": "u3@example.com"}))
        .await;
    over.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        over.body["error"]["details"],
        json!([{"field": "contacts", "message": "limit 3, current 3"}])
    );
    // A delete frees a seat.
    assert_eq!(
        app.api(
            &key,
            Method::DELETE,
            &format!("/acq/v1/contacts/{}", ids[0]),
            None
        )
        .await
        .status,
        200
    );
    assert_eq!(
        app.create_contact(&key, json!({"email": "u3@example.com"}))
            .await
            .status,
        201
    );
    app.create_contact(&key, json!({"email": "u4@example.com"}))
        .await
        .assert_error(403, "PLAN_LIMIT_REACHED");
    let up = app
        .admin(
            Method::PATCH,
            &format!("/apps/{app_id}"),
            Some(json!({"plan": "pro"})),
        )
        .await;
    assert_eq!(up.status, 200, "{}", up.body);
    assert_eq!(
        app.create_contact(&key, json!({"email": "u4@example.com"}))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn over_the_rate_limit_is_429_with_retry_after_and_every_answer_has_the_headers() {
    let app = spawn_app_with(|s| s.plans.free.requests_per_minute = 5);
    let key = app.contacts_key("free").await;
    for expected_remaining in (0..5).rev() {
        let a = app.api(&key, Method::GET, "/acq/v1/contacts", None).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            a.header("x-ratelimit-remaining"),
            Some(expected_remaining.to_string().as_str())
        );
        let reset: u64 = a.header("x-ratelimit-reset").unwrap().parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(reset >= now && reset <= now + 61, "reset {reset} now {now}");
    }
    let limited = app.api(&key, Method::GET, "/acq/v1/contacts", None).await;
    limited.assert_error(429, "RATE_LIMITED");
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=12).contains(&retry), "retry-after {retry}");
    assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
    // Errors of a keyed request carry the headers too, and another key has its own bucket.
    let other = app.contacts_key("free").await;
    let a = app
        .api(
            &other,
            Method::GET,
            "/acq/v1/contacts/0123456789abcdef01234567",
            None,
        )
        .await;
    a.assert_error(404, "NOT_FOUND");
    assert_eq!(a.header("x-ratelimit-remaining"), Some("4"));
}

#[tokio::test]
async fn the_openapi_document_lists_every_route() {
    let app = spawn_app();
    let a = app.send(Method::GET, "/openapi.json", &[], None).await;
    assert_eq!(a.status, 200);
    assert!(a.body["openapi"].as_str().unwrap().starts_with("3."));
    let paths = a.body["paths"].as_object().unwrap();
    for (path, method) in [
        ("/healthz", "get"),
        ("/acq/v1/contacts", "get"),
        ("/acq/v1/contacts", "post"),
        ("/acq/v1/contacts/batch", "post"),
        ("/acq/v1/contacts/{id}", "get"),
        ("/acq/v1/contacts/{id}", "patch"),
        ("/acq/v1/contacts/{id}", "delete"),
        ("/metrics", "get"),
        ("/api/w/analytics/collect", "post"),
        ("/api/v1/profiles/{userId}", "get"),
        ("/admin/v1/apps", "post"),
        ("/admin/v1/apps", "get"),
        ("/admin/v1/apps/{appId}", "get"),
        ("/admin/v1/apps/{appId}", "patch"),
        ("/admin/v1/apps/{appId}/integration-key", "post"),
        ("/admin/v1/apps/{appId}/keys", "post"),
        ("/admin/v1/apps/{appId}/keys", "get"),
        ("/admin/v1/apps/{appId}/keys/{keyId}", "patch"),
        ("/admin/v1/apps/{appId}/keys/{keyId}", "delete"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing from openapi.json"
        );
    }
    // An answer without a body (a 304) has no `content`, not `"content": null`.
    for (path, ops) in paths {
        for (method, op) in ops.as_object().unwrap() {
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                assert!(
                    r.get("content").is_none_or(Value::is_object),
                    "{method} {path} {status}: content {}",
                    r["content"]
                );
            }
        }
    }
}

#[tokio::test]
async fn head_is_answered_wherever_get_is_without_a_body() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let head = |path: &'static str, headers: Vec<(&'static str, String)>| {
        let app = &app;
        async move {
            let mut req = app.client.head(format!("{}{path}", app.base));
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let res = req.send().await.expect("HEAD sent");
            let status = res.status().as_u16();
            let id = res.headers().get("x-request-id").is_some();
            let len = res.headers().get("content-length").cloned();
            (status, id, len, res.bytes().await.unwrap().len())
        }
    };
    for (path, headers, status) in [
        ("/healthz", vec![], 200),
        ("/openapi.json", vec![], 200),
        ("/metrics", vec![], 200),
        ("/acq/v1/contacts", vec![("x-api-key", key.clone())], 200),
        ("/acq/v1/contacts", vec![], 401),
        (
            "/admin/v1/apps",
            vec![("authorization", format!("Bearer {ADMIN_TOKEN}"))],
            200,
        ),
        ("/no/such/route", vec![], 404),
    ] {
        let (got, has_id, len, body) = head(path, headers).await;
        assert_eq!(got, status, "HEAD {path}");
        assert!(has_id, "HEAD {path} has X-Request-Id");
        assert_eq!(body, 0, "HEAD {path} has no body");
        if path == "/healthz" {
            let get = app.send(Method::GET, "/healthz", &[], None).await;
            let get_len = get.header("content-length").unwrap().to_owned();
            assert_eq!(
                len.unwrap().to_str().unwrap(),
                get_len,
                "same length as GET"
            );
        }
    }
}

/// The status line and whether an `x-request-id` header came back, for a raw request.
async fn raw_head(app: &TestApp, request: &[u8]) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the server closes the connection")
        .unwrap();
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    let status = text.lines().next().unwrap_or("").to_owned();
    (status, text.contains("x-request-id:"))
}

#[tokio::test]
async fn answers_actix_http_makes_below_the_middleware_are_bare_as_documented() {
    let app = spawn_app();
    let many: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    for (request, status) in [
        (
            "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".to_owned(),
            "http/1.1 400 bad request",
        ),
        ("GARBAGE\r\n\r\n".to_owned(), "http/1.1 400 bad request"),
        (
            format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{many}\r\n"),
            "http/1.1 431 request header fields too large",
        ),
    ] {
        let (got, has_id) = raw_head(&app, request.as_bytes()).await;
        assert_eq!(got, status, "{request:?}");
        assert!(
            !has_id,
            "{request:?}: README says these carry no X-Request-Id"
        );
    }
    let (ok, has_id) = raw_head(
        &app,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!((ok.as_str(), has_id), ("http/1.1 200 ok", true));
}
