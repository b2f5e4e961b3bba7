//! The New survey form: a type (its preset questions when the questions are left blank), a
//! title, the questions as lines of text and the share of visitors to ask. The form becomes
//! the API's create body and goes through `SurveyPatch::parse` and `into_survey` (the same
//! checks and type conventions as `POST /admin/v1/apps/{appId}/surveys`); errors show next to
//! their field, a question's with its line number.

use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};
use serde_json::{json, Map, Value};

use super::apps::load_app;
use super::error::PageError;
use super::layout::{self, csrf_field, error_for, field, form_errors, Section, Shell};
use super::session::{self, Form, Viewer, FORM_LIMIT};
use crate::state::AppState;
use crate::surveys::model::{SurveyPatch, SurveyType};
use crate::surveys::store;
use crate::tenants::App;
use crate::validation::FieldError;

/// The questions of each type when the form leaves them blank.
fn preset(kind: SurveyType) -> &'static str {
    match kind {
        SurveyType::Nps => "scale: How likely are you to recommend us to a friend?\ntext: What is the main reason for your score?",
        SurveyType::Csat => "rating: How satisfied are you with us?\ntext: What could we do better?",
        SurveyType::Pmf => "single_choice: How would you feel if you could no longer use the product? [very_disappointed=Very disappointed; somewhat_disappointed=Somewhat disappointed; not_disappointed=Not disappointed]\ntext: What is the main benefit you get from it?",
        SurveyType::Open => "text: What could we do better?",
        SurveyType::Poll => "single_choice: What should we build next? [Dark mode; Integrations; A mobile app]",
    }
}

/// An option's id from its label: lowercase letters and digits, `_` between words.
fn option_id(label: &str) -> String {
    let mut id = String::new();
    for c in label.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            id.push(c);
        } else if !id.ends_with('_') && !id.is_empty() {
            id.push('_');
        }
    }
    id.trim_end_matches('_').chars().take(64).collect()
}

/// One line, `type: text [option; id=label; ...]`, as a question of the create body.
fn question(line: &str) -> Option<Value> {
    let (kind, rest) = line.split_once(':')?;
    let (text, options) = match rest
        .trim()
        .strip_suffix(']')
        .and_then(|r| r.rsplit_once('['))
    {
        Some((text, opts)) => (text.trim(), Some(opts)),
        None => (rest.trim(), None),
    };
    let mut q = json!({"type": kind.trim(), "text": text, "required": kind.trim() != "text"});
    if let Some(opts) = options {
        let opts: Vec<Value> = opts
            .split(';')
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(|o| match o.split_once('=') {
                Some((id, label)) => json!({"id": id.trim(), "label": label.trim()}),
                None => json!({"id": option_id(o), "label": o}),
            })
            .collect();
        q["options"] = Value::Array(opts);
    }
    Some(q)
}

/// The create body of the form, or the errors of its question lines.
fn body(form: &Form) -> Result<Map<String, Value>, Vec<FieldError>> {
    let kind = SurveyType::parse(form.get("type"));
    let lines = match (form.get("questions").trim(), kind) {
        ("", Some(k)) => preset(k),
        (text, _) => text,
    };
    let mut questions = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in lines
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        match question(line) {
            Some(q) => questions.push(q),
            None => errors.push(FieldError::new(
                "questions",
                format!("line {}: write the type, a colon, then the question", i + 1),
            )),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let share = form.get("percentage").trim();
    let percentage = share
        .parse::<f64>()
        .map_or_else(|_| json!(share), |p| json!(p));
    let body = json!({
        "title": form.get("title"), "type": form.get("type"), "questions": questions,
        "targeting": {"percentage": percentage},
    });
    Ok(body.as_object().cloned().unwrap_or_default())
}

/// The errors of the body as the form's fields: `questions[2].text` is line 3's.
fn form_field_errors(errors: Vec<FieldError>) -> Vec<FieldError> {
    errors
        .into_iter()
        .map(|e| {
            let f = e.field.as_str();
            if let Some(rest) = f.strip_prefix("questions[") {
                let n: usize = rest
                    .split(']')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                FieldError::new("questions", format!("line {}: {}", n + 1, e.message))
            } else if f.starts_with("questions") {
                FieldError::new("questions", e.message)
            } else if f.starts_with("targeting") {
                FieldError::new("percentage", e.message)
            } else {
                e
            }
        })
        .collect()
}

fn render(viewer: &Viewer, app: &App, form: Option<&Form>, errors: &[FieldError]) -> Markup {
    let v = |name: &str| form.map(|f| f.get(name).to_owned()).unwrap_or_default();
    let kind = form.map_or("nps", |f| f.get("type"));
    let percentage = form.map_or("100".to_owned(), |f| f.get("percentage").to_owned());
    let q_err = errors
        .iter()
        .filter(|e| e.field == "questions")
        .collect::<Vec<_>>();
    let type_err = error_for(errors, "type");
    let content = html! {
        section.card aria-labelledby="new-survey" {
            h2 #new-survey { "New survey" }
            (form_errors(errors, &["title", "type", "questions", "percentage"]))
            form method="post" action=(format!("/dashboard/apps/{}/surveys", app.id)) novalidate {
                (csrf_field(&viewer.session.csrf))
                div.row {
                    div.field.invalid[type_err.is_some()] {
                        label for="f-type" { "Type" }
                        select #f-type name="type" {
                            @for t in SurveyType::ALL { option value=(t.name()) selected[t.name() == kind] { (t.name().to_uppercase()) } }
                        }
                        @if let Some(m) = type_err { p.field-error { (m) } }
                    }
                    (field("Title", "title", "text", &v("title"), errors, html! {}))
                    (field("Visitors asked (%)", "percentage", "number", &percentage, errors, html! {}))
                }
                div.field.invalid[!q_err.is_empty()] {
                    label for="f-questions" { "Questions" }
                    p.hint #f-questions-hint { "One per line: " code { "type: question" } ", with " code { "[option; option]" } " after a choice question. Types: scale, rating, single_choice, multiple_choice, text. Leave blank for the type's preset questions." }
                    textarea #f-questions name="questions" aria-describedby="f-questions-hint" placeholder=(preset(SurveyType::Nps)) { (v("questions")) }
                    @for e in &q_err { p.field-error { (e.message) } }
                }
                button.button.primary type="submit" { "Create draft" }
            }
        }
    };
    let shell = Shell {
        viewer,
        section: Section::Surveys,
        title: "New survey",
        app: Some(app),
    };
    shell.render(html! {}, content)
}

/// `GET /dashboard/apps/{id}/surveys/new`.
pub async fn new(
    state: web::Data<AppState>,
    viewer: Viewer,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let app = load_app(&state, &path).await?;
    Ok(layout::ok(render(&viewer, &app, None, &[])))
}

/// `POST /dashboard/apps/{id}/surveys`: creates a draft and opens its page.
pub async fn create(
    state: web::Data<AppState>,
    viewer: Viewer,
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, PageError> {
    let form = session::posted(&req, payload, &viewer, FORM_LIMIT).await?;
    let app = load_app(&state, &path).await?;
    let survey = body(&form)
        .and_then(|b| SurveyPatch::parse(&b, true))
        .and_then(|p| p.into_survey());
    let survey = match survey {
        Ok(s) => s,
        Err(errors) => {
            let page = render(&viewer, &app, Some(&form), &form_field_errors(errors));
            return Ok(layout::html_response(&mut HttpResponse::BadRequest(), page));
        }
    };
    let (a, s) = (app.id.clone(), survey.clone());
    state.store.run(move |db| store::create(db, &a, &s)).await?;
    tracing::info!(app_id = %app.id, survey_id = %survey.id, user_id = %viewer.user.id, "survey created from the dashboard");
    Ok(layout::see_other(&format!(
        "/dashboard/apps/{}/surveys/{}",
        app.id, survey.id
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_a_valid_survey_of_its_type() {
        for kind in SurveyType::ALL {
            let form =
                Form::from_pairs(&[("type", kind.name()), ("title", "T"), ("percentage", "50")]);
            let made = body(&form)
                .and_then(|b| SurveyPatch::parse(&b, true))
                .and_then(|p| p.into_survey());
            let s = made.unwrap_or_else(|e| panic!("{}: {e:?}", kind.name()));
            assert_eq!(s.kind, kind);
            assert!(!s.questions.is_empty());
        }
    }

    #[test]
    fn a_line_is_a_question_with_its_options() {
        let q = question("multiple_choice: Which? [Dark mode; api=The API]").unwrap();
        assert_eq!(q["type"], "multiple_choice");
        assert_eq!(q["text"], "Which?");
        assert_eq!(
            q["options"],
            json!([{"id": "dark_mode", "label": "Dark mode"}, {"id": "api", "label": "The API"}])
        );
        assert!(question("no colon here").is_none());
    }
}
