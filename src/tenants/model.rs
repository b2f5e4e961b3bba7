//! Apps (the tenants) and their keys as values: permissions, key kinds, the records the store
//! keeps and the views the admin API shows.
//!
//! Keys look like `tk_<keyId>_<secret>` (API keys) and `ik_<keyId>_<secret>` (integration keys).
//! Only SHA-256 of the secret is stored.

use serde::{Deserialize, Serialize};

pub use crate::config::Plan;
use crate::fields::{names, Body, Field, Kind, NameSet, Text};
use crate::ids::{self, Timestamp};

names! {
    /// Permission names (api.md §1).
    pub Permission {
        SurveysRead = "surveys:read",
        ResponsesRead = "responses:read",
        ContactsRead = "contacts:read",
        ContactsWrite = "contacts:write",
        ContactsDelete = "contacts:delete",
        IdeasRead = "ideas:read",
        IdeasWrite = "ideas:write",
        IdeasModerate = "ideas:moderate",
        VotesWrite = "votes:write",
        CommentsWrite = "comments:write",
        ProfilesRead = "profiles:read",
        AnalyticsRead = "analytics:read",
        PrivacyErase = "privacy:erase",
    }
}

const NAME: Field = Field::text("name", Text::line(1, 100))
    .required()
    .doc("1 to 100 characters (trimmed), no control characters.");

/// The body of an app: create (`name` required) or PATCH.
pub static APP: Body = Body::new(
    "AppInput",
    "",
    &[
        NAME,
        Field::new("plan", Kind::Names(NameSet::of::<Plan>())).doc("Default `free`."),
    ],
);

static PERMISSION: Kind = Kind::Names(NameSet::of::<Permission>());

const PERMISSIONS: Field = Field::new(
    "permissions",
    Kind::List {
        item: &PERMISSION,
        max: 100,
        noun: "permission names",
    },
)
.required();

/// The body of an API key's create.
pub static KEY: Body = Body::new("KeyInput", "", &[NAME, PERMISSIONS]);

/// The body of an API key's PATCH: its new permissions.
pub static KEY_CHANGES: Body = Body::new("KeyChanges", "", &[PERMISSIONS]);

/// An app (the tenant) as stored and as the admin API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct App {
    pub id: String,
    pub name: String,
    pub plan: Plan,
    /// Id of the current integration key (the secret is shown only when it is made).
    pub integration_key_id: String,
    /// Set while the app is being deleted: the id of the job that deletes it
    /// (`GET /admin/v1/jobs/{jobId}`). Its keys stop working from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_job_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl App {
    /// True from the moment its deletion began.
    pub fn deleting(&self) -> bool {
        self.deletion_job_id.is_some()
    }
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

/// Makes a new key, created at `now`: the record to store and the full key string to show once.
pub fn new_key(
    app_id: &str,
    kind: KeyKind,
    name: &str,
    permissions: Vec<Permission>,
    now: Timestamp,
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
        created_at: now,
        revoked_at: None,
    };
    (record, full)
}
