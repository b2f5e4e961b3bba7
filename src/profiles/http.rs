//! `GET /api/v1/profiles/{userId}`: the visitor profile merged from identify and group calls.

use actix_web::{get, web, HttpResponse};
use serde_json::json;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::api::{self, ApiError};
use crate::collector::identity;
use crate::ids;
use crate::state::AppState;
use crate::tenants::{Permission, Principal};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_profile);
}

fn micros_iso(t: i64) -> String {
    ids::iso(chrono::DateTime::from_timestamp_micros(t).unwrap_or_default())
}

/// Get a user's profile: merged traits, the anonymousIds linked to it, groups, first and last seen.
#[utoipa::path(
    tag = "profiles",
    security(("api_key" = [])),
    params(("userId" = String, Path, description = "The userId given to identify")),
    responses((status = 200, body = identity::Profile), (status = 404), (status = 401), (status = 403))
)]
#[get("/profiles/{userId}")]
async fn get_profile(
    who: Principal,
    state: web::Data<AppState>,
    user: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ProfilesRead)?;
    let app = who.app_id.clone();
    let user = user.into_inner();
    let p = state
        .store
        .run(move |db| identity::profile(db, &app, &user))
        .await?
        .ok_or_else(|| ApiError::not_found("profile"))?;
    Ok(api::ok(&json!({
        "userId": p.user_id,
        "traits": p.traits,
        "anonymousIds": p.anonymous_ids,
        "groups": p.groups,
        "firstSeen": micros_iso(p.first_seen),
        "lastSeen": micros_iso(p.last_seen),
    })))
}
