//! First-owner setup (with the admin token), sign-in (rate limited per e-mail and address) and
//! sign-out.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::accounts::model::{self, session_key, NewUser, Role};
use crate::accounts::store::{self, AccountError};
use crate::accounts::Session;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, field, form_errors};
use crate::dashboard::session::{
    self, Dashboard, Posted, CSRF_COOKIE, SESSION_COOKIE, SIGN_INS_PER_MINUTE,
};
use crate::state::AppState;
use crate::tenants::auth::{client_addr, too_many_wrong_tokens};
use crate::tenants::Access;
use crate::validation::FieldError;

/// A signed-out page: the brand and one card.
fn card_page(
    req: &HttpRequest,
    status: StatusCode,
    title: &str,
    content: impl FnOnce(&str) -> Markup,
) -> HttpResponse {
    let (token, fresh) = session::anonymous_csrf(req);
    let body = html! {
        main.narrow #main {
            div.auth-brand { span.logo aria-hidden="true" { "≋" } span { "Tributary" } }
            section.card { (content(&token)) }
        }
    };
    let mut res = HttpResponse::build(status);
    if fresh {
        res.insert_header(session::set_cookie(req, CSRF_COOKIE, &token, 7200));
    }
    layout::html_response(&mut res, layout::document(title, body))
}

/// `GET /dashboard`: the apps, the sign-in page or the setup page.
pub async fn home(state: web::Data<AppState>, req: HttpRequest) -> Result<HttpResponse, PageError> {
    if session::read_cookie(&req, SESSION_COOKIE).is_some() {
        return Ok(layout::see_other("/dashboard/apps"));
    }
    let set_up = state.store.run(store::is_set_up).await?;
    Ok(layout::see_other(if set_up {
        "/dashboard/sign-in"
    } else {
        "/dashboard/setup"
    }))
}

#[derive(Default)]
struct SetupForm<'a> {
    name: &'a str,
    email: &'a str,
    errors: Vec<FieldError>,
}

fn setup_page(req: &HttpRequest, status: StatusCode, f: &SetupForm) -> HttpResponse {
    card_page(req, status, "Set up", |csrf| {
        html! {
            h1 { "Create the first owner" }
            p.muted { "Enter the admin token (printed at the first start, kept in the data directory's "
                code { "admin_token" } ") and the owner's account." }
            (form_errors(&f.errors, &["token", "name", "email", "password"]))
            form method="post" action="/dashboard/setup" novalidate {
                (csrf_field(csrf))
                (field("Admin token", "token", "password", "", &f.errors, html! {}))
                (field("Your name", "name", "text", f.name, &f.errors, html! {}))
                (field("E-mail", "email", "email", f.email, &f.errors, html! {}))
                (field("Password", "password", "password", "", &f.errors,
                    html! { p.hint { "At least " (model::MIN_PASSWORD_CHARS) " characters." } }))
                button.button.primary type="submit" { "Create owner and sign in" }
            }
        }
    })
}

/// `GET /dashboard/setup`: the first-owner form, while no account exists.
pub async fn setup_form(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    if state.store.run(store::is_set_up).await? {
        return Ok(layout::see_other("/dashboard/sign-in"));
    }
    Ok(setup_page(&req, StatusCode::OK, &SetupForm::default()))
}

/// Starts a session for `user_id`: stores it and answers 303 to the apps with its cookie.
async fn sign_in_as(
    state: &AppState,
    req: &HttpRequest,
    user_id: &str,
) -> Result<HttpResponse, PageError> {
    let (s, id) = Session::start(user_id, state.now());
    let skey = session_key(&id);
    state
        .store
        .run(move |db| store::insert_session(db, &skey, &s))
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, "/dashboard/apps"))
        .insert_header(session::session_cookie(req, &id))
        .finish())
}

/// `POST /dashboard/setup`: checks the admin token, creates the first owner, signs them in.
pub async fn setup(
    state: web::Data<AppState>,
    access: web::Data<Access>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, PageError> {
    let form = session::posted_anonymous(&req, payload).await?;
    let mut errors = Vec::new();
    match access
        .admin_token
        .check(form.get("token"), &client_addr(&req))
    {
        Ok(true) => {}
        Ok(false) => errors.push(FieldError::new("token", "is not this server's admin token")),
        Err(wait) => return Err(too_many_wrong_tokens(wait).into()),
    }
    let parsed = NewUser::parse(
        form.get("email"),
        form.get("name"),
        form.get("password"),
        Role::Owner,
    );
    let new = match parsed {
        Ok(n) if errors.is_empty() => n,
        other => {
            errors.extend(other.err().unwrap_or_default());
            let f = SetupForm {
                name: form.get("name"),
                email: form.get("email"),
                errors,
            };
            return Ok(setup_page(&req, StatusCode::BAD_REQUEST, &f));
        }
    };
    let now = state.now();
    let user = web::block(move || new.into_user(now))
        .await?
        .map_err(PageError::internal)?;
    let (u, id) = (user.clone(), user.id.clone());
    match state
        .store
        .run(move |db| Ok(store::create_user(db, &u, true)))
        .await?
    {
        Ok(()) => {}
        Err(AccountError::AlreadySetUp) => return Ok(layout::see_other("/dashboard/sign-in")),
        Err(other) => return Err(other.into()),
    }
    tracing::info!(user_id = %id, "first owner created");
    sign_in_as(&state, &req, &id).await
}

fn sign_in_page(
    req: &HttpRequest,
    status: StatusCode,
    email: &str,
    errors: &[FieldError],
) -> HttpResponse {
    card_page(req, status, "Sign in", |csrf| {
        html! {
            h1 { "Sign in" }
            p.muted { "Welcome back. Sign in with your team account." }
            (form_errors(errors, &["email", "password"]))
            form method="post" action="/dashboard/sign-in" novalidate {
                (csrf_field(csrf))
                (field("E-mail", "email", "email", email, errors, html! {}))
                (field("Password", "password", "password", "", errors, html! {}))
                button.button.primary type="submit" { "Sign in" }
            }
        }
    })
}

/// `GET /dashboard/sign-in`.
pub async fn sign_in_form(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    if !state.store.run(store::is_set_up).await? {
        return Ok(layout::see_other("/dashboard/setup"));
    }
    Ok(sign_in_page(&req, StatusCode::OK, "", &[]))
}

/// `POST /dashboard/sign-in`: at most `SIGN_INS_PER_MINUTE` attempts per e-mail and client
/// address; a wrong e-mail costs the same argon2 verification as a wrong password.
pub async fn sign_in(
    state: web::Data<AppState>,
    dash: web::Data<Dashboard>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, PageError> {
    let form = session::posted_anonymous(&req, payload).await?;
    // Accounts are stored under the normal form of their address (`normalize_email`).
    let raw = form.get("email");
    let email =
        crate::validation::normalize_email(raw).unwrap_or_else(|_| raw.trim().to_lowercase());
    let ip = client_addr(&req);
    let rate = dash
        .sign_in_limits
        .check(&format!("{email}\u{0}{ip}"), SIGN_INS_PER_MINUTE);
    if let Some(wait) = rate.retry_after {
        let errors = [FieldError::new(
            "password",
            format!("too many sign-in attempts for this e-mail; try again in {wait} s"),
        )];
        let mut res = sign_in_page(
            &req,
            StatusCode::TOO_MANY_REQUESTS,
            form.get("email"),
            &errors,
        );
        res.headers_mut().insert(
            actix_web::http::header::RETRY_AFTER,
            actix_web::http::header::HeaderValue::from(wait),
        );
        return Ok(res);
    }
    let e = email.clone();
    let user = state
        .store
        .run(move |db| store::user_by_email(db, &e))
        .await?;
    let password = form.get("password").to_owned();
    let hash = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| model::decoy_hash().to_owned());
    let good = web::block(move || model::verify_password(&password, &hash)).await?;
    match user {
        Some(u) if good => {
            tracing::info!(user_id = %u.id, "signed in");
            sign_in_as(&state, &req, &u.id).await
        }
        _ => {
            let errors = [FieldError::new("password", "wrong e-mail or password")];
            Ok(sign_in_page(
                &req,
                StatusCode::UNAUTHORIZED,
                form.get("email"),
                &errors,
            ))
        }
    }
}

/// `POST /dashboard/sign-out`: deletes the session and its cookie.
pub async fn sign_out(
    Posted(state, viewer, _): Posted,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    let skey = viewer.session_key.clone();
    state
        .store
        .run(move |db| store::delete_session(db, &skey))
        .await?;
    Ok(HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, "/dashboard/sign-in"))
        .insert_header(session::set_cookie(&req, SESSION_COOKIE, "deleted", 0))
        .finish())
}
