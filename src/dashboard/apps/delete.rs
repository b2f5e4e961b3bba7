//! An app's deletion from the Apps page: a form in the app's card (owners only: type the app's
//! name to confirm, CSRF-checked like every form) that starts the same job as
//! `DELETE /admin/v1/apps/{appId}` (`deletion::start`), and the card of an app being deleted,
//! which shows the job's state and step until the app is gone.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::list::{render, require_owner};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field_with_id};
use crate::dashboard::session::{AppPosted, Viewer};
use crate::jobs::{Job, Jobs};
use crate::tenants::{App, Tenants};

/// The deletion part of an app's card: its progress while it is being deleted, else (for
/// owners) the form that deletes it.
pub fn section(viewer: &Viewer, app: &App, deletion: Option<&Job>) -> Markup {
    if app.deleting() {
        return html! {
            p.notice.danger role="status" {
                "Being deleted"
                @if let Some(job) = deletion {
                    ": " (job.state.name()) ", step " (job.step_name)
                    @if let Some(e) = &job.last_error { " (retrying: " (e) ")" }
                }
                ". Its keys no longer work."
            }
        };
    }
    if !viewer.user.role.manages_plans() {
        return html! {};
    }
    let id = format!("confirm-{}", app.id);
    html! {
        details.inline {
            summary { "Delete app" }
            form method="post" action=(format!("/dashboard/apps/{}/delete", app.id)) {
                (csrf_field(&viewer.session.csrf))
                p.hint { "Deletes the app, its keys, contacts, ideas, surveys, profiles, traffic and lake files. It cannot be undone." }
                (field_with_id(&id, html! { "Type " strong { (app.name) } " to confirm" }, "confirm", "text", "", &[]))
                button.button.danger-button type="submit" { "Delete app" }
            }
        }
    }
}

/// `POST /dashboard/apps/{id}/delete`: starts the deletion when the typed name matches.
pub async fn delete(
    tenants: Tenants,
    jobs: web::Data<Jobs>,
    AppPosted(state, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    if form.get("confirm").trim() != app.name {
        let notice = html! {
            section.card.notice.danger role="alert" {
                p { (app.name) " was not deleted: type its name exactly to confirm." }
            }
        };
        let page = render(&tenants, &viewer, notice, ("", &[])).await?;
        return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
    }
    let job = crate::deletion::start(&jobs, &state.store, &tenants.access, &app.id)
        .await
        .map_err(|e| match e {
            crate::deletion::StartError::NoApp => PageError::not_found("app"),
            crate::deletion::StartError::Store(e) => e.into(),
        })?;
    tracing::info!(app_id = %app.id, job = %job.id, user_id = %viewer.user.id, "app deletion started from the dashboard");
    Ok(layout::see_other("/dashboard/apps"))
}
