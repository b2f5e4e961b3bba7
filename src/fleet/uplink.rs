//! Everything going up, from an edge to its control node: what the edge learns that the
//! control node must know.
//!
//! ```text
//! edge: stager (rollup delta + the shard's rollup LSN, one transaction)  -> queue `uplink`
//!       writer (a profile change, before its local write)                  (storage/queue.rs)
//!       widget POST (the response, once stored locally)
//!   send_once, every sync interval: peek -> POST /fleet/v1/uplink -> ack_through(through)
//! control: receive, in order: rollup   -> rollup::store::apply_from, once per (node, shard, lsn)
//!                             profile  -> profiles::store::apply (idempotent)
//!                             response -> surveys::store::respond (an upsert by anonymousId)
//!          and the node's `through` (tree `fleet_uplink`): a batch sent again is skipped
//! ```
//!
//! Wire: `{"node", "items": [{"seq", "kind": "rollup"|"profile"|"response", "body"}]}` answered
//! `{"through": seq}`, the last sequence of the node applied. Every item is idempotent on its
//! own, so an ack lost on the way (the edge sends the batch again) counts nothing twice; the
//! control node's rollups are the sum of each (node, shard, lsn)'s delta applied once, which
//! are the rows of the lake. An item the control node cannot take (a survey closed since, a
//! body it cannot read) is logged and passed, never retried forever.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::ApiError;
use crate::collector::rollup::{store as rollups, wire};
use crate::ids::Timestamp;
use crate::profiles::{self, OwnedTouch};
use crate::storage::queue::{Edit, Item, UPLINK};
use crate::storage::{Store, StoreError};
use crate::surveys::model::ResponseItem;
use crate::surveys::store::{self as surveys, SurveyError};
use crate::validation::FieldError;

/// The control node's tree: node id -> the last sequence of its uplink applied (u64 BE).
pub const TREE: &str = "fleet_uplink";
/// Items per batch, and payload bytes beyond the first item (a dense rollup is ~50 KiB).
const MAX_ITEMS: usize = 500;
const MAX_BYTES: usize = 4 << 20;

/// What an edge sends: its items, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UplinkBatch {
    pub node: String,
    pub items: Vec<UplinkItem>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UplinkItem {
    pub seq: u64,
    pub kind: String,
    pub body: Value,
}

/// The answer: every item of the node up to `through` is applied (the edge acks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Through {
    pub through: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum UplinkError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("control node unreachable: {0}")]
    Http(#[from] reqwest::Error),
    #[error("control node answered {0}")]
    Refused(reqwest::StatusCode),
}

/// The kinds on the wire, by their queue byte.
const KINDS: [(u8, &str); 3] = [
    (wire::KIND, "rollup"),
    (profiles::model::UPLINK_KIND, "profile"),
    (crate::surveys::model::UPLINK_KIND, "response"),
];

fn kind_name(kind: u8) -> &'static str {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("unknown", |(_, n)| n)
}

fn wire_item(item: &Item) -> UplinkItem {
    UplinkItem {
        seq: item.seq,
        kind: kind_name(item.kind).to_owned(),
        body: serde_json::from_slice(&item.payload).unwrap_or(Value::Null),
    }
}

/// The edge's uplink now: items waiting and the age of the oldest (s), for the heartbeat.
pub fn backlog(db: &sled::Db, now_micros: i64) -> sled::Result<(u64, f64)> {
    let stats = UPLINK.stats(db)?;
    let age = stats
        .oldest
        .map_or(0.0, |(_, at)| (now_micros - at).max(0) as f64 / 1e6);
    Ok((stats.len as u64, age))
}

/// Takes every trace of `app` out of the edge's uplink (its deletion: the control node must
/// not get it back): its buckets out of each rollup delta, its profile touches and responses
/// dropped. Returns how many items changed.
pub fn forget_app(db: &sled::Db, app: &str) -> sled::Result<usize> {
    UPLINK.edit(db, |item| {
        let payload = item.payload.as_slice();
        let of_app = match kind_name(item.kind) {
            "rollup" => {
                let Ok(mut r) = serde_json::from_slice::<wire::Item>(payload) else {
                    return Edit::Keep;
                };
                if !r.delta.forget(app) {
                    return Edit::Keep;
                }
                if !r.delta.is_empty() {
                    return Edit::Replace(wire::Item::payload(r.shard, r.lsn, &r.delta));
                }
                true
            }
            "profile" => {
                serde_json::from_slice::<OwnedTouch>(payload).is_ok_and(|t| t.app_id == app)
            }
            "response" => {
                serde_json::from_slice::<ResponseItem>(payload).is_ok_and(|r| r.app_id == app)
            }
            _ => false,
        };
        if of_app {
            Edit::Drop
        } else {
            Edit::Keep
        }
    })
}

/// Sends the oldest items of the edge's uplink to the control node and acknowledges what it
/// applied; returns how many items left the queue (0: nothing to send).
pub async fn send_once(
    http: &reqwest::Client,
    base_url: &str,
    token: &str,
    node: &str,
    store: &Store,
) -> Result<usize, UplinkError> {
    let items = store
        .run(|db| Ok(UPLINK.peek(db, MAX_ITEMS, MAX_BYTES)?))
        .await?;
    let Some(last) = items.last().map(|i| i.seq) else {
        return Ok(0);
    };
    let batch = UplinkBatch {
        node: node.to_owned(),
        items: items.iter().map(wire_item).collect(),
    };
    let url = format!("{}/fleet/v1/uplink", base_url.trim_end_matches('/'));
    let answer = http
        .post(url)
        .bearer_auth(token)
        .json(&batch)
        .send()
        .await?;
    if !answer.status().is_success() {
        return Err(UplinkError::Refused(answer.status()));
    }
    let Through { through } = answer.json().await?;
    let acked = through.min(last);
    Ok(store
        .run(move |db| Ok(UPLINK.ack_through(db, acked)?))
        .await?)
}

/// The handler's body of `POST /fleet/v1/uplink` on the control node (`own_node`: its
/// `collector.node_id`, whose shards keep their own rollup LSNs).
pub async fn receive_batch(
    store: &Store,
    own_node: &str,
    body: UplinkBatch,
) -> Result<Through, ApiError> {
    if body.node.is_empty() || body.node == own_node {
        let why = "an edge's own node id (collector.node_id), not the control node's";
        return Err(ApiError::validation(vec![FieldError::new("node", why)]));
    }
    let own = own_node.to_owned();
    Ok(store
        .run(move |db| receive(db, &own, &body.node, &body.items))
        .await?)
}

fn recorded(db: &sled::Db, node: &str) -> Result<u64, StoreError> {
    Ok(db
        .open_tree(TREE)?
        .get(node.as_bytes())?
        .and_then(|v| v.as_ref().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0))
}

/// Applies `node`'s items in order, skipping those at or below its recorded `through`, and
/// records the new one after each. An error of the store stops the batch (the edge sends it
/// again); an item that cannot be applied is logged and passed.
pub fn receive(
    db: &sled::Db,
    own_node: &str,
    node: &str,
    items: &[UplinkItem],
) -> Result<Through, StoreError> {
    let mut through = recorded(db, node)?;
    let tree = db.open_tree(TREE)?;
    for item in items {
        if item.seq <= through {
            continue;
        }
        if let Err(why) = apply(db, own_node, node, item)? {
            tracing::warn!(node, seq = item.seq, kind = %item.kind, %why, "uplink item passed");
        }
        through = item.seq;
        tree.insert(node.as_bytes(), &through.to_be_bytes())?;
    }
    Ok(Through { through })
}

/// Whether `app` is an app of this node that is not being deleted: what an edge sends of
/// another (deleted meanwhile) is not brought back.
fn alive(db: &sled::Db, app: &str) -> Result<bool, StoreError> {
    Ok(crate::tenants::store::get_app(db, app)?.is_some_and(|a| !a.deleting()))
}

/// Applies one item: `Ok(Err(why))` when it cannot be (and never will be).
fn apply(
    db: &sled::Db,
    own_node: &str,
    node: &str,
    item: &UplinkItem,
) -> Result<Result<(), String>, StoreError> {
    let body = item.body.clone();
    match item.kind.as_str() {
        "rollup" => {
            let Ok(mut r) = serde_json::from_value::<wire::Item>(body) else {
                return Ok(Err("unreadable rollup".into()));
            };
            let apps: Vec<String> = r.delta.buckets().map(|(a, _, _)| a.to_owned()).collect();
            for app in apps {
                if !alive(db, &app)? {
                    r.delta.forget(&app);
                }
            }
            let from = if node == own_node { "" } else { node };
            match rollups::apply_from(db, from, r.shard, r.lsn, &r.delta) {
                Ok(_) => Ok(Ok(())),
                Err(rollups::RollupError::Sled(e)) => Err(e.into()),
                Err(rollups::RollupError::Corrupt(key)) => Err(StoreError::Corrupt {
                    key,
                    cause: "rollup bucket".into(),
                }),
            }
        }
        "profile" => match serde_json::from_value::<OwnedTouch>(body) {
            Ok(t) if !alive(db, &t.app_id)? => Ok(Err(format!("no app {}", t.app_id))),
            Ok(t) => profiles::store::apply(db, &t.touch()).map(Ok),
            Err(e) => Ok(Err(format!("unreadable profile touch: {e}"))),
        },
        "response" => {
            let Ok(r) = serde_json::from_value::<ResponseItem>(body) else {
                return Ok(Err("unreadable response".into()));
            };
            if !alive(db, &r.app_id)? {
                return Ok(Err(format!("no app {}", r.app_id)));
            }
            let at = Timestamp::from_micros(r.at);
            match surveys::respond(db, &r.app_id, &r.survey_id, &r.draft, at, None) {
                Ok(_) => Ok(Ok(())),
                Err(SurveyError::Store(e)) => Err(e),
                Err(e) => Ok(Err(format!("response not taken: {e:?}"))),
            }
        }
        other => Ok(Err(format!("unknown kind {other}"))),
    }
}

#[cfg(test)]
mod tests;
