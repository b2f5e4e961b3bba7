//! `/admin/v1`: apps (tenants) and their keys, for operators and the dashboard.
//! Authenticated by `Authorization: Bearer <admin token>`, never by an API key.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::auth::Admin;
use super::model::{self, App, KeyView, Permission, Plan};
use super::service::{AdminApp, AppChange, Tenants};
use super::store;
use crate::api::{self, ApiError, PageQuery};
use crate::fields::{request_body, Body, Mode, Parsed};
use crate::ids::Timestamp;
use crate::state::AppState;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_app)
        .service(list_apps)
        .service(get_app)
        .service(update_app)
        .service(rotate_integration_key)
        .service(create_key)
        .service(list_keys)
        .service(update_key)
        .service(revoke_key);
}

/// Reads a JSON body (within the server's limit) and checks it against its table, or answers
/// 400 naming every bad field.
async fn parse(
    tenants: &Tenants,
    req: &HttpRequest,
    payload: web::Payload,
    table: &Body,
    mode: Mode,
) -> Result<Parsed, ApiError> {
    let limit = tenants.state.settings.server.max_body_bytes;
    let (_, body) = api::json_body(req, payload, limit).await?;
    table.parse(&body, mode).map_err(ApiError::validation)
}

/// The permissions of a checked key body.
fn permissions(p: &Parsed) -> Vec<Permission> {
    let names = p.strings("permissions").flatten().unwrap_or_default();
    names.iter().filter_map(|n| Permission::parse(n)).collect()
}

/// A new app and its integration key (the secret, shown only here).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct AppCreated {
    #[serde(flatten)]
    app: App,
    /// The `X-App-Key` of the tracker (`ik_...`).
    integration_key: String,
}

/// A new integration key (the secret, shown only here).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct IntegrationKeyIssued {
    integration_key: String,
    integration_key_id: String,
}

/// A new API key (the secret `key`, shown only here).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct KeyCreated {
    #[serde(flatten)]
    view: KeyView,
    /// The `X-API-Key` value (`tk_...`).
    key: String,
}

/// A revoked key.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct KeyRevoked {
    id: String,
    /// Always true.
    revoked: bool,
    revoked_at: Option<Timestamp>,
}

request_body! {
    /// The body of an app's create (unknown fields are refused).
    AppCreate = model::APP, Mode::Create
}
request_body! {
    /// The body of an app's PATCH (unknown fields are refused).
    AppInput = model::APP, Mode::Patch
}
request_body! {
    /// The body of an API key's create (unknown fields are refused).
    KeyInput = model::KEY, Mode::Create
}
request_body! {
    /// The body of an API key's PATCH: its new permissions (unknown fields are refused).
    KeyChanges = model::KEY_CHANGES, Mode::Create
}

/// Create an app. Answers its integration key (`X-App-Key`) once.
#[utoipa::path(
    tag = "admin",
    security(("admin_token" = [])),
    request_body(content = AppCreate),
    responses((status = 201, body = AppCreated, headers(("Location" = String))), (status = 400))
)]
#[post("/apps")]
async fn create_app(
    _: Admin,
    tenants: Tenants,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let p = parse(&tenants, &req, payload, &model::APP, Mode::Create).await?;
    let name = p.string("name").unwrap_or_default();
    let plan = p.name("plan").unwrap_or(Plan::Free);
    let (app, integration_key) = tenants.create_app(name, plan).await?;
    Ok(api::created(
        &format!("/admin/v1/apps/{}", app.id),
        &AppCreated {
            integration_key,
            app,
        },
    ))
}

/// List apps, oldest first.
#[utoipa::path(tag = "admin", security(("admin_token" = [])), params(PageQuery), responses((status = 200, body = Vec<App>)))]
#[get("/apps")]
async fn list_apps(
    _: Admin,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = q.in_order(b'a', "")?;
    let asked = page.clone();
    let apps = state
        .store
        .run(move |db| store::list_apps(db, asked.walk()))
        .await?;
    Ok(page.answer(&apps))
}

/// Get one app. From the moment its deletion began it is 404: the deletion is followed at
/// `GET /admin/v1/jobs/{jobId}`, and the list of apps shows it with its `deletionJobId`.
#[utoipa::path(tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)), responses((status = 200, body = App), (status = 404)))]
#[get("/apps/{appId}")]
async fn get_app(
    _: Admin,
    tenants: Tenants,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(api::ok(&tenants.app(&id).await?))
}

/// Change an app's plan or name. A downgrade never deletes data.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)),
    request_body(content = AppInput),
    responses((status = 200, body = App), (status = 400), (status = 404))
)]
#[patch("/apps/{appId}")]
async fn update_app(
    _: Admin,
    tenants: Tenants,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let p = parse(&tenants, &req, payload, &model::APP, Mode::Patch).await?;
    let change = AppChange {
        name: p.string("name"),
        plan: p.name::<Plan>("plan"),
    };
    Ok(api::ok(&tenants.update_app(&id, change).await?))
}

/// Issue a new integration key for the app and revoke the old one.
#[utoipa::path(tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)), responses((status = 201, body = IntegrationKeyIssued), (status = 404)))]
#[post("/apps/{appId}/integration-key")]
async fn rotate_integration_key(
    _: Admin,
    tenants: Tenants,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (app, key, secret) = tenants.rotate_integration_key(&id).await?;
    Ok(api::created(
        &format!("/admin/v1/apps/{}", app.id),
        &IntegrationKeyIssued {
            integration_key: secret,
            integration_key_id: key.id,
        },
    ))
}

/// Create an API key. The secret `key` is shown only in this answer.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)),
    request_body(content = KeyInput),
    responses((status = 201, body = KeyCreated, headers(("Location" = String))), (status = 400), (status = 404))
)]
#[post("/apps/{appId}/keys")]
async fn create_key(
    app: AdminApp,
    tenants: Tenants,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let p = parse(&tenants, &req, payload, &model::KEY, Mode::Create).await?;
    let (name, permissions) = (p.string("name").unwrap_or_default(), permissions(&p));
    let (key, secret) = tenants.create_key(&app, &name, permissions).await?;
    Ok(api::created(
        &format!("/admin/v1/apps/{}/keys/{}", app.id, key.id),
        &KeyCreated {
            view: KeyView::from(&key),
            key: secret,
        },
    ))
}

/// List an app's API keys (never their secrets), revoked ones included, oldest first.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])),
    params(("appId" = String, Path), PageQuery),
    responses((status = 200, body = Vec<KeyView>), (status = 400), (status = 404))
)]
#[get("/apps/{appId}/keys")]
async fn list_keys(
    app: AdminApp,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = q.in_order(b'k', &app.id)?;
    let asked = page.clone();
    let keys = state
        .store
        .run(move |db| store::list_api_keys(db, &app.id, asked.walk()))
        .await?;
    Ok(page.answer(&keys.map(|k| KeyView::from(&k))))
}

/// Replace a key's permissions; takes effect on the next request.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])),
    params(("appId" = String, Path), ("keyId" = String, Path)),
    request_body(content = KeyChanges),
    responses((status = 200, body = KeyView), (status = 400), (status = 404))
)]
#[patch("/apps/{appId}/keys/{keyId}")]
async fn update_key(
    _: AdminApp,
    tenants: Tenants,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let p = parse(&tenants, &req, payload, &model::KEY_CHANGES, Mode::Create).await?;
    let (app_id, key_id) = path.into_inner();
    let key = tenants
        .set_permissions(&app_id, &key_id, permissions(&p))
        .await?;
    Ok(api::ok(&KeyView::from(&key)))
}

/// Revoke a key; takes effect on the next request.
#[utoipa::path(
    tag = "admin", security(("admin_token" = [])),
    params(("appId" = String, Path), ("keyId" = String, Path)),
    responses((status = 200, body = KeyRevoked), (status = 404))
)]
#[delete("/apps/{appId}/keys/{keyId}")]
async fn revoke_key(
    _: AdminApp,
    tenants: Tenants,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (app_id, key_id) = path.into_inner();
    let key = tenants.revoke_key(&app_id, &key_id).await?;
    Ok(api::ok(&KeyRevoked {
        id: key.id,
        revoked: true,
        revoked_at: key.revoked_at,
    }))
}
