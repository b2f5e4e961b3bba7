//! Tenants: apps, their API keys and integration keys, and the in-memory registry that
//! authenticates requests without touching sled.
//!
//! Keys look like `tk_<keyId>_<secret>` (API keys) and `ik_<keyId>_<secret>` (integration keys).
//! Only SHA-256 of the secret is stored; a presented key is found by its id and its secret hash
//! compared in constant time. The registry is loaded from sled at start and updated by every
//! admin write (write to sled first, then to memory), so a revocation takes effect on the very
//! next request.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::ids;
use crate::store::{decode, StoreError};

pub const APPS_TREE: &str = "apps";
pub const KEYS_TREE: &str = "keys";

/// Permission names (api.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Permission {
    #[serde(rename = "surveys:read")]
    SurveysRead,
    #[serde(rename = "responses:read")]
    ResponsesRead,
    #[serde(rename = "contacts:read")]
    ContactsRead,
    #[serde(rename = "contacts:write")]
    ContactsWrite,
    #[serde(rename = "contacts:delete")]
    ContactsDelete,
    #[serde(rename = "ideas:read")]
    IdeasRead,
    #[serde(rename = "ideas:write")]
    IdeasWrite,
    #[serde(rename = "ideas:moderate")]
    IdeasModerate,
    #[serde(rename = "votes:write")]
    VotesWrite,
    #[serde(rename = "comments:write")]
    CommentsWrite,
    #[serde(rename = "profiles:read")]
    ProfilesRead,
}

impl Permission {
    pub const ALL: [Permission; 11] = [
        Permission::SurveysRead,
        Permission::ResponsesRead,
        Permission::ContactsRead,
        Permission::ContactsWrite,
        Permission::ContactsDelete,
        Permission::IdeasRead,
        Permission::IdeasWrite,
        Permission::IdeasModerate,
        Permission::VotesWrite,
        Permission::CommentsWrite,
        Permission::ProfilesRead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Permission::SurveysRead => "surveys:read",
            Permission::ResponsesRead => "responses:read",
            Permission::ContactsRead => "contacts:read",
            Permission::ContactsWrite => "contacts:write",
            Permission::ContactsDelete => "contacts:delete",
            Permission::IdeasRead => "ideas:read",
            Permission::IdeasWrite => "ideas:write",
            Permission::IdeasModerate => "ideas:moderate",
            Permission::VotesWrite => "votes:write",
            Permission::CommentsWrite => "comments:write",
            Permission::ProfilesRead => "profiles:read",
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Plans an app can be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    Free,
    Pro,
    Enterprise,
}

impl Plan {
    pub fn name(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Enterprise => "enterprise",
        }
    }

    pub fn parse(s: &str) -> Option<Plan> {
        [Plan::Free, Plan::Pro, Plan::Enterprise]
            .into_iter()
            .find(|p| p.name() == s)
    }
}

/// An app (the tenant) as stored and as the admin API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct App {
    pub id: String,
    pub name: String,
    pub plan: Plan,
    /// Id of the current integration key (the secret is shown only when it is made).
    pub integration_key_id: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    Api,
    Integration,
}

/// A key as stored: never the secret, only its hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyRecord {
    pub id: String,
    pub app_id: String,
    pub kind: KeyKind,
    pub name: String,
    pub secret_sha256: String,
    pub permissions: Vec<Permission>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// A key as the admin API lists it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub id: String,
    pub name: String,
    pub permissions: Vec<Permission>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

impl From<&KeyRecord> for KeyView {
    fn from(k: &KeyRecord) -> Self {
        KeyView {
            id: k.id.clone(),
            name: k.name.clone(),
            permissions: k.permissions.clone(),
            created_at: k.created_at.clone(),
            revoked_at: k.revoked_at.clone(),
        }
    }
}

/// Makes a new key: the record to store and the full key string to show once.
pub fn new_key(
    app_id: &str,
    kind: KeyKind,
    name: &str,
    permissions: Vec<Permission>,
) -> (KeyRecord, String) {
    let id = ids::object_id();
    let secret = ids::secret();
    let prefix = match kind {
        KeyKind::Api => "tk",
        KeyKind::Integration => "ik",
    };
    let full = format!("{prefix}_{id}_{secret}");
    let record = KeyRecord {
        id,
        app_id: app_id.to_owned(),
        kind,
        name: name.to_owned(),
        secret_sha256: hex::encode(ids::hash_secret(&secret)),
        permissions,
        created_at: ids::iso(ids::now()),
        revoked_at: None,
    };
    (record, full)
}

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
}

/// The in-memory view of apps and live (unrevoked) keys.
#[derive(Default)]
pub struct Registry {
    keys: RwLock<HashMap<String, Arc<LiveKey>>>,
    plans: RwLock<HashMap<String, Plan>>,
}

impl Registry {
    /// Loads every app and unrevoked key from sled (start-up only).
    pub fn load(db: &sled::Db) -> Result<Registry, StoreError> {
        let reg = Registry::default();
        for kv in db.open_tree(APPS_TREE)?.iter() {
            let (k, v) = kv?;
            let app: App = decode(&k, &v)?;
            reg.set_app(&app);
        }
        for kv in db.open_tree(KEYS_TREE)?.iter() {
            let (k, v) = kv?;
            let key: KeyRecord = decode(&k, &v)?;
            reg.set_key(&key);
        }
        Ok(reg)
    }

    pub fn set_app(&self, app: &App) {
        self.plans
            .write()
            .expect("registry lock")
            .insert(app.id.clone(), app.plan);
    }

    /// Adds, updates or (when revoked) removes a key.
    pub fn set_key(&self, key: &KeyRecord) {
        let mut keys = self.keys.write().expect("registry lock");
        if key.revoked_at.is_some() {
            keys.remove(&key.id);
            return;
        }
        let mut hash = [0u8; 32];
        if hex::decode_to_slice(&key.secret_sha256, &mut hash).is_err() {
            tracing::error!(key_id = %key.id, "stored key hash is not hex; key disabled");
            return;
        }
        keys.insert(
            key.id.clone(),
            Arc::new(LiveKey {
                kind: key.kind,
                app_id: key.app_id.clone(),
                hash,
                permissions: key.permissions.clone(),
            }),
        );
    }

    pub fn plan_of(&self, app_id: &str) -> Option<Plan> {
        self.plans
            .read()
            .expect("registry lock")
            .get(app_id)
            .copied()
    }

    /// Checks a presented key of the given kind; `None` for malformed, unknown or revoked keys.
    pub fn authenticate(&self, presented: &str, kind: KeyKind) -> Option<Authenticated> {
        let prefix = match kind {
            KeyKind::Api => "tk_",
            KeyKind::Integration => "ik_",
        };
        let rest = presented.trim().strip_prefix(prefix)?;
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
        Some(Authenticated {
            key_id: id.to_owned(),
            app_id: live.app_id.clone(),
            plan,
            permissions: live.permissions.clone(),
        })
    }
}
