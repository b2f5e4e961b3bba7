//! The Surveys pages of an app: the list by status (tabs), and a survey's page: its legal
//! moves as buttons (`SurveyStatus::next`, posted with CSRF to `surveys::store::transition`,
//! so the plan's `active_surveys` holds here as on the API), Edit until it is closed
//! (`form.rs`), its score, the score over time and each question's distribution as SVG
//! (`surveys::model::summarize`, `results.rs`), the responses (filtered, paged) and
//! their CSV (`surveys::model::csv_download`, the API export, with the
//! table's filters, for a signed-in member).

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde::Deserialize;

use super::results::{self, Filters, ResultsQuery};
use crate::api::ApiError;
use crate::config::Quota;

use crate::dashboard::charts;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, thousands, when, Section, Shell};
use crate::dashboard::session::{self, AppPage, AppPosted, Viewer};
use crate::state::AppState;
use crate::surveys::model::{self, QuestionSummary, Summary, Survey, SurveyResponse, SurveyStatus};
use crate::surveys::store;
use crate::tenants::App;
use crate::validation::FieldError;

/// Responses per page of the responses table.
const PAGE: usize = 25;

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
}

fn badge(s: SurveyStatus) -> Markup {
    html! { span class=(format!("badge status-{}", s.name())) { (s.name()) } }
}

fn tabs(app: &App, all: &[Survey], current: Option<SurveyStatus>) -> Markup {
    let count = |s: Option<SurveyStatus>| {
        all.iter()
            .filter(|x| s.is_none_or(|s| x.status == s))
            .count()
    };
    let base = format!("/dashboard/apps/{}/surveys", app.id);
    let tab = |s: Option<SurveyStatus>| {
        let (href, label) = match s {
            Some(s) => (format!("{base}?status={}", s.name()), s.name()),
            None => (base.clone(), "all"),
        };
        html! {
            a.tab href=(href) aria-current=[(s == current).then_some("page")] {
                (label) " " span.count { (count(s)) }
            }
        }
    };
    html! {
        nav.tabs aria-label="Status" {
            (tab(None))
            @for &s in SurveyStatus::ALL { (tab(Some(s))) }
        }
    }
}

/// `GET /dashboard/apps/{id}/surveys[?status=]`.
pub async fn list(
    AppPage(state, viewer, app): AppPage,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, PageError> {
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(SurveyStatus::parse(s).ok_or_else(|| {
            PageError::bad_request("status must be draft, active, paused or closed")
        })?),
    };
    let id = app.id.clone();
    let mut all = state.store.run(move |db| store::all(db, &id)).await?;
    all.sort_by(|a, b| (b.updated_at, &b.id).cmp(&(a.updated_at, &a.id)));
    let shown: Vec<&Survey> = all
        .iter()
        .filter(|s| status.is_none_or(|st| s.status == st))
        .collect();
    let content = html! {
        (tabs(&app, &all, status))
        @if shown.is_empty() {
            div.card.empty { p { "No surveys here yet." } }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th scope="col" { "Title" } th scope="col" { "Type" } th scope="col" { "Status" }
                    th.num scope="col" { "Responses" } th scope="col" { "Updated" }
                } }
                tbody { @for s in &shown { tr {
                    td { a href=(format!("/dashboard/apps/{}/surveys/{}", app.id, s.id)) { (s.title) } }
                    td { (s.kind.name()) } td { (badge(s.status)) }
                    td.num { (thousands(s.response_count)) } td { (when(s.updated_at)) }
                } } }
            } }
        }
    };
    let shell = Shell {
        viewer: &viewer,
        section: Section::Surveys,
        title: "Surveys",
        app: Some(&app),
    };
    let actions = html! {
        a.button.primary href=(format!("/dashboard/apps/{}/surveys/new", app.id)) { "New survey" }
    };
    Ok(layout::ok(shell.render(actions, content)))
}

/// The survey of the path with its responses (404 when the app has no such survey).
async fn load(
    state: &AppState,
    app: &str,
    id: &str,
) -> Result<(Survey, Vec<SurveyResponse>), PageError> {
    let (app, id) = (app.to_owned(), id.to_owned());
    state
        .store
        .run(move |db| match store::get(db, &app, &id)? {
            Some(s) => store::responses(db, &app, &id).map(|r| Some((s, r))),
            None => Ok(None),
        })
        .await?
        .ok_or_else(|| PageError::not_found("survey"))
}

/// The legal moves of the survey, one form and button each.
fn moves(viewer: &Viewer, app: &App, s: &Survey) -> Markup {
    let verb = |to: SurveyStatus| match (s.status, to) {
        (SurveyStatus::Paused, SurveyStatus::Active) => "Resume",
        (_, SurveyStatus::Active) => "Activate",
        (_, SurveyStatus::Paused) => "Pause",
        (_, SurveyStatus::Closed) => "Close",
        (_, SurveyStatus::Draft) => "Back to draft",
    };
    html! {
        @if s.status != SurveyStatus::Closed {
            a.button href=(format!("/dashboard/apps/{}/surveys/{}/edit", app.id, s.id)) { "Edit" }
        }
        @for to in s.status.next() {
            form method="post" action=(format!("/dashboard/apps/{}/surveys/{}/transition", app.id, s.id)) {
                (csrf_field(&viewer.session.csrf))
                input type="hidden" name="status" value=(to.name());
                button.button.primary[*to == SurveyStatus::Active]
                    .danger-button[*to == SurveyStatus::Closed] type="submit" { (verb(*to)) }
            }
        }
    }
}

/// One question's results: its distribution (rating, scale) or options (choices) as bars.
fn question(s: &Survey, q: &QuestionSummary) -> Markup {
    let Some(def) = s.questions.iter().find(|x| x.id == q.question_id) else {
        return html! {};
    };
    let (labels, values): (Vec<String>, Vec<u64>) = match (&q.distribution, &q.options) {
        (Some(d), _) => {
            // The map's keys are strings ("10" sorts before "2"): in the range's order instead.
            let mut d: Vec<(&String, &u64)> = d.iter().collect();
            d.sort_by_key(|(k, _)| k.parse::<i64>().unwrap_or(i64::MAX));
            d.into_iter().map(|(k, v)| (k.clone(), *v)).unzip()
        }
        (None, Some(o)) => o.iter().map(|o| (o.label.clone(), o.count)).unzip(),
        _ => (Vec::new(), Vec::new()),
    };
    let summary = format!(
        "{}: {}",
        def.text,
        labels
            .iter()
            .zip(&values)
            .map(|(l, v)| format!("{l} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    html! {
        section.card.question {
            div.card-head {
                h3 { (def.text) }
                span.muted { (thousands(q.answered)) " answered"
                    @if let Some(Some(m)) = q.mean { " · mean " (m) } }
            }
            @if labels.is_empty() {
                p.muted { "Free text: read the answers in the responses below or the CSV." }
            } @else {
                (charts::bars(&summary, &labels, "answers", &values))
            }
        }
    }
}

fn answer_text(s: &Survey, r: &SurveyResponse) -> String {
    r.answers
        .iter()
        .map(|a| {
            let text = s
                .questions
                .iter()
                .find(|q| q.id == a.question_id)
                .map_or(a.question_id.as_str(), |q| &q.text);
            let v = match &a.value {
                serde_json::Value::String(v) => v.clone(),
                v => v.to_string(),
            };
            format!("{text}: {v}")
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The table's filters and page: what its links keep.
struct Shown<'a> {
    query: &'a ResultsQuery,
    errors: &'a [FieldError],
    page: usize,
}

fn responses_table(app: &App, s: &Survey, responses: &[&SurveyResponse], shown: &Shown) -> Markup {
    let page = shown.page;
    let pages = responses.len().div_ceil(PAGE).max(1);
    let base = format!("/dashboard/apps/{}/surveys/{}", app.id, s.id);
    let filters = results::query_string(shown.query);
    let and = if filters.is_empty() {
        String::new()
    } else {
        format!("&{filters}")
    };
    let csv = if filters.is_empty() {
        format!("{base}/responses.csv")
    } else {
        format!("{base}/responses.csv?{filters}")
    };
    html! {
        section.card aria-labelledby="responses" {
            div.card-head {
                h2 #responses { "Responses" }
                a.button href=(csv) download { "Export CSV" }
            }
            (results::filters_form(&base, s, shown.query, shown.errors))
            @if responses.is_empty() {
                p.muted { @if filters.is_empty() { "No responses yet." } @else { "No responses match these filters." } }
            } @else {
                div.table-wrap { table {
                    thead { tr { th scope="col" { "When" } th scope="col" { "Visitor" } th scope="col" { "Done" } th.num scope="col" { "Score" } th scope="col" { "Answers" } } }
                    tbody { @for r in responses.iter().skip(page * PAGE).take(PAGE) { tr {
                        td { (when(r.created_at)) }
                        td.mono { (r.user_id.as_deref().unwrap_or(&r.anonymous_id)) }
                        td { @if r.completed { "yes" } @else { "partial" } }
                        td.num { @if let Some(v) = r.score { (v) } @else { "–" } }
                        td { (answer_text(s, r)) }
                    } } }
                } }
                nav.pager aria-label="Responses pages" {
                    @if page > 0 { a href=(format!("{base}?page={}{and}", page - 1)) { "← Newer" } } @else { span {} }
                    span.muted { "Page " (page + 1) " of " (pages) " · " (thousands(responses.len() as u64)) " responses" }
                    @if page + 1 < pages { a href=(format!("{base}?page={}{and}", page + 1)) { "Older →" } } @else { span {} }
                }
            }
        }
    }
}

fn score_tiles(sum: &Summary) -> Markup {
    html! {
        div.stats {
            @if let Some(score) = &sum.score {
                div.stat #survey-score {
                    strong { @match score.value { Some(v) => (format!("{v:.1}")), None => "–" } }
                    span { (score.kind.name().to_uppercase()) " score" }
                }
            }
            div.stat { strong { (thousands(sum.response_count)) } span { "Responses" } }
            div.stat { strong { (thousands(sum.completed_count)) } span { "Completed" } }
        }
    }
}

/// `GET /dashboard/apps/{id}/surveys/{survey}[?page=&done=&min=&max=&from=&to=]`: a bad
/// filter is a 400 with its error next to its input.
pub async fn detail(
    AppPage(state, viewer, app): AppPage,
    path: web::Path<(String, String)>,
    query: web::Query<ResultsQuery>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let (s, responses) = load(&state, &app.id, &id).await?;
    let (page, valid) = results_page(&viewer, &app, &s, responses, &query);
    if valid {
        Ok(layout::ok(page))
    } else {
        Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
    }
}

/// A survey's page from its responses: score, score over time, each question, and the
/// filtered page of responses; `false` when the filters had errors (shown next to them).
pub fn results_page(
    viewer: &Viewer,
    app: &App,
    s: &Survey,
    mut responses: Vec<SurveyResponse>,
    query: &ResultsQuery,
) -> (Markup, bool) {
    responses.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let sum = model::summarize(s, &responses);
    let (filters, errors) = match Filters::parse(query) {
        Ok(f) => (f, Vec::new()),
        Err(e) => (Filters::default(), e),
    };
    let listed: Vec<&SurveyResponse> = responses.iter().filter(|r| filters.matches(r)).collect();
    let shown = Shown {
        query,
        errors: &errors,
        page: query
            .page
            .unwrap_or(0)
            .min(listed.len().div_ceil(PAGE).saturating_sub(1)),
    };
    let content = html! {
        div.survey-head {
            (badge(s.status)) span.muted { (s.kind.name()) " · " (s.targeting.percentage) "% of visitors" (rules_note(s)) " · updated " (when(s.updated_at)) }
            div.actions { (moves(viewer, app, s)) }
        }
        (score_tiles(&sum))
        (results::score_chart(s, &responses))
        @for q in &sum.questions { (question(s, q)) }
        (responses_table(app, s, &listed, &shown))
    };
    let shell = Shell {
        viewer,
        section: Section::Surveys,
        title: &s.title,
        app: Some(app),
    };
    (shell.render(html! {}, content), errors.is_empty())
}

/// How many targeting rules narrow the survey, for its header.
fn rules_note(s: &Survey) -> String {
    let t = &s.targeting;
    let plural = |n: usize, what: &str| format!("{n} {what} rule{}", if n == 1 { "" } else { "s" });
    match (t.attributes.len(), t.urls.len()) {
        (0, 0) => String::new(),
        (a, 0) => format!(" · {}", plural(a, "attribute")),
        (0, u) => format!(" · {}", plural(u, "URL")),
        (a, u) => format!(" · {}, {}", plural(a, "attribute"), plural(u, "URL")),
    }
}

/// `POST /dashboard/apps/{id}/surveys/{survey}/transition`: `status`, one of the legal moves.
pub async fn transition(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let to = SurveyStatus::parse(form.get("status"))
        .ok_or_else(|| PageError::bad_request("status must be draft, active, paused or closed"))?;
    let limit = state.settings.plan(app.plan).limit(Quota::ActiveSurveys);
    let move_to = move |db: &_, a: &_, s: &_, now| store::transition(db, a, s, to, limit, now);
    session::write_to(&state, &app, &id, move_to)
        .await?
        .map_err(ApiError::from)?;
    tracing::info!(app_id = %app.id, survey_id = %id, to = to.name(), user_id = %viewer.user.id, "survey moved from the dashboard");
    Ok(layout::see_other(&format!(
        "/dashboard/apps/{}/surveys/{id}",
        app.id
    )))
}

/// `GET /dashboard/apps/{id}/surveys/{survey}/responses.csv`: the API export's CSV, streamed,
/// of the responses the table's filters (same query) show.
pub async fn export(
    state: web::Data<AppState>,
    _viewer: Viewer,
    path: web::Path<(String, String)>,
    query: web::Query<ResultsQuery>,
) -> Result<HttpResponse, PageError> {
    let filters = Filters::parse(&query).map_err(|e| {
        PageError::bad_request(
            e.iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    let (app_id, id) = path.into_inner();
    let (survey, mut responses) = load(&state, &app_id, &id).await?;
    responses.retain(|r| filters.matches(r));
    let mut page = model::csv_download(survey, responses);
    page.headers_mut().insert(
        actix_web::http::header::CACHE_CONTROL,
        actix_web::http::header::HeaderValue::from_static("no-store"),
    );
    Ok(page)
}
