//! Identity: `identify` links an anonymousId to a userId; a profile per user merges traits,
//! anonymousIds, groups, first and last seen. Kept in sled, written by the shard threads (all
//! events of one visitor go through one shard, in order), read by `GET /api/v1/profiles/{userId}`.
//!
//! Trees: `identities` (`app \0 anonymousId -> userId`), `profiles` (`app \0 userId -> Profile`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::event::Event;
use crate::storage::{decode, encode, StoreError};

pub const IDENTITIES: &str = "identities";
pub const PROFILES: &str = "profiles";
/// Bounds that keep a profile small whatever a client sends.
const MAX_ANONYMOUS_IDS: usize = 100;
const MAX_GROUPS: usize = 100;
const MAX_TRAITS: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    pub group_id: String,
    #[schema(value_type = Object)]
    pub traits: Map<String, Value>,
}

/// A visitor profile, merged on the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub user_id: String,
    #[schema(value_type = Object)]
    pub traits: Map<String, Value>,
    pub anonymous_ids: Vec<String>,
    pub groups: Vec<Group>,
    /// Microseconds since the epoch (shown as ISO 8601 by the API).
    pub first_seen: i64,
    pub last_seen: i64,
}

fn key(app: &str, id: &str) -> Vec<u8> {
    [app.as_bytes(), &[0], id.as_bytes()].concat()
}

/// The user an anonymous visitor was identified as.
pub fn user_of(db: &sled::Db, app: &str, anonymous_id: &str) -> Result<Option<String>, StoreError> {
    Ok(db
        .open_tree(IDENTITIES)?
        .get(key(app, anonymous_id))?
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
}

pub fn profile(db: &sled::Db, app: &str, user_id: &str) -> Result<Option<Profile>, StoreError> {
    let k = key(app, user_id);
    match db.open_tree(PROFILES)?.get(&k)? {
        Some(v) => Ok(Some(decode(&k, &v)?)),
        None => Ok(None),
    }
}

fn traits_of(e: &Event) -> Map<String, Value> {
    e.traits
        .as_deref()
        .and_then(|t| serde_json::from_str::<Map<String, Value>>(t).ok())
        .unwrap_or_default()
}

fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        if into.len() < MAX_TRAITS || into.contains_key(&k) {
            into.insert(k, v);
        }
    }
}

/// Folds one event into its user's profile (identify, group, or any event with a userId).
/// Idempotent, so replaying the WAL after a crash is harmless.
pub fn apply(db: &sled::Db, e: &Event) -> Result<(), StoreError> {
    let Some(user) = e.user_id.as_deref() else {
        return Ok(());
    };
    if e.kind == "identify" {
        if let Some(anon) = &e.anonymous_id {
            db.open_tree(IDENTITIES)?
                .insert(key(&e.app_id, anon), user.as_bytes())?;
        }
    }
    let tree = db.open_tree(PROFILES)?;
    let k = key(&e.app_id, user);
    // Events of one user may reach several shards (several devices): compare-and-swap, so
    // concurrent merges never overwrite each other.
    loop {
        let current = tree.get(&k)?;
        let before = match &current {
            Some(v) => Some(decode::<Profile>(&k, v)?),
            None => None,
        };
        let Some(p) = merged(before.as_ref(), user, e) else {
            return Ok(());
        };
        if tree
            .compare_and_swap(&k, current, Some(encode(&p)))?
            .is_ok()
        {
            return Ok(());
        }
    }
}

/// The profile with `e` folded in, or `None` when nothing worth a write changed (`last_seen`
/// alone is written at most once a minute per user, to keep page views cheap).
fn merged(before: Option<&Profile>, user: &str, e: &Event) -> Option<Profile> {
    let mut p = before.cloned().unwrap_or_else(|| Profile {
        user_id: user.to_owned(),
        traits: Map::new(),
        anonymous_ids: Vec::new(),
        groups: Vec::new(),
        first_seen: e.timestamp,
        last_seen: e.timestamp,
    });
    p.first_seen = p.first_seen.min(e.timestamp);
    p.last_seen = p.last_seen.max(e.timestamp);
    if let Some(anon) = &e.anonymous_id {
        if !p.anonymous_ids.contains(anon) && p.anonymous_ids.len() < MAX_ANONYMOUS_IDS {
            p.anonymous_ids.push(anon.clone());
        }
    }
    match e.kind.as_str() {
        "identify" => merge(&mut p.traits, traits_of(e)),
        "group" => {
            if let Some(gid) = &e.group_id {
                match p.groups.iter().position(|g| &g.group_id == gid) {
                    Some(i) => merge(&mut p.groups[i].traits, traits_of(e)),
                    None if p.groups.len() < MAX_GROUPS => p.groups.push(Group {
                        group_id: gid.clone(),
                        traits: traits_of(e),
                    }),
                    None => {}
                }
            }
        }
        _ => {}
    }
    let Some(before) = before else { return Some(p) };
    let seen_moved = p.last_seen - before.last_seen > 60_000_000;
    let mut same = p.clone();
    same.last_seen = before.last_seen;
    (same != *before || seen_moved).then_some(p)
}
