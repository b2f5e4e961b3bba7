//! Profiles in sled. Trees: `identities` (`app \0 anonymousId -> userId`) and `profiles`
//! (`app \0 userId -> Profile` as JSON). Written by the collector's shard writers (all events
//! of one visitor go through one shard, in order), read by `GET /api/v1/profiles/{userId}`.

use super::model::{merged, Change, Profile, Touch};
use crate::storage::{decode, encode, StoreError};

pub const IDENTITIES: &str = "identities";
pub const PROFILES: &str = "profiles";

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

pub fn get(db: &sled::Db, app: &str, user_id: &str) -> Result<Option<Profile>, StoreError> {
    let k = key(app, user_id);
    match db.open_tree(PROFILES)?.get(&k)? {
        Some(v) => Ok(Some(decode(&k, &v)?)),
        None => Ok(None),
    }
}

/// Folds one touch into its user's profile (and, for identify, links the anonymousId).
/// Idempotent, so replaying the WAL after a crash is harmless.
pub fn apply(db: &sled::Db, t: &Touch<'_>) -> Result<(), StoreError> {
    if let (Change::Identify { .. }, Some(anon)) = (&t.change, t.anonymous_id) {
        db.open_tree(IDENTITIES)?
            .insert(key(t.app_id, anon), t.user_id.as_bytes())?;
    }
    let tree = db.open_tree(PROFILES)?;
    let k = key(t.app_id, t.user_id);
    // Events of one user may reach several shards (several devices): compare-and-swap, so
    // concurrent merges never overwrite each other.
    loop {
        let current = tree.get(&k)?;
        let before = match &current {
            Some(v) => Some(decode::<Profile>(&k, v)?),
            None => None,
        };
        let Some(p) = merged(before.as_ref(), t) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_links_the_visitor_and_apps_stay_apart() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let t = Touch {
            app_id: "a1",
            user_id: "u1",
            anonymous_id: Some("anon"),
            at: 1,
            change: Change::Identify { traits: None },
        };
        apply(&db, &t).unwrap();
        apply(&db, &t).unwrap();
        assert_eq!(user_of(&db, "a1", "anon").unwrap().as_deref(), Some("u1"));
        assert_eq!(user_of(&db, "a2", "anon").unwrap(), None);
        assert_eq!(
            get(&db, "a1", "u1").unwrap().unwrap().anonymous_ids,
            ["anon"]
        );
        assert!(get(&db, "a2", "u1").unwrap().is_none());
    }
}
