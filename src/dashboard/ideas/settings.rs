//! The Ideas settings of an app: its boards (create, rename) and one board's statuses (name,
//! colour, open or closed, place in the order), topics and tags (name; a tag's optional
//! colour), each added, changed and deleted. Every form becomes the admin API's body, parsed by
//! `boards::model::ItemPatch::parse` and applied by `boards::store::create` / `change`, so the
//! limits, the unique names, the built-in statuses and the refusal to delete an item in use
//! are the API's; a refusal is shown next to the field of the form that was sent.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::board::{board_url, dot, Failed};
use crate::api::ApiError;
use crate::boards::model::{BoardRecord, ItemPatch, Part, StatusKind};
use crate::boards::store::{self as boards, BoardError, Change};
use crate::config::Quota;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, error_for, field_with_id, form_errors, Section, Shell,
};
use crate::dashboard::session::{AppPage, AppPosted, Form, Viewer};
use crate::state::AppState;
use crate::tenants::App;
use crate::validation::FieldError;

#[derive(Deserialize)]
pub struct SettingsQuery {
    board: Option<String>,
}

/// One row of a list, whichever list it is.
struct Row<'a> {
    id: &'a str,
    name: &'a str,
    color: Option<&'a str>,
    kind: Option<StatusKind>,
    position: Option<usize>,
    built_in: bool,
}

const PARTS: [(Part, &str, &str); 3] = [
    (Part::Statuses, "statuses", "Statuses"),
    (Part::Topics, "topics", "Topics"),
    (Part::Tags, "tags", "Tags"),
];

fn part_of(slug: &str) -> Result<Part, PageError> {
    PARTS
        .iter()
        .find(|p| p.1 == slug)
        .map(|p| p.0)
        .ok_or_else(|| PageError::not_found("list"))
}

fn rows(b: &BoardRecord, part: Part) -> Vec<Row<'_>> {
    match part {
        Part::Statuses => b
            .statuses
            .iter()
            .map(|s| Row {
                id: &s.id,
                name: &s.name,
                color: Some(s.color.as_str()),
                kind: Some(s.kind),
                position: Some(s.position),
                built_in: s.built_in,
            })
            .collect(),
        Part::Topics => b
            .topics
            .iter()
            .map(|t| Row {
                id: &t.id,
                name: &t.name,
                color: None,
                kind: None,
                position: None,
                built_in: false,
            })
            .collect(),
        Part::Tags => b
            .tags
            .iter()
            .map(|t| Row {
                id: &t.id,
                name: &t.name,
                color: Some(t.color.as_ref().map_or("", |c| c.as_str())),
                kind: None,
                position: None,
                built_in: false,
            })
            .collect(),
    }
}

fn settings_url(app: &str, board: &str) -> String {
    format!("/dashboard/apps/{app}/ideas/settings?board={board}")
}

struct Ctx<'a> {
    viewer: &'a Viewer,
    app: &'a App,
    all: &'a [BoardRecord],
    board: &'a BoardRecord,
    failed: Option<Failed<'a>>,
}

/// The inputs of an item of `part` in form `key` (a new item when `row` is `None`).
fn item_inputs(ctx: &Ctx, part: Part, key: &str, row: Option<&Row>) -> Markup {
    let errors = Failed::errors(&ctx.failed, key);
    let v = |name: &str, stored: &str| Failed::value(&ctx.failed, key, name, stored);
    let what = part.item();
    let name_label = match row {
        Some(r) => html! { "Name" span.sr-only { " of " (what) " " (r.name) } },
        None => html! { "New " (what) " name" },
    };
    let color = match (part, row) {
        (Part::Statuses, None) => Some("#9ca3af"),
        (Part::Tags, None) => Some(""),
        (_, r) => r.and_then(|r| r.color),
    };
    let kind = row.and_then(|r| r.kind).unwrap_or(StatusKind::Open);
    let kind_id = format!("f-{key}-kind");
    html! {
        (field_with_id(&format!("f-{key}-name"), name_label, "name", "text", &v("name", row.map_or("", |r| r.name)), errors))
        @if let Some(c) = color {
            @if part == Part::Statuses {
                (field_with_id(&format!("f-{key}-color"), "Colour", "color", "color", &v("color", c), errors))
            } @else {
                (field_with_id(&format!("f-{key}-color"), html! { "Colour" span.muted { " (optional)" } }, "color", "text", &v("color", c), errors))
            }
        }
        @if part == Part::Statuses {
            div.field.invalid[error_for(errors, "kind").is_some()] {
                label for=(kind_id) { "Votes" }
                select #(kind_id) name="kind" {
                    @let chosen = v("kind", if kind == StatusKind::Open { "open" } else { "closed" });
                    option value="open" selected[chosen == "open"] { "open (takes votes)" }
                    option value="closed" selected[chosen == "closed"] { "closed" }
                }
                @if let Some(m) = error_for(errors, "kind") { p.field-error { (m) } }
            }
            @let pos = row.and_then(|r| r.position).map(|p| p.to_string()).unwrap_or_default();
            (field_with_id(&format!("f-{key}-position"), "Position", "position", "number", &v("position", &pos), errors))
        }
    }
}

fn list_section(ctx: &Ctx, part: Part, slug: &str, title: &str) -> Markup {
    let base = format!(
        "/dashboard/apps/{}/ideas/boards/{}/{slug}",
        ctx.app.id, ctx.board.board.id
    );
    let new_key = format!("new-{slug}");
    let list = rows(ctx.board, part);
    html! {
        section.card #(slug) aria-labelledby=(format!("{slug}-title")) {
            h2 #(format!("{slug}-title")) { (title) }
            @if list.is_empty() { p.muted { "None yet." } }
            ul.settings-list {
                @for r in &list {
                    @let key = format!("{slug}-{}", r.id);
                    li aria-label=(format!("{} {}", part.item(), r.name)) {
                        @if let Some(c) = r.color.filter(|c| !c.is_empty()) { (dot(c)) }
                        form.settings-row method="post" action=(format!("{base}/{}", r.id)) novalidate {
                            (csrf_field(&ctx.viewer.session.csrf))
                            (form_errors(Failed::errors(&ctx.failed, &key), &["name", "color", "kind", "position"]))
                            (item_inputs(ctx, part, &key, Some(r)))
                            button.button type="submit" { "Save" span.sr-only { " " (r.name) } }
                        }
                        @if !r.built_in {
                            form method="post" action=(format!("{base}/{}/delete", r.id)) {
                                (csrf_field(&ctx.viewer.session.csrf))
                                button.button.danger-button type="submit" { "Delete" span.sr-only { " " (r.name) } }
                            }
                        } @else {
                            span.badge title="Built in: it can be renamed, not deleted" { "built in" }
                        }
                    }
                }
            }
            h3 { "Add a " (part.item()) }
            form.settings-row method="post" action=(base) novalidate {
                (csrf_field(&ctx.viewer.session.csrf))
                (form_errors(Failed::errors(&ctx.failed, &new_key), &["name", "color", "kind", "position"]))
                (item_inputs(ctx, part, &new_key, None))
                button.button.primary type="submit" { "Add " (part.item()) }
            }
        }
    }
}

fn boards_section(ctx: &Ctx) -> Markup {
    let base = format!("/dashboard/apps/{}/ideas/boards", ctx.app.id);
    let new_errors = Failed::errors(&ctx.failed, "new-board");
    html! {
        section.card #boards aria-labelledby="boards-title" {
            h2 #boards-title { "Boards" }
            ul.settings-list {
                @for b in ctx.all {
                    @let key = format!("board-{}", b.board.id);
                    li aria-label=(format!("board {}", b.board.name)) {
                        form.settings-row method="post" action=(format!("{base}/{}", b.board.id)) novalidate {
                            (csrf_field(&ctx.viewer.session.csrf))
                            (field_with_id(&format!("f-{key}-name"), html! { "Name" span.sr-only { " of board " (b.board.name) } }, "name", "text",
                                &Failed::value(&ctx.failed, &key, "name", &b.board.name), Failed::errors(&ctx.failed, &key)))
                            button.button type="submit" { "Rename" span.sr-only { " " (b.board.name) } }
                        }
                        @if b.board.id == ctx.board.board.id { span.badge { "shown below" } }
                        @else { a href=(settings_url(&ctx.app.id, &b.board.id)) { "Settings" span.sr-only { " of " (b.board.name) } } }
                        " " a href=(board_url(&ctx.app.id, &b.board.id)) { "Board" span.sr-only { " " (b.board.name) } }
                    }
                }
            }
            h3 { "Add a board" }
            form.settings-row method="post" action=(base) novalidate {
                (csrf_field(&ctx.viewer.session.csrf))
                (form_errors(new_errors, &["name"]))
                (field_with_id("f-new-board-name", "New board name", "name", "text", &Failed::value(&ctx.failed, "new-board", "name", ""), new_errors))
                button.button.primary type="submit" { "Create board" }
            }
        }
    }
}

fn page(ctx: &Ctx) -> Markup {
    let content = html! {
        (boards_section(ctx))
        p.hint { "Statuses, topics and tags of " strong { (ctx.board.board.name) } "." }
        @for (part, slug, title) in PARTS { (list_section(ctx, part, slug, title)) }
    };
    let back = html! { a.button href=(board_url(&ctx.app.id, &ctx.board.board.id)) { "← Board" } };
    let shell = Shell {
        viewer: ctx.viewer,
        section: Section::Ideas,
        title: "Ideas settings",
        app: Some(ctx.app),
    };
    shell.render(back, content)
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    app: &App,
    board: Option<String>,
    failed: Option<Failed<'_>>,
) -> Result<Markup, PageError> {
    let id = app.id.clone();
    let (all, board) = state
        .store
        .run(move |db| {
            let Some(board) = boards::get(db, &id, board.as_deref())? else {
                return Ok(None);
            };
            Ok(Some((boards::all(db, &id)?, board)))
        })
        .await?
        .ok_or_else(|| PageError::not_found("board"))?;
    let ctx = Ctx {
        viewer,
        app,
        all: &all,
        board: &board,
        failed,
    };
    Ok(page(&ctx))
}

/// `GET /dashboard/apps/{id}/ideas/settings[?board=]`: the default board unless one is named.
pub async fn settings(
    AppPage(state, viewer, app): AppPage,
    query: web::Query<SettingsQuery>,
) -> Result<HttpResponse, PageError> {
    let page = render(&state, &viewer, &app, query.into_inner().board, None).await?;
    Ok(layout::ok(page))
}

/// The admin API's body of an item form: only the fields the form holds; an empty tag colour
/// clears it, an empty position keeps it.
fn item_body(form: &Form, part: Option<Part>) -> Result<Map<String, Value>, Vec<FieldError>> {
    let mut body = Map::new();
    let has = |name: &str| !form.all(name).is_empty();
    body.insert("name".into(), json!(form.get("name")));
    if has("color") && matches!(part, Some(Part::Statuses | Part::Tags)) {
        let c = form.get("color").trim();
        let v = if c.is_empty() && part == Some(Part::Tags) {
            Value::Null
        } else {
            json!(c)
        };
        body.insert("color".into(), v);
    }
    if has("kind") && part == Some(Part::Statuses) {
        body.insert("kind".into(), json!(form.get("kind")));
    }
    let pos = form.get("position").trim();
    if !pos.is_empty() && part == Some(Part::Statuses) {
        match pos.parse::<u64>() {
            Ok(n) => body.insert("position".into(), json!(n)),
            Err(_) => return Err(vec![FieldError::new("position", "must be a whole number")]),
        };
    }
    Ok(body)
}

/// The outcome of a board write: back to the settings, or the page again with its errors.
async fn answer(
    (state, viewer, app, form): (&AppState, &Viewer, &App, &Form),
    (board, anchor): (Option<String>, &str),
    key: String,
    result: Result<String, BoardError>,
) -> Result<HttpResponse, PageError> {
    let errors = match result {
        Ok(board) => {
            let to = format!("{}#{anchor}", settings_url(&app.id, &board));
            return Ok(layout::see_other(&to));
        }
        Err(BoardError::Invalid(d)) => d,
        Err(BoardError::Conflict(m)) => vec![FieldError::new("name", m)],
        Err(BoardError::PlanLimit { limit, .. }) => vec![FieldError::new(
            "name",
            format!("the app's plan allows {limit} boards"),
        )],
        Err(other) => return Err(PageError::Api(ApiError::from(other))),
    };
    let failed = Failed { key, form, errors };
    let page = render(state, viewer, app, board, Some(failed)).await?;
    Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
}

/// `POST /dashboard/apps/{id}/ideas/boards`: `name`, a new board (the plan's board limit).
pub async fn create_board(
    AppPosted(state, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    let limit = state.settings.plan(app.plan).limit(Quota::Boards);
    let result = match item_body(&form, None).and_then(|b| ItemPatch::parse(&b, None, true)) {
        Err(d) => Err(BoardError::Invalid(d)),
        Ok(p) => {
            let (a, now) = (app.id.clone(), state.now());
            state
                .store
                .run(move |db| Ok(boards::create(db, &a, &p, limit, now)))
                .await?
                .map(|b| b.board.id)
        }
    };
    let page = (&**state, &viewer, &app, &form);
    answer(page, (None, "boards"), "new-board".into(), result).await
}

/// Runs one `Change` on board `board` of the app; answers the board's id.
async fn apply(
    state: &AppState,
    app: &App,
    board: &str,
    change: Result<Change, Vec<FieldError>>,
) -> Result<Result<String, BoardError>, PageError> {
    let change = match change {
        Ok(c) => c,
        Err(d) => return Ok(Err(BoardError::Invalid(d))),
    };
    let (a, b, now) = (app.id.clone(), board.to_owned(), state.now());
    let out = state
        .store
        .run(move |db| Ok(boards::change(db, &a, &b, &change, now)))
        .await?;
    Ok(out.map(|(record, _)| record.board.id))
}

/// `POST /dashboard/apps/{id}/ideas/boards/{board}`: `name`, the board's new name.
pub async fn rename_board(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, board) = path.into_inner();
    let change = item_body(&form, None)
        .and_then(|b| ItemPatch::parse(&b, None, false))
        .map(Change::Board);
    let result = apply(&state, &app, &board, change).await?;
    let key = format!("board-{board}");
    let page = (&**state, &viewer, &app, &form);
    answer(page, (Some(board), "boards"), key, result).await
}

/// `POST /dashboard/apps/{id}/ideas/boards/{board}/{part}`: adds a status, topic or tag.
pub async fn add_item(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, board, slug) = path.into_inner();
    let part = part_of(&slug)?;
    let change = item_body(&form, Some(part))
        .and_then(|b| ItemPatch::parse(&b, Some(part), true))
        .map(|p| Change::Add(part, p));
    let result = apply(&state, &app, &board, change).await?;
    let key = format!("new-{slug}");
    let page = (&**state, &viewer, &app, &form);
    answer(page, (Some(board), &slug), key, result).await
}

/// `POST /dashboard/apps/{id}/ideas/boards/{board}/{part}/{item}` changes an item (the
/// posted fields); `.../{item}/delete` (`delete`) removes it, refused (next to the item) while
/// an idea uses it, or for a built-in status.
pub async fn change_item(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String, String, String)>,
    delete: bool,
) -> Result<HttpResponse, PageError> {
    let (_, board, slug, item) = path.into_inner();
    let part = part_of(&slug)?;
    let change = if delete {
        Ok(Change::Remove(part, item.clone()))
    } else {
        item_body(&form, Some(part))
            .and_then(|b| ItemPatch::parse(&b, Some(part), false))
            .map(|p| Change::Patch(part, item.clone(), p))
    };
    let result = apply(&state, &app, &board, change).await?;
    let key = format!("{slug}-{item}");
    let page = (&**state, &viewer, &app, &form);
    answer(page, (Some(board), &slug), key, result).await
}
