//! Profiles in sled. Trees: `identities` (`app \0 anonymousId -> userId`) and `profiles`
//! (`app \0 userId -> Profile` as JSON). Written by the collector's shard writers (all events
//! of one visitor go through one shard, in order), read by `GET /api/v1/profiles/{userId}`.

use super::model::{merged, Change, OwnedTouch, Profile, Touch, UPLINK_KIND};
use crate::storage::queue::Queue;
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
    apply_to(db, t, None)
}

/// `apply`, and on an edge (`uplink`) the touch is pushed for the control node whenever it
/// changes the profile: before the write, so a crash never keeps the change unsent (a replay
/// pushes it again, and the control node's apply is idempotent).
pub fn apply_to(db: &sled::Db, t: &Touch<'_>, mut uplink: Option<Queue>) -> Result<(), StoreError> {
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
        if let Some(q) = uplink.take() {
            q.push(db, UPLINK_KIND, t.at, &encode(&OwnedTouch::of(t)))?;
        }
        if tree
            .compare_and_swap(&k, current, Some(encode(&p)))?
            .is_ok()
        {
            return Ok(());
        }
    }
}

/// Every anonymousId linked to `user_id` (by its profile, and by the identity links, which
/// also hold those beyond the profile's bound).
pub fn linked(db: &sled::Db, app: &str, user_id: &str) -> Result<Vec<String>, StoreError> {
    let mut ids = get(db, app, user_id)?.map_or_else(Vec::new, |p| p.anonymous_ids);
    let prefix = key(app, "");
    for kv in db.open_tree(IDENTITIES)?.scan_prefix(&prefix) {
        let (k, v) = kv?;
        if *v == *user_id.as_bytes() {
            ids.push(String::from_utf8_lossy(&k[prefix.len()..]).into_owned());
        }
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Erases `user_id`'s profile and the identity links of `anonymous_ids` and of `user_id`.
/// Answers (profiles, links) removed.
pub fn erase(
    db: &sled::Db,
    app: &str,
    user_id: Option<&str>,
    anonymous_ids: &[&str],
) -> Result<(usize, usize), StoreError> {
    let profiles = match user_id {
        Some(u) => usize::from(db.open_tree(PROFILES)?.remove(key(app, u))?.is_some()),
        None => 0,
    };
    let identities = db.open_tree(IDENTITIES)?;
    let mut links = 0;
    for a in anonymous_ids {
        links += usize::from(identities.remove(key(app, a))?.is_some());
    }
    if let Some(u) = user_id {
        for a in linked(db, app, u)? {
            links += usize::from(identities.remove(key(app, &a))?.is_some());
        }
    }
    db.flush()?;
    Ok((profiles, links))
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

    #[test]
    fn erasing_a_user_removes_its_profile_and_every_link_of_its_app_only() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        for (app, anon) in [("a1", "x"), ("a1", "y"), ("a2", "x")] {
            let t = Touch {
                app_id: app,
                user_id: "u1",
                anonymous_id: Some(anon),
                at: 1,
                change: Change::Identify { traits: None },
            };
            apply(&db, &t).unwrap();
        }
        assert_eq!(linked(&db, "a1", "u1").unwrap(), ["x", "y"]);
        assert_eq!(erase(&db, "a1", Some("u1"), &["x"]).unwrap(), (1, 2));
        assert!(get(&db, "a1", "u1").unwrap().is_none());
        assert_eq!(user_of(&db, "a1", "y").unwrap(), None);
        assert!(linked(&db, "a1", "u1").unwrap().is_empty());
        assert_eq!(user_of(&db, "a2", "x").unwrap().as_deref(), Some("u1"));
        assert_eq!(erase(&db, "a1", Some("u1"), &[]).unwrap(), (0, 0));
    }
}
