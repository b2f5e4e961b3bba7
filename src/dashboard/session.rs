//! Who is looking: the session cookie, the `Viewer` extractor, and posted forms with their CSRF
//! check. The pages take one extractor that does all of a request's opening steps: `AppPage`
//! (signed in, the app of the path's `{id}` or 404), `Posted` (signed in, the form read and its
//! CSRF token checked: 403 otherwise) and `AppPosted` (both).
//!
//! The session cookie holds the session id (256 random bits); the store keys the session by
//! the id's SHA-256. The cookie is HttpOnly and SameSite=Lax, and `Secure` with the `__Host-`
//! prefix when the request came over TLS. Every form carries a CSRF token: the session's own
//! once signed in, a double-submit cookie before (setup and sign-in forms).

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;

use super::error::PageError;
pub use super::viewer::Viewer;
use crate::accounts::model::{session_key, tokens_match, ABSOLUTE_SECS};
use crate::accounts::store;
use crate::api::ratelimit::RateLimits;
use crate::ids::Timestamp;
use crate::state::AppState;
use crate::tenants::{store as tenants, App};

pub const SESSION_COOKIE: &str = "tributary_session";
pub const CSRF_COOKIE: &str = "tributary_csrf";
/// The largest form body (a CSV import has its own, larger limit).
pub const FORM_LIMIT: usize = 64 * 1024;

/// The dashboard's own state: the sign-in attempt limits (per e-mail and address).
#[derive(Default)]
pub struct Dashboard {
    pub sign_in_limits: RateLimits,
}

/// Sign-in attempts allowed per e-mail and client address per minute.
pub const SIGN_INS_PER_MINUTE: u32 = 5;

/// True when the browser reached us over TLS (directly or through a proxy that says so).
pub fn is_secure(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

fn cookie_name(base: &str, secure: bool) -> String {
    if secure {
        format!("__Host-{base}")
    } else {
        base.to_owned()
    }
}

/// The value of the cookie `base` (its `__Host-` form over TLS).
pub fn read_cookie(req: &HttpRequest, base: &str) -> Option<String> {
    let want = cookie_name(base, is_secure(req));
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == want)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A `Set-Cookie` value; `max_age` 0 deletes the cookie.
pub fn set_cookie(
    req: &HttpRequest,
    base: &str,
    value: &str,
    max_age: i64,
) -> (header::HeaderName, String) {
    let secure = is_secure(req);
    let mut c = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}",
        cookie_name(base, secure)
    );
    if secure {
        c.push_str("; Secure");
    }
    (header::SET_COOKIE, c)
}

/// The session cookie of a new session.
pub fn session_cookie(req: &HttpRequest, id: &str) -> (header::HeaderName, String) {
    set_cookie(req, SESSION_COOKIE, id, ABSOLUTE_SECS)
}

fn app_state(req: &HttpRequest) -> Result<web::Data<AppState>, PageError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| PageError::internal("app state missing"))
}

async fn viewer(req: HttpRequest) -> Result<Viewer, PageError> {
    let state = app_state(&req)?;
    let Some(id) = read_cookie(&req, SESSION_COOKIE) else {
        let setup = !state.store.run(store::is_set_up).await?;
        return Err(PageError::SignIn { setup });
    };
    let skey = session_key(&id);
    let (k, now) = (skey.clone(), state.now());
    let found = state
        .store
        .run(move |db| store::session(db, &k, now))
        .await?;
    match found {
        Some((session, user)) => Ok(Viewer {
            user,
            session,
            session_key: skey,
        }),
        None => Err(PageError::SignIn { setup: false }),
    }
}

impl FromRequest for Viewer {
    type Error = PageError;
    type Future = Pin<Box<dyn Future<Output = Result<Viewer, PageError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        Box::pin(viewer(req.clone()))
    }
}

/// A posted `application/x-www-form-urlencoded` body, as its pairs in order.
#[derive(Debug, Default)]
pub struct Form(Vec<(String, String)>);

impl Form {
    /// The first value of `name` (`""` when absent).
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Every value of `name` (checkbox groups, repeated selects).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// A form from its pairs (unit tests of the pages' form handling).
    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Form {
        Form(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }
}

/// Reads a form body of at most `limit` bytes.
pub async fn read_form(
    req: &HttpRequest,
    payload: web::Payload,
    limit: usize,
) -> Result<Form, PageError> {
    if crate::api::content_type(req) != "application/x-www-form-urlencoded" {
        return Err(PageError::bad_request(
            "forms must be sent as application/x-www-form-urlencoded",
        ));
    }
    let body = crate::api::read_body(payload, limit).await?;
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body)
        .map(Form)
        .map_err(|_| PageError::bad_request("the form could not be read"))
}

fn csrf_refused() -> PageError {
    PageError::forbidden(
        "the form's security token is missing or out of date: reload the page and try again",
    )
}

/// Reads a signed-in form and checks its CSRF token against the session's (403 otherwise).
async fn posted(
    req: &HttpRequest,
    payload: web::Payload,
    viewer: &Viewer,
    limit: usize,
) -> Result<Form, PageError> {
    let form = read_form(req, payload, limit).await?;
    if viewer.session.csrf_matches(form.get("csrf")) {
        Ok(form)
    } else {
        Err(csrf_refused())
    }
}

/// The double-submit token of a signed-out form: the cookie's, or a new one to set.
pub fn anonymous_csrf(req: &HttpRequest) -> (String, bool) {
    match read_cookie(req, CSRF_COOKIE) {
        Some(t) => (t, false),
        None => (crate::ids::secret(), true),
    }
}

/// Reads a signed-out form (setup, sign-in) and checks its token against the cookie's.
pub async fn posted_anonymous(req: &HttpRequest, payload: web::Payload) -> Result<Form, PageError> {
    let form = read_form(req, payload, FORM_LIMIT).await?;
    let cookie = read_cookie(req, CSRF_COOKIE).unwrap_or_default();
    if tokens_match(&cookie, form.get("csrf")) {
        Ok(form)
    } else {
        Err(csrf_refused())
    }
}

/// The app `id`, or 404 (also while it is being deleted: nothing more is shown or written).
pub async fn load_app(state: &AppState, id: &str) -> Result<App, PageError> {
    let id = id.to_owned();
    state
        .store
        .run(move |db| tenants::get_app(db, &id))
        .await?
        .filter(|app| !app.deleting())
        .ok_or_else(|| PageError::not_found("app"))
}

/// The app of the path's `{id}`, or 404.
async fn path_app(state: &AppState, req: &HttpRequest) -> Result<App, PageError> {
    load_app(state, req.match_info().get("id").unwrap_or_default()).await
}

/// A page of one app (`/dashboard/apps/{id}/...`): the state, the viewer and the app (404 when
/// there is none such).
pub struct AppPage(pub web::Data<AppState>, pub Viewer, pub App);

impl FromRequest for AppPage {
    type Error = PageError;
    type Future = LocalBoxFuture<'static, Result<AppPage, PageError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let (state, viewer) = (app_state(&req)?, viewer(req.clone()).await?);
            let app = path_app(&state, &req).await?;
            Ok(AppPage(state, viewer, app))
        })
    }
}

/// A signed-in form post: the state, the viewer and the form of at most `LIMIT` bytes, its CSRF
/// token checked against the session's (403 otherwise).
pub struct Posted<const LIMIT: usize = FORM_LIMIT>(pub web::Data<AppState>, pub Viewer, pub Form);

impl<const LIMIT: usize> FromRequest for Posted<LIMIT> {
    type Error = PageError;
    type Future = LocalBoxFuture<'static, Result<Posted<LIMIT>, PageError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let body = web::Payload::from_request(&req, payload).into_inner();
        Box::pin(async move {
            let (state, viewer) = (app_state(&req)?, viewer(req.clone()).await?);
            let body = body.map_err(PageError::internal)?;
            let form = posted(&req, body, &viewer, LIMIT).await?;
            Ok(Posted(state, viewer, form))
        })
    }
}

/// A form posted to a page of one app: `Posted`, then the app of the path's `{id}` (404).
pub struct AppPosted<const LIMIT: usize = FORM_LIMIT>(
    pub web::Data<AppState>,
    pub Viewer,
    pub Form,
    pub App,
);

impl<const LIMIT: usize> FromRequest for AppPosted<LIMIT> {
    type Error = PageError;
    type Future = LocalBoxFuture<'static, Result<AppPosted<LIMIT>, PageError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let posted = Posted::<LIMIT>::from_request(req, payload);
        let req = req.clone();
        Box::pin(async move {
            let Posted(state, viewer, form) = posted.await?;
            let app = path_app(&state, &req).await?;
            Ok(AppPosted(state, viewer, form, app))
        })
    }
}

/// Runs `write(db, app id, id, now)` on the store: a dashboard form's write to record `id` of
/// `app`, stamped with the server's time.
pub async fn write_to<T: Send + 'static>(
    state: &AppState,
    app: &App,
    id: &str,
    write: impl FnOnce(&sled::Db, &str, &str, Timestamp) -> T + Send + 'static,
) -> Result<T, PageError> {
    let (a, i, now) = (app.id.clone(), id.to_owned(), state.now());
    Ok(state
        .store
        .run(move |db| Ok(write(db, &a, &i, now)))
        .await?)
}
