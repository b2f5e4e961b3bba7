//! Webhooks over HTTP: the admin API under `/admin/v1/apps/{appId}/webhooks`:
//! endpoints, their secret's rotation, a test event, the attempts log and redeliver.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::engine::Webhooks;
use super::guard;
use super::model::{
    self, Attempt, Endpoint, EndpointPatch, EndpointWithSecret, Redelivery, Rotated,
};
use super::store::{self, WebhookError};
use crate::api::{self, ApiError, Deleted, PageQuery};
use crate::fields::{request_body, Mode};
use crate::state::AppState;
use crate::storage::cursor::{self, Listing};
use crate::tenants::AdminApp;

/// The admin routes, under `/admin/v1`.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_webhook)
        .service(list_webhooks)
        .service(get_webhook)
        .service(update_webhook)
        .service(delete_webhook)
        .service(rotate_webhook_secret)
        .service(test_webhook)
        .service(list_webhook_attempts)
        .service(redeliver_webhook_attempt);
}

impl From<WebhookError> for ApiError {
    fn from(e: WebhookError) -> Self {
        match e {
            WebhookError::NotFound(what) => ApiError::not_found(what),
            WebhookError::Invalid(d) => ApiError::validation(d),
            WebhookError::Conflict(m) => ApiError::conflict(m),
            WebhookError::Store(e) => e.into(),
        }
    }
}

request_body! {
    /// The body of a webhook endpoint's create (unknown fields are refused).
    WebhookCreate = model::ENDPOINT, Mode::Create
}
request_body! {
    /// The body of a webhook endpoint's PATCH (unknown fields are refused).
    WebhookChanges = model::ENDPOINT, Mode::Patch
}
request_body! {
    /// The body of a secret's rotation (optional).
    WebhookRotation = model::ROTATION, Mode::Create
}

/// Parses an endpoint body and checks its URL's host against the guard.
async fn parse_body(
    state: &AppState,
    req: &HttpRequest,
    payload: web::Payload,
    mode: Mode,
) -> Result<EndpointPatch, ApiError> {
    let (_, body) = api::json_body(req, payload, state.settings.server.max_body_bytes).await?;
    let p = EndpointPatch::parse(&body, mode).map_err(ApiError::validation)?;
    if let Some(url) = &p.url {
        guard::check_url(url, state.settings.webhooks.allow_private)
            .await
            .map_err(|m| ApiError::field("url", m))?;
    }
    Ok(p)
}

/// Create a webhook endpoint: 201 with its signing secret, shown only here (and on rotation).
#[utoipa::path(
    tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path)),
    request_body(content = WebhookCreate),
    responses((status = 201, body = EndpointWithSecret), (status = 400), (status = 404), (status = 409, description = "Too many endpoints"))
)]
#[post("/apps/{appId}/webhooks")]
async fn create_webhook(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let p = parse_body(&state, &req, payload, Mode::Create).await?;
    let (a, now, max) = (
        app.id.clone(),
        state.now(),
        state.settings.webhooks.max_endpoints_per_app,
    );
    let (endpoint, secret) = state
        .store
        .run(move |db| Ok(store::create(db, &a, &p, max, now)))
        .await??;
    let loc = format!("/admin/v1/apps/{}/webhooks/{}", app.id, endpoint.id);
    Ok(api::created(&loc, &EndpointWithSecret { endpoint, secret }))
}

/// List an app's webhook endpoints, oldest first.
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), PageQuery),
    responses((status = 200, body = Vec<Endpoint>), (status = 400), (status = 404)))]
#[get("/apps/{appId}/webhooks")]
async fn list_webhooks(
    app: AdminApp,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = q.in_order(b'w', &app.id)?;
    let all = api::in_app(&state, &app.id, store::list).await?;
    let found = cursor::page_sorted(all, |e: &Endpoint| e.id.clone().into_bytes(), page.walk());
    Ok(page.answer(&found))
}

/// Get one webhook endpoint (`pending`: its deliveries waiting).
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = Endpoint), (status = 404)))]
#[get("/apps/{appId}/webhooks/{webhookId}")]
async fn get_webhook(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    api::in_app(&state, &app.id, move |db, a| store::get(db, a, &id))
        .await?
        .map(|e| api::ok(&e))
        .ok_or_else(|| ApiError::not_found("webhook"))
}

/// Change a webhook endpoint (merge patch); `status: active` re-enables a disabled one.
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path)),
    request_body(content = WebhookChanges),
    responses((status = 200, body = Endpoint), (status = 400), (status = 404)))]
#[patch("/apps/{appId}/webhooks/{webhookId}")]
async fn update_webhook(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let p = parse_body(&state, &req, payload, Mode::Patch).await?;
    let (a, now) = (app.id.clone(), state.now());
    let e = state
        .store
        .run(move |db| Ok(store::update(db, &a, &id, &p, now)))
        .await??;
    Ok(api::ok(&e))
}

/// Delete a webhook endpoint, its waiting deliveries and its log.
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 404)))]
#[delete("/apps/{appId}/webhooks/{webhookId}")]
async fn delete_webhook(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let (a, i) = (app.id.clone(), id.clone());
    state
        .store
        .run(move |db| Ok(store::delete(db, &a, &i)))
        .await??;
    Ok(api::deleted(id))
}

/// Rotate the signing secret: the new one (shown once) signs from now on, the previous one
/// too for `overlapSeconds` (default 86400).
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path)),
    request_body(content = Option<WebhookRotation>),
    responses((status = 200, body = Rotated), (status = 400), (status = 404)))]
#[post("/apps/{appId}/webhooks/{webhookId}/secret")]
async fn rotate_webhook_secret(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let overlap = if body.iter().all(u8::is_ascii_whitespace) {
        model::DEFAULT_OVERLAP_SECS
    } else {
        model::parse_overlap(&api::json_object(&req, &body)?).map_err(ApiError::validation)?
    };
    let (a, now) = (app.id.clone(), state.now());
    let r = state
        .store
        .run(move |db| Ok(store::rotate_secret(db, &a, &id, overlap, now)))
        .await??;
    Ok(api::ok(&r))
}

/// Send a `webhook.test` event now (whatever the endpoint's status): 200 with the attempt,
/// also logged, whatever the receiver answered.
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path)),
    responses((status = 200, body = Attempt), (status = 404)))]
#[post("/apps/{appId}/webhooks/{webhookId}/test")]
async fn test_webhook(
    app: AdminApp,
    hooks: web::Data<Webhooks>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    Ok(api::ok(&hooks.send_test(&app.id, &id).await?))
}

/// The attempts log of an endpoint, newest first (the last `webhooks.log_per_endpoint` kept).
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path), PageQuery),
    responses((status = 200, body = Vec<Attempt>), (status = 400), (status = 404)))]
#[get("/apps/{appId}/webhooks/{webhookId}/attempts")]
async fn list_webhook_attempts(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let mut errors = Vec::new();
    let listing = Listing::new(b'a', true, format!("{}{id}", app.id));
    let valid = |e: &[u8]| e.len() == 8;
    let page = q.parse(Some(listing), valid, &mut errors);
    let page = match page {
        Some(p) if errors.is_empty() => p,
        _ => return Err(ApiError::validation(errors)),
    };
    let logged = api::in_app(&state, &app.id, move |db, a| store::attempts(db, a, &id))
        .await?
        .ok_or_else(|| ApiError::not_found("webhook"))?;
    let found = cursor::page_sorted(logged, |(seq, _)| seq.to_be_bytes().to_vec(), page.walk());
    Ok(page.answer(&found.map(|(_, a)| a)))
}

/// Queue the event of a logged attempt again for this endpoint (same `webhook-id` and body);
/// 409 while the endpoint is disabled.
#[utoipa::path(tag = "webhooks", security(("admin_token" = [])), params(("appId" = String, Path), ("webhookId" = String, Path), ("attemptId" = String, Path)),
    responses((status = 202, body = Redelivery), (status = 404), (status = 409, description = "The endpoint is disabled")))]
#[post("/apps/{appId}/webhooks/{webhookId}/attempts/{attemptId}/redeliver")]
async fn redeliver_webhook_attempt(
    app: AdminApp,
    state: web::Data<AppState>,
    hooks: web::Data<Webhooks>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id, attempt) = path.into_inner();
    let (a, i, now, lanes) = (
        app.id.clone(),
        id.clone(),
        state.now(),
        hooks.settings().lanes,
    );
    let r = state
        .store
        .run(move |db| Ok(store::redeliver(db, &a, &i, &attempt, lanes, now)))
        .await??;
    hooks.wake();
    let loc = format!("/admin/v1/apps/{}/webhooks/{id}/attempts", app.id);
    Ok(api::accepted(&loc, &r))
}
