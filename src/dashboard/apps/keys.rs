//! The Keys page of an app (owners only): create an API key with permission checkboxes (the
//! secret shown once, with a copy button), edit a key's permissions, revoke it, and when each
//! key was last used.

use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::dashboard::apps::list::{all_apps, load_app};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, field, form_errors, secret_box, when, Section, Shell,
};
use crate::dashboard::session::{self, Form, Viewer, FORM_LIMIT};
use crate::ids::Timestamp;
use crate::state::AppState;
use crate::tenants::model::new_key;
use crate::tenants::{store, Access, App, KeyKind, KeyRecord, Permission};
use crate::validation::{check_text, FieldError};

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
    Ok(match all_apps(&state).await?.first() {
        Some(app) => layout::see_other(&format!("/dashboard/apps/{}/keys", app.id)),
        None => layout::see_other("/dashboard/apps"),
    })
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
    state: &AppState,
    access: &Access,
    viewer: &Viewer,
    app: &App,
    notice: Markup,
    draft: &Draft<'_>,
) -> Result<Markup, PageError> {
    let id = app.id.clone();
    let keys = state
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
    state: web::Data<AppState>,
    access: web::Data<Access>,
    viewer: Viewer,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    require_key_manager(&viewer)?;
    let app = load_app(&state, &path).await?;
    let page = render(&state, &access, &viewer, &app, html! {}, &Draft::default()).await?;
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
    state: web::Data<AppState>,
    access: web::Data<Access>,
    viewer: Viewer,
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, PageError> {
    let form = session::posted(&req, payload, &viewer, FORM_LIMIT).await?;
    require_key_manager(&viewer)?;
    let app = load_app(&state, &path).await?;
    let mut errors = Vec::new();
    let name = match check_text(form.get("name"), 100, false) {
        Ok(n) if !n.is_empty() => n,
        Ok(_) => {
            errors.push(FieldError::new("name", "is required: 1 to 100 characters"));
            String::new()
        }
        Err(m) => {
            errors.push(FieldError::new("name", m));
            String::new()
        }
    };
    let perms = permissions(&form, &mut errors);
    if !errors.is_empty() {
        let draft = Draft {
            name: form.get("name"),
            permissions: perms,
            errors,
        };
        let page = render(&state, &access, &viewer, &app, html! {}, &draft).await?;
        return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
    }
    let (key, secret) = new_key(&app.id, KeyKind::Api, &name, perms);
    let k = key.clone();
    state.store.run(move |db| store::insert_key(db, &k)).await?;
    access.registry.set_key(&key);
    tracing::info!(app_id = %app.id, key_id = %key.id, user_id = %viewer.user.id, "api key created from the dashboard");
    let notice = html! {
        section.card.notice.ok role="status" {
            h2 { "Key " (key.name) " created" }
            p { "Copy it now: it is shown only once. Send it as the " code { "X-API-Key" } " header." }
            (secret_box("new-api-key", "API key", &secret))
        }
    };
    let page = render(&state, &access, &viewer, &app, notice, &Draft::default()).await?;
    Ok(layout::ok(page))
}

/// Changes a live API key of the app (404 when there is none such).
async fn change(
    state: &AppState,
    access: &web::Data<Access>,
    app_id: String,
    key_id: String,
    change: impl Fn(&mut KeyRecord) + Send + 'static,
) -> Result<KeyRecord, PageError> {
    let access = access.clone();
    state
        .store
        .run(move |db| {
            let updated = store::modify_api_key(db, &app_id, &key_id, change)?;
            if updated.is_some() {
                access.registry.reload_key(db, &key_id)?;
            }
            Ok(updated)
        })
        .await?
        .ok_or_else(|| PageError::not_found("key"))
}

/// `POST /dashboard/apps/{id}/keys/{keyId}`: replaces the key's permissions.
pub async fn update(
    state: web::Data<AppState>,
    access: web::Data<Access>,
    viewer: Viewer,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, PageError> {
    let form = session::posted(&req, payload, &viewer, FORM_LIMIT).await?;
    require_key_manager(&viewer)?;
    let mut errors = Vec::new();
    let perms = permissions(&form, &mut errors);
    if let Some(e) = errors.first() {
        return Err(PageError::bad_request(e.message.clone()));
    }
    let (app_id, key_id) = path.into_inner();
    change(&state, &access, app_id.clone(), key_id, move |k| {
        k.permissions.clone_from(&perms)
    })
    .await?;
    Ok(layout::see_other(&format!("/dashboard/apps/{app_id}/keys")))
}

/// `POST /dashboard/apps/{id}/keys/{keyId}/revoke`.
pub async fn revoke(
    state: web::Data<AppState>,
    access: web::Data<Access>,
    viewer: Viewer,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, PageError> {
    session::posted(&req, payload, &viewer, FORM_LIMIT).await?;
    require_key_manager(&viewer)?;
    let (app_id, key_id) = path.into_inner();
    let key = change(&state, &access, app_id.clone(), key_id, |k| {
        k.revoked_at.get_or_insert_with(Timestamp::now);
    })
    .await?;
    access.rate_limits.forget(&key.id);
    tracing::info!(key_id = %key.id, user_id = %viewer.user.id, "api key revoked from the dashboard");
    Ok(layout::see_other(&format!("/dashboard/apps/{app_id}/keys")))
}
