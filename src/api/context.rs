//! The outermost middleware: every request gets an id (`X-Request-Id`, `meta.requestId`, the log
//! span), every error answer gets the envelope (including actix's own bare 404/405), the rate
//! limit headers go on every keyed answer, every answer says `X-Content-Type-Options: nosniff`
//! (no JSON or CSV answer is ever sniffed into HTML), and one log line per request.

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse};
use tracing::Instrument;

use super::error::{ApiError, Enveloped};
use super::ratelimit::RateLimitInfo;
use super::request_id::REQUEST_ID;

const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");

/// Outermost middleware: gives every request an id (`X-Request-Id`, `meta.requestId`, the log
/// span), turns every error, including actix's own bare 404/405, into the error envelope, and
/// logs one line per request.
///
/// HEAD is answered wherever GET is: the request is routed as a GET, and actix-http sends the
/// GET answer's status and headers (`Content-Length` included) without its body, since it
/// knows the connection asked for HEAD.
pub async fn request_context(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let id = crate::ids::request_id();
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.path());
    if req.method() == Method::HEAD {
        req.head_mut().method = Method::GET;
    }
    let started = Instant::now();
    let outcome = REQUEST_ID
        .scope(id.clone(), next.call(req))
        .instrument(span.clone())
        .await;
    let mut res = match outcome {
        Ok(res) => res.map_into_boxed_body(),
        // Handlers and extractors turn their errors into responses inside the scope; an error
        // that escapes the whole chain is rendered here, still under this request's id.
        Err(e) => return Err(Escaped { id, inner: e }.into()),
    };
    if res.status().as_u16() >= 400 && res.response().extensions().get::<Enveloped>().is_none() {
        let err = ApiError::from_status(res.status());
        let body = err.body(&id);
        let mut replacement = HttpResponse::build(err.code.status());
        if let Some(allow) = res.headers().get(header::ALLOW) {
            replacement.insert_header((header::ALLOW, allow.clone()));
        }
        res = res.into_response(replacement.json(body));
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), v);
    }
    res.headers_mut()
        .insert(header::X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    let rate = res.request().extensions().get::<RateLimitInfo>().copied();
    if let Some(rate) = rate {
        rate.write_headers(res.headers_mut());
    }
    let status = res.status().as_u16();
    let latency_us = started.elapsed().as_micros() as u64;
    if status >= 500 {
        tracing::warn!(parent: &span, status, latency_us, "request failed");
    } else {
        tracing::debug!(parent: &span, status, latency_us, "request done");
    }
    Ok(res)
}

/// An error that escaped the service chain, rendered with the request's id.
#[derive(Debug)]
struct Escaped {
    id: String,
    inner: actix_web::Error,
}

impl std::fmt::Display for Escaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl actix_web::ResponseError for Escaped {
    fn status_code(&self) -> StatusCode {
        self.inner.as_response_error().status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let body = match self.inner.as_error::<ApiError>() {
            Some(api) => api.body(&self.id),
            None => ApiError::from_status(self.status_code()).body(&self.id),
        };
        let mut res = HttpResponse::build(self.status_code());
        res.insert_header((header::X_CONTENT_TYPE_OPTIONS, NOSNIFF));
        if let Ok(v) = HeaderValue::from_str(&self.id) {
            res.insert_header((header::HeaderName::from_static("x-request-id"), v));
        }
        res.json(body)
    }
}
