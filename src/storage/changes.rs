//! What changed, recorded in the same sled transaction as the change: the source of the
//! webhooks (`webhooks/` reads it; the resources that write it never import `webhooks/`).
//!
//! A store that changes a resource a team may want to hear about (an idea, a vote, a comment,
//! a contact, a survey response, a job) opens its transaction over its own tree *and*
//! `changes::TREE`, and calls [`record`] inside it. So a change without its record, or a
//! record without its change, cannot be committed, also across `kill -9`.
//!
//! The records form the queue [`CHANGES`] (`storage/queue.rs`, kind [`KIND`], payload the JSON
//! of a [`Change`]). The webhooks' fan-out moves each one to the deliveries of the app's
//! endpoints that want it and acknowledges it; with no endpoint it is simply dropped. So the
//! queue holds only what the fan-out has not yet seen (bounded by its pace, on disk).

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionResult, TransactionalTree};

use super::queue::Queue;
use crate::ids::Timestamp;

/// The tree of the queue of changes.
pub const TREE: &str = "changes";

/// The queue of changes not yet fanned out to webhook deliveries.
pub const CHANGES: Queue = Queue::new(TREE);

/// The queue item kind of a [`Change`] (JSON).
pub const KIND: u8 = 1;

/// The event types (the catalogue: README, "Webhooks"). An endpoint subscribes to some of
/// them, or to `*` (all).
pub mod types {
    pub const IDEA_CREATED: &str = "idea.created";
    pub const IDEA_UPDATED: &str = "idea.updated";
    pub const IDEA_MERGED: &str = "idea.merged";
    pub const IDEA_DELETED: &str = "idea.deleted";
    pub const VOTE_CREATED: &str = "vote.created";
    pub const VOTE_DELETED: &str = "vote.deleted";
    pub const COMMENT_CREATED: &str = "comment.created";
    pub const RESPONSE_CREATED: &str = "survey.response.created";
    pub const RESPONSE_COMPLETED: &str = "survey.response.completed";
    pub const CONTACT_CREATED: &str = "contact.created";
    pub const CONTACT_UPDATED: &str = "contact.updated";
    pub const CONTACT_DELETED: &str = "contact.deleted";
    pub const ERASURE_COMPLETED: &str = "erasure.completed";
    pub const ERASURE_FAILED: &str = "erasure.failed";
    pub const APP_DELETION_STARTED: &str = "app.deletion.started";
    /// Sent only by an endpoint's "send test event".
    pub const WEBHOOK_TEST: &str = "webhook.test";

    /// Every type an endpoint may subscribe to.
    pub const ALL: [&str; 16] = [
        IDEA_CREATED,
        IDEA_UPDATED,
        IDEA_MERGED,
        IDEA_DELETED,
        VOTE_CREATED,
        VOTE_DELETED,
        COMMENT_CREATED,
        RESPONSE_CREATED,
        RESPONSE_COMPLETED,
        CONTACT_CREATED,
        CONTACT_UPDATED,
        CONTACT_DELETED,
        ERASURE_COMPLETED,
        ERASURE_FAILED,
        APP_DELETION_STARTED,
        WEBHOOK_TEST,
    ];
}

/// Who made a change, as webhook events show it (`actor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Actor {
    /// A call with an API key (`X-API-Key`): the key's id.
    ApiKey { id: String },
    /// A dashboard user.
    User { id: String, email: String },
    /// The operator's admin token (`/admin/v1`, the CLI).
    Admin,
    /// A visitor through the public widget or tracker (an anonymous or identified id).
    Visitor {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// Tributary itself (a job, a sweep).
    System,
}

/// What an endpoint's filters look at: the resource's board, survey or contact status, and
/// whether it is internal (an internal comment reaches only endpoints that ask for them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Facets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survey_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_status: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub internal: bool,
}

/// One recorded change: an event to be delivered to the endpoints that want it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `evt_<ObjectId>`: stable across every delivery and retry (`webhook-id`).
    pub id: String,
    /// The event type, e.g. `idea.updated` (the catalogue: README, "Webhooks").
    #[serde(rename = "type")]
    pub kind: String,
    pub app_id: String,
    /// The resource the event is about: events of one subject reach an endpoint in order.
    pub subject: String,
    /// When the change happened.
    pub at: Timestamp,
    pub actor: Actor,
    #[serde(default)]
    pub facets: Facets,
    /// The event's `data`: the resource as the public API shows it (and what the type adds).
    pub data: serde_json::Value,
}

impl Facets {
    pub fn board(id: &str) -> Facets {
        Facets {
            board_id: Some(id.to_owned()),
            ..Facets::default()
        }
    }

    pub fn survey(id: &str) -> Facets {
        Facets {
            survey_id: Some(id.to_owned()),
            ..Facets::default()
        }
    }

    pub fn contact_status(status: &str) -> Facets {
        Facets {
            contact_status: Some(status.to_owned()),
            ..Facets::default()
        }
    }
}

impl Change {
    /// A new change with a fresh event id.
    pub fn new(
        kind: &str,
        app_id: &str,
        subject: &str,
        at: Timestamp,
        actor: &Actor,
        data: serde_json::Value,
    ) -> Change {
        Change {
            id: format!("evt_{}", crate::ids::object_id()),
            kind: kind.to_string(),
            app_id: app_id.to_string(),
            subject: subject.to_string(),
            at,
            actor: actor.clone(),
            facets: Facets::default(),
            data,
        }
    }

    /// The same change with `facets`.
    pub fn with(mut self, facets: Facets) -> Change {
        self.facets = facets;
        self
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a change serializes")
    }

    pub fn decode(bytes: &[u8]) -> Option<Change> {
        serde_json::from_slice(bytes).ok()
    }
}

/// The tree `name` and the changes' tree, for one transaction over both:
/// `(&tree, &changes).transaction(|(tx, ch)| ...)`.
pub fn with_changes(db: &sled::Db, name: &str) -> sled::Result<(sled::Tree, sled::Tree)> {
    Ok((db.open_tree(name)?, db.open_tree(TREE)?))
}

/// `{key: value}`: the `data` of most events (the resource under its name).
pub fn data(key: &str, value: &impl Serialize) -> serde_json::Value {
    let mut m = serde_json::Map::with_capacity(1);
    m.insert(
        key.to_owned(),
        serde_json::to_value(value).unwrap_or_default(),
    );
    serde_json::Value::Object(m)
}

/// Records `change` inside a transaction over [`TREE`] (`tx`): it is queued exactly when the
/// rest of the transaction commits. Returns its sequence (increasing in commit order of ids).
pub fn record<E>(tx: &TransactionalTree, change: &Change) -> ConflictableTransactionResult<u64, E> {
    Queue::push_in(tx, KIND, change.at.micros(), &change.encode())
}

/// Every change recorded and not yet fanned out, oldest first (for tests).
#[cfg(test)]
pub fn recorded(db: &sled::Db) -> Vec<Change> {
    CHANGES
        .peek(db, usize::MAX, usize::MAX)
        .expect("the changes read")
        .iter()
        .map(|i| Change::decode(&i.payload).expect("a change"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sled::Transactional;

    #[test]
    fn a_change_is_queued_with_its_transaction_or_not_at_all() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let (things, changes) = (db.open_tree("things").unwrap(), db.open_tree(TREE).unwrap());
        let change = Change::new(
            "idea.created",
            "app",
            "idea",
            Timestamp::t0(),
            &Actor::System,
            serde_json::json!({"idea": {"id": "idea"}}),
        )
        .with(Facets {
            board_id: Some("b".into()),
            ..Facets::default()
        });
        let failed: Result<(), sled::transaction::TransactionError<&str>> = (&things, &changes)
            .transaction(|(t, c)| {
                t.insert("idea", "v")?;
                record::<&str>(c, &change)?;
                sled::transaction::abort("refused")
            });
        assert!(failed.is_err());
        assert_eq!(CHANGES.stats(&db).unwrap().len, 0);
        assert!(things.is_empty());
        (&things, &changes)
            .transaction(|(t, c)| {
                t.insert("idea", "v")?;
                record::<()>(c, &change)
            })
            .unwrap();
        let items = CHANGES.peek(&db, 10, 1 << 20).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].kind, KIND);
        assert_eq!(Change::decode(&items[0].payload).unwrap(), change);
    }

    #[test]
    fn actors_and_facets_have_their_public_form() {
        let a = serde_json::to_value(Actor::ApiKey { id: "k".into() }).unwrap();
        assert_eq!(a, serde_json::json!({"type": "apiKey", "id": "k"}));
        let v = serde_json::to_value(Actor::Visitor { id: None }).unwrap();
        assert_eq!(v, serde_json::json!({"type": "visitor"}));
        let f = serde_json::to_value(Facets::default()).unwrap();
        assert_eq!(f, serde_json::json!({}));
    }
}
