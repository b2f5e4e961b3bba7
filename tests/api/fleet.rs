//! A control node and an edge in one process each (in-process servers on port 0, one local
//! lake): the edge serves the collector with the control node's keys and nothing else, follows
//! a key rotation and a new app within seconds, keeps serving on its replica when its token is
//! revoked, and an erasure on the control node reaches the edge (its events in the lake, its
//! own copies, its ingest). The same fleet as real processes on S3: `tests/interop/fleet.rs`.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::events::{batch, track};
use crate::helpers::*;

/// Polls `check` every 50 ms until it holds, within `secs`.
pub async fn within<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fleet token of `control` (the secret).
pub async fn fleet_token(control: &TestApp) -> (String, String) {
    let a = control
        .admin(Method::POST, "/fleet/tokens", Some(json!({"name": "eu"})))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let token = a.data()["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("tft_"));
    (a.data()["id"].as_str().unwrap().to_owned(), token)
}

/// An edge of `control` named `node`, syncing every 100 ms, writing to `control`'s lake.
pub fn edge_of(control: &TestApp, token: &str, node: &str) -> TestApp {
    let (base, token, node) = (control.base.clone(), token.to_owned(), node.to_owned());
    let lake = control.data_dir.join("lake");
    spawn_app_with(move |s| {
        s.fleet.role = tributary::config::Role::Edge;
        s.fleet.control_url = base;
        s.fleet.token = token.as_str().into();
        s.fleet.sync_interval_ms = 100;
        s.collector.node_id = node;
        s.lake.path = lake.display().to_string();
    })
}

async fn accepted(edge: &TestApp, key: &str, id: &str) -> bool {
    edge.collect(key, batch(vec![track(id)])).await.status == 200
}

#[tokio::test]
async fn an_edge_serves_collection_with_the_control_nodes_keys_and_nothing_else() {
    let control = spawn_app();
    let (token_id, token) = fleet_token(&control).await;
    let edge = edge_of(&control, &token, "edge-1");
    within(10, "the edge ready with a registry", || async {
        edge.send(Method::GET, "/readyz", &[], None).await.status == 200
    })
    .await;
    // An app created on the control node is accepted by the edge within seconds.
    let (app_id, key) = control.create_app("free").await;
    within(10, "the new app's key accepted", || {
        accepted(&edge, &key, "a1")
    })
    .await;
    // Everything but what browsers and SDKs call is the control node's.
    for path in [
        "/acq/v1/contacts",
        "/admin/v1/apps",
        "/dashboard",
        "/api/v1/surveys",
    ] {
        let a = edge.send(Method::GET, path, &[], None).await;
        a.assert_error(404, "NOT_FOUND");
        assert!(a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("control node"));
    }
    let script = edge
        .client
        .get(format!("{}/sdk/v1/analytics.js", edge.base));
    assert_eq!(script.send().await.unwrap().status(), 200);
    // A rotated integration key: the old one is refused by the edge within seconds.
    let rotated = control
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/integration-key"),
            None,
        )
        .await;
    assert_eq!(rotated.status, 201, "{}", rotated.body);
    let new_key = rotated.data()["integrationKey"]
        .as_str()
        .unwrap()
        .to_owned();
    within(10, "the old key refused", || async {
        edge.collect(&key, batch(vec![track("old")])).await.status == 401
    })
    .await;
    within(10, "the new key accepted", || {
        accepted(&edge, &new_key, "a2")
    })
    .await;
    // The control node knows the edge: current registry, its usage.
    within(10, "the edge listed with its usage", || async {
        let nodes = control.admin(Method::GET, "/fleet/nodes", None).await;
        let usage = control.admin(Method::GET, "/fleet/usage", None).await;
        let node = nodes
            .data()
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["nodeId"] == "edge-1");
        node.is_some_and(|n| n["registryCurrent"] == json!(true))
            && usage
                .data()
                .as_array()
                .unwrap()
                .iter()
                .any(|u| u["appId"] == json!(app_id) && u["byNode"]["edge-1"].as_u64() >= Some(2))
    })
    .await;
    // The token revoked: the edge keeps collecting on its replica (and says so in its log).
    let a = control
        .admin(Method::DELETE, &format!("/fleet/tokens/{token_id}"), None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let refused = control
        .client
        .get(format!("{}/fleet/v1/registry", control.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(accepted(&edge, &new_key, "a3").await);
}

#[tokio::test]
async fn an_erasure_on_the_control_node_reaches_the_edges_events_copies_and_ingest() {
    let control = spawn_app();
    let (_, token) = fleet_token(&control).await;
    let edge = edge_of(&control, &token, "edge-1");
    let (app_id, key) = control.create_app("free").await;
    let (_, api_key) = control.create_key(&app_id, &["privacy:erase"]).await;
    within(10, "the app known to the edge", || {
        accepted(&edge, &key, "warm")
    })
    .await;
    let (gone, kept) = (anon("erased visitor"), anon("kept visitor"));
    let mut events = Vec::new();
    for (i, (anon_id, user)) in [(&gone, "u-gone"), (&kept, "u-kept")]
        .into_iter()
        .enumerate()
    {
        let mut e = track(&format!("id{i}"));
        e["type"] = json!("identify");
        e["anonymousId"] = json!(anon_id);
        e["userId"] = json!(user);
        e["traits"] = json!({"plan": "pro"});
        events.push(e);
        let mut t = track(&format!("t{i}"));
        t["anonymousId"] = json!(anon_id);
        events.push(t);
    }
    let a = edge.collect(&key, batch(events)).await;
    assert_eq!(a.counts(), (4, 0, 0), "{}", a.body);
    // The erasure job settles the edge (its events into the lake) before rewriting the lake.
    let a = control
        .api(
            &api_key,
            Method::POST,
            "/api/v1/erasures",
            Some(json!({"userId": "u-gone", "anonymousIds": [gone]})),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.body);
    let id = a.data()["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let a = control
            .api(
                &api_key,
                Method::GET,
                &format!("/api/v1/erasures/{id}"),
                None,
            )
            .await;
        let state = a.data()["state"].clone();
        if state == "done" || state == "failed" {
            break a.data().clone();
        }
        assert!(
            Instant::now() < deadline,
            "the erasure not done: {}",
            a.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(job["state"], "done", "{job}");
    let lake = crate::lake::read_local(&control.data_dir.join("lake"));
    let anons: Vec<&Value> = lake.rows.iter().map(|r| &r["anonymous_id"]).collect();
    assert!(
        !anons.contains(&&json!(gone)),
        "the edge's rows of the person are erased"
    );
    assert!(
        anons.contains(&&json!(kept)),
        "the other visitor's rows stay"
    );
    // The edge refuses the person from now on.
    let mut again = track("after");
    again["anonymousId"] = json!(gone);
    let a = edge.collect(&key, batch(vec![again])).await;
    assert_eq!(a.counts(), (0, 0, 1), "{}", a.body);
    // And its own copies of the person are gone (its sled, read once it stopped).
    let mut edge = edge;
    let dir = edge.data_dir.clone();
    edge.stop().await;
    let db = crate::helpers::open_stopped_db(&dir);
    let profiles = db.open_tree("profiles").unwrap();
    let users: Vec<String> = profiles
        .iter()
        .keys()
        .map(|k| String::from_utf8_lossy(&k.unwrap()).into_owned())
        .collect();
    assert!(users.iter().all(|u| !u.ends_with("u-gone")), "{users:?}");
    assert!(users.iter().any(|u| u.ends_with("u-kept")), "{users:?}");
}

#[tokio::test]
async fn an_app_deleted_on_the_control_node_is_settled_and_forgotten_by_the_edge() {
    let control = spawn_app();
    let (_, token) = fleet_token(&control).await;
    let mut edge = edge_of(&control, &token, "edge-1");
    let (doomed, ik) = control.create_app("free").await;
    let (kept, kept_ik) = control.create_app("free").await;
    within(10, "both apps known to the edge", || async {
        accepted(&edge, &ik, "d0").await && accepted(&edge, &kept_ik, "k0").await
    })
    .await;
    let mut identify = track("who");
    identify["type"] = json!("identify");
    identify["userId"] = json!("u1");
    assert_eq!(edge.collect(&ik, batch(vec![identify])).await.status, 200);
    // The events wait in the edge's open files: the deletion must settle the edge first.
    let del = control
        .admin(Method::DELETE, &format!("/apps/{doomed}"), None)
        .await;
    assert_eq!(del.status, 202, "{}", del.body);
    let job = del.data()["id"].as_str().unwrap().to_owned();
    let done = crate::populate::finished_job(&control, &job).await;
    assert_eq!(done["state"], "done", "{done}");
    within(10, "the edge refuses the deleted app", || async {
        edge.collect(&ik, batch(vec![track("late")])).await.status == 401
    })
    .await;
    assert!(accepted(&edge, &kept_ik, "k1").await);
    let lake = control.data_dir.join("lake/events");
    assert!(
        !lake.join(format!("app_id={doomed}")).exists(),
        "no file of the edge came back"
    );
    // The edge keeps nothing of the app once the registry no longer names it.
    let dir = edge.data_dir.clone();
    within(10, "the edge's usage of the app forgotten", || async {
        let usage = control.admin(Method::GET, "/fleet/usage", None).await;
        !usage.body.to_string().contains(&doomed)
    })
    .await;
    // Stopped, the edge puts everything it holds: nothing of the app came back to the lake.
    edge.stop().await;
    let lake = control.data_dir.join("lake/events");
    assert!(
        !lake.join(format!("app_id={doomed}")).exists(),
        "a file of the edge came back"
    );
    assert!(lake.join(format!("app_id={kept}")).exists());
    assert_eq!(crate::populate::sled_traces(&dir, &doomed), []);
    assert!(!crate::populate::sled_traces(&dir, &kept).is_empty());
}

#[tokio::test]
async fn what_an_edge_learns_reaches_the_control_node_once() {
    let control = spawn_app();
    let (_, token) = fleet_token(&control).await;
    let lake = control.data_dir.join("lake");
    let (base, tok) = (control.base.clone(), token.clone());
    let edge = spawn_app_with(move |s| {
        s.fleet.role = tributary::config::Role::Edge;
        s.fleet.control_url = base;
        s.fleet.token = tok.as_str().into();
        s.fleet.sync_interval_ms = 100;
        s.collector.node_id = "edge-1".into();
        s.collector.max_file_age_ms = 100;
        s.lake.path = lake.display().to_string();
    });
    // Pro: 1 000 requests a minute for the polls below.
    let (app_id, ik) = control.create_app("pro").await;
    let (_, key) = control
        .create_key(&app_id, &["analytics:read", "profiles:read"])
        .await;
    within(10, "the app known to the edge", || {
        accepted(&edge, &ik, "first")
    })
    .await;
    let mut identify = track("who");
    identify["type"] = json!("identify");
    identify["userId"] = json!("u1");
    identify["traits"] = json!({"plan": "pro"});
    let events = vec![identify, track("t1"), track("t2")];
    let a = edge.collect(&ik, batch(events.clone())).await;
    assert_eq!(a.status, 200, "{}", a.body);
    // A retry of the same batch through the edge counts nothing twice.
    assert_eq!(edge.collect(&ik, batch(events)).await.counts().1, 3);
    within(20, "the control node's rollups and profile", || async {
        let traffic = control
            .api(&key, Method::GET, "/api/v1/analytics/traffic", None)
            .await;
        let profile = control
            .api(&key, Method::GET, "/api/v1/profiles/u1", None)
            .await;
        let events = traffic.data()["totals"]["events"].as_u64().unwrap_or(0);
        assert!(events <= 4, "counted twice: {}", traffic.body);
        events == 4 && profile.data()["traits"]["plan"] == "pro"
    })
    .await;
    let nodes = control.admin(Method::GET, "/fleet/nodes", None).await;
    within(10, "the edge's uplink empty", || async {
        let nodes = control.admin(Method::GET, "/fleet/nodes", None).await;
        nodes.data()[0]["uplinkItems"] == 0
    })
    .await;
    assert_eq!(nodes.data()[0]["nodeId"], "edge-1", "{}", nodes.body);
}
