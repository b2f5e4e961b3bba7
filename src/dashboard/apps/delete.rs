//! An app's deletion from the Apps page: the form in the app's card (`list::deletion`: owners
//! only, type the app's name to confirm, CSRF-checked like every form) posts here, which starts
//! the same job as `DELETE /admin/v1/apps/{appId}` (`deletion::start`).

use actix_web::{web, HttpResponse};
use maud::html;

use super::list::{render, require_owner};
use crate::dashboard::error::PageError;
use crate::dashboard::layout;
use crate::dashboard::session::AppPosted;
use crate::jobs::Jobs;
use crate::tenants::Tenants;

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
    let by = viewer.actor();
    let job = crate::deletion::start(&jobs, &state.store, &tenants.access, (&app.id, &by))
        .await
        .map_err(|e| match e {
            crate::deletion::StartError::NoApp => PageError::not_found("app"),
            crate::deletion::StartError::Store(e) => e.into(),
        })?;
    tracing::info!(app_id = %app.id, job = %job.id, user_id = %viewer.user.id, "app deletion started from the dashboard");
    Ok(layout::see_other("/dashboard/apps"))
}
