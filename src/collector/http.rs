//! The collector's HTTP edge: `POST /api/w/analytics/collect` (api.md §7) and `GET /metrics`;
//! `segment.rs` puts Segment's paths (`/v1/batch`, `/v1/track`...) on the same [`handle`].
//!
//! `body (limits, gzip) -> simd-json parse -> key (header, Basic auth, query or body) ->
//!  validate, enrich -> plan quota reserved (quota.rs) -> Collector::submit (durable) -> quota
//!  settled -> 200 {accepted, duplicates, rejected, errors}; refused events -> quarantine.rs`

use std::net::IpAddr;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{get, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use super::decode::{self, BodyError, Decoded, Enrichment, Rejected};
use super::event::{EventType, Text};
use super::geo::Place;
use super::metrics::{EdgeCounters, Reject};
use super::Collector;
use super::{agent, quarantine, quota, usage, SubmitError, WriteError};
use crate::api::{self, ApiError, ErrorCode, FieldError, Undecoded};
use crate::config::{CollectorSettings, IpPolicy, Quota};
use crate::state::AppState;
use crate::tenants::registry::Authenticated;
use crate::tenants::{Access, KeyKind};

/// Bodies above this are parsed on the blocking pool rather than on the HTTP worker.
const INLINE_PARSE_BYTES: usize = 64 * 1024;
/// Rejections echoed in an answer (the `rejected` count is always complete).
const MAX_REPORTED_ERRORS: usize = 100;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(collect);
}

/// `collect` at an operator's path (`collector.collect_path`), with the same CORS, keys and
/// answers; another method answers as on the default path (405, preflights).
pub fn alias(
    path: &str,
) -> actix_web::Resource<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    web::resource(path)
        .route(web::post().to(receive_batch))
        .default_service(web::to(api::not_found))
        .wrap(actix_web::middleware::from_fn(cors))
}

/// CORS for the widget endpoints: answers preflights itself and marks every answer, errors
/// included, so a browser tracker can read them.
pub async fn cors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let allowed = req
        .app_data::<web::Data<AppState>>()
        .map(|s| s.settings.collector.allowed_origins.clone())
        .unwrap_or_default();
    let allow = match &origin {
        None => Some(HeaderValue::from_static("*")),
        Some(o) if allowed.is_empty() || allowed.iter().any(|a| a.as_bytes() == o.as_bytes()) => {
            Some(o.clone())
        }
        Some(_) => None,
    };
    let decorate = |headers: &mut header::HeaderMap| {
        if let Some(a) = &allow {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, a.clone());
            headers.insert(header::VARY, HeaderValue::from_static("Origin"));
            headers.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("X-Request-Id, Retry-After"),
            );
        }
    };
    if req.method() == actix_web::http::Method::OPTIONS {
        // The methods the path really answers (from the OpenAPI document), plus OPTIONS.
        let methods = req
            .app_data::<web::Data<crate::api::allow::Allowed>>()
            .and_then(|a| a.methods(req.path()))
            .map(|m| format!("{m}, OPTIONS"))
            .and_then(|m| HeaderValue::from_str(&m).ok());
        let mut res = HttpResponse::NoContent().finish();
        decorate(res.headers_mut());
        if let (Some(_), Some(methods)) = (&allow, methods) {
            let h = res.headers_mut();
            h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(
                    "Content-Type, Content-Encoding, X-App-Key, Authorization",
                ),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("86400"),
            );
        }
        return Ok(req.into_response(res).map_into_right_body());
    }
    let mut res = next.call(req).await?;
    decorate(res.headers_mut());
    Ok(res.map_into_left_body())
}

/// The client address: the connection's, or the first X-Forwarded-For entry behind a trusted
/// proxy.
fn client_ip(req: &HttpRequest, cfg: &CollectorSettings) -> Option<IpAddr> {
    let forwarded = cfg
        .trust_forwarded_for
        .then(|| {
            req.headers()
                .get("x-forwarded-for")?
                .to_str()
                .ok()?
                .split(',')
                .next()?
                .trim()
                .parse::<IpAddr>()
                .ok()
        })
        .flatten();
    forwarded.or_else(|| req.peer_addr().map(|a| a.ip()))
}

/// What the lake keeps of the client address under `collector.ip_policy`, once every lookup
/// that needs the full address is done: all of it, the network part (IPv4's last octet and
/// IPv6's last 80 bits zeroed), or nothing.
fn kept_ip(ip: Option<IpAddr>, policy: IpPolicy) -> Option<String> {
    let ip = match (policy, ip?) {
        (IpPolicy::Drop, _) => return None,
        (IpPolicy::Keep, ip) => ip,
        (IpPolicy::Truncate, IpAddr::V4(v4)) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::from([a, b, c, 0])
        }
        (IpPolicy::Truncate, IpAddr::V6(v6)) => {
            let mut s = v6.segments();
            s[3..].fill(0);
            IpAddr::from(s)
        }
    };
    Some(ip.to_string())
}

fn too_large(collector: &Collector, what: &str, limit: usize) -> ApiError {
    collector.metrics.edge.reject(Reject::TooLarge, 1);
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("{what} larger than {limit} bytes"),
    )
}

/// Reads the body up to the batch limit and undoes gzip, capping the decompressed size. A gzip
/// body is recognised by its magic bytes too, whatever its headers say (RudderStack's SDK
/// labels it `application/x-www-form-urlencoded`); a JSON body never starts with them.
async fn read_body(
    collector: &Collector,
    limit: usize,
    req: &HttpRequest,
    mut payload: web::Payload,
) -> Result<Vec<u8>, ApiError> {
    use futures_util::StreamExt;
    let mut raw = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(crate::api::payload_error)?;
        if raw.len() + chunk.len() > limit {
            return Err(too_large(collector, "batch", limit));
        }
        raw.extend_from_slice(&chunk);
    }
    let undone = if raw.starts_with(&[0x1f, 0x8b])
        && !req.headers().contains_key(header::CONTENT_ENCODING)
    {
        api::gunzip(&raw, limit)
    } else {
        api::decode_content(req, raw, limit)
    };
    match undone {
        Err(Undecoded::TooLarge) => Err(too_large(collector, "decompressed batch", limit)),
        decoded => Ok(decoded?),
    }
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CollectQuery {
    /// The integration key, for `navigator.sendBeacon` (which cannot set headers).
    #[serde(rename = "appKey")]
    app_key: Option<String>,
}

fn decode_body<'a>(
    body: &'a [u8],
    scratch: &'a mut decode::Scratch,
    enrich: &'a Enrichment,
    cfg: &CollectorSettings,
) -> Result<Decoded<'a>, BodyError> {
    decode::decode(body, scratch, enrich, limits(cfg))
}

fn limits(cfg: &CollectorSettings) -> decode::Limits {
    decode::Limits {
        max_events: cfg.max_batch_events,
        max_event_bytes: cfg.max_event_bytes,
        max_batch_bytes: cfg.max_batch_bytes,
    }
}

/// The answer to a batch.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Collected<'a> {
    /// Events made durable now.
    pub accepted: usize,
    /// Events dropped: their messageId was seen in the last 24 hours (or twice in the batch).
    pub duplicates: usize,
    /// Events refused (each listed in `errors`, up to 100).
    pub rejected: usize,
    /// The first 100 rejections.
    #[schema(value_type = Vec<RejectedEvent>, max_items = 100)]
    pub errors: &'a [Rejected],
}

/// The schema of `decode::Rejected` (which stays free of utoipa for the fuzzer): one refused
/// event of a batch.
pub struct RejectedEvent;

impl utoipa::PartialSchema for RejectedEvent {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let text = |doc: Option<&str>| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(doc)
        };
        let index = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(0))
            .description(Some("Its position in `batch`."));
        let field = text(Some(
            "The field at fault (`body` for the event as a whole).",
        ));
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some("One refused event of a batch."))
            .property("index", index)
            .property("field", field)
            .property("message", text(None))
            .required("index")
            .required("field")
            .required("message")
            .into()
    }
}

impl utoipa::ToSchema for RejectedEvent {}

/// Receive a batch of analytics events from the tracker.
///
/// Body: `{"batch": [event, ...], "sentAt": "ISO 8601"}` or one event. Key: `X-App-Key`,
/// `Authorization: Basic base64(key:)`, `appKey` in the query, or `writeKey` in the body. JSON
/// under any content type, optionally gzip (by `Content-Encoding` or by its magic bytes). A 200
/// means every accepted event is on disk.
#[utoipa::path(
    tag = "collector",
    security(("app_key" = [])),
    request_body(content = Object, description = "A batch of events (interface §6.2)"),
    responses(
        (status = 200, description = "Every accepted event is on disk", body = Collected),
        (status = 400, description = "Not JSON, or no valid event"),
        (status = 401, description = "Missing or invalid integration key"),
        (status = 403, description = "PLAN_LIMIT_REACHED: no event left within events_per_month (a batch that crosses the limit is answered 200, its events over it refused one by one)"),
        (status = 413, description = "PAYLOAD_TOO_LARGE: over 32 KiB per event or 500 KiB per batch"),
        (status = 503, description = "SERVICE_UNAVAILABLE: writers are full; retry after Retry-After")
    )
)]
#[post("/analytics/collect")]
async fn collect(
    edge: Edge,
    req: HttpRequest,
    query: web::Query<CollectQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    receive_batch(edge, req, query, payload).await
}

/// `collect`'s handler, on every path it answers.
async fn receive_batch(
    edge: Edge,
    req: HttpRequest,
    query: web::Query<CollectQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    handle(edge, &req, query.into_inner(), payload, None).await
}

/// What a collect handler works with (app data): the state, the collector and the keys.
pub(super) struct Edge {
    state: web::Data<AppState>,
    collector: web::Data<Collector>,
    access: web::Data<Access>,
}

impl actix_web::FromRequest for Edge {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Edge, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let edge = (|| {
            Some(Edge {
                state: req.app_data::<web::Data<AppState>>()?.clone(),
                collector: req.app_data::<web::Data<Collector>>()?.clone(),
                access: req.app_data::<web::Data<Access>>()?.clone(),
            })
        })();
        std::future::ready(edge.ok_or_else(|| ApiError::internal("the collector is not set up")))
    }
}

impl Edge {
    /// The app of an integration key (401 when unknown or revoked).
    pub(super) fn authenticate(&self, key: &str) -> Result<Authenticated, ApiError> {
        authenticate(&self.collector, &self.access, Some(key))
    }
}

/// A collect request on any path, metered: `kind` is the type the path names (Segment's
/// `/v1/track`...), given to the events that carry none.
pub(super) async fn handle(
    edge: Edge,
    req: &HttpRequest,
    query: CollectQuery,
    payload: web::Payload,
    kind: Option<EventType>,
) -> Result<HttpResponse, ApiError> {
    let (state, collector, access) = (&edge.state, &edge.collector, &edge.access);
    let started = std::time::Instant::now();
    let counters = &collector.metrics.edge;
    counters.requests.inc();
    let answer = receive(state, collector, access, req, query, payload, kind).await;
    counters.latency.observe(started.elapsed().as_secs_f64());
    answer
}

/// The whole of `collect`: check, read, decode, authenticate, meter, submit, answer.
async fn receive(
    state: &AppState,
    collector: &Collector,
    access: &Access,
    req: &HttpRequest,
    query: CollectQuery,
    payload: web::Payload,
    kind: Option<EventType>,
) -> Result<HttpResponse, ApiError> {
    let edge = &collector.metrics.edge;
    let cfg = &state.settings.collector;
    let header_key = request_key(req).or(query.app_key);
    // A key outside the body is checked before the body is read.
    let who = match &header_key {
        Some(k) => Some(authenticate(collector, access, Some(k))?),
        None => None,
    };
    let body = read_body(collector, cfg.max_batch_bytes, req, payload).await?;
    edge.body_bytes.inc_by(body.len() as u64);
    let received_at = collector.clock.now_micros();
    let enrich = Enrichment {
        kind,
        ..enrichment(req, cfg, received_at)
    };
    // A big body is decoded on a blocking thread, its events then copied out of it; the
    // others here, the events borrowing the body and `scratch` (simd-json's copy, parsed in
    // place, and the texts the decoder wrote).
    let (decoded, body) = if body.len() <= INLINE_PARSE_BYTES {
        (None, body)
    } else {
        let (cfg, enrich) = (cfg.clone(), enrich.clone());
        let (decoded, body) =
            web::block(move || (decode::decode_owned(&body, &enrich, limits(&cfg)), body))
                .await
                .map_err(ApiError::internal)?;
        (Some(decoded), body)
    };
    let mut scratch = decode::Scratch::kept();
    let decoded = match decoded {
        Some(d) => d,
        None => decode_body(&body, &mut scratch, &enrich, cfg),
    };
    let Decoded {
        mut events,
        mut rejected,
        write_key: body_key,
    } = decoded.map_err(|e| body_error(collector, e))?;
    let who = match who {
        Some(w) => w,
        None => authenticate(collector, access, body_key.as_deref())?,
    };
    edge.reject(Reject::InvalidEvent, distinct_events(&rejected) as u64);
    let app: std::sync::Arc<str> = who.app_id.as_str().into();
    for e in &mut events {
        e.app_id = Text::Borrowed(&app);
    }
    let verdicts = agent::judge_all(&events);
    verdicts.fill(&mut events);
    let place = place_of(collector, req, cfg);
    if let Some(place) = &place {
        place.fill(&mut events);
    }
    let erased = suppress(
        access,
        collector,
        &app,
        received_at,
        &mut events,
        &mut rejected,
    );
    // The body is kept for the quarantine only while an event of it may be refused.
    let limited = state.settings.plan(who.plan).limit(Quota::EventsPerMonth);
    let keep_body = !rejected.is_empty() || limited.is_some();
    let answer = if events.is_empty() && !erased.is_empty() {
        Ok(collected(&super::Committed::default(), &rejected))
    } else {
        commit(state, collector, &who, received_at, events, &mut rejected).await
    };
    // Refusals are kept once the answer is final: a 503 is retried whole, and refused again.
    let is_final = answer
        .as_ref()
        .map_or_else(|e| e.code.status().is_client_error(), |_| true);
    if is_final && keep_body {
        // An erased person's events are not kept anywhere, the quarantine included.
        rejected.retain(|r| erased.binary_search(&r.index).is_err());
        keep_refused(collector, &who, received_at, body, &rejected);
    }
    answer
}

/// Why an erased person's event is refused (`field`: the id that matched).
const ERASED: &str = "this person was erased: their events are refused";

/// Takes the events of an erased person (`tenants::suppression`: their userId or anonymousId
/// is on the app's list) out of the batch before the WAL: each one refused in the answer and
/// counted in `/metrics` (`rejected{reason="suppressed"}`). Answers their batch positions, in
/// order. Nothing to do, and no hashing, for an app without erasures.
fn suppress(
    access: &Access,
    collector: &Collector,
    app: &str,
    now: i64,
    events: &mut Vec<super::Event<'_>>,
    rejected: &mut Vec<Rejected>,
) -> Vec<usize> {
    use crate::tenants::suppression::IdKind;
    let Some(list) = access.suppressions.of(app) else {
        return Vec::new();
    };
    let positions = valid_positions(events.len(), rejected);
    let mut erased = Vec::new();
    let mut i = 0;
    events.retain(|e| {
        let refused = |kind, id: &Option<Text<'_>>| {
            id.as_deref()
                .is_some_and(|id| list.refuses(app, kind, id, now))
        };
        let field = if refused(IdKind::User, &e.user_id) {
            Some(IdKind::User)
        } else if refused(IdKind::Anonymous, &e.anonymous_id) {
            Some(IdKind::Anonymous)
        } else {
            None
        };
        if let Some(kind) = field {
            erased.push(positions[i]);
            rejected.push(Rejected {
                index: positions[i],
                field: kind.name().into(),
                message: ERASED.into(),
                too_large: false,
            });
        }
        i += 1;
        field.is_none()
    });
    if !erased.is_empty() {
        collector
            .metrics
            .edge
            .reject(Reject::Suppressed, erased.len() as u64);
        rejected.sort_by_key(|r| r.index);
    }
    erased
}

/// The 200 of a batch: what was committed, and the refusals.
fn collected(total: &super::Committed, rejected: &[Rejected]) -> HttpResponse {
    api::ok(&Collected {
        accepted: total.accepted,
        duplicates: total.duplicates,
        rejected: distinct_events(rejected),
        errors: &rejected[..rejected.len().min(MAX_REPORTED_ERRORS)],
    })
}

/// Reservation rounds of a batch: a round whose events were duplicates gives its share back,
/// and the next round takes it for the batch's events that were over the plan (a retry of a
/// committed batch near the limit); what is over after the last round is refused.
const QUOTA_ROUNDS: usize = 3;

/// The valid events of a batch, within the plan: reserve, submit, settle (in rounds, see
/// `QUOTA_ROUNDS`), answer. Events over the plan's `events_per_month` join `rejected`; when
/// none is within it, the answer is 403 PLAN_LIMIT_REACHED.
async fn commit(
    state: &AppState,
    collector: &Collector,
    who: &Authenticated,
    received_at: i64,
    mut events: Vec<super::Event<'_>>,
    rejected: &mut Vec<Rejected>,
) -> Result<HttpResponse, ApiError> {
    let edge = &collector.metrics.edge;
    if events.is_empty() {
        return Err(nothing_valid(
            collector,
            rejected,
            &state.settings.collector,
        ));
    }
    let limit = state.settings.plan(who.plan).limit(Quota::EventsPerMonth);
    let (valid, mut sent) = (events.len(), 0);
    let mut total = super::Committed::default();
    let mut current = 0;
    for _ in 0..QUOTA_ROUNDS {
        let n = events.len();
        let reservation = reserve(state, collector, who, limit, received_at, n).await?;
        let granted = reservation.granted();
        current = reservation.before() + granted as u64;
        let part = if granted == events.len() {
            std::mem::take(&mut events)
        } else {
            events.drain(..granted).collect()
        };
        sent += part.len();
        let submitted = if part.is_empty() {
            super::Submitted::default()
        } else {
            collector.submit_all(part).await
        };
        let counted = submitted.counted();
        reservation.settle(counted);
        let done = submitted.result().map_err(|e| submit_error(edge, e))?;
        total.accepted += done.accepted;
        total.duplicates += done.duplicates;
        if events.is_empty() || counted == granted as u64 {
            break;
        }
    }
    if !events.is_empty() {
        let limit = limit.unwrap_or(u64::MAX);
        edge.reject(Reject::PlanLimit, events.len() as u64);
        if sent == 0 {
            return Err(ApiError::plan_limit(Quota::EventsPerMonth, limit, current));
        }
        let positions = valid_positions(valid, rejected);
        rejected.extend(positions[sent..].iter().map(|&index| Rejected {
            index,
            field: Quota::EventsPerMonth.name().into(),
            message: format!("over the plan's monthly events: limit {limit}, current {current}"),
            too_large: false,
        }));
        rejected.sort_by_key(|r| r.index);
    }
    Ok(collected(&total, rejected))
}

/// The batch positions of the `valid` events: those `rejected` (in batch order) does not name.
fn valid_positions(valid: usize, rejected: &[Rejected]) -> Vec<usize> {
    let mut refused = rejected.iter().map(|r| r.index).peekable();
    let mut out = Vec::with_capacity(valid);
    let mut index = 0;
    while out.len() < valid {
        while refused.next_if(|&r| r < index).is_some() {}
        if refused.peek() != Some(&index) {
            out.push(index);
        }
        index += 1;
    }
    out
}

/// Hands a batch's refused events to the quarantine (never waits).
fn keep_refused(
    collector: &Collector,
    who: &Authenticated,
    received_at: i64,
    body: Vec<u8>,
    rejected: &[Rejected],
) {
    if rejected.is_empty() {
        return;
    }
    let plan = Quota::EventsPerMonth.name();
    collector.quarantine.keep(quarantine::Job {
        app: who.app_id.clone(),
        request_id: crate::api::request_id::current(),
        received_at: crate::ids::Timestamp::from_micros(received_at),
        body,
        refusals: quarantine::refusals(rejected, |r| r.field == plan),
    });
}

/// What a batch that was not committed is answered: 503 + Retry-After for whatever a retry
/// can cure (a full queue, the backlog at its budget, a shard too slow, a full disk), 500 only
/// for a writer broken by a bug.
fn submit_error(edge: &EdgeCounters, e: SubmitError) -> ApiError {
    let (message, retry_after) = match &e {
        SubmitError::Overloaded => ("the collector is overloaded, retry later", 1),
        SubmitError::Backlogged => (
            "the collector holds as many events as it may while the lake is unreachable, retry later",
            30,
        ),
        SubmitError::TimedOut => ("the collector could not commit the batch in time, retry later", 5),
        SubmitError::Failed(WriteError::Full) => ("the collector is busy writing, retry later", 1),
        SubmitError::Failed(w) if w.retryable() => {
            tracing::warn!(error = %w, "batch not committed; answered 503");
            ("the collector cannot write to its disk now, retry later", 10)
        }
        SubmitError::Failed(w) => return ApiError::internal(w),
    };
    edge.reject(Reject::Overloaded, 1);
    ApiError::unavailable(message, retry_after)
}

/// The integration key outside the body: `X-App-Key`, else the user of `Authorization: Basic
/// base64(key:)` (Segment's and RudderStack's SDKs: the write key, no password).
fn request_key(req: &HttpRequest) -> Option<String> {
    use base64::Engine;
    let headers = req.headers();
    if let Some(k) = headers.get("x-app-key").and_then(|v| v.to_str().ok()) {
        return Some(k.to_owned());
    }
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = auth.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let user = text.split_once(':').map_or(text.as_str(), |(user, _)| user);
    (!user.is_empty()).then(|| user.to_owned())
}

/// The app of an integration key (from the header, the query or the body).
fn authenticate(
    collector: &Collector,
    access: &Access,
    key: Option<&str>,
) -> Result<Authenticated, ApiError> {
    match key.and_then(|k| access.registry.authenticate(k, KeyKind::Integration)) {
        Some(who) => Ok(who),
        None => {
            collector.metrics.edge.reject(Reject::Unauthorized, 1);
            Err(ApiError::unauthorized(
                "missing or invalid integration key (X-App-Key, appKey or writeKey)",
            ))
        }
    }
}

/// What the server adds to every event of the request.
fn enrichment(req: &HttpRequest, cfg: &CollectorSettings, received_at: i64) -> Enrichment {
    Enrichment {
        app_id: "".into(),
        received_at,
        ip: kept_ip(client_ip(req, cfg), cfg.ip_policy()).map(Into::into),
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(Into::into),
        kind: None,
    }
}

/// The client's place (`geo.rs`), looked up from its full address (the lake keeps what
/// `ip_policy` leaves of it); `None` without a database.
fn place_of(collector: &Collector, req: &HttpRequest, cfg: &CollectorSettings) -> Option<Place> {
    Some(collector.places.as_ref()?.lookup(client_ip(req, cfg)?))
}

fn body_error(collector: &Collector, e: BodyError) -> ApiError {
    collector.metrics.edge.reject(Reject::InvalidBody, 1);
    match e {
        BodyError::NotJson(m) | BodyError::NumberOutOfRange(m) => {
            ApiError::field("body", format!("malformed JSON: {m}"))
        }
        BodyError::Invalid { field, message } => ApiError::field(field, message),
        BodyError::TooManyEvents(n) => ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("more than {n} events in one batch"),
        ),
    }
}

/// The number of distinct events among the rejections (one event may fail several fields).
fn distinct_events(rejected: &[Rejected]) -> usize {
    let mut idx: Vec<usize> = rejected.iter().map(|r| r.index).collect();
    idx.dedup();
    idx.len()
}

/// The answer when no event of the batch is valid: 413 when size was the reason (an event, or
/// what the batch merges into its events), else 400.
fn nothing_valid(
    collector: &Collector,
    rejected: &[Rejected],
    cfg: &CollectorSettings,
) -> ApiError {
    if let Some(r) = rejected.iter().find(|r| r.too_large) {
        return match r.field.as_str() {
            "body" => too_large(collector, "event", cfg.max_event_bytes),
            _ => too_large(
                collector,
                "batch with its context and integrations merged into its events",
                cfg.max_batch_bytes,
            ),
        };
    }
    let details = rejected
        .iter()
        .take(MAX_REPORTED_ERRORS)
        .map(|r| FieldError::new(format!("batch[{}].{}", r.index, r.field), r.message.clone()))
        .collect();
    ApiError::validation(details).with_message("no valid event in the batch")
}

/// Reserves up to `n` events of the app's `events_per_month` (`quota.rs`; the month's count is
/// read from sled on its first batch).
async fn reserve(
    state: &AppState,
    collector: &Collector,
    who: &Authenticated,
    limit: Option<u64>,
    received_at: i64,
    n: usize,
) -> Result<quota::Reservation, ApiError> {
    let month = usage::month_of(received_at);
    let seed = || {
        let (app, m) = (who.app_id.clone(), month.clone());
        state.store.run(move |db| usage::get(db, &app, &m))
    };
    let r = collector
        .quotas
        .reserve(&who.app_id, &month, limit, n, seed)
        .await?;
    Ok(r)
}

/// What `/healthz` and `/readyz` say.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Health {
    /// `ok`, or `degraded` while something behind the edge fails (see `problems`).
    status: &'static str,
    /// What fails, since when: `lake` (uploads fail; events wait on disk), `disk` (writes to the
    /// data dir fail), `backlog` (at `collector.max_backlog_mb`: collect answers 503), `store`
    /// (the database is reopening after a failed write: API writes answer 503).
    problems: Vec<super::health::Problem>,
}

fn health_of(state: &AppState, collector: &Collector) -> Health {
    let mut problems = collector.health.problems();
    if let Some(down) = state.store.db().unavailable() {
        let since = state.now().micros() - down.since.elapsed().as_micros() as i64;
        problems.push(super::health::Problem {
            check: "store",
            since: crate::ids::Timestamp::from_micros(since),
            message: format!(
                "the database is reopening after a failed write: {}",
                down.cause
            ),
        });
    }
    let status = if problems.is_empty() {
        "ok"
    } else {
        "degraded"
    };
    Health { status, problems }
}

/// Liveness: 200 while the server runs (HEAD too), saying what is degraded behind it.
#[utoipa::path(tag = "service", responses((status = 200, description = "The server runs", body = Health)))]
#[get("/healthz")]
pub async fn healthz(state: web::Data<AppState>, collector: web::Data<Collector>) -> HttpResponse {
    api::ok(&health_of(&state, &collector))
}

/// Readiness: 200 when nothing is degraded; else 503 SERVICE_UNAVAILABLE + Retry-After naming
/// each problem in `details` (field = the check), so a load balancer can steer traffic to
/// another node while this one rides out a lake outage on its disk.
#[utoipa::path(tag = "service", responses(
    (status = 200, description = "Ready", body = Health),
    (status = 503, description = "SERVICE_UNAVAILABLE: degraded (the lake, the disk or the backlog), each problem in details; retry after Retry-After"),
))]
#[get("/readyz")]
pub async fn readyz(
    state: web::Data<AppState>,
    collector: web::Data<Collector>,
) -> Result<HttpResponse, ApiError> {
    let health = health_of(&state, &collector);
    let Some(first) = health.problems.first() else {
        return Ok(api::ok(&health));
    };
    let message = format!("degraded: {} since {}", first.message, first.since);
    let details = health
        .problems
        .iter()
        .map(|p| FieldError::new(p.check, format!("since {}: {}", p.since, p.message)))
        .collect();
    Err(ApiError::unavailable(message, 5).with_details(details))
}

/// Prometheus metrics of the collector.
#[utoipa::path(tag = "service", responses((status = 200, description = "OpenMetrics text format", content_type = "application/openmetrics-text")))]
#[get("/metrics")]
pub async fn metrics(collector: web::Data<Collector>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(collector.metrics())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_events_are_found_between_the_refused_ones() {
        let r = |index| Rejected {
            index,
            field: "type".into(),
            message: "bad".into(),
            too_large: false,
        };
        assert_eq!(valid_positions(3, &[r(1), r(1), r(3)]), [0, 2, 4]);
        assert_eq!(valid_positions(2, &[r(0), r(1)]), [2, 3]);
        assert_eq!(valid_positions(2, &[]), [0, 1]);
    }

    #[test]
    fn the_ip_policy_keeps_all_part_or_none_of_the_address() {
        let req = actix_web::test::TestRequest::default()
            .peer_addr("203.0.113.77:5000".parse().unwrap())
            .insert_header(("x-forwarded-for", "198.51.100.9, 10.0.0.1"))
            .to_http_request();
        let mut cfg = crate::config::Settings::load(None).unwrap().collector;
        assert_eq!(cfg.ip_policy(), IpPolicy::Truncate, "the default");
        let ip = |cfg: &CollectorSettings| kept_ip(client_ip(&req, cfg), cfg.ip_policy());
        assert_eq!(ip(&cfg).as_deref(), Some("203.0.113.0"));
        cfg.trust_forwarded_for = true;
        assert_eq!(ip(&cfg).as_deref(), Some("198.51.100.0"));
        cfg.set_ip_policy(IpPolicy::Keep);
        assert_eq!(ip(&cfg).as_deref(), Some("198.51.100.9"));
        cfg.set_ip_policy(IpPolicy::Drop);
        assert_eq!(ip(&cfg), None);
        // The deprecated alias still reads, and wins when set.
        cfg.anonymize_ip = Some(false);
        assert_eq!(ip(&cfg).as_deref(), Some("198.51.100.9"));
        cfg.anonymize_ip = Some(true);
        assert_eq!(ip(&cfg).as_deref(), Some("198.51.100.0"));
        let v6 = "2001:db8:85a3:8d3:1319:8a2e:370:7348".parse().ok();
        assert_eq!(
            kept_ip(v6, IpPolicy::Truncate).as_deref(),
            Some("2001:db8:85a3::")
        );
    }
}
