//! The Contacts pages of an app: the table (the API's filters, search, sort, cursor paging),
//! a contact's detail and edit form, and the CSV export of the current filter. Filters are
//! parsed by the API's own parser (`contacts::http::parse_list`) and edits by the model's
//! (`ContactPatch`), so the dashboard accepts exactly what the API does.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};
use serde_json::{Map, Value};

use crate::api::{Listed, PageRequest};
use crate::contacts::http::{parse_list, ListQuery};
use crate::contacts::model::{Contact, ContactPatch, Mode, Source, Status};
use crate::contacts::store::{self, ContactError, Cursor, Filter, Sort};
use crate::csv;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{
    self, csrf_field, error_for, field, form_errors, thousands, when, Section, Shell,
};
use crate::dashboard::session::{self, AppPage, AppPosted, Viewer};
use crate::state::AppState;
use crate::storage::cursor::Walk;
use crate::storage::StoreError;
use crate::tenants::App;
use crate::validation::FieldError;

/// Rows per page of the table.
const PAGE: &str = "50";
/// Contacts one table page reads at most (a selective filter then shows what it found so far
/// and continues on the next page), which keeps every page under 100 ms with 100 000 contacts.
const SCAN_BUDGET: usize = 10_000;
/// Rows read per store call while exporting.
const EXPORT_CHUNK: usize = 100;
/// The query parameters the table keeps (the API's names).
const PARAMS: [&str; 8] = [
    "q", "status", "source", "tag", "scoreMin", "scoreMax", "sort", "cursor",
];

/// The editable or importable fields: (API name, label, kind).
pub const FIELDS: [(&str, &str, Kind); 14] = [
    ("email", "E-mail", Kind::Text),
    ("firstName", "First name", Kind::Text),
    ("lastName", "Last name", Kind::Text),
    ("company", "Company", Kind::Text),
    ("jobTitle", "Job title", Kind::Text),
    ("phone", "Phone", Kind::Text),
    ("website", "Website", Kind::Text),
    ("address", "Address", Kind::Text),
    ("city", "City", Kind::Text),
    ("country", "Country", Kind::Text),
    ("status", "Status", Kind::Text),
    ("source", "Source", Kind::Text),
    ("tags", "Tags", Kind::Tags),
    ("score", "Score", Kind::Score),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// Comma-separated.
    Tags,
    Score,
}

/// A form or CSV value as the JSON the API would get: `""` clears a text, tags are split on
/// commas, a score must be an integer.
pub fn json_value(kind: Kind, raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    Ok(match kind {
        Kind::Text if raw.is_empty() => Value::Null,
        Kind::Text => Value::String(raw.to_owned()),
        Kind::Tags => Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| Value::String(t.to_owned()))
                .collect(),
        ),
        Kind::Score if raw.is_empty() => Value::Null,
        Kind::Score => match raw.parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => return Err("must be an integer from 0 to 100".into()),
        },
    })
}

/// The table's parameters of a query string, without empty ones (a form sends every field).
fn kept_params(query: &str, without_cursor: bool) -> Vec<(String, String)> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, v)| PARAMS.contains(&k.as_str()) && !v.trim().is_empty())
        .filter(|(k, _)| !(without_cursor && k == "cursor"))
        .collect()
}

fn encode(params: &[(String, String)]) -> String {
    serde_urlencoded::to_string(params).unwrap_or_default()
}

/// The filter, order and page of a query, or the errors of its fields.
fn parse(
    app: &str,
    params: &[(String, String)],
    limit: &str,
) -> Result<(Filter, Sort, PageRequest), Vec<FieldError>> {
    let mut all = params.to_vec();
    all.push(("limit".into(), limit.into()));
    let query = Listed::<ListQuery>::from_query(&encode(&all))
        .map_err(|e| vec![FieldError::new("query", e.to_string())])?;
    parse_list(&query, app).map_err(|e| e.details)
}

fn value_of<'a>(params: &'a [(String, String)], name: &str) -> &'a str {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

fn select(name: &str, label: &str, names: &[&str], current: &str, errors: &[FieldError]) -> Markup {
    html! {
        div.field.invalid[error_for(errors, name).is_some()] {
            label for=(format!("f-{name}")) { (label) }
            select #(format!("f-{name}")) name=(name) {
                option value="" { "Any" }
                @for n in names { option value=(n) selected[*n == current] { (n.replace('_', " ")) } }
            }
            @if let Some(m) = error_for(errors, name) { p.field-error { (m) } }
        }
    }
}

fn filters(app: &App, params: &[(String, String)], errors: &[FieldError]) -> Markup {
    let statuses: Vec<&str> = Status::ALL.iter().map(|s| s.name()).collect();
    let sources: Vec<&str> = Source::ALL.iter().map(|s| s.name()).collect();
    let v = |n: &str| value_of(params, n).to_owned();
    html! {
        form.filters.card role="search" method="get" action=(format!("/dashboard/apps/{}/contacts", app.id)) {
            div.grow { (field("Search", "q", "search", &v("q"), errors, html! {})) }
            (select("status", "Status", &statuses, &v("status"), errors))
            (select("source", "Source", &sources, &v("source"), errors))
            (field("Tag", "tag", "text", &v("tag"), errors, html! {}))
            div.small { (field("Score from", "scoreMin", "number", &v("scoreMin"), errors, html! {})) }
            div.small { (field("Score to", "scoreMax", "number", &v("scoreMax"), errors, html! {})) }
            @if !v("sort").is_empty() { input type="hidden" name="sort" value=(v("sort")); }
            button.button.primary type="submit" { "Apply" }
        }
    }
}

/// A column heading that sorts by `field` (descending first, then ascending).
fn sort_link(app: &App, params: &[(String, String)], field: &str, label: &str) -> Markup {
    let current = value_of(params, "sort");
    let now = match current {
        "" if field == "createdAt" => Some("descending"),
        s if s == format!("-{field}") => Some("descending"),
        s if s == field || s == format!("+{field}") => Some("ascending"),
        _ => None,
    };
    let next = if now == Some("descending") {
        field.to_owned()
    } else {
        format!("-{field}")
    };
    let mut p: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| k != "sort" && k != "cursor")
        .cloned()
        .collect();
    p.push(("sort".into(), next));
    html! {
        a href=(format!("/dashboard/apps/{}/contacts?{}", app.id, encode(&p))) aria-sort=[now] {
            (label) @match now { Some("descending") => " ↓", Some(_) => " ↑", None => "" }
        }
    }
}

fn name_of(c: &Contact) -> String {
    let name = [c.first_name.as_deref(), c.last_name.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if name.is_empty() {
        c.email.as_str().to_owned()
    } else {
        name
    }
}

fn table(app: &App, params: &[(String, String)], page: &[Contact]) -> Markup {
    html! {
        div.table-wrap {
            table aria-label="Contacts" {
                thead { tr {
                    th scope="col" { (sort_link(app, params, "lastName", "Name")) }
                    th scope="col" { (sort_link(app, params, "email", "E-mail")) }
                    th scope="col" { "Company" }
                    th scope="col" { "Status" }
                    th scope="col" { "Tags" }
                    th.num scope="col" { (sort_link(app, params, "score", "Score")) }
                    th scope="col" { (sort_link(app, params, "createdAt", "Created")) }
                } }
                tbody {
                    @for c in page {
                        tr {
                            td { a href=(format!("/dashboard/apps/{}/contacts/{}", app.id, c.id)) { (name_of(c)) } }
                            td { (c.email.as_str()) }
                            td { (c.company.as_deref().unwrap_or("")) }
                            td { span.badge.danger[c.status == Status::Unsubscribed].ok[c.status == Status::Customer] { (c.status.name().replace('_', " ")) } }
                            td { (c.tags.join(", ")) }
                            td.num { (c.score) }
                            td { (when(c.created_at)) }
                        }
                    }
                }
            }
        }
    }
}

/// One page of the table: the query's errors, or its contacts, next cursor and the app's count.
pub struct Listing {
    params: Vec<(String, String)>,
    errors: Vec<FieldError>,
    page: Vec<Contact>,
    next: Option<String>,
    /// The walk stopped at `SCAN_BUDGET` before the page was full.
    partial: bool,
    total: u64,
}

/// The query of a table page (`query`: the URL's query string), as the store reads it. Runs on
/// a store thread.
pub fn load(db: &sled::Db, app: &str, query: &str) -> Result<Listing, StoreError> {
    let params = kept_params(query, false);
    match parse(app, &params, PAGE) {
        Err(errors) => Ok(Listing {
            params,
            errors,
            page: Vec::new(),
            next: None,
            partial: false,
            total: 0,
        }),
        Ok((filter, sort, asked)) => {
            let walk = asked.walk().budget(SCAN_BUDGET);
            let found = store::list(db, app, &filter, sort.field, walk)?;
            Ok(Listing {
                params,
                errors: Vec::new(),
                next: asked.pagination(&found).next_cursor,
                partial: found.cut,
                page: found.items,
                total: store::count(db, app)?,
            })
        }
    }
}

/// The table page of a `Listing`.
pub fn render(viewer: &Viewer, app: &App, l: &Listing) -> Markup {
    let without_cursor: Vec<(String, String)> = l
        .params
        .iter()
        .filter(|(k, _)| k != "cursor")
        .cloned()
        .collect();
    let filtered = encode(&without_cursor);
    let base = format!("/dashboard/apps/{}/contacts", app.id);
    let next_href = l.next.as_ref().map(|n| {
        let mut p = without_cursor.clone();
        p.push(("cursor".into(), n.clone()));
        format!("{base}?{}", encode(&p))
    });
    let actions = html! {
        a.button href=(format!("{base}/import")) { "Import CSV" }
        a.button href=(format!("/dashboard/apps/{}/contacts.csv?{filtered}", app.id)) { "Export CSV" }
        a.button href=(format!("/dashboard/apps/{}/erasures", app.id)) { "Erase a person" }
    };
    let content = html! {
        (filters(app, &l.params, &l.errors))
        (form_errors(&l.errors, &["q", "status", "source", "tag", "scoreMin", "scoreMax"]))
        p.muted { (l.page.len()) " shown · " (thousands(l.total)) " contacts in " (app.name) }
        @if l.partial {
            p.notice role="status" { "Searched the next " (thousands(SCAN_BUDGET as u64)) " contacts; "
                (if l.page.is_empty() { "none matched yet" } else { "these matched" })
                ". “Keep searching” looks further." }
        }
        @if l.page.is_empty() && !l.partial {
            div.card.empty { p { "No contacts match." } }
        } @else if !l.page.is_empty() {
            (table(app, &l.params, &l.page))
        }
        nav.pager aria-label="Pages" {
            @if !value_of(&l.params, "cursor").is_empty() { a.button href=(format!("{base}?{filtered}")) { "← First page" } } @else { span {} }
            @if let Some(href) = next_href {
                a.button rel="next" href=(href) { (if l.partial { "Keep searching →" } else { "Next page →" }) }
            }
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Contacts,
        title: "Contacts",
        app: Some(app),
    };
    shell.render(actions, content)
}

/// `GET /dashboard/apps/{id}/contacts`.
pub async fn list(
    AppPage(state, viewer, app): AppPage,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    let (id, query) = (app.id.clone(), req.query_string().to_owned());
    let listing = state.store.run(move |db| load(db, &id, &query)).await?;
    Ok(layout::ok(render(&viewer, &app, &listing)))
}

/// `GET /dashboard/apps/{id}/contacts.csv`: every contact of the current filter, as CSV.
pub async fn export(
    AppPage(state, _, app): AppPage,
    req: HttpRequest,
) -> Result<HttpResponse, PageError> {
    let params = kept_params(req.query_string(), true);
    let (filter, sort, _) = parse(&app.id, &params, "1")
        .map_err(|e| PageError::Api(crate::api::ApiError::validation(e)))?;
    let mut out = csv::row(EXPORT_COLUMNS);
    let mut cursor: Option<Cursor> = None;
    loop {
        let (id, f, after) = (app.id.clone(), filter.clone(), cursor.take());
        let found = state
            .store
            .run(move |db| {
                let walk = Walk::new(EXPORT_CHUNK, after.as_ref()).descending(sort.descending);
                store::list(db, &id, &f, sort.field, walk)
            })
            .await?;
        for c in &found.items {
            out.push_str(&export_row(c));
        }
        match found.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/csv; charset=utf-8"))
        .insert_header((
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"contacts.csv\"",
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(out))
}

const EXPORT_COLUMNS: [&str; 20] = [
    "id",
    "email",
    "firstName",
    "lastName",
    "company",
    "jobTitle",
    "phone",
    "website",
    "address",
    "city",
    "country",
    "status",
    "source",
    "tags",
    "score",
    "emailVerified",
    "unsubscribed",
    "gdprConsent",
    "createdAt",
    "updatedAt",
];

fn export_row(c: &Contact) -> String {
    let o = |v: &Option<String>| v.clone().unwrap_or_default();
    let cells = [
        c.id.clone(),
        c.email.as_str().to_owned(),
        o(&c.first_name),
        o(&c.last_name),
        o(&c.company),
        o(&c.job_title),
        o(&c.phone),
        o(&c.website),
        o(&c.address),
        o(&c.city),
        o(&c.country),
        c.status.name().into(),
        c.source.name().into(),
        c.tags.join(","),
        c.score.to_string(),
        c.email_verified.to_string(),
        c.unsubscribed.to_string(),
        c.gdpr_consent.to_string(),
        c.created_at.to_string(),
        c.updated_at.to_string(),
    ];
    csv::row(&cells)
}

/// The current value of an editable field, as the form shows it.
fn shown(c: &Contact, name: &str) -> String {
    let o = |v: &Option<String>| v.clone().unwrap_or_default();
    match name {
        "email" => c.email.as_str().to_owned(),
        "firstName" => o(&c.first_name),
        "lastName" => o(&c.last_name),
        "company" => o(&c.company),
        "jobTitle" => o(&c.job_title),
        "phone" => o(&c.phone),
        "website" => o(&c.website),
        "address" => o(&c.address),
        "city" => o(&c.city),
        "country" => o(&c.country),
        "status" => c.status.name().into(),
        "source" => c.source.name().into(),
        "tags" => c.tags.join(", "),
        "score" => c.score.to_string(),
        _ => String::new(),
    }
}

fn edit_form(
    viewer: &Viewer,
    app: &App,
    c: &Contact,
    values: &dyn Fn(&str) -> String,
    errors: &[FieldError],
) -> Markup {
    let statuses: Vec<&str> = Status::ALL.iter().map(|s| s.name()).collect();
    let sources: Vec<&str> = Source::ALL.iter().map(|s| s.name()).collect();
    html! {
        section.card aria-labelledby="edit" {
            h2 #edit { "Edit" }
            (form_errors(errors, &FIELDS.map(|f| f.0)))
            form method="post" action=(format!("/dashboard/apps/{}/contacts/{}", app.id, c.id)) novalidate {
                (csrf_field(&viewer.session.csrf))
                div.grid {
                    @for (name, label, kind) in FIELDS {
                        @if name == "status" || name == "source" {
                            @let names = if name == "status" { &statuses } else { &sources };
                            div.field.invalid[error_for(errors, name).is_some()] {
                                label for=(format!("f-{name}")) { (label) }
                                select #(format!("f-{name}")) name=(name) {
                                    @for n in names.iter() { option value=(n) selected[*n == values(name)] { (n.replace('_', " ")) } }
                                }
                                @if let Some(m) = error_for(errors, name) { p.field-error #(format!("f-{name}-error")) { (m) } }
                            }
                        } @else {
                            (field(label, name, if kind == Kind::Score { "number" } else { "text" }, &values(name), errors,
                                html! { @if kind == Kind::Tags { p.hint { "Comma-separated." } } }))
                        }
                    }
                }
                div.field {
                    label for="f-gdprConsent" {
                        input #f-gdprConsent type="checkbox" name="gdprConsent" value="true";
                        " The contact gave consent (needed to leave “unsubscribed”)"
                    }
                }
                button.button.primary type="submit" { "Save" }
            }
        }
    }
}

fn detail_page(viewer: &Viewer, app: &App, c: &Contact, edit: Markup) -> Markup {
    let content = html! {
        section.card {
            dl.props {
                dt { "E-mail" } dd { (c.email.as_str()) }
                dt { "Status" } dd { span.badge { (c.status.name().replace('_', " ")) } }
                dt { "Source" } dd { (c.source.name()) }
                dt { "Score" } dd { (c.score) }
                dt { "Tags" } dd { (c.tags.join(", ")) }
                dt { "Unsubscribed" } dd { (if c.unsubscribed { "yes" } else { "no" }) }
                dt { "Consent" } dd { (if c.gdpr_consent { "yes" } else { "no" }) }
                @for (k, v) in &c.custom_fields { dt { (k) } dd { (v) } }
                dt { "Created" } dd { (when(c.created_at)) }
                dt { "Updated" } dd { (when(c.updated_at)) }
                dt { "Id" } dd { code { (c.id) } }
            }
        }
        (edit)
    };
    let back = html! { a.button href=(format!("/dashboard/apps/{}/contacts", app.id)) { "← All contacts" } };
    let shell = Shell {
        viewer,
        section: Section::Contacts,
        title: &name_of(c),
        app: Some(app),
    };
    shell.render(back, content)
}

async fn load_contact(state: &AppState, app: &str, id: &str) -> Result<Contact, PageError> {
    let (app, id) = (app.to_owned(), id.to_owned());
    state
        .store
        .run(move |db| store::get(db, &app, &id))
        .await?
        .ok_or_else(|| PageError::not_found("contact"))
}

/// `GET /dashboard/apps/{id}/contacts/{contactId}`.
pub async fn detail(
    AppPage(state, viewer, app): AppPage,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let c = load_contact(&state, &app.id, &id).await?;
    let edit = edit_form(&viewer, &app, &c, &|n| shown(&c, n), &[]);
    Ok(layout::ok(detail_page(&viewer, &app, &c, edit)))
}

/// The merge patch of an edit form (every shown field is sent; an empty text clears it).
fn patch_of(form: &session::Form) -> Result<ContactPatch, Vec<FieldError>> {
    let mut body = Map::new();
    let mut errors = Vec::new();
    for (name, _, kind) in FIELDS {
        match json_value(kind, form.get(name)) {
            Ok(v) => {
                body.insert(name.into(), v);
            }
            Err(m) => errors.push(FieldError::new(name, m)),
        }
    }
    if form.get("gdprConsent") == "true" {
        body.insert("gdprConsent".into(), Value::Bool(true));
    }
    match ContactPatch::parse(&body, Mode::Patch) {
        Ok(p) if errors.is_empty() => Ok(p),
        Ok(_) => Err(errors),
        Err(more) => Err(errors.into_iter().chain(more).collect()),
    }
}

/// `POST /dashboard/apps/{id}/contacts/{contactId}`: saves an edit; errors are shown next to
/// their fields.
pub async fn update(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let errors = match patch_of(&form) {
        Err(errors) => errors,
        Ok(patch) => {
            let by = viewer.actor();
            let update =
                move |db: &_, a: &_, i: &_, now| store::update(db, a, i, &patch, (now, &by));
            match session::write_to(&state, &app, &id, update).await? {
                Ok(_) => {
                    return Ok(layout::see_other(&format!(
                        "/dashboard/apps/{}/contacts/{id}",
                        app.id
                    )))
                }
                Err(ContactError::Invalid(d)) => d,
                Err(ContactError::NeedsConsent) => vec![FieldError::new(
                    "gdprConsent",
                    "the contact is unsubscribed: tick consent to change that",
                )],
                Err(ContactError::DuplicateEmail { existing_id }) => {
                    vec![FieldError::new(
                        "email",
                        format!("already used by contact {existing_id}"),
                    )]
                }
                Err(other) => return Err(PageError::Api(other.into())),
            }
        }
    };
    let c = load_contact(&state, &app.id, &id).await?;
    let edit = edit_form(&viewer, &app, &c, &|n| form.get(n).to_owned(), &errors);
    let page = detail_page(&viewer, &app, &c, edit);
    Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
}
