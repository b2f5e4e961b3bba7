//! The Ideas page of an app: a board's ideas in columns by status (the board's order and
//! colours; the colour is an SVG `fill`, so the CSP needs no inline style), each card with its
//! votes and a select that posts the new status (CSRF) through `ideas::store::update`, which
//! keeps the status history like the API. A card's title opens the idea (`detail.rs`);
//! the boards, statuses, topics and tags are set up on `settings.rs`. `Failed` is the
//! posted form those two pages show again with its errors.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde::Deserialize;

use crate::api::ApiError;
use crate::boards::model::BoardRecord;
use crate::boards::store as boards;

use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, thousands, Section, Shell};
use crate::dashboard::session::{self, AppPage, AppPosted, Viewer};
use crate::ideas::model::{IdeaPatch, IdeaView};
use crate::ideas::store::{self, Filter, Sort, SortField, Walk};
use crate::tenants::App;
use crate::validation::FieldError;

/// The most ideas the board shows (most voted first).
const MAX_IDEAS: usize = 1000;

#[derive(Deserialize)]
pub struct BoardQuery {
    board: Option<String>,
}

/// A posted form refused with field errors, shown again in place: `key` names which form of
/// the page it was (several forms hold the same field names).
pub struct Failed<'a> {
    pub key: String,
    pub form: &'a session::Form,
    pub errors: Vec<FieldError>,
}

impl Failed<'_> {
    /// The errors of form `key` (none when another form failed).
    pub fn errors<'b>(failed: &'b Option<Failed<'_>>, key: &str) -> &'b [FieldError] {
        match failed {
            Some(f) if f.key == key => &f.errors,
            _ => &[],
        }
    }

    /// What form `key` shows in `name`: the posted value after a refusal, else `stored`.
    pub fn value(failed: &Option<Failed<'_>>, key: &str, name: &str, stored: &str) -> String {
        match failed {
            Some(f) if f.key == key && !f.form.all(name).is_empty() => f.form.get(name).to_owned(),
            _ => stored.to_owned(),
        }
    }
}

/// The board's page, or one board of it.
pub fn board_url(app: &str, board: &str) -> String {
    format!("/dashboard/apps/{app}/ideas?board={board}")
}

/// A small round swatch of a status colour (an SVG `fill`: no inline style).
pub fn dot(color: &str) -> Markup {
    html! {
        svg.dot viewBox="0 0 10 10" aria-hidden="true" focusable="false" {
            circle cx="5" cy="5" r="5" fill=(color) {}
        }
    }
}

fn card(viewer: &Viewer, app: &App, board: &BoardRecord, idea: &IdeaView) -> Markup {
    let select_id = format!("status-{}", idea.id);
    html! {
        li.idea {
            div.idea-head {
                span.votes title="Votes" { strong { (thousands(idea.vote_count)) } small { "votes" } }
                h3 { a href=(format!("/dashboard/apps/{}/ideas/{}", app.id, idea.id)) { (idea.title) } }
            }
            form.move method="post" action=(format!("/dashboard/apps/{}/ideas/{}/status", app.id, idea.id)) {
                (csrf_field(&viewer.session.csrf))
                label.sr-only for=(select_id) { "Status of " (idea.title) }
                select #(select_id) name="status" {
                    @for s in &board.statuses {
                        option value=(s.id) selected[s.id == idea.status.id] { (s.name) }
                    }
                }
                button.button type="submit" { "Move" span.sr-only { " " (idea.title) } }
            }
        }
    }
}

fn columns(viewer: &Viewer, app: &App, board: &BoardRecord, ideas: &[IdeaView]) -> Markup {
    let mut statuses: Vec<_> = board.statuses.iter().collect();
    statuses.sort_by_key(|s| s.position);
    html! {
        div.board {
            @for s in statuses {
                @let mine: Vec<&IdeaView> = ideas.iter().filter(|i| i.status.id == s.id).collect();
                section.column aria-labelledby=(format!("col-{}", s.id)) {
                    svg.column-bar viewBox="0 0 100 4" preserveAspectRatio="none" aria-hidden="true" focusable="false" {
                        rect x="0" y="0" width="100" height="4" fill=(s.color.as_str()) {}
                    }
                    h2 #(format!("col-{}", s.id)) { (dot(s.color.as_str())) (s.name) span.count { (mine.len()) } }
                    @if mine.is_empty() {
                        p.muted.none { "No ideas" }
                    } @else {
                        ul.ideas { @for i in mine { (card(viewer, app, board, i)) } }
                    }
                }
            }
        }
    }
}

/// `GET /dashboard/apps/{id}/ideas[?board=]`: the default board unless one is named.
pub async fn board(
    AppPage(state, viewer, app): AppPage,
    query: web::Query<BoardQuery>,
) -> Result<HttpResponse, PageError> {
    let (id, wanted) = (app.id.clone(), query.into_inner().board);
    let (all, board, ideas) = state
        .store
        .run(move |db| {
            let Some(board) = boards::get(db, &id, wanted.as_deref())? else {
                return Ok(None);
            };
            let filter = Filter {
                board_ids: vec![board.board.id.clone()],
                ..Filter::default()
            };
            let sort = Sort {
                field: SortField::VoteCount,
                descending: true,
            };
            let walk = Walk::new(MAX_IDEAS, None).descending(sort.descending);
            let ideas = store::list(db, &id, &filter, sort.field, walk)?.items;
            Ok(Some((boards::all(db, &id)?, board, ideas)))
        })
        .await?
        .ok_or_else(|| PageError::not_found("board"))?;
    let content = html! {
        @if all.len() > 1 {
            nav.tabs aria-label="Boards" {
                @for b in &all {
                    a.tab href=(format!("/dashboard/apps/{}/ideas?board={}", app.id, b.board.id))
                        aria-current=[(b.board.id == board.board.id).then_some("page")] { (b.board.name) }
                }
            }
        }
        p.hint { (thousands(ideas.len() as u64)) " ideas on " (board.board.name) ", most voted first." }
        (columns(&viewer, &app, &board, &ideas))
    };
    let shell = Shell {
        viewer: &viewer,
        section: Section::Ideas,
        title: "Ideas",
        app: Some(&app),
    };
    let settings = format!(
        "/dashboard/apps/{}/ideas/settings?board={}",
        app.id, board.board.id
    );
    let actions = html! { a.button href=(settings) { "Board settings" } };
    Ok(layout::ok(shell.render(actions, content)))
}

/// `POST /dashboard/apps/{id}/ideas/{idea}/status`: `status`, a status id of the idea's board.
pub async fn move_idea(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let patch = IdeaPatch {
        status_id: Some(form.get("status").to_owned()),
        ..IdeaPatch::default()
    };
    let by = viewer.actor();
    let update = move |db: &_, a: &_, i: &_, now| store::update(db, a, i, &patch, (now, &by));
    let moved = session::write_to(&state, &app, &id, update)
        .await?
        .map_err(ApiError::from)?;
    tracing::info!(app_id = %app.id, idea_id = %id, status = %moved.status.name, user_id = %viewer.user.id, "idea moved from the dashboard");
    Ok(layout::see_other(&board_url(&app.id, &moved.board_id)))
}
