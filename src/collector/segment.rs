//! Segment's HTTP tracking API, beside the collector's own path, so that an app instrumented
//! with Segment's or RudderStack's SDKs switches by changing its host: `POST /v1/batch` (a
//! batch, as `/api/w/analytics/collect`) and `POST /v1/{track,identify,page,screen,group,alias}`
//! (one event per body, its type from the path). The same [`http::handle`] behind every path:
//! decode, key, dedupe, WAL, lake.

use actix_web::{post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::event::EventType;
use super::http::{self, CollectQuery, Collected};
use super::Collector;
use crate::api::ApiError;
use crate::state::AppState;
use crate::tenants::Access;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(segment_batch).service(segment_event);
}

/// The type a single-event path names.
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PathType {
    Track,
    Identify,
    Page,
    Screen,
    Group,
    Alias,
}

impl From<PathType> for EventType {
    fn from(t: PathType) -> EventType {
        match t {
            PathType::Track => EventType::Track,
            PathType::Identify => EventType::Identify,
            PathType::Page => EventType::Page,
            PathType::Screen => EventType::Screen,
            PathType::Group => EventType::Group,
            PathType::Alias => EventType::Alias,
        }
    }
}

/// Receive a batch of events from a Segment or RudderStack SDK (Segment's HTTP tracking API).
///
/// Body: `{"batch": [event, ...], "sentAt"?, "context"?, "integrations"?, "writeKey"?}` (the
/// batch's `context` and `integrations` are merged into each event's) or one event. Key:
/// `Authorization: Basic base64(writeKey:)`, `X-App-Key`, `appKey` in the query or `writeKey`
/// in the body. JSON under any content type, gzip recognised by `Content-Encoding` or by its
/// magic bytes. Answered as `/api/w/analytics/collect`; a 200 means every accepted event is on
/// disk.
#[utoipa::path(
    tag = "collector",
    security(("app_key" = [])),
    params(CollectQuery),
    request_body(content = Object, description = "A batch of events (Segment's spec: track, identify, page, screen, group, alias)"),
    responses(
        (status = 200, description = "Every accepted event is on disk", body = Collected),
        (status = 400, description = "Not JSON, or no valid event"),
        (status = 401, description = "Missing or invalid write key"),
        (status = 403, description = "PLAN_LIMIT_REACHED: events_per_month"),
        (status = 413, description = "PAYLOAD_TOO_LARGE: over 32 KiB per event or 500 KiB per batch"),
        (status = 503, description = "SERVICE_UNAVAILABLE: writers are full; retry after Retry-After")
    )
)]
#[post("/batch")]
async fn segment_batch(
    state: web::Data<AppState>,
    collector: web::Data<Collector>,
    access: web::Data<Access>,
    req: HttpRequest,
    query: web::Query<CollectQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let shared = (&**state, &**collector, &**access);
    http::handle(shared, &req, query.into_inner(), payload, None).await
}

/// Receive one event of the type the path names (Segment's `/v1/track`, `/v1/identify`,
/// `/v1/page`, `/v1/screen`, `/v1/group`, `/v1/alias`).
///
/// Body: one event; its `type` may be left out (a different one refuses the event). Key,
/// content and answer as `/v1/batch`.
#[utoipa::path(
    tag = "collector",
    security(("app_key" = [])),
    params(("type" = PathType, Path, description = "The event's type"), CollectQuery),
    request_body(content = Object, description = "One event (Segment's spec)"),
    responses(
        (status = 200, description = "The event is on disk (or was a duplicate)", body = Collected),
        (status = 400, description = "Not JSON, not a valid event, or a path that names none of the six types"),
        (status = 401, description = "Missing or invalid write key"),
        (status = 403, description = "PLAN_LIMIT_REACHED: events_per_month"),
        (status = 413, description = "PAYLOAD_TOO_LARGE: over 32 KiB"),
        (status = 503, description = "SERVICE_UNAVAILABLE: writers are full; retry after Retry-After")
    )
)]
#[post("/{type}")]
async fn segment_event(
    state: web::Data<AppState>,
    collector: web::Data<Collector>,
    access: web::Data<Access>,
    kind: web::Path<PathType>,
    req: HttpRequest,
    query: web::Query<CollectQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let shared = (&**state, &**collector, &**access);
    let kind = Some(kind.into_inner().into());
    http::handle(shared, &req, query.into_inner(), payload, kind).await
}
