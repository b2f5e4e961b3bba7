//! Survey responses: the widget's body parsed, answers checked against the survey and
//! merged into the visitor's response.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::survey::{Question, QuestionType, Survey, SurveyType, MAX_QUESTIONS};
use crate::fields::Text;
use crate::ids::{self, Timestamp};
use crate::validation::{at_most, only_fields, type_name, unknown_keys, FieldError};

/// The prefix of a response id (`resp_<ObjectId>`).
pub const RESPONSE_PREFIX: &str = "resp_";
/// The longest text answer.
pub const MAX_TEXT_ANSWER: usize = 5000;

/// One answer of a response: `{"questionId", "type", "value"}`. Values: rating and scale an
/// integer in the question's range; single_choice an option id; multiple_choice an array of
/// option ids; text a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerValue {
    pub question_id: String,
    #[serde(rename = "type")]
    pub kind: QuestionType,
    pub value: Value,
}

/// Where and on what a response was given; `userAgent` comes from the request's header.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResponseMetadata {
    pub url: Option<String>,
    pub device: Option<String>,
    pub locale: Option<String>,
    pub user_agent: Option<String>,
}

/// A survey response (api.md §4): one per visitor and survey, completed later if partial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SurveyResponse {
    pub id: String,
    pub survey_id: String,
    pub user_id: Option<String>,
    pub anonymous_id: String,
    pub completed: bool,
    pub answers: Vec<AnswerValue>,
    /// The scored question's value of an nps or csat survey (`null` otherwise or unanswered).
    pub score: Option<f64>,
    pub metadata: ResponseMetadata,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl SurveyResponse {
    /// The visitor a response belongs to: the userId, else the anonymousId.
    pub fn visitor(&self) -> String {
        visitor(self.user_id.as_deref(), &self.anonymous_id)
    }
}

pub fn visitor(user_id: Option<&str>, anonymous_id: &str) -> String {
    match user_id {
        Some(u) => format!("u:{u}"),
        None => format!("a:{anonymous_id}"),
    }
}

/// The body of a widget response, parsed (answers not yet checked against the survey).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseDraft {
    pub anonymous_id: String,
    pub user_id: Option<String>,
    pub answers: Vec<(String, Value)>,
    pub completed: bool,
    pub metadata: ResponseMetadata,
    /// What the widget knows of the visitor (its `attr.<key>` of the survey list).
    pub attributes: Map<String, Value>,
}

/// The uplink item kind (`storage::queue`) of a survey response.
pub const UPLINK_KIND: u8 = 3;

/// A widget response an edge stored, for its control node (the uplink), as JSON `{"appId",
/// "surveyId", "draft", "at"}`: the control node stores it again (`store::respond`, an upsert
/// by anonymousId).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseItem {
    pub app_id: String,
    pub survey_id: String,
    pub draft: ResponseDraft,
    /// When the edge took it, µs.
    pub at: i64,
}

fn short_text(
    m: &Map<String, Value>,
    name: &str,
    at: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    match m.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match Text::line(0, max).check(s) {
            Ok(t) if t.is_empty() => None,
            Ok(t) => Some(t),
            Err(e) => {
                errors.push(FieldError::new(at, e));
                None
            }
        },
        Some(v) => {
            errors.push(FieldError::new(
                at,
                format!("must be a string, not {}", type_name(v)),
            ));
            None
        }
    }
}

/// The most attributes a widget body carries.
pub const MAX_ATTRIBUTES: usize = 50;

impl ResponseDraft {
    /// Parses a widget body: `{"anonymousId", "userId"?, "answers": [{"questionId", "value"}],
    /// "completed"?: true, "metadata"?: {"url", "device", "locale"}, "attributes"?: {...}}`.
    /// `metadata.userAgent` is accepted and ignored: the header's is kept (`user_agent`).
    pub fn parse(
        body: &Map<String, Value>,
        user_agent: Option<String>,
    ) -> Result<ResponseDraft, Vec<FieldError>> {
        let mut errors = Vec::new();
        only_fields(
            body,
            &[
                "anonymousId",
                "userId",
                "answers",
                "completed",
                "metadata",
                "attributes",
            ],
            &mut errors,
        );
        let anonymous_id = short_text(body, "anonymousId", "anonymousId", 200, &mut errors)
            .and_then(|a| match ids::canonical_anonymous_id(&a) {
                Ok(a) => Some(a),
                Err(m) => {
                    errors.push(FieldError::new("anonymousId", m));
                    None
                }
            });
        if anonymous_id.is_none() && !errors.iter().any(|e| e.field == "anonymousId") {
            errors.push(FieldError::new("anonymousId", "is required"));
        }
        let user_id = short_text(body, "userId", "userId", 200, &mut errors);
        let completed = match body.get("completed") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                errors.push(FieldError::new(
                    "completed",
                    format!("must be a boolean, not {}", type_name(v)),
                ));
                true
            }
        };
        let answers = parse_answers(body.get("answers"), &mut errors);
        let mut metadata = parse_metadata(body.get("metadata"), &mut errors);
        metadata.user_agent = user_agent.map(|u| u.chars().take(1000).collect());
        let attributes = parse_attributes(body.get("attributes"), &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ResponseDraft {
            anonymous_id: anonymous_id.unwrap_or_default(),
            user_id,
            answers,
            completed,
            metadata,
            attributes,
        })
    }
}

/// `answers`: at most [`MAX_QUESTIONS`] `{"questionId", "value"}` objects.
fn parse_answers(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<(String, Value)> {
    let mut answers = Vec::new();
    match v {
        Some(Value::Array(items)) if items.len() <= MAX_QUESTIONS => {
            for (i, item) in items.iter().enumerate() {
                let q = item.get("questionId").and_then(Value::as_str);
                let extra = item
                    .as_object()
                    .and_then(|m| m.keys().find(|k| *k != "questionId" && *k != "value"));
                match (q, item.get("value"), extra) {
                    (_, _, Some(k)) => errors.push(FieldError::new(
                        format!("answers[{i}].{k}"),
                        "is not accepted here (questionId, value)",
                    )),
                    (Some(q), Some(v), None) => answers.push((q.to_owned(), v.clone())),
                    _ => errors.push(FieldError::new(
                        format!("answers[{i}]"),
                        "must be an object {\"questionId\", \"value\"}",
                    )),
                }
            }
        }
        Some(Value::Array(_)) => errors.push(FieldError::new(
            "answers",
            format!("must hold at most {MAX_QUESTIONS} answers"),
        )),
        None => errors.push(FieldError::new("answers", "is required")),
        Some(v) => errors.push(FieldError::new(
            "answers",
            format!("must be an array, not {}", type_name(v)),
        )),
    }
    answers
}

/// `metadata`: url, device and locale; a `userAgent` is ignored (the header's is kept).
fn parse_metadata(v: Option<&Value>, errors: &mut Vec<FieldError>) -> ResponseMetadata {
    let mut metadata = ResponseMetadata::default();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            let known = ["url", "device", "locale", "userAgent"];
            unknown_keys(m, &known, |k| format!("metadata.{k}"), errors);
            metadata.url = short_text(m, "url", "metadata.url", 2000, errors);
            metadata.device = short_text(m, "device", "metadata.device", 100, errors);
            metadata.locale = short_text(m, "locale", "metadata.locale", 50, errors);
        }
        Some(v) => errors.push(FieldError::new(
            "metadata",
            format!("must be an object, not {}", type_name(v)),
        )),
    }
    metadata
}

/// `attributes`: what the widget knows of the visitor, as `attr.<key>` of the survey list
/// gives it (they override the profile's traits for the targeting's attribute rules): at
/// most [`MAX_ATTRIBUTES`] keys of 1 to 100 characters, each a string (at most 500
/// characters), a number or a boolean.
fn parse_attributes(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Map<String, Value> {
    let limit = (MAX_ATTRIBUTES, "attributes");
    let Some(Value::Object(m)) = at_most(v, "attributes", true, limit, errors) else {
        return Map::new();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let at = format!("attributes.{k}");
        if k.is_empty() || k.chars().count() > 100 || k.chars().any(char::is_control) {
            errors.push(FieldError::new(
                at,
                "the key must be 1 to 100 characters, no control characters",
            ));
            continue;
        }
        match v {
            // Kept as given (untrimmed), as the survey list's `attr.<key>` is.
            Value::String(s) => match Text::line(0, 500).check(s) {
                Ok(_) => {
                    out.insert(k.clone(), v.clone());
                }
                Err(e) => errors.push(FieldError::new(at, e)),
            },
            Value::Number(_) | Value::Bool(_) => {
                out.insert(k.clone(), v.clone());
            }
            Value::Null => {}
            v => errors.push(FieldError::new(
                at,
                format!("must be a string, number or boolean, not {}", type_name(v)),
            )),
        }
    }
    out
}

/// Checks one answer's value against its question; the error message.
fn check_value(q: &Question, v: &Value) -> Result<Value, String> {
    let option = |id: &str| q.options.iter().flatten().any(|o| o.id == id);
    match q.kind {
        QuestionType::Rating | QuestionType::Scale => {
            let (lo, hi) = (q.min.unwrap_or(0), q.max.unwrap_or(10));
            match v.as_i64() {
                Some(n) if (lo..=hi).contains(&n) => Ok(Value::from(n)),
                _ => Err(format!("must be an integer from {lo} to {hi}")),
            }
        }
        QuestionType::SingleChoice => match v.as_str() {
            Some(id) if option(id) => Ok(v.clone()),
            _ => Err("must be the id of one of the question's options".into()),
        },
        QuestionType::MultipleChoice => {
            let ids: Option<Vec<&str>> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect());
            match (ids, v.as_array()) {
                (Some(ids), Some(a)) if !ids.is_empty() && ids.len() == a.len() => {
                    if let Some(bad) = ids.iter().find(|i| !option(i)) {
                        return Err(format!("{bad:?} is not an option of the question"));
                    }
                    if ids.iter().enumerate().any(|(i, x)| ids[..i].contains(x)) {
                        return Err("must not repeat an option".into());
                    }
                    Ok(v.clone())
                }
                _ => Err("must be a non-empty array of option ids".into()),
            }
        }
        QuestionType::Text => match v.as_str() {
            Some(s) => match Text::lines(0, MAX_TEXT_ANSWER).check(s) {
                Ok(t) if t.is_empty() => Err("must not be empty".into()),
                Ok(t) => Ok(Value::String(t)),
                Err(e) => Err(e),
            },
            None => Err(format!("must be a string, not {}", type_name(v))),
        },
    }
}

/// The response a visitor's answers make: checked against `survey` (each problem names the
/// question: `answers.<questionId>`), merged into the visitor's `existing` response (an answer
/// replaces the one to the same question; a completed response stays completed). A completed
/// response must answer every required question.
pub fn respond(
    survey: &Survey,
    existing: Option<SurveyResponse>,
    draft: &ResponseDraft,
    now: Timestamp,
) -> Result<SurveyResponse, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut given: Vec<AnswerValue> = Vec::new();
    for (qid, v) in &draft.answers {
        let at = format!("answers.{qid}");
        let Some(q) = survey.questions.iter().find(|q| &q.id == qid) else {
            errors.push(FieldError::new(at, "is not a question of this survey"));
            continue;
        };
        if given.iter().any(|a| &a.question_id == qid) {
            errors.push(FieldError::new(at, "is answered twice"));
            continue;
        }
        match check_value(q, v) {
            Ok(value) => given.push(AnswerValue {
                question_id: qid.clone(),
                kind: q.kind,
                value,
            }),
            Err(m) => errors.push(FieldError::new(at, m)),
        }
    }
    let mut r = existing.unwrap_or_else(|| SurveyResponse {
        id: format!("{RESPONSE_PREFIX}{}", ids::object_id()),
        survey_id: survey.id.clone(),
        user_id: draft.user_id.clone(),
        anonymous_id: draft.anonymous_id.clone(),
        completed: false,
        answers: Vec::new(),
        score: None,
        metadata: ResponseMetadata::default(),
        created_at: now,
        updated_at: now,
    });
    for a in given {
        r.answers.retain(|old| old.question_id != a.question_id);
        r.answers.push(a);
    }
    let position = |a: &AnswerValue| survey.questions.iter().position(|q| q.id == a.question_id);
    r.answers.sort_by_key(position);
    r.completed = r.completed || draft.completed;
    if r.completed {
        for q in survey.questions.iter().filter(|q| q.required) {
            let at = format!("answers.{}", q.id);
            let reported = errors.iter().any(|e| e.field == at);
            if !reported && !r.answers.iter().any(|a| a.question_id == q.id) {
                errors.push(FieldError::new(
                    at,
                    "is required (send \"completed\": false for a partial response)",
                ));
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    r.anonymous_id = draft.anonymous_id.clone();
    let meta = &draft.metadata;
    r.metadata = ResponseMetadata {
        url: meta.url.clone().or(r.metadata.url.take()),
        device: meta.device.clone().or(r.metadata.device.take()),
        locale: meta.locale.clone().or(r.metadata.locale.take()),
        user_agent: meta.user_agent.clone().or(r.metadata.user_agent.take()),
    };
    r.score = match survey.kind {
        SurveyType::Nps | SurveyType::Csat => r
            .answers
            .iter()
            .find(|a| a.kind != QuestionType::Text)
            .and_then(|a| a.value.as_f64()),
        _ => None,
    };
    r.updated_at = now;
    Ok(r)
}
