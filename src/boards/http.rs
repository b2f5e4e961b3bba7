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

/// The five routes of one board part (`$part`, items of schema `$schema`): the admin list and
/// add at `$list_path`, change and delete at `$item_path` (`$param` names the item's id), and
/// the public list at `$public_path`. Each route brings its doc lines; add and delete bring
/// their 409 answer, which says more for statuses.
macro_rules! part_routes {
    (
        $part:expr, $schema:ident, $create:ident, $changes:ident, $param:tt,
        $list_path:tt, $item_path:tt, $public_path:tt,
        $(#[$list_doc:meta])* $list:ident,
        $(#[$add_doc:meta])* $add:ident $add_409:tt,
        $(#[$patch_doc:meta])* $patch:ident,
        $(#[$remove_doc:meta])* $remove:ident $remove_409:tt,
        $(#[$public_doc:meta])* $public:ident
    ) => {
        $(#[$list_doc])*
        #[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
            responses((status = 200, body = Vec<$schema>), (status = 404)))]
        #[get($list_path)]
        async fn $list(
            app: AdminApp,
            state: web::Data<AppState>,
            path: web::Path<(String, String)>,
        ) -> Result<HttpResponse, ApiError> {
            admin_list(&state, app, path.into_inner(), $part).await
        }

        $(#[$add_doc])*
        #[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path)),
            request_body(content = $create),
            responses((status = 201, body = $schema), (status = 400), (status = 404), $add_409))]
        #[post($list_path)]
        async fn $add(
            app: AdminApp,
            state: web::Data<AppState>,
            req: HttpRequest,
            path: web::Path<(String, String)>,
            payload: web::Payload,
        ) -> Result<HttpResponse, ApiError> {
            admin_add((&state, app), &req, path.into_inner(), payload, $part).await
        }

        $(#[$patch_doc])*
        #[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ($param = String, Path)),
            request_body(content = $changes),
            responses((status = 200, body = $schema), (status = 400), (status = 404), (status = 409)))]
        #[patch($item_path)]
        async fn $patch(
            app: AdminApp,
            state: web::Data<AppState>,
            req: HttpRequest,
            path: web::Path<(String, String, String)>,
            payload: web::Payload,
        ) -> Result<HttpResponse, ApiError> {
            admin_patch((&state, app), &req, path.into_inner(), payload, $part).await
        }

        $(#[$remove_doc])*
        #[utoipa::path(tag = "boards", security(("admin_token" = [])), params(("appId" = String, Path), ("boardId" = String, Path), ($param = String, Path)),
            responses((status = 200, body = Deleted), (status = 404), $remove_409))]
        #[delete($item_path)]
        async fn $remove(
            app: AdminApp,
            state: web::Data<AppState>,
            path: web::Path<(String, String, String)>,
        ) -> Result<HttpResponse, ApiError> {
            admin_remove((&state, app), path.into_inner(), $part).await
        }

        $(#[$public_doc])*
        #[utoipa::path(tag = "ideas", security(("api_key" = [])), params(BoardQuery),
            responses((status = 200, body = Vec<$schema>), (status = 404, description = "Unknown boardId")))]
        #[get($public_path)]
        async fn $public(
            who: Principal,
            state: web::Data<AppState>,
            q: web::Query<BoardQuery>,
        ) -> Result<HttpResponse, ApiError> {
            public_list(who, &state, &q, $part).await
        }
    };
}

part_routes! {
    Part::Statuses, IdeaStatus, StatusCreate, StatusChanges, "statusId",
    "/apps/{appId}/boards/{boardId}/statuses", "/apps/{appId}/boards/{boardId}/statuses/{statusId}", "/idea-statuses",
    /// List a board's statuses in their order.
    list_statuses_admin,
    /// Add a status: `{name, color: "#rrggbb", kind?: open|closed, position?}`.
    create_status (status = 409, description = "Name taken or list full"),
    /// Rename, recolour, change the kind of, or move (`position`, 0-based) a status.
    update_status,
    /// Delete a status: 409 while an idea has it, or for the built-in Open and Duplicate.
    delete_status (status = 409, description = "In use or built in"),
    /// A board's statuses in their order (`ideas:read`). Small lists: not paginated.
    list_statuses
}

part_routes! {
    Part::Topics, Topic, TopicCreate, TopicChanges, "topicId",
    "/apps/{appId}/boards/{boardId}/topics", "/apps/{appId}/boards/{boardId}/topics/{topicId}", "/topics",
    /// List a board's topics.
    list_topics_admin,
    /// Add a topic: `{name}`.
    create_topic (status = 409),
    /// Rename a topic.
    update_topic,
    /// Delete a topic (409 while an idea has it).
    delete_topic (status = 409),
    /// A board's topics (`ideas:read`).
    list_topics
}

part_routes! {
    Part::Tags, Tag, TagCreate, TagChanges, "tagId",
    "/apps/{appId}/boards/{boardId}/tags", "/apps/{appId}/boards/{boardId}/tags/{tagId}", "/tags",
    /// List a board's tags.
    list_tags_admin,
    /// Add a tag: `{name, color?}`.
    create_tag (status = 409),
    /// Rename or recolour a tag (`color: null` clears it).
    update_tag,
    /// Delete a tag (409 while an idea has it).
    delete_tag (status = 409),
    /// A board's tags (`ideas:read`).
    list_tags
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
