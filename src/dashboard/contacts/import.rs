//! CSV import of contacts, in two steps that both post back to the server: the CSV (pasted, or
//! read from a file by `app.js`) gives a preview with a column mapping guessed from the
//! headers; the mapping then upserts every row by e-mail (`contacts::store::batch`, the API's
//! batch upsert) and the page reports each row that failed, with its line and reasons.

use actix_web::HttpResponse;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::table::{json_value, FIELDS};
use crate::config::Quota;
use crate::contacts::model::{ContactPatch, Mode};
use crate::contacts::store::{self, BatchOutcome, ContactError};
use crate::csv;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, form_errors, thousands, Section, Shell};
use crate::dashboard::session::{AppPage, AppPosted, Form, Viewer};
use crate::state::AppState;
use crate::storage::changes::Actor;
use crate::tenants::App;
use crate::validation::FieldError;

/// The largest import form (the CSV travels in it twice: once to preview, once to import).
pub const IMPORT_LIMIT: usize = 8 * 1024 * 1024;
/// Data rows per import.
const MAX_ROWS: usize = 10_000;
/// Rows upserted per store call.
const CHUNK: usize = 250;
/// Failed rows listed in the report.
const MAX_REPORTED: usize = 500;
/// Rows shown in the preview.
const PREVIEW_ROWS: usize = 5;

fn shell<'a>(viewer: &'a Viewer, app: &'a App) -> Shell<'a> {
    Shell {
        viewer,
        section: Section::Contacts,
        title: "Import contacts",
        app: Some(app),
    }
}

fn upload_form(viewer: &Viewer, app: &App, text: &str, errors: &[FieldError]) -> Markup {
    html! {
        section.card {
            h2 { "1. Choose a CSV file" }
            p.hint { "The first line names the columns. Rows are matched to contacts by e-mail: new addresses are created, known ones updated. Up to " (thousands(MAX_ROWS as u64)) " rows." }
            (form_errors(errors, &["csv"]))
            form method="post" action=(format!("/dashboard/apps/{}/contacts/import", app.id)) {
                (csrf_field(&viewer.session.csrf))
                div.field {
                    label for="f-file" { "CSV file" }
                    input #f-file type="file" accept=".csv,text/csv" data-into="#f-csv";
                }
                div.field.invalid[!errors.is_empty()] {
                    label for="f-csv" { "…or paste the CSV" }
                    textarea #f-csv name="csv" rows="8" spellcheck="false" { (text) }
                    @if let Some(e) = errors.first() { p.field-error { (e.message) } }
                }
                button.button.primary type="submit" { "Preview" }
            }
        }
    }
}

/// `GET /dashboard/apps/{id}/contacts/import`.
pub async fn start(AppPage(_, viewer, app): AppPage) -> Result<HttpResponse, PageError> {
    Ok(layout::ok(
        shell(&viewer, &app).render(html! {}, upload_form(&viewer, &app, "", &[])),
    ))
}

/// The field a CSV heading most likely means (`None`: ignore the column).
pub fn guess(heading: &str) -> Option<&'static str> {
    let h: String = heading
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    let aliases: [(&str, &[&str]); 14] = [
        ("email", &["email", "emailaddress", "mail", "courriel"]),
        ("firstName", &["firstname", "first", "givenname", "prenom"]),
        (
            "lastName",
            &["lastname", "last", "surname", "familyname", "nom"],
        ),
        (
            "company",
            &["company", "organization", "organisation", "companyname"],
        ),
        ("jobTitle", &["jobtitle", "title", "position", "role"]),
        (
            "phone",
            &["phone", "phonenumber", "mobile", "tel", "telephone"],
        ),
        ("website", &["website", "url", "site", "web"]),
        ("address", &["address", "street"]),
        ("city", &["city", "town"]),
        ("country", &["country"]),
        ("status", &["status", "stage"]),
        ("source", &["source", "origin"]),
        ("tags", &["tags", "tag", "labels"]),
        ("score", &["score", "leadscore"]),
    ];
    aliases
        .iter()
        .find(|(_, names)| names.contains(&h.as_str()))
        .map(|(f, _)| *f)
}

fn mapping_select(i: usize, heading: &str, chosen: Option<&str>) -> Markup {
    html! {
        label.sr-only for=(format!("map-{i}")) { "Field for column " (heading) }
        select #(format!("map-{i}")) name="map" {
            option value="" selected[chosen.is_none()] { "(ignore)" }
            @for (name, label, _) in FIELDS { option value=(name) selected[chosen == Some(name)] { (label) } }
        }
    }
}

fn preview(
    viewer: &Viewer,
    app: &App,
    text: &str,
    rows: &[Vec<String>],
    errors: &[FieldError],
) -> Markup {
    let headings = &rows[0];
    html! {
        section.card {
            h2 { "2. Map the columns" }
            p.hint { (thousands(rows.len() as u64 - 1)) " rows. Choose the contact field of each column; e-mail is required." }
            (form_errors(errors, &[]))
            form method="post" action=(format!("/dashboard/apps/{}/contacts/import", app.id)) {
                (csrf_field(&viewer.session.csrf))
                input type="hidden" name="step" value="run";
                input type="hidden" name="csv" value=(text);
                div.table-wrap {
                    table aria-label="Preview" {
                        thead {
                            tr { @for h in headings { th scope="col" { (h) } } }
                            tr { @for (i, h) in headings.iter().enumerate() { th { (mapping_select(i, h, guess(h))) } } }
                        }
                        tbody { @for r in rows.iter().skip(1).take(PREVIEW_ROWS) { tr { @for c in r { td { (c) } } } } }
                    }
                }
                p { button.button.primary type="submit" { "Import " (thousands(rows.len() as u64 - 1)) " rows" } }
            }
        }
    }
}

/// What happened to the rows of an import.
#[derive(Default)]
struct Report {
    created: usize,
    updated: usize,
    /// (line in the file, e-mail cell, reasons)
    failed: Vec<(usize, String, String)>,
}

fn reasons(e: &ContactError) -> String {
    match e {
        ContactError::Invalid(d) => d
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        ContactError::NeedsConsent => {
            "the contact is unsubscribed; consent is needed to change its status".into()
        }
        ContactError::DuplicateEmail { existing_id } => {
            format!("email: already used by contact {existing_id}")
        }
        ContactError::PlanLimit { limit, .. } => format!("the plan allows {limit} contacts"),
        ContactError::NotFound => "contact not found".into(),
        ContactError::Store(_) => "the store failed; import this row again".into(),
    }
}

/// One row as the body of a batch item: mapped, non-empty cells; source `import` by default.
fn item(row: &[String], map: &[&str]) -> Result<ContactPatch, Vec<FieldError>> {
    let mut body = Map::new();
    let mut errors = Vec::new();
    for (cell, field) in row.iter().zip(map) {
        let Some((name, _, kind)) = FIELDS.iter().find(|f| f.0 == *field) else {
            continue;
        };
        if cell.trim().is_empty() {
            continue;
        }
        match json_value(*kind, cell) {
            Ok(v) => {
                body.insert((*name).into(), v);
            }
            Err(m) => errors.push(FieldError::new(*name, m)),
        }
    }
    body.entry("source")
        .or_insert(Value::String("import".into()));
    match ContactPatch::parse(&body, Mode::Create) {
        Ok(p) if errors.is_empty() => Ok(p),
        Ok(_) => Err(errors),
        Err(more) => Err(errors.into_iter().chain(more).collect()),
    }
}

/// Upserts every data row, `CHUNK` rows per store call.
async fn run(
    state: &AppState,
    (app, by): (&App, &Actor),
    rows: &[Vec<String>],
    map: &[&str],
) -> Result<Report, PageError> {
    let limit = state.settings.plan(app.plan).limit(Quota::Contacts);
    let mut report = Report::default();
    for (chunk_no, chunk) in rows[1..].chunks(CHUNK).enumerate() {
        let items: Vec<_> = chunk.iter().map(|r| item(r, map)).collect();
        let (id, now, by) = (app.id.clone(), state.now(), by.clone());
        let outcomes = state
            .store
            .run(move |db| store::batch(db, &id, &items, true, limit, (now, &by)))
            .await?;
        for (i, outcome) in outcomes.iter().enumerate() {
            let line = chunk_no * CHUNK + i + 2;
            match outcome {
                BatchOutcome::Created(_) => report.created += 1,
                BatchOutcome::Updated(_) => report.updated += 1,
                BatchOutcome::Failed(e) => {
                    let email = map
                        .iter()
                        .position(|f| *f == "email")
                        .and_then(|p| chunk[i].get(p))
                        .cloned()
                        .unwrap_or_default();
                    report.failed.push((line, email, reasons(e)));
                }
            }
        }
    }
    Ok(report)
}

fn report_page(app: &App, r: &Report) -> Markup {
    html! {
        h2 { "Import finished" }
        div.stats role="status" aria-describedby="import-summary" {
            div.stat.good { strong { (thousands(r.created as u64)) } span { "created" } }
            div.stat { strong { (thousands(r.updated as u64)) } span { "updated" } }
            div.stat.bad[!r.failed.is_empty()] { strong { (thousands(r.failed.len() as u64)) } span { "failed" } }
        }
        p.muted #import-summary { (thousands(r.created as u64)) " created · " (thousands(r.updated as u64)) " updated · " (thousands(r.failed.len() as u64)) " failed" }
        @if !r.failed.is_empty() {
            h2 { "Rows that were not imported" }
            div.table-wrap.report {
                table #import-errors aria-label="Rows that were not imported" {
                    thead { tr { th.num scope="col" { "Line" } th scope="col" { "E-mail" } th scope="col" { "Problem" } } }
                    tbody { @for (line, email, why) in r.failed.iter().take(MAX_REPORTED) { tr { td.num { (line) } td { (email) } td { (why) } } } }
                }
            }
            @if r.failed.len() > MAX_REPORTED { p.muted { "…and " (r.failed.len() - MAX_REPORTED) " more." } }
        }
        p { a.button.primary href=(format!("/dashboard/apps/{}/contacts", app.id)) { "See the contacts" } }
    }
}

/// `POST /dashboard/apps/{id}/contacts/import`: the preview, or (with `step=run`) the import.
pub async fn submit(
    AppPosted(state, viewer, form, app): AppPosted<IMPORT_LIMIT>,
) -> Result<HttpResponse, PageError> {
    let text = form.get("csv");
    let rows = match csv::parse(text, MAX_ROWS) {
        Ok(rows) if rows.len() >= 2 => rows,
        Ok(_) => {
            return again(
                &viewer,
                &app,
                text,
                "needs a heading line and at least one row",
            )
        }
        Err(e) => return again(&viewer, &app, text, &e.to_string()),
    };
    if form.get("step") != "run" {
        return Ok(layout::ok(
            shell(&viewer, &app).render(html! {}, preview(&viewer, &app, text, &rows, &[])),
        ));
    }
    let map = mapping(&form, rows[0].len());
    if !map.contains(&"email") {
        let errors = [FieldError::new("map", "map one column to E-mail")];
        let page =
            shell(&viewer, &app).render(html! {}, preview(&viewer, &app, text, &rows, &errors));
        return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
    }
    let report = run(&state, (&app, &viewer.actor()), &rows, &map).await?;
    tracing::info!(app_id = %app.id, created = report.created, updated = report.updated, failed = report.failed.len(), "contacts imported");
    Ok(layout::ok(
        shell(&viewer, &app).render(html! {}, report_page(&app, &report)),
    ))
}

/// The field of each column (`""`: ignored); a field mapped twice keeps its first column.
fn mapping(form: &Form, columns: usize) -> Vec<&str> {
    let mut map: Vec<&str> = form.all("map").into_iter().take(columns).collect();
    map.resize(columns, "");
    for i in 0..map.len() {
        if !map[i].is_empty() && map[..i].contains(&map[i]) {
            map[i] = "";
        }
    }
    map
}

fn again(viewer: &Viewer, app: &App, text: &str, message: &str) -> Result<HttpResponse, PageError> {
    let errors = [FieldError::new("csv", message)];
    let page = shell(viewer, app).render(html! {}, upload_form(viewer, app, text, &errors));
    Ok(layout::html_response(&mut HttpResponse::BadRequest(), page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_are_mapped_to_contact_fields() {
        assert_eq!(guess("E-mail Address"), Some("email"));
        assert_eq!(guess("First Name"), Some("firstName"));
        assert_eq!(guess("Lead score"), Some("score"));
        assert_eq!(guess("favourite colour"), None);
    }

    #[test]
    fn a_row_becomes_a_create_body_with_every_error_named() {
        let map = ["email", "score", ""];
        let ok = item(&["A@X.io".into(), "7".into(), "ignored".into()], &map).unwrap();
        assert_eq!(ok.email.unwrap().as_str(), "a@x.io");
        let bad = item(&["nope".into(), "many".into(), "".into()], &map).unwrap_err();
        let fields: Vec<_> = bad.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["score", "email"]);
    }
}
