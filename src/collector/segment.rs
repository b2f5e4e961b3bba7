//! Segment's HTTP tracking API, beside the collector's own path, so that an app instrumented
//! with Segment's or RudderStack's SDKs switches by changing its host: `POST /v1/batch` (a
//! batch, as `/api/w/analytics/collect`) and `POST /v1/{track,identify,page,screen,group,alias}`
//! (one event per body, its type from the path), one handler. The same [`http::handle`] behind
//! every path: decode, key, dedupe, WAL, lake.

use actix_web::{get, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::event::EventType;
use super::http::{self, CollectQuery, Collected, Edge};
use crate::api::ApiError;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(segment).service(settings);
}

/// What a path names: `batch`, or the type of its one event; analytics.js (the browser build,
/// `@segment/analytics-next`) uses the first letters (`b`, `t`, `i`, `p`, `s`, `g`, `a`).
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
    B,
    T,
    I,
    P,
    S,
    G,
    A,
}

impl PathType {
    /// The type given to the events that carry none (none for a batch).
    fn kind(self) -> Option<EventType> {
        use PathType::*;
        Some(match self {
            Batch | B => return None,
            Track | T => EventType::Track,
            Identify | I => EventType::Identify,
            Page | P => EventType::Page,
            Screen | S => EventType::Screen,
            Group | G => EventType::Group,
            Alias | A => EventType::Alias,
        })
    }
}

/// Receive events from a Segment or RudderStack SDK (Segment's HTTP tracking API).
///
/// `/v1/batch`: `{"batch": [event, ...], "sentAt"?, "context"?, "integrations"?, "writeKey"?}`
/// (the batch's `context` and `integrations` are merged into each event's) or one event.
/// `/v1/track`, `/v1/identify`, `/v1/page`, `/v1/screen`, `/v1/group`, `/v1/alias`: one event,
/// whose `type` may be left out (a different one refuses it). analytics.js's short forms
/// (`/v1/b`, `/v1/t`, ...) are the same paths. Key: `Authorization: Basic
/// base64(writeKey:)`, `X-App-Key`, `appKey` in the query or `writeKey` in the body. JSON under
/// any content type, gzip recognised by `Content-Encoding` or by its magic bytes. Answered as
/// `/api/w/analytics/collect`; a 200 means every accepted event is on disk.
#[utoipa::path(
    tag = "collector",
    security(("app_key" = [])),
    params(("type" = inline(PathType), Path, description = "`batch`, or the type of the one event"), CollectQuery),
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

/// Settings for Segment's analytics.js (`@segment/analytics-next`): its `Segment.io`
/// destination sends to this server, batched as the interface's tracker (10 events or 5 s).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    integrations: Integrations,
    /// analytics.js's own telemetry to Segment: off (`sampleRate` 0).
    metrics: Metrics,
    /// No plugins loaded from a CDN.
    remote_plugins: Vec<String>,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Integrations {
    #[serde(rename = "Segment.io")]
    segment_io: SegmentIo,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentIo {
    /// The write key (the app's integration key).
    api_key: String,
    /// This server's host and `/v1`, as the request reached it.
    api_host: String,
    /// `http` or `https`, as the request reached this server.
    protocol: String,
    delivery_strategy: Delivery,
}

/// `batching`: events go to `/v1/b` by 10, or after 5 s.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Delivery {
    strategy: &'static str,
    config: BatchConfig,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct BatchConfig {
    size: u32,
    timeout: u32,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    sample_rate: f64,
}

/// Settings for Segment's analytics.js in a browser, loaded with this server as its CDN.
///
/// `AnalyticsBrowser.load({writeKey: APP_KEY, cdnURL: 'https://tributary.example'})` reads its
/// settings here (Segment's CDN format, not enveloped): its `Segment.io` destination then sends
/// to this server's `/v1`, in batches (`/v1/b`). Without this call, give analytics.js the same
/// settings in `cdnSettings`.
#[utoipa::path(
    tag = "collector",
    params(("writeKey" = String, Path, description = "The app's integration key")),
    responses(
        (status = 200, description = "analytics.js settings (Segment's format, not enveloped)", body = Settings),
        (status = 401, description = "Unknown or revoked write key")
    )
)]
#[get("/projects/{writeKey}/settings")]
async fn settings(
    edge: Edge,
    key: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let key = key.into_inner();
    edge.authenticate(&key)?;
    let info = req.connection_info();
    let settings = Settings {
        integrations: Integrations {
            segment_io: SegmentIo {
                api_key: key,
                api_host: format!("{}/v1", info.host()),
                protocol: info.scheme().to_owned(),
                delivery_strategy: Delivery {
                    strategy: "batching",
                    config: BatchConfig {
                        size: 10,
                        timeout: 5000,
                    },
                },
            },
        },
        metrics: Metrics { sample_rate: 0.0 },
        remote_plugins: Vec::new(),
    };
    Ok(HttpResponse::Ok().json(settings))
}
