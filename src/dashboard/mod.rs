//! The dashboard at `/dashboard`: server-rendered HTML (maud), one stylesheet, a few lines of
//! script for copy buttons; charts are SVG drawn here. Team members sign in with an account
//! (`accounts/`); pages read and write through the same stores as the API.
//!
//! `session.rs` (cookie, `Viewer`, forms and CSRF) -> `layout.rs` (shell, nav, form pieces)
//! -> one folder per section: `account/` (setup, sign-in, the team), `apps/` (apps, keys),
//! `contacts/` (table, CSV in), `surveys/` (list, builder, targeting, results), `ideas/`
//! (board, an idea, settings), and `traffic.rs` (charts from `charts.rs`), with
//! `error.rs` (`PageError`).
//!
//! These routes are not part of the public API: they are wired outside the documented
//! services, so `/openapi.json` (and schemathesis) never sees them.

pub mod account;
pub mod apps;
pub mod charts;
pub mod contacts;
pub mod error;
pub mod ideas;
pub mod layout;
pub mod session;
pub mod surveys;
pub mod traffic;
pub mod viewer;

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
}

/// Contacts (table, detail, CSV in and out) and traffic.
fn contact_and_traffic_routes(scope: Scope) -> Scope {
    scope
        .route("/contacts", web::get().to(apps::list::first))
        .route("/apps/{id}/contacts", web::get().to(contacts_table::list))
        .route(
            "/apps/{id}/contacts.csv",
            web::get().to(contacts_table::export),
        )
        .route("/apps/{id}/contacts/import", web::get().to(import::start))
        .route("/apps/{id}/contacts/import", web::post().to(import::submit))
        .route(
            "/apps/{id}/contacts/{contact}",
            web::get().to(contacts_table::detail),
        )
        .route(
            "/apps/{id}/contacts/{contact}",
            web::post().to(contacts_table::update),
        )
        .route("/traffic", web::get().to(apps::list::first))
        .route("/apps/{id}/traffic", web::get().to(traffic::page))
}

/// Surveys: list, builder, preview, results, moves, CSV.
fn survey_routes(scope: Scope) -> Scope {
    scope
        .route("/surveys", web::get().to(apps::list::first))
        .route("/apps/{id}/surveys", web::get().to(surveys_list::list))
        .route("/apps/{id}/surveys", web::post().to(survey_form::create))
        .route("/apps/{id}/surveys/new", web::get().to(survey_form::new))
        .route(
            "/apps/{id}/surveys/preview",
            web::post().to(survey_form::preview),
        )
        .route(
            "/apps/{id}/surveys/{survey}/edit",
            web::get().to(survey_form::edit_form),
        )
        .route(
            "/apps/{id}/surveys/{survey}/edit",
            web::post().to(survey_form::edit),
        )
        .route(
            "/apps/{id}/surveys/{survey}",
            web::get().to(surveys_list::detail),
        )
        .route(
            "/apps/{id}/surveys/{survey}/transition",
            web::post().to(surveys_list::transition),
        )
        .route(
            "/apps/{id}/surveys/{survey}/responses.csv",
            web::get().to(surveys_list::export),
        )
}

/// Ideas: the board, an idea's page, the board settings.
fn idea_routes(scope: Scope) -> Scope {
    scope
        .route("/ideas", web::get().to(apps::list::first))
        .route("/apps/{id}/ideas", web::get().to(board::board))
        // Before `/apps/{id}/ideas/{idea}`, which would take `settings` and `boards` as ids.
        .route(
            "/apps/{id}/ideas/settings",
            web::get().to(idea_settings::settings),
        )
        .route(
            "/apps/{id}/ideas/boards",
            web::post().to(idea_settings::create_board),
        )
        .route(
            "/apps/{id}/ideas/boards/{board}",
            web::post().to(idea_settings::rename_board),
        )
        .route(
            "/apps/{id}/ideas/boards/{board}/{part}",
            web::post().to(idea_settings::add_item),
        )
        .route(
            "/apps/{id}/ideas/boards/{board}/{part}/{item}",
            web::post().to(|p, path| idea_settings::change_item(p, path, false)),
        )
        .route(
            "/apps/{id}/ideas/boards/{board}/{part}/{item}/delete",
            web::post().to(|p, path| idea_settings::change_item(p, path, true)),
        )
        .route(
            "/apps/{id}/ideas/{idea}",
            web::get().to(idea_detail::detail),
        )
        .route(
            "/apps/{id}/ideas/{idea}",
            web::post().to(idea_detail::update),
        )
        .route(
            "/apps/{id}/ideas/{idea}/status",
            web::post().to(board::move_idea),
        )
        .route(
            "/apps/{id}/ideas/{idea}/comments",
            web::post().to(idea_detail::add_comment),
        )
        .route(
            "/apps/{id}/ideas/{idea}/merge",
            web::post().to(idea_detail::merge_idea),
        )
}

/// Any other path under `/dashboard`: an HTML 404.
async fn not_found() -> Result<actix_web::HttpResponse, error::PageError> {
    Err(error::PageError::not_found("page"))
}
