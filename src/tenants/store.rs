//! Apps and keys in sled: tree `apps` (`appId -> App`), tree `keys` (`keyId -> KeyRecord`) and
//! tree `app_keys` (`appId \0 keyId`, the API keys of each app in creation order, for listing).
//! Every read-modify-write is a compare-and-swap, so concurrent admin calls never undo each
//! other (a PATCH racing a revocation cannot bring the key back). Each write is flushed before
//! it returns.

use super::model::{App, KeyKind, KeyRecord};
use crate::ids::Timestamp;
use crate::storage::cursor::{self, Page, Walk};
use crate::storage::{decode, encode, StoreError};

pub const APPS: &str = "apps";
pub const KEYS: &str = "keys";
const APP_KEYS: &str = "app_keys";
/// `keyId -> µs since the epoch (u64 big endian)`: when each key last authenticated, written
/// from the registry's memory every half minute and at shutdown.
const KEY_USE: &str = "key_last_used";

fn app_key_entry(app_id: &str, key_id: &str) -> Vec<u8> {
    [app_id.as_bytes(), &[0], key_id.as_bytes()].concat()
}

fn all<T: serde::de::DeserializeOwned>(db: &sled::Db, tree: &str) -> Result<Vec<T>, StoreError> {
    crate::storage::decode_all(&db.open_tree(tree)?, b"")
}

/// Every app (start-up: the registry).
pub fn all_apps(db: &sled::Db) -> Result<Vec<App>, StoreError> {
    all(db, APPS)
}

/// Every key, revoked ones included (start-up: the registry).
pub fn all_keys(db: &sled::Db) -> Result<Vec<KeyRecord>, StoreError> {
    all(db, KEYS)
}

pub fn get_app(db: &sled::Db, id: &str) -> Result<Option<App>, StoreError> {
    match db.open_tree(APPS)?.get(id)? {
        Some(v) => Ok(Some(decode(id.as_bytes(), &v)?)),
        None => Ok(None),
    }
}

pub fn get_key(db: &sled::Db, id: &str) -> Result<Option<KeyRecord>, StoreError> {
    match db.open_tree(KEYS)?.get(id)? {
        Some(v) => Ok(Some(decode(id.as_bytes(), &v)?)),
        None => Ok(None),
    }
}

/// Stores a new app with its integration key.
pub fn create_app(db: &sled::Db, app: &App, key: &KeyRecord) -> Result<(), StoreError> {
    db.open_tree(KEYS)?.insert(&key.id, encode(key))?;
    db.open_tree(APPS)?.insert(&app.id, encode(app))?;
    db.flush()?;
    Ok(())
}

/// One page of apps in id (creation) order.
pub fn list_apps(db: &sled::Db, walk: Walk) -> Result<Page<App>, StoreError> {
    cursor::page(&db.open_tree(APPS)?, b"", walk, |k, v| {
        decode(k, v).map(Some)
    })
}

/// Compare-and-swap loop over one record: `change` runs on the current value until the swap
/// lands. Returns (before, after), or `None` when the record is missing or `keep` refuses it.
fn modify<T>(
    tree: &sled::Tree,
    id: &str,
    keep: impl Fn(&T) -> bool,
    change: impl Fn(&mut T),
) -> Result<Option<(T, T)>, StoreError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone,
{
    loop {
        let Some(current) = tree.get(id)? else {
            return Ok(None);
        };
        let before: T = decode(id.as_bytes(), &current)?;
        if !keep(&before) {
            return Ok(None);
        }
        let mut after = before.clone();
        change(&mut after);
        if tree
            .compare_and_swap(id, Some(current), Some(encode(&after)))?
            .is_ok()
        {
            return Ok(Some((before, after)));
        }
    }
}

/// Changes an app at `now` (compare-and-swap); returns (before, after), `None` when it does
/// not exist or is being deleted.
pub fn modify_app(
    db: &sled::Db,
    id: &str,
    change: impl Fn(&mut App),
    now: Timestamp,
) -> Result<Option<(App, App)>, StoreError> {
    let changed = modify(
        &db.open_tree(APPS)?,
        id,
        |app: &App| !app.deleting(),
        |app: &mut App| {
            change(app);
            app.updated_at = now;
        },
    )?;
    db.flush()?;
    Ok(changed)
}

/// Marks the app `id` as being deleted by the job `job`, unless another job holds it already.
/// Returns the app as it is now (its `deletion_job_id` names the job that deletes it), `None`
/// when there is no such app.
pub fn mark_deleting(
    db: &sled::Db,
    id: &str,
    job: &str,
    now: Timestamp,
) -> Result<Option<App>, StoreError> {
    let changed = modify(
        &db.open_tree(APPS)?,
        id,
        |app: &App| app.deletion_job_id.is_none(),
        |app: &mut App| {
            app.deletion_job_id = Some(job.to_owned());
            app.updated_at = now;
        },
    )?;
    db.flush()?;
    match changed {
        Some((_, after)) => Ok(Some(after)),
        None => get_app(db, id),
    }
}

/// Removes every key of the app `id` (API and integration keys, their index entries and
/// last-use times), then the app. Returns the ids of the keys removed.
pub fn remove_app(db: &sled::Db, id: &str) -> Result<Vec<String>, StoreError> {
    let (keys, index, used) = (
        db.open_tree(KEYS)?,
        db.open_tree(APP_KEYS)?,
        db.open_tree(KEY_USE)?,
    );
    let mut removed = Vec::new();
    for key in all_keys(db)?.into_iter().filter(|k| k.app_id == id) {
        keys.remove(&key.id)?;
        used.remove(&key.id)?;
        removed.push(key.id);
    }
    for entry in index.scan_prefix(app_key_entry(id, "")).keys() {
        index.remove(entry?)?;
    }
    db.open_tree(APPS)?.remove(id)?;
    db.flush()?;
    Ok(removed)
}

/// Gives the app `key` as its integration key and revokes the old one. Returns the app and the
/// revoked key, `None` when the app does not exist or is being deleted. The rotation happens
/// when the new key was made (its `createdAt`).
pub fn rotate_integration_key(
    db: &sled::Db,
    app_id: &str,
    key: &KeyRecord,
) -> Result<Option<(App, Option<KeyRecord>)>, StoreError> {
    let now = key.created_at;
    let keys = db.open_tree(KEYS)?;
    keys.insert(&key.id, encode(key))?;
    let Some((before, after)) = modify_app(
        db,
        app_id,
        |a| a.integration_key_id.clone_from(&key.id),
        now,
    )?
    else {
        keys.remove(&key.id)?;
        return Ok(None);
    };
    let revoked = modify(
        &keys,
        &before.integration_key_id,
        |_| true,
        |k: &mut KeyRecord| {
            k.revoked_at.get_or_insert(now);
        },
    )?
    .map(|(_, after)| after);
    db.flush()?;
    Ok(Some((after, revoked)))
}

pub fn insert_key(db: &sled::Db, key: &KeyRecord) -> Result<(), StoreError> {
    db.open_tree(KEYS)?.insert(&key.id, encode(key))?;
    if key.kind == KeyKind::Api {
        db.open_tree(APP_KEYS)?
            .insert(app_key_entry(&key.app_id, &key.id), &[][..])?;
    }
    db.flush()?;
    Ok(())
}

/// Adds every API key to the per-app index (start-up: stores written before the index
/// existed); returns how many entries were missing.
pub fn index_api_keys(db: &sled::Db) -> Result<usize, StoreError> {
    let index = db.open_tree(APP_KEYS)?;
    let mut added = 0;
    for key in all_keys(db)? {
        if key.kind == KeyKind::Api
            && index
                .insert(app_key_entry(&key.app_id, &key.id), &[][..])?
                .is_none()
        {
            added += 1;
        }
    }
    Ok(added)
}

/// Changes a live API key of `app_id` (compare-and-swap); `None` when the app has no such key
/// or it is revoked (a revoked key is gone for PATCH and DELETE; lists still show it).
pub fn modify_api_key(
    db: &sled::Db,
    app_id: &str,
    key_id: &str,
    change: impl Fn(&mut KeyRecord),
) -> Result<Option<KeyRecord>, StoreError> {
    let changed = modify(
        &db.open_tree(KEYS)?,
        key_id,
        |k: &KeyRecord| k.app_id == app_id && k.kind == KeyKind::Api && k.revoked_at.is_none(),
        change,
    )?;
    db.flush()?;
    Ok(changed.map(|(_, after)| after))
}

/// One page of the API keys of `app_id` (revoked ones included) in creation order.
pub fn list_api_keys(
    db: &sled::Db,
    app_id: &str,
    walk: Walk,
) -> Result<Page<KeyRecord>, StoreError> {
    let (index, keys) = (db.open_tree(APP_KEYS)?, db.open_tree(KEYS)?);
    cursor::page(
        &index,
        &app_key_entry(app_id, ""),
        walk,
        |id, _| match keys.get(id)? {
            Some(bytes) => decode(id, &bytes).map(Some),
            None => Ok(None),
        },
    )
}

/// Records when keys were last used (a later time wins).
pub fn record_last_used(db: &sled::Db, uses: &[(String, i64)]) -> Result<(), StoreError> {
    let tree = db.open_tree(KEY_USE)?;
    for (id, at) in uses {
        let at = (*at).max(0) as u64;
        tree.fetch_and_update(id, |old| {
            let old = old
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            Some(old.max(at).to_be_bytes().to_vec())
        })?;
    }
    Ok(())
}

/// When the key `id` was last used, as recorded (`None`: never recorded).
pub fn last_used(db: &sled::Db, id: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(db
        .open_tree(KEY_USE)?
        .get(id)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_ref()).ok())
        .map(|b| Timestamp::from_micros(u64::from_be_bytes(b) as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenants::model::{new_key, Permission};

    #[test]
    fn keys_stored_before_the_per_app_index_are_indexed_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let t0 = Timestamp::from_micros(1_750_000_000_000_000);
        let (old, _) = new_key(
            "app1",
            KeyKind::Api,
            "old",
            vec![Permission::ContactsRead],
            t0,
        );
        db.open_tree(KEYS)
            .unwrap()
            .insert(&old.id, encode(&old))
            .unwrap();
        let (new, _) = new_key("app1", KeyKind::Api, "new", vec![], t0);
        insert_key(&db, &new).unwrap();
        let walk = |n, after| Walk::new(n, after);
        assert_eq!(
            list_api_keys(&db, "app1", walk(10, None))
                .unwrap()
                .items
                .len(),
            1
        );
        assert_eq!(index_api_keys(&db).unwrap(), 1);
        assert_eq!(index_api_keys(&db).unwrap(), 0);
        let first = list_api_keys(&db, "app1", walk(1, None)).unwrap();
        assert_eq!(first.items[0].id, old.id);
        let second = list_api_keys(&db, "app1", walk(1, first.next.as_ref())).unwrap();
        assert_eq!(
            (second.items[0].id.as_str(), second.next),
            (new.id.as_str(), None)
        );
        assert!(list_api_keys(&db, "app", walk(10, None))
            .unwrap()
            .items
            .is_empty());
    }

    #[test]
    fn the_latest_use_of_a_key_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        assert_eq!(last_used(&db, "k").unwrap(), None);
        record_last_used(&db, &[("k".into(), 2_000_000)]).unwrap();
        record_last_used(&db, &[("k".into(), 1_000_000)]).unwrap();
        assert_eq!(
            last_used(&db, "k").unwrap(),
            Some(Timestamp::from_micros(2_000_000))
        );
    }
}
