//! The in-memory registry of apps and live keys: authenticates a request without touching
//! sled. Loaded from sled at start and updated by every admin write (sled first, then memory),
//! so a revocation takes effect on the very next request. A presented key is found by its id
//! and its secret hash compared in constant time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use subtle::ConstantTimeEq;

use super::model::{App, KeyKind, KeyRecord, Permission, Plan};
use super::store;
use crate::clock::Clock;
use crate::ids;
use crate::storage::StoreError;

/// Who a valid key belongs to.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub key_id: String,
    pub app_id: String,
    pub plan: Plan,
    pub permissions: Vec<Permission>,
}

struct LiveKey {
    kind: KeyKind,
    app_id: String,
    hash: [u8; 32],
    permissions: Vec<Permission>,
    /// When the key last authenticated (µs since the epoch, 0: not since the server started).
    last_used: AtomicI64,
}

/// The in-memory view of apps and live (unrevoked) keys.
pub struct Registry {
    keys: RwLock<HashMap<String, Arc<LiveKey>>>,
    plans: RwLock<HashMap<String, Plan>>,
    /// When a key authenticates (its last use).
    clock: Arc<dyn Clock>,
}

impl Registry {
    /// Loads every app and unrevoked key from sled (start-up only).
    pub fn load(db: &sled::Db, clock: Arc<dyn Clock>) -> Result<Registry, StoreError> {
        let reg = Registry {
            keys: RwLock::default(),
            plans: RwLock::default(),
            clock,
        };
        for app in store::all_apps(db)? {
            reg.set_app(&app);
        }
        for key in store::all_keys(db)? {
            reg.set_key(&key);
        }
        Ok(reg)
    }

    /// Sets every app and key to what sled holds now (an edge, after its registry came from
    /// the control node): apps and keys no longer in sled are dropped.
    pub fn reload_all(&self, db: &sled::Db) -> Result<(), StoreError> {
        let fresh = Registry::load(db, self.clock.clone())?;
        let plans = std::mem::take(&mut *fresh.plans.write().expect("registry lock"));
        let keys = std::mem::take(&mut *fresh.keys.write().expect("registry lock"));
        *self.plans.write().expect("registry lock") = plans;
        *self.keys.write().expect("registry lock") = keys;
        Ok(())
    }

    /// Adds or updates an app; an app being deleted is left out, so none of its keys
    /// authenticates any more.
    pub fn set_app(&self, app: &App) {
        let mut plans = self.plans.write().expect("registry lock");
        if app.deleting() {
            plans.remove(&app.id);
        } else {
            plans.insert(app.id.clone(), app.plan);
        }
    }

    /// Adds, updates or (when revoked) removes a key.
    pub fn set_key(&self, key: &KeyRecord) {
        put_key(&mut self.keys.write().expect("registry lock"), key);
    }

    /// Sets the key `id` to what sled holds now, under the registry's lock. Called on a store
    /// thread after each admin write: of two racing writes, the one whose reload runs last sees
    /// both, so memory ends as sled does (a PATCH racing a revocation cannot revive the key).
    pub fn reload_key(&self, db: &sled::Db, id: &str) -> Result<(), StoreError> {
        let mut keys = self.keys.write().expect("registry lock");
        match store::get_key(db, id)? {
            Some(key) => put_key(&mut keys, &key),
            None => {
                keys.remove(id);
            }
        }
        Ok(())
    }

    /// Sets the app `id` (its plan) to what sled holds now; see `reload_key`.
    pub fn reload_app(&self, db: &sled::Db, id: &str) -> Result<(), StoreError> {
        let mut plans = self.plans.write().expect("registry lock");
        match store::get_app(db, id)? {
            Some(app) if !app.deleting() => plans.insert(app.id, app.plan),
            _ => plans.remove(id),
        };
        Ok(())
    }

    /// The clock a key's last use is read from.
    pub fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    pub fn plan_of(&self, app_id: &str) -> Option<Plan> {
        self.plans
            .read()
            .expect("registry lock")
            .get(app_id)
            .copied()
    }

    /// When the live key `id` last authenticated, since the server started (kept in memory only).
    pub fn last_used(&self, id: &str) -> Option<crate::ids::Timestamp> {
        let keys = self.keys.read().expect("registry lock");
        match keys.get(id)?.last_used.load(Ordering::Relaxed) {
            0 => None,
            t => Some(crate::ids::Timestamp::from_micros(t)),
        }
    }

    /// The keys used after `since` (µs since the epoch) and when, to be recorded in sled.
    pub fn used_since(&self, since: i64) -> Vec<(String, i64)> {
        let keys = self.keys.read().expect("registry lock");
        keys.iter()
            .map(|(id, k)| (id, k.last_used.load(Ordering::Relaxed)))
            .filter(|(_, at)| *at > since)
            .map(|(id, at)| (id.clone(), at))
            .collect()
    }

    /// Checks a presented key of the given kind; `None` for malformed, unknown or revoked keys.
    pub fn authenticate(&self, presented: &str, kind: KeyKind) -> Option<Authenticated> {
        let rest = presented
            .trim()
            .strip_prefix(kind.prefix())?
            .strip_prefix('_')?;
        let (id, secret) = rest.split_once('_')?;
        let live = self.keys.read().expect("registry lock").get(id).cloned();
        // Hash even when the id is unknown, so both paths cost the same.
        let hash = ids::hash_secret(secret);
        let live = live?;
        let equal: bool = live.hash.ct_eq(&hash).into();
        if !equal || live.kind != kind {
            return None;
        }
        let plan = self.plan_of(&live.app_id)?;
        live.last_used
            .store(self.clock.now_micros(), Ordering::Relaxed);
        Some(Authenticated {
            key_id: id.to_owned(),
            app_id: live.app_id.clone(),
            plan,
            permissions: live.permissions.clone(),
        })
    }
}

/// Adds, updates or (when revoked) removes `key` in a locked key map.
fn put_key(keys: &mut HashMap<String, Arc<LiveKey>>, key: &KeyRecord) {
    if key.revoked_at.is_some() {
        keys.remove(&key.id);
        return;
    }
    let mut hash = [0u8; 32];
    if hex::decode_to_slice(&key.secret_sha256, &mut hash).is_err() {
        tracing::error!(key_id = %key.id, "stored key hash is not hex; key disabled");
        return;
    }
    let last_used = keys
        .get(&key.id)
        .map(|k| k.last_used.load(Ordering::Relaxed))
        .unwrap_or(0);
    keys.insert(
        key.id.clone(),
        Arc::new(LiveKey {
            kind: key.kind,
            app_id: key.app_id.clone(),
            hash,
            permissions: key.permissions.clone(),
            last_used: AtomicI64::new(last_used),
        }),
    );
}
