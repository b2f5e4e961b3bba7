//! `GET /api/v1/profiles/{userId}`: the visitor profile merged from identify and group calls.

use actix_web::{get, web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::api::{self, ApiError};
use crate::ids::Timestamp;
use crate::state::AppState;
use crate::tenants::{Permission, Principal};

use super::model::Group;
use super::store;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_profile);
}

fn micros_iso(t: i64) -> Timestamp {
    Timestamp::from_micros(t)
}

/// A visitor profile as the API shows it (times as ISO 8601 strings).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileView {
    user_id: String,
    /// Traits merged from identify calls, later ones winning.
    #[schema(value_type = Object)]
    traits: serde_json::Map<String, serde_json::Value>,
    anonymous_ids: Vec<String>,
    groups: Vec<Group>,
    first_seen: Timestamp,
    last_seen: Timestamp,
}

/// Get a user's profile: merged traits, the anonymousIds linked to it, groups, first and last seen.
#[utoipa::path(
    tag = "profiles",
    security(("api_key" = [])),
    params(("userId" = String, Path, description = "The userId given to identify")),
    responses((status = 200, body = ProfileView), (status = 404))
)]
#[get("/profiles/{userId}")]
async fn get_profile(
    who: Principal,
    state: web::Data<AppState>,
    user: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ProfilesRead)?;
    let user = user.into_inner();
    let p = api::in_app(&state, &who.app_id, move |db, app| {
        store::get(db, app, &user)
    })
    .await?;
    let p = p.ok_or_else(|| ApiError::not_found("profile"))?;
    Ok(api::ok(&ProfileView {
        user_id: p.user_id,
        traits: p.traits,
        anonymous_ids: p.anonymous_ids,
        groups: p.groups,
        first_seen: micros_iso(p.first_seen),
        last_seen: micros_iso(p.last_seen),
    }))
}
