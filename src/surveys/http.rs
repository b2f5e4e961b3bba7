//! Surveys over HTTP: the admin API (`/admin/v1/apps/{appId}/surveys`: create, read, list,
//! edit, transition, delete) and the public reads (`/api/v1/surveys`, `surveys:read`, active
//! surveys only).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use super::model::{
    self, Filter, ResponseDraft, ResponseFilter, Sort, SortField, Summary, Survey, SurveyPatch,
    SurveyResponse, SurveyStatus, SurveyType,
};
use super::store::{self, SurveyError};
use crate::api::{
    self, ApiError, Deleted, ErrorCode, FieldError, Listed, PageQuery, PageRequest, Pagination,
};
use crate::config::Quota;
use crate::ids::{canonical_anonymous_id, Timestamp};
use crate::state::AppState;
use crate::storage::queue::UPLINK;
use crate::tenants::{Access, AdminApp, KeyKind, Permission, Plan, Principal};
use crate::validation::only_fields;

/// The admin routes, under `/admin/v1`.
pub fn configure_admin(cfg: &mut ServiceConfig) {
    cfg.service(create_survey)
        .service(list_surveys_admin)
        .service(get_survey_admin)
        .service(update_survey)
        .service(transition_survey)
        .service(delete_survey);
}

/// The public routes, under `/api/v1`.
pub fn configure_public(cfg: &mut ServiceConfig) {
    cfg.service(list_surveys)
        .service(get_survey)
        .service(list_responses)
        .service(export_responses)
        .service(summary);
}

/// The widget routes, under `/api/w` (`X-App-Key`, CORS like the collector).
pub fn configure_widget(cfg: &mut ServiceConfig) {
    cfg.service(eligible_surveys).service(add_response);
}

impl From<SurveyError> for ApiError {
    fn from(e: SurveyError) -> Self {
        match e {
            SurveyError::NotFound => ApiError::not_found("survey"),
            SurveyError::Invalid(d) => ApiError::validation(d),
            SurveyError::Conflict(m) => ApiError::conflict(m),
            SurveyError::Forbidden(m) => ApiError::new(ErrorCode::Forbidden, m),
            SurveyError::PlanLimit {
                quota,
                limit,
                current,
            } => ApiError::plan_limit(quota, limit, current),
            SurveyError::Store(e) => e.into(),
        }
    }
}

/// A create or PATCH body, with its `boardId` checked against the app's boards.
async fn parse_body(
    state: &AppState,
    req: &HttpRequest,
    app: &str,
    payload: web::Payload,
    create: bool,
) -> Result<SurveyPatch, ApiError> {
    let (_, body) = api::json_body(req, payload, state.settings.server.max_body_bytes).await?;
    let p = SurveyPatch::parse(&body, create).map_err(ApiError::validation)?;
    if let Some(Some(board)) = p.board_id.clone() {
        let app = app.to_owned();
        let found = state
            .store
            .run(move |db| crate::boards::store::get(db, &app, Some(&board)))
            .await?;
        if found.is_none() {
            return Err(ApiError::field("boardId", "is not a board of this app"));
        }
    }
    Ok(p)
}

fn split(v: &Option<String>) -> Vec<&str> {
    v.as_deref()
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Parses comma-separated values of one filter; an unknown value is one error for `field`.
fn parse_values<T>(
    errors: &mut Vec<FieldError>,
    field: &str,
    raw: &Option<String>,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
) -> Vec<T> {
    let mut out = Vec::new();
    for v in split(raw) {
        match parse(v) {
            Some(t) => out.push(t),
            None => {
                errors.push(FieldError::new(
                    field,
                    format!("unknown value {v:?}; expected {expected}"),
                ));
                break;
            }
        }
    }
    out
}

const TYPES: &str = "nps, csat, pmf, open, poll";

/// The order and page of a list (`scope`: the app, or the app and survey), with the errors of
/// the filters parsed before.
fn parse_page(
    mut errors: Vec<FieldError>,
    scope: &str,
    sort: Option<&str>,
    page: &PageQuery,
) -> Result<(Sort, PageRequest), ApiError> {
    let sort = Sort::parse(sort, "-createdAt");
    if sort.is_none() {
        errors.push(FieldError::new(
            "sort",
            "must be createdAt, updatedAt or responseCount, optionally with '-'",
        ));
    }
    let page = page.parse(
        sort.map(|s| s.listing(scope)),
        super::order::valid_entry,
        &mut errors,
    );
    match (sort, page) {
        (Some(sort), Some(page)) if errors.is_empty() => Ok((sort, page)),
        _ => Err(ApiError::validation(errors)),
    }
}

/// One page of the app's surveys as a list answer.
async fn answer_page(
    state: &AppState,
    app: String,
    filter: Filter,
    (sort, page): (Sort, PageRequest),
) -> Result<HttpResponse, ApiError> {
    let surveys = state.store.run(move |db| store::all(db, &app)).await?;
    Ok(page.answer(&model::page(surveys, &filter, sort, page.walk())))
}

/// Create a survey, in draft.
#[utoipa::path(
    tag = "surveys", security(("admin_token" = [])), params(("appId" = String, Path)),
    request_body(content = Object, description = r#"{"title", "type": "nps"|"csat"|"pmf"|"open"|"poll", "boardId"?, "questions": [{"id"?, "text", "type", "options"?: [{"id", "label"}], "required"?, "min"?, "max"?}], "targeting"?: {"percentage", "attributes"?: [{"key", "operator", "value"?}], "urls"?: [{"operator": "equals"|"contains"|"startsWith"|"endsWith"|"doesNotContain", "value"}]}}"#),
    responses((status = 201, body = Survey), (status = 400), (status = 404))
)]
#[post("/apps/{appId}/surveys")]
async fn create_survey(
    admin: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let app = admin.0.id;
    let p = parse_body(&state, &req, &app, payload, true).await?;
    let survey = p.into_survey(state.now()).map_err(ApiError::validation)?;
    let (a, s) = (app.clone(), survey.clone());
    state.store.run(move |db| store::create(db, &a, &s)).await?;
    let loc = format!("/admin/v1/apps/{app}/surveys/{}", survey.id);
    Ok(api::created(&loc, &survey))
}

/// Query parameters of the admin list. A comma inside a value means OR.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AdminListQuery {
    /// draft, active, paused, closed; comma-separated.
    status: Option<String>,
    /// nps, csat, pmf, open, poll; comma-separated.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    kind: Option<String>,
    /// `-createdAt` (default), `createdAt`, `-updatedAt`, `updatedAt`, `-responseCount`,
    /// `responseCount`.
    sort: Option<String>,
}

/// List an app's surveys, any status.
#[utoipa::path(tag = "surveys", security(("admin_token" = [])), params(("appId" = String, Path), AdminListQuery, PageQuery),
    responses((status = 200, description = "A page of surveys", body = Vec<Survey>), (status = 400), (status = 404)))]
#[get("/apps/{appId}/surveys")]
async fn list_surveys_admin(
    admin: AdminApp,
    state: web::Data<AppState>,
    q: Listed<AdminListQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = admin.0.id;
    let mut errors = Vec::new();
    let filter = Filter {
        statuses: parse_values(
            &mut errors,
            "status",
            &q.status,
            SurveyStatus::parse,
            "draft, active, paused, closed",
        ),
        types: parse_values(&mut errors, "type", &q.kind, SurveyType::parse, TYPES),
        board_ids: Vec::new(),
    };
    let page = parse_page(errors, &app, q.sort.as_deref(), &q.page)?;
    answer_page(&state, app, filter, page).await
}

/// Get one survey, any status.
#[utoipa::path(tag = "surveys", security(("admin_token" = [])), params(("appId" = String, Path), ("surveyId" = String, Path)),
    responses((status = 200, body = Survey), (status = 404)))]
#[get("/apps/{appId}/surveys/{surveyId}")]
async fn get_survey_admin(
    _: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (app, id) = path.into_inner();
    let found = state.store.run(move |db| store::get(db, &app, &id)).await?;
    found
        .map(|s| api::ok(&s))
        .ok_or_else(|| ApiError::not_found("survey"))
}

/// Edit a survey (merge patch): questions and type only while draft, title, boardId and
/// targeting until closed (409 otherwise).
#[utoipa::path(tag = "surveys", security(("admin_token" = [])), params(("appId" = String, Path), ("surveyId" = String, Path)),
    request_body(content = Object, description = r#"{"title"?, "type"?, "boardId"?, "questions"?, "targeting"?}"#),
    responses((status = 200, body = Survey), (status = 400), (status = 404), (status = 409)))]
#[patch("/apps/{appId}/surveys/{surveyId}")]
async fn update_survey(
    _: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (app, id) = path.into_inner();
    let p = parse_body(&state, &req, &app, payload, false).await?;
    let now = state.now();
    let survey = state
        .store
        .run(move |db| Ok(store::update(db, &app, &id, &p, now)))
        .await??;
    Ok(api::ok(&survey))
}

/// Move a survey: draft -> active; active <-> paused; active or paused -> closed. Any other
/// move is 409 naming the allowed ones. Entering active from draft counts against the plan's
/// `active_surveys` (active and paused surveys hold a slot).
#[utoipa::path(tag = "surveys", security(("admin_token" = [])), params(("appId" = String, Path), ("surveyId" = String, Path)),
    request_body(content = Object, description = r#"{"status": "active"|"paused"|"closed"}"#),
    responses((status = 200, body = Survey), (status = 400), (status = 403, description = "PLAN_LIMIT_REACHED"), (status = 404), (status = 409)))]
#[post("/apps/{appId}/surveys/{surveyId}/transition")]
async fn transition_survey(
    admin: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (app, id) = path.into_inner();
    let plan = admin.plan;
    let (_, body) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let mut errors = Vec::new();
    only_fields(&body, &["status"], &mut errors);
    let to = match body.get("status") {
        Some(Value::String(s)) => SurveyStatus::parse(s),
        _ => None,
    };
    if to.is_none() {
        errors.push(FieldError::new(
            "status",
            "must be one of draft, active, paused, closed",
        ));
    }
    let Some(to) = to.filter(|_| errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    let (limit, now) = (
        state.settings.plan(plan).limit(Quota::ActiveSurveys),
        state.now(),
    );
    let survey = state
        .store
        .run(move |db| Ok(store::transition(db, &app, &id, to, limit, now)))
        .await??;
    Ok(api::ok(&survey))
}

/// Delete a draft (any other status is 409: close it instead).
#[utoipa::path(tag = "surveys", security(("admin_token" = [])), params(("appId" = String, Path), ("surveyId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 404), (status = 409)))]
#[delete("/apps/{appId}/surveys/{surveyId}")]
async fn delete_survey(
    _: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (app, id) = path.into_inner();
    let i = id.clone();
    state
        .store
        .run(move |db| Ok(store::delete(db, &app, &i)))
        .await??;
    Ok(api::deleted(id))
}

/// Query parameters of the public list. A comma inside a value means OR.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Board ids, comma-separated.
    board_id: Option<String>,
    /// nps, csat, pmf, open, poll; comma-separated.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    kind: Option<String>,
    /// `-createdAt` (default), `createdAt`, `-updatedAt`, `updatedAt`, `-responseCount`,
    /// `responseCount`.
    sort: Option<String>,
}

/// List the active surveys (drafts, paused and closed surveys are never shown).
#[utoipa::path(
    tag = "surveys", security(("api_key" = [])), params(ListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of active surveys", body = Vec<Survey>),
        (status = 400, description = "Invalid filter, sort, limit or cursor"),
        (status = 401), (status = 403), (status = 429)
    )
)]
#[get("/surveys")]
async fn list_surveys(
    who: Principal,
    state: web::Data<AppState>,
    q: Listed<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::SurveysRead)?;
    let mut errors = Vec::new();
    let filter = Filter {
        statuses: vec![SurveyStatus::Active],
        types: parse_values(&mut errors, "type", &q.kind, SurveyType::parse, TYPES),
        board_ids: split(&q.board_id).into_iter().map(str::to_owned).collect(),
    };
    if !filter.board_ids.is_empty() {
        let (app, wanted) = (who.app_id.clone(), filter.board_ids.clone());
        let boards = state
            .store
            .run(move |db| crate::boards::store::all(db, &app))
            .await?;
        if let Some(bad) = wanted
            .iter()
            .find(|w| !boards.iter().any(|b| &&b.board.id == w))
        {
            errors.push(FieldError::new("boardId", format!("unknown id {bad:?}")));
        }
    }
    let page = parse_page(errors, &who.app_id, q.sort.as_deref(), &q.page)?;
    answer_page(&state, who.app_id.clone(), filter, page).await
}

/// Get one active survey (404 for any other status).
#[utoipa::path(tag = "surveys", security(("api_key" = [])), params(("id" = String, Path, description = "Survey id")),
    responses((status = 200, body = Survey), (status = 404), (status = 401), (status = 403)))]
#[get("/surveys/{id}")]
async fn get_survey(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::SurveysRead)?;
    let (app, id) = (who.app_id.clone(), id.into_inner());
    let found = state.store.run(move |db| store::get(db, &app, &id)).await?;
    found
        .filter(|s| s.status == SurveyStatus::Active)
        .map(|s| api::ok(&s))
        .ok_or_else(|| ApiError::not_found("survey"))
}

/// Answer a survey from the widget: the visitor's first answers create their response (201),
/// later ones update it (200; a partial response is completed this way). A response belongs
/// to the anonymousId that created it (a userId never reaches another device's response). A
/// new response needs the visitor inside the survey's targeting, as the widget's survey list
/// computes it (sample, attribute rules over the profile's traits and `attributes`, URL rules
/// over `metadata.url`). Every answer is checked against its question; a problem names it
/// (`answers.<questionId>`). The user agent is the request's header (a `metadata.userAgent`
/// is ignored).
#[utoipa::path(
    tag = "surveys", security(("app_key" = [])), params(("id" = String, Path, description = "Survey id")),
    request_body(content = Object, description = r#"{"anonymousId" (a UUID), "userId"?, "answers": [{"questionId", "value"}], "completed"?: true, "metadata"?: {"url", "device", "locale", "userAgent" (ignored)}, "attributes"?: {"<key>": string, number or boolean} (as attr.<key> of GET /api/w/surveys)}"#),
    responses(
        (status = 201, description = "A new response", body = SurveyResponse),
        (status = 200, description = "The visitor's response, updated", body = SurveyResponse),
        (status = 400, description = "An invalid answer or field"),
        (status = 401, description = "Missing or invalid integration key"),
        (status = 403, description = "FORBIDDEN: a new response from a visitor outside the survey's targeting, or from a visitor whose data was erased; PLAN_LIMIT_REACHED: responses_per_month"),
        (status = 404, description = "Unknown or draft survey"),
        (status = 409, description = "The survey is paused or closed")
    )
)]
#[post("/surveys/{id}/responses")]
async fn add_response(
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (app, plan) = widget_app(&access, &req)?;
    let (_, body) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let user_agent = req
        .headers()
        .get(actix_web::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let draft = ResponseDraft::parse(&body, user_agent).map_err(ApiError::validation)?;
    let now = state.now();
    refuse_erased(&access, &app, &draft, now)?;
    let limit = state.settings.plan(plan).limit(Quota::ResponsesPerMonth);
    let id = id.into_inner();
    let uplink = state.settings.fleet.is_edge().then_some(UPLINK);
    let (response, created) = state
        .store
        .run(move |db| {
            let on = (app.as_str(), id.as_str());
            Ok(store::respond_on(db, on, &draft, now, limit, uplink))
        })
        .await??;
    Ok(if created {
        let loc = format!(
            "/api/v1/surveys/{}/responses/{}",
            response.survey_id, response.id
        );
        api::created(&loc, &response)
    } else {
        api::ok(&response)
    })
}

/// A response from a visitor whose data was erased (`POST /api/v1/erasures`; their anonymousId
/// or userId is on the suppression list) is refused, 403 FORBIDDEN, and nothing is stored.
fn refuse_erased(
    access: &Access,
    app: &str,
    draft: &ResponseDraft,
    now: Timestamp,
) -> Result<(), ApiError> {
    use crate::tenants::suppression::IdKind;
    let Some(list) = access.suppressions.of(app) else {
        return Ok(());
    };
    let now = now.micros();
    let erased = list.refuses(app, IdKind::Anonymous, &draft.anonymous_id, now)
        || draft
            .user_id
            .as_deref()
            .is_some_and(|u| list.refuses(app, IdKind::User, u, now));
    if erased {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "this visitor's data was erased: responses from them are not accepted",
        ));
    }
    Ok(())
}

/// Query parameters of the response list. A comma inside userId or anonymousId means OR.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ResponsesQuery {
    /// Responses created at or after this time (ISO 8601).
    since: Option<String>,
    /// Responses created before this time (ISO 8601).
    until: Option<String>,
    /// `true` or `false`.
    completed: Option<String>,
    /// User ids, comma-separated.
    user_id: Option<String>,
    /// Anonymous ids, comma-separated.
    anonymous_id: Option<String>,
    /// `-createdAt` (default), `createdAt`, `-updatedAt`, `updatedAt`.
    sort: Option<String>,
}

/// List a survey's responses (active, paused and closed surveys; drafts are 404).
#[utoipa::path(
    tag = "surveys", security(("api_key" = [])), params(("id" = String, Path, description = "Survey id"), ResponsesQuery, PageQuery),
    responses(
        (status = 200, description = "A page of responses", body = Vec<SurveyResponse>),
        (status = 400, description = "Invalid filter, sort, limit or cursor"),
        (status = 401), (status = 403), (status = 404), (status = 429)
    )
)]
#[get("/surveys/{id}/responses")]
async fn list_responses(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    q: Listed<ResponsesQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ResponsesRead)?;
    let (app, id) = (who.app_id.clone(), id.into_inner());
    let mut errors = Vec::new();
    let mut time = |name: &str, raw: &Option<String>| match raw.as_deref() {
        None => None,
        Some(s) => Timestamp::parse(s).or_else(|| {
            errors.push(FieldError::new(name, "must be an ISO 8601 time"));
            None
        }),
    };
    let since = time("since", &q.since);
    let until = time("until", &q.until);
    let completed = match q.completed.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => {
            errors.push(FieldError::new("completed", "must be true or false"));
            None
        }
    };
    let filter = ResponseFilter {
        since,
        until,
        completed,
        user_ids: split(&q.user_id).into_iter().map(str::to_owned).collect(),
        // Canonical, as stored; a value that is no UUID matches no response.
        anonymous_ids: split(&q.anonymous_id)
            .into_iter()
            .map(|a| canonical_anonymous_id(a).unwrap_or_else(|_| a.to_owned()))
            .collect(),
    };
    if Sort::parse(q.sort.as_deref(), "-createdAt")
        .is_some_and(|s| s.field == SortField::ResponseCount)
    {
        errors.push(FieldError::new(
            "sort",
            "must be createdAt or updatedAt, optionally with '-'",
        ));
    }
    let scope = format!("{app}/{id}");
    let (sort, page) = parse_page(errors, &scope, q.sort.as_deref(), &q.page)?;
    let (_, responses) = answered(&state, app, id).await?;
    Ok(page.answer(&model::page_responses(
        responses,
        &filter,
        sort,
        page.walk(),
    )))
}

/// A survey that is not a draft, with its responses (404 otherwise).
async fn answered(
    state: &AppState,
    app: String,
    id: String,
) -> Result<(Survey, Vec<SurveyResponse>), ApiError> {
    let found = state
        .store
        .run(move |db| {
            let survey = store::get(db, &app, &id)?;
            match survey {
                Some(s) if s.status != SurveyStatus::Draft => {
                    store::responses(db, &app, &id).map(|r| Some((s, r)))
                }
                _ => Ok(None),
            }
        })
        .await?;
    found.ok_or_else(|| ApiError::not_found("survey"))
}

/// A survey's summary: counts per question and option, means of rating and scale questions,
/// and the NPS, CSAT or PMF score (active, paused and closed surveys; drafts are 404).
#[utoipa::path(
    tag = "surveys", security(("api_key" = [])), params(("id" = String, Path, description = "Survey id")),
    responses((status = 200, body = Summary), (status = 404), (status = 401), (status = 403), (status = 429))
)]
#[get("/surveys/{id}/summary")]
async fn summary(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ResponsesRead)?;
    let (survey, responses) = answered(&state, who.app_id.clone(), id.into_inner()).await?;
    Ok(api::ok(&model::summarize(&survey, &responses)))
}

/// The longest `url` of a widget request.
const MAX_URL_CHARS: usize = 4096;

/// The integration key of a widget request (`X-App-Key`).
fn widget_app(access: &Access, req: &HttpRequest) -> Result<(String, Plan), ApiError> {
    req.headers()
        .get("x-app-key")
        .and_then(|v| v.to_str().ok())
        .and_then(|k| access.registry.authenticate(k, KeyKind::Integration))
        .map(|who| (who.app_id, who.plan))
        .ok_or_else(|| ApiError::unauthorized("missing or invalid integration key (X-App-Key)"))
}

/// Query parameters of the widget's survey list. `attr.<key>=<value>` parameters add
/// attributes to the visitor's profile traits (and override them). The
/// handler reads the query as pairs (into this struct), to take the `attr.` ones.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct WidgetQuery {
    /// The visitor's anonymous id: a UUID (not the nil or max one), canonicalised as the
    /// collector does.
    anonymous_id: String,
    /// The visitor's user id, when known.
    user_id: Option<String>,
    /// The full URL of the page the visitor is on, matched by the surveys' URL rules; without
    /// it a survey with URL rules is not shown.
    #[param(max_length = 4096)]
    url: Option<String>,
}

/// The active surveys this visitor is eligible for: in the survey's deterministic sample (the
/// same visitor is always in or out), matching every attribute rule (profile traits from the
/// collector's identify calls and `attr.<key>` parameters), and not yet completed.
#[utoipa::path(
    tag = "surveys", security(("app_key" = [])), params(WidgetQuery),
    responses(
        (status = 200, description = "The surveys to show", body = Vec<Survey>),
        (status = 400, description = "A missing anonymousId or one that is not a UUID, a URL over 4 096 characters, or an unknown parameter"),
        (status = 401, description = "Missing or invalid integration key")
    )
)]
#[get("/surveys")]
async fn eligible_surveys(
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    q: web::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ApiError> {
    let (app, _) = widget_app(&access, &req)?;
    let mut errors = Vec::new();
    let mut query = WidgetQuery::default();
    let mut attrs = serde_json::Map::new();
    for (k, v) in q.into_inner() {
        match k.as_str() {
            "anonymousId" => query.anonymous_id = v,
            "userId" => query.user_id = Some(v).filter(|v| !v.is_empty()),
            "url" => query.url = Some(v).filter(|v| !v.is_empty()),
            _ => match k.strip_prefix("attr.").filter(|a| !a.is_empty()) {
                Some(a) => {
                    attrs.insert(a.to_owned(), Value::String(v));
                }
                None => errors.push(FieldError::new(
                    k.clone(),
                    "unknown query parameter; expected anonymousId, userId, url or attr.<key>",
                )),
            },
        }
    }
    let WidgetQuery {
        anonymous_id,
        user_id,
        url,
    } = query;
    let anonymous_id = match canonical_anonymous_id(&anonymous_id) {
        _ if anonymous_id.is_empty() => {
            errors.push(FieldError::new("anonymousId", "is required (a UUID)"));
            None
        }
        Ok(a) => Some(a),
        Err(m) => {
            errors.push(FieldError::new("anonymousId", m));
            None
        }
    };
    if url
        .as_ref()
        .is_some_and(|u| u.chars().count() > MAX_URL_CHARS)
    {
        errors.push(FieldError::new(
            "url",
            format!("must be at most {MAX_URL_CHARS} characters"),
        ));
    }
    let Some(anonymous_id) = anonymous_id.filter(|_| errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    let visitor = store::Visitor {
        anonymous_id,
        user_id,
        attrs,
        url,
    };
    let surveys = state
        .store
        .run(move |db| store::eligible(db, &app, &visitor))
        .await?;
    let surveys = &surveys[..surveys.len().min(100)];
    Ok(api::list(
        surveys,
        &Pagination {
            limit: 100,
            next_cursor: None,
            has_more: false,
        },
    ))
}

/// Every response of a survey as CSV (RFC 4180, `text/csv; charset=utf-8`), oldest first,
/// streamed: a header row `responseId,createdAt,updatedAt,completed,userId,anonymousId,` then
/// one column per question titled by its text; choices as labels, several joined by `; `.
#[utoipa::path(
    tag = "surveys", security(("api_key" = [])), params(("id" = String, Path, description = "Survey id")),
    responses(
        (status = 200, description = "One row per response", content_type = "text/csv"),
        (status = 404), (status = 401), (status = 403), (status = 429)
    )
)]
#[get("/surveys/{id}/responses.csv")]
async fn export_responses(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ResponsesRead)?;
    let (survey, responses) = answered(&state, who.app_id.clone(), id.into_inner()).await?;
    Ok(model::csv_download(survey, responses))
}
