use super::*;
use crate::collector::event::Event;
use crate::collector::rollup::{store::Unit, Delta, HOUR_MICROS};
use crate::profiles::{Change, Touch};
use crate::surveys::model::{ResponseDraft, Survey, SurveyStatus, SurveyType};

const T0: i64 = 1_790_000_000_000_000;

/// A control node's database that knows the app "app".
fn db() -> sled::Db {
    let db = sled::Config::new().temporary(true).open().unwrap();
    add_app(&db, "app", None);
    db
}

fn add_app(db: &sled::Db, id: &str, deletion_job_id: Option<&str>) {
    let t = Timestamp::from_micros(T0);
    let app = crate::tenants::App {
        id: id.into(),
        name: id.into(),
        plan: crate::tenants::Plan::Free,
        integration_key_id: "key".into(),
        deletion_job_id: deletion_job_id.map(str::to_owned),
        created_at: t,
        updated_at: t,
    };
    let apps = db.open_tree(crate::tenants::store::APPS).unwrap();
    apps.insert(id, crate::storage::encode(&app)).unwrap();
}

fn delta(visitors: &[&str]) -> Delta {
    let mut d = Delta::default();
    for v in visitors {
        d.add(&Event::example("app", "m", v, T0));
    }
    d
}

/// The events of `app` in the control node's rollups.
fn events(db: &sled::Db) -> u64 {
    let h = T0.div_euclid(HOUR_MICROS);
    rollups::read(db, "app", Unit::Hour, h, h + 1)
        .unwrap()
        .iter()
        .map(|(_, b)| b.events())
        .sum()
}

fn rollup(seq: u64, shard: usize, lsn: u64, d: &Delta) -> UplinkItem {
    UplinkItem {
        seq,
        kind: "rollup".into(),
        body: serde_json::from_slice(&wire::Item::payload(shard, lsn, d)).unwrap(),
    }
}

fn item(seq: u64, kind: &str, body: impl Serialize) -> UplinkItem {
    UplinkItem {
        seq,
        kind: kind.into(),
        body: serde_json::to_value(body).unwrap(),
    }
}

fn identify(user: &str, anon: &'static str) -> OwnedTouch {
    OwnedTouch::of(&Touch {
        app_id: "app",
        user_id: user,
        anonymous_id: Some(anon),
        at: T0,
        change: Change::Identify {
            traits: Some(r#"{"plan":"pro"}"#),
        },
    })
}

/// An active survey of "app" and a visitor's answer to it, as an edge sends it.
fn response(db: &sled::Db) -> ResponseItem {
    let t = Timestamp::from_micros(T0);
    let s = Survey {
        id: format!("{:024x}", 1),
        board_id: None,
        title: "t".into(),
        kind: SurveyType::Open,
        status: SurveyStatus::Active,
        questions: vec![],
        targeting: Default::default(),
        response_count: 0,
        created_at: t,
        updated_at: t,
    };
    surveys::create(db, "app", &s).unwrap();
    ResponseItem {
        app_id: "app".into(),
        survey_id: s.id,
        draft: ResponseDraft {
            anonymous_id: "6f1c3c1e-8a38-4a8e-9d5a-0c1f2b3a4d5e".into(),
            user_id: None,
            answers: vec![],
            completed: true,
            metadata: Default::default(),
            attributes: Default::default(),
        },
        at: T0,
    }
}

#[test]
fn the_same_batch_received_twice_counts_once() {
    let db = db();
    let answer = response(&db);
    let items = vec![
        rollup(3, 0, 5, &delta(&["v1", "v2"])),
        item(4, "profile", identify("u1", "a1")),
        item(7, "response", &answer),
    ];
    assert_eq!(
        receive(&db, "control", "edge1", &items).unwrap(),
        Through { through: 7 }
    );
    assert_eq!(
        receive(&db, "control", "edge1", &items).unwrap(),
        Through { through: 7 }
    );
    assert_eq!(events(&db), 2);
    let profile = profiles::store::get(&db, "app", "u1").unwrap().unwrap();
    assert_eq!(profile.traits["plan"], "pro");
    let s = surveys::get(&db, "app", &answer.survey_id)
        .unwrap()
        .unwrap();
    assert_eq!(s.response_count, 1);
    // Without the recorded `through` each item is idempotent on its own too.
    db.drop_tree(TREE).unwrap();
    receive(&db, "control", "edge1", &items).unwrap();
    assert_eq!(events(&db), 2);
    let s = surveys::get(&db, "app", &answer.survey_id)
        .unwrap()
        .unwrap();
    assert_eq!(s.response_count, 1, "an upsert by anonymousId");
}

#[test]
fn a_rollup_at_or_below_the_nodes_shard_lsn_is_skipped_and_lsns_are_per_node_and_shard() {
    let db = db();
    let one = delta(&["v1"]);
    let items = [
        rollup(1, 0, 5, &one),
        // The same flush pushed again (a new sequence) and an older one: skipped.
        rollup(2, 0, 5, &one),
        rollup(3, 0, 4, &one),
        // Another shard of the node has its own LSN.
        rollup(4, 1, 2, &one),
    ];
    receive(&db, "control", "edge1", &items).unwrap();
    assert_eq!(events(&db), 2);
    assert_eq!(rollups::applied_lsn_of(&db, "edge1", 0).unwrap(), 5);
    // Another node, and the control node's own shard 0 (today's key), count apart.
    receive(&db, "control", "edge2", &[rollup(1, 0, 5, &one)]).unwrap();
    assert!(rollups::apply(&db, 0, 5, &one).unwrap());
    assert_eq!(events(&db), 4);
    assert_eq!(rollups::applied_lsn(&db, 0).unwrap(), 5);
    // The control node's own id maps to its own keys.
    receive(&db, "control", "control", &[rollup(1, 0, 5, &one)]).unwrap();
    assert_eq!(events(&db), 4);
}

#[test]
fn an_item_the_control_node_cannot_take_is_passed_not_retried() {
    let db = db();
    let mut closed = response(&db);
    closed.survey_id = format!("{:024x}", 99);
    let items = [
        item(1, "response", &closed),
        item(2, "gossip", "?"),
        item(3, "profile", "not a touch"),
        item(4, "profile", identify("u2", "a2")),
    ];
    assert_eq!(receive(&db, "c", "e", &items).unwrap().through, 4);
    assert!(profiles::store::get(&db, "app", "u2").unwrap().is_some());
}

#[test]
fn what_an_edge_sends_of_an_app_deleted_meanwhile_is_not_brought_back() {
    let db = db();
    add_app(&db, "gone", Some("job_1"));
    let mut d = delta(&["v1"]);
    d.add(&Event::example("gone", "m", "v2", T0));
    let mut touch = identify("u1", "a1");
    touch.app_id = "gone".into();
    let items = [rollup(1, 0, 1, &d), item(2, "profile", touch)];
    assert_eq!(receive(&db, "c", "e", &items).unwrap().through, 2);
    assert_eq!(events(&db), 1, "the live app's rows only");
    let h = T0.div_euclid(HOUR_MICROS);
    assert!(rollups::read(&db, "gone", Unit::Hour, h, h + 1)
        .unwrap()
        .is_empty());
    assert!(profiles::store::get(&db, "gone", "u1").unwrap().is_none());
}

#[test]
fn an_edge_forgets_a_deleted_apps_items_and_keeps_the_others_rows() {
    let db = db();
    let mut d = delta(&["v1"]);
    d.add(&Event::example("gone", "m", "v2", T0));
    crate::collector::rollup::wire::forward(&db, UPLINK, 0, 1, &d, T0).unwrap();
    let mut touch = identify("u1", "a1");
    touch.app_id = "gone".into();
    profiles::store::apply_to(&db, &touch.touch(), Some(UPLINK)).unwrap();
    profiles::store::apply_to(&db, &identify("u2", "a2").touch(), Some(UPLINK)).unwrap();
    assert_eq!(forget_app(&db, "gone").unwrap(), 2);
    assert_eq!(forget_app(&db, "gone").unwrap(), 0);
    let left = UPLINK.peek(&db, 10, 1 << 20).unwrap();
    assert_eq!(left.len(), 2);
    let r: wire::Item = serde_json::from_slice(&left[0].payload).unwrap();
    let apps: Vec<&str> = r.delta.buckets().map(|(a, _, _)| a).collect();
    assert_eq!(apps, ["app"]);
    assert!(!String::from_utf8_lossy(&left[1].payload).contains("gone"));
}

/// An edge's store with its uplink filled, a control node's store, and a server between
/// them that checks the fleet token and calls `receive_batch`.
#[actix_web::test]
async fn send_once_posts_the_oldest_items_and_acks_what_the_control_node_applied() {
    use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (edge, edge_threads) = Store::open(dirs.0.path(), 1, 16, 8 << 20).unwrap();
    let (control, control_threads) = Store::open(dirs.1.path(), 1, 16, 8 << 20).unwrap();
    add_app(&control.db().get().unwrap(), "app", None);
    let sled = edge.db().get().unwrap();
    crate::collector::rollup::wire::forward(&sled, UPLINK, 0, 5, &delta(&["v1", "v2", "v3"]), T0)
        .unwrap();
    let touch = identify("u1", "a1");
    profiles::store::apply_to(&sled, &touch.touch(), Some(UPLINK)).unwrap();
    assert_eq!(backlog(&sled, T0 + 2_000_000).unwrap(), (2, 2.0));
    let server = {
        let control = control.clone();
        HttpServer::new(move || {
            let control = control.clone();
            App::new().route(
                "/fleet/v1/uplink",
                web::post().to(move |req: HttpRequest, body: web::Json<UplinkBatch>| {
                    let control = control.clone();
                    async move {
                        let auth = req.headers().get("authorization").unwrap();
                        if auth.to_str().unwrap() != "Bearer tft_x_secret" {
                            return HttpResponse::Unauthorized().finish();
                        }
                        match receive_batch(&control, "control", body.into_inner()).await {
                            Ok(t) => HttpResponse::Ok().json(t),
                            Err(_) => HttpResponse::BadRequest().finish(),
                        }
                    }
                }),
            )
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .unwrap()
    };
    let base = format!("http://{}", server.addrs()[0]);
    let server = server.run();
    let handle = server.handle();
    let running = tokio::spawn(server);
    let http = reqwest::Client::new();
    let refused = send_once(&http, &base, "tft_wrong", "edge1", &edge).await;
    assert!(matches!(refused, Err(UplinkError::Refused(s)) if s == 401));
    assert_eq!(
        backlog(&sled, T0).unwrap().0,
        2,
        "nothing acked when refused"
    );
    let sent = send_once(&http, &base, "tft_x_secret", "edge1", &edge).await;
    assert_eq!(sent.unwrap(), 2);
    assert_eq!(backlog(&sled, T0).unwrap(), (0, 0.0));
    assert_eq!(
        send_once(&http, &base, "tft_x_secret", "edge1", &edge)
            .await
            .unwrap(),
        0
    );
    let control_db = control.db().get().unwrap();
    assert_eq!(events(&control_db), 3);
    assert!(profiles::store::get(&control_db, "app", "u1")
        .unwrap()
        .is_some());
    let bad = UplinkBatch {
        node: "control".into(),
        items: vec![],
    };
    assert!(receive_batch(&control, "control", bad).await.is_err());
    handle.stop(true).await;
    running.await.unwrap().unwrap();
    drop((edge, control, sled, control_db));
    edge_threads.join();
    control_threads.join();
}
