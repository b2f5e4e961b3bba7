//! The handlers of `/api/v1/ideas` and everything under an idea: query and body parsing,
//! permissions, envelopes.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use super::engagement;
use super::model::{
    self, fold, Comment, CommentDraft, IdeaDraft, IdeaPatch, IdeaView, StatusChange, Vote,
};
use super::store::{self, Filter, IdeaError, Sort, SortField};
use crate::api::{self, ApiError, Deleted, ErrorCode, FieldError, Listed, PageQuery, PageRequest};
use crate::boards::BoardRecord;
use crate::config::Quota;
use crate::fields::{request_body, Mode};
use crate::state::AppState;
use crate::storage::cursor::Walk;
use crate::storage::idempotency::StoredAnswer;
use crate::storage::StoreError;
use crate::tenants::{Permission, Principal};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_ideas)
        .service(create_idea)
        .service(get_idea)
        .service(update_idea)
        .service(delete_idea)
        .service(status_history)
        .service(merge_idea)
        .service(add_vote)
        .service(list_votes)
        .service(delete_vote)
        .service(add_comment)
        .service(list_comments)
        .service(edit_comment)
        .service(delete_comment);
}

impl From<IdeaError> for ApiError {
    fn from(e: IdeaError) -> Self {
        match e {
            IdeaError::NotFound(what) => ApiError::not_found(what),
            IdeaError::Invalid(d) => ApiError::validation(d),
            IdeaError::Conflict(m) => ApiError::conflict(m),
            IdeaError::Forbidden(m) => ApiError::new(ErrorCode::Forbidden, m),
            IdeaError::PlanLimit {
                quota,
                limit,
                current,
            } => ApiError::plan_limit(quota, limit, current),
            IdeaError::Changed => ApiError::conflict("the idea changed meanwhile; retry"),
            IdeaError::Store(e) => e.into(),
        }
    }
}

/// Query parameters of the idea list. A comma inside a value means OR.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Board ids, comma-separated.
    board_id: Option<String>,
    /// Status ids, comma-separated.
    status: Option<String>,
    /// Topic ids, comma-separated.
    topic_id: Option<String>,
    /// Ideas carrying any of these tag ids, comma-separated.
    tag: Option<String>,
    /// Author ids, comma-separated.
    author_id: Option<String>,
    /// Text in title or description, case- and accent-insensitive.
    q: Option<String>,
    /// `-createdAt` (default), `createdAt`, `-voteCount`, `voteCount`, `-commentCount`,
    /// `commentCount`, `-updatedAt`, `updatedAt` or `trending`. Trending ranks by
    /// `Σ over votes of 2^(-age_hours / 72)`: each vote's weight halves every three days.
    sort: Option<String>,
}

fn split(v: &Option<String>) -> Vec<String> {
    v.as_deref()
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// As every list's sort; trending is always descending.
fn parse_sort(raw: Option<&str>) -> Result<Sort, String> {
    match Sort::parse(raw, "-createdAt") {
        Some(s) if s.field == SortField::Trending => Ok(Sort { descending: true, ..s }),
        Some(s) => Ok(s),
        None => Err("must be createdAt, updatedAt, voteCount, commentCount (optionally with '-') or trending".into()),
    }
}

/// Each id of `ids` must be known to one of `boards` (`known`), else one error for `field`.
fn check_ids(
    errors: &mut Vec<FieldError>,
    field: &str,
    ids: &[String],
    known: impl Fn(&str) -> bool,
) {
    if let Some(bad) = ids.iter().find(|i| !known(i)) {
        errors.push(FieldError::new(field, format!("unknown id {bad:?}")));
    }
}

/// The filter, sort, limit and cursor of a list; ids are checked against the app's boards.
fn parse_list(
    q: &Listed<ListQuery>,
    app: &str,
    boards: &[BoardRecord],
) -> Result<(Filter, Sort, PageRequest), ApiError> {
    let mut errors = Vec::new();
    let filter = Filter {
        board_ids: split(&q.board_id),
        status_ids: split(&q.status),
        topic_ids: split(&q.topic_id),
        tag_ids: split(&q.tag),
        author_ids: split(&q.author_id),
        q: q.q
            .as_deref()
            .map(fold)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()),
    };
    check_ids(&mut errors, "boardId", &filter.board_ids, |i| {
        boards.iter().any(|b| b.board.id == i)
    });
    check_ids(&mut errors, "status", &filter.status_ids, |i| {
        boards.iter().any(|b| b.status(i).is_some())
    });
    check_ids(&mut errors, "topicId", &filter.topic_ids, |i| {
        boards.iter().any(|b| b.topic(i).is_some())
    });
    check_ids(&mut errors, "tag", &filter.tag_ids, |i| {
        boards.iter().any(|b| b.tag(i).is_some())
    });
    if q.q.as_deref().is_some_and(|s| s.chars().count() > 200) {
        errors.push(FieldError::new("q", "must be at most 200 characters"));
    }
    let sort = parse_sort(q.sort.as_deref())
        .map_err(|m| errors.push(FieldError::new("sort", m)))
        .ok();
    let listing = sort.map(|s| s.listing(app));
    let page = q.page.parse(listing, store::valid_entry, &mut errors);
    match (sort, page) {
        (Some(sort), Some(page)) if errors.is_empty() => Ok((filter, sort, page)),
        _ => Err(ApiError::validation(errors)),
    }
}

/// List ideas, filtered and sorted, one page at a time (cursor pagination).
#[utoipa::path(
    tag = "ideas", security(("api_key" = [])), params(ListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of ideas", body = Vec<IdeaView>),
        (status = 400, description = "Invalid filter, sort, limit or cursor"),
        (status = 401), (status = 403), (status = 429)
    )
)]
#[get("/ideas")]
async fn list_ideas(
    who: Principal,
    state: web::Data<AppState>,
    query: Listed<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    let app = who.app_id.clone();
    let boards = state
        .store
        .run(move |db| crate::boards::store::all(db, &app))
        .await?;
    let (filter, sort, page) = parse_list(&query, &who.app_id, &boards)?;
    let (app, asked) = (who.app_id.clone(), page.clone());
    let found = state
        .store
        .run(move |db| store::list(db, &app, &filter, sort.field, asked.walk()))
        .await?;
    Ok(page.answer(&found))
}

request_body! {
    /// The body of an idea's create (unknown fields are refused).
    IdeaCreate = model::IDEA, Mode::Create
}
request_body! {
    /// The body of an idea's PATCH, a JSON Merge Patch (unknown fields are refused).
    /// `statusId` needs `ideas:moderate`, the other fields `ideas:write`.
    IdeaChanges = model::IDEA_PATCH, Mode::Patch
}
request_body! {
    /// The body of a merge (unknown fields are refused).
    MergeInput = model::MERGE, Mode::Create
}
request_body! {
    /// The body of a vote (unknown fields are refused).
    VoteInput = model::VOTE, Mode::Create
}
request_body! {
    /// The body of a comment's create (unknown fields are refused).
    CommentCreate = model::COMMENT, Mode::Create
}
request_body! {
    /// The body of a comment's PATCH (unknown fields are refused). Keys without
    /// `ideas:moderate` must name the comment's author.
    CommentChanges = model::COMMENT_EDIT, Mode::Create
}

/// Submit an idea (`ideas:write`); it starts in the board's Open status with no votes.
#[utoipa::path(
    tag = "ideas", security(("api_key" = [])),
    request_body(content = IdeaCreate),
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "1 to 255 printable ASCII characters; replays the first answer for 24 h")),
    responses(
        (status = 201, body = IdeaView, headers(("Location" = String))),
        (status = 400, description = "Invalid fields, unknown boardId/topicId/tagIds"),
        (status = 403, description = "FORBIDDEN or PLAN_LIMIT_REACHED"),
        (status = 409, description = "Idempotency-Key used for another request, or still running")
    )
)]
#[post("/ideas")]
async fn create_idea(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasWrite)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let limit = state.settings.plan(who.plan).limit(Quota::Ideas);
    let by = who.actor();
    api::idempotency::once(
        &state,
        &who.app_id,
        &req,
        &fields,
        store::exists,
        || async {
            let now = state.now();
            let draft = IdeaDraft::parse(&fields, now).map_err(ApiError::validation)?;
            let app = who.app_id.clone();
            let idea = state
                .store
                .run(move |db| Ok(store::create(db, &app, &draft, limit, (now, &by))))
                .await??;
            Ok(StoredAnswer {
                status: 201,
                location: Some(format!("/api/v1/ideas/{}", idea.id)),
                holds: vec![idea.id.clone()],
                data: json!(idea),
            })
        },
    )
    .await
}

/// Get one idea.
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id")),
    responses((status = 200, body = IdeaView), (status = 404), (status = 401), (status = 403)))]
#[get("/ideas/{id}")]
async fn get_idea(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    let (app, id) = (who.app_id.clone(), id.into_inner());
    let found = state.store.run(move |db| store::get(db, &app, &id)).await?;
    found
        .map(|i| api::ok(&i))
        .ok_or_else(|| ApiError::not_found("idea"))
}

/// Update an idea with a JSON Merge Patch: title, description, topicId, tagIds (`ideas:write`),
/// statusId (`ideas:moderate`; each change is kept in the status history). A key with only
/// `ideas:moderate` may change the status alone.
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id")),
    request_body(content = IdeaChanges, content_type = "application/merge-patch+json"),
    responses((status = 200, body = IdeaView), (status = 400), (status = 403), (status = 404)))]
#[patch("/ideas/{id}")]
async fn update_idea(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if who.require(Permission::IdeasModerate).is_err() {
        who.require(Permission::IdeasWrite)?;
    }
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let patch = IdeaPatch::parse(&fields).map_err(ApiError::validation)?;
    if patch.changes_content() {
        who.require(Permission::IdeasWrite)?;
    }
    if patch.status_id.is_some() {
        who.require(Permission::IdeasModerate)?;
    }
    let (app, id, now, by) = (
        who.app_id.clone(),
        id.into_inner(),
        state.now(),
        who.actor(),
    );
    let idea = state
        .store
        .run(move |db| Ok(store::update(db, &app, &id, &patch, (now, &by))))
        .await??;
    Ok(api::ok(&idea))
}

/// Delete an idea with its votes, comments and history (`ideas:moderate`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id")),
    responses((status = 200, body = Deleted), (status = 403), (status = 404)))]
#[delete("/ideas/{id}")]
async fn delete_idea(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasModerate)?;
    let (app, id, now, by) = (
        who.app_id.clone(),
        id.into_inner(),
        state.now(),
        who.actor(),
    );
    let gone = id.clone();
    state
        .store
        .run(move |db| Ok(store::delete(db, &app, &id, (now, &by))))
        .await??;
    Ok(api::deleted(gone))
}

/// The page of one of an idea's lists (`tag`: votes, comments, history), its cursors bound to
/// the idea.
pub fn child_page(q: &PageQuery, tag: u8, app: &str, idea: &str) -> Result<PageRequest, ApiError> {
    q.in_order(tag, &format!("{app}/{idea}"))
}

/// One page of an idea's list (`tag` as for [`child_page`]): `read` runs on the store with the
/// app, the idea and the page's walk, and answers `None` for an unknown idea (404).
async fn child_list<T, F>(
    (state, who): (&AppState, &Principal),
    id: String,
    q: &PageQuery,
    tag: u8,
    read: F,
) -> Result<HttpResponse, ApiError>
where
    T: serde::Serialize + Send + 'static,
    F: FnOnce(&sled::Db, &str, &str, Walk<'_>) -> Result<Option<store::Page<T>>, StoreError>
        + Send
        + 'static,
{
    let page = child_page(q, tag, &who.app_id, &id)?;
    let asked = page.clone();
    let found = api::in_app(state, &who.app_id, move |db, app| {
        read(db, app, &id, asked.walk())
    });
    Ok(page.answer(&found.await?.ok_or_else(|| ApiError::not_found("idea"))?))
}

/// An idea's status changes, oldest first (`ideas:read`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id"), PageQuery),
    responses((status = 200, body = Vec<StatusChange>), (status = 400), (status = 404)))]
#[get("/ideas/{id}/status-history")]
async fn status_history(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    child_list((&state, &who), id.into_inner(), &q, b'h', store::history).await
}

/// Merge the idea into `intoId` (`ideas:moderate`): votes are unioned without counting a voter
/// twice, comments move, the idea becomes Duplicate with `mergedIntoId`. Answers the target.
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id")),
    request_body(content = MergeInput),
    responses((status = 200, body = IdeaView), (status = 400, description = "Missing intoId, or the idea itself"),
        (status = 403), (status = 404), (status = 409, description = "Either idea already merged")))]
#[post("/ideas/{id}/merge")]
async fn merge_idea(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasModerate)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let id = id.into_inner();
    let into = model::MERGE
        .parse(&fields, Mode::Create)
        .map_err(ApiError::validation)?
        .string("intoId")
        .unwrap_or_default();
    if into == id {
        return Err(ApiError::field(
            "intoId",
            "cannot merge an idea into itself",
        ));
    }
    let (app, now, by) = (who.app_id.clone(), state.now(), who.actor());
    let idea = state
        .store
        .run(move |db| Ok(engagement::merge(db, &app, &id, &into, (now, &by))))
        .await??;
    Ok(api::ok(&idea))
}

/// Vote for an idea (`votes:write`). 409 when the voter (same id or same e-mail) already
/// voted, or when the idea's status is of the closed kind.
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id")),
    request_body(content = VoteInput),
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "1 to 255 printable ASCII characters; replays the first answer for 24 h")),
    responses((status = 201, body = Vote, headers(("Location" = String))), (status = 400), (status = 403), (status = 404), (status = 409)))]
#[post("/ideas/{id}/votes")]
async fn add_vote(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::VotesWrite)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let now = state.now();
    let (voter, at) = model::parse_vote(&fields, now).map_err(ApiError::validation)?;
    let (app, id, by) = (who.app_id.clone(), id.into_inner(), who.actor());
    let plan = state.settings.plan(who.plan);
    api::idempotency::once(
        &state,
        &who.app_id,
        &req,
        &fields,
        engagement::held_exists,
        || async {
            let vote = state
                .store
                .run(move |db| {
                    let by = (now, &by);
                    Ok(engagement::vote(db, &app, &id, &voter, at, by, &plan))
                })
                .await??;
            Ok(child_created(b'v', &vote.idea_id, &vote.id, json!(vote)))
        },
    )
    .await
}

/// The kept answer of a new vote (`b'v'`) or comment (`b'c'`): it holds the idea and the child.
fn child_created(kind: u8, idea_id: &str, id: &str, data: serde_json::Value) -> StoredAnswer {
    let list = if kind == b'v' { "votes" } else { "comments" };
    StoredAnswer {
        status: 201,
        location: Some(format!("/api/v1/ideas/{idea_id}/{list}/{id}")),
        holds: vec![
            idea_id.to_owned(),
            engagement::child_hold(kind, idea_id, id),
        ],
        data,
    }
}

/// An idea's votes, oldest first (`ideas:read`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id"), PageQuery),
    responses((status = 200, body = Vec<Vote>), (status = 400), (status = 404)))]
#[get("/ideas/{id}/votes")]
async fn list_votes(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    child_list((&state, &who), id.into_inner(), &q, b'v', engagement::votes).await
}

/// Remove a vote (`votes:write`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id"), ("voteId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 403), (status = 404)))]
#[delete("/ideas/{id}/votes/{voteId}")]
async fn delete_vote(
    who: Principal,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::VotesWrite)?;
    let (idea, vote) = path.into_inner();
    let (app, gone, now, by) = (who.app_id.clone(), vote.clone(), state.now(), who.actor());
    state
        .store
        .run(move |db| Ok(engagement::unvote(db, &app, (&idea, &vote), (now, &by))))
        .await??;
    Ok(api::deleted(gone))
}

/// Comment on an idea (`comments:write`; `internal: true` needs `ideas:moderate`), optionally
/// as a reply (`parentId`, a comment of the same idea).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id")),
    request_body(content = CommentCreate),
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "1 to 255 printable ASCII characters; replays the first answer for 24 h")),
    responses((status = 201, body = Comment, headers(("Location" = String))), (status = 400), (status = 403), (status = 404),
        (status = 409, description = "Idempotency-Key used for another request, or still running")))]
#[post("/ideas/{id}/comments")]
async fn add_comment(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::CommentsWrite)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let draft = CommentDraft::parse(&fields).map_err(ApiError::validation)?;
    if draft.internal {
        who.require(Permission::IdeasModerate)?;
    }
    let (app, id, now, by) = (
        who.app_id.clone(),
        id.into_inner(),
        state.now(),
        who.actor(),
    );
    let plan = state.settings.plan(who.plan);
    api::idempotency::once(
        &state,
        &who.app_id,
        &req,
        &fields,
        engagement::held_exists,
        || async {
            let c = state
                .store
                .run(move |db| {
                    let by = (now, &by);
                    Ok(engagement::comment(db, &app, &id, &draft, &plan, by))
                })
                .await??;
            Ok(child_created(b'c', &c.idea_id, &c.id, json!(c)))
        },
    )
    .await
}

/// An idea's comments, oldest first (`ideas:read`); internal ones only for `ideas:moderate`.
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id"), PageQuery),
    responses((status = 200, body = Vec<Comment>), (status = 400), (status = 404)))]
#[get("/ideas/{id}/comments")]
async fn list_comments(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasRead)?;
    let moderator = who.require(Permission::IdeasModerate).is_ok();
    child_list(
        (&state, &who),
        id.into_inner(),
        &q,
        b'c',
        move |db, app, id, walk| engagement::comments(db, app, id, moderator, walk),
    )
    .await
}

/// Edit a comment's content (`comments:write` and the same `author.id`, or `ideas:moderate`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id"), ("commentId" = String, Path)),
    request_body(content = CommentChanges),
    responses((status = 200, body = Comment), (status = 400), (status = 403), (status = 404)))]
#[patch("/ideas/{id}/comments/{commentId}")]
async fn edit_comment(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let moderator = who.require(Permission::IdeasModerate).is_ok();
    if !moderator {
        who.require(Permission::CommentsWrite)?;
    }
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let (content, author) = model::parse_comment_edit(&fields).map_err(ApiError::validation)?;
    let (idea, comment) = path.into_inner();
    let (app, now) = (who.app_id.clone(), state.now());
    let c = state
        .store
        .run(move |db| {
            Ok(engagement::edit_comment(
                db,
                &app,
                (&idea, &comment),
                &content,
                author.as_deref(),
                moderator,
                now,
            ))
        })
        .await??;
    Ok(api::ok(&c))
}

/// Delete a comment (`ideas:moderate`).
#[utoipa::path(tag = "ideas", security(("api_key" = [])), params(("id" = String, Path, description = "Idea id"), ("commentId" = String, Path)),
    responses((status = 200, body = Deleted), (status = 403), (status = 404)))]
#[delete("/ideas/{id}/comments/{commentId}")]
async fn delete_comment(
    who: Principal,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::IdeasModerate)?;
    let (idea, comment) = path.into_inner();
    let (app, gone) = (who.app_id.clone(), comment.clone());
    state
        .store
        .run(move |db| Ok(engagement::delete_comment(db, &app, &idea, &comment)))
        .await??;
    Ok(api::deleted(gone))
}
