//! The dashboard's one error type: an `ApiError` (the service's error table) rendered as an HTML
//! page instead of the JSON envelope, or the way to the sign-in page.

use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use maud::html;

use super::layout;
use crate::accounts::store::AccountError;
use crate::api::{ApiError, ErrorCode};
use crate::storage::StoreError;

#[derive(Debug)]
pub enum PageError {
    /// Not signed in (or the session expired): 303 to the sign-in page, or to the setup page
    /// while no account exists.
    SignIn { setup: bool },
    /// Any other failure, shown as an error page with the code's status.
    Api(ApiError),
}

impl PageError {
    pub fn forbidden(message: &str) -> PageError {
        PageError::Api(ApiError::new(ErrorCode::Forbidden, message))
    }

    pub fn not_found(what: &str) -> PageError {
        PageError::Api(ApiError::not_found(what))
    }

    pub fn bad_request(message: impl Into<String>) -> PageError {
        PageError::Api(ApiError::new(ErrorCode::ValidationError, message))
    }

    pub fn internal(cause: impl std::fmt::Display) -> PageError {
        PageError::Api(ApiError::internal(cause))
    }
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::SignIn { .. } => f.write_str("not signed in"),
            PageError::Api(e) => e.fmt(f),
        }
    }
}

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> Self {
        PageError::Api(e)
    }
}

impl From<AccountError> for PageError {
    fn from(e: AccountError) -> Self {
        let conflict = |m: &str| PageError::Api(ApiError::new(ErrorCode::Conflict, m));
        match e {
            AccountError::EmailTaken => conflict("that e-mail already has an account"),
            AccountError::AlreadySetUp => conflict("the first owner exists already"),
            AccountError::LastOwner => {
                conflict("the last owner cannot be removed: make another member an owner first")
            }
            AccountError::NoSuchUser => PageError::not_found("account"),
            AccountError::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for PageError {
    fn from(e: StoreError) -> Self {
        PageError::Api(e.into())
    }
}

impl From<actix_web::error::BlockingError> for PageError {
    fn from(e: actix_web::error::BlockingError) -> Self {
        PageError::internal(e)
    }
}

/// The heading of an error page.
fn title(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Forbidden | ErrorCode::PlanLimitReached => "Not allowed",
        ErrorCode::NotFound => "Not found",
        ErrorCode::RateLimited => "Too many attempts",
        ErrorCode::ServiceUnavailable => "Busy, try again",
        ErrorCode::InternalError => "Something went wrong",
        _ => "That did not work",
    }
}

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        match self {
            PageError::SignIn { .. } => StatusCode::SEE_OTHER,
            PageError::Api(e) => e.code.status(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let e = match self {
            PageError::SignIn { setup } => {
                let to = if *setup {
                    "/dashboard/setup"
                } else {
                    "/dashboard/sign-in"
                };
                return HttpResponse::SeeOther()
                    .insert_header((header::LOCATION, to))
                    .finish();
            }
            PageError::Api(e) => e,
        };
        if let Some(cause) = e.cause() {
            tracing::error!(cause = %cause, "internal error");
        }
        let body = html! {
            main.narrow {
                section.card.error-card role="alert" {
                    p.eyebrow { (e.code.status().as_u16()) " · " (e.code.as_str()) }
                    h1 { (title(e.code)) }
                    p { (e.message) }
                    @if !e.details.is_empty() {
                        ul.errors { @for d in &e.details { li { strong { (d.field) } ": " (d.message) } } }
                    }
                    p.muted { "Request " code { (crate::api::current_request_id()) } }
                    p { a.button href="/dashboard" { "Back to the dashboard" } }
                }
            }
        };
        let mut res = HttpResponse::build(e.code.status());
        for (name, value) in e.headers() {
            res.insert_header((name.clone(), value.clone()));
        }
        layout::html_response(&mut res, layout::document(title(e.code), body))
    }
}
