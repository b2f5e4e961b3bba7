//! The one error type of the HTTP layer and the table of error codes (interface §7).
//!
//! Handlers return `Result<_, ApiError>` and use `?`. `ApiError` writes the envelope
//! `{"success": false, "error": {code, message, details?}, "meta": {requestId}}`. Internal errors keep
//! their cause for the log (under the same requestId) and never show it to the client.

use std::fmt;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::config::Quota;
use crate::storage::StoreError;
pub use crate::validation::FieldError;

/// Every machine code the service answers with, and its HTTP status: the one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    ValidationError,
    Unauthorized,
    Forbidden,
    PlanLimitReached,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    Conflict,
    PayloadTooLarge,
    RateLimited,
    InternalError,
    ServiceUnavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::ValidationError,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::PlanLimitReached,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::RateLimited,
        ErrorCode::InternalError,
        ErrorCode::ServiceUnavailable,
    ];

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::ValidationError => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden | ErrorCode::PlanLimitReached => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Conflict => StatusCode::CONFLICT,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::PlanLimitReached => "PLAN_LIMIT_REACHED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::RequestTimeout => "REQUEST_TIMEOUT",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::ServiceUnavailable => "SERVICE_UNAVAILABLE",
        }
    }
}

/// The error every handler returns.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<FieldError>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The cause of an internal error: logged, never sent.
    source: Option<String>,
}

/// Marks a response whose body is already the error envelope (or, for the dashboard's HTML
/// pages, a rendered error page), so the request middleware leaves it alone (it rewrites any
/// other error response, such as actix's own 404 and 405).
#[derive(Clone, Copy)]
pub struct Enveloped;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            details: Vec::new(),
            headers: Vec::new(),
            source: None,
        }
    }

    pub fn validation(details: Vec<FieldError>) -> Self {
        let message = match details.as_slice() {
            [one] => format!("invalid {}: {}", one.field, one.message),
            _ => format!("{} invalid fields", details.len()),
        };
        ApiError::new(ErrorCode::ValidationError, message).with_details(details)
    }

    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::validation(vec![FieldError::new(field, message)])
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Unauthorized, message)
    }

    pub fn not_found(what: &str) -> Self {
        ApiError::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Conflict, message)
    }

    /// An internal error: the client sees only "internal error"; `cause` goes to the log.
    pub fn internal(cause: impl fmt::Display) -> Self {
        let mut e = ApiError::new(ErrorCode::InternalError, "internal error, retry later");
        e.source = Some(cause.to_string());
        e
    }

    /// 403 PLAN_LIMIT_REACHED with the usage in `details`.
    pub fn plan_limit(quota: Quota, limit: u64, current: u64) -> Self {
        ApiError::new(
            ErrorCode::PlanLimitReached,
            format!("the plan allows {limit} {}", quota.name()),
        )
        .with_details(vec![FieldError::new(
            quota.name(),
            format!("limit {limit}, current {current}"),
        )])
    }

    pub fn unavailable(message: impl Into<String>, retry_after_secs: u64) -> Self {
        ApiError::new(ErrorCode::ServiceUnavailable, message)
            .with_header("retry-after", retry_after_secs.to_string())
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    pub fn with_details(mut self, details: Vec<FieldError>) -> Self {
        self.details = details;
        self
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Self {
        if let Ok(v) = HeaderValue::from_str(&value) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    /// The envelope for a bare status produced outside our handlers (actix's 404, 405, ...).
    pub fn from_status(status: StatusCode) -> Self {
        match status.as_u16() {
            404 => ApiError::new(ErrorCode::NotFound, "no such route"),
            405 => ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            ),
            408 => ApiError::new(ErrorCode::RequestTimeout, "request not received in time"),
            413 => ApiError::new(ErrorCode::PayloadTooLarge, "request body too large"),
            400..=499 => ApiError::new(ErrorCode::ValidationError, "bad request"),
            503 => ApiError::new(
                ErrorCode::ServiceUnavailable,
                "service unavailable, retry later",
            ),
            _ => ApiError::internal(format!("status {status} without an error body")),
        }
    }

    /// The cause of an internal error (for the log only), if any.
    pub fn cause(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The headers the answer must carry (`Retry-After`, `Allow`).
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// The response body, with the given request id.
    pub fn body(&self, request_id: &str) -> serde_json::Value {
        let mut error = serde_json::json!({ "code": self.code.as_str(), "message": self.message });
        if !self.details.is_empty() {
            error["details"] = serde_json::to_value(&self.details).unwrap_or_default();
        }
        serde_json::json!({ "success": false, "error": error, "meta": { "requestId": request_id } })
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code.status()
    }

    fn error_response(&self) -> HttpResponse {
        if let Some(cause) = &self.source {
            tracing::error!(cause = %cause, "internal error");
        }
        let mut res = HttpResponse::build(self.status_code());
        for (name, value) in &self.headers {
            res.insert_header((name.clone(), value.clone()));
        }
        let mut res = res.json(self.body(&super::request_id::current()));
        res.extensions_mut().insert(Enveloped);
        res
    }
}

/// The Retry-After of a store that failed to write (a full disk): freeing space takes a while.
const STORE_IO_RETRY_SECS: u64 = 5;

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Busy => ApiError::unavailable("the store is busy, retry later", 1),
            // A full disk (ENOSPC) or a store being reopened after one: a retry can succeed.
            StoreError::Sled(sled::Error::Io(e)) => {
                tracing::warn!(error = %e, "the store cannot write");
                ApiError::unavailable(
                    "the store cannot write to its disk now, retry later",
                    STORE_IO_RETRY_SECS,
                )
            }
            other => ApiError::internal(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_that_cannot_write_answers_503_with_retry_after_never_500() {
        let full = std::io::Error::from_raw_os_error(28);
        for e in [StoreError::Sled(sled::Error::Io(full)), StoreError::Busy] {
            let answer = ApiError::from(e);
            assert_eq!(answer.status_code(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(answer
                .headers()
                .iter()
                .any(|(name, _)| name.as_str() == "retry-after"));
        }
        let bug = ApiError::from(StoreError::Sled(sled::Error::ReportableBug("x".into())));
        assert_eq!(bug.status_code(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
