//! The HTTP layer's shared pieces: the request-context middleware, success envelopes, body
//! parsing, pagination parameters.
//!
//! Architecture invariant: only `api/` and the resource handlers know HTTP and JSON envelopes;
//! stores speak typed Rust values.

pub mod auth;
pub mod ratelimit;

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use serde::Serialize;
use tracing::Instrument;

use crate::error::{ApiError, Enveloped, FieldError};

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being served (set by [`request_context`]).
pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(|id| id.clone())
        .unwrap_or_else(|_| crate::ids::request_id())
}

/// Outermost middleware: gives every request an id (`X-Request-Id`, `meta.requestId`, the log
/// span), turns every error, including actix's own bare 404/405, into the error envelope, and
/// logs one line per request.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let id = crate::ids::request_id();
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.path());
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
    let rate = res
        .request()
        .extensions()
        .get::<ratelimit::RateLimitInfo>()
        .copied();
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
        if let Ok(v) = HeaderValue::from_str(&self.id) {
            res.insert_header((header::HeaderName::from_static("x-request-id"), v));
        }
        res.json(body)
    }
}

#[derive(Serialize)]
struct Meta {
    #[serde(rename = "requestId")]
    request_id: String,
}

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    success: bool,
    data: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pagination: Option<&'a Pagination>,
    meta: Meta,
}

/// `pagination` of a list answer.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    pub limit: usize,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

fn envelope<T: Serialize>(
    status: StatusCode,
    data: &T,
    pagination: Option<&Pagination>,
) -> HttpResponse {
    HttpResponse::build(status).json(Envelope {
        success: true,
        data,
        pagination,
        meta: Meta {
            request_id: current_request_id(),
        },
    })
}

/// 200 with `{"success": true, "data": ..., "meta"}`.
pub fn ok<T: Serialize>(data: &T) -> HttpResponse {
    envelope(StatusCode::OK, data, None)
}

/// 201 with a `Location` header.
pub fn created<T: Serialize>(location: &str, data: &T) -> HttpResponse {
    let mut res = envelope(StatusCode::CREATED, data, None);
    if let Ok(v) = HeaderValue::from_str(location) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res
}

/// 200 with a list and its pagination.
pub fn list<T: Serialize>(data: &[T], pagination: &Pagination) -> HttpResponse {
    envelope(StatusCode::OK, &data, Some(pagination))
}

/// A success answer kept for replay (idempotency), independent of the request id.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct StoredAnswer {
    pub status: u16,
    pub location: Option<String>,
    pub data: serde_json::Value,
}

impl StoredAnswer {
    pub fn respond(&self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK);
        let mut res = envelope(status, &self.data, None);
        if let Some(loc) = self
            .location
            .as_deref()
            .and_then(|l| HeaderValue::from_str(l).ok())
        {
            res.headers_mut().insert(header::LOCATION, loc);
        }
        res
    }
}

/// The media type of a request without parameters, lowercased (`""` when absent).
pub fn content_type(req: &HttpRequest) -> String {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    ct.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Parses a JSON request body: the content type must be JSON (`application/json`, or any
/// `+json` type such as `application/merge-patch+json`), the body an object.
pub fn json_object(
    req: &HttpRequest,
    body: &[u8],
) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    let essence = content_type(req);
    if essence != "application/json"
        && !(essence.starts_with("application/") && essence.ends_with("+json"))
    {
        return Err(ApiError::field("Content-Type", "must be application/json"));
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::field("body", "must be a JSON object")),
        Err(e) => Err(ApiError::field("body", format!("malformed JSON: {e}"))),
    }
}

/// Reads (at most `limit` bytes) and parses a JSON object body; returns the raw bytes too (the
/// idempotency fingerprint needs them).
pub async fn json_body(
    req: &HttpRequest,
    payload: actix_web::web::Payload,
    limit: usize,
) -> Result<(bytes::Bytes, serde_json::Map<String, serde_json::Value>), ApiError> {
    let raw = read_body(payload, limit).await?;
    let fields = json_object(req, &raw)?;
    Ok((raw, fields))
}

/// `limit` and `cursor` of every list: limit 1..=100, default 20.
pub fn page_limit(limit: Option<&str>) -> Result<usize, FieldError> {
    match limit {
        None => Ok(20),
        Some(s) => match s.parse::<usize>() {
            Ok(n @ 1..=100) => Ok(n),
            _ => Err(FieldError::new("limit", "must be an integer from 1 to 100")),
        },
    }
}

/// Error handlers for actix's own extractors, so their failures use the envelope too.
pub fn query_error(
    err: actix_web::error::QueryPayloadError,
    _req: &HttpRequest,
) -> actix_web::Error {
    let msg = err.to_string();
    let msg = msg
        .strip_prefix("Query deserialize error: ")
        .unwrap_or(&msg);
    // serde names the offending parameter between backticks: report it as the field.
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some((name, expected)) = rest.split_once('`') {
            let expected = expected.trim_start_matches(", expected ").replace('`', "");
            return ApiError::field(
                name.to_owned(),
                format!("unknown query parameter; expected {expected}"),
            )
            .into();
        }
    }
    if let Some(rest) = msg.strip_prefix("duplicate field `") {
        let name = rest.split('`').next().unwrap_or("query");
        return ApiError::field(
            name.to_owned(),
            "given twice; use a comma to pass several values",
        )
        .into();
    }
    ApiError::field("query", msg.to_owned()).into()
}

pub fn path_error(err: actix_web::error::PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::field("path", err.to_string()).into()
}

pub fn json_error(err: actix_web::error::JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as J;
    match err {
        J::ContentType => ApiError::field("Content-Type", "must be application/json").into(),
        J::Overflow { limit } | J::OverflowKnownLength { limit, .. } => {
            ApiError::field("body", format!("larger than {limit} bytes")).into()
        }
        other => ApiError::field("body", format!("malformed JSON: {other}")).into(),
    }
}

/// Reads a request body of at most `limit` bytes; a bigger one is 400 VALIDATION_ERROR (api.md §2).
pub async fn read_body(
    mut payload: actix_web::web::Payload,
    limit: usize,
) -> Result<bytes::Bytes, ApiError> {
    use futures_util::StreamExt;
    let mut buf = bytes::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::field("body", e.to_string()))?;
        if buf.len() + chunk.len() > limit {
            return Err(ApiError::field(
                "body",
                format!("larger than {limit} bytes"),
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Every route that matches nothing.
pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::new(
        crate::error::ErrorCode::NotFound,
        "no such route",
    ))
}
