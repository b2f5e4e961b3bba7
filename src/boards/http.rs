//! Boards over HTTP: the admin API (`/admin/v1/apps/{appId}/boards`, statuses, topics, tags)
//! and the public reads (`/api/v1/boards`, `/idea-statuses`, `/topics`, `/tags`, `ideas:read`).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use super::model::{self, Board, BoardRecord, IdeaStatus, ItemPatch, Part, Tag, Topic};
use super::store::{self, BoardError, Change};
use crate::api::{self, ApiError, Deleted, PageQuery};
use crate::config::Quota;
use crate::fields::{request_body, Mode};
use crate::state::AppState;
use crate::storage::cursor;
use crate::tenants::{AdminApp, Permission, Principal};

/// The admin routes, under `/admin/v1`.
pub fn configure_admin(cfg: &mut ServiceConfig) {
    cfg.service(create_board)
        .service(list_boards_admin)
        .service(get_board)
        .service(update_board)
        .service(list_statuses_admin)
        .service(create_status)
        .service(update_status)
        .service(delete_status)
        .service(list_topics_admin)
        .service(create_topic)
        .service(update_topic)
        .service(delete_topic)
        .service(list_tags_admin)
        .service(create_tag)
        .service(update_tag)
        .service(delete_tag);
}

/// The public routes, under `/api/v1`.
pub fn configure_public(cfg: &mut ServiceConfig) {
    cfg.service(list_boards)
        .service(list_statuses)
        .service(list_topics)
        .service(list_tags);
}

impl From<BoardError> for ApiError {
    fn from(e: BoardError) -> Self {
        match e {
            BoardError::NotFound(what) => ApiError::not_found(what),
            BoardError::Invalid(d) => ApiError::validation(d),
            BoardError::Conflict(m) => ApiError::conflict(m),
            BoardError::PlanLimit { limit, current } => {
                ApiError::plan_limit(Quota::Boards, limit, current)
            }
            BoardError::Store(e) => e.into(),
        }
    }
}

async fn parse_body(
    state: &AppState,
    req: &HttpRequest,
    payload: web::Payload,
    part: Option<Part>,
    create: bool,
) -> Result<ItemPatch, ApiError> {
    let (_, body) = api::json_body(req, payload, state.settings.server.max_body_bytes).await?;
    ItemPatch::parse(&body, part, create).map_err(ApiError::validation)
}

async fn apply(
    state: &AppState,
    app: &AdminApp,
    board: String,
    change: Change,
) -> Result<(BoardRecord, Option<String>), ApiError> {
    let (app, now) = (app.id.clone(), state.now());
    Ok(state
        .store
        .run(move |db| Ok(store::change(db, &app, &board, &change, now)))
        .await??)
}

request_body! {
    /// The body of a board's create (unknown fields are refused).
    BoardCreate = model::BOARD, Mode::Create
}
request_body! {
    /// The body of a board's PATCH (unknown fields are refused).
    BoardChanges = model::BOARD, Mode::Patch
}
request_body! {
    /// The body of a status's create (unknown fields are refused).
    StatusCreate = model::STATUS, Mode::Create
}
request_body! {
    /// The body of a status's PATCH (unknown fields are refused).
    StatusChanges = model::STATUS, Mode::Patch
}
request_body! {
    /// The body of a topic's create (unknown fields are refused).
    TopicCreate = model::TOPIC, Mode::Create
}
request_body! {
    /// The body of a topic's PATCH (unknown fields are refused).
    TopicChanges = model::TOPIC, Mode::Patch
}
request_body! {
    /// The body of a tag's create (unknown fields are refused).
    TagCreate = model::TAG, Mode::Create
}
request_body! {
    /// The body of a tag's PATCH (unknown fields are refused).
    TagChanges = model::TAG, Mode::Patch
}

/// Create a board (counts against the plan's `boards` limit; the default board counts too).
#[utoipa::path(
    tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path)),
    request_body(content = BoardCreate),
    responses((status = 201, body = Board), (status = 400), (status = 403, description = "PLAN_LIMIT_REACHED"), (status = 404))
)]
#[post("/apps/{appId}/boards")]
async fn create_board(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let p = parse_body(&state, &req, payload, None, true).await?;
    let limit = state.settings.plan(app.plan).limit(Quota::Boards);
    let (a, now) = (app.id.clone(), state.now());
    let record = state
        .store
        .run(move |db| Ok(store::create(db, &a, &p, limit, now)))
        .await??;
    let loc = format!("/admin/v1/apps/{}/boards/{}", app.id, record.board.id);
    Ok(api::created(&loc, &record.board))
}

/// One page of boards, oldest first (board ids sort by creation).
fn page(boards: Vec<BoardRecord>, q: &PageQuery, app: &str) -> Result<HttpResponse, ApiError> {
    let page = q.in_order(b'b', app)?;
    let boards = boards.into_iter().map(|b| b.board).collect();
    let found = cursor::page_sorted(boards, |b: &Board| b.id.clone().into_bytes(), page.walk());
    Ok(page.answer(&found))
}

/// List an app's boards, oldest first (the default board first).
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), PageQuery),
    responses((status = 200, body = Vec<Board>), (status = 404)))]
#[get("/apps/{appId}/boards")]
async fn list_boards_admin(
    app: AdminApp,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = app.0.id;
    let a = app.clone();
    page(
        state.store.run(move |db| store::all(db, &a)).await?,
        &q,
        &app,
    )
}

/// Get one board.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    responses((status = 200, body = Board), (status = 404)))]
#[get("/apps/{appId}/boards/{boardId}")]
async fn get_board(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, board) = path.into_inner();
    let found = state
        .store
        .run(move |db| store::get(db, &app.id, Some(&board)))
        .await?;
    found
        .map(|b| api::ok(&b.board))
        .ok_or_else(|| ApiError::not_found("board"))
}

/// Rename a board or change its description (merge patch).
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    request_body(content = BoardChanges),
    responses((status = 200, body = Board), (status = 400), (status = 404)))]
#[patch("/apps/{appId}/boards/{boardId}")]
async fn update_board(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (_, board) = path.into_inner();
    let p = parse_body(&state, &req, payload, None, false).await?;
    let (record, _) = apply(&state, &app, board, Change::Board(p)).await?;
    Ok(api::ok(&record.board))
}

async fn admin_list(
    state: &AppState,
    app: AdminApp,
    (_, board): (String, String),
    part: Part,
) -> Result<HttpResponse, ApiError> {
    let found = state
        .store
        .run(move |db| store::get(db, &app.id, Some(&board)))
        .await?;
    found
        .map(|b| api::ok(&b.list(part)))
        .ok_or_else(|| ApiError::not_found("board"))
}

async fn admin_add(
    (state, app): (&AppState, AdminApp),
    req: &HttpRequest,
    (_, board): (String, String),
    payload: web::Payload,
    part: Part,
) -> Result<HttpResponse, ApiError> {
    let p = parse_body(state, req, payload, Some(part), true).await?;
    let (record, id) = apply(state, &app, board.clone(), Change::Add(part, p)).await?;
    let id = id.unwrap_or_default();
    let item = record.item(part, &id).unwrap_or_default();
    let segment = match part {
        Part::Statuses => "statuses",
        Part::Topics => "topics",
        Part::Tags => "tags",
    };
    Ok(api::created(
        &format!("/admin/v1/apps/{}/boards/{board}/{segment}/{id}", app.id),
        &item,
    ))
}

async fn admin_patch(
    (state, app): (&AppState, AdminApp),
    req: &HttpRequest,
    (_, board, item): (String, String, String),
    payload: web::Payload,
    part: Part,
) -> Result<HttpResponse, ApiError> {
    let p = parse_body(state, req, payload, Some(part), false).await?;
    let (record, _) = apply(state, &app, board, Change::Patch(part, item.clone(), p)).await?;
    Ok(api::ok(&record.item(part, &item).unwrap_or_default()))
}

async fn admin_remove(
    (state, app): (&AppState, AdminApp),
    (_, board, item): (String, String, String),
    part: Part,
) -> Result<HttpResponse, ApiError> {
    apply(state, &app, board, Change::Remove(part, item.clone())).await?;
    Ok(api::deleted(item))
}

/// List a board's statuses in their order.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    responses((status = 200, body = Vec<IdeaStatus>), (status = 404)))]
#[get("/apps/{appId}/boards/{boardId}/statuses")]
async fn list_statuses_admin(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    admin_list(&state, app, path.into_inner(), Part::Statuses).await
}

/// Add a status: `{name, color: "#rrggbb", kind?: open|closed, position?}`.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    request_body(content = StatusCreate),
    responses((status = 201, body = IdeaStatus), (status = 400), (status = 404), (status = 409, description = "Name taken or list full")))]
#[post("/apps/{appId}/boards/{boardId}/statuses")]
async fn create_status(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_add(
        (&state, app),
        &req,
        path.into_inner(),
        payload,
        Part::Statuses,
    )
    .await
}

/// Rename, recolour, change the kind of, or move (`position`, 0-based) a status.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ("statusId" = String, Path)),
    request_body(content = StatusChanges),
    responses((status = 200, body = IdeaStatus), (status = 400), (status = 404), (status = 409)))]
#[patch("/apps/{appId}/boards/{boardId}/statuses/{statusId}")]
async fn update_status(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_patch(
        (&state, app),
        &req,
        path.into_inner(),
        payload,
        Part::Statuses,
    )
    .await
}

/// Delete a status: 409 while an idea has it, or for the built-in Open and Duplicate.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ("statusId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 404), (status = 409, description = "In use or built in")))]
#[delete("/apps/{appId}/boards/{boardId}/statuses/{statusId}")]
async fn delete_status(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    admin_remove((&state, app), path.into_inner(), Part::Statuses).await
}

/// List a board's topics.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    responses((status = 200, body = Vec<Topic>), (status = 404)))]
#[get("/apps/{appId}/boards/{boardId}/topics")]
async fn list_topics_admin(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    admin_list(&state, app, path.into_inner(), Part::Topics).await
}

/// Add a topic: `{name}`.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    request_body(content = TopicCreate),
    responses((status = 201, body = Topic), (status = 400), (status = 404), (status = 409)))]
#[post("/apps/{appId}/boards/{boardId}/topics")]
async fn create_topic(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_add(
        (&state, app),
        &req,
        path.into_inner(),
        payload,
        Part::Topics,
    )
    .await
}

/// Rename a topic.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ("topicId" = String, Path)),
    request_body(content = TopicChanges),
    responses((status = 200, body = Topic), (status = 400), (status = 404), (status = 409)))]
#[patch("/apps/{appId}/boards/{boardId}/topics/{topicId}")]
async fn update_topic(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_patch(
        (&state, app),
        &req,
        path.into_inner(),
        payload,
        Part::Topics,
    )
    .await
}

/// Delete a topic (409 while an idea has it).
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ("topicId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 404), (status = 409)))]
#[delete("/apps/{appId}/boards/{boardId}/topics/{topicId}")]
async fn delete_topic(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    admin_remove((&state, app), path.into_inner(), Part::Topics).await
}

/// List a board's tags.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    responses((status = 200, body = Vec<Tag>), (status = 404)))]
#[get("/apps/{appId}/boards/{boardId}/tags")]
async fn list_tags_admin(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    admin_list(&state, app, path.into_inner(), Part::Tags).await
}

/// Add a tag: `{name, color?}`.
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
    request_body(content = TagCreate),
    responses((status = 201, body = Tag), (status = 400), (status = 404), (status = 409)))]
#[post("/apps/{appId}/boards/{boardId}/tags")]
async fn create_tag(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_add((&state, app), &req, path.into_inner(), payload, Part::Tags).await
}

/// Rename or recolour a tag (`color: null` clears it).
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ("tagId" = String, Path)),
    request_body(content = TagChanges),
    responses((status = 200, body = Tag), (status = 400), (status = 404), (status = 409)))]
#[patch("/apps/{appId}/boards/{boardId}/tags/{tagId}")]
async fn update_tag(
    app: AdminApp,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    admin_patch((&state, app), &req, path.into_inner(), payload, Part::Tags).await
}

/// Delete a tag (409 while an idea has it).
#[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ("tagId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 404), (status = 409)))]
#[delete("/apps/{appId}/boards/{boardId}/tags/{tagId}")]
async fn delete_tag(
    app: AdminApp,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    admin_remove((&state, app), path.into_inner(), Part::Tags).await
}

/// List the app's boards, oldest first (`ideas:read`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, body = Vec<Board>), (status = 400), (status = 401), (status = 403)))]
#[get("/boards")]
async fn list_boards(
    who: Principal,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    let app = who.app_id.clone();
    page(
        state.store.run(move |db| store::all(db, &app)).await?,
        &q,
        &who.app_id,
    )
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct BoardQuery {
    /// The board; default: the app's default board.
    board_id: Option<String>,
}

async fn public_list(
    who: Principal,
    state: &AppState,
    q: &BoardQuery,
    part: Part,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    let (app, board) = (who.app_id.clone(), q.board_id.clone());
    let found = state
        .store
        .run(move |db| store::get(db, &app, board.as_deref()))
        .await?;
    found
        .map(|b| api::ok(&b.list(part)))
        .ok_or_else(|| ApiError::not_found("board"))
}

/// A board's statuses in their order (`ideas:read`). Small lists: not paginated.
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(BoardQuery),
    responses((status = 200, body = Vec<IdeaStatus>), (status = 404, description = "Unknown boardId")))]
#[get("/idea-statuses")]
async fn list_statuses(
    who: Principal,
    state: web::Data<AppState>,
    q: web::Query<BoardQuery>,
) -> Result<HttpResponse, ApiError> {
    public_list(who, &state, &q, Part::Statuses).await
}

/// A board's topics (`ideas:read`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(BoardQuery),
    responses((status = 200, body = Vec<Topic>), (status = 404, description = "Unknown boardId")))]
#[get("/topics")]
async fn list_topics(
    who: Principal,
    state: web::Data<AppState>,
    q: web::Query<BoardQuery>,
) -> Result<HttpResponse, ApiError> {
    public_list(who, &state, &q, Part::Topics).await
}

/// A board's tags (`ideas:read`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(BoardQuery),
    responses((status = 200, body = Vec<Tag>), (status = 404, description = "Unknown boardId")))]
#[get("/tags")]
async fn list_tags(
    who: Principal,
    state: web::Data<AppState>,
    q: web::Query<BoardQuery>,
) -> Result<HttpResponse, ApiError> {
    public_list(who, &state, &q, Part::Tags).await
}
