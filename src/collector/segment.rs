//! Segment's HTTP tracking API, beside the collector's own path, so that an app instrumented
//! with Segment's or RudderStack's SDKs switches by changing its host: `POST /v1/batch` (a
//! batch, as `/api/w/analytics/collect`) and `POST /v1/{track,identify,page,screen,group,alias}`
//! (one event per body, its type from the path), one handler. The same [`http::handle`] behind
//! every path: decode, key, dedupe, WAL, lake.

use actix_web::{post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::event::EventType;
use super::http::{self, CollectQuery, Collected, Edge};
use crate::api::ApiError;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(segment);
}

/// What a path names: `batch`, or the type of its one event.
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PathType {
    Batch,
    Track,
    Identify,
    Page,
    Screen,
    Group,
    Alias,
}

impl PathType {
    /// The type given to the events that carry none (none for a batch).
    fn kind(self) -> Option<EventType> {
        Some(match self {
            PathType::Batch => return None,
            PathType::Track => EventType::Track,
            PathType::Identify => EventType::Identify,
            PathType::Page => EventType::Page,
            PathType::Screen => EventType::Screen,
            PathType::Group => EventType::Group,
            PathType::Alias => EventType::Alias,
        })
    }
}

/// Receive events from a Segment or RudderStack SDK (Segment's HTTP tracking API).
///
/// `/v1/batch`: `{"batch": [event, ...], "sentAt"?, "context"?, "integrations"?, "writeKey"?}`
/// (the batch's `context` and `integrations` are merged into each event's) or one event.
/// `/v1/track`, `/v1/identify`, `/v1/page`, `/v1/screen`, `/v1/group`, `/v1/alias`: one event,
/// whose `type` may be left out (a different one refuses it). Key: `Authorization: Basic
/// base64(writeKey:)`, `X-App-Key`, `appKey` in the query or `writeKey` in the body. JSON under
/// any content type, gzip recognised by `Content-Encoding` or by its magic bytes. Answered as
/// `/api/w/analytics/collect`; a 200 means every accepted event is on disk.
#[utoipa::path(
    tag = "collector",
    security(("app_key" = [])),
    params(("type" = PathType, Path, description = "`batch`, or the type of the one event"), CollectQuery),
    request_body(content = Object, description = "A batch or one event (Segment's spec: track, identify, page, screen, group, alias)"),
    responses(
        (status = 200, description = "Every accepted event is on disk", body = Collected),
        (status = 400, description = "Not JSON, no valid event, or a path that names no type"),
        (status = 401, description = "Missing or invalid write key"),
        (status = 403, description = "PLAN_LIMIT_REACHED: no event left within events_per_month (a batch that crosses the limit is answered 200, its events over it refused one by one)"),
        (status = 413, description = "PAYLOAD_TOO_LARGE: over 32 KiB per event or 500 KiB per batch"),
        (status = 503, description = "SERVICE_UNAVAILABLE: writers are full; retry after Retry-After")
    )
)]
#[post("/{type}")]
async fn segment(
    edge: Edge,
    path: web::Path<PathType>,
    req: HttpRequest,
    query: web::Query<CollectQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let kind = path.into_inner().kind();
    http::handle(edge, &req, query.into_inner(), payload, kind).await
}
