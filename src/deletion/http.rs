//! `DELETE /admin/v1/apps/{appId}` (202: the job that deletes the app) and
//! `GET /admin/v1/jobs/{jobId}` (any job: where it is and what it removed).

use actix_web::{delete, get, web, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::StartError;
use crate::api::{self, ApiError};
use crate::jobs::{JobView, Jobs};
use crate::state::AppState;
use crate::tenants::{Access, Admin};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(delete_app).service(get_job);
}

fn jobs_of(jobs: Option<web::Data<Jobs>>) -> Result<web::Data<Jobs>, ApiError> {
    jobs.ok_or_else(|| ApiError::internal("jobs missing"))
}

/// Delete an app and everything of it: its keys stop working at once (401), then a job removes
/// its contacts, ideas, surveys, profiles, rollups, lake files and the app itself. Answers the
/// job (`GET /admin/v1/jobs/{jobId}` follows it); again while it runs, the same job.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)),
    responses((status = 202, body = JobView, headers(("Location" = String))), (status = 404))
)]
#[delete("/apps/{appId}")]
async fn delete_app(
    _: Admin,
    state: web::Data<AppState>,
    access: web::Data<Access>,
    jobs: Option<web::Data<Jobs>>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let jobs = jobs_of(jobs)?;
    let by = crate::storage::changes::Actor::Admin;
    let job = match super::start(&jobs, &state.store, &access, (&id, &by)).await {
        Ok(job) => job,
        Err(StartError::NoApp) => return Err(ApiError::not_found("app")),
        Err(StartError::Store(e)) => return Err(e.into()),
    };
    tracing::info!(app_id = %id, job = %job.id, "app deletion started");
    Ok(api::accepted(
        &format!("/admin/v1/jobs/{}", job.id),
        &JobView::from(&job),
    ))
}

/// Get a job (an app's deletion, an erasure): its state, step and what it removed so far.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])), params(("jobId" = String, Path)),
    responses((status = 200, body = JobView), (status = 404))
)]
#[get("/jobs/{jobId}")]
async fn get_job(
    _: Admin,
    jobs: Option<web::Data<Jobs>>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let job = jobs_of(jobs)?
        .get(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("job"))?;
    Ok(api::ok(&JobView::from(&job)))
}
