//! The control node's side of the fleet. `/fleet/v1` is the edges' internal API (a fleet token,
//! wired outside `/openapi.json`): `GET /registry` (the snapshot, 304 when the edge holds it),
//! `POST /heartbeat` (the edge's state and usage; answers the other nodes' usage) and `POST
//! /uplink` (`uplink.rs`). `/admin/v1/fleet` is the operator's (admin token, documented): the
//! fleet tokens and the edges.

use actix_web::http::header;
use actix_web::{delete, get, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::nodes::{self, Heartbeat, NodeView, Usage};
use super::snapshot::Cache;
use super::token::{FleetNode, FleetTokenView, Tokens};
use crate::api::{self, ApiError};
use crate::collector::Collector;
use crate::fields::{request_body, Body, Field, Mode, Text};
use crate::state::AppState;
use crate::tenants::Admin;

/// The most a heartbeat body may hold (its usage grows with the apps an edge serves).
const MAX_HEARTBEAT_BYTES: usize = 4 << 20;

/// The admin routes, under `/admin/v1`.
pub fn configure_admin(cfg: &mut ServiceConfig) {
    cfg.service(create_token)
        .service(list_tokens)
        .service(revoke_token)
        .service(list_nodes)
        .service(fleet_usage);
}

/// The edges' routes, under `/fleet/v1` (undocumented: only edges call them).
pub fn configure_internal(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/fleet/v1")
            .route("/registry", web::get().to(registry))
            .route("/heartbeat", web::post().to(heartbeat))
            .route("/uplink", web::post().to(uplink)),
    );
}

static FLEET_TOKEN: Body = Body::new(
    "FleetTokenInput",
    "",
    &[Field::text("name", Text::line(1, 100))
        .doc("What the token is for, e.g. the edges' region.")],
);

request_body! {
    /// A fleet token to create (unknown fields are refused).
    FleetTokenInput = FLEET_TOKEN, Mode::Create
}

/// A new fleet token (the secret `token`, shown only here).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct FleetTokenCreated {
    #[serde(flatten)]
    view: FleetTokenView,
    /// What an edge presents (`TRIBUTARY__FLEET__TOKEN`): `tft_...`.
    token: String,
}

/// Create a fleet token, for edges to present to this control node. Answers it once.
#[utoipa::path(
    tag = "fleet", security(("admin_token" = [])),
    request_body(content = FleetTokenInput),
    responses((status = 201, body = FleetTokenCreated, headers(("Location" = String))), (status = 400))
)]
#[post("/fleet/tokens")]
async fn create_token(
    _: Admin,
    state: web::Data<AppState>,
    tokens: web::Data<Tokens>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let limit = state.settings.server.max_body_bytes;
    let (_, body) = api::json_body(&req, payload, limit).await?;
    let parsed = FLEET_TOKEN
        .parse(&body, Mode::Create)
        .map_err(ApiError::validation)?;
    let name = parsed.string("name").unwrap_or_else(|| "edge".to_owned());
    let now = state.now();
    let tokens = tokens.into_inner();
    let (token, secret) = state
        .store
        .run(move |db| tokens.create(db, &name, now))
        .await?;
    let location = format!("/admin/v1/fleet/tokens/{}", token.id);
    Ok(api::created(
        &location,
        &FleetTokenCreated {
            view: FleetTokenView::from(&token),
            token: secret,
        },
    ))
}

/// List the fleet tokens (never their secrets).
#[utoipa::path(
    tag = "fleet", security(("admin_token" = [])),
    responses((status = 200, body = Vec<FleetTokenView>))
)]
#[get("/fleet/tokens")]
async fn list_tokens(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let list = state.store.run(super::token::list).await?;
    let views: Vec<FleetTokenView> = list.iter().map(FleetTokenView::from).collect();
    Ok(api::ok(&views))
}

/// Revoke a fleet token: edges presenting it are refused (401) from their next sync.
#[utoipa::path(
    tag = "fleet", security(("admin_token" = [])),
    params(("tokenId" = String, Path)),
    responses((status = 200, body = api::Deleted), (status = 404))
)]
#[delete("/fleet/tokens/{tokenId}")]
async fn revoke_token(
    _: Admin,
    state: web::Data<AppState>,
    tokens: web::Data<Tokens>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let tokens = tokens.into_inner();
    let gone = id.clone();
    let removed = state.store.run(move |db| tokens.revoke(db, &gone)).await?;
    if !removed {
        return Err(ApiError::not_found("fleet token"));
    }
    Ok(api::deleted(id))
}

/// The edges this control node has heard from: their state at their last sync.
#[utoipa::path(
    tag = "fleet", security(("admin_token" = [])),
    responses((status = 200, body = Vec<NodeView>))
)]
#[get("/fleet/nodes")]
async fn list_nodes(
    _: Admin,
    state: web::Data<AppState>,
    cache: web::Data<Cache>,
) -> Result<HttpResponse, ApiError> {
    let views = state.store.run(move |db| node_views(db, &cache)).await?;
    Ok(api::ok(&views))
}

/// The month `?month=YYYY-MM` asks for (default: the current one).
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct UsageQuery {
    /// `YYYY-MM` (UTC); default: this month.
    month: Option<String>,
}

/// Events per app and month across the fleet (this node and every edge's last report), with
/// each node's share: what the plans' `events_per_month` is checked against.
#[utoipa::path(
    tag = "fleet", security(("admin_token" = [])),
    params(UsageQuery),
    responses((status = 200, body = Vec<nodes::FleetUsage>), (status = 400))
)]
#[get("/fleet/usage")]
async fn fleet_usage(
    _: Admin,
    state: web::Data<AppState>,
    query: web::Query<UsageQuery>,
) -> Result<HttpResponse, ApiError> {
    let month = match &query.month {
        Some(m) if is_month(m) => m.clone(),
        Some(_) => return Err(ApiError::field("month", "must be a month as YYYY-MM")),
        None => nodes::months(state.now()).pop().unwrap_or_default(),
    };
    let own = state.settings.collector.node_id.clone();
    let list = state
        .store
        .run(move |db| nodes::fleet_usage(db, &own, &[month]))
        .await?;
    Ok(api::ok(&list))
}

/// `YYYY-MM` with a month from 01 to 12.
fn is_month(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 7
        && b[4] == b'-'
        && b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit)
        && matches!(s[5..].parse::<u8>(), Ok(1..=12))
}

/// Every edge's view, against the registry version of now.
pub fn node_views(
    db: &sled::Db,
    cache: &Cache,
) -> Result<Vec<NodeView>, crate::storage::StoreError> {
    let (_, current) = cache.get(db)?;
    nodes::views(db, &current)
}

/// `GET /fleet/v1/registry`: the snapshot, or 304 when `If-None-Match` names its version.
async fn registry(
    _: FleetNode,
    req: HttpRequest,
    state: web::Data<AppState>,
    cache: web::Data<Cache>,
) -> Result<HttpResponse, ApiError> {
    let (body, version) = state.store.run(move |db| cache.get(db)).await?;
    let etag = format!("\"{version}\"");
    let held = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    if held == Some(etag.as_str()) {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, etag))
            .finish());
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, etag))
        .content_type("application/json")
        .body((*body).clone()))
}

/// The most an uplink batch may hold (an edge sends at most 500 items and 4 MiB beyond the first).
const MAX_UPLINK_BYTES: usize = 16 << 20;

/// `POST /fleet/v1/uplink`: an edge's items, applied in order (`uplink.rs`). Items of an app
/// no longer in the registry (being deleted, or gone) and profiles and responses of an erased
/// person are refused here: they were queued on the edge before it learned of it.
async fn uplink(
    _: FleetNode,
    state: web::Data<AppState>,
    access: web::Data<crate::tenants::Access>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    if body.len() > MAX_UPLINK_BYTES {
        return Err(ApiError::field(
            "body",
            "is larger than an uplink batch may be",
        ));
    }
    let mut batch: super::uplink::UplinkBatch = serde_json::from_slice(&body)
        .map_err(|e| ApiError::field("body", format!("is not an uplink batch: {e}")))?;
    let now = state.now().micros();
    for item in &mut batch.items {
        if let Some(why) = refused(&access, &item.kind, &item.body, now) {
            tracing::info!(seq = item.seq, kind = %item.kind, why, "uplink item refused");
            item.kind = format!("refused: {why}");
        }
    }
    let own = &state.settings.collector.node_id;
    let through = super::uplink::receive_batch(&state.store, own, batch).await?;
    Ok(HttpResponse::Ok().json(through))
}

/// Why an uplink item may not be applied any more, if so.
fn refused(
    access: &crate::tenants::Access,
    kind: &str,
    body: &serde_json::Value,
    now: i64,
) -> Option<&'static str> {
    use crate::tenants::suppression::IdKind;
    let (app, who) = match kind {
        "rollup" => return None,
        "profile" => (&body["appId"], body),
        _ => (&body["appId"], &body["draft"]),
    };
    let app = app.as_str().unwrap_or_default();
    if access.registry.plan_of(app).is_none() {
        return Some("the app is being deleted or gone");
    }
    let list = access.suppressions.of(app)?;
    let id = |name: &str| who[name].as_str();
    let erased = id("anonymousId").is_some_and(|a| list.refuses(app, IdKind::Anonymous, a, now))
        || id("userId").is_some_and(|u| list.refuses(app, IdKind::User, u, now));
    erased.then_some("the person was erased")
}

/// What a heartbeat answers: the other nodes' usage, and the registry version of now.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatAnswer {
    pub registry_version: String,
    pub usage: Vec<Usage>,
}

/// `POST /fleet/v1/heartbeat`: records the edge's state, sets the control node's own quota
/// offsets from every edge's usage, and answers the edge the other nodes' usage.
async fn heartbeat(
    node: FleetNode,
    state: web::Data<AppState>,
    collector: web::Data<Collector>,
    cache: web::Data<Cache>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    if body.len() > MAX_HEARTBEAT_BYTES {
        return Err(ApiError::field("body", "is larger than a heartbeat may be"));
    }
    let beat: Heartbeat = serde_json::from_slice(&body)
        .map_err(|e| ApiError::field("body", format!("is not a heartbeat: {e}")))?;
    if beat.node_id.is_empty() || beat.node_id.len() > 64 {
        return Err(ApiError::field("nodeId", "must be 1 to 64 characters"));
    }
    let now = state.now();
    let months = nodes::months(now);
    let (edges, answer) = state
        .store
        .run(move |db| {
            nodes::record(db, &node.token_id, &beat, now)?;
            let edges = nodes::edges_usage(db, None)?;
            let usage = nodes::others_of(db, &beat.node_id, &months)?;
            let (_, registry_version) = cache.get(db)?;
            Ok((
                edges,
                HeartbeatAnswer {
                    registry_version,
                    usage,
                },
            ))
        })
        .await?;
    for ((app, month), n) in edges {
        collector.quotas.set_others(&app, &month, n);
    }
    Ok(HttpResponse::Ok().json(answer))
}
