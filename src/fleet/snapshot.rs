//! The registry going down to the edges: what collection and the survey widget need, as the
//! control node's sled holds it. Apps (with their plan and a deletion in progress), integration
//! keys (ids and SHA-256 hashes, never secrets; revoked ones left out), survey records (their
//! targeting and state; responses stay where they were given), the erased persons' ids
//! (fingerprints) and the apps to settle (`settle.rs`). The control node builds it at most once per `CACHE_FOR`, whatever the number
//! of edges, and names it by the SHA-256 of its bytes: an edge that holds that version gets
//! 304 and no body. An edge writes it into its own sled (one transaction per tree, then the
//! version), so it restarts and serves with the control node away.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::storage::StoreError;
use crate::tenants::model::{KeyKind, KeyRecord};

/// How long the control node reuses a built snapshot.
pub const CACHE_FOR: Duration = Duration::from_millis(250);

/// One tree's share: its entries under `prefix`, raw (base64 in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub tree: String,
    pub prefix: String,
    pub entries: Vec<(String, String)>,
}

/// The registry as it goes down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub parts: Vec<Part>,
}

/// The trees (and key prefixes) that go down. An edge's own entries outside these prefixes
/// (its survey responses, its usage) are never touched.
const TREES: &[(&str, &[u8])] = &[
    (crate::tenants::store::APPS, b""),
    (crate::tenants::store::KEYS, b""),
    (crate::surveys::store::TREE, b"s"),
    (crate::tenants::suppression::TREE, b""),
    (super::settle::TREE, b""),
];

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD_NO_PAD
}

/// Whether an entry goes down: keys only when they are live integration keys.
fn wanted(tree: &str, value: &[u8]) -> bool {
    if tree != crate::tenants::store::KEYS {
        return true;
    }
    serde_json::from_slice::<KeyRecord>(value)
        .is_ok_and(|k| k.kind == KeyKind::Integration && k.revoked_at.is_none())
}

/// Reads the registry from the control node's sled: the snapshot and its version.
pub fn build(db: &sled::Db) -> Result<(Vec<u8>, String), StoreError> {
    let mut parts = Vec::with_capacity(TREES.len());
    for &(tree, prefix) in TREES {
        let t = db.open_tree(tree)?;
        let mut entries = Vec::new();
        for kv in t.scan_prefix(prefix) {
            let (k, v) = kv?;
            if wanted(tree, &v) {
                entries.push((b64().encode(&k), b64().encode(&v)));
            }
        }
        parts.push(Part {
            tree: tree.to_owned(),
            prefix: b64().encode(prefix),
            entries,
        });
    }
    let body = serde_json::to_vec(&Snapshot { parts }).expect("a snapshot serializes");
    let version = hex::encode(Sha256::digest(&body));
    Ok((body, version))
}

/// A built snapshot: when, its bytes, its version.
type Built = (Instant, std::sync::Arc<Vec<u8>>, String);

/// The control node's last snapshot, reused for `CACHE_FOR`.
#[derive(Default)]
pub struct Cache {
    last: Mutex<Option<Built>>,
}

impl Cache {
    /// The current snapshot and its version (built again when the cached one is too old).
    pub fn get(&self, db: &sled::Db) -> Result<(std::sync::Arc<Vec<u8>>, String), StoreError> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, body, version)) = &*last {
            if at.elapsed() < CACHE_FOR {
                return Ok((body.clone(), version.clone()));
            }
        }
        let (body, version) = build(db)?;
        let body = std::sync::Arc::new(body);
        *last = Some((Instant::now(), body.clone(), version.clone()));
        Ok((body, version))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the registry is not one this node can read: {0}")]
    Malformed(String),
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

impl From<sled::Error> for ApplyError {
    fn from(e: sled::Error) -> Self {
        ApplyError::Store(e.into())
    }
}

const EDGE_TREE: &str = "fleet_edge";
const VERSION_KEY: &[u8] = b"registry_version";

/// The version of the registry this edge holds (`None`: never synced).
pub fn held_version(db: &sled::Db) -> Result<Option<String>, StoreError> {
    Ok(db
        .open_tree(EDGE_TREE)?
        .get(VERSION_KEY)?
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// Writes a snapshot into an edge's sled: per tree, the entries under its prefix become the
/// snapshot's (changed ones written, missing ones removed), then the version is recorded and
/// everything flushed. A crash half-way leaves the old version recorded, so the next sync
/// writes it all again. Answers how many entries changed.
pub fn apply(db: &sled::Db, body: &[u8], version: &str) -> Result<usize, ApplyError> {
    let snap: Snapshot =
        serde_json::from_slice(body).map_err(|e| ApplyError::Malformed(e.to_string()))?;
    let mut changed = 0;
    for part in &snap.parts {
        let Some(&(tree, prefix)) = TREES.iter().find(|(t, _)| *t == part.tree) else {
            return Err(ApplyError::Malformed(format!("unknown tree {}", part.tree)));
        };
        let mut wanted = std::collections::BTreeMap::new();
        for (k, v) in &part.entries {
            let k = b64()
                .decode(k)
                .map_err(|e| ApplyError::Malformed(e.to_string()))?;
            let v = b64()
                .decode(v)
                .map_err(|e| ApplyError::Malformed(e.to_string()))?;
            if !k.starts_with(prefix) {
                return Err(ApplyError::Malformed(format!(
                    "a key outside {tree}'s share"
                )));
            }
            wanted.insert(k, v);
        }
        let t = db.open_tree(tree)?;
        let mut batch = sled::Batch::default();
        for kv in t.scan_prefix(prefix) {
            let (k, v) = kv?;
            match wanted.remove(k.as_ref()) {
                Some(w) if w == v.as_ref() => {}
                Some(w) => {
                    batch.insert(k, w);
                    changed += 1;
                }
                None => {
                    batch.remove(k);
                    changed += 1;
                }
            }
        }
        changed += wanted.len();
        for (k, v) in wanted {
            batch.insert(k, v);
        }
        t.apply_batch(batch)?;
    }
    db.open_tree(EDGE_TREE)?
        .insert(VERSION_KEY, version.as_bytes())?;
    db.flush()?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, sled::Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        (dir, db)
    }

    fn key(id: &str, kind: KeyKind, revoked: bool) -> KeyRecord {
        KeyRecord {
            id: id.into(),
            app_id: "app".into(),
            kind,
            name: id.into(),
            secret_sha256: "00".repeat(32),
            permissions: vec![],
            created_at: crate::ids::Timestamp::t0(),
            revoked_at: revoked.then(crate::ids::Timestamp::t0),
        }
    }

    #[test]
    fn an_edge_ends_with_the_control_nodes_share_and_keeps_its_own_entries() {
        let (_c, control) = db();
        let keys = control.open_tree("keys").unwrap();
        for k in [
            key("ik1", KeyKind::Integration, false),
            key("ik2", KeyKind::Integration, true),
            key("tk1", KeyKind::Api, false),
        ] {
            keys.insert(&k.id, crate::storage::encode(&k)).unwrap();
        }
        control
            .open_tree("apps")
            .unwrap()
            .insert("app", b"{}".to_vec())
            .unwrap();
        let surveys = control.open_tree("surveys").unwrap();
        surveys.insert(b"sappS1", b"one".to_vec()).unwrap();
        surveys.insert(b"rappS1R1", b"a response".to_vec()).unwrap();
        let (body, version) = build(&control).unwrap();
        assert_eq!(
            build(&control).unwrap().1,
            version,
            "same content, same version"
        );

        let (_e, edge) = db();
        let local = edge.open_tree("surveys").unwrap();
        local.insert(b"sappOLD", b"gone upstream".to_vec()).unwrap();
        local
            .insert(b"rappS1R9", b"answered here".to_vec())
            .unwrap();
        edge.open_tree("keys")
            .unwrap()
            .insert("ikOld", b"x".to_vec())
            .unwrap();
        assert_eq!(held_version(&edge).unwrap(), None);
        apply(&edge, &body, &version).unwrap();
        assert_eq!(held_version(&edge).unwrap(), Some(version.clone()));
        let ids: Vec<_> = edge
            .open_tree("keys")
            .unwrap()
            .iter()
            .keys()
            .map(|k| String::from_utf8(k.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(ids, ["ik1"], "only live integration keys go down");
        let local: Vec<_> = local.iter().keys().map(|k| k.unwrap().to_vec()).collect();
        assert_eq!(local, [b"rappS1R9".to_vec(), b"sappS1".to_vec()]);
        // Applying the same snapshot again changes nothing.
        assert_eq!(apply(&edge, &body, &version).unwrap(), 0);
        // A revocation upstream changes the version and removes the key below.
        keys.insert(
            "ik1",
            crate::storage::encode(&key("ik1", KeyKind::Integration, true)),
        )
        .unwrap();
        let (body2, version2) = build(&control).unwrap();
        assert_ne!(version2, version);
        assert_eq!(apply(&edge, &body2, &version2).unwrap(), 1);
        assert!(edge.open_tree("keys").unwrap().is_empty());
        assert!(apply(
            &edge,
            b"{\"parts\":[{\"tree\":\"x\",\"prefix\":\"\",\"entries\":[]}]}",
            "v"
        )
        .is_err());
    }
}
