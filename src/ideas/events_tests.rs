//! Every idea, vote and comment change records its webhook event in its own transaction:
//! exactly one, with its type, subject, facets, actor and data (the view the API answers);
//! a refused change and an erasure record nothing.

use serde_json::json;

use super::engagement::{self, erase_person};
use super::model::{CommentDraft, IdeaDraft, IdeaPatch, Voter};
use super::store::{self, IdeaError};
use crate::ids::{self, Timestamp};
use crate::storage::changes::{recorded, Actor, Change, CHANGES};

fn db() -> sled::Db {
    sled::Config::new().temporary(true).open().unwrap()
}

fn key() -> Actor {
    Actor::ApiKey { id: "key1".into() }
}

fn user() -> Actor {
    Actor::User {
        id: "u1".into(),
        email: "u1@team.io".into(),
    }
}

fn plan() -> crate::config::PlanLimits {
    crate::config::Settings::load(None)
        .unwrap()
        .plan(crate::config::Plan::Enterprise)
}

/// The changes recorded since the last call (they are acknowledged, as the fan-out would).
fn take(db: &sled::Db) -> Vec<Change> {
    let all = recorded(db);
    if let Some(last) = all.len().checked_sub(1) {
        let seq = CHANGES.peek(db, usize::MAX, usize::MAX).unwrap()[last].seq;
        CHANGES.ack_through(db, seq).unwrap();
    }
    all
}

fn one(db: &sled::Db) -> Change {
    let mut all = take(db);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

fn new_idea(db: &sled::Db, app: &str, by: &Actor) -> super::model::IdeaView {
    let body =
        json!({"title": "Dark mode", "author": {"id": "a1", "name": "Ada", "email": "ada@x.io"}});
    let draft = IdeaDraft::parse(body.as_object().unwrap(), Timestamp::t0()).unwrap();
    store::create(db, app, &draft, None, (Timestamp::t0(), by)).unwrap()
}

fn view_json(v: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}

#[test]
fn an_idea_created_updated_and_deleted_records_one_event_each() {
    let (db, app) = (db(), ids::object_id());
    let idea = new_idea(&db, &app, &key());
    let c = one(&db);
    assert_eq!(
        (c.kind.as_str(), c.app_id.as_str(), c.subject.as_str()),
        ("idea.created", app.as_str(), idea.id.as_str())
    );
    assert!(c.id.starts_with("evt_"));
    assert_eq!(c.actor, key());
    assert_eq!(c.facets.board_id.as_deref(), Some(idea.board_id.as_str()));
    assert!(!c.facets.internal);
    assert_eq!(c.data, json!({"idea": view_json(&idea)}));

    let board = crate::boards::store::get(&db, &app, Some(&idea.board_id))
        .unwrap()
        .unwrap();
    let planned = board.statuses.iter().find(|s| s.name == "Planned").unwrap();
    let patch = json!({"statusId": planned.id, "title": "Dark mode, please"});
    let patch = IdeaPatch::parse(patch.as_object().unwrap()).unwrap();
    let later = Timestamp::from_micros(Timestamp::t0().micros() + 1_000_000);
    let updated = store::update(&db, &app, &idea.id, &patch, (later, &user())).unwrap();
    let c = one(&db);
    assert_eq!((c.kind.as_str(), c.actor.clone()), ("idea.updated", user()));
    assert_eq!(c.at, later);
    assert_eq!(c.data["idea"], view_json(&updated));
    let history = store::history(&db, &app, &idea.id, store::Walk::new(10, None))
        .unwrap()
        .unwrap()
        .items;
    assert_eq!(
        c.data["statusChange"],
        json!({"from": view_json(&history[0].from), "to": view_json(&history[0].to)})
    );
    assert_eq!(c.data["statusChange"]["to"]["name"], "Planned");
    assert_eq!(c.data["statusChange"]["from"]["name"], "Open");

    let title = IdeaPatch::parse(json!({"title": "Dark"}).as_object().unwrap()).unwrap();
    store::update(&db, &app, &idea.id, &title, (later, &key())).unwrap();
    assert_eq!(one(&db).data["statusChange"], json!(null));

    let before = store::get(&db, &app, &idea.id).unwrap().unwrap();
    store::delete(&db, &app, &idea.id, (later, &Actor::Admin)).unwrap();
    let c = one(&db);
    assert_eq!(
        (c.kind.as_str(), c.actor.clone()),
        ("idea.deleted", Actor::Admin)
    );
    assert_eq!(c.data, json!({"idea": view_json(&before)}));
}

#[test]
fn a_refused_change_records_nothing() {
    let (db, app) = (db(), ids::object_id());
    let idea = new_idea(&db, &app, &key());
    take(&db);
    let bad = IdeaPatch::parse(json!({"statusId": ids::object_id()}).as_object().unwrap()).unwrap();
    let refused = store::update(&db, &app, &idea.id, &bad, (Timestamp::t0(), &key()));
    assert!(matches!(refused, Err(IdeaError::Invalid(_))), "{refused:?}");
    let voter = Voter {
        id: Some("v1".into()),
        name: None,
        email: None,
    };
    let now = (Timestamp::t0(), &key());
    engagement::vote(&db, &app, &idea.id, &voter, Timestamp::t0(), now, &plan()).unwrap();
    take(&db);
    let again = engagement::vote(&db, &app, &idea.id, &voter, Timestamp::t0(), now, &plan());
    assert!(matches!(again, Err(IdeaError::Conflict(_))), "{again:?}");
    let gone = store::delete(&db, &app, &ids::object_id(), now);
    assert!(matches!(gone, Err(IdeaError::NotFound(_))));
    assert!(recorded(&db).is_empty());
}

#[test]
fn votes_comments_and_merges_record_their_events() {
    let (db, app) = (db(), ids::object_id());
    let (idea, target) = (new_idea(&db, &app, &key()), new_idea(&db, &app, &key()));
    take(&db);
    let now = (Timestamp::t0(), &Actor::Visitor { id: None });
    let voter = Voter {
        id: Some("v1".into()),
        name: Some("Vi".into()),
        email: None,
    };
    let vote =
        engagement::vote(&db, &app, &idea.id, &voter, Timestamp::t0(), now, &plan()).unwrap();
    let c = one(&db);
    assert_eq!(
        (c.kind.as_str(), c.subject.as_str()),
        ("vote.created", idea.id.as_str())
    );
    assert_eq!(c.data, json!({"vote": view_json(&vote), "ideaId": idea.id}));
    assert_eq!(c.facets.board_id.as_deref(), Some(idea.board_id.as_str()));
    engagement::unvote(&db, &app, (&idea.id, &vote.id), (Timestamp::t0(), &key())).unwrap();
    let c = one(&db);
    assert_eq!((c.kind.as_str(), c.actor.clone()), ("vote.deleted", key()));
    assert_eq!(c.data, json!({"vote": view_json(&vote), "ideaId": idea.id}));

    for internal in [false, true] {
        let body = json!({"content": "Yes", "author": {"id": "a1", "name": "Ada", "email": "ada@x.io"}, "internal": internal});
        let draft = CommentDraft::parse(body.as_object().unwrap()).unwrap();
        let by = (Timestamp::t0(), &user());
        let comment = engagement::comment(&db, &app, &idea.id, &draft, &plan(), by).unwrap();
        let c = one(&db);
        assert_eq!(
            (c.kind.as_str(), c.actor.clone()),
            ("comment.created", user())
        );
        assert_eq!(c.facets.internal, internal);
        assert_eq!(
            c.data,
            json!({"comment": view_json(&comment), "ideaId": idea.id})
        );
    }

    let into =
        engagement::merge(&db, &app, &idea.id, &target.id, (Timestamp::t0(), &key())).unwrap();
    let c = one(&db);
    assert_eq!(
        (c.kind.as_str(), c.subject.as_str()),
        ("idea.merged", idea.id.as_str())
    );
    let source = store::get(&db, &app, &idea.id).unwrap().unwrap();
    assert_eq!(
        c.data,
        json!({"idea": view_json(&source), "into": view_json(&into)})
    );
    assert_eq!(c.data["idea"]["mergedIntoId"], json!(target.id));
}

#[test]
fn an_erasure_records_no_event_for_what_it_removes() {
    let (db, app) = (db(), ids::object_id());
    let idea = new_idea(&db, &app, &key());
    let voter = Voter {
        id: Some("gone".into()),
        name: None,
        email: None,
    };
    let now = (Timestamp::t0(), &key());
    engagement::vote(&db, &app, &idea.id, &voter, Timestamp::t0(), now, &plan()).unwrap();
    let body = json!({"content": "Hi", "author": {"id": "gone", "name": "G", "email": "g@x.io"}});
    let draft = CommentDraft::parse(body.as_object().unwrap()).unwrap();
    engagement::comment(&db, &app, &idea.id, &draft, &plan(), now).unwrap();
    take(&db);
    let erased = erase_person(&db, &app, Some("gone"), Some("g@x.io")).unwrap();
    assert_eq!((erased.votes, erased.comments), (1, 1));
    assert!(recorded(&db).is_empty(), "{:?}", recorded(&db));
}
