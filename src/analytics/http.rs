//! `GET /api/v1/analytics/traffic`: events, visitors, top pages and events over a window, from
//! the rollups (`analytics:read`).

use actix_web::{get, web, HttpResponse};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::api::{self, ApiError};
use crate::collector::Collector;
use crate::state::AppState;
use crate::tenants::{Permission, Principal};

use super::model::{Traffic, Window};
use super::store;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_traffic);
}

/// The window and step of the traffic query. Hours and days are UTC and follow `received_at`,
/// like the lake's partitions.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TrafficQuery {
    /// Start of the window (ISO 8601 date-time or date); the interval holding it is the first.
    /// Default: 23 hours before `to`.
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// End of the window (ISO 8601 date-time or date); the interval holding it is the last.
    /// Default: now. At most 92 days after `from`.
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
    /// The step of the series: `hour` (default) or `day`.
    #[param(pattern = "^(hour|day)$")]
    interval: Option<String>,
}

/// Traffic of the app over a window.
///
/// Events per interval and type, visitors (distinct anonymousIds, estimated within 2%; exact
/// below about 2 000), identified visitors (anonymousIds seen with a userId), the top 10 pages
/// and track events by count then name. Read from rollups kept as events are committed, never
/// from the lake: an event counts from its 200 (acknowledged events), once, even after a crash
/// and the replay of the WAL, and the counts equal the lake's rows once its files are written.
#[utoipa::path(tag = "analytics", security(("api_key" = [])), params(TrafficQuery), responses(
    (status = 200, description = "The app's traffic over the window", body = Traffic),
    (status = 400, description = "Bad from, to or interval; from after to; a window over 92 days"),
    (status = 401), (status = 403), (status = 429),
))]
#[get("/analytics/traffic")]
async fn get_traffic(
    who: Principal,
    state: web::Data<AppState>,
    collector: web::Data<Collector>,
    query: web::Query<TrafficQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::AnalyticsRead)?;
    let q = query.into_inner();
    let now = collector.clock.now_micros();
    let w = Window::parse(
        q.from.as_deref(),
        q.to.as_deref(),
        q.interval.as_deref(),
        now,
    )
    .map_err(ApiError::validation)?;
    let live = collector.rollups.clone();
    let answer = api::in_app(&state, &who.app_id, move |db, app| {
        store::traffic(db, &live, app, &w)
    });
    Ok(api::ok(&answer.await?))
}
