//! The Apps page: every app with its plan, usage against the plan's limits and how long the
//! plan keeps its data, the tracker snippet, and (for owners) create, change plan and a new
//! integration key (shown once).

use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::config::{PlanLimits, Quota, Retention};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, field, field_with_id, form_errors, secret_box, usage_bar, Section, Shell,
};
use crate::dashboard::session::{AppPosted, Form, Posted, Viewer};
use crate::fields::Text;
use crate::state::AppState;
use crate::tenants::{store, App, AppChange, Plan, Tenants};
use crate::validation::FieldError;

/// The most apps the page lists.
const MAX_APPS: usize = 500;

/// An app and what it uses of its plan.
pub struct AppUsage {
    pub app: App,
    /// The job deleting the app, while it is being deleted.
    pub deletion: Option<crate::jobs::Job>,
    pub contacts: u64,
    pub ideas: u64,
    pub events_this_month: u64,
}

/// Every app (up to `MAX_APPS`) not being deleted, oldest first.
pub async fn all_apps(state: &AppState) -> Result<Vec<App>, PageError> {
    let apps = state
        .store
        .run(|db| store::list_apps(db, crate::storage::cursor::Walk::new(MAX_APPS, None)))
        .await?;
    Ok(apps.items.into_iter().filter(|a| !a.deleting()).collect())
}

/// `GET /dashboard/{section}` (contacts, surveys, ideas, traffic): that page of the first app,
/// or the Apps page when there is none.
pub async fn first(
    state: web::Data<AppState>,
    _: Viewer,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    first_app(&state, req.path().rsplit('/').next().unwrap_or_default()).await
}

/// A redirect to the page `section` of the first app (the Apps page when there is none).
pub async fn first_app(state: &AppState, section: &str) -> Result<HttpResponse, PageError> {
    Ok(match all_apps(state).await?.first() {
        Some(app) => layout::see_other(&format!("/dashboard/apps/{}/{section}", app.id)),
        None => layout::see_other("/dashboard/apps"),
    })
}

/// Every app with its usage, read in one store call. Events count fleet-wide: this node's own
/// and what every edge reported at its last heartbeat (`fleet::nodes::edges_usage`), as the
/// quota counts them.
async fn usage(state: &AppState) -> Result<Vec<AppUsage>, PageError> {
    let month = crate::collector::usage::month_of(state.now().micros());
    Ok(state
        .store
        .run(move |db| {
            let apps = store::list_apps(db, crate::storage::cursor::Walk::new(MAX_APPS, None))?;
            let edges = crate::fleet::nodes::edges_usage(db, None)?;
            apps.items
                .into_iter()
                .map(|app| {
                    let deletion = match &app.deletion_job_id {
                        Some(job) => crate::jobs::store::get(db, job)?,
                        None => None,
                    };
                    let own = crate::collector::usage::get(db, &app.id, &month)?;
                    let on_edges = edges.get(&(app.id.clone(), month.clone()));
                    Ok(AppUsage {
                        deletion,
                        contacts: crate::contacts::store::count(db, &app.id)?,
                        ideas: crate::ideas::store::count(db, &app.id)?,
                        events_this_month: own + on_edges.copied().unwrap_or(0),
                        app,
                    })
                })
                .collect()
        })
        .await?)
}

/// The server's own address as the browser sees it (for the tracker snippet).
pub fn origin(req: &HttpRequest) -> String {
    let info = req.connection_info();
    format!("{}://{}", info.scheme(), info.host())
}

/// The tracker snippet of README's "The browser tracker", for an integration key: the tracker
/// from `script_path` (`collector.script_path`, or the default), which sends its events to
/// the configured collect path.
pub fn snippet(origin: &str, script_path: &str, key: &str) -> String {
    format!(
        "<script>\n!function(w,d,k,h,s){{var a=(w.Service=w.Service||{{}}).analytics=w.Service.analytics||{{}};if(a.loaded||a.q)return;\na.q=[];\"page track identify group reset flush optOut optIn\".split(\" \").forEach(function(m){{a[m]=function(){{a.q.push([m].concat([].slice.call(arguments)))}}}});\nvar e=d.createElement(\"script\");e.async=true;e.src=s+\"{script_path}\";e.setAttribute(\"data-app-key\",k);e.setAttribute(\"data-host\",h);\nd.head.appendChild(e)}}(window,document,\"{key}\",\"{origin}\",\"{origin}\");\n</script>"
    )
}

fn plan_select(id: &str, current: Plan) -> Markup {
    html! {
        select #(id) name="plan" {
            @for &p in Plan::ALL {
                option value=(p.name()) selected[p == current] { (p.name()) }
            }
        }
    }
}

/// `n days`, or `for ever` for 0.
fn days(n: u32) -> String {
    match n {
        0 => "for ever".into(),
        1 => "1 day".into(),
        n => format!("{n} days"),
    }
}

/// How long the plan keeps the app's data (`plans.<plan>.retention`, swept daily).
fn retention(r: &Retention) -> Markup {
    let kept = [
        ("Events in the lake", r.lake_days),
        ("Hourly traffic", r.hourly_rollup_days),
        ("Daily traffic", r.daily_rollup_days),
        ("Survey responses", r.responses_days),
        ("Lake file records", r.lake_file_records_days),
    ];
    html! {
        dl.retention aria-label="Retention" {
            @for (what, n) in kept {
                div { dt { (what) } dd { "kept " (days(n)) } }
            }
        }
    }
}

fn usage_card(viewer: &Viewer, u: &AppUsage, limits: &PlanLimits) -> Markup {
    let app = &u.app;
    html! {
        article.card aria-labelledby=(format!("app-{}", app.id)) {
            div.card-head {
                h2 #(format!("app-{}", app.id)) { (app.name) }
                span.badge { (app.plan.name()) }
            }
            @if app.deleting() {
                (deletion(viewer, app, u.deletion.as_ref()))
            } @else {
                (usage_details(viewer, u, limits))
            }
        }
    }
}

/// The card of an app not being deleted: usage, retention, links and the owner's forms.
fn usage_details(viewer: &Viewer, u: &AppUsage, limits: &PlanLimits) -> Markup {
    let app = &u.app;
    let owner = viewer.user.role.manages_plans();
    html! {
            (usage_bar("Contacts", u.contacts, limits.limit(Quota::Contacts)))
            (usage_bar("Ideas", u.ideas, limits.limit(Quota::Ideas)))
            (usage_bar("Events this month", u.events_this_month, limits.limit(Quota::EventsPerMonth)))
            (retention(&limits.retention))
            p.hint { "App id " code { (app.id) } " · integration key id " code { (app.integration_key_id) } }
            div.actions {
                a.button href=(format!("/dashboard/apps/{}/contacts", app.id)) { "Contacts" }
                @if viewer.user.role.manages_keys() {
                    a.button href=(format!("/dashboard/apps/{}/keys", app.id)) { "API keys" }
                }
            }
            @if owner {
                details.inline {
                    summary { "Plan and integration key" }
                    form.row method="post" action=(format!("/dashboard/apps/{}/plan", app.id)) {
                        (csrf_field(&viewer.session.csrf))
                        div.field {
                            label for=(format!("plan-{}", app.id)) { "Plan" }
                            (plan_select(&format!("plan-{}", app.id), app.plan))
                        }
                        button.button type="submit" { "Change plan" }
                    }
                    form method="post" action=(format!("/dashboard/apps/{}/integration-key", app.id)) {
                        (csrf_field(&viewer.session.csrf))
                        p.hint { "A new integration key replaces the current one at once (the tracker snippet must be updated)." }
                        button.button.danger-button type="submit" { "New integration key" }
                    }
                }
            }
            (deletion(viewer, app, None))
    }
}

fn create_form(viewer: &Viewer, name: &str, errors: &[FieldError]) -> Markup {
    html! {
        section.card aria-labelledby="new-app" {
            h2 #new-app { "New app" }
            (form_errors(errors, &["name", "plan"]))
            form.row method="post" action="/dashboard/apps" novalidate {
                (csrf_field(&viewer.session.csrf))
                (field("Name", "name", "text", name, errors, html! {}))
                div.field { label for="f-plan" { "Plan" } (plan_select("f-plan", Plan::Free)) }
                button.button.primary type="submit" { "Create app" }
            }
        }
    }
}

/// The Apps page, with an optional notice on top (a key shown once) and the create form's state.
pub(super) async fn render(
    tenants: &Tenants,
    viewer: &Viewer,
    notice: Markup,
    form: (&str, &[FieldError]),
) -> Result<Markup, PageError> {
    let access = &tenants.access;
    let apps = usage(&tenants.state).await?;
    let content = html! {
        (notice)
        @if viewer.user.role.manages_plans() { (create_form(viewer, form.0, form.1)) }
        @if apps.is_empty() {
            div.card.empty { p { "No apps yet." } @if !viewer.user.role.manages_plans() { p { "An owner creates them." } } }
        } @else {
            div.grid { @for u in &apps { (usage_card(viewer, u, &access.limits(u.app.plan))) } }
        }
    };
    Ok(Shell::plain(viewer, Section::Apps, "Apps", content))
}

/// `GET /dashboard/apps`.
pub async fn list(tenants: Tenants, viewer: Viewer) -> Result<HttpResponse, PageError> {
    Ok(layout::ok(
        render(&tenants, &viewer, html! {}, ("", &[])).await?,
    ))
}

fn key_notice(tenants: &Tenants, req: &HttpRequest, app: &App, key: &str, heading: &str) -> Markup {
    let script_path = tenants.state.settings.collector.script_path();
    html! {
        section.card.notice.ok role="status" {
            h2 { (heading) }
            p { "Copy the integration key now: it is shown only once." }
            (secret_box("new-integration-key", "Integration key (X-App-Key)", key))
            p.label { "Tracker snippet for " (app.name) " (paste before " code { "</head>" } ")" }
            pre.snippet #snippet { (snippet(&origin(req), script_path, key)) }
            button.button type="button" data-copy="#snippet" { "Copy snippet" }
        }
    }
}

pub(super) fn require_owner(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_plans() {
        Ok(())
    } else {
        Err(PageError::forbidden(
            "only owners manage apps, plans and keys",
        ))
    }
}

/// The name of an app or key from a form: 1 to 100 characters once trimmed.
pub fn name_of(form: &Form, errors: &mut Vec<FieldError>) -> String {
    Text::line(1, 100)
        .check(form.get("name"))
        .map_err(|m| errors.push(FieldError::new("name", m)))
        .unwrap_or_default()
}

/// `POST /dashboard/apps`: creates an app; the page shows its integration key once.
pub async fn create(
    tenants: Tenants,
    Posted(_, viewer, form): Posted,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let mut errors = Vec::new();
    let name = name_of(&form, &mut errors);
    let plan = Plan::parse(form.get("plan"));
    if plan.is_none() {
        errors.push(FieldError::new("plan", "must be free, pro or enterprise"));
    }
    let Some(plan) = plan.filter(|_| errors.is_empty()) else {
        let page = render(&tenants, &viewer, html! {}, (form.get("name"), &errors)).await?;
        return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
    };
    let (app, secret) = tenants.create_app(name, plan).await?;
    tracing::info!(app_id = %app.id, user_id = %viewer.user.id, "app created from the dashboard");
    let notice = key_notice(
        &tenants,
        &req,
        &app,
        &secret,
        &format!("{} is ready", app.name),
    );
    Ok(layout::ok(
        render(&tenants, &viewer, notice, ("", &[])).await?,
    ))
}

/// `POST /dashboard/apps/{id}/plan`.
pub async fn change_plan(
    tenants: Tenants,
    AppPosted(_, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let plan = Plan::parse(form.get("plan"))
        .ok_or_else(|| PageError::bad_request("the plan must be free, pro or enterprise"))?;
    let change = AppChange {
        plan: Some(plan),
        ..AppChange::default()
    };
    tenants.update_app(&app.id, change).await?;
    Ok(layout::see_other("/dashboard/apps"))
}

/// `POST /dashboard/apps/{id}/integration-key`: a new integration key, shown once; the old
/// one is revoked.
pub async fn rotate(
    tenants: Tenants,
    AppPosted(_, viewer, _, app): AppPosted,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let (app, _, secret) = tenants.rotate_integration_key(&app.id).await?;
    let notice = key_notice(&tenants, &req, &app, &secret, "New integration key");
    Ok(layout::ok(
        render(&tenants, &viewer, notice, ("", &[])).await?,
    ))
}

/// The deletion part of an app's card: its progress while it is being deleted, else (for
/// owners) the form that deletes it (posted to `delete.rs`).
fn deletion(viewer: &Viewer, app: &App, deletion: Option<&crate::jobs::Job>) -> Markup {
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
