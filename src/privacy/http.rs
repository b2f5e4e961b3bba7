//! `POST /api/v1/erasures` (starts an erasure job, 202), `GET /api/v1/erasures/{id}` (its state
//! and what it removed per store), `GET /api/v1/erasures` (the app's, oldest first). Permission
//! `privacy:erase`; every job is the key's app's.

use actix_web::{get, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::job::ErasureView;
use super::model::Person;
use crate::api::page::PageQuery;
use crate::api::{self, ApiError};
use crate::fields::{request_body, Mode};
use crate::jobs::{JobKind, Jobs};
use crate::state::AppState;
use crate::tenants::{Access, Permission, Principal};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(start).service(list).service(show);
}

request_body! {
    /// Whom to erase.
    ErasureInput = super::model::ERASURE, Mode::Create
}

/// Erase a person from the app (`privacy:erase`): their contacts (by e-mail), profile and
/// identity links (and every anonymousId linked to the userId), survey responses, votes and
/// comments (removed; replies to a removed comment stay, at the top of the thread),
/// idempotency answers and refused events that show them, and their rows in the lake (each
/// file rewritten at its path). Traffic rollups are aggregates and stay. From this answer on,
/// events with their userId or anonymousIds are refused at ingest (for
/// `privacy.suppress_days`, default for ever). The job runs in the background and survives a
/// restart: follow it at `Location`.
#[utoipa::path(
    tag = "privacy",
    security(("api_key" = [])),
    request_body(content = ErasureInput),
    responses(
        (status = 202, description = "The job is queued", body = ErasureView,
            headers(("Location" = String, description = "The job's URL"))),
        (status = 400, description = "VALIDATION_ERROR: every bad field in details"),
        (status = 403, description = "FORBIDDEN: the key lacks privacy:erase"),
    )
)]
#[post("/erasures")]
async fn start(
    who: Principal,
    state: web::Data<AppState>,
    access: web::Data<Access>,
    jobs: web::Data<Jobs>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::PrivacyErase)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let person = Person::parse(&fields).map_err(ApiError::validation)?;
    let requested_by = format!("key:{}", who.key_id);
    let job = super::job::submit(&state, &access, &jobs, &who.app_id, person, requested_by).await?;
    Ok(api::accepted(
        &format!("/api/v1/erasures/{}", job.id),
        &ErasureView::of(&job),
    ))
}

/// The app's erasure jobs, oldest first (`privacy:erase`).
#[utoipa::path(tag = "privacy", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, body = Vec<ErasureView>), (status = 400), (status = 403)))]
#[get("/erasures")]
async fn list(
    who: Principal,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::PrivacyErase)?;
    let page = q.in_order(b'e', &who.app_id)?;
    let asked = page.clone();
    let found = api::in_app(&state, &who.app_id, move |db, app| {
        super::store::erasures(db, app, asked.walk())
    })
    .await?;
    Ok(page.answer(&found.map(|j| ErasureView::of(&j))))
}

/// An erasure job: state, step, counts per store (`privacy:erase`; another app's job is 404).
#[utoipa::path(tag = "privacy", security(("api_key" = [])),
    params(("id" = String, Path, description = "The job's id (`job_...`)")),
    responses((status = 200, body = ErasureView), (status = 403), (status = 404)))]
#[get("/erasures/{id}")]
async fn show(
    who: Principal,
    jobs: web::Data<Jobs>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::PrivacyErase)?;
    let job = jobs
        .get(&id)
        .await?
        .filter(|j| j.app_id == who.app_id && j.kind == JobKind::Erasure)
        .ok_or_else(|| ApiError::not_found("erasure"))?;
    Ok(api::ok(&ErasureView::of(&job)))
}
