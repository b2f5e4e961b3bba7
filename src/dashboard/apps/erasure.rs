//! The "Erase a person" page of an app (owners only): the form (userId, anonymousIds, e-mail),
//! parsed by the API's own `Person::parse` and started by the same `privacy::job::submit`, and
//! the app's erasure jobs with their state and what each store lost. Everything shown is
//! escaped by maud; the jobs show no id of the person (they keep only hashes).

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde_json::{Map, Value};

use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field, form_errors, when, Section, Shell};
use crate::dashboard::session::{AppPage, AppPosted, Form, Viewer};
use crate::jobs::{Job, Jobs};
use crate::privacy::model::Person;
use crate::state::AppState;
use crate::storage::cursor::Walk;
use crate::tenants::{Access, App};
use crate::validation::FieldError;

/// The most jobs the page lists (the newest).
const MAX_JOBS: usize = 200;

fn require_owner(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_keys() {
        Ok(())
    } else {
        Err(PageError::forbidden("only owners erase a person"))
    }
}

/// What the form shows again after an error.
#[derive(Default)]
struct Draft<'a> {
    user_id: &'a str,
    anonymous_ids: &'a str,
    email: &'a str,
    errors: Vec<FieldError>,
}

fn job_row(j: &Job) -> Markup {
    html! {
        tr {
            td { code { (j.id) } }
            td { span.badge { (j.state.name()) } }
            td { (j.step_name) }
            td {
                @for (what, n) in &j.cursor.report {
                    span.badge { (what) ": " (n) } " "
                }
            }
            td { (when(j.created_at)) }
            td { @if let Some(e) = &j.last_error { span.muted { (e) } } }
        }
    }
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    app: &App,
    notice: Markup,
    draft: &Draft<'_>,
) -> Result<Markup, PageError> {
    let id = app.id.clone();
    let jobs = state
        .store
        .run(move |db| {
            let walk = Walk::new(MAX_JOBS, None).descending(true);
            crate::privacy::store::erasures(db, &id, walk)
        })
        .await?
        .items;
    let errors = &draft.errors;
    let content = html! {
        (notice)
        section.card aria-labelledby="erase" {
            h2 #erase { "Erase a person" }
            p.hint {
                "Removes, from this app only: the contacts with the e-mail; the profile and identity \
                 links of the userId (and the anonymousIds linked to it); their survey responses, \
                 votes and comments; and their events in the lake (each file rewritten). Their ids \
                 are refused by the collector from now on. Traffic counts stay. This cannot be undone."
            }
            (form_errors(errors, &["userId", "anonymousIds", "email"]))
            form method="post" action=(format!("/dashboard/apps/{}/erasures", app.id)) novalidate {
                (csrf_field(&viewer.session.csrf))
                (field("userId", "userId", "text", draft.user_id, errors, html! {}))
                (field("anonymousIds (comma or space separated)", "anonymousIds", "text", draft.anonymous_ids, errors, html! {}))
                (field("E-mail", "email", "email", draft.email, errors, html! {}))
                button.button.danger type="submit" { "Erase" }
            }
        }
        @if jobs.is_empty() {
            div.card.empty { p { "No erasures yet." } }
        } @else {
            table #erasures aria-label=(format!("Erasures of {}", app.name)) {
                thead { tr { th { "Job" } th { "State" } th { "Step" } th { "Removed" } th { "Asked" } th { "Last error" } } }
                tbody { @for j in &jobs { (job_row(j)) } }
            }
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Contacts,
        title: "Erase a person",
        app: Some(app),
    };
    Ok(shell.render(html! {}, content))
}

/// `GET /dashboard/apps/{id}/erasures`.
pub async fn page(AppPage(state, viewer, app): AppPage) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let page = render(&state, &viewer, &app, html! {}, &Draft::default()).await?;
    Ok(layout::ok(page))
}

/// The form as the API's body: empty fields absent, anonymousIds split on commas and spaces.
fn body_of(form: &Form) -> Map<String, Value> {
    let mut body = Map::new();
    for name in ["userId", "email"] {
        let v = form.get(name).trim();
        if !v.is_empty() {
            body.insert(name.into(), Value::from(v));
        }
    }
    let anon: Vec<Value> = form
        .get("anonymousIds")
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(Value::from)
        .collect();
    if !anon.is_empty() {
        body.insert("anonymousIds".into(), Value::Array(anon));
    }
    body
}

/// `POST /dashboard/apps/{id}/erasures`: starts the job; the page lists it.
pub async fn start(
    access: web::Data<Access>,
    jobs: web::Data<Jobs>,
    AppPosted(state, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let person = match Person::parse(&body_of(&form)) {
        Ok(p) => p,
        Err(errors) => {
            let draft = Draft {
                user_id: form.get("userId"),
                anonymous_ids: form.get("anonymousIds"),
                email: form.get("email"),
                errors,
            };
            let page = render(&state, &viewer, &app, html! {}, &draft).await?;
            return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
        }
    };
    let by = format!("user:{}", viewer.user.id);
    let job = crate::privacy::job::submit(&state, &access, &jobs, &app.id, person, by).await?;
    tracing::info!(app_id = %app.id, job = %job.id, user_id = %viewer.user.id, "erasure started from the dashboard");
    Ok(layout::see_other(&format!(
        "/dashboard/apps/{}/erasures",
        app.id
    )))
}
