//! The Webhooks pages of an app (owners only: an endpoint's secret is a credential), built on
//! the store's service functions (`webhooks::store`) and the `Webhooks` handle, as the admin API
//! is. The list: every endpoint (status, pending deliveries, why a disabled one stopped) and the
//! create form (the secret shown once). An endpoint's page: its settings form, pause / resume /
//! re-enable, rotate the secret (the new one shown once), delete, send a test event (the
//! attempt shown), and the attempts log with a redeliver button per attempt.

pub mod view;

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde_json::{Map, Value};

use crate::api::error::ApiError;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field, secret_box, Section, Shell};
use crate::dashboard::session::{AppPage, AppPosted, Form, Viewer};
use crate::fields::Mode;
use crate::state::AppState;
use crate::tenants::App;
use crate::validation::FieldError;
use crate::webhooks::model::{Attempt, Endpoint, EndpointPatch};
use crate::webhooks::store::{self, WebhookError};
use crate::webhooks::{guard, Webhooks};
use view::{base, Draft};

/// The most attempts the endpoint's page lists (the log keeps at most this many anyway).
const MAX_ATTEMPTS: usize = 100;

fn require_owner(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_keys() {
        Ok(())
    } else {
        Err(PageError::forbidden("only owners manage webhooks"))
    }
}

/// The form as the admin API's body: the checkbox groups as arrays, the id lists split on
/// commas and spaces; an empty description absent on create and cleared on edit.
fn body_of(form: &Form, mode: Mode) -> Map<String, Value> {
    let list = |name: &str| -> Vec<Value> {
        form.get(name)
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(Value::from)
            .collect()
    };
    let checked =
        |name: &str| -> Vec<Value> { form.all(name).into_iter().map(Value::from).collect() };
    let mut filters = Map::new();
    filters.insert("boardIds".into(), Value::Array(list("boardIds")));
    filters.insert("surveyIds".into(), Value::Array(list("surveyIds")));
    filters.insert(
        "contactStatuses".into(),
        Value::Array(checked("contactStatuses")),
    );
    let mut body = Map::new();
    body.insert("url".into(), form.get("url").trim().into());
    match form.get("description").trim() {
        "" if mode == Mode::Create => {}
        "" => {
            body.insert("description".into(), Value::Null);
        }
        d => {
            body.insert("description".into(), d.into());
        }
    }
    body.insert("eventTypes".into(), Value::Array(checked("eventTypes")));
    body.insert("filters".into(), Value::Object(filters));
    let internal = form.get("includeInternalComments") == "true";
    body.insert("includeInternalComments".into(), internal.into());
    body
}

/// The form parsed as the admin API parses its body, the URL's host checked by the same guard.
async fn parse(
    state: &AppState,
    form: &Form,
    mode: Mode,
) -> Result<EndpointPatch, Vec<FieldError>> {
    let p = EndpointPatch::parse(&body_of(form, mode), mode)?;
    if let Some(url) = &p.url {
        let allow = state.settings.webhooks.allow_private;
        guard::check_url(url, allow)
            .await
            .map_err(|m| vec![FieldError::new("url", m)])?;
    }
    Ok(p)
}

/// A store's refusal as the page's error (404, 400, 409).
fn refused(e: WebhookError) -> PageError {
    ApiError::from(e).into()
}

/// The field errors of a refusal shown on the form, or the page's error.
fn field_errors(e: WebhookError) -> Result<Vec<FieldError>, PageError> {
    match e {
        WebhookError::Invalid(errors) => Ok(errors),
        WebhookError::Conflict(m) => Ok(vec![FieldError::new("endpoints", m)]),
        e => Err(refused(e)),
    }
}

/// What was typed, to show again with `errors`.
fn typed(form: &Form, errors: Vec<crate::validation::FieldError>) -> Draft {
    let owned = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect();
    Draft {
        url: form.get("url").to_owned(),
        description: form.get("description").to_owned(),
        event_types: owned(form.all("eventTypes")),
        board_ids: form.get("boardIds").to_owned(),
        survey_ids: form.get("surveyIds").to_owned(),
        contact_statuses: owned(form.all("contactStatuses")),
        include_internal: form.get("includeInternalComments") == "true",
        errors,
    }
}

/// A notice with a secret shown once.
fn secret_notice(title: &str, secret: &str, extra: Markup) -> Markup {
    html! {
        section.card.notice.ok role="status" {
            h2 { (title) }
            p { "Copy the signing secret now: it is shown only once. Receivers verify each delivery with it (Standard Webhooks: " code { "webhook-id" } ", " code { "webhook-timestamp" } ", " code { "webhook-signature" } ")." }
            (secret_box("new-webhook-secret", "Signing secret", secret))
            (extra)
        }
    }
}

async fn render_list(
    state: &AppState,
    viewer: &Viewer,
    app: &App,
    notice: Markup,
    draft: &Draft,
) -> Result<Markup, PageError> {
    let id = app.id.clone();
    let endpoints = state.store.run(move |db| store::list(db, &id)).await?;
    let content = html! {
        (notice)
        @if endpoints.is_empty() {
            div.card.empty { p { "No endpoints yet. Add one below to receive this app's events." } }
        } @else {
            section.keys aria-label=(format!("Webhook endpoints of {}", app.name)) {
                @for e in &endpoints { (view::endpoint_card(viewer, app, e)) }
            }
        }
        section.card aria-labelledby="new-endpoint" {
            h2 #new-endpoint { "New endpoint" }
            (view::endpoint_form(viewer, &base(app), "new", draft, "Create endpoint"))
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Webhooks,
        title: "Webhooks",
        app: Some(app),
    };
    Ok(shell.render(html! {}, content))
}

/// `GET /dashboard/apps/{id}/webhooks`.
pub async fn list(AppPage(state, viewer, app): AppPage) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let page = render_list(&state, &viewer, &app, html! {}, &Draft::default()).await?;
    Ok(layout::ok(page))
}

/// `POST /dashboard/apps/{id}/webhooks`: creates an endpoint; the page shows its secret once.
pub async fn create(
    AppPosted(state, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let made = match parse(&state, &form, Mode::Create).await {
        Err(errors) => Err(errors),
        Ok(p) => {
            let (id, now) = (app.id.clone(), state.now());
            let max = state.settings.webhooks.max_endpoints_per_app;
            let made = state
                .store
                .run(move |db| Ok(store::create(db, &id, &p, max, now)))
                .await?;
            match made {
                Ok(done) => Ok(done),
                Err(e) => Err(field_errors(e)?),
            }
        }
    };
    match made {
        Err(errors) => {
            let page = render_list(&state, &viewer, &app, html! {}, &typed(&form, errors)).await?;
            Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
        }
        Ok((endpoint, secret)) => {
            tracing::info!(app_id = %app.id, webhook_id = %endpoint.id, user_id = %viewer.user.id, "webhook endpoint created from the dashboard");
            let notice = secret_notice(
                &format!("Endpoint {} created", endpoint.url),
                &secret,
                html! {},
            );
            let page = render_list(&state, &viewer, &app, notice, &Draft::default()).await?;
            Ok(layout::ok(page))
        }
    }
}

/// The endpoint `id` of `app` and its attempts, newest first (404 when none).
async fn load(
    state: &AppState,
    app: &App,
    id: &str,
) -> Result<(Endpoint, Vec<Attempt>), PageError> {
    let (a, i) = (app.id.clone(), id.to_owned());
    state
        .store
        .run(move |db| {
            let Some(e) = store::get(db, &a, &i)? else {
                return Ok(None);
            };
            let logged = store::attempts(db, &a, &i)?.unwrap_or_default();
            let newest = logged
                .into_iter()
                .rev()
                .take(MAX_ATTEMPTS)
                .map(|(_, at)| at);
            Ok(Some((e, newest.collect())))
        })
        .await?
        .ok_or_else(|| PageError::not_found("webhook endpoint"))
}

async fn render_detail(
    state: &AppState,
    viewer: &Viewer,
    app: &App,
    id: &str,
    notice: Markup,
    draft: Option<Draft>,
) -> Result<Markup, PageError> {
    let (e, attempts) = load(state, app, id).await?;
    let url = format!("{}/{}", base(app), e.id);
    let draft = draft.unwrap_or_else(|| Draft::of(&e));
    let csrf = &viewer.session.csrf;
    let content = html! {
        (notice)
        section.card.webhook aria-label=(format!("Endpoint {}", e.url)) {
            div.key-head { h2 { code { (e.url) } } (view::status_badge(&e)) }
            div.key-meta {
                span { "Id " code { (e.id) } }
                span { "Pending " strong.pending { (e.pending) } }
            }
            div.actions {
                form.inline method="post" action=(format!("{url}/test")) {
                    (csrf_field(csrf))
                    button.button.primary type="submit" { "Send test event" }
                }
                (view::status_buttons(viewer, app, &e))
            }
        }
        (view::attempts_table(viewer, app, &e.id, &attempts))
        section.card aria-labelledby="settings" {
            h2 #settings { "Settings" }
            (view::endpoint_form(viewer, &url, "edit", &draft, "Save endpoint"))
        }
        section.card aria-labelledby="secret" {
            h2 #secret { "Signing secret" }
            form method="post" action=(format!("{url}/secret")) {
                (csrf_field(csrf))
                (field("Keep the old secret valid for (hours)", "overlapHours", "number", "24", &[], html! { p.hint { "Deliveries carry both signatures meanwhile, so receivers can switch without losing one." } }))
                button.button type="submit" { "Rotate secret" }
            }
        }
        section.card aria-labelledby="delete" {
            h2 #delete { "Delete" }
            form method="post" action=(format!("{url}/delete")) {
                (csrf_field(csrf))
                p.hint { "Its pending deliveries and its log go with it." }
                button.button.danger-button type="submit" { "Delete endpoint" }
            }
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Webhooks,
        title: "Webhook endpoint",
        app: Some(app),
    };
    Ok(shell.render(
        html! { a.button href=(base(app)) { "All endpoints" } },
        content,
    ))
}

/// `GET /dashboard/apps/{id}/webhooks/{webhook}`.
pub async fn detail(
    AppPage(state, viewer, app): AppPage,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let page = render_detail(&state, &viewer, &app, &path.1, html! {}, None).await?;
    Ok(layout::ok(page))
}

/// Applies `patch` to endpoint `id` of `app`.
async fn save(
    state: &AppState,
    app: &App,
    id: &str,
    p: EndpointPatch,
) -> Result<Result<Endpoint, WebhookError>, PageError> {
    let (a, i, now) = (app.id.clone(), id.to_owned(), state.now());
    Ok(state
        .store
        .run(move |db| Ok(store::update(db, &a, &i, &p, now)))
        .await?)
}

/// `POST /dashboard/apps/{id}/webhooks/{webhook}`: saves the settings form.
pub async fn update(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let errors = match parse(&state, &form, Mode::Patch).await {
        Err(errors) => errors,
        Ok(p) => match save(&state, &app, &path.1, p).await? {
            Ok(_) => return Ok(layout::see_other(&format!("{}/{}", base(&app), path.1))),
            Err(e) => field_errors(e)?,
        },
    };
    let draft = Some(typed(&form, errors));
    let page = render_detail(&state, &viewer, &app, &path.1, html! {}, draft).await?;
    Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
}

/// `POST /dashboard/apps/{id}/webhooks/{webhook}/status`: `status` = active (resume, or
/// re-enable a disabled endpoint) or paused.
pub async fn set_status(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let mut body = Map::new();
    body.insert("status".into(), form.get("status").into());
    let p = EndpointPatch::parse(&body, Mode::Patch).map_err(|e| {
        PageError::bad_request(e.first().map_or(String::new(), |e| e.message.clone()))
    })?;
    save(&state, &app, &path.1, p).await?.map_err(refused)?;
    tracing::info!(app_id = %app.id, webhook_id = %path.1, user_id = %viewer.user.id, status = form.get("status"), "webhook endpoint status set from the dashboard");
    Ok(layout::see_other(&format!("{}/{}", base(&app), path.1)))
}

/// `POST /dashboard/apps/{id}/webhooks/{webhook}/secret`: a new secret, shown once; the old one
/// stays valid for `overlapHours`.
pub async fn rotate(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let max = crate::webhooks::model::MAX_OVERLAP_SECS / 3600;
    let hours: i64 = form
        .get("overlapHours")
        .trim()
        .parse()
        .ok()
        .filter(|h| (0..=max).contains(h))
        .ok_or_else(|| PageError::bad_request(format!("the overlap is 0 to {max} hours")))?;
    let (a, i, now) = (app.id.clone(), path.1.clone(), state.now());
    let rotated = state
        .store
        .run(move |db| Ok(store::rotate_secret(db, &a, &i, hours * 3600, now)))
        .await?
        .map_err(refused)?;
    tracing::info!(app_id = %app.id, webhook_id = %path.1, user_id = %viewer.user.id, "webhook secret rotated from the dashboard");
    let until = html! {
        @if let Some(at) = rotated.previous_secret_expires_at {
            p.hint { "The previous secret stays valid until " (layout::when(at)) "." }
        }
    };
    let notice = secret_notice("Secret rotated", &rotated.secret, until);
    let page = render_detail(&state, &viewer, &app, &path.1, notice, None).await?;
    Ok(layout::ok(page))
}

/// `POST /dashboard/apps/{id}/webhooks/{webhook}/delete`.
pub async fn delete(
    AppPosted(state, viewer, _, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let (a, i) = (app.id.clone(), path.1.clone());
    state
        .store
        .run(move |db| Ok(store::delete(db, &a, &i)))
        .await?
        .map_err(refused)?;
    tracing::info!(app_id = %app.id, webhook_id = %path.1, user_id = %viewer.user.id, "webhook endpoint deleted from the dashboard");
    Ok(layout::see_other(&base(&app)))
}

/// `POST /dashboard/apps/{id}/webhooks/{webhook}/test`: sends a `webhook.test` event now; the
/// page shows the attempt.
pub async fn send_test(
    webhooks: web::Data<Webhooks>,
    AppPosted(state, viewer, _, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let attempt = webhooks
        .send_test(&app.id, &path.1)
        .await
        .map_err(refused)?;
    let outcome = match (attempt.status, &attempt.error) {
        (Some(s), _) => format!("answered {s} in {} ms", attempt.latency_ms),
        (None, Some(e)) => format!("failed: {e}"),
        (None, None) => "did not answer".to_owned(),
    };
    let notice = html! {
        section.card.notice role="status" {
            h2 { "Test event sent" }
            p { "The endpoint " (outcome) "." }
        }
    };
    let page = render_detail(&state, &viewer, &app, &path.1, notice, None).await?;
    Ok(layout::ok(page))
}

/// `POST /dashboard/apps/{id}/webhooks/{webhook}/attempts/{attempt}/redeliver`: the logged
/// event queued again for this endpoint (same `webhook-id`).
pub async fn redeliver(
    webhooks: web::Data<Webhooks>,
    AppPosted(state, viewer, _, app): AppPosted,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let (a, i, at, now) = (app.id.clone(), path.1.clone(), path.2.clone(), state.now());
    let lanes = state.settings.webhooks.lanes;
    state
        .store
        .run(move |db| Ok(store::redeliver(db, &a, &i, &at, lanes, now)))
        .await?
        .map_err(refused)?;
    webhooks.wake();
    Ok(layout::see_other(&format!("{}/{}", base(&app), path.1)))
}
