//! The dashboard at `/dashboard`: server-rendered HTML (maud), one stylesheet, a few lines of
//! script for copy buttons; charts are SVG drawn here. Team members sign in with an account
//! (`accounts/`); pages read and write through the same stores as the API.
//!
//! `session.rs` (cookie, `Viewer`, forms and CSRF) -> `layout.rs` (shell, nav, form pieces)
//! -> one folder per section: `account/` (setup, sign-in, the team), `apps/` (apps, keys),
//! `contacts/` (table, CSV in), `surveys/` (list, builder, targeting, results), `ideas/`
//! (board, an idea, settings), `traffic.rs` (charts from `charts.rs`), `fleet.rs` (the
//! control node's edges and fleet tokens), `webhooks/` (endpoints, their attempts), with
//! `error.rs` (`PageError`).
//!
//! These routes are not part of the public API: they are wired outside the documented
//! services, so `/openapi.json` (and schemathesis) never sees them.

pub mod account;
pub mod apps;
pub mod charts;
pub mod contacts;
pub mod error;
pub mod fleet;
pub mod ideas;
pub mod layout;
pub mod session;
pub mod surveys;
pub mod traffic;
pub mod viewer;
pub mod webhooks;

use actix_web::{web, Scope};

use account::{auth, password, team};
use apps::keys;
use contacts::{import, table as contacts_table};
use ideas::{board, detail as idea_detail, settings as idea_settings};
use surveys::{form as survey_form, list as surveys_list};

pub use session::Dashboard;

/// Every dashboard route, under `/dashboard`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    let scope = account_routes(web::scope("/dashboard"));
    let scope = idea_routes(survey_routes(contact_and_traffic_routes(scope)));
    let scope = webhook_routes(scope);
    cfg.service(scope.default_service(web::to(not_found)));
}

/// Sign-in, apps, keys and the team.
fn account_routes(scope: Scope) -> Scope {
    scope
        .route("", web::get().to(auth::home))
        .route("/", web::get().to(auth::home))
        .route("/assets/{name}", web::get().to(layout::asset))
        .route("/setup", web::get().to(auth::setup_form))
        .route("/setup", web::post().to(auth::setup))
        .route("/sign-in", web::get().to(auth::sign_in_form))
        .route("/sign-in", web::post().to(auth::sign_in))
        .route("/sign-out", web::post().to(auth::sign_out))
        .route("/apps", web::get().to(apps::list::list))
        .route("/apps", web::post().to(apps::list::create))
        .route("/apps/{id}/plan", web::post().to(apps::list::change_plan))
        .route("/apps/{id}/delete", web::post().to(apps::delete::delete))
        .route(
            "/apps/{id}/integration-key",
            web::post().to(apps::list::rotate),
        )
        .route("/keys", web::get().to(keys::first))
        .route("/apps/{id}/keys", web::get().to(keys::list))
        .route("/apps/{id}/keys", web::post().to(keys::create))
        .route("/apps/{id}/keys/{key}", web::post().to(keys::update))
        .route("/apps/{id}/keys/{key}/revoke", web::post().to(keys::revoke))
        .route("/team", web::get().to(team::list))
        .route("/team", web::post().to(team::create))
        .route("/team/{user}/sign-out", web::post().to(team::end_sessions))
        .route("/team/{user}/remove", web::post().to(team::remove))
        .route("/account", web::get().to(password::show))
        .route("/account/password", web::post().to(password::change))
        .route("/fleet", web::get().to(fleet::page))
        .route("/fleet/tokens", web::post().to(fleet::create))
        .route(
            "/fleet/tokens/{token}/revoke",
            web::post().to(fleet::revoke),
        )
}

/// Contacts (table, detail, CSV in and out) and traffic.
fn contact_and_traffic_routes(scope: Scope) -> Scope {
    let at = |tail: &str| format!("/apps/{{id}}/contacts{tail}");
    scope
        .route("/contacts", web::get().to(apps::list::first))
        .route(&at(""), web::get().to(contacts_table::list))
        .route(&at(".csv"), web::get().to(contacts_table::export))
        .route(&at("/import"), web::get().to(import::start))
        .route(&at("/import"), web::post().to(import::submit))
        .route(&at("/{contact}"), web::get().to(contacts_table::detail))
        .route(&at("/{contact}"), web::post().to(contacts_table::update))
        .route("/traffic", web::get().to(apps::list::first))
        .route("/apps/{id}/traffic", web::get().to(traffic::page))
        .route("/apps/{id}/refused", web::get().to(apps::quarantine::page))
        .route("/apps/{id}/erasures", web::get().to(apps::erasure::page))
        .route("/apps/{id}/erasures", web::post().to(apps::erasure::start))
}

/// Surveys: list, builder, preview, results, moves, CSV.
fn survey_routes(scope: Scope) -> Scope {
    let at = |tail: &str| format!("/apps/{{id}}/surveys{tail}");
    scope
        .route("/surveys", web::get().to(apps::list::first))
        .route(&at(""), web::get().to(surveys_list::list))
        .route(&at(""), web::post().to(survey_form::create))
        .route(&at("/new"), web::get().to(survey_form::new))
        .route(&at("/preview"), web::post().to(survey_form::preview))
        .route(&at("/{survey}/edit"), web::get().to(survey_form::edit_form))
        .route(&at("/{survey}/edit"), web::post().to(survey_form::edit))
        .route(&at("/{survey}"), web::get().to(surveys_list::detail))
        .route(
            &at("/{survey}/transition"),
            web::post().to(surveys_list::transition),
        )
        .route(
            &at("/{survey}/responses.csv"),
            web::get().to(surveys_list::export),
        )
}

/// Ideas: the board, an idea's page, the board settings.
fn idea_routes(scope: Scope) -> Scope {
    let at = |tail: &str| format!("/apps/{{id}}/ideas{tail}");
    scope
        .route("/ideas", web::get().to(apps::list::first))
        .route(&at(""), web::get().to(board::board))
        // Before `/apps/{id}/ideas/{idea}`, which would take `settings` and `boards` as ids.
        .route(&at("/settings"), web::get().to(idea_settings::settings))
        .route(&at("/boards"), web::post().to(idea_settings::create_board))
        .route(
            &at("/boards/{board}"),
            web::post().to(idea_settings::rename_board),
        )
        .route(
            &at("/boards/{board}/{part}"),
            web::post().to(idea_settings::add_item),
        )
        .route(
            &at("/boards/{board}/{part}/{item}"),
            web::post().to(|p, path| idea_settings::change_item(p, path, false)),
        )
        .route(
            &at("/boards/{board}/{part}/{item}/delete"),
            web::post().to(|p, path| idea_settings::change_item(p, path, true)),
        )
        .route(&at("/{idea}"), web::get().to(idea_detail::detail))
        .route(&at("/{idea}"), web::post().to(idea_detail::update))
        .route(&at("/{idea}/status"), web::post().to(board::move_idea))
        .route(
            &at("/{idea}/comments"),
            web::post().to(idea_detail::add_comment),
        )
        .route(
            &at("/{idea}/merge"),
            web::post().to(idea_detail::merge_idea),
        )
}

/// Webhooks: the endpoints, an endpoint's page and its actions.
fn webhook_routes(scope: Scope) -> Scope {
    let at = |tail: &str| format!("/apps/{{id}}/webhooks{tail}");
    scope
        .route("/webhooks", web::get().to(apps::list::first))
        .route(&at(""), web::get().to(webhooks::list))
        .route(&at(""), web::post().to(webhooks::create))
        .route(&at("/{webhook}"), web::get().to(webhooks::detail))
        .route(&at("/{webhook}"), web::post().to(webhooks::update))
        .route(
            &at("/{webhook}/status"),
            web::post().to(webhooks::set_status),
        )
        .route(&at("/{webhook}/secret"), web::post().to(webhooks::rotate))
        .route(&at("/{webhook}/delete"), web::post().to(webhooks::delete))
        .route(&at("/{webhook}/test"), web::post().to(webhooks::send_test))
        .route(
            &at("/{webhook}/attempts/{attempt}/redeliver"),
            web::post().to(webhooks::redeliver),
        )
}

/// Any other path under `/dashboard`: an HTML 404.
async fn not_found() -> Result<actix_web::HttpResponse, error::PageError> {
    Err(error::PageError::not_found("page"))
}
