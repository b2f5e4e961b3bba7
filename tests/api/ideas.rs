//! Boards and `/api/v1/ideas`, end to end: fields, filters, sorts, cursors, votes, comments,
//! merge, permissions, plan limits, tenant isolation, concurrency and restart.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const ALL: [&str; 5] = [
    "ideas:read",
    "ideas:write",
    "ideas:moderate",
    "votes:write",
    "comments:write",
];

/// A fresh app on `plan`; returns (appId, key with every idea permission).
async fn ideas_app(app: &TestApp, plan: &str) -> (String, String) {
    let (id, _) = app.create_app(plan).await;
    let key = app.create_key(&id, &ALL).await.1;
    (id, key)
}

fn author(n: u32) -> Value {
    json!({"id": format!("user_{n}"), "name": format!("User {n}"), "email": format!("user{n}@example.com")})
}

async fn new_idea(app: &TestApp, key: &str, body: Value) -> Value {
    let a = app
        .api(key, Method::POST, "/api/v1/ideas", Some(body))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    a.data().clone()
}

async fn idea_titled(app: &TestApp, key: &str, title: &str) -> String {
    let d = new_idea(app, key, json!({"title": title, "author": author(1)})).await;
    d["id"].as_str().unwrap().to_owned()
}

async fn vote(app: &TestApp, key: &str, idea: &str, voter: Value) -> Answer {
    app.api(
        key,
        Method::POST,
        &format!("/api/v1/ideas/{idea}/votes"),
        Some(json!({"voter": voter})),
    )
    .await
}

async fn get(app: &TestApp, key: &str, path: &str) -> Value {
    let a = app.api(key, Method::GET, path, None).await;
    assert_eq!(a.status, 200, "{path}: {}", a.body);
    a.data().clone()
}

/// The default board's statuses by name -> id.
async fn statuses(app: &TestApp, key: &str) -> std::collections::HashMap<String, String> {
    get(app, key, "/api/v1/idea-statuses")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn default_board(app: &TestApp, key: &str) -> String {
    get(app, key, "/api/v1/boards").await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn admin_item(app: &TestApp, app_id: &str, board: &str, part: &str, body: Value) -> Value {
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/boards/{board}/{part}"),
            Some(body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    a.data().clone()
}

async fn send(app: &TestApp, key: &str, method: Method, path: &str, body: Value) -> Answer {
    app.api(key, method, path, Some(body)).await
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> Answer {
    app.api(key, Method::POST, path, Some(body)).await
}

async fn merge(app: &TestApp, key: &str, from: &str, into: Value) -> Answer {
    send(
        app,
        key,
        Method::POST,
        &format!("/api/v1/ideas/{from}/merge"),
        json!({"intoId": into}),
    )
    .await
}

fn ids_of(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn every_field_of_an_idea_is_present_and_typed() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let board = default_board(&app, &key).await;
    let topic = admin_item(
        &app,
        &app_id,
        &board,
        "topics",
        json!({"name": "Integrations"}),
    )
    .await;
    let tag = admin_item(
        &app,
        &app_id,
        &board,
        "tags",
        json!({"name": "api", "color": "#112233"}),
    )
    .await;
    let body = json!({"title": "  Dark mode  ", "description": "Please\nadd it", "topicId": topic["id"],
                      "tagIds": [tag["id"]], "author": {"id": "u1", "name": "Ada", "email": " Ada@Example.COM "}});
    let created = app
        .api(&key, Method::POST, "/api/v1/ideas", Some(body))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let d = created.data();
    let id = d["id"].as_str().unwrap();
    assert_eq!(
        created.header("location"),
        Some(format!("/api/v1/ideas/{id}").as_str())
    );
    assert_eq!(id.len(), 24);
    assert_eq!(d["title"], "Dark mode");
    assert_eq!(d["description"], "Please\nadd it");
    assert_eq!(d["status"]["name"], "Open");
    assert_eq!(d["status"]["color"], "#9ca3af");
    assert!(d["status"]["id"].is_string());
    assert_eq!(
        d["topic"],
        json!({"id": topic["id"], "name": "Integrations"})
    );
    assert_eq!(d["tags"], json!([{"id": tag["id"], "name": "api"}]));
    assert_eq!(
        (d["voteCount"].as_u64(), d["commentCount"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        d["author"],
        json!({"id": "u1", "name": "Ada", "email": "ada@example.com"})
    );
    for t in ["createdAt", "updatedAt"] {
        let s = d[t].as_str().unwrap();
        assert!(
            s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok(),
            "{t}: {s}"
        );
    }
    assert_eq!(&get(&app, &key, &format!("/api/v1/ideas/{id}")).await, d);
    let bare = new_idea(&app, &key, json!({"title": "Bare", "author": author(2)})).await;
    assert!(bare.get("topic").is_none() && bare.get("description").is_none());
    assert_eq!(bare["tags"], json!([]));
}

#[tokio::test]
async fn every_app_starts_with_a_default_board_and_the_default_statuses() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let boards = get(&app, &key, "/api/v1/boards").await;
    assert_eq!(boards.as_array().unwrap().len(), 1);
    assert_eq!(boards[0]["isDefault"], true);
    let s = get(&app, &key, "/api/v1/idea-statuses").await;
    let names: Vec<&str> = s
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Open",
            "Under review",
            "Planned",
            "In progress",
            "Completed",
            "Declined",
            "Duplicate"
        ]
    );
    assert_eq!(s[4]["kind"], "closed");
    assert_eq!(s[0]["color"], "#9ca3af");
    assert_eq!(get(&app, &key, "/api/v1/topics").await, json!([]));
    assert_eq!(get(&app, &key, "/api/v1/tags").await, json!([]));
    let admin = app
        .admin(Method::GET, &format!("/apps/{app_id}/boards"), None)
        .await;
    assert_eq!(admin.data()[0]["id"], boards[0]["id"]);
    let unknown = app
        .api(
            &key,
            Method::GET,
            "/api/v1/topics?boardId=0123456789abcdef01234567",
            None,
        )
        .await;
    unknown.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn the_board_limit_of_the_plan_counts_the_default_board() {
    let app = spawn_app();
    let (free, _) = ideas_app(&app, "free").await;
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{free}/boards"),
            Some(json!({"name": "Second"})),
        )
        .await;
    a.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "boards", "message": "limit 1, current 1"}])
    );
    let (pro, key) = ideas_app(&app, "pro").await;
    let b = app
        .admin(
            Method::POST,
            &format!("/apps/{pro}/boards"),
            Some(json!({"name": "Mobile", "description": "iOS"})),
        )
        .await;
    assert_eq!(b.status, 201, "{}", b.body);
    assert_eq!(b.data()["isDefault"], false);
    let id = b.data()["id"].as_str().unwrap();
    let p = app
        .admin(
            Method::PATCH,
            &format!("/apps/{pro}/boards/{id}"),
            Some(json!({"name": "Apps", "description": null})),
        )
        .await;
    assert_eq!(
        (
            p.status.as_u16(),
            &p.data()["name"],
            &p.data()["description"]
        ),
        (200, &json!("Apps"), &json!(null))
    );
    assert_eq!(
        get(&app, &key, "/api/v1/boards")
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let page = app
        .api(&key, Method::GET, "/api/v1/boards?limit=1", None)
        .await;
    assert_eq!(page.body["pagination"]["hasMore"], true);
    let bad = app
        .admin(
            Method::POST,
            &format!("/apps/{pro}/boards"),
            Some(json!({"name": "", "x": 1})),
        )
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["name", "x"]);
}

#[tokio::test]
async fn the_board_limit_comes_from_configuration() {
    let app = spawn_app_with(|s| s.plans.pro.boards = 2);
    let (pro, _) = ideas_app(&app, "pro").await;
    let path = format!("/apps/{pro}/boards");
    let a = app
        .admin(Method::POST, &path, Some(json!({"name": "Second"})))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let a = app
        .admin(Method::POST, &path, Some(json!({"name": "Third"})))
        .await;
    a.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(a.fields(), ["boards"]);
}

#[tokio::test]
async fn statuses_are_created_renamed_recoloured_reordered_and_kept_while_in_use() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let board = default_board(&app, &key).await;
    let base = format!("/apps/{app_id}/boards/{board}/statuses");
    for (body, fields) in [
        (json!({"name": "X"}), vec!["color"]),
        (json!({"name": "X", "color": "red"}), vec!["color"]),
        (
            json!({"color": "#aabbcc", "kind": "maybe"}),
            vec!["kind", "name"],
        ),
        (
            json!({"name": "X", "color": "#aabbcc", "position": "first"}),
            vec!["position"],
        ),
    ] {
        let a = app.admin(Method::POST, &base, Some(body)).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), fields);
    }
    let s = admin_item(
        &app,
        &app_id,
        &board,
        "statuses",
        json!({"name": "Shipped", "color": "#00AA00", "kind": "closed", "position": 1}),
    )
    .await;
    assert_eq!(
        (&s["color"], &s["position"], &s["kind"]),
        (&json!("#00aa00"), &json!(1), &json!("closed"))
    );
    let dup = app
        .admin(
            Method::POST,
            &base,
            Some(json!({"name": "shipped", "color": "#000000"})),
        )
        .await;
    dup.assert_error(409, "CONFLICT");
    let sid = s["id"].as_str().unwrap();
    let p = app
        .admin(
            Method::PATCH,
            &format!("{base}/{sid}"),
            Some(json!({"name": "Live", "color": "#123456", "position": 0})),
        )
        .await;
    assert_eq!(
        (p.status.as_u16(), &p.data()["name"], &p.data()["position"]),
        (200, &json!("Live"), &json!(0))
    );
    let list = get(&app, &key, "/api/v1/idea-statuses").await;
    assert_eq!(list[0]["id"], s["id"]);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .all(|(i, s)| s["position"] == json!(i)));
    let idea = idea_titled(&app, &key, "Uses the status").await;
    let moved = app
        .api(
            &key,
            Method::PATCH,
            &format!("/api/v1/ideas/{idea}"),
            Some(json!({"statusId": sid})),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    app.admin(Method::DELETE, &format!("{base}/{sid}"), None)
        .await
        .assert_error(409, "CONFLICT");
    let open = &list[1]["id"];
    app.admin(
        Method::DELETE,
        &format!("{base}/{}", open.as_str().unwrap()),
        None,
    )
    .await
    .assert_error(409, "CONFLICT");
    app.api(&key, Method::DELETE, &format!("/api/v1/ideas/{idea}"), None)
        .await;
    let gone = app
        .admin(Method::DELETE, &format!("{base}/{sid}"), None)
        .await;
    assert_eq!(gone.data(), &json!({"id": sid, "deleted": true}));
    app.admin(Method::DELETE, &format!("{base}/{sid}"), None)
        .await
        .assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn renaming_a_status_a_topic_or_a_tag_shows_in_every_idea() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let board = default_board(&app, &key).await;
    let topic = admin_item(&app, &app_id, &board, "topics", json!({"name": "Old"})).await;
    let tag = admin_item(&app, &app_id, &board, "tags", json!({"name": "old"})).await;
    let body = json!({"title": "Joined", "author": author(1), "topicId": topic["id"], "tagIds": [tag["id"]]});
    let idea = new_idea(&app, &key, body).await;
    let b = format!("/apps/{app_id}/boards/{board}");
    let open = idea["status"]["id"].as_str().unwrap();
    for (path, body) in [
        (
            format!("{b}/topics/{}", topic["id"].as_str().unwrap()),
            json!({"name": "New"}),
        ),
        (
            format!("{b}/tags/{}", tag["id"].as_str().unwrap()),
            json!({"name": "new", "color": null}),
        ),
        (
            format!("{b}/statuses/{open}"),
            json!({"name": "Fresh", "color": "#ABCDEF"}),
        ),
    ] {
        let a = app.admin(Method::PATCH, &path, Some(body)).await;
        assert_eq!(a.status, 200, "{path}: {}", a.body);
    }
    let now = get(
        &app,
        &key,
        &format!("/api/v1/ideas/{}", idea["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (&now["topic"]["name"], &now["tags"][0]["name"]),
        (&json!("New"), &json!("new"))
    );
    assert_eq!(
        now["status"],
        json!({"id": open, "name": "Fresh", "color": "#abcdef"})
    );
    let taken = app
        .admin(
            Method::PATCH,
            &format!("{b}/statuses/{open}"),
            Some(json!({"name": "planned"})),
        )
        .await;
    taken.assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn creating_an_idea_with_invalid_fields_reports_each_field() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let missing = "0123456789abcdef01234567";
    let cases = [
        (json!({}), vec!["author", "title"], "nothing"),
        (
            json!({"title": "ab", "author": author(1)}),
            vec!["title"],
            "title too short",
        ),
        (
            json!({"title": "x".repeat(151), "author": author(1)}),
            vec!["title"],
            "title too long",
        ),
        (
            json!({"title": 5, "author": author(1)}),
            vec!["title"],
            "title not a string",
        ),
        (
            json!({"title": "Good", "description": "d".repeat(10_001), "author": author(1)}),
            vec!["description"],
            "long description",
        ),
        (
            json!({"title": "Good", "author": {"id": "u", "name": "N", "email": "nope"}}),
            vec!["author.email"],
            "bad e-mail",
        ),
        (
            json!({"title": "Good", "author": "me"}),
            vec!["author"],
            "author not an object",
        ),
        (
            json!({"title": "Good", "author": author(1), "tagIds": "a"}),
            vec!["tagIds"],
            "tags not an array",
        ),
        (
            json!({"title": "Good", "author": author(1), "voteCount": 9}),
            vec!["voteCount"],
            "read-only field",
        ),
        (
            json!({"title": "Good", "author": author(1), "createdAt": "2999-01-01T00:00:00Z"}),
            vec!["createdAt"],
            "future",
        ),
        (
            json!({"title": "Good", "author": author(1), "boardId": missing}),
            vec!["boardId"],
            "unknown board",
        ),
        (
            json!({"title": "Good", "author": author(1), "topicId": missing}),
            vec!["topicId"],
            "unknown topic",
        ),
        (
            json!({"title": "Good", "author": author(1), "tagIds": [missing]}),
            vec!["tagIds"],
            "unknown tag",
        ),
    ];
    for (body, fields, why) in cases {
        let a = app
            .api(&key, Method::POST, "/api/v1/ideas", Some(body))
            .await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), fields, "{why}: {}", a.body);
    }
}

#[tokio::test]
async fn each_filter_and_each_sort_of_the_list() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "pro").await;
    let board = default_board(&app, &key).await;
    let topic =
        admin_item(&app, &app_id, &board, "topics", json!({"name": "UX"})).await["id"].clone();
    let tag =
        admin_item(&app, &app_id, &board, "tags", json!({"name": "mobile"})).await["id"].clone();
    let b2 = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/boards"),
            Some(json!({"name": "Other"})),
        )
        .await;
    let b2 = b2.data()["id"].as_str().unwrap().to_owned();
    let a = new_idea(
        &app,
        &key,
        json!({"title": "Crème brûlée export", "author": author(1), "topicId": topic}),
    )
    .await;
    let b = new_idea(&app, &key, json!({"title": "Calendar sync", "description": "Like CRÈME", "author": author(2), "tagIds": [tag]})).await;
    let c = new_idea(
        &app,
        &key,
        json!({"title": "Other board idea", "author": author(2), "boardId": b2}),
    )
    .await;
    let (a, b, c) = (
        a["id"].as_str().unwrap(),
        b["id"].as_str().unwrap(),
        c["id"].as_str().unwrap(),
    );
    for n in 0..3 {
        assert_eq!(
            vote(&app, &key, b, json!({"id": format!("v{n}")}))
                .await
                .status,
            201
        );
    }
    assert_eq!(vote(&app, &key, c, json!({"id": "v0"})).await.status, 201);
    let comment = json!({"content": "+1", "author": author(3)});
    app.api(
        &key,
        Method::POST,
        &format!("/api/v1/ideas/{c}/comments"),
        Some(comment),
    )
    .await;
    let planned = &statuses(&app, &key).await["Planned"];
    app.api(
        &key,
        Method::PATCH,
        &format!("/api/v1/ideas/{a}"),
        Some(json!({"statusId": planned})),
    )
    .await;
    let q = |s: &str| format!("/api/v1/ideas?{s}");
    let cases = [
        (q(&format!("boardId={board}&sort=createdAt")), vec![a, b]),
        (q(&format!("boardId={b2}")), vec![c]),
        (q(&format!("status={planned}")), vec![a]),
        (q(&format!("topicId={}", topic.as_str().unwrap())), vec![a]),
        (q(&format!("tag={}", tag.as_str().unwrap())), vec![b]),
        (q("authorId=user_2&sort=createdAt"), vec![b, c]),
        (q("q=creme&sort=createdAt"), vec![a, b]),
        (q("q=BRULEE"), vec![a]),
        (q("sort=-voteCount"), vec![b, c, a]),
        (q("sort=-commentCount&limit=1"), vec![c]),
        (q("sort=createdAt"), vec![a, b, c]),
        (q("sort=-createdAt"), vec![c, b, a]),
        (q("sort=-updatedAt&limit=1"), vec![a]),
        (q("sort=trending"), vec![b, c, a]),
        (q("sort=voteCount"), vec![a, c, b]),
        (q("sort=commentCount"), vec![a, b, c]),
        (q("sort=updatedAt"), vec![b, c, a]),
    ];
    for (path, want) in cases {
        assert_eq!(ids_of(&get(&app, &key, &path).await), want, "{path}");
    }
    for (query, field) in [
        ("sort=title", "sort"),
        ("status=nope", "status"),
        ("limit=0", "limit"),
        ("cursor=zzz", "cursor"),
        ("tag=0123456789abcdef01234567", "tag"),
        ("color=red", "color"),
    ] {
        let a = app.api(&key, Method::GET, &q(query), None).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field], "{query}");
    }
}

#[tokio::test]
async fn trending_ranks_a_fresh_idea_with_many_votes_above_an_old_one_with_the_same_votes() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let month_ago = (chrono::Utc::now() - chrono::Duration::days(30)).to_rfc3339();
    let old = new_idea(
        &app,
        &key,
        json!({"title": "Old favourite", "author": author(1), "createdAt": month_ago}),
    )
    .await;
    let old = old["id"].as_str().unwrap().to_owned();
    let fresh = idea_titled(&app, &key, "Fresh request").await;
    let quiet = idea_titled(&app, &key, "Quiet one").await;
    for n in 0..5 {
        let body = json!({"voter": {"id": format!("o{n}")}, "createdAt": month_ago});
        let a = app
            .api(
                &key,
                Method::POST,
                &format!("/api/v1/ideas/{old}/votes"),
                Some(body),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        assert_eq!(
            vote(&app, &key, &fresh, json!({"id": format!("f{n}")}))
                .await
                .status,
            201
        );
    }
    let list = get(&app, &key, "/api/v1/ideas?sort=trending").await;
    assert_eq!(ids_of(&list), [fresh.clone(), old.clone(), quiet]);
    assert_eq!(list[0]["voteCount"], list[1]["voteCount"]);
    let by_votes = get(&app, &key, "/api/v1/ideas?sort=-voteCount&limit=2").await;
    assert_eq!(
        ids_of(&by_votes).into_iter().collect::<HashSet<_>>(),
        HashSet::from([fresh, old])
    );
}

#[tokio::test]
async fn a_cursor_walk_over_250_ideas_never_repeats_or_skips_while_votes_arrive() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "pro").await;
    let mut all = Vec::new();
    for n in 0..250 {
        all.push(idea_titled(&app, &key, &format!("Idea number {n}")).await);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut round = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/ideas?limit=30&cursor={c}"),
            None => "/api/v1/ideas?limit=30".into(),
        };
        let page = app.api(&key, Method::GET, &path, None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        seen.extend(ids_of(page.data()));
        for n in 0..5 {
            let target = &all[(round * 37 + n * 11) % all.len()];
            assert_eq!(
                vote(&app, &key, target, json!({"id": format!("r{round}n{n}")}))
                    .await
                    .status,
                201
            );
        }
        round += 1;
        match page.body["pagination"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 250);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 250);
    all.reverse();
    assert_eq!(seen, all, "newest first, each once");
}

#[tokio::test]
async fn voting_twice_by_id_or_by_email_is_409_and_votes_can_be_listed_and_removed() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Votable").await;
    let first = vote(&app, &key, &idea, json!({"id": "u1", "name": "Ann"})).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let v = first.data();
    assert_eq!(
        (&v["ideaId"], &v["voter"]),
        (
            &json!(idea),
            &json!({"id": "u1", "name": "Ann", "email": null})
        )
    );
    vote(&app, &key, &idea, json!({"id": "u1"}))
        .await
        .assert_error(409, "CONFLICT");
    assert_eq!(
        vote(&app, &key, &idea, json!({"email": "Bob@Example.com"}))
            .await
            .status,
        201
    );
    vote(
        &app,
        &key,
        &idea,
        json!({"id": "other", "email": " bob@example.COM"}),
    )
    .await
    .assert_error(409, "CONFLICT");
    for (voter, field) in [
        (json!({}), "voter"),
        (json!({"email": "x"}), "voter.email"),
        (json!({"id": 5}), "voter.id"),
    ] {
        let a = vote(&app, &key, &idea, voter).await;
        a.assert_error(400, "VALIDATION_ERROR");
        assert_eq!(a.fields(), [field]);
    }
    let list = app
        .api(
            &key,
            Method::GET,
            &format!("/api/v1/ideas/{idea}/votes?limit=1"),
            None,
        )
        .await;
    assert_eq!(
        (
            list.data().as_array().unwrap().len(),
            &list.body["pagination"]["hasMore"]
        ),
        (1, &json!(true))
    );
    let cursor = list.body["pagination"]["nextCursor"].as_str().unwrap();
    let rest = get(
        &app,
        &key,
        &format!("/api/v1/ideas/{idea}/votes?cursor={cursor}"),
    )
    .await;
    assert_eq!(rest.as_array().unwrap().len(), 1);
    let vid = v["id"].as_str().unwrap();
    let del = app
        .api(
            &key,
            Method::DELETE,
            &format!("/api/v1/ideas/{idea}/votes/{vid}"),
            None,
        )
        .await;
    assert_eq!(del.data(), &json!({"id": vid, "deleted": true}));
    app.api(
        &key,
        Method::DELETE,
        &format!("/api/v1/ideas/{idea}/votes/{vid}"),
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    assert_eq!(
        get(&app, &key, &format!("/api/v1/ideas/{idea}")).await["voteCount"],
        1
    );
    assert_eq!(
        vote(&app, &key, &idea, json!({"id": "u1"})).await.status,
        201,
        "the voter may vote again"
    );
}

#[tokio::test]
async fn an_idempotency_key_replays_a_vote_instead_of_answering_409() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Retried").await;
    let path = format!("/api/v1/ideas/{idea}/votes");
    let headers = [("x-api-key", key.as_str()), ("idempotency-key", "vote-1")];
    let body = json!({"voter": {"id": "u1"}});
    let first = app
        .send(Method::POST, &path, &headers, Some(body.clone()))
        .await;
    let again = app.send(Method::POST, &path, &headers, Some(body)).await;
    assert_eq!(
        (first.status.as_u16(), again.status.as_u16()),
        (201, 201),
        "{}",
        again.body
    );
    assert_eq!(first.data(), again.data());
    assert_eq!(
        get(&app, &key, &format!("/api/v1/ideas/{idea}")).await["voteCount"],
        1
    );
    vote(&app, &key, &idea, json!({"id": "u1"}))
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn a_deleted_vote_or_comment_is_not_replayed_by_its_idempotency_key() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Retried after a delete").await;
    for (part, body) in [
        ("votes", json!({"voter": {"id": "u1"}})),
        ("comments", json!({"content": "Hi", "author": author(1)})),
    ] {
        let path = format!("/api/v1/ideas/{idea}/{part}");
        let headers = [("x-api-key", key.as_str()), ("idempotency-key", part)];
        let first = app
            .send(Method::POST, &path, &headers, Some(body.clone()))
            .await;
        assert_eq!(first.status.as_u16(), 201, "{}", first.body);
        let id = first.data()["id"].as_str().unwrap().to_owned();
        let gone = app
            .api(&key, Method::DELETE, &format!("{path}/{id}"), None)
            .await;
        assert_eq!(gone.status, 200, "{}", gone.body);
        // The repeat runs again: a replay would show the deleted record.
        let again = app.send(Method::POST, &path, &headers, Some(body)).await;
        assert_eq!(again.status.as_u16(), 201, "{}", again.body);
        assert!(again.headers.get("idempotent-replayed").is_none());
        assert_ne!(again.data()["id"], json!(id), "{part}");
    }
}

#[tokio::test]
async fn a_vote_on_an_idea_in_a_closed_status_is_409() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Done already").await;
    let done = &statuses(&app, &key).await["Completed"];
    let a = app
        .api(
            &key,
            Method::PATCH,
            &format!("/api/v1/ideas/{idea}"),
            Some(json!({"statusId": done})),
        )
        .await;
    assert_eq!(a.data()["status"]["name"], "Completed");
    vote(&app, &key, &idea, json!({"id": "late"}))
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn a_status_change_needs_ideas_moderate_and_is_kept_in_the_history() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let writer = app
        .create_key(&app_id, &["ideas:read", "ideas:write"])
        .await
        .1;
    let idea = idea_titled(&app, &key, "Track me").await;
    let s = statuses(&app, &key).await;
    let path = format!("/api/v1/ideas/{idea}");
    let a = app
        .api(
            &writer,
            Method::PATCH,
            &path,
            Some(json!({"statusId": s["Planned"]})),
        )
        .await;
    a.assert_error(403, "FORBIDDEN");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "permission", "message": "ideas:moderate required"}])
    );
    let t = app
        .api(
            &writer,
            Method::PATCH,
            &path,
            Some(json!({"title": "Track me please", "description": null})),
        )
        .await;
    assert_eq!(t.data()["title"], "Track me please");
    for st in ["Planned", "In progress"] {
        assert_eq!(
            app.api(&key, Method::PATCH, &path, Some(json!({"statusId": s[st]})))
                .await
                .status,
            200
        );
    }
    let bad = app
        .api(
            &key,
            Method::PATCH,
            &path,
            Some(json!({"statusId": "0123456789abcdef01234567", "title": 1})),
        )
        .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(
        bad.fields(),
        ["title"],
        "the body is checked before the ids"
    );
    let bad = app
        .api(
            &key,
            Method::PATCH,
            &path,
            Some(json!({"statusId": "0123456789abcdef01234567"})),
        )
        .await;
    assert_eq!(bad.fields(), ["statusId"]);
    let h = get(&app, &key, &format!("{path}/status-history")).await;
    assert_eq!(h.as_array().unwrap().len(), 2);
    assert_eq!(h[0]["from"]["name"], "Open");
    assert_eq!(
        h[0]["to"],
        json!({"id": s["Planned"], "name": "Planned", "color": "#0096ff"})
    );
    assert_eq!(
        (&h[1]["from"]["name"], &h[1]["to"]["name"]),
        (&json!("Planned"), &json!("In progress"))
    );
    assert!(h[0]["changedAt"].is_string() && h[0]["ideaId"] == json!(idea));
    let reader = app.create_key(&app_id, &["ideas:read"]).await.1;
    app.api(
        &reader,
        Method::POST,
        "/api/v1/ideas",
        Some(json!({"title": "No", "author": author(1)})),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    vote(&app, &reader, &idea, json!({"id": "x"}))
        .await
        .assert_error(403, "FORBIDDEN");
    app.api(&reader, Method::DELETE, &path, None)
        .await
        .assert_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn a_moderator_key_changes_the_status_alone_and_a_writer_key_the_content_alone() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let moderator = app.create_key(&app_id, &["ideas:moderate"]).await.1;
    let idea = idea_titled(&app, &key, "Moderate me").await;
    let path = format!("/api/v1/ideas/{idea}");
    let review = &statuses(&app, &key).await["Under review"];
    let a = send(
        &app,
        &moderator,
        Method::PATCH,
        &path,
        json!({"statusId": review}),
    )
    .await;
    assert_eq!(a.data()["status"]["name"], "Under review", "{}", a.body);
    let both = json!({"statusId": review, "title": "Renamed idea"});
    send(&app, &moderator, Method::PATCH, &path, both)
        .await
        .assert_error(403, "FORBIDDEN");
    let none = app.create_key(&app_id, &["votes:write"]).await.1;
    let a = send(
        &app,
        &none,
        Method::PATCH,
        &path,
        json!({"title": "Renamed idea"}),
    )
    .await;
    a.assert_error(403, "FORBIDDEN");
}

#[tokio::test]
async fn the_plan_limit_on_ideas_answers_403_plan_limit_reached() {
    let app = spawn_app_with(|s| s.plans.free.ideas = 3);
    let (_, key) = ideas_app(&app, "free").await;
    for n in 0..3 {
        idea_titled(&app, &key, &format!("Idea {n}")).await;
    }
    let a = app
        .api(
            &key,
            Method::POST,
            "/api/v1/ideas",
            Some(json!({"title": "One more", "author": author(1)})),
        )
        .await;
    a.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        a.body["error"]["details"],
        json!([{"field": "ideas", "message": "limit 3, current 3"}])
    );
}

/// Every idea call of the owner's ids, for a key of another app.
fn foreign_calls(
    i: &str,
    (v, c): (&str, &str),
    idea: &str,
    mine: &str,
    board: &str,
) -> Vec<(Method, String, Option<Value>)> {
    vec![
        (Method::GET, i.to_owned(), None),
        (
            Method::PATCH,
            i.to_owned(),
            Some(json!({"title": "Stolen"})),
        ),
        (Method::GET, format!("{i}/status-history"), None),
        (Method::GET, format!("{i}/votes"), None),
        (
            Method::POST,
            format!("{i}/votes"),
            Some(json!({"voter": {"id": "x"}})),
        ),
        (Method::DELETE, format!("{i}/votes/{v}"), None),
        (Method::GET, format!("{i}/comments"), None),
        (
            Method::POST,
            format!("{i}/comments"),
            Some(json!({"content": "x", "author": author(1)})),
        ),
        (
            Method::PATCH,
            format!("{i}/comments/{c}"),
            Some(json!({"content": "x"})),
        ),
        (Method::DELETE, format!("{i}/comments/{c}"), None),
        (
            Method::POST,
            format!("{i}/merge"),
            Some(json!({"intoId": mine})),
        ),
        (
            Method::POST,
            format!("/api/v1/ideas/{mine}/merge"),
            Some(json!({"intoId": idea})),
        ),
        (
            Method::GET,
            format!("/api/v1/idea-statuses?boardId={board}"),
            None,
        ),
        (Method::GET, format!("/api/v1/topics?boardId={board}"), None),
        (Method::GET, format!("/api/v1/tags?boardId={board}"), None),
        (Method::DELETE, i.to_owned(), None),
    ]
}

#[tokio::test]
async fn a_key_of_another_app_gets_404_for_every_idea_and_board_on_every_verb() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let (_, other) = ideas_app(&app, "free").await;
    let board = default_board(&app, &key).await;
    let idea = idea_titled(&app, &key, "Private").await;
    let v = vote(&app, &key, &idea, json!({"id": "u"})).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let c = app
        .api(
            &key,
            Method::POST,
            &format!("/api/v1/ideas/{idea}/comments"),
            Some(json!({"content": "hi", "author": author(1)})),
        )
        .await;
    let c = c.data()["id"].as_str().unwrap().to_owned();
    let mine = idea_titled(&app, &other, "Mine").await;
    let i = format!("/api/v1/ideas/{idea}");
    for (method, path, body) in foreign_calls(&i, (&v, &c), &idea, &mine, &board) {
        let a = app.api(&other, method.clone(), &path, body).await;
        assert_eq!(a.status, 404, "{method} {path}: {}", a.body);
    }
    let listed = get(&app, &other, "/api/v1/ideas").await;
    assert_eq!(ids_of(&listed), [mine]);
    let post = app
        .api(
            &other,
            Method::POST,
            "/api/v1/ideas",
            Some(json!({"title": "Here", "author": author(1), "boardId": board})),
        )
        .await;
    post.assert_error(400, "VALIDATION_ERROR");
    let (stranger, _) = ideas_app(&app, "free").await;
    let a = app
        .admin(
            Method::GET,
            &format!("/apps/{stranger}/boards/{board}"),
            None,
        )
        .await;
    a.assert_error(404, "NOT_FOUND");
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{stranger}/boards/{board}/tags"),
            Some(json!({"name": "t"})),
        )
        .await;
    a.assert_error(404, "NOT_FOUND");
    assert_eq!(
        get(&app, &key, &i).await["voteCount"],
        1,
        "untouched in {app_id}"
    );
}

#[tokio::test]
async fn comments_are_threaded_listed_oldest_first_and_internal_ones_stay_internal() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let public = app
        .create_key(&app_id, &["ideas:read", "comments:write"])
        .await
        .1;
    let idea = idea_titled(&app, &key, "Discuss").await;
    let other = idea_titled(&app, &key, "Elsewhere").await;
    let path = format!("/api/v1/ideas/{idea}/comments");
    let root = post(
        &app,
        &public,
        &path,
        json!({"content": "First", "author": author(1)}),
    )
    .await;
    assert_eq!(root.status, 201, "{}", root.body);
    let root = root.data().clone();
    assert_eq!(
        (&root["parentId"], &root["internal"], &root["ideaId"]),
        (&json!(null), &json!(false), &json!(idea))
    );
    let reply = post(
        &app,
        &public,
        &path,
        json!({"content": "Reply", "author": author(2), "parentId": root["id"]}),
    )
    .await;
    assert_eq!(reply.data()["parentId"], root["id"]);
    post(
        &app,
        &public,
        &path,
        json!({"content": "secret", "author": author(1), "internal": true}),
    )
    .await
    .assert_error(403, "FORBIDDEN");
    assert_eq!(
        send(
            &app,
            &key,
            Method::POST,
            &path,
            json!({"content": "Team note", "author": author(9), "internal": true})
        )
        .await
        .status,
        201
    );
    let foreign = app
        .api(
            &key,
            Method::POST,
            &format!("/api/v1/ideas/{other}/comments"),
            Some(json!({"content": "x", "author": author(1)})),
        )
        .await;
    let bad = post(
        &app,
        &public,
        &path,
        json!({"content": "x", "author": author(1), "parentId": foreign.data()["id"]}),
    )
    .await;
    bad.assert_error(400, "VALIDATION_ERROR");
    assert_eq!(bad.fields(), ["parentId"]);
    let bad = post(
        &app,
        &public,
        &path,
        json!({"content": "", "author": author(1), "internal": "no"}),
    )
    .await;
    assert_eq!(bad.fields(), ["content", "internal"]);
    let seen = get(&app, &public, &path).await;
    assert_eq!(
        seen.as_array()
            .unwrap()
            .iter()
            .map(|c| c["content"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["First", "Reply"]
    );
    assert_eq!(get(&app, &key, &path).await.as_array().unwrap().len(), 3);
    assert_eq!(
        get(&app, &public, &format!("/api/v1/ideas/{idea}")).await["commentCount"],
        2
    );
}

#[tokio::test]
async fn a_comment_is_edited_by_its_author_or_a_moderator_and_deleted_by_a_moderator() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let public = app
        .create_key(&app_id, &["ideas:read", "comments:write"])
        .await
        .1;
    let idea = idea_titled(&app, &key, "Discuss").await;
    let path = format!("/api/v1/ideas/{idea}/comments");
    let root = post(
        &app,
        &public,
        &path,
        json!({"content": "First", "author": author(1)}),
    )
    .await;
    let one = format!("{path}/{}", root.data()["id"].as_str().unwrap());
    let hijack = json!({"content": "Hijack", "author": {"id": "user_2"}});
    send(&app, &public, Method::PATCH, &one, hijack)
        .await
        .assert_error(403, "FORBIDDEN");
    let mine = json!({"content": "First, edited", "author": {"id": "user_1"}});
    let ok = send(&app, &public, Method::PATCH, &one, mine).await;
    assert_eq!(ok.data()["content"], "First, edited");
    let by_moderator = send(
        &app,
        &key,
        Method::PATCH,
        &one,
        json!({"content": "Tidied"}),
    )
    .await;
    assert_eq!(by_moderator.data()["content"], "Tidied");
    let empty = send(&app, &key, Method::PATCH, &one, json!({"content": " "})).await;
    empty.assert_error(400, "VALIDATION_ERROR");
    let internal = json!({"content": "Team", "author": author(9), "internal": true});
    let note = post(&app, &key, &path, internal).await;
    let note = format!("{path}/{}", note.data()["id"].as_str().unwrap());
    let peek = json!({"content": "x", "author": {"id": "user_9"}});
    send(&app, &public, Method::PATCH, &note, peek)
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(&public, Method::DELETE, &one, None)
        .await
        .assert_error(403, "FORBIDDEN");
    assert_eq!(app.api(&key, Method::DELETE, &one, None).await.status, 200);
    app.api(&key, Method::DELETE, &one, None)
        .await
        .assert_error(404, "NOT_FOUND");
    assert_eq!(
        get(&app, &key, &format!("/api/v1/ideas/{idea}")).await["commentCount"],
        0
    );
}

#[tokio::test]
async fn deleting_an_idea_removes_its_votes_and_comments_and_a_repeat_is_404() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Short lived").await;
    vote(&app, &key, &idea, json!({"id": "a"})).await;
    app.api(
        &key,
        Method::POST,
        &format!("/api/v1/ideas/{idea}/comments"),
        Some(json!({"content": "c", "author": author(1)})),
    )
    .await;
    let path = format!("/api/v1/ideas/{idea}");
    let d = app.api(&key, Method::DELETE, &path, None).await;
    assert_eq!(d.data(), &json!({"id": idea, "deleted": true}));
    app.api(&key, Method::DELETE, &path, None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.api(&key, Method::GET, &format!("{path}/votes"), None)
        .await
        .assert_error(404, "NOT_FOUND");
    assert_eq!(get(&app, &key, "/api/v1/ideas").await, json!([]));
    assert_eq!(idea_titled(&app, &key, "Count went down").await.len(), 24);
}

async fn vote_concurrently(app: &TestApp, key: &str, idea: &str, voters: Vec<Value>) -> Vec<u16> {
    let calls = voters.into_iter().map(|v| {
        let path = format!("/api/v1/ideas/{idea}/votes");
        async move {
            app.api(key, Method::POST, &path, Some(json!({"voter": v})))
                .await
                .status
                .as_u16()
        }
    });
    futures_util::future::join_all(calls).await
}

/// 100 votes on `idea`, 1 on `same`, 50 comments on `talk`, by the counts and by the records.
async fn check_counts(app: &TestApp, key: &str, [idea, same, talk]: [&str; 3]) {
    assert_eq!(
        get(app, key, &format!("/api/v1/ideas/{idea}")).await["voteCount"],
        100
    );
    assert_eq!(
        get(app, key, &format!("/api/v1/ideas/{same}")).await["voteCount"],
        1
    );
    assert_eq!(
        get(app, key, &format!("/api/v1/ideas/{talk}")).await["commentCount"],
        50
    );
    for (id, path, want) in [(idea, "votes", 100), (talk, "comments", 50)] {
        let mut n = 0;
        let mut cursor = String::new();
        loop {
            let page = app
                .api(
                    key,
                    Method::GET,
                    &format!("/api/v1/ideas/{id}/{path}?limit=30{cursor}"),
                    None,
                )
                .await;
            n += page.data().as_array().unwrap().len();
            match page.body["pagination"]["nextCursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => break,
            }
        }
        assert_eq!(n, want, "{path} records");
    }
}

#[tokio::test]
async fn counts_stay_exact_under_concurrency_and_after_a_restart() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "pro").await;
    let idea = idea_titled(&app, &key, "Popular").await;
    let statuses = vote_concurrently(
        &app,
        &key,
        &idea,
        (0..100)
            .map(|n| json!({"id": format!("voter{n}")}))
            .collect(),
    )
    .await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let same = idea_titled(&app, &key, "Contested").await;
    let statuses = vote_concurrently(
        &app,
        &key,
        &same,
        (0..20)
            .map(|_| json!({"email": "same@example.com"}))
            .collect(),
    )
    .await;
    assert_eq!(
        (
            statuses.iter().filter(|s| **s == 201).count(),
            statuses.iter().filter(|s| **s == 409).count()
        ),
        (1, 19)
    );
    let talk = idea_titled(&app, &key, "Talkative").await;
    let path = format!("/api/v1/ideas/{talk}/comments");
    let calls = (0..50).map(|n| {
        app.api(
            &key,
            Method::POST,
            &path,
            Some(json!({"content": format!("c{n}"), "author": author(n)})),
        )
    });
    assert!(futures_util::future::join_all(calls)
        .await
        .iter()
        .all(|a| a.status == 201));
    check_counts(&app, &key, [&idea, &same, &talk]).await;
    let app = app.restart().await;
    check_counts(&app, &key, [&idea, &same, &talk]).await;
}

#[tokio::test]
async fn merging_unions_voters_moves_comments_and_marks_the_source_duplicate() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let source = idea_titled(&app, &key, "Export to CSV").await;
    let target = idea_titled(&app, &key, "Export data").await;
    for v in [
        json!({"id": "a"}),
        json!({"id": "b", "email": "b@x.co"}),
        json!({"email": "c@x.co"}),
    ] {
        assert_eq!(vote(&app, &key, &source, v).await.status, 201);
    }
    for v in [
        json!({"id": "a"}),
        json!({"email": "B@x.co"}),
        json!({"id": "d"}),
    ] {
        assert_eq!(vote(&app, &key, &target, v).await.status, 201);
    }
    let cpath = format!("/api/v1/ideas/{source}/comments");
    app.api(
        &key,
        Method::POST,
        &cpath,
        Some(json!({"content": "from source", "author": author(1)})),
    )
    .await;
    app.api(
        &key,
        Method::POST,
        &cpath,
        Some(json!({"content": "internal", "author": author(1), "internal": true})),
    )
    .await;
    merge(&app, &key, &source, json!(source))
        .await
        .assert_error(400, "VALIDATION_ERROR");
    merge(&app, &key, &source, json!("0123456789abcdef01234567"))
        .await
        .assert_error(404, "NOT_FOUND");
    let m = merge(&app, &key, &source, json!(target)).await;
    assert_eq!(m.status, 200, "{}", m.body);
    assert_eq!(
        (
            &m.data()["id"],
            &m.data()["voteCount"],
            &m.data()["commentCount"]
        ),
        (&json!(target), &json!(4), &json!(1))
    );
    let s = get(&app, &key, &format!("/api/v1/ideas/{source}")).await;
    assert_eq!(
        (&s["status"]["name"], &s["mergedIntoId"], &s["commentCount"]),
        (&json!("Duplicate"), &json!(target), &json!(0))
    );
    assert_eq!(
        get(&app, &key, &format!("/api/v1/ideas/{source}/votes"))
            .await
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let moved = get(&app, &key, &format!("/api/v1/ideas/{target}/comments")).await;
    assert_eq!(
        moved
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["ideaId"].as_str().unwrap())
            .collect::<HashSet<_>>(),
        HashSet::from([target.as_str()])
    );
    assert_eq!(moved.as_array().unwrap().len(), 2);
    let h = get(
        &app,
        &key,
        &format!("/api/v1/ideas/{source}/status-history"),
    )
    .await;
    assert_eq!(h[0]["to"]["name"], "Duplicate");
    merge(&app, &key, &source, json!(target))
        .await
        .assert_error(409, "CONFLICT");
    let third = idea_titled(&app, &key, "Third").await;
    merge(&app, &key, &third, json!(source))
        .await
        .assert_error(409, "CONFLICT");
    vote(&app, &key, &source, json!({"id": "z"}))
        .await
        .assert_error(409, "CONFLICT");
}

#[tokio::test]
async fn counts_stay_exact_when_votes_race_a_merge() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "pro").await;
    let source = idea_titled(&app, &key, "Source").await;
    let target = idea_titled(&app, &key, "Target").await;
    vote_concurrently(
        &app,
        &key,
        &source,
        (0..30).map(|n| json!({"id": format!("s{n}")})).collect(),
    )
    .await;
    vote_concurrently(
        &app,
        &key,
        &target,
        (20..40).map(|n| json!({"id": format!("s{n}")})).collect(),
    )
    .await;
    let late_source = (40..60).map(|n| json!({"id": format!("s{n}")})).collect();
    let late_target = (50..70).map(|n| json!({"id": format!("s{n}")})).collect();
    let (merged, _, _) = tokio::join!(
        merge(&app, &key, &source, json!(target)),
        vote_concurrently(&app, &key, &source, late_source),
        vote_concurrently(&app, &key, &target, late_target),
    );
    assert_eq!(merged.status, 200, "{}", merged.body);
    let mut voters = HashSet::new();
    for idea in [&source, &target] {
        let votes = get(&app, &key, &format!("/api/v1/ideas/{idea}/votes?limit=100")).await;
        let n = votes.as_array().unwrap().len();
        assert_eq!(
            get(&app, &key, &format!("/api/v1/ideas/{idea}")).await["voteCount"],
            n
        );
        if *idea == target {
            let ids: HashSet<String> = votes
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["voter"]["id"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(ids.len(), n, "no voter counted twice");
            voters = ids;
        }
    }
    let source_votes = get(
        &app,
        &key,
        &format!("/api/v1/ideas/{source}/votes?limit=100"),
    )
    .await;
    for v in source_votes.as_array().unwrap() {
        assert!(
            voters.contains(v["voter"]["id"].as_str().unwrap()),
            "every source voter is on the target"
        );
    }
}

/// The properties a schema names, following a `$ref` into the components.
fn schema_props(doc: &Value, name: &str) -> HashSet<String> {
    doc["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema {name}"))
        .keys()
        .cloned()
        .collect()
}

fn response_ref(doc: &Value, path: &str, method: &str, status: &str) -> String {
    let content =
        &doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"];
    // Success answers are enveloped: the resource is the envelope's `data`.
    let content = match content["properties"].get("data") {
        Some(data) => data,
        None => content,
    };
    let r = content["$ref"]
        .as_str()
        .or_else(|| content["items"]["$ref"].as_str());
    r.unwrap_or_else(|| panic!("{method} {path} {status}: {content}"))
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned()
}

/// Routes whose presence in the document is checked (their answers are by the cases above).
const DOCUMENTED: [(&str, &str); 15] = [
    ("/api/v1/ideas", "post"),
    ("/api/v1/ideas/{id}", "patch"),
    ("/api/v1/ideas/{id}", "delete"),
    ("/api/v1/ideas/{id}/votes", "post"),
    ("/api/v1/ideas/{id}/votes/{voteId}", "delete"),
    ("/api/v1/ideas/{id}/comments", "post"),
    ("/api/v1/ideas/{id}/comments/{commentId}", "patch"),
    ("/api/v1/ideas/{id}/comments/{commentId}", "delete"),
    ("/admin/v1/apps/{appId}/boards", "post"),
    ("/admin/v1/apps/{appId}/boards", "get"),
    ("/admin/v1/apps/{appId}/boards/{boardId}", "patch"),
    ("/admin/v1/apps/{appId}/boards/{boardId}/statuses", "post"),
    (
        "/admin/v1/apps/{appId}/boards/{boardId}/statuses/{statusId}",
        "delete",
    ),
    (
        "/admin/v1/apps/{appId}/boards/{boardId}/topics/{topicId}",
        "patch",
    ),
    (
        "/admin/v1/apps/{appId}/boards/{boardId}/tags/{tagId}",
        "delete",
    ),
];

/// The live answer's keys are all properties of the response schema, and every required
/// property is there.
fn assert_fits_schema(doc: &Value, (path, method, status): (&str, &str, &str), data: Value) {
    let schema = response_ref(doc, path, method, status);
    let item = if data.is_array() {
        data[0].clone()
    } else {
        data
    };
    let keys: HashSet<String> = item.as_object().unwrap().keys().cloned().collect();
    let props = schema_props(doc, &schema);
    assert!(
        keys.is_subset(&props),
        "{path}: {keys:?} not all in {schema} {props:?}"
    );
    let required: HashSet<String> = doc["components"]["schemas"][&schema]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert!(
        required.is_subset(&keys),
        "{path}: {required:?} missing from {keys:?}"
    );
}

#[tokio::test]
async fn the_openapi_document_describes_each_endpoint_with_the_shape_it_answers() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let doc = app.send(Method::GET, "/openapi.json", &[], None).await.body;
    let board = default_board(&app, &key).await;
    let topic = admin_item(&app, &app_id, &board, "topics", json!({"name": "T"})).await;
    let tag = admin_item(&app, &app_id, &board, "tags", json!({"name": "g"})).await;
    let idea = new_idea(&app, &key, json!({"title": "Full", "description": "d", "topicId": topic["id"], "tagIds": [tag["id"]], "author": author(1)})).await;
    let id = idea["id"].as_str().unwrap();
    let done = &statuses(&app, &key).await["Planned"];
    app.api(
        &key,
        Method::PATCH,
        &format!("/api/v1/ideas/{id}"),
        Some(json!({"statusId": done})),
    )
    .await;
    let other = idea_titled(&app, &key, "Other").await;
    vote(
        &app,
        &key,
        id,
        json!({"id": "v", "email": "v@x.co", "name": "V"}),
    )
    .await;
    app.api(
        &key,
        Method::POST,
        &format!("/api/v1/ideas/{id}/comments"),
        Some(json!({"content": "c", "author": author(1)})),
    )
    .await;
    let cases = [
        ("/api/v1/ideas", "get", "200", "/api/v1/ideas".to_owned()),
        (
            "/api/v1/ideas/{id}",
            "get",
            "200",
            format!("/api/v1/ideas/{id}"),
        ),
        (
            "/api/v1/ideas/{id}/votes",
            "get",
            "200",
            format!("/api/v1/ideas/{id}/votes"),
        ),
        (
            "/api/v1/ideas/{id}/comments",
            "get",
            "200",
            format!("/api/v1/ideas/{id}/comments"),
        ),
        (
            "/api/v1/ideas/{id}/status-history",
            "get",
            "200",
            format!("/api/v1/ideas/{id}/status-history"),
        ),
        ("/api/v1/boards", "get", "200", "/api/v1/boards".to_owned()),
        (
            "/api/v1/idea-statuses",
            "get",
            "200",
            "/api/v1/idea-statuses".to_owned(),
        ),
        ("/api/v1/topics", "get", "200", "/api/v1/topics".to_owned()),
        ("/api/v1/tags", "get", "200", "/api/v1/tags".to_owned()),
    ];
    for (path, method, status, live) in cases {
        let data = get(&app, &key, &live).await;
        assert_fits_schema(&doc, (path, method, status), data);
    }
    let merged = app
        .api(
            &key,
            Method::POST,
            &format!("/api/v1/ideas/{other}/merge"),
            Some(json!({"intoId": id})),
        )
        .await;
    assert_eq!(
        response_ref(&doc, "/api/v1/ideas/{id}/merge", "post", "200"),
        "IdeaView"
    );
    assert!(merged.data()["voteCount"].is_u64());
    for (path, method) in DOCUMENTED {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} missing from openapi.json"
        );
    }
    let trending = doc["paths"]["/api/v1/ideas"]["get"]["parameters"].to_string();
    assert!(
        trending.contains("2^(-age_hours / 72)"),
        "the trending formula is documented"
    );
}

#[tokio::test]
async fn the_openapi_document_describes_the_admin_create_and_delete_answers() {
    let app = spawn_app();
    let (app_id, key) = ideas_app(&app, "free").await;
    let doc = app.send(Method::GET, "/openapi.json", &[], None).await.body;
    let board = default_board(&app, &key).await;
    let b = format!("/apps/{app_id}/boards/{board}");
    let topic = admin_item(&app, &app_id, &board, "topics", json!({"name": "T"})).await;
    assert_fits_schema(
        &doc,
        (
            "/admin/v1/apps/{appId}/boards/{boardId}/topics",
            "post",
            "201",
        ),
        topic,
    );
    let tag = admin_item(
        &app,
        &app_id,
        &board,
        "tags",
        json!({"name": "G", "color": "#010203"}),
    )
    .await;
    assert_fits_schema(
        &doc,
        (
            "/admin/v1/apps/{appId}/boards/{boardId}/tags",
            "post",
            "201",
        ),
        tag,
    );
    for (path, live) in [
        (
            "/admin/v1/apps/{appId}/boards",
            format!("/apps/{app_id}/boards"),
        ),
        ("/admin/v1/apps/{appId}/boards/{boardId}", b.clone()),
        (
            "/admin/v1/apps/{appId}/boards/{boardId}/statuses",
            format!("{b}/statuses"),
        ),
        (
            "/admin/v1/apps/{appId}/boards/{boardId}/topics",
            format!("{b}/topics"),
        ),
        (
            "/admin/v1/apps/{appId}/boards/{boardId}/tags",
            format!("{b}/tags"),
        ),
    ] {
        let a = app.admin(Method::GET, &live, None).await;
        assert_eq!(a.status, 200, "{live}: {}", a.body);
        assert_fits_schema(&doc, (path, "get", "200"), a.data().clone());
    }
    let idea = new_idea(&app, &key, json!({"title": "Shaped", "author": author(1)})).await;
    let id = idea["id"].as_str().unwrap().to_owned();
    assert_fits_schema(&doc, ("/api/v1/ideas", "post", "201"), idea);
    let v = vote(&app, &key, &id, json!({"id": "v"}))
        .await
        .data()
        .clone();
    let vote_path = format!("/api/v1/ideas/{id}/votes/{}", v["id"].as_str().unwrap());
    assert_fits_schema(&doc, ("/api/v1/ideas/{id}/votes", "post", "201"), v);
    let body = json!({"content": "c", "author": author(1)});
    let c = post(&app, &key, &format!("/api/v1/ideas/{id}/comments"), body).await;
    assert_fits_schema(
        &doc,
        ("/api/v1/ideas/{id}/comments", "post", "201"),
        c.data().clone(),
    );
    let d = app.api(&key, Method::DELETE, &vote_path, None).await;
    assert_fits_schema(
        &doc,
        ("/api/v1/ideas/{id}/votes/{voteId}", "delete", "200"),
        d.data().clone(),
    );
}

#[tokio::test]
async fn comments_votes_and_reply_depth_are_capped_by_the_plan() {
    let app = spawn_app_with(|s| {
        s.plans.free.comments_per_idea = 4;
        s.plans.free.comment_depth = 3;
        s.plans.free.votes_per_idea = 2;
    });
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Capped idea").await;
    let comment = |parent: Option<String>| {
        let (app, key, idea) = (&app, &key, &idea);
        async move {
            let body = json!({"content": "Me too", "author": author(2), "parentId": parent});
            app.api(
                key,
                Method::POST,
                &format!("/api/v1/ideas/{idea}/comments"),
                Some(body),
            )
            .await
        }
    };
    // A thread three deep is allowed; a fourth level is not.
    let mut parent = None;
    for _ in 0..3 {
        let c = comment(parent).await;
        assert_eq!(c.status, 201, "{}", c.body);
        parent = Some(c.data()["id"].as_str().unwrap().to_owned());
    }
    let deep = comment(parent.clone()).await;
    deep.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        deep.body["error"]["details"],
        json!([{"field": "comment_depth", "message": "limit 3, current 3"}])
    );
    // The fourth comment fits at the top; the fifth is over the idea's cap.
    assert_eq!(comment(None).await.status, 201);
    let full = comment(None).await;
    full.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(
        full.body["error"]["details"],
        json!([{"field": "comments_per_idea", "message": "limit 4, current 4"}])
    );
    assert_eq!(
        get(&app, &key, &format!("/api/v1/ideas/{idea}")).await["commentCount"],
        4
    );
    // Votes: one per voter, and at most two voters on this plan.
    for n in 1..=2 {
        assert_eq!(vote(&app, &key, &idea, author(n)).await.status, 201);
    }
    let third = vote(&app, &key, &idea, author(3)).await;
    third.assert_error(403, "PLAN_LIMIT_REACHED");
    assert_eq!(third.fields(), ["votes_per_idea"]);
    // Another idea has its own room.
    let other = idea_titled(&app, &key, "Another idea").await;
    assert_eq!(vote(&app, &key, &other, author(3)).await.status, 201);
}

#[tokio::test]
async fn the_default_plans_cap_comments_per_idea_and_nesting() {
    let app = spawn_app();
    let (_, key) = ideas_app(&app, "free").await;
    let idea = idea_titled(&app, &key, "Deep thread").await;
    let mut parent: Option<String> = None;
    let mut refused = None;
    for depth in 1..=50 {
        let body = json!({"content": "Reply", "author": author(2), "parentId": parent});
        let a = app
            .api(
                &key,
                Method::POST,
                &format!("/api/v1/ideas/{idea}/comments"),
                Some(body),
            )
            .await;
        if a.status != 201 {
            a.assert_error(403, "PLAN_LIMIT_REACHED");
            refused = Some(depth);
            break;
        }
        parent = Some(a.data()["id"].as_str().unwrap().to_owned());
    }
    let refused = refused.expect("50 nested replies were all accepted");
    assert!((2..=20).contains(&refused), "refused at depth {refused}");
}
