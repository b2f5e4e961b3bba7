//! The Keys page of an app (owners only): create an API key with permission checkboxes (the
//! secret shown once, with a copy button), edit a key's permissions, revoke it, and when each
//! key was last used.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use crate::dashboard::apps::list::{first_app, name_of};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, field, form_errors, secret_box, when, Section, Shell,
};
use crate::dashboard::session::{AppPage, AppPosted, Form, Viewer};
use crate::ids::Timestamp;
use crate::state::AppState;
use crate::tenants::{store, Access, App, KeyRecord, Permission, Tenants};
use crate::validation::FieldError;

/// The most keys the page lists.
const MAX_KEYS: usize = 500;

fn require_key_manager(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_keys() {
        Ok(())
    } else {
        Err(PageError::forbidden("only owners manage API keys"))
    }
}

/// `GET /dashboard/keys`: the keys of the first app (or the Apps page when there is none).
pub async fn first(state: web::Data<AppState>, viewer: Viewer) -> Result<HttpResponse, PageError> {
    require_key_manager(&viewer)?;
    first_app(&state, "keys").await
}

fn checkboxes(prefix: &str, checked: &[Permission]) -> Markup {
    html! {
        div.checks {
            @for p in Permission::ALL {
                @let id = format!("{prefix}-{}", p.name().replace(':', "-"));
                label for=(id) {
                    input #(id) type="checkbox" name="permissions" value=(p.name()) checked[checked.contains(p)];
                    (p.name())
                }
            }
        }
    }
}

/// A key's card; `recorded`: its last use as sled has it (the registry's memory may be newer).
fn key_card(
    viewer: &Viewer,
    app: &App,
    k: &KeyRecord,
    recorded: Option<Timestamp>,
    access: &Access,
) -> Markup {
    let last = access.registry.last_used(&k.id).max(recorded);
    html! {
        article.card.key.revoked[k.revoked_at.is_some()] aria-label=(format!("Key {}", k.name)) {
            div.key-head {
                h2 { (k.name) }
                @match k.revoked_at {
                    Some(t) => span.badge.danger { "revoked " (when(t)) },
                    None => span.badge.ok { "live" },
                }
            }
            div.key-meta {
                span { "Id " code { (k.id) } }
                span { "Created " (when(k.created_at)) }
                span { "Last used " @match last { Some(t) => (when(t)), None => "never" } }
            }
            div.perms {
                @for p in &k.permissions { span.badge { (p.name()) } }
                @if k.permissions.is_empty() { span.muted { "no permissions" } }
            }
            @if k.revoked_at.is_none() {
                details.inline {
                    summary { "Edit" }
                    form method="post" action=(format!("/dashboard/apps/{}/keys/{}", app.id, k.id)) {
                        (csrf_field(&viewer.session.csrf))
                        fieldset { legend { "Permissions of " (k.name) } (checkboxes(&format!("k{}", k.id), &k.permissions)) }
                        button.button type="submit" { "Save permissions" }
                    }
                    form method="post" action=(format!("/dashboard/apps/{}/keys/{}/revoke", app.id, k.id)) {
                        (csrf_field(&viewer.session.csrf))
                        p.hint { "A revoked key stops working on its next request." }
                        button.button.danger-button type="submit" { "Revoke " (k.name) }
                    }
                }
            }
        }
    }
}

/// What the create form shows again after an error.
#[derive(Default)]
struct Draft<'a> {
    name: &'a str,
    permissions: Vec<Permission>,
    errors: Vec<FieldError>,
}

async fn render(
    tenants: &Tenants,
    viewer: &Viewer,
    app: &App,
    notice: Markup,
    draft: &Draft<'_>,
) -> Result<Markup, PageError> {
    let (id, access) = (app.id.clone(), &tenants.access);
    let keys = tenants
        .state
        .store
        .run(move |db| {
            let keys =
                store::list_api_keys(db, &id, crate::storage::cursor::Walk::new(MAX_KEYS, None))?;
            keys.items
                .into_iter()
                .map(|k| Ok((store::last_used(db, &k.id)?, k)))
                .collect::<Result<Vec<_>, _>>()
        })
        .await?;
    let content = html! {
        (notice)
        section.card aria-labelledby="new-key" {
            h2 #new-key { "New API key" }
            (form_errors(&draft.errors, &["name", "permissions"]))
            form method="post" action=(format!("/dashboard/apps/{}/keys", app.id)) novalidate {
                (csrf_field(&viewer.session.csrf))
                (field("Name", "name", "text", draft.name, &draft.errors, html! {}))
                fieldset { legend { "Permissions" } (checkboxes("new", &draft.permissions)) }
                button.button.primary type="submit" { "Create key" }
            }
        }
        @if keys.is_empty() {
            div.card.empty { p { "No API keys yet." } }
        } @else {
            section.keys aria-label=(format!("API keys of {}", app.name)) {
                @for (used, k) in keys.iter().rev() { (key_card(viewer, app, k, *used, access)) }
            }
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Keys,
        title: "API keys",
        app: Some(app),
    };
    Ok(shell.render(html! {}, content))
}

/// `GET /dashboard/apps/{id}/keys`.
pub async fn list(
    tenants: Tenants,
    AppPage(_, viewer, app): AppPage,
) -> Result<HttpResponse, PageError> {
    require_key_manager(&viewer)?;
    let page = render(&tenants, &viewer, &app, html! {}, &Draft::default()).await?;
    Ok(layout::ok(page))
}

/// The checked permissions of a form; an unknown name is an error of `permissions`.
fn permissions(form: &Form, errors: &mut Vec<FieldError>) -> Vec<Permission> {
    let mut out = Vec::new();
    for name in form.all("permissions") {
        match Permission::parse(name) {
            Some(p) if !out.contains(&p) => out.push(p),
            Some(_) => {}
            None => errors.push(FieldError::new(
                "permissions",
                format!("unknown permission {name:?}"),
            )),
        }
    }
    out
}

/// `POST /dashboard/apps/{id}/keys`: creates a key; the page shows its secret once.
pub async fn create(
    tenants: Tenants,
    AppPosted(_, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    require_key_manager(&viewer)?;
    let mut errors = Vec::new();
    let name = name_of(&form, &mut errors);
    let perms = permissions(&form, &mut errors);
    if !errors.is_empty() {
        let draft = Draft {
            name: form.get("name"),
            permissions: perms,
            errors,
        };
        let page = render(&tenants, &viewer, &app, html! {}, &draft).await?;
        return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
    }
    let (key, secret) = tenants.create_key(&app, &name, perms).await?;
    tracing::info!(app_id = %app.id, key_id = %key.id, user_id = %viewer.user.id, "api key created from the dashboard");
    let notice = html! {
        section.card.notice.ok role="status" {
            h2 { "Key " (key.name) " created" }
            p { "Copy it now: it is shown only once. Send it as the " code { "X-API-Key" } " header." }
            (secret_box("new-api-key", "API key", &secret))
        }
    };
    let page = render(&tenants, &viewer, &app, notice, &Draft::default()).await?;
    Ok(layout::ok(page))
}

/// `POST /dashboard/apps/{id}/keys/{keyId}`: replaces the key's permissions.
pub async fn update(
    tenants: Tenants,
    AppPosted(_, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_key_manager(&viewer)?;
    let mut errors = Vec::new();
    let perms = permissions(&form, &mut errors);
    if let Some(e) = errors.first() {
        return Err(PageError::bad_request(e.message.clone()));
    }
    tenants.set_permissions(&app.id, &path.1, perms).await?;
    Ok(layout::see_other(&format!(
        "/dashboard/apps/{}/keys",
        app.id
    )))
}

/// `POST /dashboard/apps/{id}/keys/{keyId}/revoke`.
pub async fn revoke(
    tenants: Tenants,
    AppPosted(_, viewer, _, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_key_manager(&viewer)?;
    let key = tenants.revoke_key(&app.id, &path.1).await?;
    tracing::info!(key_id = %key.id, user_id = %viewer.user.id, "api key revoked from the dashboard");
    Ok(layout::see_other(&format!(
        "/dashboard/apps/{}/keys",
        app.id
    )))
}
