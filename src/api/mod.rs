//! The HTTP layer's shared pieces: the request-context middleware, success envelopes, body
//! parsing; pagination in `page.rs`.
//!
//! Architecture invariant: only `api/` and the resource handlers know HTTP and JSON envelopes;
//! stores speak typed Rust values.

pub mod allow;
pub mod context;
pub mod deadline;
pub mod error;
pub mod idempotency;
pub mod openapi;
pub mod page;
pub mod ratelimit;
pub mod request_id;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;

use crate::storage::idempotency::StoredAnswer;
pub use context::request_context;
pub use error::{ApiError, ErrorCode, FieldError};
pub use page::{Listed, PageQuery, PageRequest, Pagination};
pub use request_id::current as current_request_id;

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

/// The `data` of a DELETE: `{"id": "...", "deleted": true}` (api.md §2).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Deleted {
    pub id: String,
    /// Always true.
    pub deleted: bool,
}

/// 200 with `{"id", "deleted": true}`.
pub fn deleted(id: String) -> HttpResponse {
    ok(&Deleted { id, deleted: true })
}

/// 200 with `{"success": true, "data": ..., "meta"}`.
pub fn ok<T: Serialize>(data: &T) -> HttpResponse {
    envelope(StatusCode::OK, data, None)
}

/// 201 with a `Location` header.
pub fn created<T: Serialize>(location: &str, data: &T) -> HttpResponse {
    located(StatusCode::CREATED, location, data)
}

/// 202 with a `Location` header: the work goes on in the background (a job).
pub fn accepted<T: Serialize>(location: &str, data: &T) -> HttpResponse {
    located(StatusCode::ACCEPTED, location, data)
}

fn located<T: Serialize>(status: StatusCode, location: &str, data: &T) -> HttpResponse {
    let mut res = envelope(status, data, None);
    if let Ok(v) = HeaderValue::from_str(location) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res
}

/// 200 with a list and its pagination.
pub fn list<T: Serialize>(data: &[T], pagination: &Pagination) -> HttpResponse {
    envelope(StatusCode::OK, &data, Some(pagination))
}

/// The answer of a replayed idempotent request, as first sent.
pub fn replay(answer: &StoredAnswer) -> HttpResponse {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut res = envelope(status, &answer.data, None);
    if let Some(loc) = answer
        .location
        .as_deref()
        .and_then(|l| HeaderValue::from_str(l).ok())
    {
        res.headers_mut().insert(header::LOCATION, loc);
    }
    res
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

/// Runs `f` on the store's thread with the app id `app` (the handlers' usual read or write).
pub async fn in_app<T, F>(state: &crate::state::AppState, app: &str, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&sled::Db, &str) -> Result<T, crate::storage::StoreError> + Send + 'static,
{
    let app = app.to_owned();
    Ok(state.store.run(move |db| f(db, &app)).await?)
}

/// Reads (at most `limit` bytes, before and after undoing its `Content-Encoding`) and parses a
/// JSON object body; returns the decoded bytes too.
pub async fn json_body(
    req: &HttpRequest,
    payload: actix_web::web::Payload,
    limit: usize,
) -> Result<(bytes::Bytes, serde_json::Map<String, serde_json::Value>), ApiError> {
    let raw = read_body(payload, limit).await?;
    let raw = match decode_content(req, raw.into(), limit) {
        Ok(body) => bytes::Bytes::from(body),
        Err(Undecoded::TooLarge) => {
            return Err(ApiError::field(
                "body",
                format!("larger than {limit} bytes once decompressed"),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let fields = json_object(req, &raw)?;
    Ok((raw, fields))
}

/// Why a body's `Content-Encoding` could not be undone.
#[derive(Debug, PartialEq)]
pub enum Undecoded {
    /// The decoded body is over the limit.
    TooLarge,
    /// Not valid gzip.
    Invalid(String),
    /// An encoding other than gzip or identity.
    Unsupported(String),
}

impl From<Undecoded> for ApiError {
    /// 400 naming `body` or `Content-Encoding` (the caller answers `TooLarge` its own way).
    fn from(e: Undecoded) -> ApiError {
        match e {
            Undecoded::TooLarge => ApiError::field("body", "too large once decompressed"),
            Undecoded::Invalid(cause) => ApiError::field("body", format!("invalid gzip: {cause}")),
            Undecoded::Unsupported(other) => ApiError::field(
                "Content-Encoding",
                format!("{other} is not supported; use gzip or none"),
            ),
        }
    }
}

/// Undoes a body's `Content-Encoding`: gzip (`x-gzip`) is decompressed, reading at most
/// `limit` decoded bytes (a bomb stops there); none or `identity` passes; any other is refused.
/// The collector and every JSON body of the API read bodies through it.
pub fn decode_content(req: &HttpRequest, raw: Vec<u8>, limit: usize) -> Result<Vec<u8>, Undecoded> {
    let encoding = req
        .headers()
        .get(header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?"))
        .unwrap_or("identity");
    match encoding.trim().to_ascii_lowercase().as_str() {
        "" | "identity" => Ok(raw),
        "gzip" | "x-gzip" => gunzip(&raw, limit),
        other => Err(Undecoded::Unsupported(other.to_owned())),
    }
}

/// A gzip body decompressed, reading at most `limit` decoded bytes (a bomb stops there).
pub fn gunzip(raw: &[u8], limit: usize) -> Result<Vec<u8>, Undecoded> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(raw)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Undecoded::Invalid(e.to_string()))?;
    if out.len() > limit {
        return Err(Undecoded::TooLarge);
    }
    Ok(out)
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

/// A body that could not be read: 408 REQUEST_TIMEOUT when it missed its deadline
/// (`deadline.rs`), else 400 VALIDATION_ERROR on `body`. Every route reading a body by hand
/// (this module's `read_body`, the collector's) answers through it.
pub fn payload_error(e: actix_web::error::PayloadError) -> ApiError {
    match e {
        actix_web::error::PayloadError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            ApiError::new(ErrorCode::RequestTimeout, deadline::BODY_TIMEOUT)
        }
        other => ApiError::field("body", other.to_string()),
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
        let chunk = chunk.map_err(payload_error)?;
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

/// Every request that matches no route: 405 with `Allow` when the path is known (another
/// method was asked), else 404 (naming the path without its trailing slash when that one is
/// known: no path has one, and none is silently rewritten).
pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let allowed = req
        .app_data::<actix_web::web::Data<allow::Allowed>>()
        .and_then(|a| a.methods(req.path()));
    let path = req.path();
    let without_slash = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty() && !p.ends_with('/'));
    let known = |p: &str| {
        req.app_data::<actix_web::web::Data<allow::Allowed>>()
            .is_some_and(|a| a.methods(p).is_some())
    };
    match (allowed, without_slash) {
        (Some(methods), _) => Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{} is not allowed here; allowed: {methods}", req.method()),
        )
        .with_header("allow", methods.to_owned())),
        (None, Some(p)) if known(p) => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no such route; paths have no trailing slash: {p}"),
        )),
        (None, _) => Err(ApiError::new(ErrorCode::NotFound, "no such route")),
    }
}
