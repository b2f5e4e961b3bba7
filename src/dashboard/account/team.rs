//! The Team page (owners only): the accounts, and a form that creates a member or owner with
//! a first password.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use crate::accounts::model::{NewUser, Role};
use crate::accounts::store::{self, AccountError};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field, form_errors, when, Section, Shell};
use crate::dashboard::session::{Form, Posted, Viewer};
use crate::state::AppState;
use crate::validation::FieldError;

fn require_owner(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_team() {
        Ok(())
    } else {
        Err(PageError::forbidden("only owners manage the team"))
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
                thead { tr { th scope="col" { "Name" } th scope="col" { "E-mail" } th scope="col" { "Role" } th scope="col" { "Since" } } }
                tbody {
                    @for u in &users {
                        tr { td { (u.name) } td { (u.email) } td { span.badge { (u.role.name()) } } td { (when(u.created_at)) } }
                    }
                }
            }
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Team,
        title: "Team",
        app: None,
    };
    Ok(shell.render(html! {}, content))
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
        Err(AccountError::AlreadySetUp) => {
            return Err(PageError::internal("setup flag on a member"))
        }
        Err(AccountError::Store(e)) => return Err(e.into()),
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
