//! Fleet tokens: what an edge presents to its control node (`Authorization: Bearer
//! tft_<id>_<secret>`). Created on the control node (admin API, dashboard, `tributary fleet
//! token create`), shown once; sled keeps only the SHA-256 of the secret (tree `fleet_tokens`)
//! and memory a copy of the live ones, so checking a token touches no disk and takes the same
//! time whether its id exists or not.

use std::collections::HashMap;
use std::future::{ready, Ready};
use std::sync::RwLock;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::api::ApiError;
use crate::ids::{self, Timestamp};
use crate::storage::{decode, decode_all, encode, StoreError};

const TREE: &str = "fleet_tokens";
const PREFIX: &str = "tft";

/// A fleet token as stored: the SHA-256 of its secret, never the secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetToken {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
    pub secret_sha256: String,
}

/// A fleet token as the admin API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetTokenView {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
}

impl From<&FleetToken> for FleetTokenView {
    fn from(t: &FleetToken) -> Self {
        FleetTokenView {
            id: t.id.clone(),
            name: t.name.clone(),
            created_at: t.created_at,
        }
    }
}

/// The live fleet tokens in memory: id -> SHA-256 of the secret.
#[derive(Default)]
pub struct Tokens {
    live: RwLock<HashMap<String, [u8; 32]>>,
}

impl Tokens {
    /// Every stored token (start-up).
    pub fn load(db: &sled::Db) -> Result<Tokens, StoreError> {
        let tokens = Tokens::default();
        for t in list(db)? {
            tokens.put(&t);
        }
        Ok(tokens)
    }

    fn put(&self, t: &FleetToken) {
        let mut hash = [0u8; 32];
        if hex::decode_to_slice(&t.secret_sha256, &mut hash).is_ok() {
            let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
            live.insert(t.id.clone(), hash);
        }
    }

    fn remove(&self, id: &str) {
        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
        live.remove(id);
    }

    /// The token's id when `presented` is a live fleet token.
    pub fn check(&self, presented: &str) -> Option<String> {
        let rest = presented.trim().strip_prefix(PREFIX)?.strip_prefix('_')?;
        let (id, secret) = rest.split_once('_')?;
        let known = self
            .live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .copied();
        // Hash even when the id is unknown, so both paths cost the same.
        let hash = ids::hash_secret(secret);
        let equal: bool = known?.ct_eq(&hash).into();
        equal.then(|| id.to_owned())
    }

    /// Creates a token; returns it with the full secret (shown once).
    pub fn create(
        &self,
        db: &sled::Db,
        name: &str,
        now: Timestamp,
    ) -> Result<(FleetToken, String), StoreError> {
        let id = ids::object_id();
        let secret = ids::secret();
        let token = FleetToken {
            id: id.clone(),
            name: name.to_owned(),
            created_at: now,
            secret_sha256: hex::encode(ids::hash_secret(&secret)),
        };
        db.open_tree(TREE)?.insert(&id, encode(&token))?;
        db.flush()?;
        self.put(&token);
        Ok((token, format!("{PREFIX}_{id}_{secret}")))
    }

    /// Revokes (removes) a token; `false` when there was none.
    pub fn revoke(&self, db: &sled::Db, id: &str) -> Result<bool, StoreError> {
        let removed = db.open_tree(TREE)?.remove(id)?.is_some();
        db.flush()?;
        self.remove(id);
        Ok(removed)
    }
}

/// Every fleet token, oldest first.
pub fn list(db: &sled::Db) -> Result<Vec<FleetToken>, StoreError> {
    decode_all(&db.open_tree(TREE)?, b"")
}

/// One fleet token.
pub fn get(db: &sled::Db, id: &str) -> Result<Option<FleetToken>, StoreError> {
    match db.open_tree(TREE)?.get(id)? {
        Some(v) => Ok(Some(decode(id.as_bytes(), &v)?)),
        None => Ok(None),
    }
}

/// An edge that presented a live fleet token (the `/fleet/v1` routes).
pub struct FleetNode {
    pub token_id: String,
}

impl FromRequest for FleetNode {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::tenants::auth::bearer_token);
        let tokens = req.app_data::<web::Data<Tokens>>();
        ready(match (token, tokens) {
            (None, _) => Err(ApiError::unauthorized(
                "missing Authorization: Bearer <fleet token>",
            )),
            (Some(t), Some(tokens)) => tokens
                .check(t)
                .map(|token_id| FleetNode { token_id })
                .ok_or_else(|| ApiError::unauthorized("invalid fleet token")),
            (Some(_), None) => Err(ApiError::unauthorized("this node is not a control node")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_checks_until_it_is_revoked_and_only_its_hash_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let tokens = Tokens::default();
        let (t, full) = tokens.create(&db, "eu", Timestamp::t0()).unwrap();
        assert_eq!(tokens.check(&full).as_deref(), Some(t.id.as_str()));
        let secret = full.rsplit('_').next().unwrap();
        let stored = db.open_tree(TREE).unwrap().get(&t.id).unwrap().unwrap();
        assert!(!String::from_utf8_lossy(&stored).contains(secret));
        assert!(tokens
            .check(&full.replace(secret, &"0".repeat(64)))
            .is_none());
        assert!(tokens.check("tk_x_y").is_none());
        // Loaded again from sled, it still checks; revoked, it does not.
        let reloaded = Tokens::load(&db).unwrap();
        assert!(reloaded.check(&full).is_some());
        assert!(reloaded.revoke(&db, &t.id).unwrap());
        assert!(reloaded.check(&full).is_none());
        assert!(Tokens::load(&db).unwrap().check(&full).is_none());
    }
}
