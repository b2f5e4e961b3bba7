//! `/acq/v1/contacts`, end to end.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

fn full_contact() -> Value {
    json!({
        "email": "  Grace.Hopper@Example.COM ",
        "firstName": "Grace",
        "lastName": "Hopper",
        "company": "Navy",
        "companyId": "cmp_42",
        "phone": "+1 (555) 010-0000",
        "jobTitle": "Rear Admiral",
        "website": "https://example.com",
        "address": "1 Main St\nArlington",
        "city": "Arlington",
        "country": "US",
        "source": "form",
        "tags": ["cobol", "vip"],
        "score": 87,
        "status": "qualified",
        "emailVerified": true,
        "unsubscribed": false,
        "gdprConsent": true,
        "customFields": {"plan": "pro", "seats": 12, "trial": false, "note": null}
    })
}

#[tokio::test]
async fn every_contact_field_round_trips() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let created = app.create_contact(&key, full_contact()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let c = created.data().clone();
    let id = c["id"].as_str().unwrap();
    assert_eq!(
        created.header("location"),
        Some(format!("/acq/v1/contacts/{id}").as_str())
    );
    assert_eq!(id.len(), 24);
    assert_eq!(c["type"], "contact");
    assert_eq!(c["email"], "grace.hopper@example.com");
    let mut expected = full_contact();
    expected["email"] = json!("grace.hopper@example.com");
    expected["customFields"] = json!({"plan": "pro", "seats": 12, "trial": false});
    for (field, value) in expected.as_object().unwrap() {
        assert_eq!(&c[field], value, "field {field}");
    }
    for field in ["id", "appId", "createdAt", "updatedAt"] {
        assert!(c[field].is_string(), "{field}");
    }
    let got = app
        .api(&key, Method::GET, &format!("/acq/v1/contacts/{id}"), None)
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.data(), &c);
}

#[tokio::test]
async fn creating_a_contact_applies_the_defaults() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let c = app.create_contact(&key, json!({"email": "a@b.co"})).await;
    assert_eq!(c.status, 201);
    let d = c.data();
    assert_eq!(
        (
            d["source"].as_str(),
            d["status"].as_str(),
            d["score"].as_i64()
        ),
        (Some("api"), Some("new"), Some(0))
    );
    assert_eq!((&d["tags"], &d["customFields"]), (&json!([]), &json!({})));
    assert_eq!(
        (&d["emailVerified"], &d["unsubscribed"], &d["gdprConsent"]),
        (&json!(false), &json!(false), &json!(false))
    );
    assert!(
        d.get("companyId").is_none(),
        "companyId is present only when linked"
    );
}

#[tokio::test]
async fn creating_a_contact_with_invalid_fields_reports_each_field() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let cases = [
        (json!({}), vec!["email"], "email is required"),
        (
            json!({"email": "not-an-email"}),
            vec!["email"],
            "email without @",
        ),
        (json!({"email": 42}), vec!["email"], "email not a string"),
        (
            json!({"email": "a@b.co", "score": 101}),
            vec!["score"],
            "score above 100",
        ),
        (
            json!({"email": "a@b.co", "score": 1.5}),
            vec!["score"],
            "score not an integer",
        ),
        (
            json!({"email": "a@b.co", "status": "vip"}),
            vec!["status"],
            "unknown status",
        ),
        (
            json!({"email": "a@b.co", "source": "tv"}),
            vec!["source"],
            "unknown source",
        ),
        (
            json!({"email": "a@b.co", "tags": "x"}),
            vec!["tags"],
            "tags not an array",
        ),
        (
            json!({"email": "a@b.co", "tags": ["x".repeat(65)]}),
            vec!["tags[0]"],
            "tag too long",
        ),
        (
            json!({"email": "a@b.co", "tags": (0..51).map(|i| i.to_string()).collect::<Vec<_>>()}),
            vec!["tags"],
            "51 tags",
        ),
        (
            json!({"email": "a@b.co", "customFields": {"a": {"nested": 1}}}),
            vec!["customFields.a"],
            "nested custom field",
        ),
        (
            json!({"email": "a@b.co", "emailVerified": "yes"}),
            vec!["emailVerified"],
            "boolean as string",
        ),
        (
            json!({"email": "a@b.co", "firstName": "x".repeat(101)}),
            vec!["firstName"],
            "first name too long",
        ),
        (
            json!({"email": "a@b.co", "phone": "call me"}),
            vec!["phone"],
            "phone without digits",
        ),
        (
            json!({"email": "a@b.co", "id": "x", "createdAt": "y"}),
            vec!["createdAt", "id"],
            "read-only fields",
        ),
        (
            json!({"email": "a@b.co", "favouriteColour": "red"}),
            vec!["favouriteColour"],
            "unknown field",
        ),
        (
            json!({"email": "x", "score": -1, "status": 3}),
            vec!["email", "score", "status"],
            "three bad fields at once",
        ),
    ];
    for (body, fields, why) in cases {
        let a = app.create_contact(&key, body).await;
        assert_eq!(a.status, 400, "{why}: {}", a.body);
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), fields, "{why}");
    }
    // Nothing was stored.
    let list = app.api(&key, Method::GET, "/acq/v1/contacts", None).await;
    assert_eq!(list.data(), &json!([]));
}

#[tokio::test]
async fn creating_a_contact_with_a_taken_email_returns_409_naming_the_existing_id() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let first = app
        .create_contact(&key, json!({"email": "dup@example.com"}))
        .await;
    let id = first.data()["id"].as_str().unwrap();
    let again = app
        .create_contact(&key, json!({"email": " DUP@example.com"}))
        .await;
    again.assert_error(409, "CONFLICT");
    assert!(
        again.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(id),
        "{}",
        again.body
    );
    assert_eq!(again.fields(), ["email"]);
    // Another app may use the same address.
    let other = app.contacts_key("free").await;
    assert_eq!(
        app.create_contact(&other, json!({"email": "dup@example.com"}))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn patch_is_a_json_merge_patch_with_the_contact_rules() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let c = app.create_contact(&key, full_contact()).await;
    let id = c.data()["id"].as_str().unwrap().to_owned();
    let path = format!("/acq/v1/contacts/{id}");
    let p = app
        .api(&key, Method::PATCH, &path, Some(json!({"firstName": null, "tags": ["new"], "customFields": {"plan": null, "region": "eu"}, "score": 5})))
        .await;
    assert_eq!(p.status, 200, "{}", p.body);
    let d = p.data();
    assert_eq!(d["firstName"], Value::Null);
    assert_eq!(d["lastName"], "Hopper", "absent fields are unchanged");
    assert_eq!(d["tags"], json!(["new"]));
    assert_eq!(
        d["customFields"],
        json!({"seats": 12, "trial": false, "region": "eu"})
    );
    assert_eq!(d["score"], 5);
    assert_ne!(d["updatedAt"], c.data()["updatedAt"]);
    assert_eq!(d["createdAt"], c.data()["createdAt"]);

    app.api(&key, Method::PATCH, &path, Some(json!({"email": null})))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    let ro = app
        .api(
            &key,
            Method::PATCH,
            &path,
            Some(json!({"id": "x", "appId": "y"})),
        )
        .await;
    ro.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(ro.fields(), ["appId", "id"]);
}

#[tokio::test]
async fn patch_keeps_the_unsubscribe_rules_and_a_unique_email() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let c = app.create_contact(&key, full_contact()).await;
    let path = format!("/acq/v1/contacts/{}", c.data()["id"].as_str().unwrap());
    // Unsubscribing sets the flag; leaving the state needs consent in the same request.
    let u = app
        .api(
            &key,
            Method::PATCH,
            &path,
            Some(json!({"status": "unsubscribed"})),
        )
        .await;
    assert_eq!(u.data()["unsubscribed"], true);
    app.api(
        &key,
        Method::PATCH,
        &path,
        Some(json!({"status": "contacted"})),
    )
    .await
    .assert_error(409, "CONFLICT");
    app.api(
        &key,
        Method::PATCH,
        &path,
        Some(json!({"status": "contacted", "gdprConsent": false})),
    )
    .await
    .assert_error(409, "CONFLICT");
    let back = app
        .api(
            &key,
            Method::PATCH,
            &path,
            Some(json!({"status": "contacted", "gdprConsent": true})),
        )
        .await;
    assert_eq!(back.status, 200, "{}", back.body);
    assert_eq!(
        (back.data()["status"].as_str(), &back.data()["unsubscribed"]),
        (Some("contacted"), &json!(false))
    );

    // Changing the e-mail keeps it unique and moves the index.
    let other = app
        .create_contact(&key, json!({"email": "other@example.com"}))
        .await;
    app.api(
        &key,
        Method::PATCH,
        &path,
        Some(json!({"email": "other@example.com"})),
    )
    .await
    .assert_error(409, "CONFLICT");
    let moved = app
        .api(
            &key,
            Method::PATCH,
            &path,
            Some(json!({"email": "New@Example.com"})),
        )
        .await;
    assert_eq!(moved.data()["email"], "new@example.com");
    let by_email = app
        .api(
            &key,
            Method::GET,
            "/acq/v1/contacts?email=new@example.com",
            None,
        )
        .await;
    assert_eq!(by_email.data().as_array().unwrap().len(), 1);
    assert_eq!(
        app.create_contact(&key, json!({"email": "grace.hopper@example.com"}))
            .await
            .status,
        201
    );
    assert_eq!(other.status, 201);
    app.api(
        &key,
        Method::PATCH,
        "/acq/v1/contacts/0123456789abcdef01234567",
        Some(json!({"score": 1})),
    )
    .await
    .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn delete_is_a_hard_delete_that_erases_every_index_entry() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let c = app
        .create_contact(
            &key,
            json!({"email": "gone@example.com", "lastName": "Gone", "score": 50, "tags": ["t"]}),
        )
        .await;
    let id = c.data()["id"].as_str().unwrap().to_owned();
    let d = app
        .api(
            &key,
            Method::DELETE,
            &format!("/acq/v1/contacts/{id}"),
            None,
        )
        .await;
    assert_eq!(d.status, 200);
    assert_eq!(d.data(), &json!({"id": id, "deleted": true}));
    app.api(
        &key,
        Method::DELETE,
        &format!("/acq/v1/contacts/{id}"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.api(&key, Method::GET, &format!("/acq/v1/contacts/{id}"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    for sort in ["createdAt", "-updatedAt", "score", "lastName", "-email"] {
        let l = app
            .api(
                &key,
                Method::GET,
                &format!("/acq/v1/contacts?sort={sort}"),
                None,
            )
            .await;
        assert_eq!(l.data(), &json!([]), "sort {sort}");
    }
    // The e-mail is free again.
    assert_eq!(
        app.create_contact(&key, json!({"email": "gone@example.com"}))
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn filters_and_sorts_combine() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let people = [
        ("ann@x.io", "Zed", 10, "new", "api", vec!["a"]),
        ("bob@x.io", "Young", 20, "customer", "form", vec!["b"]),
        ("cat@x.io", "Xu", 30, "customer", "api", vec!["a", "b"]),
        ("dan@y.io", "Wu", 40, "lost", "import", vec![]),
    ];
    for (email, last, score, status, source, tags) in &people {
        let a = app
            .create_contact(&key, json!({"email": email, "lastName": last, "score": score, "status": status, "source": source, "tags": tags, "company": "Initech"}))
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let emails = |a: &Answer| {
        a.data()
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["email"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let q = |s: &str| {
        let path = format!("/acq/v1/contacts?{s}");
        let (app, key) = (&app, &key);
        async move { app.api(key, Method::GET, &path, None).await }
    };
    assert_eq!(
        emails(&q("status=customer&sort=email").await),
        ["bob@x.io", "cat@x.io"]
    );
    assert_eq!(
        emails(&q("status=new,lost&sort=email").await),
        ["ann@x.io", "dan@y.io"]
    );
    assert_eq!(
        emails(&q("tag=a&sort=-score").await),
        ["cat@x.io", "ann@x.io"]
    );
    assert_eq!(emails(&q("source=api&status=customer").await), ["cat@x.io"]);
    assert_eq!(
        emails(&q("scoreMin=20&scoreMax=30&sort=score").await),
        ["bob@x.io", "cat@x.io"]
    );
    assert_eq!(
        emails(&q("sort=lastName").await),
        ["dan@y.io", "cat@x.io", "bob@x.io", "ann@x.io"]
    );
    assert_eq!(emails(&q("q=y.io").await), ["dan@y.io"]);
    assert_eq!(emails(&q("q=YOUNG").await), ["bob@x.io"]);
    assert_eq!(
        emails(&q("email=BOB@x.io,ann@x.io&sort=email").await),
        ["ann@x.io", "bob@x.io"]
    );
    assert_eq!(
        emails(&q("createdAfter=2000-01-01&sort=email&limit=1").await),
        ["ann@x.io"]
    );
    assert_eq!(
        emails(&q("updatedAfter=2999-01-01").await),
        Vec::<String>::new()
    );
    let newest_first = emails(&q("").await);
    assert_eq!(newest_first.len(), 4);
    assert_eq!(newest_first[0], "dan@y.io", "default sort is -createdAt");
}

/// The ids of a whole walk over the contacts in `sort` order, 17 per page.
async fn walk(app: &TestApp, key: &str, sort: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/acq/v1/contacts?limit=17&sort={sort}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = app.api(key, Method::GET, &path, None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        for c in page.data().as_array().unwrap() {
            seen.push(c["id"].as_str().unwrap().to_owned());
        }
        let p = &page.body["pagination"];
        assert_eq!(p["limit"], 17);
        if p["hasMore"] == json!(false) {
            assert_eq!(p["nextCursor"], Value::Null);
            break;
        }
        cursor = Some(p["nextCursor"].as_str().unwrap().to_owned());
    }
    seen
}

#[tokio::test]
async fn a_cursor_walk_over_250_contacts_never_repeats_or_skips_while_others_are_inserted() {
    let app = spawn_app();
    let key = app.contacts_key("pro").await;
    let mut existing = HashSet::new();
    let batch: Vec<Value> = (0..100)
        .map(|i| json!({"email": format!("seed{i}@example.com"), "score": i % 7}))
        .collect();
    for chunk in [
        &batch[..],
        &(100..200)
            .map(|i| json!({"email": format!("seed{i}@example.com"), "score": i % 7}))
            .collect::<Vec<_>>()[..],
        &(200..250)
            .map(|i| json!({"email": format!("seed{i}@example.com"), "score": i % 7}))
            .collect::<Vec<_>>()[..],
    ] {
        let a = app
            .api(
                &key,
                Method::POST,
                "/acq/v1/contacts/batch",
                Some(json!({"mode": "create", "contacts": chunk})),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        for r in a.data()["results"].as_array().unwrap() {
            assert_eq!(r["result"], "created", "{r}");
            existing.insert(r["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(existing.len(), 250);
    for sort in ["-createdAt", "score", "-score", "email"] {
        let writer_app = &app;
        let writer_key = key.clone();
        let sort_tag = sort.replace('-', "d");
        let writer = async move {
            for i in 0..40 {
                let a = writer_app
                    .create_contact(
                        &writer_key,
                        json!({"email": format!("late{sort_tag}{i}@example.com"), "score": i % 7}),
                    )
                    .await;
                assert_eq!(a.status, 201);
            }
        };
        let (seen, ()) = tokio::join!(walk(&app, &key, sort), writer);
        let unique: HashSet<_> = seen.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            seen.len(),
            "sort {sort}: a contact was repeated"
        );
        assert!(
            existing.is_subset(&unique),
            "sort {sort}: {} seed contacts were skipped",
            existing.difference(&unique).count()
        );
    }
    // A cursor made for one sort is refused by another.
    let page = app
        .api(
            &key,
            Method::GET,
            "/acq/v1/contacts?limit=5&sort=score",
            None,
        )
        .await;
    let c = page.body["pagination"]["nextCursor"].as_str().unwrap();
    let a = app
        .api(
            &key,
            Method::GET,
            &format!("/acq/v1/contacts?sort=email&cursor={c}"),
            None,
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["cursor"]);
}

#[tokio::test]
async fn a_key_of_another_app_gets_404_for_every_contact_on_every_verb() {
    let app = spawn_app();
    let key_a = app.contacts_key("free").await;
    let key_b = app.contacts_key("free").await;
    let c = app
        .create_contact(&key_a, json!({"email": "secret@a.com", "firstName": "A"}))
        .await;
    let id = c.data()["id"].as_str().unwrap().to_owned();
    let path = format!("/acq/v1/contacts/{id}");
    app.api(&key_b, Method::GET, &path, None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(
        &key_b,
        Method::PATCH,
        &path,
        Some(json!({"firstName": "B"})),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.api(&key_b, Method::DELETE, &path, None)
        .await
        .assert_error(404, "NOT_FOUND");
    let list = app
        .api(
            &key_b,
            Method::GET,
            "/acq/v1/contacts?email=secret@a.com",
            None,
        )
        .await;
    assert_eq!(list.data(), &json!([]));
    let upsert = app
        .api(&key_b, Method::POST, "/acq/v1/contacts/batch", Some(json!({"mode": "upsert", "contacts": [{"email": "secret@a.com", "firstName": "B"}]})))
        .await;
    assert_eq!(
        upsert.data()["results"][0]["result"],
        "created",
        "B's upsert must not touch A's contact"
    );
    // A cursor of A's walk means nothing to B.
    app.create_contact(&key_a, json!({"email": "second@a.com"}))
        .await;
    let page = app
        .api(&key_a, Method::GET, "/acq/v1/contacts?limit=1", None)
        .await;
    let cursor = page.body["pagination"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let foreign = app
        .api(
            &key_b,
            Method::GET,
            &format!("/acq/v1/contacts?limit=1&cursor={cursor}"),
            None,
        )
        .await;
    foreign.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(foreign.fields(), ["cursor"]);
    // A's contact is untouched.
    let got = app.api(&key_a, Method::GET, &path, None).await;
    assert_eq!(got.data()["firstName"], "A");
}

#[tokio::test]
async fn contacts_apps_and_keys_survive_a_restart() {
    let app = spawn_app();
    let (app_id, _) = app.create_app("free").await;
    let (_, key) = app
        .create_key(&app_id, &["contacts:read", "contacts:write"])
        .await;
    let c = app.create_contact(&key, full_contact()).await;
    let id = c.data()["id"].as_str().unwrap().to_owned();
    let app = app.restart().await;
    let got = app
        .api(&key, Method::GET, &format!("/acq/v1/contacts/{id}"), None)
        .await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.data(), c.data());
    app.create_contact(&key, json!({"email": "grace.hopper@example.com"}))
        .await
        .assert_error(409, "CONFLICT");
    let apps = app.admin(Method::GET, "/apps", None).await;
    assert_eq!(apps.data()[0]["id"], json!(app_id));
}

#[tokio::test]
async fn batch_upsert_creates_updates_and_reports_each_item() {
    let app = spawn_app_with(|s| s.plans.free.contacts = 4);
    let key = app.contacts_key("free").await;
    let existing = app
        .create_contact(
            &key,
            json!({"email": "old@example.com", "firstName": "Old", "score": 3}),
        )
        .await;
    let old_id = existing.data()["id"].as_str().unwrap().to_owned();
    let a = app
        .api(
            &key,
            Method::POST,
            "/acq/v1/contacts/batch",
            Some(json!({"mode": "upsert", "contacts": [
                {"email": "OLD@example.com", "firstName": "Renewed"},
                {"email": "new1@example.com"},
                {"email": "broken", "score": 300},
                {"email": "new2@example.com", "tags": ["x"]},
                {"email": "new1@example.com", "lastName": "Twice"},
                {"email": "new3@example.com"},
                {"email": "new4@example.com"}
            ]})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let r = a.data()["results"].as_array().unwrap();
    let summary: Vec<(u64, &str)> = r
        .iter()
        .map(|x| (x["index"].as_u64().unwrap(), x["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [
            (0, "updated"),
            (1, "created"),
            (2, "error"),
            (3, "created"),
            (4, "updated"),
            (5, "created"),
            (6, "error")
        ]
    );
    assert_eq!(r[0]["id"], json!(old_id));
    assert_eq!(r[0]["contact"]["firstName"], "Renewed");
    assert_eq!(
        r[0]["contact"]["score"], 3,
        "fields absent from the item are kept"
    );
    assert_eq!(r[2]["error"]["code"], "VALIDATION_ERROR");
    let mut bad: Vec<&str> = r[2]["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    bad.sort();
    assert_eq!(bad, ["email", "score"]);
    assert_eq!(r[4]["contact"]["lastName"], "Twice");
    assert_eq!(r[6]["error"]["code"], "PLAN_LIMIT_REACHED");
    assert_eq!(
        (
            a.data()["created"].as_u64(),
            a.data()["updated"].as_u64(),
            a.data()["failed"].as_u64()
        ),
        (Some(3), Some(2), Some(2))
    );

    // Create mode refuses existing e-mails item by item.
    let c = app
        .api(
            &key,
            Method::POST,
            "/acq/v1/contacts/batch",
            Some(json!({"mode": "create", "contacts": [{"email": "old@example.com"}]})),
        )
        .await;
    assert_eq!(c.data()["results"][0]["error"]["code"], "CONFLICT");
}

#[tokio::test]
async fn a_batch_whose_envelope_is_invalid_is_400_as_a_whole() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let too_many: Vec<Value> = (0..101)
        .map(|i| json!({"email": format!("m{i}@example.com")}))
        .collect();
    for (body, field, why) in [
        (
            json!({"mode": "create", "contacts": too_many}),
            "contacts",
            "101 items",
        ),
        (
            json!({"mode": "create", "contacts": []}),
            "contacts",
            "no items",
        ),
        (
            json!({"mode": "merge", "contacts": [{"email": "a@b.co"}]}),
            "mode",
            "unknown mode",
        ),
        (json!({"mode": "create"}), "contacts", "no contacts field"),
        (
            json!({"mode": "create", "contacts": [1]}),
            "contacts[0]",
            "item not an object",
        ),
    ] {
        let a = app
            .api(&key, Method::POST, "/acq/v1/contacts/batch", Some(body))
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field], "{why}");
    }
}

#[tokio::test]
async fn an_idempotency_key_replays_the_first_answer_and_refuses_another_body() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let send = |body: Value, idem: &'static str| {
        let key = key.clone();
        let app = &app;
        async move {
            app.send(
                Method::POST,
                "/acq/v1/contacts",
                &[("x-api-key", &key), ("idempotency-key", idem)],
                Some(body),
            )
            .await
        }
    };
    let first = send(json!({"email": "idem@example.com"}), "k-1").await;
    assert_eq!(first.status, 201);
    let replay = send(json!({"email": "idem@example.com"}), "k-1").await;
    assert_eq!(replay.status, 201, "{}", replay.body);
    assert_eq!(replay.data(), first.data());
    assert_eq!(replay.header("location"), first.header("location"));
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_ne!(
        replay.body["meta"]["requestId"],
        first.body["meta"]["requestId"]
    );
    send(json!({"email": "other@example.com"}), "k-1")
        .await
        .assert_error(409, "CONFLICT");
    // Without the header, a repeat is a duplicate.
    app.create_contact(&key, json!({"email": "idem@example.com"}))
        .await
        .assert_error(409, "CONFLICT");
    // A failed request is not kept: the same key may be retried once fixed.
    send(json!({"email": "bad"}), "k-2")
        .await
        .assert_error(400, "VALIDATION_ERROR");
    assert_eq!(send(json!({"email": "bad"}), "k-2").await.status, 400);
    // Keys are per app.
    let other = app.contacts_key("free").await;
    let a = app
        .send(
            Method::POST,
            "/acq/v1/contacts",
            &[("x-api-key", &other), ("idempotency-key", "k-1")],
            Some(json!({"email": "x@example.com"})),
        )
        .await;
    assert_eq!(a.status, 201);
    assert_ne!(a.data()["id"], first.data()["id"]);
}

#[tokio::test]
async fn an_idempotency_key_is_forgotten_a_day_later_on_the_servers_clock() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let first = post_once(
        &app,
        &key,
        "/acq/v1/contacts",
        "day-1",
        json!({"email": "a@example.com"}),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let other = json!({"email": "b@example.com"});
    post_once(&app, &key, "/acq/v1/contacts", "day-1", other.clone())
        .await
        .assert_error(409, "CONFLICT");
    // A day (idempotency_ttl_secs) passes on the server's clock, not the test's.
    app.clock.advance(86_400 * 1_000_000);
    let later = post_once(&app, &key, "/acq/v1/contacts", "day-1", other).await;
    assert_eq!(later.status, 201, "the key runs again: {}", later.body);
    let made = |a: &Answer| {
        let t = a.data()["createdAt"].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(t).unwrap()
    };
    let gap = made(&later) - made(&first);
    assert!(
        gap >= chrono::Duration::days(1)
            && gap < chrono::Duration::days(1) + chrono::Duration::minutes(1),
        "records carry the server's time: {gap}"
    );
}

/// Every key and value of every tree of the stopped server's store that contains `needle`.
fn stored_mentions(data_dir: &std::path::Path, needle: &str) -> Vec<String> {
    let db = crate::helpers::open_stopped_db(data_dir);
    let mut found = Vec::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name).unwrap();
        for kv in tree.iter() {
            let (k, v) = kv.unwrap();
            let text = format!(
                "{}={}",
                String::from_utf8_lossy(&k),
                String::from_utf8_lossy(&v)
            );
            if text.contains(needle) {
                found.push(format!("{}: {text}", String::from_utf8_lossy(&name)));
            }
        }
    }
    found
}

/// Polls `/metrics` until at least `n` changes went through the webhooks' fan-out.
async fn changes_fanned_out(app: &TestApp, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let done = crate::webhooks::metric(app, "tributary_webhook_events_total").await;
        if done >= n as f64 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{done} changes fanned out"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn post_once(app: &TestApp, key: &str, path: &str, idem: &str, body: Value) -> Answer {
    app.send(
        Method::POST,
        path,
        &[("x-api-key", key), ("idempotency-key", idem)],
        Some(body),
    )
    .await
}

#[tokio::test]
async fn deleting_a_contact_erases_the_idempotent_answers_that_held_it_even_after_a_restart() {
    let mut app = spawn_app();
    let key = app.contacts_key("free").await;
    let one = json!({"email": "erase.me@example.com", "phone": "+33 6 12 34 56 78"});
    let created = post_once(&app, &key, "/acq/v1/contacts", "erase-1", one.clone()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.data()["id"].as_str().unwrap().to_owned();
    let batch = json!({"mode": "create", "contacts": [
        {"email": "batch.erased@example.com", "phone": "+1 555 0199"},
        {"email": "batch.kept@example.com"}]});
    let first = post_once(
        &app,
        &key,
        "/acq/v1/contacts/batch",
        "erase-2",
        batch.clone(),
    )
    .await;
    assert_eq!(first.data()["created"], 2, "{}", first.body);
    let batch_id = first.data()["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for gone in [&id, &batch_id] {
        let a = app
            .api(
                &key,
                Method::DELETE,
                &format!("/acq/v1/contacts/{gone}"),
                None,
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    // The changes' events (3 created, 2 deleted, each with the contact) wait in the webhooks'
    // outbox only until fanned out; with no endpoint they are dropped.
    changes_fanned_out(&app, 5).await;
    app.stop().await;
    for needle in [
        "erase.me@example.com",
        "12 34 56 78",
        "batch.erased",
        "555 0199",
    ] {
        assert_eq!(stored_mentions(&app.data_dir, needle), Vec::<String>::new());
    }
    let app = app.restart().await;
    // The same requests run again (the client sends the data anew); nothing is replayed.
    let again = post_once(&app, &key, "/acq/v1/contacts", "erase-1", one).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.header("idempotent-replayed"), None);
    assert_ne!(again.data()["id"].as_str(), Some(id.as_str()));
    let location = again.header("location").unwrap().to_owned();
    assert_eq!(
        app.api(&key, Method::GET, &location, None).await.status,
        200
    );
    let again = post_once(&app, &key, "/acq/v1/contacts/batch", "erase-2", batch).await;
    assert_eq!(again.header("idempotent-replayed"), None);
    assert_eq!(again.data()["created"], 1, "{}", again.body);
    assert_ne!(
        again.data()["results"][0]["id"].as_str(),
        Some(batch_id.as_str())
    );
}

#[tokio::test]
async fn an_idempotent_replay_matches_the_same_json_with_other_spacing_and_key_order() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let send = |body: &'static str| {
        let (app, key) = (&app, key.clone());
        async move {
            app.raw(
                Method::POST,
                "/acq/v1/contacts",
                &[
                    ("x-api-key", &key),
                    ("idempotency-key", "canon-1"),
                    ("content-type", "application/json"),
                ],
                body.as_bytes().to_vec(),
            )
            .await
        }
    };
    let first =
        send(r#"{"email":"canon@example.com","tags":["a","b"],"customFields":{"x":1,"y":"z"}}"#)
            .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let replay = send("{\n  \"customFields\": {\"y\": \"z\", \"x\": 1},\n  \"tags\": [\"a\", \"b\"],\n  \"email\": \"canon@example.com\"\n}\n").await;
    assert_eq!(replay.status, 201, "{}", replay.body);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.data(), first.data());
    // Order inside an array is meaning, not form.
    send(r#"{"email":"canon@example.com","tags":["b","a"],"customFields":{"x":1,"y":"z"}}"#)
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn tags_with_a_comma_and_empty_filter_values_are_refused() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    let a = app
        .create_contact(
            &key,
            json!({"email": "comma@example.com", "tags": ["ok", "a,b"]}),
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["tags[1]"]);
    let c = app
        .create_contact(&key, json!({"email": "comma@example.com", "tags": ["ok"]}))
        .await;
    let id = c.data()["id"].as_str().unwrap().to_owned();
    let a = app
        .api(
            &key,
            Method::PATCH,
            &format!("/acq/v1/contacts/{id}"),
            Some(json!({"tags": ["x,y"]})),
        )
        .await;
    a.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(a.fields(), ["tags[0]"]);
    for (query, field) in [
        ("status=", "status"),
        ("status=new,", "status"),
        ("status=,new", "status"),
        ("source=api,,form", "source"),
        ("tag=", "tag"),
        ("tag=a,", "tag"),
        ("email=", "email"),
        ("companyId=", "companyId"),
        ("q=", "q"),
        ("q=%20%20", "q"),
        ("sort=", "sort"),
        ("limit=", "limit"),
    ] {
        let a = app
            .api(
                &key,
                Method::GET,
                &format!("/acq/v1/contacts?{query}"),
                None,
            )
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field], "{query}");
    }
    let a = app
        .api(
            &key,
            Method::GET,
            "/acq/v1/contacts?tag=ok,%20other%20",
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.data().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn sort_with_a_plus_is_ascending_whether_or_not_the_plus_is_encoded() {
    let app = spawn_app();
    let key = app.contacts_key("free").await;
    for (email, score) in [("b@x.io", 20), ("a@x.io", 10), ("c@x.io", 30)] {
        let a = app
            .create_contact(&key, json!({"email": email, "score": score}))
            .await;
        assert_eq!(a.status, 201);
    }
    for sort in ["score", "+score", "%2Bscore"] {
        let a = app
            .api(
                &key,
                Method::GET,
                &format!("/acq/v1/contacts?sort={sort}"),
                None,
            )
            .await;
        assert_eq!(a.status, 200, "{sort}: {}", a.body);
        let scores: Vec<i64> = a
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["score"].as_i64().unwrap())
            .collect();
        assert_eq!(scores, [10, 20, 30], "{sort}");
        let next = app
            .api(
                &key,
                Method::GET,
                &format!("/acq/v1/contacts?sort={sort}&limit=1"),
                None,
            )
            .await;
        let cursor = next.body["pagination"]["nextCursor"]
            .as_str()
            .unwrap()
            .to_owned();
        let page = app
            .api(
                &key,
                Method::GET,
                &format!("/acq/v1/contacts?sort={sort}&limit=1&cursor={cursor}"),
                None,
            )
            .await;
        assert_eq!(page.data()[0]["score"], 20, "{sort}: {}", page.body);
    }
    let a = app
        .api(&key, Method::GET, "/acq/v1/contacts?sort=-score", None)
        .await;
    assert_eq!(a.data()[0]["score"], 30);
}

#[tokio::test]
async fn every_way_of_writing_one_address_is_the_same_contact() {
    let app = spawn_app();
    let key = app.contacts_key("pro").await;
    let first = app
        .create_contact(&key, json!({"email": "kate.jose@ex\u{e1}mple.com"}))
        .await;
    assert_eq!(first.status.as_u16(), 201, "{}", first.body);
    assert_eq!(first.data()["email"], "kate.jose@xn--exmple-qta.com");
    // Fullwidth letters, the punycode domain, a decomposed accent: the same address.
    for same in [
        "\u{ff4b}ate.jose@ex\u{e1}mple.com",
        "kate.jose@xn--exmple-qta.com",
        "KATE.JOSE@EXA\u{301}MPLE.COM",
    ] {
        let again = app.create_contact(&key, json!({ "email": same })).await;
        again.assert_error(409, "CONFLICT");
        assert_eq!(again.fields(), ["email"], "{same}");
    }
    // The long s and the fi ligature are their letters.
    let sam = app
        .create_contact(&key, json!({"email": "sam.fisher@example.com"}))
        .await;
    assert_eq!(sam.status.as_u16(), 201, "{}", sam.body);
    for same in [
        "\u{17f}am.fisher@example.com",
        "sam.\u{fb01}sher@example.com",
    ] {
        let again = app.create_contact(&key, json!({ "email": same })).await;
        again.assert_error(409, "CONFLICT");
    }
    // The filter finds the contact under any of its forms.
    let found = app
        .api(
            &key,
            Method::GET,
            "/acq/v1/contacts?email=kate.jose@ex%C3%A1mple.com",
            None,
        )
        .await;
    assert_eq!(
        found.data().as_array().map(Vec::len),
        Some(1),
        "{}",
        found.body
    );
    // A domain with no IDNA form is a clear 400.
    let bad = app
        .create_contact(&key, json!({"email": "kate@xn--zz.com"}))
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["email"]);
}
