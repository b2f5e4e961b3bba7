//! The signed-in member's own account (reached from their name in the sidebar): change the
//! password, which needs the current one and ends every other session of the account (this
//! browser stays signed in).

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use crate::accounts::model::{self, check_password};
use crate::accounts::store;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field, form_errors, Section, Shell};
use crate::dashboard::session::{Posted, Viewer};
use crate::state::AppState;
use crate::validation::FieldError;

fn page(viewer: &Viewer, notice: Markup, errors: &[FieldError]) -> Markup {
    let content = html! {
        (notice)
        section.card aria-labelledby="password" {
            h2 #password { "Change your password" }
            p.hint { "Signed in as " strong { (viewer.user.email) } ". Changing the password signs your other browsers out." }
            (form_errors(errors, &["current", "password", "confirm"]))
            form method="post" action="/dashboard/account/password" novalidate {
                (csrf_field(&viewer.session.csrf))
                (field("Current password", "current", "password", "", errors, html! {}))
                (field("New password", "password", "password", "", errors, html! {}))
                (field("New password again", "confirm", "password", "", errors, html! {}))
                button.button.primary type="submit" { "Change password" }
            }
        }
    };
    Shell::plain(viewer, Section::Account, "Your account", content)
}

/// `GET /dashboard/account`.
pub async fn show(viewer: Viewer) -> Result<HttpResponse, PageError> {
    Ok(layout::ok(page(&viewer, html! {}, &[])))
}

/// `POST /dashboard/account/password`: `current`, `password`, `confirm`.
pub async fn change(Posted(state, viewer, form): Posted) -> Result<HttpResponse, PageError> {
    let (current, new) = (
        form.get("current").to_owned(),
        form.get("password").to_owned(),
    );
    let mut errors = Vec::new();
    if let Err(m) = check_password(&new) {
        errors.push(FieldError::new("password", m));
    } else if new != form.get("confirm") {
        errors.push(FieldError::new(
            "confirm",
            "does not match the new password",
        ));
    }
    let hash = viewer.user.password_hash.clone();
    let checked = web::block(move || {
        if !model::verify_password(&current, &hash) {
            return Ok(None);
        }
        model::hash_password(&new).map(Some)
    });
    let hashed = match checked.await?.map_err(PageError::internal)? {
        Some(h) if errors.is_empty() => h,
        Some(_) => return bad(&viewer, &errors),
        None => {
            errors.insert(0, FieldError::new("current", "is not your password"));
            return bad(&viewer, &errors);
        }
    };
    changed(&state, &viewer, hashed).await
}

/// Stores the new hash and ends the account's other sessions.
async fn changed(
    state: &AppState,
    viewer: &Viewer,
    hash: String,
) -> Result<HttpResponse, PageError> {
    let (id, keep) = (viewer.user.id.clone(), viewer.session_key.clone());
    let ended = state
        .store
        .run(move |db| {
            Ok(store::set_password(db, &id, &hash)
                .map(|()| store::end_sessions(db, &id, Some(&keep))))
        })
        .await???;
    tracing::info!(user_id = %viewer.user.id, ended, "password changed");
    let notice = html! {
        div.notice.ok role="status" { p { "Your password was changed; your other sessions (" (ended) ") were ended." } }
    };
    Ok(layout::ok(page(viewer, notice, &[])))
}

fn bad(viewer: &Viewer, errors: &[FieldError]) -> Result<HttpResponse, PageError> {
    let page = page(viewer, html! {}, errors);
    Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
}
