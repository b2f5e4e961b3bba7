//! The dashboard over HTTP as a browser without script would use it: cookies, forms, CSRF
//! tokens, redirects. (The Chromium flows are in tests/browser/dashboard.test.mjs.)

use serde_json::json;

use crate::helpers::*;

pub use crate::form_client::*;

#[tokio::test]
async fn the_first_owner_is_set_up_with_the_admin_token_once() {
    let app = spawn_app();
    let mut b = Browser::new(&app);
    let home = b.get("/dashboard").await;
    assert_eq!(
        (home.status.as_u16(), home.location()),
        (303, "/dashboard/setup")
    );
    let wrong = b
        .submit(
            "/dashboard/setup",
            "/dashboard/setup",
            &[
                ("token", "nope"),
                ("name", ""),
                ("email", "x"),
                ("password", "short"),
            ],
        )
        .await;
    assert_eq!(wrong.status, 400);
    for field in ["token", "name", "email", "password"] {
        assert!(
            wrong.body.contains(&format!("id=\"f-{field}-error\"")),
            "{field} has its error next to it"
        );
    }
    let mut b = owner(&app).await;
    let apps = b.get("/dashboard/apps").await;
    assert_eq!(apps.status, 200);
    assert!(apps.body.contains("Olive Owner") && apps.body.contains("New app"));
    let again = b.get("/dashboard/setup").await;
    assert_eq!(
        (again.status.as_u16(), again.location()),
        (303, "/dashboard/sign-in")
    );
}

#[tokio::test]
async fn a_form_posted_without_its_csrf_token_is_refused_with_403() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let refused = b
        .post("/dashboard/apps", &[("name", "Shop"), ("plan", "free")])
        .await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("security token"), "{}", refused.body);
    assert!(refused
        .headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/html")));
    let forged = b
        .post(
            "/dashboard/apps",
            &[("name", "Shop"), ("plan", "free"), ("csrf", "0000")],
        )
        .await;
    assert_eq!(forged.status, 403);
    let mut anonymous = Browser::new(&app);
    let no_cookie = anonymous
        .post(
            "/dashboard/sign-in",
            &[
                ("email", OWNER_EMAIL),
                ("password", PASSWORD),
                ("csrf", "x"),
            ],
        )
        .await;
    assert_eq!(no_cookie.status, 403, "the sign-in form has its token too");
    let listed = app.admin(reqwest::Method::GET, "/apps", None).await;
    assert_eq!(
        listed.data().as_array().unwrap().len(),
        0,
        "nothing was created"
    );
}

#[tokio::test]
async fn a_member_cannot_see_keys_or_the_team() {
    let app = spawn_app();
    let mut owner = owner(&app).await;
    let created = owner
        .submit(
            "/dashboard/team",
            "/dashboard/team",
            &[
                ("name", "Mel Member"),
                ("email", "mel@example.com"),
                ("password", PASSWORD),
                ("role", "member"),
            ],
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let (app_id, _) = app.create_app("free").await;
    let mut member = Browser::new(&app);
    assert_eq!(
        member.sign_in("mel@example.com", PASSWORD).await.status,
        303
    );
    let apps = member.get("/dashboard/apps").await;
    assert_eq!(apps.status, 200);
    assert!(
        !apps.body.contains("/dashboard/keys"),
        "no Keys in the member's nav"
    );
    for path in [
        format!("/dashboard/apps/{app_id}/keys"),
        "/dashboard/keys".into(),
        "/dashboard/team".into(),
    ] {
        assert_eq!(member.get(&path).await.status, 403, "{path}");
    }
    let csrf = apps.csrf();
    let made = member
        .post(
            &format!("/dashboard/apps/{app_id}/keys"),
            &[("name", "k"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(made.status, 403);
    for section in ["traffic", "surveys", "ideas"] {
        assert!(apps
            .body
            .contains(&format!("href=\"/dashboard/{section}\"")));
        let page = member
            .get(&format!("/dashboard/apps/{app_id}/{section}"))
            .await;
        assert_eq!(page.status, 200, "a member reads {section}");
    }
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_email_and_address() {
    let app = spawn_app();
    owner(&app).await;
    let mut b = Browser::new(&app);
    for _ in 0..5 {
        assert_eq!(b.sign_in(OWNER_EMAIL, "wrong password!").await.status, 401);
    }
    let limited = b.sign_in(OWNER_EMAIL, PASSWORD).await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.headers.get("retry-after").is_some());
    assert!(
        limited.body.contains("too many sign-in attempts"),
        "shown on the form"
    );
    // Another e-mail from the same address has its own budget.
    assert_eq!(b.sign_in("else@example.com", PASSWORD).await.status, 401);
}

#[tokio::test]
async fn signing_out_ends_the_session_and_a_new_sign_in_starts_one() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let csrf = b.get("/dashboard/apps").await.csrf();
    let stolen = b.cookies.clone();
    let out = b.post("/dashboard/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(
        (out.status.as_u16(), out.location()),
        (303, "/dashboard/sign-in")
    );
    assert_eq!(b.get("/dashboard/apps").await.status, 303);
    let mut replay = Browser::new(&app);
    replay.cookies = stolen;
    let after = replay.get("/dashboard/apps").await;
    assert_eq!(
        (after.status.as_u16(), after.location()),
        (303, "/dashboard/sign-in")
    );
    let wrong = b.sign_in(OWNER_EMAIL, "not the password").await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("wrong e-mail or password"));
    assert_eq!(b.sign_in(OWNER_EMAIL, PASSWORD).await.status, 303);
    assert_eq!(b.get("/dashboard/apps").await.status, 200);
}

#[tokio::test]
async fn a_key_created_on_the_dashboard_works_on_the_api_until_revoked() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let made = b
        .submit(
            "/dashboard/apps",
            "/dashboard/apps",
            &[("name", "Shop"), ("plan", "pro")],
        )
        .await;
    assert_eq!(made.status, 200);
    assert!(made.body.contains("ik_") && made.body.contains("/sdk/v1/analytics.js"));
    let apps = app.admin(reqwest::Method::GET, "/apps", None).await;
    let app_id = apps.data()[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(apps.data()[0]["plan"], json!("pro"));
    let keys_page = format!("/dashboard/apps/{app_id}/keys");
    let created = b
        .submit(
            &keys_page,
            &keys_page,
            &[
                ("name", "CRM sync"),
                ("permissions", "contacts:read"),
                ("permissions", "contacts:write"),
            ],
        )
        .await;
    assert_eq!(created.status, 200);
    let at = created.body.find("value=\"tk_").expect("the key is shown") + 7;
    let key = created.body[at..].split('"').next().unwrap().to_owned();
    let listed = app
        .send(
            reqwest::Method::GET,
            "/acq/v1/contacts",
            &[("x-api-key", &key)],
            None,
        )
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let page = b.get(&keys_page).await;
    assert!(
        page.body.contains("CRM sync") && !page.body.contains(&key),
        "shown once"
    );
    assert!(!page.body.contains("Last used never"), "last use is shown");
    let key_id = key.split('_').nth(1).unwrap();
    let csrf = page.csrf();
    let revoked = b
        .post(&format!("{keys_page}/{key_id}/revoke"), &[("csrf", &csrf)])
        .await;
    assert_eq!(revoked.status, 303);
    let refused = app
        .send(
            reqwest::Method::GET,
            "/acq/v1/contacts",
            &[("x-api-key", &key)],
            None,
        )
        .await;
    refused.assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn the_admin_api_still_accepts_the_admin_token_once_accounts_exist() {
    let app = spawn_app();
    owner(&app).await;
    let made = app
        .admin(
            reqwest::Method::POST,
            "/apps",
            Some(json!({"name": "A", "plan": "free"})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let mut b = Browser::new(&app);
    let no_session = b.get("/dashboard/apps").await;
    assert_eq!(
        (no_session.status.as_u16(), no_session.location()),
        (303, "/dashboard/sign-in")
    );
}

#[tokio::test]
async fn dashboard_pages_are_html_outside_the_openapi_document() {
    let app = spawn_app();
    let doc = app
        .send(reqwest::Method::GET, "/openapi.json", &[], None)
        .await;
    let paths = doc.body["paths"].as_object().unwrap();
    assert!(paths.keys().all(|p| !p.starts_with("/dashboard")));
    let mut b = owner(&app).await;
    let missing = b.get("/dashboard/nowhere").await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.starts_with("<!DOCTYPE html>"));
    let css = b.get("/dashboard/assets/app.css").await;
    assert_eq!(css.status, 200);
    assert!(css.body.contains("prefers-color-scheme: dark"));
}

/// A CSV of `n` contacts where the rows at `bad` are wrong (a bad e-mail, a score out of
/// range, a status that does not exist).
pub fn contacts_csv(n: usize, bad: &[usize]) -> String {
    let mut csv = String::from("Email,First Name,Last Name,Company,Status,Tags,Score\r\n");
    for i in 0..n {
        let (email, status, score) = match bad.iter().position(|b| *b == i) {
            Some(0) => (format!("not-an-email-{i}"), "new", "10"),
            Some(1) => (format!("person{i}@example.com"), "new", "500"),
            Some(_) => (format!("person{i}@example.com"), "sleeping", "10"),
            None => (
                format!("person{i}@example.com"),
                if i % 3 == 0 { "customer" } else { "new" },
                "42",
            ),
        };
        csv.push_str(&format!(
            "{email},Ada{i},\"Love, {i}\",Acme {},{status},\"vip,q{}\",{score}\r\n",
            i % 7,
            i % 4
        ));
    }
    csv
}

#[tokio::test]
async fn a_csv_of_1000_contacts_is_imported_and_its_3_bad_rows_reported() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let import = format!("/dashboard/apps/{app_id}/contacts/import");
    let csv = contacts_csv(1000, &[10, 500, 999]);
    let preview = b.submit(&import, &import, &[("csv", &csv)]).await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    assert!(
        preview.body.contains("1\u{202f}000 rows"),
        "{}",
        preview.body
    );
    let csrf = preview.csrf();
    let map = [
        "email",
        "firstName",
        "lastName",
        "company",
        "status",
        "tags",
        "score",
    ];
    let mut fields: Vec<(&str, &str)> = vec![("csrf", &csrf), ("step", "run"), ("csv", &csv)];
    fields.extend(map.iter().map(|m| ("map", *m)));
    let done = b.post(&import, &fields).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(
        done.body.contains("997 created · 0 updated · 3 failed"),
        "{}",
        done.body
    );
    for (line, why) in [(12, "email"), (502, "score"), (1001, "status")] {
        assert!(
            done.body
                .contains(&format!("<td class=\"num\">{line}</td>")),
            "line {line} ({why}) is reported"
        );
    }
    // Again: upsert by e-mail updates the same contacts.
    let again = b.post(&import, &fields).await;
    assert!(
        again.body.contains("0 created · 997 updated · 3 failed"),
        "{}",
        again.body
    );
    let (_, key) = app.create_key(&app_id, &["contacts:read"]).await;
    let page = app
        .send(
            reqwest::Method::GET,
            "/acq/v1/contacts?email=person7@example.com",
            &[("x-api-key", &key)],
            None,
        )
        .await;
    let c = &page.data()[0];
    assert_eq!(
        (c["lastName"].as_str(), c["source"].as_str()),
        (Some("Love, 7"), Some("import"))
    );
    assert_eq!(c["tags"], json!(["vip", "q3"]));
}

#[tokio::test]
async fn an_import_takes_10_000_rows_and_says_so_when_given_one_more() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let import = format!("/dashboard/apps/{app_id}/contacts/import");
    let full = contacts_csv(10_000, &[]);
    let preview = b.submit(&import, &import, &[("csv", &full)]).await;
    assert_eq!(preview.status, 200);
    assert!(preview.body.contains("10\u{202f}000 rows"));
    let over = contacts_csv(10_001, &[]);
    let refused = b.submit(&import, &import, &[("csv", &over)]).await;
    assert_eq!(refused.status, 400);
    assert!(
        refused
            .body
            .contains("more than 10000 rows after the heading line"),
        "the limit the hint names, not 10001"
    );
}

#[tokio::test]
async fn the_contacts_table_filters_sorts_pages_and_exports_the_filter() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let import = format!("/dashboard/apps/{app_id}/contacts/import");
    let csv = contacts_csv(120, &[]);
    let preview = b.submit(&import, &import, &[("csv", &csv)]).await;
    let csrf = preview.csrf();
    let mut fields: Vec<(&str, &str)> = vec![("csrf", &csrf), ("step", "run"), ("csv", &csv)];
    fields.extend(
        [
            "email",
            "firstName",
            "lastName",
            "company",
            "status",
            "tags",
            "score",
        ]
        .map(|m| ("map", m)),
    );
    assert!(b.post(&import, &fields).await.body.contains("120 created"));
    let list = format!("/dashboard/apps/{app_id}/contacts");
    let first = b.get(&list).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body.matches("<tr><td><a href").count(), 50);
    assert!(first.body.contains("120 contacts in"));
    let at = first
        .body
        .find("rel=\"next\" href=\"")
        .expect("a next page")
        + 17;
    let next = first.body[at..]
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    let second = b.get(&next).await;
    assert_eq!(second.body.matches("<tr><td><a href").count(), 50);
    let customers = b
        .get(&format!("{list}?q=&status=customer&source=&sort=email"))
        .await;
    assert_eq!(
        customers.body.matches("<tr><td><a href").count(),
        40,
        "every third is a customer"
    );
    let bad = b.get(&format!("{list}?scoreMin=abc")).await;
    assert_eq!(bad.status, 200);
    assert!(
        bad.body.contains("f-scoreMin-error"),
        "the error sits next to its field"
    );
    let export = b
        .get(&format!(
            "/dashboard/apps/{app_id}/contacts.csv?status=customer&q=ada3"
        ))
        .await;
    assert_eq!(export.status, 200);
    assert!(export.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let lines: Vec<&str> = export.body.lines().collect();
    assert!(lines[0].starts_with("id,email,firstName"));
    assert!(
        lines.len() > 2 && lines[1..].iter().all(|l| l.contains(",customer,")),
        "{lines:?}"
    );
}

#[tokio::test]
async fn a_contact_is_edited_with_errors_next_to_their_fields() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let (app_id, _) = app.create_app("pro").await;
    let (_, key) = app.create_key(&app_id, &["contacts:write"]).await;
    let made = app
        .send(
            reqwest::Method::POST,
            "/acq/v1/contacts",
            &[("x-api-key", &key)],
            Some(json!({"email": "e@x.io"})),
        )
        .await;
    let id = made.data()["id"].as_str().unwrap().to_owned();
    let page = format!("/dashboard/apps/{app_id}/contacts/{id}");
    let fields = |score: &'static str| {
        vec![
            ("email", "e@x.io"),
            ("firstName", "Eve"),
            ("status", "qualified"),
            ("source", "api"),
            ("tags", "a, b"),
            ("score", score),
        ]
    };
    let bad = b.submit(&page, &page, &fields("101")).await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("id=\"f-score-error\""), "{}", bad.body);
    let good = b.submit(&page, &page, &fields("77")).await;
    assert_eq!(good.status, 303, "{}", good.body);
    let shown = b.get(&page).await;
    assert!(shown.body.contains("Eve") && shown.body.contains("qualified"));
    let other = app.create_app("free").await.0;
    assert_eq!(
        b.get(&format!("/dashboard/apps/{other}/contacts/{id}"))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn accounts_and_live_sessions_survive_a_restart() {
    let app = spawn_app();
    let cookies = owner(&app).await.cookies;
    let app = app.restart().await;
    let mut b = Browser::new(&app);
    b.cookies = cookies;
    assert_eq!(
        b.get("/dashboard/apps").await.status,
        200,
        "still signed in"
    );
    let setup = b.get("/dashboard/setup").await;
    assert_eq!(setup.location(), "/dashboard/sign-in", "setup stays spent");
}

#[tokio::test]
async fn a_keys_last_use_outlives_a_restart() {
    let app = spawn_app();
    let cookies = owner(&app).await.cookies;
    let (app_id, _) = app.create_app("free").await;
    let (_, key) = app.create_key(&app_id, &["contacts:read"]).await;
    let used = app
        .send(
            reqwest::Method::GET,
            "/acq/v1/contacts",
            &[("x-api-key", &key)],
            None,
        )
        .await;
    assert_eq!(used.status, 200);
    let app = app.restart().await;
    let mut b = Browser::new(&app);
    b.cookies = cookies;
    let page = b.get(&format!("/dashboard/apps/{app_id}/keys")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Last used 20"), "{}", page.body);
}

/// Events of two visitors (one identified) on the app of `ik`: 3 pages, 2 track, 1 identify.
async fn send_known_traffic(app: &TestApp, ik: &str) {
    const V1: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e01";
    const V2: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e02";
    let page = |id: &str, anon: &str, path: &str| {
        json!({"type": "page", "anonymousId": anon, "messageId": id,
               "context": {"page": {"url": format!("https://shop.example{path}"), "path": path}}})
    };
    let events = vec![
        page("msg_dash_1", V1, "/pricing"),
        page("msg_dash_2", V2, "/pricing"),
        page("msg_dash_3", V2, "/docs"),
        json!({"type": "track", "event": "Signed Up", "anonymousId": V1, "messageId": "msg_dash_4"}),
        json!({"type": "track", "event": "Signed Up", "anonymousId": V2, "messageId": "msg_dash_5"}),
        json!({"type": "identify", "userId": "u1", "anonymousId": V1, "messageId": "msg_dash_6"}),
    ];
    let r = app.collect(ik, crate::collector::batch(events)).await;
    assert_eq!(r.counts(), (6, 0, 0), "{}", r.body);
}

#[tokio::test]
async fn the_traffic_page_charts_what_the_collector_received() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    send_known_traffic(&app, &ik).await;
    // A clean stop flushes every shard, and its rollups with the files.
    let app = app.restart().await;
    let mut b = owner(&app).await;
    let first = b.get("/dashboard/traffic").await;
    assert_eq!(first.status, 303);
    let url = format!("/dashboard/apps/{app_id}/traffic");
    assert_eq!(first.location(), url);
    let page = b.get(&url).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(body.contains(r#"href="/dashboard/traffic" aria-current="page""#));
    for summary in [
        "Events per hour, last 48 hours: 3 page, 2 track, 1 identify, 0 group",
        "Events per day, last 30 days: 3 page, 2 track, 1 identify, 0 group",
        "Unique visitors per day over the last 30 days: at most 2 a day, 2 in all",
    ] {
        assert!(body.contains(summary), "the chart summary {summary:?}");
    }
    assert_eq!(body.matches(r#"role="img""#).count(), 3, "three charts");
    assert_eq!(
        body.matches("<circle").count(),
        4 * (48 + 30),
        "a point per interval and type"
    );
    assert!(body.contains("<title>page · "), "points have tooltips");
    let share = &body[body.find(r#"id="identified-share""#).unwrap()..];
    assert!(share.starts_with(r#"id="identified-share"><strong>50%</strong>"#));
    let pages = &body[body.find(r#"id="top-pages""#).unwrap()..];
    assert!(pages.contains(r#"<td class="name">/pricing</td><td class="num">2</td>"#));
    assert!(pages.contains(r#"<td class="name">/docs</td><td class="num">1</td>"#));
    let events = &body[body.find(r#"id="top-events""#).unwrap()..];
    assert!(events.contains(r#"<td class="name">Signed Up</td><td class="num">2</td>"#));
    let missing = b.get("/dashboard/apps/app_nope/traffic").await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn the_traffic_page_shows_events_within_5_s_of_their_200_before_any_file_is_written() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let mut b = owner(&app).await;
    let url = format!("/dashboard/apps/{app_id}/traffic");
    send_known_traffic(&app, &ik).await;
    let answered = std::time::Instant::now();
    let summary = "Events per hour, last 48 hours: 3 page, 2 track, 1 identify, 0 group";
    loop {
        let page = b.get(&url).await;
        assert_eq!(page.status, 200, "{}", page.body);
        if page.body.contains(summary) {
            assert!(page
                .body
                .contains("Events per day, last 30 days: 3 page, 2 track, 1 identify, 0 group"));
            break;
        }
        assert!(
            answered.elapsed() < std::time::Duration::from_secs(5),
            "not shown within 5 s of the 200"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        crate::lake::read_local(&app.data_dir.join("lake"))
            .rows
            .is_empty(),
        "shown before any file is written"
    );
}

#[tokio::test]
async fn a_survey_moves_by_its_legal_buttons_and_shows_its_score_responses_and_csv() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let body = json!({"title": "How are we doing", "type": "nps", "questions": [
        {"id": "score", "text": "How likely are you to recommend us?", "type": "scale"},
        {"id": "why", "text": "Why?", "type": "text", "required": false}]});
    let id = create_survey(&app, &app_id, body).await;
    let mut b = owner(&app).await;
    let list = b
        .get(&format!("/dashboard/apps/{app_id}/surveys?status=draft"))
        .await;
    assert_eq!(list.status, 200);
    assert!(list.body.contains("How are we doing"));
    let active = b
        .get(&format!("/dashboard/apps/{app_id}/surveys?status=active"))
        .await;
    assert!(active.body.contains("No surveys here yet."));

    let url = format!("/dashboard/apps/{app_id}/surveys/{id}");
    let move_to = format!("{url}/transition");
    let draft = b.get(&url).await;
    assert_eq!(draft.status, 200);
    let buttons = |p: &Page| -> Vec<String> {
        p.body
            .match_indices(r#"name="status" value=""#)
            .map(|(at, m)| p.body[at + m.len()..].split('"').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(buttons(&draft), ["active"], "a draft can only be activated");
    let refused = b.post(&move_to, &[("status", "active")]).await;
    assert_eq!(refused.status, 403, "no CSRF token");
    let moved = b
        .post(&move_to, &[("status", "active"), ("csrf", &draft.csrf())])
        .await;
    assert_eq!(moved.status, 303, "{}", moved.body);
    assert_eq!(moved.location(), url);
    let live = b.get(&url).await;
    assert_eq!(buttons(&live), ["paused", "closed"]);
    let illegal = b
        .post(&move_to, &[("status", "draft"), ("csrf", &live.csrf())])
        .await;
    assert_eq!(illegal.status, 409);
    assert!(illegal.body.contains("allowed: paused, closed"));

    for (n, score) in [(1, 10), (2, 9), (3, 3), (4, 8)] {
        let visitor = format!("6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e0{n}");
        let r = app
            .send(
                reqwest::Method::POST,
                &format!("/api/w/surveys/{id}/responses"),
                &[("x-app-key", &ik)],
                Some(json!({"anonymousId": visitor, "answers": [
                    {"questionId": "score", "value": score}, {"questionId": "why", "value": format!("reason {n}")}]})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let results = b.get(&url).await;
    let score = &results.body[results.body.find(r#"id="survey-score""#).unwrap()..];
    assert!(
        score.starts_with(r#"id="survey-score"><strong>25.0</strong>"#),
        "NPS 50% - 25%"
    );
    assert!(results
        .body
        .contains("How likely are you to recommend us?: 0 0, 1 0, 2 0, 3 1"));
    assert!(results.body.contains("reason 3"));
    let csv = b.get(&format!("{url}/responses.csv")).await;
    assert_eq!(csv.status, 200);
    assert!(csv.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    assert_eq!(
        csv.body.lines().count(),
        5,
        "a header and 4 rows: {}",
        csv.body
    );
    assert!(csv.body.starts_with("responseId,createdAt"));
    let elsewhere = b
        .get(&format!(
            "/dashboard/apps/{app_id}/surveys/{}",
            "0".repeat(24)
        ))
        .await;
    assert_eq!(elsewhere.status, 404);
    let signed_out = Browser::new(&app)
        .get(&format!("{url}/responses.csv"))
        .await;
    assert_eq!(signed_out.status, 303, "the CSV needs a session");
}

#[tokio::test]
async fn the_dashboards_survey_export_is_the_apis_with_formulas_defused() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let body = json!({"title": "NPS", "type": "nps", "questions": [
        {"id": "score", "text": "How likely?", "type": "scale"},
        {"id": "why", "text": "@Why?", "type": "text", "required": false}]});
    let id = create_survey(&app, &app_id, body).await;
    let api = format!("/apps/{app_id}/surveys/{id}");
    let active = json!({"status": "active"});
    let moved = app
        .admin(
            reqwest::Method::POST,
            &format!("{api}/transition"),
            Some(active),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let answers = json!([{"questionId": "score", "value": 9},
        {"questionId": "why", "value": "=HYPERLINK(\"http://evil\",\"x\")"}]);
    let posted = json!({"anonymousId": anon("evil"), "userId": "=1+2", "answers": answers});
    let r = app
        .send(
            reqwest::Method::POST,
            &format!("/api/w/surveys/{id}/responses"),
            &[("x-app-key", &ik)],
            Some(posted),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let mut b = owner(&app).await;
    let page = b
        .get(&format!(
            "/dashboard/apps/{app_id}/surveys/{id}/responses.csv"
        ))
        .await;
    assert_eq!(page.status, 200);
    let (_, key) = app.create_key(&app_id, &["responses:read"]).await;
    let from_api = app
        .client
        .get(format!("{}/api/v1/surveys/{id}/responses.csv", app.base))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(page.body, from_api, "one writer for both exports");
    let lines: Vec<&str> = page.body.lines().collect();
    assert!(lines[0].ends_with(",How likely?,'@Why?"), "{}", lines[0]);
    assert!(
        lines[1].contains(",'=1+2,")
            && lines[1].ends_with(",9,\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\""),
        "{}",
        lines[1]
    );
}

#[tokio::test]
async fn ideas_sit_in_their_status_columns_and_move_by_a_posted_select() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let key = app
        .create_key(&app_id, &["ideas:read", "ideas:write", "votes:write"])
        .await
        .1;
    let author = json!({"id": "user_1", "name": "User 1", "email": "user1@example.com"});
    let mut ids = Vec::new();
    for title in ["Dark mode", "CSV export"] {
        let a = app
            .api(
                &key,
                reqwest::Method::POST,
                "/api/v1/ideas",
                Some(json!({"title": title, "author": author})),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        ids.push(a.data()["id"].as_str().unwrap().to_owned());
    }
    for n in 0..3 {
        let voter =
            json!({"id": format!("user_v{n}"), "name": "V", "email": format!("v{n}@example.com")});
        let path = format!("/api/v1/ideas/{}/votes", ids[1]);
        let v = app
            .api(
                &key,
                reqwest::Method::POST,
                &path,
                Some(json!({"voter": voter})),
            )
            .await;
        assert!(v.status.is_success(), "{}", v.body);
    }
    let mut b = owner(&app).await;
    let first = b.get("/dashboard/ideas").await;
    assert_eq!(first.location(), format!("/dashboard/apps/{app_id}/ideas"));
    let page = b.get(first.location()).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let column = |body: &str, name: &str| -> String {
        let at = body
            .find(&format!("{name}<span class=\"count\">"))
            .expect("the column");
        body[at..].split("</section>").next().unwrap().to_owned()
    };
    let open = column(&page.body, "Open");
    assert!(open.contains(r#"<span class="count">2</span>"#));
    assert!(
        open.find("CSV export").unwrap() < open.find("Dark mode").unwrap(),
        "most voted first"
    );
    assert!(open.contains("<strong>3</strong>"), "its votes");
    for name in ["Under review", "Planned", "In progress"] {
        assert!(column(&page.body, name).contains("No ideas"), "{name}");
    }
    let at = page.body.find(">Planned</option>").unwrap();
    let planned = page.body[..at]
        .rsplit("value=\"")
        .next()
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let action = format!("/dashboard/apps/{app_id}/ideas/{}/status", ids[0]);
    let refused = b.post(&action, &[("status", planned)]).await;
    assert_eq!(refused.status, 403, "no CSRF token");
    let moved = b
        .post(&action, &[("status", planned), ("csrf", &page.csrf())])
        .await;
    assert_eq!(moved.status, 303, "{}", moved.body);
    let after = b.get(moved.location()).await;
    assert!(column(&after.body, "Planned").contains("Dark mode"));
    assert!(!column(&after.body, "Open").contains("Dark mode"));
    let api = app
        .api(
            &key,
            reqwest::Method::GET,
            &format!("/api/v1/ideas/{}", ids[0]),
            None,
        )
        .await;
    assert_eq!(api.data()["status"]["name"], "Planned");
    let bad = b
        .post(&action, &[("status", "nope"), ("csrf", &page.csrf())])
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn a_survey_is_built_from_the_form_with_errors_next_to_their_lines() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let mut b = owner(&app).await;
    let form = format!("/dashboard/apps/{app_id}/surveys/new");
    let action = format!("/dashboard/apps/{app_id}/surveys");
    let bad = b
        .submit(
            &form,
            &action,
            &[
                ("type", "nps"),
                ("title", ""),
                ("percentage", "150"),
                ("questions", "text: Why?\nnot a question"),
            ],
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body
            .contains("line 2: write the type, a colon, then the question"),
        "{}",
        bad.body
    );
    let bad = b
        .submit(
            &form,
            &action,
            &[
                ("type", "nps"),
                ("title", ""),
                ("percentage", "150"),
                ("questions", "text: Why?"),
            ],
        )
        .await;
    assert_eq!(bad.status, 400);
    for field in ["title", "percentage"] {
        let at = bad.body.find(&format!("id=\"f-{field}\"")).unwrap();
        let next = &bad.body[at..bad.body[at..].find("</div>").unwrap() + at];
        assert!(next.contains("class=\"field-error\""), "{field}: {next}");
    }
    assert!(bad.body.contains("must not be empty"));
    let bad = b
        .submit(
            &form,
            &action,
            &[
                ("type", "nps"),
                ("title", "T"),
                ("percentage", "50"),
                ("questions", "text: Why?"),
            ],
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body
            .contains("a nps survey holds one scale question from 0 to 10"),
        "{}",
        bad.body
    );
    let made = b
        .submit(
            &form,
            &action,
            &[
                ("type", "poll"),
                ("title", "Next feature"),
                ("percentage", "40"),
                (
                    "questions",
                    "multiple_choice: What should we build? [Dark mode; Integrations]",
                ),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let page = b.get(made.location()).await;
    assert!(page.body.contains("Next feature") && page.body.contains("40% of visitors"));
    let listed = app
        .admin(
            reqwest::Method::GET,
            &format!("/apps/{app_id}/surveys"),
            None,
        )
        .await;
    let s = &listed.data()[0];
    assert_eq!(
        (s["type"].as_str(), s["status"].as_str()),
        (Some("poll"), Some("draft"))
    );
    assert_eq!(
        s["questions"][0]["options"][0],
        json!({"id": "dark_mode", "label": "Dark mode"})
    );
    let preset = b
        .submit(
            &form,
            &action,
            &[
                ("type", "csat"),
                ("title", "CSAT"),
                ("percentage", "100"),
                ("questions", ""),
            ],
        )
        .await;
    assert_eq!(
        preset.status, 303,
        "the type's preset questions: {}",
        preset.body
    );
    let refused = b.post(&action, &[("type", "open"), ("title", "x")]).await;
    assert_eq!(refused.status, 403);
}

#[tokio::test]
async fn survey_responses_are_paged_25_at_a_time_newest_first() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let body = json!({"title": "Quick one", "type": "open",
        "questions": [{"id": "say", "text": "Anything?", "type": "text"}]});
    let id = create_survey(&app, &app_id, body).await;
    let live = app
        .admin(
            reqwest::Method::POST,
            &format!("/apps/{app_id}/surveys/{id}/transition"),
            Some(json!({"status": "active"})),
        )
        .await;
    assert_eq!(live.status, 200, "{}", live.body);
    for n in 0..27 {
        let r = app
            .send(
                reqwest::Method::POST,
                &format!("/api/w/surveys/{id}/responses"),
                &[("x-app-key", &ik)],
                Some(json!({"anonymousId": anon(&format!("pager-{n}")),
                    "answers": [{"questionId": "say", "value": format!("answer number {n:02}")}]})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let mut b = owner(&app).await;
    let url = format!("/dashboard/apps/{app_id}/surveys/{id}");
    let first = b.get(&url).await;
    assert_eq!(first.body.matches("answer number").count(), 25);
    assert!(first.body.contains("Page 1 of 2") && first.body.contains("?page=1\">Older"));
    let second = b.get(&format!("{url}?page=1")).await;
    assert_eq!(second.body.matches("answer number").count(), 2);
    assert!(second.body.contains("answer number 00") && second.body.contains("Page 2 of 2"));
    let beyond = b.get(&format!("{url}?page=9")).await;
    assert!(
        beyond.body.contains("Page 2 of 2"),
        "a page past the end shows the last"
    );
}

/// The builder's fields of a survey with two attribute rules (a blank row between them) and
/// a URL rule.
fn targeted(title: &str, questions: &str) -> Vec<(&'static str, String)> {
    [
        ("type", "poll"),
        ("title", title),
        ("percentage", "30"),
        ("questions", questions),
        ("attr-key", "plan"),
        ("attr-op", "equals"),
        ("attr-value", "pro"),
        ("attr-key", ""),
        ("attr-op", "equals"),
        ("attr-value", ""),
        ("attr-key", "seats"),
        ("attr-op", "greaterThan"),
        ("attr-value", "10"),
        ("url-op", "startsWith"),
        ("url-value", "https://shop.example/"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .collect()
}

fn pairs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn a_draft_is_edited_in_the_builder_a_live_survey_only_in_title_and_targeting() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let mut b = owner(&app).await;
    let new = format!("/dashboard/apps/{app_id}/surveys/new");
    let fields = targeted(
        "Next feature",
        "single_choice: Build next? [Dark mode; API]",
    );
    let made = b
        .submit(
            &new,
            &format!("/dashboard/apps/{app_id}/surveys"),
            &pairs(&fields),
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let url = made.location().to_owned();
    let id = url.rsplit('/').next().unwrap().to_owned();
    let api = format!("/apps/{app_id}/surveys/{id}");
    let saved = app.admin(reqwest::Method::GET, &api, None).await;
    assert_eq!(
        saved.data()["targeting"],
        json!({"percentage": 30.0, "attributes": [
            {"key": "plan", "operator": "equals", "value": "pro"},
            {"key": "seats", "operator": "greaterThan", "value": 10}],
            "urls": [{"operator": "startsWith", "value": "https://shop.example/"}]})
    );
    let page = b.get(&url).await;
    assert!(page
        .body
        .contains("30% of visitors · 2 attribute rules, 1 URL rule"));
    assert!(
        page.body.contains(&format!(r#"href="{url}/edit""#)),
        "a draft has Edit"
    );

    let edit = format!("{url}/edit");
    let form = b.get(&edit).await;
    assert_eq!(form.status, 200);
    for filled in [
        r#"value="plan""#,
        r#"value="seats""#,
        r#"value="10""#,
        r#"value="https://shop.example/""#,
        r#"id="f-percentage" name="percentage" type="number" value="30""#,
        "single_choice: Build next? [Dark mode; API]</textarea>",
        r#"<option value="greaterThan" selected>"#,
    ] {
        assert!(form.body.contains(filled), "{filled}");
    }
    let mut changed = targeted(
        "Next big feature",
        "multiple_choice: Build next? [Dark mode; API; Apps]",
    );
    changed.truncate(10);
    changed[2].1 = "50".into();
    let saved = b.submit(&edit, &edit, &pairs(&changed)).await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    assert_eq!(saved.location(), url);
    let s = app.admin(reqwest::Method::GET, &api, None).await;
    let s = s.data();
    assert_eq!(s["title"], "Next big feature");
    assert_eq!(s["questions"][0]["type"], "multiple_choice");
    assert_eq!(s["questions"][0]["options"][2]["label"], "Apps");
    assert_eq!(s["targeting"]["percentage"], 50.0);
    assert_eq!(s["targeting"]["attributes"].as_array().unwrap().len(), 1);
    assert_eq!(s["targeting"]["urls"], json!([]));

    let page = b.get(&url).await;
    let moved = b
        .post(
            &format!("{url}/transition"),
            &[("status", "active"), ("csrf", &page.csrf())],
        )
        .await;
    assert_eq!(moved.status, 303);
    let live_form = b.get(&edit).await;
    assert_eq!(live_form.status, 200);
    assert!(
        !live_form.body.contains(r#"name="questions""#),
        "no questions input once live"
    );
    assert!(live_form.body.contains(r#"name="type" disabled"#));
    assert!(live_form
        .body
        .contains("can change only while the survey is a draft"));
    let retitled = b
        .submit(
            &edit,
            &edit,
            &[("title", "Live title"), ("percentage", "80")],
        )
        .await;
    assert_eq!(retitled.status, 303, "{}", retitled.body);
    let s = app.admin(reqwest::Method::GET, &api, None).await;
    assert_eq!(
        (&s.data()["title"], &s.data()["targeting"]["percentage"]),
        (&json!("Live title"), &json!(80.0))
    );
    assert_eq!(
        s.data()["questions"][0]["type"],
        "multiple_choice",
        "questions kept"
    );
    let refused = b
        .submit(
            &edit,
            &edit,
            &[
                ("title", "x"),
                ("type", "poll"),
                ("questions", "single_choice: Q? [A; B]"),
                ("percentage", "80"),
            ],
        )
        .await;
    assert_eq!(
        refused.status, 409,
        "questions of a live survey: {}",
        refused.body
    );
    assert!(refused.body.contains("editable only in draft"));

    let page = b.get(&url).await;
    let closed = b
        .post(
            &format!("{url}/transition"),
            &[("status", "closed"), ("csrf", &page.csrf())],
        )
        .await;
    assert_eq!(closed.status, 303);
    let page = b.get(&url).await;
    assert!(
        !page.body.contains(&format!(r#"href="{url}/edit""#)),
        "closed: no Edit"
    );
    assert_eq!(b.get(&edit).await.status, 409);
    let refused = b
        .post(
            &edit,
            &[
                ("title", "again"),
                ("percentage", "10"),
                ("csrf", &page.csrf()),
            ],
        )
        .await;
    assert_eq!(refused.status, 409);
    assert!(refused.body.contains("a closed survey cannot be edited"));
    let no_csrf = b.post(&edit, &[("title", "again")]).await;
    assert_eq!(no_csrf.status, 403);
}

#[tokio::test]
async fn targeting_errors_show_on_the_row_they_were_typed_in() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let mut b = owner(&app).await;
    let new = format!("/dashboard/apps/{app_id}/surveys/new");
    let bad = b
        .submit(
            &new,
            &format!("/dashboard/apps/{app_id}/surveys"),
            &[
                ("type", "open"),
                ("title", "Why"),
                ("percentage", "0"),
                ("questions", ""),
                ("attr-key", ""),
                ("attr-op", "equals"),
                ("attr-value", ""),
                ("attr-key", "seats"),
                ("attr-op", "greaterThan"),
                ("attr-value", "ten"),
                ("url-op", "contains"),
                ("url-value", ""),
                ("url-op", "matches"),
                ("url-value", "/pricing"),
            ],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    let error_of = |id: &str| -> String {
        let at = bad
            .body
            .find(&format!(r#"id="{id}-error""#))
            .unwrap_or_else(|| panic!("{id}: {}", bad.body));
        bad.body[at..].split('<').next().unwrap().to_owned()
    };
    let e = error_of("f-attr-1-value");
    assert!(e.contains("must be a number, not a string"), "{e}");
    assert!(bad
        .body
        .contains(r#"id="f-attr-1-value" name="attr-value" type="text" value="ten""#));
    assert!(bad
        .body
        .contains(r#"aria-describedby="f-percentage-error""#));
    let url_op = &bad.body[bad.body.find(r#"id="f-url-1-op""#).unwrap()..];
    let url_op = &url_op[..url_op.find("</div>").unwrap()];
    assert!(
        url_op.contains("field-error") && url_op.contains("must be one of equals"),
        "{url_op}"
    );
    assert!(
        !bad.body.contains(r#"class="notice danger""#),
        "every error is next to its field"
    );

    // The preview: the form as the survey the popover draws, CSRF-checked.
    let action = format!("/dashboard/apps/{app_id}/surveys/preview");
    let page = b.get(&new).await;
    let shown = b
        .post(
            &action,
            &[
                ("type", "nps"),
                ("title", ""),
                ("questions", ""),
                ("csrf", &page.csrf()),
            ],
        )
        .await;
    assert_eq!(shown.status, 200);
    let s: serde_json::Value = serde_json::from_str(&shown.body).unwrap();
    assert_eq!(s["questions"][0]["type"], "scale");
    assert_eq!(s["title"], "Untitled survey");
    assert_eq!(b.post(&action, &[("type", "nps")]).await.status, 403);
}

/// Creates a survey through the admin API; answers its id.
async fn create_survey(app: &TestApp, app_id: &str, body: serde_json::Value) -> String {
    let made = app
        .admin(
            reqwest::Method::POST,
            &format!("/apps/{app_id}/surveys"),
            Some(body),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    made.data()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn survey_results_chart_the_score_over_time_and_filter_the_responses() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let body = json!({"title": "NPS", "type": "nps", "questions": [
        {"id": "score", "text": "How likely?", "type": "scale"},
        {"id": "why", "text": "Why?", "type": "text", "required": false}]});
    let id = create_survey(&app, &app_id, body).await;
    let api = format!("/apps/{app_id}/surveys/{id}");
    let moved = app
        .admin(
            reqwest::Method::POST,
            &format!("{api}/transition"),
            Some(json!({"status": "active"})),
        )
        .await;
    assert!(moved.status.is_success(), "{}", moved.body);
    for (n, score, completed) in [(1, 10, true), (2, 9, false), (3, 3, true)] {
        let r = app
            .send(
                reqwest::Method::POST,
                &format!("/api/w/surveys/{id}/responses"),
                &[("x-app-key", &ik)],
                Some(
                    json!({"anonymousId": format!("6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e0{n}"),
                    "completed": completed, "answers": [{"questionId": "score", "value": score}]}),
                ),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let mut b = owner(&app).await;
    let url = format!("/dashboard/apps/{app_id}/surveys/{id}");
    let page = b.get(&url).await;
    assert_eq!(page.status, 200);
    let chart = &page.body[page
        .body
        .find(r#"id="score-over-time""#)
        .expect("the chart")..];
    assert!(chart.contains("NPS score over time") && chart.contains("per day"));
    let today = chrono::Utc::now().date_naive();
    assert!(
        chart.contains(&format!(r#"aria-label="NPS score per day: {today} 33.3""#)),
        "{chart}"
    );
    let rows = |p: &Page| p.body.matches("<td class=\"mono\">").count();
    assert_eq!(rows(&page), 3);
    assert_eq!(rows(&b.get(&format!("{url}?done=partial")).await), 1);
    assert_eq!(rows(&b.get(&format!("{url}?min=9&max=10")).await), 2);
    assert_eq!(
        rows(&b.get(&format!("{url}?from={today}&to={today}")).await),
        3
    );
    let tomorrow = today.succ_opt().unwrap();
    let none = b.get(&format!("{url}?from={tomorrow}")).await;
    assert!(none.body.contains("No responses match these filters."));
    let bad = b.get(&format!("{url}?from=yesterday&done=all")).await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body.contains(r#"id="f-from-error""#)
            && bad.body.contains("must be completed or partial")
    );
    let filtered = b.get(&format!("{url}?done=completed&min=9")).await;
    assert!(filtered
        .body
        .contains("responses.csv?done=completed&amp;min=9"));
    let csv = b
        .get(&format!("{url}/responses.csv?done=completed&min=9"))
        .await;
    assert_eq!(
        csv.body.lines().count(),
        2,
        "a header and the one row: {}",
        csv.body
    );
}

#[tokio::test]
async fn a_draft_edited_without_touching_its_questions_keeps_them_as_saved() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let body = json!({"title": "NPS", "type": "nps", "questions": [
        {"id": "score", "text": "How likely?", "type": "scale"},
        {"id": "why", "text": "Why?", "type": "text", "required": true}]});
    let id = create_survey(&app, &app_id, body).await;
    let mut b = owner(&app).await;
    let edit = format!("/dashboard/apps/{app_id}/surveys/{id}/edit");
    let form = b.get(&edit).await;
    assert!(form
        .body
        .contains("scale: How likely?\ntext: Why?</textarea>"));
    let saved = b
        .submit(
            &edit,
            &edit,
            &[
                ("type", "nps"),
                ("title", "NPS 2"),
                ("questions", "scale: How likely?\ntext: Why?\n"),
                ("percentage", "100"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let s = app
        .admin(
            reqwest::Method::GET,
            &format!("/apps/{app_id}/surveys/{id}"),
            None,
        )
        .await;
    assert_eq!(s.data()["title"], "NPS 2");
    assert_eq!(
        s.data()["questions"][1],
        json!({"id": "why", "text": "Why?", "type": "text", "required": true})
    );
}

/// Creates an idea through the API with voters `voters`; answers its id.
async fn idea_with_votes(app: &TestApp, key: &str, title: &str, voters: &[&str]) -> String {
    let author = json!({"id": "user_1", "name": "User 1", "email": "user1@example.com"});
    let made = app
        .api(
            key,
            reqwest::Method::POST,
            "/api/v1/ideas",
            Some(json!({"title": title, "author": author})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.data()["id"].as_str().unwrap().to_owned();
    for v in voters {
        let voter =
            json!({"id": v, "name": format!("Voter {v}"), "email": format!("{v}@example.com")});
        let path = format!("/api/v1/ideas/{id}/votes");
        let r = app
            .api(
                key,
                reqwest::Method::POST,
                &path,
                Some(json!({"voter": voter})),
            )
            .await;
        assert!(r.status.is_success(), "{}", r.body);
    }
    id
}

/// The id after `#comment-` in a redirect.
fn comment_id(page: &Page) -> String {
    page.location()
        .split("#comment-")
        .nth(1)
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_idea_page_nests_replies_marks_internal_comments_and_merges_votes() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let key = app
        .create_key(&app_id, &["ideas:read", "ideas:write", "votes:write"])
        .await
        .1;
    let dark = idea_with_votes(&app, &key, "Dark mode", &["v1", "v2"]).await;
    let night = idea_with_votes(&app, &key, "Night theme please", &["v2", "v3"]).await;
    let mut b = owner(&app).await;
    let board = b.get(&format!("/dashboard/apps/{app_id}/ideas")).await;
    let url = format!("/dashboard/apps/{app_id}/ideas/{dark}");
    assert!(board
        .body
        .contains(&format!(r#"<a href="{url}">Dark mode</a>"#)));
    let page = b.get(&url).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Voter v1") && page.body.contains("Voter v2"));
    let action = format!("{url}/comments");
    let refused = b.post(&action, &[("content", "no token")]).await;
    assert_eq!(refused.status, 403);
    let empty = b.submit(&url, &action, &[("content", " ")]).await;
    assert_eq!(empty.status, 400);
    assert!(
        empty.body.contains(r#"id="f-comment-content-error""#),
        "{}",
        empty.body
    );
    let top = b.submit(&url, &action, &[("content", "Top comment")]).await;
    assert_eq!(top.status, 303, "{}", top.body);
    let top = comment_id(&top);
    let reply = b
        .submit(
            &url,
            &action,
            &[
                ("content", "Internal reply"),
                ("parentId", &top),
                ("internal", "true"),
            ],
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let reply = comment_id(&reply);
    let deeper = b
        .submit(
            &url,
            &action,
            &[("content", "Answer to the note"), ("parentId", &reply)],
        )
        .await;
    let deeper = comment_id(&deeper);
    let page = b.get(&url).await;
    let body = &page.body;
    let nested = |parent: &str, child: &str, class: &str| {
        let at = body.find(&format!(r#"id="comment-{parent}""#)).unwrap();
        let rest = &body[at..];
        let child_at = rest.find(&format!(r#"id="comment-{child}""#)).unwrap();
        // The child opens a nested list right after its parent's article.
        let between = &rest[..child_at];
        assert!(
            between.ends_with(&format!(
                r#"</article><ol class="thread"><li><article class="{class}" "#
            )),
            "{child} nested under {parent}: {between}"
        );
    };
    nested(&top, &reply, "comment internal");
    nested(&reply, &deeper, "comment");
    let internal = &body[body.find(&format!(r#"id="comment-{reply}""#)).unwrap()..];
    let internal = internal.split("</header>").next().unwrap();
    assert!(internal.contains(r#"<span class="badge internal-mark">Internal</span>"#));
    assert!(
        !body[body.find(&format!(r#"id="comment-{top}""#)).unwrap()..]
            .split("</header>")
            .next()
            .unwrap()
            .contains("Internal</span>")
    );
    let api = app
        .api(
            &key,
            reqwest::Method::GET,
            &format!("/api/v1/ideas/{dark}/comments"),
            None,
        )
        .await;
    let seen: Vec<&str> = api
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        seen,
        ["Top comment", "Answer to the note"],
        "the internal one is not public"
    );

    let other = format!("/dashboard/apps/{app_id}/ideas/{night}");
    let search = b.get(&format!("{other}?q=DARK")).await;
    assert_eq!(search.status, 200);
    let results = &search.body[search.body.find(r#"id="merge-results""#).unwrap()..];
    assert!(results.contains(&format!(r#"name="into" value="{dark}""#)));
    assert!(
        !results.contains(&format!(r#"value="{night}""#)),
        "not itself"
    );
    let none = b.get(&format!("{other}?q=zebra")).await;
    assert!(none.body.contains("matches “zebra”"));
    let merged = b
        .submit(&other, &format!("{other}/merge"), &[("into", &dark)])
        .await;
    assert_eq!(merged.status, 303, "{}", merged.body);
    assert_eq!(merged.location(), format!("{url}?merged={night}"));
    let target = b.get(merged.location()).await;
    assert!(target
        .body
        .contains("“Night theme please” was merged into this idea"));
    assert!(target
        .body
        .contains(r#"id="vote-count" title="Votes"><strong>3</strong>"#));
    assert!(target.body.contains("Voter v3"), "the voter moved");
    let api = app
        .api(
            &key,
            reqwest::Method::GET,
            &format!("/api/v1/ideas/{night}"),
            None,
        )
        .await;
    assert_eq!(api.data()["status"]["name"], "Duplicate");
    assert_eq!(api.data()["mergedIntoId"], dark.as_str());
    let again = b
        .submit(&other, &format!("{other}/merge"), &[("into", &dark)])
        .await;
    assert_eq!(again.status, 409);
}

#[tokio::test]
async fn ideas_settings_add_a_status_that_becomes_a_column_with_refusals_next_to_fields() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let key = app
        .create_key(&app_id, &["ideas:read", "ideas:write"])
        .await
        .1;
    let idea = idea_with_votes(&app, &key, "Faster search", &[]).await;
    let mut b = owner(&app).await;
    let settings = format!("/dashboard/apps/{app_id}/ideas/settings");
    let page = b.get(&settings).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let prefix = format!("/dashboard/apps/{app_id}/ideas/boards/");
    let at = page.body.find(&format!(r#"action="{prefix}"#)).unwrap() + 8 + prefix.len();
    let board = page.body[at..at + 24].to_owned();
    let statuses = format!("{prefix}{board}/statuses");
    let fields = [
        ("name", "Shipped"),
        ("color", "#123456"),
        ("kind", "closed"),
        ("position", "2"),
    ];
    let added = b.submit(&settings, &statuses, &fields).await;
    assert_eq!(added.status, 303, "{}", added.body);
    assert!(added.location().ends_with("#statuses"));
    let columns = b.get(&format!("/dashboard/apps/{app_id}/ideas")).await;
    let names: Vec<&str> = columns
        .body
        .split("<span class=\"count\">")
        .map(|s| s.rsplit("</svg>").next().unwrap())
        .take(4)
        .collect();
    assert_eq!(
        &names[..3],
        ["Open", "Under review", "Shipped"],
        "{names:?}"
    );
    assert!(columns.body.contains(r##"fill="#123456""##), "its colour");
    let taken = b
        .submit(
            &settings,
            &statuses,
            &[("name", "planned"), ("color", "red")],
        )
        .await;
    assert_eq!(taken.status, 400);
    let error = |page: &Page, id: &str| -> String {
        let at = page
            .body
            .find(&format!(r#"id="{id}-error">"#))
            .unwrap_or_else(|| panic!("{id}: {}", page.body));
        page.body[at..]
            .split('>')
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_owned()
    };
    assert!(error(&taken, "f-new-statuses-color").contains("#rrggbb"));
    let taken = b
        .submit(
            &settings,
            &statuses,
            &[("name", "planned"), ("color", "#aabbcc")],
        )
        .await;
    assert!(error(&taken, "f-new-statuses-name").contains("exists"));
    assert!(
        taken.body.contains(r#"value="planned""#),
        "the form keeps what was typed"
    );
    // A status in use is not deleted; the refusal sits next to its row.
    let shipped = b.get(&settings).await;
    let at = shipped
        .body
        .find(">Save<span class=\"sr-only\"> Shipped")
        .unwrap();
    let action = shipped.body[..at]
        .rsplit(r#"action=""#)
        .next()
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let status_id = action.rsplit('/').next().unwrap().to_owned();
    let move_to = format!("/dashboard/apps/{app_id}/ideas/{idea}/status");
    let moved = b
        .submit(&settings, &move_to, &[("status", &status_id)])
        .await;
    assert_eq!(moved.status, 303);
    let kept = b.submit(&settings, &format!("{action}/delete"), &[]).await;
    assert_eq!(kept.status, 400);
    assert!(error(&kept, &format!("f-statuses-{status_id}-name")).contains("used by 1"));
    let renamed = b
        .submit(
            &settings,
            &action,
            &[
                ("name", "Released"),
                ("color", "#123456"),
                ("kind", "closed"),
                ("position", "2"),
            ],
        )
        .await;
    assert_eq!(renamed.status, 303, "{}", renamed.body);
    for (part, name) in [("topics", "Billing"), ("tags", "ui")] {
        let r = b
            .submit(
                &settings,
                &format!("{prefix}{board}/{part}"),
                &[("name", name), ("color", "")],
            )
            .await;
        assert_eq!(r.status, 303, "{part}: {}", r.body);
    }
    let made = b
        .submit(
            &settings,
            &format!("/dashboard/apps/{app_id}/ideas/boards"),
            &[("name", "Roadmap")],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let roadmap = b.get(made.location()).await;
    assert!(roadmap
        .body
        .contains("Statuses, topics and tags of <strong>Roadmap</strong>"));
    let api = app
        .api(&key, reqwest::Method::GET, "/api/v1/boards", None)
        .await;
    let boards: Vec<&str> = api
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(boards, ["Feedback", "Roadmap"]);
    let api = app
        .api(
            &key,
            reqwest::Method::GET,
            &format!("/api/v1/ideas/{idea}"),
            None,
        )
        .await;
    assert_eq!(api.data()["status"]["name"], "Released");
    let all = b.get(&settings).await;
    assert!(all.body.contains(r#"value="Billing""#) && all.body.contains(r#"value="ui""#));
}

#[tokio::test]
async fn the_traffic_page_lists_the_lake_files_written_for_the_app() {
    // Files close within 100 ms of their first row, so the upload follows at once.
    let app = spawn_app_with(|s| s.collector.max_file_age_ms = 100);
    let (app_id, ik) = app.create_app("pro").await;
    let (other_id, other_ik) = app.create_app("pro").await;
    let mut b = owner(&app).await;
    let url = format!("/dashboard/apps/{app_id}/traffic");
    let before = b.get(&url).await;
    assert!(before
        .body
        .contains("No file written for this app in the last 24 hours"));
    send_known_traffic(&app, &ik).await;
    let other = json!({"type": "track", "event": "Elsewhere", "messageId": "msg_other_1",
        "anonymousId": "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e09"});
    let r = app
        .collect(&other_ik, crate::collector::batch(vec![other]))
        .await;
    assert_eq!(r.counts(), (1, 0, 0));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let table = loop {
        let page = b.get(&url).await;
        assert_eq!(page.status, 200);
        // Two visitors may land on two shards: wait until the files hold all 6 rows.
        if let Some(at) = page.body.find(r#"<table id="lake-files">"#) {
            let table = page.body[at..].split("</table>").next().unwrap().to_owned();
            let rows: u64 = table
                .split(r#"<td class="num">"#)
                .skip(1)
                .map(|s| s.split('<').next().unwrap().parse::<u64>().unwrap())
                .sum();
            if rows == 6 {
                break table;
            }
        }
        let listed = &page.body[page.body.find("lake-files-title").unwrap()..];
        assert!(
            std::time::Instant::now() < deadline,
            "not all rows listed: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let paths: Vec<&str> = table
        .split("<code>")
        .skip(1)
        .map(|s| s.split("</code>").next().unwrap())
        .collect();
    assert!(!paths.is_empty() && paths.len() <= 2, "{paths:?}");
    for p in &paths {
        assert!(p.starts_with(&format!("events/app_id={app_id}/dt=")), "{p}");
        assert!(p.ends_with(".parquet"));
        let on_disk = app.data_dir.join("lake").join(p);
        let size = std::fs::metadata(&on_disk)
            .expect("the listed file exists")
            .len();
        assert!(
            table.contains(&format!(r#"title="{size} bytes""#)),
            "{p}: {size} bytes"
        );
    }
    assert!(
        !table.contains(&other_id),
        "another app's files are not listed"
    );
}

#[tokio::test]
async fn an_idea_is_edited_on_its_page_with_topic_and_tags_and_errors_next_to_fields() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let key = app
        .create_key(&app_id, &["ideas:read", "ideas:write"])
        .await
        .1;
    let idea = idea_with_votes(&app, &key, "Faster search", &[]).await;
    let mut b = owner(&app).await;
    let settings = format!("/dashboard/apps/{app_id}/ideas/settings");
    let page = b.get(&settings).await;
    let prefix = format!("/dashboard/apps/{app_id}/ideas/boards/");
    let at = page.body.find(&format!(r#"action="{prefix}"#)).unwrap() + 8 + prefix.len();
    let board = &page.body[at..at + 24];
    for (part, name) in [("topics", "Search"), ("tags", "speed"), ("tags", "ui")] {
        let r = b
            .submit(
                &settings,
                &format!("{prefix}{board}/{part}"),
                &[("name", name)],
            )
            .await;
        assert_eq!(r.status, 303, "{}", r.body);
    }
    let url = format!("/dashboard/apps/{app_id}/ideas/{idea}");
    let page = b.get(&url).await;
    let value_of = |label: &str| -> String {
        let at = page.body.find(label).unwrap_or_else(|| panic!("{label}"));
        page.body[..at]
            .rsplit("value=\"")
            .next()
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_owned()
    };
    let (topic, speed) = (value_of(">Search</option"), value_of("> speed</label"));
    let status = value_of(">Planned</option");
    let bad = b
        .submit(&url, &url, &[("title", "x"), ("statusId", &status)])
        .await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains(r#"id="f-title-error""#), "{}", bad.body);
    assert!(
        bad.body.contains(r#"value="x""#),
        "the form keeps what was typed"
    );
    let fields = [
        ("title", "Faster full-text search"),
        ("description", "Results in under 100 ms."),
        ("statusId", status.as_str()),
        ("topicId", topic.as_str()),
        ("tagIds", speed.as_str()),
    ];
    let saved = b.submit(&url, &url, &fields).await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let api = app
        .api(
            &key,
            reqwest::Method::GET,
            &format!("/api/v1/ideas/{idea}"),
            None,
        )
        .await;
    let d = api.data();
    assert_eq!(d["title"], "Faster full-text search");
    assert_eq!(d["description"], "Results in under 100 ms.");
    assert_eq!(d["status"]["name"], "Planned");
    assert_eq!(d["topic"]["name"], "Search");
    assert_eq!(d["tags"][0]["name"], "speed");
    assert_eq!(d["tags"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_idea_page_shows_its_comments_a_page_at_a_time() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("pro").await;
    let key = app
        .create_key(&app_id, &["ideas:read", "ideas:write", "comments:write"])
        .await
        .1;
    let idea = idea_with_votes(&app, &key, "Many comments", &[]).await;
    let author = json!({"id": "user_2", "name": "User 2", "email": "user2@example.com"});
    let mut made = Vec::new();
    for n in 0..130 {
        let c = app
            .api(
                &key,
                reqwest::Method::POST,
                &format!("/api/v1/ideas/{idea}/comments"),
                Some(json!({"content": format!("Comment number {n}"), "author": author})),
            )
            .await;
        assert_eq!(c.status, 201, "{}", c.body);
        made.push(c.data()["id"].as_str().unwrap().to_owned());
    }
    let shown = |body: &str| -> Vec<String> {
        made.iter()
            .filter(|id| body.contains(&format!(r#"id="comment-{id}""#)))
            .cloned()
            .collect()
    };
    let mut b = owner(&app).await;
    let url = format!("/dashboard/apps/{app_id}/ideas/{idea}");
    let first = b.get(&url).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(shown(&first.body), made[..100], "the oldest 100 first");
    let at = first
        .body
        .find("?comments=")
        .expect("a link to the next comments");
    let cursor: String = first.body[at + "?comments=".len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    let second = b.get(&format!("{url}?comments={cursor}")).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(shown(&second.body), made[100..]);
    assert!(
        !second.body.contains("?comments="),
        "the last page links no further"
    );
    assert!(second.body.contains("First comments"));
    // A cursor that is not this idea's shows the first page.
    let stale = b.get(&format!("{url}?comments=bm9wZQ")).await;
    assert_eq!(shown(&stale.body), made[..100]);
}
