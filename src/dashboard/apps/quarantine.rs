//! The Refused events page of an app: the events the collector refused one by one (invalid,
//! too large, over the plan's monthly events), newest first, each with its reasons, the
//! request it came in and its JSON as sent (cut at 4 KiB). Read from the quarantine
//! (`collector::quarantine`), which keeps the last `collector.quarantine_per_app` of them.
//! Everything shown is the client's text: maud escapes it.

use actix_web::HttpResponse;
use maud::{html, Markup};

use crate::collector::quarantine::{self, Refused};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, thousands, when, Section, Shell};
use crate::dashboard::session::AppPage;

fn record(r: &Refused) -> Markup {
    html! {
        article.card.refused aria-label=(format!("Event {} of request {}", r.index, r.request_id)) {
            div.key-head {
                h2 { "Event " (r.index) " of its batch" }
                span.badge.danger { (r.reason.replace('_', " ")) }
            }
            div.key-meta {
                span { "Received " (when(r.received_at)) }
                span { "Request " code { (r.request_id) } }
            }
            ul.reasons {
                @for p in &r.errors {
                    li { code { (p.field) } ": " (p.message) }
                }
            }
            pre.snippet { (r.event) @if r.truncated { "…" } }
        }
    }
}

/// `GET /dashboard/apps/{id}/refused`.
pub async fn page(AppPage(state, viewer, app): AppPage) -> Result<HttpResponse, PageError> {
    let keep = state.settings.collector.quarantine_per_app.max(1);
    let id = app.id.clone();
    let records = state
        .store
        .run(move |db| quarantine::recent(db, &id, keep))
        .await?;
    let content = html! {
        p.hint {
            "Events the collector refused one by one while it answered their batch (SDKs do not \
             read the answer's " code { "rejected" } "), newest first: the last "
            (thousands(keep as u64)) " of this app. A batch refused whole (not JSON, too big, a \
             bad key) is not kept here: its answer says why. "
            code { "/metrics" } " counts them by reason (" code { "tributary_collector_quarantined_total" } ")."
        }
        @if records.is_empty() {
            div.card.empty { p { "No refused events." } }
        } @else {
            section #refused-events aria-label=(format!("Refused events of {}", app.name)) {
                @for r in &records { (record(r)) }
            }
        }
    };
    let shell = Shell {
        viewer: &viewer,
        section: Section::Traffic,
        title: "Refused events",
        app: Some(&app),
    };
    Ok(layout::ok(shell.render(html! {}, content)))
}
