//! `/admin/v1`: apps (tenants) and their keys, for operators and the dashboard.
//! Authenticated by `Authorization: Bearer <admin token>`, never by an API key.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};
use utoipa_actix_web::service_config::ServiceConfig;

use super::auth::{Access, Admin};
use super::model::{self, new_key, App, KeyKind, KeyRecord, KeyView, Permission, Plan};
use super::store;
use crate::api::{self, ApiError, PageQuery};
use crate::fields::{request_body, Body, Mode, Parsed};
use crate::ids::{self, Timestamp};
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

/// Checks a body against its table, or answers 400 naming every bad field.
fn parse(body: &Map<String, Value>, table: &Body, mode: Mode) -> Result<Parsed, ApiError> {
    table.parse(body, mode).map_err(ApiError::validation)
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
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, body) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let p = parse(&body, &model::APP, Mode::Create)?;
    let name = p.string("name").unwrap_or_default();
    let plan = p.name("plan").unwrap_or(Plan::Free);
    let id = ids::object_id();
    let (key, integration_key) = new_key(&id, KeyKind::Integration, "integration", Vec::new());
    let now = Timestamp::now();
    let app = App {
        id: id.clone(),
        name,
        plan,
        integration_key_id: key.id.clone(),
        created_at: now,
        updated_at: now,
    };
    let (a, k) = (app.clone(), key.clone());
    state
        .store
        .run(move |db| store::create_app(db, &a, &k))
        .await?;
    access.registry.set_key(&key);
    access.registry.set_app(&app);
    tracing::info!(app_id = %app.id, plan = app.plan.name(), "app created");
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

async fn existing_app(state: &AppState, id: String) -> Result<App, ApiError> {
    state
        .store
        .run(move |db| store::get_app(db, &id))
        .await?
        .ok_or_else(|| ApiError::not_found("app"))
}

/// Get one app.
#[utoipa::path(tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)), responses((status = 200, body = App), (status = 404)))]
#[get("/apps/{appId}")]
async fn get_app(
    _: Admin,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(api::ok(&existing_app(&state, id.into_inner()).await?))
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
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, body) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let p = parse(&body, &model::APP, Mode::Patch)?;
    let (name, plan) = (p.string("name"), p.name::<Plan>("plan"));
    let id = id.into_inner();
    let registry = access.clone();
    let (_, app) = state
        .store
        .run(move |db| {
            let changed = store::modify_app(db, &id, |app| {
                if let Some(n) = &name {
                    app.name.clone_from(n);
                }
                app.plan = plan.unwrap_or(app.plan);
            })?;
            registry.registry.reload_app(db, &id)?;
            Ok(changed)
        })
        .await?
        .ok_or_else(|| ApiError::not_found("app"))?;
    tracing::info!(app_id = %app.id, plan = app.plan.name(), "app updated");
    Ok(api::ok(&app))
}

/// Issue a new integration key for the app and revoke the old one.
#[utoipa::path(tag = "admin", security(("admin_token" = [])), params(("appId" = String, Path)), responses((status = 201, body = IntegrationKeyIssued), (status = 404)))]
#[post("/apps/{appId}/integration-key")]
async fn rotate_integration_key(
    _: Admin,
    state: web::Data<AppState>,
    access: web::Data<Access>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let app_id = id.into_inner();
    let (key, secret) = new_key(&app_id, KeyKind::Integration, "integration", Vec::new());
    let (k, registry) = (key.clone(), access.clone());
    let (app, _) = state
        .store
        .run(move |db| {
            let rotated = store::rotate_integration_key(db, &app_id, &k)?;
            if let Some((app, revoked)) = &rotated {
                registry.registry.reload_key(db, &k.id)?;
                if let Some(r) = revoked {
                    registry.registry.reload_key(db, &r.id)?;
                }
                registry.registry.reload_app(db, &app.id)?;
            }
            Ok(rotated)
        })
        .await?
        .ok_or_else(|| ApiError::not_found("app"))?;
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
    _: Admin,
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    app_id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, body) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let p = parse(&body, &model::KEY, Mode::Create)?;
    let (name, permissions) = (p.string("name").unwrap_or_default(), permissions(&p));
    let app = existing_app(&state, app_id.into_inner()).await?;
    let (key, secret) = new_key(&app.id, KeyKind::Api, &name, permissions);
    let k = key.clone();
    state.store.run(move |db| store::insert_key(db, &k)).await?;
    access.registry.set_key(&key);
    tracing::info!(app_id = %app.id, key_id = %key.id, "api key created");
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
    _: Admin,
    state: web::Data<AppState>,
    app_id: web::Path<String>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = existing_app(&state, app_id.into_inner()).await?;
    let page = q.in_order(b'k', &app.id)?;
    let asked = page.clone();
    let keys = state
        .store
        .run(move |db| store::list_api_keys(db, &app.id, asked.walk()))
        .await?;
    Ok(page.answer(&keys.map(|k| KeyView::from(&k))))
}

async fn change_key(
    state: &AppState,
    access: &web::Data<Access>,
    app_id: String,
    key_id: String,
    change: impl Fn(&mut KeyRecord) + Send + 'static,
) -> Result<KeyRecord, ApiError> {
    let access = access.clone();
    state
        .store
        .run(move |db| {
            let updated = store::modify_api_key(db, &app_id, &key_id, change)?;
            if updated.is_some() {
                access.registry.reload_key(db, &key_id)?;
            }
            Ok(updated)
        })
        .await?
        .ok_or_else(|| ApiError::not_found("key"))
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
    _: Admin,
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, body) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let perms = permissions(&parse(&body, &model::KEY_CHANGES, Mode::Create)?);
    let (app_id, key_id) = path.into_inner();
    let key = change_key(&state, &access, app_id, key_id, move |k| {
        k.permissions.clone_from(&perms)
    })
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
    _: Admin,
    state: web::Data<AppState>,
    access: web::Data<Access>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (app_id, key_id) = path.into_inner();
    let key = change_key(&state, &access, app_id, key_id, |k| {
        k.revoked_at.get_or_insert_with(Timestamp::now);
    })
    .await?;
    access.rate_limits.forget(&key.id);
    tracing::info!(key_id = %key.id, "api key revoked");
    Ok(api::ok(&KeyRevoked {
        id: key.id,
        revoked: true,
        revoked_at: key.revoked_at,
    }))
}

/// The plan of an existing app (404 otherwise), for admin routes of other resources.
pub async fn app_plan(state: &AppState, app: &str) -> Result<Plan, ApiError> {
    let app = app.to_owned();
    state
        .store
        .run(move |db| super::store::get_app(db, &app))
        .await?
        .map(|a| a.plan)
        .ok_or_else(|| ApiError::not_found("app"))
}
