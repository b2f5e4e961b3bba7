//! The Fleet page of the control node (owners only): every edge as its last heartbeat left it
//! (`fleet::control::node_views`: version, last contact with a stale mark, events/s, backlog,
//! outbox, uplink, whether its registry is current), and the fleet tokens the edges present:
//! create one (shown once, with the command line that starts an edge with it), revoke one.
//! An edge serves no dashboard, so the page only ever shows a control node's view.

use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::dashboard::apps::list::{name_of, origin};
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, field, form_errors, secret_box, size, thousands, when, Section, Shell,
};
use crate::dashboard::session::{Posted, Viewer};
use crate::fleet::metrics::{age_seconds, STALE_AFTER_SECS};
use crate::fleet::nodes::NodeView;
use crate::fleet::token::FleetToken;
use crate::fleet::{Cache, Tokens};
use crate::state::AppState;
use crate::validation::FieldError;

fn require_owner(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.user.role.manages_keys() {
        Ok(())
    } else {
        Err(PageError::forbidden("only owners manage the fleet"))
    }
}

/// 75.4 seconds as "1 min ago".
fn ago(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// One edge's row.
fn node_row(n: &NodeView, tokens: &[FleetToken], now: i64) -> Markup {
    let b = &n.heartbeat;
    let age = age_seconds(n.last_contact_at, now);
    let token = tokens.iter().find(|t| t.id == n.token_id);
    html! {
        tr {
            th scope="row" { code { (b.node_id) } }
            td { (b.version) }
            td {
                time datetime=(n.last_contact_at.to_string()) title=(when(n.last_contact_at)) { (ago(age)) }
                @if age > STALE_AFTER_SECS { " " span.badge.danger { "stale" } }
            }
            td.num { (format!("{:.1}", b.events_per_second)) }
            td.num { (size(b.backlog_bytes)) }
            td.num { (thousands(b.outbox_files)) }
            td.num {
                (thousands(b.uplink_items))
                @if b.uplink_items > 0 { br; small.muted { (format!("{:.0} s behind", b.uplink_lag_seconds)) } }
            }
            td {
                @if n.registry_current { span.badge.ok { "yes" } } @else { span.badge.danger { "no" } }
            }
            td {
                @match token {
                    Some(t) => (t.name),
                    None => span.muted { "revoked" },
                }
            }
        }
    }
}

fn nodes_table(nodes: &[NodeView], tokens: &[FleetToken], now: i64) -> Markup {
    html! {
        section.card aria-labelledby="edges-title" {
            h2 #edges-title { "Edges" }
            @if nodes.is_empty() {
                p.muted #edges { "No edge has reported yet. Create a fleet token below and start an edge with it." }
            } @else {
                p.hint { "As each edge said at its last heartbeat. An edge silent for more than " (STALE_AFTER_SECS) " s is stale." }
                div.table-wrap { table #edges {
                    thead { tr {
                        th scope="col" { "Node" } th scope="col" { "Version" } th scope="col" { "Last contact" }
                        th.num scope="col" { "Events/s" } th.num scope="col" { "Backlog (WAL, files)" }
                        th.num scope="col" { "Outbox files" } th.num scope="col" { "Uplink items" }
                        th scope="col" { "Registry current" } th scope="col" { "Token" }
                    } }
                    tbody { @for n in nodes { (node_row(n, tokens, now)) } }
                } }
            }
        }
    }
}

fn tokens_section(viewer: &Viewer, tokens: &[FleetToken], nodes: &[NodeView]) -> Markup {
    html! {
        section.card aria-labelledby="tokens-title" {
            h2 #tokens-title { "Fleet tokens" }
            p.hint { "What edge collectors present to this control node. Revoked, a token stops its edges' next sync." }
            @if tokens.is_empty() {
                p.muted { "No fleet token yet." }
            } @else {
                div.table-wrap { table #fleet-tokens {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Id" } th scope="col" { "Created" }
                        th.num scope="col" { "Edges" } th scope="col" { span.sr-only { "Actions" } }
                    } }
                    tbody { @for t in tokens {
                        tr {
                            th scope="row" { (t.name) }
                            td { code { (t.id) } }
                            td { (when(t.created_at)) }
                            td.num { (nodes.iter().filter(|n| n.token_id == t.id).count()) }
                            td { form.inline method="post" action=(format!("/dashboard/fleet/tokens/{}/revoke", t.id)) {
                                (csrf_field(&viewer.session.csrf))
                                button.button.danger-button type="submit" aria-label=(format!("Revoke the fleet token {}", t.name)) { "Revoke" }
                            } }
                        }
                    } }
                } }
            }
        }
    }
}

fn create_form(viewer: &Viewer, name: &str, errors: &[FieldError]) -> Markup {
    html! {
        section.card aria-labelledby="new-token" {
            h2 #new-token { "Create fleet token" }
            (form_errors(errors, &["name"]))
            form method="post" action="/dashboard/fleet/tokens" novalidate {
                (csrf_field(&viewer.session.csrf))
                (field("Name", "name", "text", name, errors, html! { p.hint { "What it is for, e.g. the edges' region." } }))
                button.button.primary type="submit" { "Create fleet token" }
            }
        }
    }
}

async fn render(
    state: &AppState,
    cache: web::Data<Cache>,
    viewer: &Viewer,
    notice: Markup,
    draft: (&str, &[FieldError]),
) -> Result<Markup, PageError> {
    let (nodes, tokens) = state
        .store
        .run(move |db| {
            let nodes = crate::fleet::control::node_views(db, &cache)?;
            Ok((nodes, crate::fleet::token::list(db)?))
        })
        .await?;
    let now = state.clock.now_micros();
    let content = html! {
        (notice)
        (nodes_table(&nodes, &tokens, now))
        (create_form(viewer, draft.0, draft.1))
        (tokens_section(viewer, &tokens, &nodes))
    };
    Ok(Shell::plain(viewer, Section::Fleet, "Fleet", content))
}

/// `GET /dashboard/fleet`.
pub async fn page(
    state: web::Data<AppState>,
    cache: web::Data<Cache>,
    viewer: Viewer,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let page = render(&state, cache, &viewer, html! {}, ("", &[])).await?;
    Ok(layout::ok(page))
}

/// A node id to suggest for a token's first edge: its name in lower case, letters, digits and
/// dashes.
fn node_id_of(name: &str) -> String {
    let slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let slug = slug
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>();
    match slug.is_empty() {
        true => "edge-1".to_owned(),
        false => format!("{}-1", slug.join("-")),
    }
}

/// The command that starts an edge of this control node with `token`.
pub fn edge_command(token: &str, control_url: &str, node_id: &str) -> String {
    format!(
        "TRIBUTARY__FLEET__TOKEN={token} tributary serve --role edge --control-url {control_url} --node-id {node_id}"
    )
}

/// `POST /dashboard/fleet/tokens`: creates a fleet token; the page shows it once.
pub async fn create(
    Posted(state, viewer, form): Posted,
    tokens: web::Data<Tokens>,
    cache: web::Data<Cache>,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let mut errors = Vec::new();
    let name = name_of(&form, &mut errors);
    if !errors.is_empty() {
        let page = render(
            &state,
            cache,
            &viewer,
            html! {},
            (form.get("name"), &errors),
        )
        .await?;
        return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
    }
    let now = state.now();
    let (made, n) = (tokens.into_inner(), name.clone());
    let (token, secret) = state.store.run(move |db| made.create(db, &n, now)).await?;
    tracing::info!(token_id = %token.id, user_id = %viewer.user.id, "fleet token created from the dashboard");
    let command = edge_command(&secret, &origin(&req), &node_id_of(&name));
    let notice = html! {
        section.card.notice.ok role="status" {
            h2 { "Fleet token " (token.name) " created" }
            p { "Copy it now: it is shown only once. An edge presents it to this control node." }
            (secret_box("new-fleet-token", "Fleet token", &secret))
            (secret_box("edge-command", "Start an edge with it", &command))
            p.hint { "Each edge needs its own " code { "--node-id" } " and data directory, and the same lake settings as this node." }
        }
    };
    let page = render(&state, cache, &viewer, notice, ("", &[])).await?;
    Ok(layout::ok(page))
}

/// `POST /dashboard/fleet/tokens/{tokenId}/revoke`.
pub async fn revoke(
    Posted(state, viewer, _): Posted,
    tokens: web::Data<Tokens>,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    require_owner(&viewer)?;
    let (id, tokens) = (path.into_inner(), tokens.into_inner());
    let gone = id.clone();
    let removed = state.store.run(move |db| tokens.revoke(db, &gone)).await?;
    if !removed {
        return Err(PageError::not_found("fleet token"));
    }
    tracing::info!(token_id = %id, user_id = %viewer.user.id, "fleet token revoked from the dashboard");
    Ok(layout::see_other("/dashboard/fleet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_the_largest_whole_unit() {
        assert_eq!(ago(0.4), "0 s ago");
        assert_eq!(ago(59.4), "59 s ago");
        assert_eq!(ago(75.0), "1 min ago");
        assert_eq!(ago(7300.0), "2 h ago");
        assert_eq!(ago(200_000.0), "2 d ago");
    }

    #[test]
    fn a_token_name_suggests_a_node_id_fit_for_the_command_line() {
        assert_eq!(node_id_of("EU west (Paris)"), "eu-west-paris-1");
        assert_eq!(node_id_of("  "), "edge-1");
        assert_eq!(node_id_of("été"), "t-1");
    }
}
