//! The body of a create or PATCH, parsed field by field (every bad field reported at once),
//! the type conventions every survey keeps, and a PATCH applied to a survey.

use serde_json::{Map, Value};

use super::survey::{
    Question, QuestionOption, QuestionType, Survey, SurveyStatus, SurveyType, MAX_OPTIONS,
    MAX_QUESTIONS, PMF_OPTIONS,
};
use super::targeting::{parse_targeting, Targeting};
use crate::fields::Text;
use crate::ids::{self, Timestamp};
use crate::validation::{only_fields, type_name, unknown_keys, FieldError};

/// Why an edit is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    Invalid(Vec<FieldError>),
    Conflict(String),
}

/// The parsed body of a create or a PATCH: `None` = absent (unchanged); `boardId` may be
/// cleared (`Some(None)`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SurveyPatch {
    pub title: Option<String>,
    pub kind: Option<SurveyType>,
    pub board_id: Option<Option<String>>,
    pub questions: Option<Vec<Question>>,
    pub targeting: Option<Targeting>,
}

const FIELDS: [&str; 5] = ["title", "type", "boardId", "questions", "targeting"];

impl SurveyPatch {
    /// Parses a body field by field. `create`: title, type and questions are required.
    pub fn parse(body: &Map<String, Value>, create: bool) -> Result<SurveyPatch, Vec<FieldError>> {
        let mut errors = Vec::new();
        only_fields(body, &FIELDS, &mut errors);
        let mut p = SurveyPatch::default();
        let missing = |name: &str, errors: &mut Vec<FieldError>| {
            if create {
                errors.push(FieldError::new(name, "is required"));
            }
        };
        match body.get("title") {
            None => missing("title", &mut errors),
            Some(Value::String(s)) => match Text::line(0, 200).check(s) {
                Ok(t) if t.is_empty() => errors.push(FieldError::new("title", "must not be empty")),
                Ok(t) => p.title = Some(t),
                Err(m) => errors.push(FieldError::new("title", m)),
            },
            Some(v) => errors.push(FieldError::new(
                "title",
                format!("must be a string, not {}", type_name(v)),
            )),
        }
        match body.get("type") {
            None => missing("type", &mut errors),
            Some(Value::String(s)) if SurveyType::parse(s).is_some() => {
                p.kind = SurveyType::parse(s)
            }
            Some(_) => errors.push(FieldError::new(
                "type",
                "must be one of nps, csat, pmf, open, poll",
            )),
        }
        match body.get("boardId") {
            None => {}
            Some(Value::Null) => p.board_id = Some(None),
            Some(Value::String(s)) if ids::is_object_id(s) => p.board_id = Some(Some(s.clone())),
            Some(Value::String(_)) => {
                errors.push(FieldError::new("boardId", "is not a board of this app"))
            }
            Some(v) => errors.push(FieldError::new(
                "boardId",
                format!("must be a board id or null, not {}", type_name(v)),
            )),
        }
        match body.get("questions") {
            None => missing("questions", &mut errors),
            Some(v) => p.questions = parse_questions(v, &mut errors),
        }
        match body.get("targeting") {
            None | Some(Value::Null) => {}
            Some(v) => p.targeting = parse_targeting(v, &mut errors),
        }
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors)
        }
    }

    /// A new draft made at `now` from a create body (parsed with `create`), checked against
    /// its type's conventions.
    pub fn into_survey(self, now: Timestamp) -> Result<Survey, Vec<FieldError>> {
        let survey = Survey {
            id: ids::object_id(),
            board_id: self.board_id.flatten(),
            title: self.title.unwrap_or_default(),
            kind: self.kind.unwrap_or(SurveyType::Open),
            status: SurveyStatus::Draft,
            questions: self.questions.unwrap_or_default(),
            targeting: self.targeting.unwrap_or_default(),
            response_count: 0,
            created_at: now,
            updated_at: now,
        };
        conventions(survey.kind, &survey.questions)?;
        Ok(survey)
    }
}

impl Survey {
    /// Applies a PATCH: questions and type only while draft, title, board and targeting until
    /// closed (409 otherwise); the result must keep its type's conventions. Updated at `now`.
    pub fn apply(&mut self, p: &SurveyPatch, now: Timestamp) -> Result<(), Rejection> {
        if self.status == SurveyStatus::Closed {
            return Err(Rejection::Conflict(
                "a closed survey cannot be edited".into(),
            ));
        }
        if self.status != SurveyStatus::Draft && (p.questions.is_some() || p.kind.is_some()) {
            return Err(Rejection::Conflict(format!(
                "questions and type are editable only in draft; this survey is {}",
                self.status.name()
            )));
        }
        if let Some(t) = &p.title {
            self.title = t.clone();
        }
        if let Some(k) = p.kind {
            self.kind = k;
        }
        if let Some(b) = &p.board_id {
            self.board_id = b.clone();
        }
        if let Some(q) = &p.questions {
            self.questions = q.clone();
        }
        if let Some(t) = &p.targeting {
            self.targeting = t.clone();
        }
        conventions(self.kind, &self.questions).map_err(Rejection::Invalid)?;
        self.updated_at = now;
        Ok(())
    }
}

fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

const ID_RULE: &str = "must be 1 to 64 letters, digits, '_' or '-'";

fn parse_questions(v: &Value, errors: &mut Vec<FieldError>) -> Option<Vec<Question>> {
    let Value::Array(items) = v else {
        errors.push(FieldError::new(
            "questions",
            format!("must be an array, not {}", type_name(v)),
        ));
        return None;
    };
    if items.is_empty() || items.len() > MAX_QUESTIONS {
        errors.push(FieldError::new(
            "questions",
            format!("must hold 1 to {MAX_QUESTIONS} questions"),
        ));
        return None;
    }
    let before = errors.len();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(q) = parse_question(i, item, errors) {
            out.push(q);
        }
    }
    for (i, q) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.id == q.id) {
            errors.push(FieldError::new(
                format!("questions[{i}].id"),
                format!("duplicate question id {:?}", q.id),
            ));
        }
    }
    (errors.len() == before).then_some(out)
}

fn parse_question(i: usize, v: &Value, errors: &mut Vec<FieldError>) -> Option<Question> {
    let at = |f: &str| format!("questions[{i}].{f}");
    let Value::Object(m) = v else {
        errors.push(FieldError::new(
            format!("questions[{i}]"),
            format!("must be an object, not {}", type_name(v)),
        ));
        return None;
    };
    let before = errors.len();
    let keys = ["id", "text", "type", "options", "required", "min", "max"];
    unknown_keys(m, &keys, at, errors);
    let id = match m.get("id") {
        None => format!("q{}", i + 1),
        Some(Value::String(s)) if is_id(s) => s.clone(),
        Some(_) => {
            errors.push(FieldError::new(at("id"), ID_RULE));
            String::new()
        }
    };
    let text = question_text(&at("text"), m.get("text"), errors);
    let kind = match m.get("type") {
        Some(Value::String(s)) => QuestionType::parse(s),
        _ => None,
    };
    if kind.is_none() {
        errors.push(FieldError::new(
            at("type"),
            "must be one of rating, scale, single_choice, multiple_choice, text",
        ));
    }
    let required = match m.get("required") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            errors.push(FieldError::new(
                at("required"),
                format!("must be a boolean, not {}", type_name(v)),
            ));
            true
        }
    };
    let options = match (kind, m.get("options")) {
        (Some(k), Some(v)) if k.is_choice() => parse_options(&at("options"), v, errors),
        (Some(k), None) if k.is_choice() => {
            errors.push(FieldError::new(
                at("options"),
                "is required for single_choice and multiple_choice questions",
            ));
            None
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                at("options"),
                "is accepted only on single_choice and multiple_choice questions",
            ));
            None
        }
        _ => None,
    };
    let (min, max) = match kind {
        Some(k) => question_range(&at, k, m, errors),
        None => (None, None),
    };
    if errors.len() != before {
        return None;
    }
    Some(Question {
        id,
        text,
        kind: kind?,
        options,
        required,
        min,
        max,
    })
}

/// A question's text: required, 1 to 1000 characters.
fn question_text(field: &str, v: Option<&Value>, errors: &mut Vec<FieldError>) -> String {
    match v {
        Some(Value::String(s)) => match Text::lines(0, 1000).check(s) {
            Ok(t) if t.is_empty() => {
                errors.push(FieldError::new(field, "must not be empty"));
                t
            }
            Ok(t) => t,
            Err(e) => {
                errors.push(FieldError::new(field, e));
                String::new()
            }
        },
        None => {
            errors.push(FieldError::new(field, "is required"));
            String::new()
        }
        Some(v) => {
            errors.push(FieldError::new(
                field,
                format!("must be a string, not {}", type_name(v)),
            ));
            String::new()
        }
    }
}

/// The `min` and `max` of a rating or scale question (its type's defaults when absent);
/// refused on other types.
fn question_range(
    at: &dyn Fn(&str) -> String,
    k: QuestionType,
    m: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> (Option<i64>, Option<i64>) {
    let (mut min, mut max) = (None, None);
    for (name, slot) in [("min", &mut min), ("max", &mut max)] {
        match (k.default_range(), m.get(name)) {
            (_, None) => {}
            (Some(_), Some(v)) => match v.as_i64() {
                Some(n) if (-1000..=1000).contains(&n) => *slot = Some(n),
                _ => errors.push(FieldError::new(
                    at(name),
                    "must be an integer from -1000 to 1000",
                )),
            },
            (None, Some(_)) => errors.push(FieldError::new(
                at(name),
                "is accepted only on rating and scale questions",
            )),
        }
    }
    if let Some((lo, hi)) = k.default_range() {
        let (lo, hi) = (min.unwrap_or(lo), max.unwrap_or(hi));
        if lo >= hi {
            errors.push(FieldError::new(at("max"), "must be greater than min"));
        } else if hi - lo > 100 {
            errors.push(FieldError::new(
                at("max"),
                "the range must span at most 100",
            ));
        }
        min = Some(lo);
        max = Some(hi);
    }
    (min, max)
}

fn parse_options(at: &str, v: &Value, errors: &mut Vec<FieldError>) -> Option<Vec<QuestionOption>> {
    let Value::Array(items) = v else {
        errors.push(FieldError::new(
            at,
            format!("must be an array, not {}", type_name(v)),
        ));
        return None;
    };
    if items.len() < 2 || items.len() > MAX_OPTIONS {
        errors.push(FieldError::new(
            at,
            format!("must hold 2 to {MAX_OPTIONS} options"),
        ));
        return None;
    }
    let before = errors.len();
    let mut out: Vec<QuestionOption> = Vec::new();
    for (j, item) in items.iter().enumerate() {
        let here = format!("{at}[{j}]");
        let Value::Object(m) = item else {
            errors.push(FieldError::new(
                here,
                "must be an object {\"id\", \"label\"}",
            ));
            continue;
        };
        unknown_keys(m, &["id", "label"], |k| format!("{here}.{k}"), errors);
        let id = match m.get("id") {
            Some(Value::String(s)) if is_id(s) => Some(s.clone()),
            _ => {
                errors.push(FieldError::new(format!("{here}.id"), ID_RULE));
                None
            }
        };
        let label = match m.get("label") {
            Some(Value::String(s)) => match Text::line(0, 200).check(s) {
                Ok(l) if !l.is_empty() => Some(l),
                Ok(_) => {
                    errors.push(FieldError::new(
                        format!("{here}.label"),
                        "must not be empty",
                    ));
                    None
                }
                Err(e) => {
                    errors.push(FieldError::new(format!("{here}.label"), e));
                    None
                }
            },
            _ => {
                errors.push(FieldError::new(
                    format!("{here}.label"),
                    "is required (a string)",
                ));
                None
            }
        };
        if let (Some(id), Some(label)) = (id, label) {
            if out.iter().any(|o| o.id == id) {
                errors.push(FieldError::new(
                    format!("{here}.id"),
                    format!("duplicate option id {id:?}"),
                ));
            }
            out.push(QuestionOption { id, label });
        }
    }
    (errors.len() == before).then_some(out)
}

/// The type conventions (api.md §4). nps: one `scale` question 0-10; csat: one `rating`
/// question 1-5; pmf: one `single_choice` question with the options `very_disappointed`,
/// `somewhat_disappointed`, `not_disappointed`. The scored question may be followed by `text`
/// questions (the "why?" of Formbricks' templates). poll: only choice questions; open: only
/// `text` questions.
pub fn conventions(kind: SurveyType, questions: &[Question]) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    let scored = match kind {
        SurveyType::Nps => Some((QuestionType::Scale, "one scale question from 0 to 10")),
        SurveyType::Csat => Some((QuestionType::Rating, "one rating question from 1 to 5")),
        SurveyType::Pmf => Some((
            QuestionType::SingleChoice,
            "one single_choice question with the options very_disappointed, somewhat_disappointed, not_disappointed",
        )),
        _ => None,
    };
    if let Some((qtype, rule)) = scored {
        let message = format!(
            "a {} survey holds {rule} (then only text questions)",
            kind.name()
        );
        let n = questions
            .iter()
            .filter(|q| q.kind != QuestionType::Text)
            .count();
        match questions.iter().position(|q| q.kind != QuestionType::Text) {
            Some(i) if n == 1 => {
                let q = &questions[i];
                let ok = q.kind == qtype
                    && match kind {
                        SurveyType::Nps => (q.min, q.max) == (Some(0), Some(10)),
                        SurveyType::Csat => (q.min, q.max) == (Some(1), Some(5)),
                        _ => {
                            let mut got: Vec<&str> =
                                q.options.iter().flatten().map(|o| o.id.as_str()).collect();
                            got.sort_unstable();
                            let mut want = PMF_OPTIONS.to_vec();
                            want.sort_unstable();
                            got == want
                        }
                    };
                if !ok {
                    errors.push(FieldError::new(format!("questions[{i}]"), message));
                }
            }
            _ => errors.push(FieldError::new("questions", message)),
        }
    }
    for (i, q) in questions.iter().enumerate() {
        let bad = match kind {
            SurveyType::Poll => !q.kind.is_choice(),
            SurveyType::Open => q.kind != QuestionType::Text,
            _ => false,
        };
        if bad {
            let rule = if kind == SurveyType::Poll {
                "a poll holds only single_choice and multiple_choice questions"
            } else {
                "an open survey holds only text questions"
            };
            errors.push(FieldError::new(format!("questions[{i}].type"), rule));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surveys::survey::tests::body;
    use serde_json::json;

    fn fields(e: Vec<FieldError>) -> Vec<String> {
        e.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn an_nps_survey_needs_one_scale_from_0_to_10() {
        let ok = body(json!({"title": "NPS", "type": "nps", "questions": [
            {"id": "score", "text": "How likely?", "type": "scale"},
            {"id": "why", "text": "Why?", "type": "text", "required": false}]}));
        let s = SurveyPatch::parse(&ok, true)
            .unwrap()
            .into_survey(Timestamp::from_micros(0))
            .unwrap();
        assert_eq!(
            (s.questions[0].min, s.questions[0].max),
            (Some(0), Some(10))
        );
        let bad = body(json!({"title": "NPS", "type": "nps", "questions": [
            {"id": "score", "text": "How likely?", "type": "scale", "max": 5}]}));
        let e = SurveyPatch::parse(&bad, true)
            .unwrap()
            .into_survey(Timestamp::from_micros(0))
            .unwrap_err();
        assert_eq!(fields(e), ["questions[0]"]);
    }

    #[test]
    fn every_bad_field_is_named() {
        let bad = body(
            json!({"title": "", "type": "quiz", "extra": 1, "questions": [
            {"text": "Pick", "type": "single_choice"},
            {"text": "Say", "type": "text", "options": [{"id": "a", "label": "A"}]},
            {"text": "Pick", "type": "multiple_choice", "options": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}]},
            {"text": "Rate", "type": "stars"}],
            "targeting": {"percentage": 0, "attributes": [{"key": "plan", "operator": "like", "value": "x"},
                {"key": "n", "operator": "lessThan", "value": "3"}]}}),
        );
        let got = fields(SurveyPatch::parse(&bad, true).unwrap_err());
        for f in [
            "title",
            "type",
            "extra",
            "questions[0].options",
            "questions[1].options",
            "questions[2].options[1].id",
            "questions[3].type",
            "targeting.percentage",
            "targeting.attributes[0].operator",
            "targeting.attributes[1].value",
        ] {
            assert!(got.contains(&f.to_owned()), "{f} missing from {got:?}");
        }
    }
}
