//! An edge's own copies of erased persons, forgotten. An edge keeps what the survey widget's
//! fallback and its writers read (identity links, profiles, survey responses) and the refused
//! events of its quarantine; the erasure job on the control node erases its own stores and
//! the lake, and its suppressions reach every edge with the registry. When an edge applies a
//! registry whose suppressions changed, it removes from its sled every record of a suppressed
//! id, matched by fingerprint (the edge never learns the ids themselves).

use crate::storage::StoreError;
use crate::tenants::suppression::{AppList, IdKind};

/// What was forgotten: (identity links, profiles, responses, refused events).
pub type Forgotten = (usize, usize, usize, usize);

/// Removes `app`'s records of every id `list` refuses at `now` (µs).
pub fn suppressed(
    db: &sled::Db,
    app: &str,
    list: &AppList,
    now: i64,
) -> Result<Forgotten, StoreError> {
    let refuses = |kind, id: &str| list.refuses(app, kind, id, now);
    let prefix = [app.as_bytes(), &[0]].concat();
    let identities = db.open_tree(crate::profiles::store::IDENTITIES)?;
    let mut users = Vec::new();
    let mut links = 0;
    for kv in identities.scan_prefix(&prefix) {
        let (k, user) = kv?;
        let anon = String::from_utf8_lossy(&k[prefix.len()..]);
        let user = String::from_utf8_lossy(&user).into_owned();
        if refuses(IdKind::Anonymous, &anon) || refuses(IdKind::User, &user) {
            identities.remove(&k)?;
            links += 1;
            users.push(user);
        }
    }
    let profiles_tree = db.open_tree(crate::profiles::store::PROFILES)?;
    let mut profiles = 0;
    for kv in profiles_tree.scan_prefix(&prefix) {
        let (k, _) = kv?;
        let user = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
        if refuses(IdKind::User, &user) || users.contains(&user) {
            profiles_tree.remove(&k)?;
            profiles += 1;
        }
    }
    let responses = crate::surveys::store::drop_responses(db, app, |r| {
        refuses(IdKind::Anonymous, &r.anonymous_id)
            || r.user_id
                .as_deref()
                .is_some_and(|u| refuses(IdKind::User, u))
    })?;
    let refused = crate::collector::quarantine::forget(db, app, |r| {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&r.event) else {
            return false;
        };
        let id = |name| event.get(name).and_then(|v| v.as_str());
        id("anonymousId").is_some_and(|a| refuses(IdKind::Anonymous, a))
            || id("userId").is_some_and(|u| refuses(IdKind::User, u))
    })?;
    db.flush()?;
    Ok((links, profiles, responses, refused))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::{Change, Touch};
    use crate::tenants::Suppressions;

    #[test]
    fn an_edge_forgets_the_links_and_profiles_of_suppressed_ids_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        for (user, anon) in [("u1", "a1"), ("u2", "a2"), ("u3", "a3")] {
            let t = Touch {
                app_id: "app",
                user_id: user,
                anonymous_id: Some(anon),
                at: 1,
                change: Change::Identify { traits: None },
            };
            crate::profiles::store::apply(&db, &t).unwrap();
        }
        let list = Suppressions::default();
        // u1 by its userId, u2 by its anonymousId.
        list.add(
            &db,
            "app",
            &[(IdKind::User, "u1"), (IdKind::Anonymous, "a2")],
            None,
            "job",
        )
        .unwrap();
        let app = list.of("app").unwrap();
        let (links, profiles, _, _) = suppressed(&db, "app", &app, 0).unwrap();
        assert_eq!((links, profiles), (2, 2));
        let get = |u| crate::profiles::store::get(&db, "app", u).unwrap();
        assert!(get("u1").is_none() && get("u2").is_none());
        assert!(get("u3").is_some());
        assert_eq!(
            crate::profiles::store::user_of(&db, "app", "a3")
                .unwrap()
                .as_deref(),
            Some("u3")
        );
        assert_eq!(suppressed(&db, "app", &app, 0).unwrap(), (0, 0, 0, 0));
    }
}
