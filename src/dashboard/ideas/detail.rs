//! The page of one idea: its status, topic, tags and votes with the voters; an edit form
//! (title, description, status, topic, tags) parsed by `IdeaPatch::parse` and written by
//! `ideas::store::update`; the comments as threads (a reply under its parent, internal ones
//! marked) with a form to comment or reply (`CommentDraft::parse`, `engagement::comment`); and
//! the merge: a GET search over the ideas of the same board by title, each match with a button
//! that posts `engagement::merge`, after which the target's page shows the votes it gained.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::board::{board_url, dot, Failed};
use crate::api::{ApiError, PageQuery};
use crate::boards::model::BoardRecord;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, error_for, field_with_id, form_errors, thousands, when,
};
use crate::dashboard::layout::{Section, Shell};
use crate::dashboard::session::{self, AppPage, AppPosted, Form, Viewer};
use crate::ideas::engagement;
use crate::ideas::http::child_page;
use crate::ideas::model::{fold, Comment, CommentDraft, IdeaPatch, IdeaView, Vote};
use crate::ideas::store::{self, Filter, IdeaError, Sort, SortField, Walk};
use crate::state::AppState;
use crate::tenants::App;
use crate::validation::FieldError;

/// Comments a page shows (oldest first; a link shows the next ones), and the most voters.
const COMMENTS_PAGE: &str = "100";
const MAX_VOTERS: usize = 200;
/// The most matches the merge search lists.
const MAX_MATCHES: usize = 20;
/// Replies deeper than this are listed under the last nested level.
const MAX_DEPTH: usize = 5;

#[derive(Deserialize, Default)]
pub struct DetailQuery {
    /// The merge search.
    q: Option<String>,
    /// The idea just merged into this one.
    merged: Option<String>,
    /// Where the comments resume (`nextCursor` of the comments' list).
    comments: Option<String>,
}

/// An idea with what its page shows.
struct Loaded {
    idea: IdeaView,
    board: BoardRecord,
    voters: Vec<Vote>,
    comments: Vec<Comment>,
    /// The cursor of the next comments, and whether this page is not the first.
    more_comments: Option<String>,
    later_comments: bool,
    /// Ideas of the board matching the merge search.
    matches: Vec<IdeaView>,
    /// The idea merged into this one (`?merged=`).
    merged: Option<IdeaView>,
}

fn idea_url(app: &str, idea: &str) -> String {
    format!("/dashboard/apps/{app}/ideas/{idea}")
}

async fn load(state: &AppState, app: &str, id: &str, q: DetailQuery) -> Result<Loaded, PageError> {
    let (app, id) = (app.to_owned(), id.to_owned());
    state
        .store
        .run(move |db| {
            let Some((idea, board)) = store::load(db, &app, &id)? else {
                return Ok(None);
            };
            let idea = idea.view(&board);
            let voters = engagement::votes(db, &app, &id, Walk::new(MAX_VOTERS, None))?;
            // A stale or foreign cursor shows the first comments.
            let page = [q.comments.clone(), None].into_iter().find_map(|cursor| {
                let asked = PageQuery {
                    limit: Some(COMMENTS_PAGE.into()),
                    cursor,
                };
                child_page(&asked, b'c', &app, &id).ok()
            });
            let Some(page) = page else {
                return Ok(None);
            };
            let comments = engagement::comments(db, &app, &id, true, page.walk())?;
            let wanted = q.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
            let matches = match wanted {
                Some(text) => {
                    let filter = Filter {
                        board_ids: vec![board.board.id.clone()],
                        q: Some(fold(text)),
                        ..Filter::default()
                    };
                    let sort = Sort {
                        field: SortField::VoteCount,
                        descending: true,
                    };
                    let walk = Walk::new(MAX_MATCHES + 1, None).descending(sort.descending);
                    store::list(db, &app, &filter, sort.field, walk)?
                        .items
                        .into_iter()
                        .filter(|i| i.id != id && i.merged_into_id.is_none())
                        .take(MAX_MATCHES)
                        .collect()
                }
                None => Vec::new(),
            };
            let merged = match q.merged.as_deref() {
                Some(m) => {
                    store::get(db, &app, m)?.filter(|m| m.merged_into_id.as_ref() == Some(&id))
                }
                None => None,
            };
            Ok(Some(Loaded {
                idea,
                board,
                voters: voters.map(|p| p.items).unwrap_or_default(),
                more_comments: comments
                    .as_ref()
                    .and_then(|c| page.pagination(c).next_cursor),
                later_comments: page.after.is_some(),
                comments: comments.map(|p| p.items).unwrap_or_default(),
                matches,
                merged,
            }))
        })
        .await?
        .ok_or_else(|| PageError::not_found("idea"))
}

/// What one render needs.
struct Ctx<'a> {
    viewer: &'a Viewer,
    app: &'a App,
    l: &'a Loaded,
    failed: Option<Failed<'a>>,
    q: String,
}

impl Ctx<'_> {
    fn url(&self) -> String {
        idea_url(&self.app.id, &self.l.idea.id)
    }
}

fn summary(ctx: &Ctx) -> Markup {
    let (i, app) = (&ctx.l.idea, ctx.app);
    html! {
        @if let Some(m) = &ctx.l.merged {
            div.notice.ok role="status" {
                "“" (m.title) "” was merged into this idea: its voters now count here ("
                (thousands(i.vote_count)) " votes)."
            }
        }
        @if let Some(into) = &i.merged_into_id {
            div.notice role="status" { "This idea was merged into " a href=(idea_url(&app.id, into)) { "another idea" } "." }
        }
        section.card.idea-summary {
            div.idea-head {
                span.votes #vote-count title="Votes" { strong { (thousands(i.vote_count)) } small { "votes" } }
                div {
                    p.status-line { (dot(&i.status.color)) " " strong { (i.status.name) } }
                    @if let Some(d) = &i.description { p.description { (d) } }
                }
            }
            dl.props {
                dt { "Board" } dd { a href=(board_url(&app.id, &i.board_id)) { (ctx.l.board.board.name) } }
                dt { "Topic" } dd { @match &i.topic { Some(t) => (t.name), None => span.muted { "none" } } }
                dt { "Tags" } dd {
                    @if i.tags.is_empty() { span.muted { "none" } }
                    @for t in &i.tags { span.badge { (t.name) } " " }
                }
                dt { "Author" } dd { (i.author.name) " " span.muted { "<" (i.author.email) ">" } }
                dt { "Comments" } dd { (thousands(i.comment_count)) " public" }
                dt { "Created" } dd { (when(i.created_at)) }
            }
        }
    }
}

fn edit_form(ctx: &Ctx) -> Markup {
    let (i, b) = (&ctx.l.idea, &ctx.l.board);
    let errors = Failed::errors(&ctx.failed, "edit");
    let value = |name: &str, stored: &str| Failed::value(&ctx.failed, "edit", name, stored);
    let posted_tags: Option<Vec<&str>> = ctx
        .failed
        .as_ref()
        .filter(|f| f.key == "edit")
        .map(|f| f.form.all("tagIds"));
    let topic = value("topicId", i.topic.as_ref().map_or("", |t| t.id.as_str()));
    let status = value("statusId", &i.status.id);
    let described = error_for(errors, "description");
    html! {
        section.card aria-labelledby="edit" {
            h2 #edit { "Edit" }
            (form_errors(errors, &["title", "description", "statusId", "topicId", "tagIds"]))
            form method="post" action=(ctx.url()) novalidate {
                (csrf_field(&ctx.viewer.session.csrf))
                (field_with_id("f-title", "Title", "title", "text", &value("title", &i.title), errors))
                div.field.invalid[described.is_some()] {
                    label for="f-description" { "Description" }
                    textarea #f-description name="description" rows="4"
                        aria-describedby=[described.map(|_| "f-description-error")] {
                        (value("description", i.description.as_deref().unwrap_or("")))
                    }
                    @if let Some(m) = described { p.field-error #f-description-error { (m) } }
                }
                div.grid {
                    (select_field("Status", "statusId", errors, b.statuses.iter().map(|s| (s.id.as_str(), s.name.as_str())), &status, false))
                    (select_field("Topic", "topicId", errors, b.topics.iter().map(|t| (t.id.as_str(), t.name.as_str())), &topic, true))
                }
                @if !b.tags.is_empty() {
                    fieldset.field.invalid[error_for(errors, "tagIds").is_some()] {
                        legend { "Tags" }
                        div.checks {
                            @for t in &b.tags {
                                @let on = posted_tags.as_ref().map_or(i.tags.iter().any(|x| x.id == t.id), |p| p.contains(&t.id.as_str()));
                                label { input type="checkbox" name="tagIds" value=(t.id) checked[on]; " " (t.name) }
                            }
                        }
                        @if let Some(m) = error_for(errors, "tagIds") { p.field-error { (m) } }
                    }
                }
                button.button.primary type="submit" { "Save idea" }
            }
        }
    }
}

fn select_field<'s>(
    label: &str,
    name: &str,
    errors: &[FieldError],
    options: impl Iterator<Item = (&'s str, &'s str)>,
    selected: &str,
    none: bool,
) -> Markup {
    let id = format!("f-{name}");
    let err = error_for(errors, name);
    html! {
        div.field.invalid[err.is_some()] {
            label for=(id) { (label) }
            select #(id) name=(name) aria-describedby=[err.map(|_| format!("{id}-error"))] {
                @if none { option value="" { "None" } }
                @for (v, n) in options { option value=(v) selected[v == selected] { (n) } }
            }
            @if let Some(m) = err { p.field-error #(format!("{id}-error")) { (m) } }
        }
    }
}

fn voters(ctx: &Ctx) -> Markup {
    let l = ctx.l;
    html! {
        section.card aria-labelledby="voters" {
            h2 #voters { "Votes " span.muted { (thousands(l.idea.vote_count)) } }
            @if l.voters.is_empty() {
                p.muted { "No votes yet." }
            } @else {
                ul.voters {
                    @for v in &l.voters {
                        li {
                            (v.voter.name.as_deref().or(v.voter.email.as_deref()).or(v.voter.id.as_deref()).unwrap_or("?"))
                            @if let (Some(_), Some(e)) = (&v.voter.name, &v.voter.email) { " " span.muted { "<" (e) ">" } }
                            " " small.muted { (when(v.created_at)) }
                        }
                    }
                }
                @if (l.voters.len() as u64) < l.idea.vote_count { p.hint { "The first " (l.voters.len()) " voters." } }
            }
        }
    }
}

/// The form to comment (`parent` = `None`) or reply to a comment.
fn comment_form(ctx: &Ctx, parent: Option<&str>) -> Markup {
    let key = parent.map_or("comment".to_owned(), |p| format!("reply-{p}"));
    let errors = Failed::errors(&ctx.failed, &key);
    let id = format!("f-{key}-content");
    let err = error_for(errors, "content");
    let label = if parent.is_some() { "Reply" } else { "Comment" };
    html! {
        form.comment-form method="post" action=(format!("{}/comments", ctx.url())) novalidate {
            (csrf_field(&ctx.viewer.session.csrf))
            @if let Some(p) = parent { input type="hidden" name="parentId" value=(p); }
            (form_errors(errors, &["content"]))
            div.field.invalid[err.is_some()] {
                label for=(id) { (label) }
                textarea #(id) name="content" rows="3" aria-describedby=[err.map(|_| format!("{id}-error"))] {
                    (Failed::value(&ctx.failed, &key, "content", ""))
                }
                @if let Some(m) = err { p.field-error #(format!("{id}-error")) { (m) } }
            }
            label.check {
                input type="checkbox" name="internal" value="true"
                    checked[Failed::value(&ctx.failed, &key, "internal", "") == "true"];
                " Internal (only the team sees it)"
            }
            button.button type="submit" { @if parent.is_some() { "Post reply" } @else { "Add comment" } }
        }
    }
}

type Children<'c> = HashMap<Option<&'c str>, Vec<&'c Comment>>;

/// Every reply under `id`, at any depth, oldest first.
fn descendants<'c>(kids: &Children<'c>, id: &str) -> Vec<&'c Comment> {
    let mut out: Vec<&Comment> = Vec::new();
    let mut todo = vec![id];
    while let Some(p) = todo.pop() {
        for c in kids.get(&Some(p)).into_iter().flatten() {
            out.push(c);
            todo.push(&c.id);
        }
    }
    out.sort_by_key(|c| c.created_at);
    out
}

fn comment(ctx: &Ctx, c: &Comment) -> Markup {
    let open = ctx
        .failed
        .as_ref()
        .is_some_and(|f| f.key == format!("reply-{}", c.id));
    html! {
        article.comment.internal[c.internal] #(format!("comment-{}", c.id)) aria-label=(format!("Comment by {}", c.author.name)) {
            header.comment-head {
                strong { (c.author.name) }
                " " small.muted { (when(c.created_at)) }
                @if c.internal { " " span.badge.internal-mark { "Internal" } }
            }
            p.comment-body { (c.content) }
            details.reply open[open] {
                summary { "Reply" span.sr-only { " to " (c.author.name) } }
                (comment_form(ctx, Some(&c.id)))
            }
        }
    }
}

fn thread(ctx: &Ctx, kids: &Children, items: &[&Comment], depth: usize) -> Markup {
    html! {
        ol.thread {
            @for c in items {
                li {
                    (comment(ctx, c))
                    @let replies: Vec<&Comment> = if depth + 1 >= MAX_DEPTH {
                        descendants(kids, &c.id)
                    } else {
                        kids.get(&Some(c.id.as_str())).cloned().unwrap_or_default()
                    };
                    @if !replies.is_empty() {
                        @if depth + 1 >= MAX_DEPTH {
                            ol.thread { @for r in &replies { li { (comment(ctx, r)) } } }
                        } @else {
                            (thread(ctx, kids, &replies, depth + 1))
                        }
                    }
                }
            }
        }
    }
}

fn comments(ctx: &Ctx) -> Markup {
    let all = &ctx.l.comments;
    let known: std::collections::HashSet<&str> = all.iter().map(|c| c.id.as_str()).collect();
    let mut kids: Children = HashMap::new();
    for c in all {
        // A reply whose parent is gone (deleted) stands at the top.
        let parent = c.parent_id.as_deref().filter(|p| known.contains(p));
        kids.entry(parent).or_default().push(c);
    }
    let top = kids.get(&None).cloned().unwrap_or_default();
    let (url, next) = (ctx.url(), ctx.l.more_comments.as_deref());
    html! {
        section.card aria-labelledby="comments" {
            h2 #comments { "Comments " span.muted { (all.len()) } }
            @if all.is_empty() { p.muted { "No comments yet." } }
            @else { (thread(ctx, &kids, &top, 0)) }
            @if next.is_some() || ctx.l.later_comments {
                nav.pager aria-label="Comment pages" {
                    @if ctx.l.later_comments { a.button href=(format!("{url}#comments")) { "← First comments" } }
                    @if let Some(n) = next { a.button href=(format!("{url}?comments={n}#comments")) { "Next comments →" } }
                }
            }
            h3 { "Add a comment" }
            (comment_form(ctx, None))
        }
    }
}

fn merge(ctx: &Ctx) -> Markup {
    let l = ctx.l;
    html! {
        section.card aria-labelledby="merge" {
            h2 #merge { "Merge into another idea" }
            @if l.idea.merged_into_id.is_some() {
                p.muted { "Already merged." }
            } @else {
                p.hint { "Its voters and comments move to the idea you pick; this one becomes a duplicate." }
                form.search method="get" action=(ctx.url()) role="search" {
                    div.field {
                        label for="f-q" { "Find the idea to merge into" }
                        input #f-q type="search" name="q" value=(ctx.q);
                    }
                    button.button type="submit" { "Search" }
                }
                @if !ctx.q.trim().is_empty() {
                    @if l.matches.is_empty() {
                        p.muted #merge-results { "No other idea of " (l.board.board.name) " matches “" (ctx.q) "”." }
                    } @else {
                        ul.matches #merge-results {
                            @for m in &l.matches {
                                li {
                                    span { a href=(idea_url(&ctx.app.id, &m.id)) { (m.title) } " " small.muted { (thousands(m.vote_count)) " votes · " (m.status.name) } }
                                    form method="post" action=(format!("{}/merge", ctx.url())) {
                                        (csrf_field(&ctx.viewer.session.csrf))
                                        input type="hidden" name="into" value=(m.id);
                                        button.button type="submit" { "Merge" span.sr-only { " into " (m.title) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn page(ctx: &Ctx) -> Markup {
    let content = html! {
        (summary(ctx))
        div.idea-columns {
            div { (comments(ctx)) }
            div { (edit_form(ctx)) (voters(ctx)) (merge(ctx)) }
        }
    };
    let back = html! { a.button href=(board_url(&ctx.app.id, &ctx.l.idea.board_id)) { "← Board" } };
    let shell = Shell {
        viewer: ctx.viewer,
        section: Section::Ideas,
        title: &ctx.l.idea.title,
        app: Some(ctx.app),
    };
    shell.render(back, content)
}

/// `GET /dashboard/apps/{id}/ideas/{idea}[?q=&merged=]`.
pub async fn detail(
    AppPage(state, viewer, app): AppPage,
    path: web::Path<(String, String)>,
    query: web::Query<DetailQuery>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let query = query.into_inner();
    let q = query.q.clone().unwrap_or_default();
    let l = load(&state, &app.id, &id, query).await?;
    let ctx = Ctx {
        viewer: &viewer,
        app: &app,
        l: &l,
        failed: None,
        q,
    };
    Ok(layout::ok(page(&ctx)))
}

/// The page again with a refused form's errors (400).
async fn refused(
    (state, viewer, app, form): (&AppState, &Viewer, &App, &Form),
    id: &str,
    key: String,
    errors: Vec<FieldError>,
) -> Result<HttpResponse, PageError> {
    let l = load(state, &app.id, id, DetailQuery::default()).await?;
    let ctx = Ctx {
        viewer,
        app,
        l: &l,
        failed: Some(Failed { key, form, errors }),
        q: String::new(),
    };
    Ok(layout::html_response(
        &mut HttpResponse::BadRequest(),
        page(&ctx),
    ))
}

/// The API's PATCH body of the edit form (an empty description or topic clears it).
fn patch_body(form: &Form) -> Map<String, Value> {
    let opt = |v: &str| match v.trim() {
        "" => Value::Null,
        _ => Value::String(v.to_owned()),
    };
    let mut body = Map::new();
    body.insert("title".into(), json!(form.get("title")));
    body.insert("description".into(), opt(form.get("description")));
    body.insert("statusId".into(), json!(form.get("statusId")));
    body.insert("topicId".into(), opt(form.get("topicId")));
    body.insert("tagIds".into(), json!(form.all("tagIds")));
    body
}

/// A store refusal as field errors to show, or the error page.
fn field_errors(e: IdeaError, field: &str) -> Result<Vec<FieldError>, PageError> {
    match e {
        IdeaError::Invalid(d) => Ok(d),
        IdeaError::Conflict(m) => Ok(vec![FieldError::new(field, m)]),
        IdeaError::PlanLimit { quota, limit, .. } => Ok(vec![FieldError::new(
            field,
            format!("the plan allows {limit} ({})", quota.name()),
        )]),
        other => Err(PageError::Api(ApiError::from(other))),
    }
}

/// `POST /dashboard/apps/{id}/ideas/{idea}`: saves the edit form.
pub async fn update(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let errors = match IdeaPatch::parse(&patch_body(&form)) {
        Err(d) => d,
        Ok(patch) => {
            let by = viewer.actor();
            let update =
                move |db: &_, a: &_, i: &_, now| store::update(db, a, i, &patch, (now, &by));
            match session::write_to(&state, &app, &id, update).await? {
                Ok(_) => return Ok(layout::see_other(&idea_url(&app.id, &id))),
                Err(e) => field_errors(e, "title")?,
            }
        }
    };
    let page = (&**state, &viewer, &app, &form);
    refused(page, &id, "edit".into(), errors).await
}

/// `POST /dashboard/apps/{id}/ideas/{idea}/comments`: `content`, `internal`, `parentId`; the
/// signed-in member is the author.
pub async fn add_comment(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let parent = Some(form.get("parentId")).filter(|p| !p.is_empty());
    let u = &viewer.user;
    let body = json!({
        "content": form.get("content"),
        "author": {"id": u.id, "name": u.name, "email": u.email},
        "parentId": parent,
        "internal": form.get("internal") == "true",
    });
    let body = body.as_object().cloned().unwrap_or_default();
    let errors = match CommentDraft::parse(&body) {
        Err(d) => d,
        Ok(draft) => {
            let plan = state.settings.plan(app.plan);
            let by = viewer.actor();
            let add = move |db: &_, a: &_, i: &_, now| {
                engagement::comment(db, a, i, &draft, &plan, (now, &by))
            };
            match session::write_to(&state, &app, &id, add).await? {
                Ok(c) => {
                    tracing::info!(app_id = %app.id, idea_id = %id, comment_id = %c.id, internal = c.internal, user_id = %u.id, "comment from the dashboard");
                    let to = format!("{}#comment-{}", idea_url(&app.id, &id), c.id);
                    return Ok(layout::see_other(&to));
                }
                Err(e) => field_errors(e, "content")?,
            }
        }
    };
    let key = parent.map_or("comment".into(), |p| format!("reply-{p}"));
    let page = (&**state, &viewer, &app, &form);
    refused(page, &id, key, errors).await
}

/// `POST /dashboard/apps/{id}/ideas/{idea}/merge`: `into`, the target; then its page.
pub async fn merge_idea(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let into = form.get("into").to_owned();
    if into == id {
        return Err(PageError::bad_request(
            "an idea cannot be merged into itself",
        ));
    }
    let (a, s, t, now) = (app.id.clone(), id.clone(), into.clone(), state.now());
    let by = viewer.actor();
    let target = state
        .store
        .run(move |db| Ok(engagement::merge(db, &a, &s, &t, (now, &by))))
        .await?
        .map_err(ApiError::from)?;
    tracing::info!(app_id = %app.id, idea_id = %id, into = %target.id, user_id = %viewer.user.id, "idea merged from the dashboard");
    Ok(layout::see_other(&format!(
        "{}?merged={id}",
        idea_url(&app.id, &target.id)
    )))
}
