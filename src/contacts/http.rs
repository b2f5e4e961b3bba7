//! The handlers of `/acq/v1/contacts`: query and body parsing, permissions, envelopes.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::model::{self, Contact, ContactPatch, Mode, Source, Status};
use super::store::{self, BatchOutcome, ContactError, Filter, Sort};
use crate::api::{self, ApiError, FieldError, Listed, PageQuery, PageRequest};
use crate::config::Quota;
use crate::fields::{names, request_body, Body, Field, Kind, NameSet};
use crate::ids::Timestamp;
use crate::state::AppState;
use crate::storage::cursor;
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

/// Query parameters of the contact list. A comma inside a value means OR; an empty value (or
/// an empty item between commas) is 400.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Pipeline statuses, comma-separated.
    #[param(
        pattern = "^\\s*(new|contacted|interested|qualified|demo_scheduled|customer|lost|unsubscribed)\\s*(,\\s*(new|contacted|interested|qualified|demo_scheduled|customer|lost|unsubscribed)\\s*)*$"
    )]
    status: Option<String>,
    /// Origins, comma-separated.
    #[param(
        pattern = "^\\s*(manual|import|prospection|form|api|enrichment)\\s*(,\\s*(manual|import|prospection|form|api|enrichment)\\s*)*$"
    )]
    source: Option<String>,
    /// Contacts carrying any of these tags, comma-separated.
    #[param(pattern = "^[^,]*\\S[^,]*(,[^,]*\\S[^,]*)*$")]
    tag: Option<String>,
    /// Exact e-mail addresses (normalised), comma-separated.
    #[param(pattern = "^[^,]*\\S[^,]*(,[^,]*\\S[^,]*)*$")]
    email: Option<String>,
    /// Company ids, comma-separated.
    #[param(pattern = "^[^,]*\\S[^,]*(,[^,]*\\S[^,]*)*$")]
    company_id: Option<String>,
    /// Case-insensitive text in e-mail, first name, last name or company.
    #[param(pattern = "\\S")]
    q: Option<String>,
    #[param(value_type = Option<i64>, minimum = 0, maximum = 100)]
    score_min: Option<String>,
    #[param(value_type = Option<i64>, minimum = 0, maximum = 100)]
    score_max: Option<String>,
    /// ISO 8601 (a date-time with offset, or a date); contacts created strictly after.
    #[param(format = DateTime)]
    created_after: Option<String>,
    /// ISO 8601 (a date-time with offset, or a date); contacts updated strictly after.
    #[param(format = DateTime)]
    updated_after: Option<String>,
    /// createdAt, updatedAt, score, lastName or email; `-` for descending, none or `+` for
    /// ascending. Default `-createdAt`.
    #[param(pattern = "^[-+ ]?(createdAt|updatedAt|score|lastName|email)$")]
    sort: Option<String>,
}

/// The comma-separated values of a filter; `Err` when the parameter or one of its values is
/// empty (`status=`, `status=new,`), which would otherwise pass silently.
fn split(v: &Option<String>) -> Result<Vec<String>, String> {
    let Some(s) = v.as_deref() else {
        return Ok(Vec::new());
    };
    s.split(',')
        .map(str::trim)
        .map(|v| {
            if v.is_empty() {
                Err("must not be empty: give one value or several separated by commas".to_owned())
            } else {
                Ok(v.to_owned())
            }
        })
        .collect()
}

/// Collects the errors of a query's parameters, so one answer names every bad one.
#[derive(Default)]
struct QueryErrors(Vec<FieldError>);

impl QueryErrors {
    fn check<T>(&mut self, name: &str, parsed: Result<T, String>) -> Option<T> {
        parsed
            .map_err(|m| self.0.push(FieldError::new(name, m)))
            .ok()
    }

    /// Comma-separated names, each one of a closed set.
    fn names<T>(
        &mut self,
        name: &str,
        raw: &Option<String>,
        parse: fn(&str) -> Option<T>,
        all: String,
    ) -> Vec<T> {
        let parsed: Result<Vec<T>, String> = split(raw).and_then(|values| {
            values
                .iter()
                .map(|v| parse(v).ok_or_else(|| format!("unknown value {v:?}; one of: {all}")))
                .collect()
        });
        self.check(name, parsed).unwrap_or_default()
    }

    /// Comma-separated free values (none empty).
    fn values(&mut self, name: &str, raw: &Option<String>) -> Vec<String> {
        self.check(name, split(raw)).unwrap_or_default()
    }

    /// A free text that must not be empty when given.
    fn text(&mut self, name: &str, raw: &Option<String>) -> Option<String> {
        let parsed = raw.as_deref().map(|s| match s.trim() {
            "" => Err("must not be empty".to_owned()),
            t => Ok(t.to_lowercase()),
        });
        self.check(name, parsed.transpose()).flatten()
    }

    fn score(&mut self, name: &str, raw: &Option<String>) -> Option<i64> {
        let parsed = raw.as_deref().map(|s| match s.parse::<i64>() {
            Ok(v) if (0..=model::MAX_SCORE).contains(&v) => Ok(v),
            _ => Err(format!("must be an integer from 0 to {}", model::MAX_SCORE)),
        });
        self.check(name, parsed.transpose()).flatten()
    }

    fn time(&mut self, name: &str, raw: &Option<String>) -> Option<Timestamp> {
        let parsed = raw.as_deref().map(|s| {
            Timestamp::parse(s).ok_or_else(|| "must be an ISO 8601 date or timestamp".to_owned())
        });
        self.check(name, parsed.transpose()).flatten()
    }
}

/// `createdAt`, `-score`, `+email` (a `+` may arrive decoded as a space).
fn parse_sort(raw: Option<&str>) -> Result<Sort, String> {
    Sort::parse(raw, "-createdAt").ok_or_else(|| {
        "must be createdAt, updatedAt, score, lastName or email, optionally with '-'".into()
    })
}

pub fn parse_list(
    q: &Listed<ListQuery>,
    app: &str,
) -> Result<(Filter, Sort, PageRequest), ApiError> {
    let mut errors = QueryErrors::default();
    let filter = Filter {
        statuses: errors.names("status", &q.status, Status::parse, Status::names()),
        sources: errors.names("source", &q.source, Source::parse, Source::names()),
        tags: errors.values("tag", &q.tag),
        emails: errors
            .values("email", &q.email)
            .iter()
            .map(|e| {
                model::Email::parse(e).map_or_else(|_| e.to_lowercase(), |e| e.as_str().into())
            })
            .collect(),
        company_ids: errors.values("companyId", &q.company_id),
        q: errors.text("q", &q.q),
        score_min: errors.score("scoreMin", &q.score_min),
        score_max: errors.score("scoreMax", &q.score_max),
        created_after: errors.time("createdAfter", &q.created_after),
        updated_after: errors.time("updatedAfter", &q.updated_after),
    };
    let sort = errors.check("sort", parse_sort(q.sort.as_deref()));
    let listing = sort.map(|s| s.listing(app));
    let page = q.page.parse(listing, cursor::ends_with_id, &mut errors.0);
    match (sort, page) {
        (Some(sort), Some(page)) if errors.0.is_empty() => Ok((filter, sort, page)),
        _ => Err(ApiError::validation(errors.0)),
    }
}

/// List contacts, filtered and sorted, one page at a time (cursor pagination).
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    params(ListQuery, PageQuery),
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
    query: Listed<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsRead)?;
    let (filter, sort, page) = parse_list(&query, &who.app_id)?;
    let (app, asked) = (who.app_id.clone(), page.clone());
    let found = state
        .store
        .run(move |db| store::list(db, &app, &filter, sort.field, asked.walk()))
        .await?;
    Ok(page.answer(&found))
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

/// Adds to the OpenAPI document what a field's own schema cannot say: a body that sets status
/// `unsubscribed` cannot set `unsubscribed` to false or null in the same body.
pub fn document_rules(doc: &mut Value) {
    let rule = json!({
        "if": { "properties": { "status": { "const": "unsubscribed" } }, "required": ["status"] },
        "then": { "properties": { "unsubscribed": { "const": true } } }
    });
    for name in ["ContactInput", "ContactChanges"] {
        if let Some(schema) = doc["components"]["schemas"].get_mut(name) {
            schema["allOf"] = json!([rule]);
        }
    }
}

request_body! {
    /// The body of a create: `email` is required; unknown and read-only fields are refused.
    ContactInput = model::CONTACT, Mode::Create
}

request_body! {
    /// The body of a PATCH: a JSON Merge Patch of the contact's fields (absent = unchanged,
    /// null = cleared; email, status and source cannot be cleared).
    ContactChanges = model::CONTACT, Mode::Patch
}

request_body! {
    /// The body of a batch.
    BatchInput = BATCH, Mode::Create
}

names! {
    /// `create` (default) or `upsert` (by e-mail).
    BatchMode { Create = "create", Upsert = "upsert" }
}

static BATCH: Body = Body::new(
    "BatchInput",
    "",
    &[
        Field::new("mode", Kind::Names(NameSet::of::<BatchMode>())),
        Field::new(
            "contacts",
            Kind::Custom {
                parse: batch_items,
                schema: batch_items_schema,
                hint: "an array of contacts",
            },
        )
        .required()
        .doc(
            "Contacts shaped as `ContactInput`. Each item is checked on its own: an invalid item \
             is reported in its result (`result: error`), never as a 400 for the whole batch.",
        ),
    ],
);

/// 1 to [`MAX_BATCH`] objects (each checked later, on its own).
fn batch_items(at: &str, v: &Value) -> Result<Value, Vec<FieldError>> {
    let one = |m: String| vec![FieldError::new(at, m)];
    let Value::Array(items) = v else {
        return Err(one("is required: an array of contacts".into()));
    };
    if items.is_empty() {
        return Err(one("must hold at least one contact".into()));
    }
    if items.len() > MAX_BATCH {
        return Err(one(format!("must hold at most {MAX_BATCH} contacts")));
    }
    let errors: Vec<FieldError> = (items.iter().enumerate())
        .filter(|(_, item)| !item.is_object())
        .map(|(i, _)| FieldError::new(format!("{at}[{i}]"), "must be an object"))
        .collect();
    if errors.is_empty() {
        Ok(v.clone())
    } else {
        Err(errors)
    }
}

fn batch_items_schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::Object))
        .min_items(Some(1))
        .max_items(Some(MAX_BATCH))
        .into()
}

/// Create a contact. `email` is required and unique per app. Honors `Idempotency-Key`.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    request_body(content = ContactInput),
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$", description = "1 to 255 printable ASCII characters; replays the first answer for 24 h")),
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
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let limit = state.settings.plan(who.plan).limit(Quota::Contacts);
    let by = who.actor();
    api::idempotency::once(
        &state,
        &who.app_id,
        &req,
        &fields,
        store::exists,
        || async {
            let patch = ContactPatch::parse(&fields, Mode::Create).map_err(ApiError::validation)?;
            let contact = store::build(&who.app_id, &patch, state.now())?;
            let stored = contact.clone();
            state
                .store
                .run(move |db| Ok(store::create(db, &stored, limit, &by)))
                .await??;
            Ok(StoredAnswer {
                status: 201,
                location: Some(location(&contact)),
                data: json!(contact),
                holds: vec![contact.id.clone()],
            })
        },
    )
    .await
}

/// Update a contact with a JSON Merge Patch (RFC 7396): absent = unchanged, null = cleared.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "Contact id")),
    request_body(content = ContactChanges, content_type = "application/merge-patch+json"),
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
    let patch = ContactPatch::parse(&fields, Mode::Patch).map_err(ApiError::validation)?;
    let (now, by) = (state.now(), who.actor());
    let updated = state
        .store
        .run(move |db| Ok(store::update(db, &app, &id, &patch, (now, &by))))
        .await??;
    Ok(api::ok(&updated))
}

/// Delete a contact for good, with every index entry that names it and every kept
/// `Idempotency-Key` answer that shows it (GDPR erasure).
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "Contact id")),
    responses((status = 200, body = api::Deleted), (status = 404))
)]
#[delete("/contacts/{id}")]
async fn delete_contact(
    who: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsDelete)?;
    let id = id.into_inner();
    let (gone, now, by) = (id.clone(), state.now(), who.actor());
    api::in_app(&state, &who.app_id, move |db, app| {
        Ok(store::delete(db, app, &id, (now, &by)))
    })
    .await??;
    Ok(api::deleted(gone))
}

/// The items of a batch parsed one by one (an invalid item is reported in its result, not
/// as a 400 for the whole batch) and whether it upserts.
type BatchItems = Vec<Result<ContactPatch, Vec<FieldError>>>;

/// `{"mode": "create"|"upsert", "contacts": [...]}`.
fn parse_batch(fields: &Map<String, Value>) -> Result<(bool, BatchItems), ApiError> {
    let parsed = BATCH
        .parse(fields, Mode::Create)
        .map_err(ApiError::validation)?;
    let upsert = parsed.name("mode") == Some(BatchMode::Upsert);
    let items = (parsed.get("contacts").and_then(Value::as_array).into_iter())
        .flatten()
        .filter_map(Value::as_object)
        .map(|item| ContactPatch::parse(item, Mode::Create))
        .collect();
    Ok((upsert, items))
}

/// What became of one item of a batch.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum ItemResult {
    Created,
    Updated,
    Error,
}

/// The error of a failed batch item (the error envelope's `error`).
#[derive(Serialize, ToSchema)]
struct ItemError {
    code: String,
    message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<FieldError>,
}

/// One item's result: `contact` when created or updated, `error` when not.
#[derive(Serialize, ToSchema)]
struct BatchItem {
    index: usize,
    /// The contact's id; null on error.
    id: Option<String>,
    result: ItemResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    contact: Option<Contact>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ItemError>,
}

/// The answer of a batch: one result per item, in order, and the counts.
#[derive(Serialize, ToSchema)]
struct BatchAnswer {
    results: Vec<BatchItem>,
    created: usize,
    updated: usize,
    failed: usize,
}

fn batch_answer(outcomes: Vec<BatchOutcome>) -> BatchAnswer {
    let mut answer = BatchAnswer {
        results: Vec::with_capacity(outcomes.len()),
        created: 0,
        updated: 0,
        failed: 0,
    };
    for (index, outcome) in outcomes.into_iter().enumerate() {
        let (result, contact, error) = match outcome {
            BatchOutcome::Created(c) => (ItemResult::Created, Some(c), None),
            BatchOutcome::Updated(c) => (ItemResult::Updated, Some(c), None),
            BatchOutcome::Failed(e) => {
                let e = ApiError::from(e);
                let error = ItemError {
                    code: e.code.as_str().to_owned(),
                    message: e.message,
                    details: e.details,
                };
                (ItemResult::Error, None, Some(error))
            }
        };
        match result {
            ItemResult::Created => answer.created += 1,
            ItemResult::Updated => answer.updated += 1,
            ItemResult::Error => answer.failed += 1,
        }
        answer.results.push(BatchItem {
            index,
            id: contact.as_ref().map(|c| c.id.clone()),
            result,
            contact,
            error,
        });
    }
    answer
}

/// Create or upsert (by e-mail) up to 100 contacts, with one result per item.
#[utoipa::path(
    tag = "contacts",
    security(("api_key" = [])),
    request_body(content = BatchInput),
    responses((status = 200, body = BatchAnswer), (status = 400), (status = 403, description = "FORBIDDEN"))
)]
#[post("/contacts/batch")]
async fn batch_contacts(
    who: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    who.require(Permission::ContactsWrite)?;
    let (_, fields) = api::json_body(&req, payload, state.settings.server.max_body_bytes).await?;
    let (upsert, items) = parse_batch(&fields)?;
    let limit = state.settings.plan(who.plan).limit(Quota::Contacts);
    api::idempotency::once(
        &state,
        &who.app_id,
        &req,
        &fields,
        store::exists,
        || async {
            let (app, now, by) = (who.app_id.clone(), state.now(), who.actor());
            let outcomes = state
                .store
                .run(move |db| store::batch(db, &app, &items, upsert, limit, (now, &by)))
                .await?;
            let holds = outcomes
                .iter()
                .filter_map(BatchOutcome::contact)
                .map(|c| c.id.clone())
                .collect();
            Ok(StoredAnswer {
                status: 200,
                location: None,
                holds,
                data: json!(batch_answer(outcomes)),
            })
        },
    )
    .await
}
