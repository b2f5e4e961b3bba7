//! The handlers of `/acq/v1/contacts`: query and body parsing, permissions, envelopes.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use utoipa::IntoParams;
use utoipa_actix_web::service_config::ServiceConfig;

use super::model::{self, Contact};
use super::store::{self, BatchOutcome, ContactError, Cursor, Filter, Sort, SortField};
use crate::api::{self, ApiError, FieldError, Pagination};
use crate::config::Quota;
use crate::state::AppState;
use crate::storage::idempotency::StoredAnswer;
use crate::tenants::{Permission, Principal};

pub const MAX_BATCH: usize = 100;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_contacts)
        .service(batch_contacts)
        .service(get_contact)
        .service(create_contact)
        .service(update_contact)
        .service(delete_contact);
}

impl From<ContactError> for ApiError {
    fn from(e: ContactError) -> Self {
        match e {
            ContactError::NotFound => ApiError::not_found("contact"),
            ContactError::Invalid(details) => ApiError::validation(details),
            ContactError::NeedsConsent => ApiError::conflict(
                "the contact is unsubscribed: leaving that state requires gdprConsent: true in the same request",
            ),
            ContactError::DuplicateEmail { existing_id } => {
                ApiError::conflict(format!("a contact with this email already exists: {existing_id}"))
                    .with_details(vec![FieldError::new("email", format!("already used by contact {existing_id}"))])
            }
            ContactError::PlanLimit { limit, current } => {
                ApiError::plan_limit(Quota::Contacts, limit, current)
            }
            ContactError::Store(e) => e.into(),
        }
    }
}

/// Query parameters of the contact list. A comma inside a value means OR.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Pipeline statuses, comma-separated.
    status: Option<String>,
    /// Origins, comma-separated.
    source: Option<String>,
    /// Contacts carrying any of these tags, comma-separated.
    tag: Option<String>,
    /// Exact e-mail addresses (normalised), comma-separated.
    email: Option<String>,
    company_id: Option<String>,
    /// Case-insensitive text in e-mail, first name, last name or company.
    q: Option<String>,
    score_min: Option<String>,
    score_max: Option<String>,
    /// ISO 8601; contacts created strictly after.
    created_after: Option<String>,
    /// ISO 8601; contacts updated strictly after.
    updated_after: Option<String>,
    /// createdAt, updatedAt, score, lastName or email; `-` for descending. Default `-createdAt`.
    sort: Option<String>,
    /// 1..100, default 20.
    limit: Option<String>,
    /// `pagination.nextCursor` of the previous page.
    cursor: Option<String>,
}

fn split(v: &Option<String>) -> Vec<String> {
    v.as_deref()
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn parse_list(q: &ListQuery, app: &str) -> Result<(Filter, Sort, usize, Option<Cursor>), ApiError> {
    let mut errors = Vec::new();
    let mut enumerated = |name: &str, raw: &Option<String>, allowed: &[&str]| {
        let values = split(raw);
        if let Some(bad) = values.iter().find(|v| !allowed.contains(&v.as_str())) {
            errors.push(FieldError::new(
                name,
                format!("unknown value {bad:?}; one of: {}", allowed.join(", ")),
            ));
        }
        values
    };
    let statuses = enumerated("status", &q.status, &model::STATUSES);
    let sources = enumerated("source", &q.source, &model::SOURCES);
    let mut score = |name: &str, raw: &Option<String>| match raw.as_deref().map(str::parse::<i64>) {
        None => None,
        Some(Ok(v)) if (0..=model::MAX_SCORE).contains(&v) => Some(v),
        Some(_) => {
            errors.push(FieldError::new(
                name,
                format!("must be an integer from 0 to {}", model::MAX_SCORE),
            ));
            None
        }
    };
    let score_min = score("scoreMin", &q.score_min);
    let score_max = score("scoreMax", &q.score_max);
    let mut date =
        |name: &str, raw: &Option<String>| match raw.as_deref().map(crate::ids::parse_iso) {
            None => None,
            Some(Some(t)) => Some(t),
            Some(None) => {
                errors.push(FieldError::new(
                    name,
                    "must be an ISO 8601 date or timestamp",
                ));
                None
            }
        };
    let created_after = date("createdAfter", &q.created_after);
    let updated_after = date("updatedAfter", &q.updated_after);
    let sort_raw = q.sort.as_deref().unwrap_or("-createdAt");
    let (descending, name) = match sort_raw.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, sort_raw.strip_prefix('+').unwrap_or(sort_raw)),
    };
    let sort = match SortField::parse(name) {
        Some(field) => Some(Sort { field, descending }),
        None => {
            errors.push(FieldError::new(
                "sort",
                "must be createdAt, updatedAt, score, lastName or email, optionally with '-'",
            ));
            None
        }
    };
    let limit = api::page_limit(q.limit.as_deref())
        .map_err(|e| errors.push(e))
        .ok();
    let cursor = match (&q.cursor, sort) {
        (Some(raw), Some(sort)) => match Cursor::decode(raw, sort, app) {
            Some(c) => Some(c),
            None => {
                errors.push(FieldError::new(
                    "cursor",
                    "malformed, or made for another sort order",
                ));
                None
            }
        },
        _ => None,
    };
    let emails = split(&q.email)
        .into_iter()
        .map(|e| e.to_lowercase())
        .collect();
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let filter = Filter {
        statuses,
        sources,
        tags: split(&q.tag),
        emails,
        company_ids: split(&q.company_id),
        q: q.q
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_lowercase),
        score_min,
        score_max,
        created_after,
        updated_after,
    };
    Ok((
        filter,
        sort.expect("checked"),
        limit.expect("checked"),
        cursor,
    ))
}

/// List contacts, filtered and sorted, one page at a time (cursor pagination).
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    responses(
        (status = 200, description = "A page of contacts", body = Vec<Contact>),
        (status = 400, description = "Invalid filter, sort, limit or cursor"),
        (status = 401), (status = 403), (status = 429)
    )
)]
#[get("/contacts")]
async fn list_contacts(
    who: Principal,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsRead)?;
    let (filter, sort, limit, cursor) = parse_list(&query, &who.app_id)?;
    let app = who.app_id.clone();
    let (page, next) = state
        .store
        .run(move |db| store::list(db, &app, &filter, sort, limit, cursor.as_ref()))
        .await?;
    let pagination = Pagination {
        limit,
        has_more: next.is_some(),
        next_cursor: next.map(|c| c.encode(sort, &who.app_id)),
    };
    Ok(api::list(&page, &pagination))
}

/// Get one contact.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "Contact id")),
    responses((status = 200, body = Contact), (status = 404), (status = 401), (status = 403))
)]
#[get("/contacts/{id}")]
async fn get_contact(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsRead)?;
    let app = who.app_id.clone();
    let id = id.into_inner();
    let found = state.store.run(move |db| store::get(db, &app, &id)).await?;
    found
        .map(|c| api::ok(&c))
        .ok_or_else(|| ApiError::not_found("contact"))
}

fn location(c: &Contact) -> String {
    format!("/acq/v1/contacts/{}", c.id)
}

/// Create a contact. `email` is required and unique per app. Honors `Idempotency-Key`.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    request_body(content = Object, description = "Contact fields (see Contact); email required"),
    params(("Idempotency-Key" = Option<String>, Header, description = "Replays the first answer for 24 h")),
    responses(
        (status = 201, body = Contact, headers(("Location" = String))),
        (status = 400, description = "Invalid fields, one detail each"),
        (status = 403, description = "FORBIDDEN or PLAN_LIMIT_REACHED"),
        (status = 409, description = "E-mail taken (names the existing id) or idempotency conflict")
    )
)]
#[post("/contacts")]
async fn create_contact(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsWrite)?;
    let (body, fields) =
        api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let limit = state.settings.plan(who.plan).limit(Quota::Contacts);
    api::idempotency::once(&state, &who.app_id, &req, &body, || async {
        let contact = store::build(&who.app_id, &fields)?;
        let stored = contact.clone();
        state
            .store
            .run(move |db| Ok(store::create(db, &stored, limit)))
            .await??;
        Ok(StoredAnswer {
            status: 201,
            location: Some(location(&contact)),
            data: json!(contact),
        })
    })
    .await
}

/// Update a contact with a JSON Merge Patch (RFC 7396): absent = unchanged, null = cleared.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "Contact id")),
    request_body(content = Object, content_type = "application/merge-patch+json"),
    responses((status = 200, body = Contact), (status = 400), (status = 404), (status = 409))
)]
#[patch("/contacts/{id}")]
async fn update_contact(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsWrite)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let app = who.app_id.clone();
    let id = id.into_inner();
    if !crate::ids::is_object_id(&id) {
        return Err(ApiError::not_found("contact"));
    }
    let updated = state
        .store
        .run(move |db| Ok(store::update(db, &app, &id, &fields)))
        .await??;
    Ok(api::ok(&updated))
}

/// Delete a contact for good, with every index entry that names it (GDPR erasure).
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "Contact id")),
    responses((status = 200, description = "{id, deleted: true}"), (status = 404))
)]
#[delete("/contacts/{id}")]
async fn delete_contact(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsDelete)?;
    let app = who.app_id.clone();
    let id = id.into_inner();
    let gone = id.clone();
    state
        .store
        .run(move |db| Ok(store::delete(db, &app, &id)))
        .await??;
    Ok(api::ok(&json!({ "id": gone, "deleted": true })))
}

/// Create or upsert (by e-mail) up to 100 contacts, with one result per item.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    request_body(content = Object, description = r#"{"mode": "create"|"upsert", "contacts": [ ... ]}"#),
    responses((status = 200, description = "{results: [{index, id, result, error?}], created, updated, failed}"), (status = 400))
)]
#[post("/contacts/batch")]
async fn batch_contacts(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsWrite)?;
    let (body, fields) =
        api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let mut errors = Vec::new();
    let upsert = match fields.get("mode") {
        None => false,
        Some(Value::String(m)) if m == "create" => false,
        Some(Value::String(m)) if m == "upsert" => true,
        Some(_) => {
            errors.push(FieldError::new("mode", "must be create or upsert"));
            false
        }
    };
    let items: Vec<Map<String, Value>> = match fields.get("contacts") {
        Some(Value::Array(items)) if items.is_empty() => {
            errors.push(FieldError::new(
                "contacts",
                "must hold at least one contact",
            ));
            Vec::new()
        }
        Some(Value::Array(items)) if items.len() > MAX_BATCH => {
            errors.push(FieldError::new(
                "contacts",
                format!("must hold at most {MAX_BATCH} contacts"),
            ));
            Vec::new()
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| match v {
                Value::Object(m) => Some(m.clone()),
                _ => {
                    errors.push(FieldError::new(
                        format!("contacts[{i}]"),
                        "must be an object",
                    ));
                    None
                }
            })
            .collect(),
        _ => {
            errors.push(FieldError::new(
                "contacts",
                "is required: an array of contacts",
            ));
            Vec::new()
        }
    };
    if let Some(unknown) = fields.keys().find(|k| *k != "mode" && *k != "contacts") {
        errors.push(FieldError::new(
            unknown.clone(),
            "is not a batch field (mode, contacts)",
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let limit = state.settings.plan(who.plan).limit(Quota::Contacts);
    api::idempotency::once(&state, &who.app_id, &req, &body, || async {
        let app = who.app_id.clone();
        let outcomes = state.store.run(move |db| store::batch(db, &app, &items, upsert, limit)).await?;
        let (mut created, mut updated, mut failed) = (0, 0, 0);
        let results: Vec<Value> = outcomes
            .into_iter()
            .enumerate()
            .map(|(index, outcome)| match outcome {
                BatchOutcome::Created(c) => {
                    created += 1;
                    json!({ "index": index, "id": c.id, "result": "created", "contact": c })
                }
                BatchOutcome::Updated(c) => {
                    updated += 1;
                    json!({ "index": index, "id": c.id, "result": "updated", "contact": c })
                }
                BatchOutcome::Failed(e) => {
                    failed += 1;
                    let e = ApiError::from(e);
                    let mut error = json!({ "code": e.code.as_str(), "message": e.message });
                    if !e.details.is_empty() {
                        error["details"] = json!(e.details);
                    }
                    json!({ "index": index, "id": null, "result": "error", "error": error })
                }
            })
            .collect();
        Ok(StoredAnswer {
            status: 200,
            location: None,
            data: json!({ "results": results, "created": created, "updated": updated, "failed": failed }),
        })
    })
    .await
}
