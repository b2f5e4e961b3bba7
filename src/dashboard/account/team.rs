//! The Team page (owners only): the accounts, a form that creates a member or owner with a
//! first password, and per account: end its sessions (signs it out everywhere) or remove it
//! (its sessions end with it; the last owner cannot be removed).

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use crate::accounts::model::{NewUser, Role, User};
use crate::accounts::store::{self, AccountError};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field, form_errors, when, Section, Shell};
use crate::dashboard::session::{Form, Posted, Viewer};
use crate::state::AppState;
use crate::validation::FieldError;

/// The account in the path, for an owner (403 for anyone else).
fn owners_pick(viewer: &Viewer, path: web::Path<String>) -> Result<String, PageError> {
    require_owner(viewer)?;
    Ok(path.into_inner())
}

fn require_owner(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_team() {
        Ok(())
    } else {
        Err(PageError::forbidden("only owners manage the team"))
    }
}

/// An account's buttons: end its sessions, remove it (each a form with the CSRF token).
fn member_actions(viewer: &Viewer, u: &User) -> Markup {
    html! {
        form.inline method="post" action=(format!("/dashboard/team/{}/sign-out", u.id)) {
            (csrf_field(&viewer.session.csrf))
            button.button type="submit" aria-label=(format!("End the sessions of {}", u.name)) { "End sessions" }
        }
        form.inline method="post" action=(format!("/dashboard/team/{}/remove", u.id)) {
            (csrf_field(&viewer.session.csrf))
            button.button.danger-button type="submit" aria-label=(format!("Remove {}", u.name)) { "Remove" }
        }
    }
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    notice: Markup,
    draft: (&str, &str, &[FieldError]),
) -> Result<Markup, PageError> {
    let users = state.store.run(store::list_users).await?;
    let (name, email, errors) = draft;
    let content = html! {
        (notice)
        section.card aria-labelledby="invite" {
            h2 #invite { "Add a team member" }
            p.hint { "Members see apps and work with contacts; owners also manage keys, plans and the team." }
            (form_errors(errors, &["name", "email", "password", "role"]))
            form method="post" action="/dashboard/team" novalidate {
                (csrf_field(&viewer.session.csrf))
                div.row {
                    (field("Name", "name", "text", name, errors, html! {}))
                    (field("E-mail", "email", "email", email, errors, html! {}))
                }
                div.row {
                    (field("First password", "password", "password", "", errors, html! {}))
                    div.field {
                        label for="f-role" { "Role" }
                        select #f-role name="role" {
                            option value="member" selected { "member" }
                            option value="owner" { "owner" }
                        }
                    }
                }
                p { button.button.primary type="submit" { "Add to the team" } }
            }
        }
        div.table-wrap {
            table aria-label="Team accounts" {
                thead { tr { th scope="col" { "Name" } th scope="col" { "E-mail" } th scope="col" { "Role" } th scope="col" { "Since" } th scope="col" { "Actions" } } }
                tbody {
                    @for u in &users {
                        tr {
                            td { (u.name) } td { (u.email) } td { span.badge { (u.role.name()) } } td { (when(u.created_at)) }
                            td.actions { (member_actions(viewer, u)) }
                        }
                    }
                }
            }
        }
    };
    Ok(Shell::plain(viewer, Section::Team, "Team", content))
}

/// `GET /dashboard/team`.
pub async fn list(state: web::Data<AppState>, viewer: Viewer) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    Ok(layout::ok(
        render(&state, &viewer, html! {}, ("", "", &[])).await?,
    ))
}

/// `POST /dashboard/team`: creates an account.
pub async fn create(Posted(state, viewer, form): Posted) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let role = Role::parse(form.get("role"));
    let parsed = NewUser::parse(
        form.get("email"),
        form.get("name"),
        form.get("password"),
        role.unwrap_or(Role::Member),
    );
    let mut errors = parsed.as_ref().err().cloned().unwrap_or_default();
    if role.is_none() {
        errors.push(FieldError::new("role", "must be member or owner"));
    }
    let new = match parsed {
        Ok(n) if errors.is_empty() => n,
        _ => return bad(&state, &viewer, &form, errors).await,
    };
    let now = state.now();
    let user = web::block(move || new.into_user(now))
        .await?
        .map_err(PageError::internal)?;
    let u = user.clone();
    match state
        .store
        .run(move |db| Ok(store::create_user(db, &u, false)))
        .await?
    {
        Ok(()) => {}
        Err(AccountError::EmailTaken) => {
            let errors = vec![FieldError::new("email", "already has an account")];
            return bad(&state, &viewer, &form, errors).await;
        }
        Err(other) => return Err(other.into()),
    }
    tracing::info!(user_id = %user.id, by = %viewer.user.id, role = user.role.name(), "account created");
    let notice = html! {
        div.notice.ok role="status" { p { (user.name) " can now sign in as " strong { (user.email) } "." } }
    };
    Ok(layout::ok(
        render(&state, &viewer, notice, ("", "", &[])).await?,
    ))
}

async fn bad(
    state: &AppState,
    viewer: &Viewer,
    form: &Form,
    errors: Vec<FieldError>,
) -> Result<HttpResponse, PageError> {
    let page = render(
        state,
        viewer,
        html! {},
        (form.get("name"), form.get("email"), &errors),
    )
    .await?;
    Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
}

/// `POST /dashboard/team/{user}/sign-out`: ends every session of the account (its browsers are
/// signed out at their next request; an owner ending their own is signed out too).
pub async fn end_sessions(
    Posted(state, viewer, _): Posted,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = owners_pick(&viewer, path)?;
    let u = id.clone();
    let user = state.store.run(move |db| store::get_user(db, &u)).await?;
    let user = user.ok_or_else(|| PageError::not_found("account"))?;
    let ended = state
        .store
        .run(move |db| store::end_sessions(db, &id, None))
        .await?;
    tracing::info!(user_id = %user.id, by = %viewer.user.id, ended, "sessions ended");
    let notice = html! {
        div.notice.ok role="status" { p { "Signed " (user.name) " out everywhere (" (ended) " sessions)." } }
    };
    Ok(layout::ok(
        render(&state, &viewer, notice, ("", "", &[])).await?,
    ))
}

/// `POST /dashboard/team/{user}/remove`: removes the account and ends its sessions; 409 for
/// the last owner.
pub async fn remove(
    Posted(state, viewer, _): Posted,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let id = owners_pick(&viewer, path)?;
    let user = state
        .store
        .run(move |db| Ok(store::delete_user(db, &id)))
        .await??;
    tracing::info!(user_id = %user.id, by = %viewer.user.id, "account removed");
    if user.id == viewer.user.id {
        return Ok(layout::see_other("/dashboard/sign-in"));
    }
    let notice = html! {
        div.notice.ok role="status" { p { (user.name) " (" (user.email) ") was removed." } }
    };
    Ok(layout::ok(
        render(&state, &viewer, notice, ("", "", &[])).await?,
    ))
}
