//! Suppression: the ids of an erased person (`privacy/`), refused by the collector's edge
//! before the WAL, so a stored retry or a late batch never brings them back.
//!
//! Only fingerprints are kept: SHA-256 of `app \0 kind \0 id` (`kind` is `u` for a userId, `a`
//! for an anonymousId), never the id. sled holds them in tree `suppressions`:
//! - `e` app \0 fingerprint -> [`Entry`] (JSON: kind, until, the erasure that set it)
//! - `version`               -> u64, big endian: one more at every change
//!
//! so the list is a plain versioned set that a fleet can ship to its edges with the registry.
//! In memory (loaded at start, changed on the store thread after sled): per app, the first 16
//! bytes of each fingerprint and the instant it expires, behind a `RwLock` the edge holds for a
//! map lookup per batch (nothing when the app has no entry). About 32 bytes per id
//! (ARCHITECTURE.md). An entry stays for `privacy.suppress_days` (0: for ever); expired ones are
//! ignored at once and removed from sled at the next start.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::Timestamp;
use crate::storage::{decode, encode, StoreError};

pub const TREE: &str = "suppressions";
const VERSION: &[u8] = b"version";

crate::fields::names! {
    /// Which id of a person an entry refuses.
    pub IdKind {
        User = "userId",
        Anonymous = "anonymousId",
    }
}

impl IdKind {
    fn tag(self) -> u8 {
        match self {
            IdKind::User => b'u',
            IdKind::Anonymous => b'a',
        }
    }
}

/// SHA-256 of `app \0 kind \0 id`: what the list and the erasure's audit keep of an id.
pub fn fingerprint(app: &str, kind: IdKind, id: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(app.as_bytes());
    h.update([0, kind.tag(), 0]);
    h.update(id.as_bytes());
    h.finalize().into()
}

/// One suppressed id, as sled keeps it (the fingerprint is in the key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub kind: IdKind,
    /// Refused until then; `None`: for ever.
    pub until: Option<Timestamp>,
    /// The erasure job that set it.
    pub erasure_id: String,
}

fn entry_key(app: &str, fp: &[u8; 32]) -> Vec<u8> {
    [b"e", app.as_bytes(), &[0], &fp[..]].concat()
}

fn short(fp: &[u8; 32]) -> u128 {
    let mut b = [0; 16];
    b.copy_from_slice(&fp[..16]);
    u128::from_be_bytes(b)
}

/// The suppressed ids of one app: fingerprint (16 bytes) -> until (µs; `i64::MAX`: for ever).
#[derive(Debug, Default, Clone)]
pub struct AppList {
    ids: HashMap<u128, i64>,
}

impl AppList {
    /// Whether `id` (of `kind`) of `app` is refused at `now` (µs).
    pub fn refuses(&self, app: &str, kind: IdKind, id: &str, now: i64) -> bool {
        self.ids
            .get(&short(&fingerprint(app, kind, id)))
            .is_some_and(|&until| now < until)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[derive(Debug, Default)]
struct List {
    version: u64,
    apps: HashMap<String, Arc<AppList>>,
}

/// The suppression list in memory, shared by the edge (reads) and the erasure jobs (adds).
#[derive(Debug, Default)]
pub struct Suppressions {
    list: RwLock<List>,
}

fn be_u64(v: Option<&[u8]>) -> u64 {
    v.and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

impl Suppressions {
    /// Loads the list from sled, removing the entries expired at `now`.
    pub fn load(db: &sled::Db, now: Timestamp) -> Result<Suppressions, StoreError> {
        let tree = db.open_tree(TREE)?;
        let mut apps: HashMap<String, AppList> = HashMap::new();
        let mut expired = Vec::new();
        for kv in tree.scan_prefix(b"e") {
            let (k, v) = kv?;
            let e: Entry = decode(&k, &v)?;
            if e.until.is_some_and(|t| t <= now) {
                expired.push(k);
                continue;
            }
            let Some((app, fp)) = split_key(&k) else {
                continue;
            };
            apps.entry(app)
                .or_default()
                .ids
                .insert(short(&fp), until_micros(e.until));
        }
        for k in expired {
            tree.remove(k)?;
        }
        let version = be_u64(tree.get(VERSION)?.as_deref());
        let apps = apps.into_iter().map(|(a, l)| (a, Arc::new(l))).collect();
        Ok(Suppressions {
            list: RwLock::new(List { version, apps }),
        })
    }

    /// Sets the list in memory to what sled holds now (an edge, after its registry came from
    /// the control node).
    pub fn reload(&self, db: &sled::Db, now: Timestamp) -> Result<(), StoreError> {
        let fresh = Suppressions::load(db, now)?;
        let list = fresh.list.into_inner().unwrap_or_else(|p| p.into_inner());
        *self.list.write().unwrap_or_else(|p| p.into_inner()) = list;
        Ok(())
    }

    /// Suppresses `ids` of `app` until `until` (`None`: for ever): written to sled (flushed),
    /// then to memory. An id already suppressed gets the later of the two ends. Answers the
    /// list's new version.
    pub fn add(
        &self,
        db: &sled::Db,
        app: &str,
        ids: &[(IdKind, &str)],
        until: Option<Timestamp>,
        erasure_id: &str,
    ) -> Result<u64, StoreError> {
        let tree = db.open_tree(TREE)?;
        let mut added = Vec::with_capacity(ids.len());
        for &(kind, id) in ids {
            let fp = fingerprint(app, kind, id);
            let key = entry_key(app, &fp);
            let old = match tree.get(&key)? {
                Some(v) => Some(decode::<Entry>(&key, &v)?),
                None => None,
            };
            let until = match old.map(|o| o.until) {
                Some(None) => None,
                Some(Some(t)) => until.map(|u| u.max(t)),
                None => until,
            };
            let entry = Entry {
                kind,
                until,
                erasure_id: erasure_id.to_owned(),
            };
            tree.insert(key, encode(&entry))?;
            added.push((short(&fp), until_micros(until)));
        }
        let version = tree
            .update_and_fetch(VERSION, |v| Some((be_u64(v) + 1).to_be_bytes().to_vec()))?
            .as_deref()
            .map_or(0, |b| be_u64(Some(b)));
        db.flush()?;
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        let mut app_list = list
            .apps
            .get(app)
            .map(|l| (**l).clone())
            .unwrap_or_default();
        for (fp, until) in added {
            app_list.ids.insert(fp, until);
        }
        list.apps.insert(app.to_owned(), Arc::new(app_list));
        list.version = version;
        Ok(version)
    }

    /// Drops `app`'s list from memory (its deletion, which removes its sled entries with the
    /// app's other records); true when it had one.
    pub fn forget(&self, app: &str) -> bool {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        list.apps.remove(app).is_some()
    }

    /// The app's suppressed ids, or `None` when it has none (the edge's common case: one map
    /// lookup under the read lock, no hashing).
    pub fn of(&self, app: &str) -> Option<Arc<AppList>> {
        let list = self.list.read().unwrap_or_else(|p| p.into_inner());
        list.apps.get(app).filter(|l| !l.is_empty()).cloned()
    }

    /// Every app's list (an edge forgetting its own copies of suppressed ids).
    pub fn all(&self) -> Vec<(String, Arc<AppList>)> {
        let list = self.list.read().unwrap_or_else(|p| p.into_inner());
        list.apps
            .iter()
            .map(|(a, l)| (a.clone(), l.clone()))
            .collect()
    }

    /// The list's version (one more at every change; 0: never changed).
    pub fn version(&self) -> u64 {
        self.list.read().unwrap_or_else(|p| p.into_inner()).version
    }

    /// Ids held in memory, every app together (what the memory bound counts).
    pub fn len(&self) -> usize {
        let list = self.list.read().unwrap_or_else(|p| p.into_inner());
        list.apps.values().map(|l| l.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn until_micros(until: Option<Timestamp>) -> i64 {
    until.map_or(i64::MAX, |t| t.micros())
}

fn split_key(k: &[u8]) -> Option<(String, [u8; 32])> {
    let rest = k.strip_prefix(b"e")?;
    let cut = rest.len().checked_sub(33)?;
    let (app, fp) = (&rest[..cut], &rest[cut + 1..]);
    Some((String::from_utf8(app.to_vec()).ok()?, fp.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000_000;

    #[test]
    fn an_added_id_is_refused_for_its_app_and_kind_only_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let s = Suppressions::load(&db, Timestamp::from_micros(0)).unwrap();
        assert!(s.of("a1").is_none());
        let ids = [(IdKind::User, "u1"), (IdKind::Anonymous, "anon-1")];
        assert_eq!(s.add(&db, "a1", &ids, None, "job1").unwrap(), 1);
        let check = |s: &Suppressions, app: &str, kind, id: &str, now| {
            s.of(app).is_some_and(|l| l.refuses(app, kind, id, now))
        };
        for s in [
            &s,
            &Suppressions::load(&db, Timestamp::from_micros(5)).unwrap(),
        ] {
            assert!(check(s, "a1", IdKind::User, "u1", 1));
            assert!(check(s, "a1", IdKind::Anonymous, "anon-1", 1));
            assert!(!check(s, "a1", IdKind::Anonymous, "u1", 1), "kinds apart");
            assert!(!check(s, "a1", IdKind::User, "u2", 1));
            assert!(!check(s, "a2", IdKind::User, "u1", 1), "apps apart");
            assert_eq!((s.len(), s.version()), (2, 1));
        }
        // No id in clear in sled.
        for kv in db.open_tree(TREE).unwrap().iter() {
            let (k, v) = kv.unwrap();
            let both = [k.to_vec(), v.to_vec()].concat();
            assert!(!both.windows(2).any(|w| w == b"u1"), "{both:?}");
        }
    }

    #[test]
    fn an_entry_expires_and_is_dropped_at_the_next_load() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let s = Suppressions::load(&db, Timestamp::from_micros(0)).unwrap();
        let until = Some(Timestamp::from_micros(10 * DAY));
        s.add(&db, "a", &[(IdKind::User, "u")], until, "j").unwrap();
        let l = s.of("a").unwrap();
        assert!(l.refuses("a", IdKind::User, "u", 10 * DAY - 1));
        assert!(!l.refuses("a", IdKind::User, "u", 10 * DAY));
        // A later erasure of the same id for ever wins over the end.
        s.add(&db, "a", &[(IdKind::User, "v")], until, "j").unwrap();
        s.add(&db, "a", &[(IdKind::User, "v")], None, "k").unwrap();
        let later = Suppressions::load(&db, Timestamp::from_micros(11 * DAY)).unwrap();
        assert_eq!(later.len(), 1);
        assert!(later
            .of("a")
            .unwrap()
            .refuses("a", IdKind::User, "v", i64::MAX - 1));
        assert_eq!(later.version(), 3);
    }
}
