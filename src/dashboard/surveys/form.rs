//! The survey builder, new and edit: a type (its preset questions when the questions are left
//! blank), a title, the questions as lines of text, and the targeting (`targeting.rs`:
//! share of visitors, attribute rules, URL rules). The form becomes the API's create or PATCH
//! body and goes through `SurveyPatch::parse` and `into_survey` / `surveys::store::update`
//! (the same checks, type conventions and edit rules as the admin API: questions and type
//! only in draft, nothing once closed); errors show next to their field, a question's with its
//! line number, a rule's on its row. Beside the form, a live preview: `app.js` posts the form
//! to `preview` on every change and hands the answer to the tracker's own popover
//! (`sdk/analytics.js` loaded with `data-preview`: it draws, and sends or stores nothing).

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde_json::{json, Map, Value};

use super::targeting::{self, Rules};
use crate::api::ApiError;
use crate::dashboard::error::PageError;
use crate::dashboard::layout::{self, csrf_field, error_for, field, form_errors, Section, Shell};
use crate::dashboard::session::{self, AppPage, AppPosted, Form, Viewer};
use crate::state::AppState;
use crate::surveys::model::{Question, Survey, SurveyPatch, SurveyStatus, SurveyType};
use crate::surveys::store::{self, SurveyError};
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

/// A question as the line that makes it again (`question`): an option's id is written only
/// when it is not the one its label gives.
fn question_line(q: &Question) -> String {
    let mut line = format!("{}: {}", q.kind.name(), q.text);
    if let Some(options) = &q.options {
        let opts: Vec<String> = options
            .iter()
            .map(|o| {
                if option_id(&o.label) == o.id {
                    o.label.clone()
                } else {
                    format!("{}={}", o.id, o.label)
                }
            })
            .collect();
        line.push_str(&format!(" [{}]", opts.join("; ")));
    }
    line
}

/// What the builder's inputs hold: from a posted form, a saved survey, or the blank form.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub title: String,
    pub kind: String,
    pub questions: String,
    pub rules: Rules,
}

impl Draft {
    fn blank() -> Draft {
        Draft {
            title: String::new(),
            kind: "nps".into(),
            questions: String::new(),
            rules: Rules::default(),
        }
    }

    pub fn from_form(form: &Form) -> Draft {
        Draft {
            title: form.get("title").to_owned(),
            kind: form.get("type").to_owned(),
            questions: form.get("questions").to_owned(),
            rules: Rules::from_form(form),
        }
    }

    pub fn from_survey(s: &Survey) -> Draft {
        Draft {
            title: s.title.clone(),
            kind: s.kind.name().to_owned(),
            questions: s
                .questions
                .iter()
                .map(question_line)
                .collect::<Vec<_>>()
                .join("\n"),
            rules: Rules::from_targeting(&s.targeting),
        }
    }

    /// The question lines: those typed, or the type's preset when none are.
    fn lines(&self) -> &str {
        match (self.questions.trim(), SurveyType::parse(&self.kind)) {
            ("", Some(k)) => preset(k),
            (text, _) => text,
        }
    }
}

/// The API body of a draft (with its type and questions when `questions`), and the form rows
/// of its attribute and URL rules; or the errors of its question lines.
type Body = (Map<String, Value>, Vec<usize>, Vec<usize>);

fn body(d: &Draft, questions: bool) -> Result<Body, Vec<FieldError>> {
    let mut qs = Vec::new();
    let mut errors = Vec::new();
    let lines = d.lines().lines().map(str::trim).filter(|l| !l.is_empty());
    for (i, line) in lines.enumerate() {
        match question(line) {
            Some(q) => qs.push(q),
            None => errors.push(FieldError::new(
                "questions",
                format!("line {}: write the type, a colon, then the question", i + 1),
            )),
        }
    }
    if questions && !errors.is_empty() {
        return Err(errors);
    }
    let (t, attr_rows, url_rows) = d.rules.body();
    let mut body = json!({"title": d.title, "targeting": t});
    if questions {
        body["type"] = json!(d.kind);
        body["questions"] = Value::Array(qs);
    }
    Ok((
        body.as_object().cloned().unwrap_or_default(),
        attr_rows,
        url_rows,
    ))
}

/// The errors of the body as the form's fields: `questions[2].text` is line 3's,
/// `targeting.attributes[0].value` the value of the rule's row.
fn form_field_errors(
    errors: Vec<FieldError>,
    attr_rows: &[usize],
    url_rows: &[usize],
) -> Vec<FieldError> {
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
            } else if let Some(field) = targeting::form_field(f, attr_rows, url_rows) {
                FieldError::new(field, e.message)
            } else {
                e
            }
        })
        .collect()
}

/// The page the builder serves: a new survey, or the edit of a saved one.
#[derive(Clone, Copy)]
enum Mode<'a> {
    New,
    Edit(&'a Survey),
}

impl Mode<'_> {
    /// Type and questions change only in draft (`Survey::apply`).
    fn questions_editable(self) -> bool {
        match self {
            Mode::New => true,
            Mode::Edit(s) => s.status == SurveyStatus::Draft,
        }
    }
}

/// Type, title and the question lines (or, past draft, the questions read-only).
fn basics(mode: Mode<'_>, d: &Draft, errors: &[FieldError]) -> Markup {
    let q_err = errors
        .iter()
        .filter(|e| e.field == "questions")
        .collect::<Vec<_>>();
    let type_err = error_for(errors, "type");
    let editable = mode.questions_editable();
    html! {
        div.row {
            div.field.invalid[type_err.is_some()] {
                label for="f-type" { "Type" }
                select #f-type name="type" disabled[!editable] aria-describedby=[(!editable).then_some("f-type-hint")] {
                    @for t in SurveyType::ALL { option value=(t.name()) selected[t.name() == d.kind] { (t.name().to_uppercase()) } }
                }
                @if let Some(m) = type_err { p.field-error { (m) } }
            }
            (field("Title", "title", "text", &d.title, errors, html! {}))
        }
        @if editable {
            div.field.invalid[!q_err.is_empty()] {
                label for="f-questions" { "Questions" }
                p.hint #f-questions-hint { "One per line: " code { "type: question" } ", with " code { "[option; option]" } " after a choice question. Types: scale, rating, single_choice, multiple_choice, text. Leave blank for the type's preset questions." }
                textarea #f-questions name="questions" aria-describedby="f-questions-hint" placeholder=(preset(SurveyType::Nps)) { (d.questions) }
                @for e in &q_err { p.field-error { (e.message) } }
            }
        } @else {
            div.field {
                p.hint #f-type-hint { "Type and questions can change only while the survey is a draft." }
                ol.question-list { @for l in d.questions.lines() { li { code { (l) } } } }
                input type="hidden" name="preview-type" value=(d.kind);
                input type="hidden" name="preview-questions" value=(d.questions);
            }
        }
    }
}

fn render(viewer: &Viewer, app: &App, mode: Mode<'_>, d: &Draft, errors: &[FieldError]) -> Markup {
    let base = format!("/dashboard/apps/{}/surveys", app.id);
    let (heading, action, submit) = match mode {
        Mode::New => ("New survey", base.clone(), "Create draft"),
        Mode::Edit(s) => (
            "Edit survey",
            format!("{base}/{}/edit", s.id),
            "Save changes",
        ),
    };
    let shown: Vec<String> = errors
        .iter()
        .map(|e| e.field.clone())
        .filter(|f| {
            ["title", "type", "questions", "percentage", "attrs", "urls"].contains(&f.as_str())
                || f.starts_with("attr-")
                || f.starts_with("url-")
        })
        .collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    let content = html! {
        div.builder {
            section.card aria-labelledby="survey-form-h" {
                h2 #survey-form-h { (heading) }
                (form_errors(errors, &shown))
                form #survey-form method="post" action=(action) novalidate {
                    (csrf_field(&viewer.session.csrf))
                    (basics(mode, d, errors))
                    (targeting::render(&d.rules, errors))
                    button.button.primary type="submit" { (submit) }
                }
            }
            aside.card.preview aria-labelledby="preview-h" data-survey-preview=(format!("{base}/preview")) {
                h2 #preview-h { "Preview" }
                p.hint { "The popover as visitors see it, redrawn as you type." }
                div.preview-host {}
                noscript { p.muted { "The preview needs JavaScript." } }
            }
        }
        script src="/sdk/v1/analytics.js" data-preview="" defer {}
    };
    let title = match mode {
        Mode::New => "New survey".to_owned(),
        Mode::Edit(s) => format!("Edit {}", s.title),
    };
    let shell = Shell {
        viewer,
        section: Section::Surveys,
        title: &title,
        app: Some(app),
    };
    shell.render(html! {}, content)
}

/// `GET /dashboard/apps/{id}/surveys/new`.
pub async fn new(AppPage(_, viewer, app): AppPage) -> Result<HttpResponse, PageError> {
    Ok(layout::ok(render(
        &viewer,
        &app,
        Mode::New,
        &Draft::blank(),
        &[],
    )))
}

/// `POST /dashboard/apps/{id}/surveys`: creates a draft and opens its page.
pub async fn create(
    AppPosted(state, viewer, form, app): AppPosted,
) -> Result<HttpResponse, PageError> {
    let draft = Draft::from_form(&form);
    let (body, attr_rows, url_rows) = match body(&draft, true) {
        Ok(b) => b,
        Err(errors) => return Ok(invalid(&viewer, &app, Mode::New, &draft, errors)),
    };
    let survey = SurveyPatch::parse(&body, true).and_then(|p| p.into_survey(state.now()));
    let survey = match survey {
        Ok(s) => s,
        Err(errors) => {
            let errors = form_field_errors(errors, &attr_rows, &url_rows);
            return Ok(invalid(&viewer, &app, Mode::New, &draft, errors));
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

/// 400 with the form as typed and its errors.
fn invalid(
    viewer: &Viewer,
    app: &App,
    mode: Mode<'_>,
    d: &Draft,
    errors: Vec<FieldError>,
) -> HttpResponse {
    let page = render(viewer, app, mode, d, &errors);
    layout::html_response(&mut HttpResponse::BadRequest(), page)
}

/// The survey of the path, refused (409) once closed: nothing of it can change then.
async fn editable(state: &AppState, app: &str, id: &str) -> Result<Survey, PageError> {
    let (a, i) = (app.to_owned(), id.to_owned());
    let survey = state
        .store
        .run(move |db| store::get(db, &a, &i))
        .await?
        .ok_or_else(|| PageError::not_found("survey"))?;
    if survey.status == SurveyStatus::Closed {
        return Err(ApiError::conflict("a closed survey cannot be edited").into());
    }
    Ok(survey)
}

/// `GET /dashboard/apps/{id}/surveys/{survey}/edit`: the builder, filled in.
pub async fn edit_form(
    AppPage(state, viewer, app): AppPage,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let survey = editable(&state, &app.id, &id).await?;
    let draft = Draft::from_survey(&survey);
    Ok(layout::ok(render(
        &viewer,
        &app,
        Mode::Edit(&survey),
        &draft,
        &[],
    )))
}

/// `POST /dashboard/apps/{id}/surveys/{survey}/edit`: a PATCH of title and targeting, and of
/// type and questions when the form sends them changed (only a draft's form has them; on a
/// live survey the store refuses them, 409, as the API does).
pub async fn edit(
    AppPosted(state, viewer, form, app): AppPosted,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let (_, id) = path.into_inner();
    let survey = editable(&state, &app.id, &id).await?;
    let mut draft = Draft::from_form(&form);
    let saved = Draft::from_survey(&survey);
    // Lines left as they were keep the saved questions as they are (ids, required, ranges).
    let questions = !form.all("type").is_empty()
        && (draft.kind != saved.kind || draft.questions.trim() != saved.questions.trim());
    if form.all("type").is_empty() {
        draft.kind = saved.kind;
        draft.questions = saved.questions;
    }
    let mode = Mode::Edit(&survey);
    let (body, attr_rows, url_rows) = match body(&draft, questions) {
        Ok(b) => b,
        Err(errors) => return Ok(invalid(&viewer, &app, mode, &draft, errors)),
    };
    let patch = match SurveyPatch::parse(&body, false) {
        Ok(p) => p,
        Err(e) => {
            let errors = form_field_errors(e, &attr_rows, &url_rows);
            return Ok(invalid(&viewer, &app, mode, &draft, errors));
        }
    };
    let update = move |db: &_, a: &_, i: &_, now| store::update(db, a, i, &patch, now);
    let done = session::write_to(&state, &app, &id, update).await?;
    match done {
        Ok(_) => {}
        Err(SurveyError::Invalid(e)) => {
            let errors = form_field_errors(e, &attr_rows, &url_rows);
            return Ok(invalid(&viewer, &app, mode, &draft, errors));
        }
        Err(e) => return Err(ApiError::from(e).into()),
    }
    tracing::info!(app_id = %app.id, survey_id = %id, user_id = %viewer.user.id, "survey edited from the dashboard");
    Ok(layout::see_other(&format!(
        "/dashboard/apps/{}/surveys/{id}",
        app.id
    )))
}

/// What the preview draws for a form: the survey as the widget would get it, from the lines
/// that read as questions (a line still being typed is left out, not an error).
fn preview_json(form: &Form) -> Value {
    let mut d = Draft::from_form(form);
    if form.all("type").is_empty() {
        d.kind = form.get("preview-type").to_owned();
        d.questions = form.get("preview-questions").to_owned();
    }
    let questions: Vec<Value> = d
        .lines()
        .lines()
        .filter_map(|l| question(l.trim()))
        .enumerate()
        .map(|(i, mut q)| {
            q["id"] = json!(format!("q{}", i + 1));
            q
        })
        .collect();
    let title = match d.title.trim() {
        "" => "Untitled survey",
        t => t,
    };
    json!({"id": "preview", "title": title, "type": d.kind, "questions": questions})
}

/// `POST /dashboard/apps/{id}/surveys/preview`: the builder's form, as the survey the preview
/// draws (JSON).
pub async fn preview(AppPosted(_, _, form, _): AppPosted) -> Result<HttpResponse, PageError> {
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(preview_json(&form)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Timestamp;

    #[test]
    fn every_preset_is_a_valid_survey_of_its_type() {
        for &kind in SurveyType::ALL {
            let form =
                Form::from_pairs(&[("type", kind.name()), ("title", "T"), ("percentage", "50")]);
            let made = body(&Draft::from_form(&form), true)
                .and_then(|(b, _, _)| SurveyPatch::parse(&b, true))
                .and_then(|p| p.into_survey(Timestamp::from_micros(0)));
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

    #[test]
    fn a_saved_survey_fills_the_form_that_makes_it_again() {
        let form = Form::from_pairs(&[
            ("type", "poll"),
            ("title", "Next?"),
            (
                "questions",
                "multiple_choice: Which? [Dark mode; api=The API]\nsingle_choice: And? [A; B]",
            ),
            ("percentage", "40"),
            ("attr-key", "plan"),
            ("attr-op", "equals"),
            ("attr-value", "pro"),
            ("url-op", "startsWith"),
            ("url-value", "https://shop.example/"),
        ]);
        let made = body(&Draft::from_form(&form), true)
            .and_then(|(b, _, _)| SurveyPatch::parse(&b, true))
            .and_then(|p| p.into_survey(Timestamp::from_micros(0)))
            .unwrap();
        let again = Draft::from_survey(&made);
        assert_eq!(
            again.questions,
            "multiple_choice: Which? [Dark mode; api=The API]\nsingle_choice: And? [A; B]"
        );
        let remade = body(&again, true)
            .and_then(|(b, _, _)| SurveyPatch::parse(&b, true))
            .and_then(|p| p.into_survey(Timestamp::from_micros(0)))
            .unwrap();
        assert_eq!(
            (remade.questions, remade.targeting),
            (made.questions, made.targeting)
        );
    }

    #[test]
    fn the_preview_shows_the_lines_that_read_as_questions_or_the_preset() {
        let form = Form::from_pairs(&[("type", "csat"), ("title", ""), ("questions", "")]);
        let p = preview_json(&form);
        assert_eq!(p["title"], "Untitled survey");
        assert_eq!(p["questions"][0]["type"], "rating");
        assert_eq!(p["questions"][1]["id"], "q2");
        let form = Form::from_pairs(&[
            ("type", "poll"),
            ("title", "T"),
            ("questions", "single_choice: Pick [A; B]\nhalf typed"),
        ]);
        let p = preview_json(&form);
        assert_eq!(p["questions"].as_array().unwrap().len(), 1);
        assert_eq!(p["questions"][0]["options"][1]["label"], "B");
        // A live survey's form has no type or questions inputs, only their hidden copies.
        let form = Form::from_pairs(&[
            ("preview-type", "open"),
            ("preview-questions", "text: Why?"),
        ]);
        assert_eq!(preview_json(&form)["questions"][0]["text"], "Why?");
    }
}
