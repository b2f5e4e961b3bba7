//! The Webhooks pages' markup: the endpoint form (create and edit), an endpoint's card, its
//! attempts log. Everything shown is escaped by maud (URLs, descriptions, answers' first bytes
//! are the users' or a receiver's text).

use maud::{html, Markup};

use crate::contacts::model::Status as ContactStatus;
use crate::dashboard::layout::{csrf_field, error_for, field, form_errors, when};
use crate::dashboard::session::Viewer;
use crate::storage::changes::types;
use crate::tenants::App;
use crate::validation::FieldError;
use crate::webhooks::model::{Attempt, Endpoint, EndpointStatus};

/// What the endpoint form shows: an endpoint's values, or what was typed, with the errors.
#[derive(Default)]
pub struct Draft {
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub board_ids: String,
    pub survey_ids: String,
    pub contact_statuses: Vec<String>,
    pub include_internal: bool,
    pub errors: Vec<FieldError>,
}

impl Draft {
    /// The form filled with `e`'s values.
    pub fn of(e: &Endpoint) -> Draft {
        Draft {
            url: e.url.clone(),
            description: e.description.clone().unwrap_or_default(),
            event_types: e.event_types.clone(),
            board_ids: e.filters.board_ids.join(", "),
            survey_ids: e.filters.survey_ids.join(", "),
            contact_statuses: e.filters.contact_statuses.clone(),
            include_internal: e.include_internal_comments,
            errors: Vec::new(),
        }
    }
}

/// The base of an app's Webhooks pages.
pub fn base(app: &App) -> String {
    format!("/dashboard/apps/{}/webhooks", app.id)
}

/// A group of checkboxes named `name`, one per value, ids prefixed with `prefix`.
fn checks(prefix: &str, name: &str, values: &[&str], checked: &[String]) -> Markup {
    html! {
        div.checks {
            @for v in values {
                @let id = format!("{prefix}-{name}-{}", v.replace(['.', '*'], "-"));
                label for=(id) {
                    input #(id) type="checkbox" name=(name) value=(v) checked[checked.iter().any(|c| c == v)];
                    @if *v == "*" { "All events (*)" } @else { (v) }
                }
            }
        }
    }
}

/// The endpoint form posted to `action`; `prefix` keeps its ids apart from another form's.
pub fn endpoint_form(
    viewer: &Viewer,
    action: &str,
    prefix: &str,
    d: &Draft,
    submit: &str,
) -> Markup {
    let errors = &d.errors;
    let mut all_types = vec!["*"];
    all_types.extend(types::ALL.iter().filter(|t| **t != types::WEBHOOK_TEST));
    let statuses: Vec<&str> = ContactStatus::ALL.iter().map(|s| s.name()).collect();
    let shown = [
        "url",
        "description",
        "eventTypes",
        "filters.boardIds",
        "filters.surveyIds",
        "filters.contactStatuses",
    ];
    html! {
        (form_errors(errors, &shown))
        form method="post" action=(action) novalidate {
            (csrf_field(&viewer.session.csrf))
            (field("URL", "url", "url", &d.url, errors, html! { p.hint { "http or https; the events are POSTed there, signed (Standard Webhooks)." } }))
            (field("Description", "description", "text", &d.description, errors, html! {}))
            fieldset.invalid[error_for(errors, "eventTypes").is_some()] {
                legend { "Event types" }
                (checks(prefix, "eventTypes", &all_types, &d.event_types))
                @if let Some(m) = error_for(errors, "eventTypes") { p.field-error #(format!("{prefix}-eventTypes-error")) { (m) } }
            }
            details.inline open[has_filters(d)] {
                summary { "Filters" }
                (field("Board ids (comma separated; none: every board)", "boardIds", "text", &d.board_ids, &renamed(errors, "filters.boardIds", "boardIds"), html! {}))
                (field("Survey ids (comma separated; none: every survey)", "surveyIds", "text", &d.survey_ids, &renamed(errors, "filters.surveyIds", "surveyIds"), html! {}))
                fieldset {
                    legend { "Contact statuses (none: every status)" }
                    (checks(prefix, "contactStatuses", &statuses, &d.contact_statuses))
                }
            }
            div.field {
                label for=(format!("{prefix}-internal")) {
                    input #(format!("{prefix}-internal")) type="checkbox" name="includeInternalComments" value="true" checked[d.include_internal];
                    " Include internal comments"
                }
            }
            button.button.primary type="submit" { (submit) }
        }
    }
}

fn has_filters(d: &Draft) -> bool {
    !d.board_ids.is_empty() || !d.survey_ids.is_empty() || !d.contact_statuses.is_empty()
}

/// `errors` with `from` shown under the form's field `to`.
fn renamed(errors: &[FieldError], from: &str, to: &str) -> Vec<FieldError> {
    errors
        .iter()
        .filter(|e| e.field == from || e.field.starts_with(&format!("{from}[")))
        .map(|e| FieldError::new(to, e.message.clone()))
        .collect()
}

/// The status badge (with why and since when for a disabled endpoint).
pub fn status_badge(e: &Endpoint) -> Markup {
    html! {
        span.webhook-status {
            @match e.status {
                EndpointStatus::Active => span.badge.ok { "active" },
                EndpointStatus::Paused => span.badge { "paused" },
                EndpointStatus::Disabled => {
                    span.badge.danger { "disabled" }
                    @if let Some(at) = e.disabled_at { " since " (when(at)) }
                    @if let Some(why) = &e.disabled_reason { " · " span.muted { (why) } }
                }
            }
        }
    }
}

/// The forms that change an endpoint's status: pause, resume, or re-enable a disabled one.
pub fn status_buttons(viewer: &Viewer, app: &App, e: &Endpoint) -> Markup {
    let action = format!("{}/{}/status", base(app), e.id);
    let (to, label) = match e.status {
        EndpointStatus::Active => ("paused", "Pause"),
        EndpointStatus::Paused => ("active", "Resume"),
        EndpointStatus::Disabled => ("active", "Re-enable"),
    };
    html! {
        form.inline method="post" action=(action) {
            (csrf_field(&viewer.session.csrf))
            input type="hidden" name="status" value=(to);
            button.button type="submit" { (label) }
        }
    }
}

/// An endpoint's card on the list.
pub fn endpoint_card(viewer: &Viewer, app: &App, e: &Endpoint) -> Markup {
    let title = e
        .description
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or(&e.url);
    html! {
        article.card.webhook.disabled[e.status == EndpointStatus::Disabled] aria-label=(format!("Endpoint {}", e.url)) {
            div.key-head {
                h2 { a href=(format!("{}/{}", base(app), e.id)) { (title) } }
                (status_badge(e))
            }
            div.key-meta {
                span { "URL " code { (e.url) } }
                span { "Pending " strong.pending { (e.pending) } }
                span { "Created " (when(e.created_at)) }
            }
            div.perms {
                @for t in &e.event_types { span.badge { (t) } }
                @for b in &e.filters.board_ids { span.badge { "board " (b) } }
                @for s in &e.filters.survey_ids { span.badge { "survey " (s) } }
                @for s in &e.filters.contact_statuses { span.badge { "contact " (s) } }
                @if e.include_internal_comments { span.badge { "internal comments" } }
            }
            div.actions {
                a.button href=(format!("{}/{}", base(app), e.id)) { "Attempts and settings" }
                (status_buttons(viewer, app, e))
            }
        }
    }
}

/// One attempt's row, with its redeliver button.
pub fn attempt_row(viewer: &Viewer, app: &App, endpoint: &str, a: &Attempt) -> Markup {
    let action = format!("{}/{endpoint}/attempts/{}/redeliver", base(app), a.id);
    html! {
        tr {
            td { (when(a.at)) }
            td { code { (a.event_id) } }
            td { (a.kind) }
            td { (a.trigger.name()) " #" (a.attempt) }
            td {
                @match a.status {
                    Some(s) if (200..300).contains(&s) => span.badge.ok { (s) },
                    Some(s) => span.badge.danger { (s) },
                    None => span.badge.danger { "no answer" },
                }
                @if let Some(e) = &a.error { " " span.muted { (e) } }
            }
            td.num { (a.latency_ms) " ms" }
            td { code.answer { (a.response) } }
            td {
                form method="post" action=(action) {
                    (csrf_field(&viewer.session.csrf))
                    button.button type="submit" aria-label=(format!("Redeliver {} ({})", a.event_id, a.kind)) { "Redeliver" }
                }
            }
        }
    }
}

/// The attempts log, newest first.
pub fn attempts_table(viewer: &Viewer, app: &App, endpoint: &str, attempts: &[Attempt]) -> Markup {
    html! {
        section.card aria-labelledby="attempts-title" {
            h2 #attempts-title { "Attempts" }
            @if attempts.is_empty() {
                p.muted { "No attempts yet." }
            } @else {
                div.table-wrap {
                    table #attempts {
                        thead { tr { th { "At" } th { "Event" } th { "Type" } th { "Trigger" } th { "Status" } th { "Latency" } th { "Answer (first bytes)" } th { span.sr-only { "Redeliver" } } } }
                        tbody { @for a in attempts { (attempt_row(viewer, app, endpoint, a)) } }
                    }
                }
            }
        }
    }
}
