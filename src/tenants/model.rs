//! Apps (the tenants) and their keys as values: permissions, key kinds, the records the store
//! keeps and the views the admin API shows.
//!
//! Keys look like `tk_<keyId>_<secret>` (API keys) and `ik_<keyId>_<secret>` (integration keys).
//! Only SHA-256 of the secret is stored.

use serde::{Deserialize, Serialize};

pub use crate::config::Plan;
use crate::ids::{self, Timestamp};

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
    #[serde(rename = "analytics:read")]
    AnalyticsRead,
}

impl Permission {
    pub const ALL: [Permission; 12] = [
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
        Permission::AnalyticsRead,
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
            Permission::AnalyticsRead => "analytics:read",
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.name() == s)
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
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    Api,
    Integration,
}

impl KeyKind {
    /// The prefix of the full key string: `tk_...` or `ik_...`.
    pub fn prefix(self) -> &'static str {
        match self {
            KeyKind::Api => "tk",
            KeyKind::Integration => "ik",
        }
    }
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
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// A key as the admin API lists it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub id: String,
    pub name: String,
    pub permissions: Vec<Permission>,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

impl From<&KeyRecord> for KeyView {
    fn from(k: &KeyRecord) -> Self {
        KeyView {
            id: k.id.clone(),
            name: k.name.clone(),
            permissions: k.permissions.clone(),
            created_at: k.created_at,
            revoked_at: k.revoked_at,
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
    let full = format!("{}_{id}_{secret}", kind.prefix());
    let record = KeyRecord {
        id,
        app_id: app_id.to_owned(),
        kind,
        name: name.to_owned(),
        secret_sha256: hex::encode(ids::hash_secret(&secret)),
        permissions,
        created_at: Timestamp::now(),
        revoked_at: None,
    };
    (record, full)
}
