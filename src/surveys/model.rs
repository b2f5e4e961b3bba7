//! Surveys as typed values (interface §2.1-2.2, api.md §4): the survey, its questions and
//! targeting, the status machine, the parsed bodies of create and PATCH (every bad field
//! reported at once), the type conventions, and the ordering and cursors of a list. No sled,
//! no HTTP.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{self, Timestamp};
use crate::storage::cursor::Cursor;
use crate::validation::{check_text, only_fields, type_name, FieldError};

/// The most questions a survey holds.
pub const MAX_QUESTIONS: usize = 50;
/// The most options a choice question holds.
pub const MAX_OPTIONS: usize = 50;
/// The most attribute rules of a targeting.
pub const MAX_RULES: usize = 50;
/// The most URL rules of a targeting.
pub const MAX_URL_RULES: usize = 20;
/// The longest value of a URL rule.
pub const MAX_URL_RULE_CHARS: usize = 500;

/// The PMF question's fixed option ids (api.md §4), labels free.
pub const PMF_OPTIONS: [&str; 3] = [
    "very_disappointed",
    "somewhat_disappointed",
    "not_disappointed",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SurveyType {
    Nps,
    Csat,
    Pmf,
    Open,
    Poll,
}

impl SurveyType {
    pub const ALL: [SurveyType; 5] = [
        SurveyType::Nps,
        SurveyType::Csat,
        SurveyType::Pmf,
        SurveyType::Open,
        SurveyType::Poll,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SurveyType::Nps => "nps",
            SurveyType::Csat => "csat",
            SurveyType::Pmf => "pmf",
            SurveyType::Open => "open",
            SurveyType::Poll => "poll",
        }
    }

    pub fn parse(s: &str) -> Option<SurveyType> {
        SurveyType::ALL.into_iter().find(|t| t.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SurveyStatus {
    Draft,
    Active,
    Paused,
    Closed,
}

impl SurveyStatus {
    pub const ALL: [SurveyStatus; 4] = [
        SurveyStatus::Draft,
        SurveyStatus::Active,
        SurveyStatus::Paused,
        SurveyStatus::Closed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SurveyStatus::Draft => "draft",
            SurveyStatus::Active => "active",
            SurveyStatus::Paused => "paused",
            SurveyStatus::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<SurveyStatus> {
        SurveyStatus::ALL.into_iter().find(|t| t.name() == s)
    }

    /// The moves out of this status (api.md §4): draft -> active; active <-> paused; active
    /// or paused -> closed; closed is terminal. A self-move is not a move.
    pub fn next(self) -> &'static [SurveyStatus] {
        match self {
            SurveyStatus::Draft => &[SurveyStatus::Active],
            SurveyStatus::Active => &[SurveyStatus::Paused, SurveyStatus::Closed],
            SurveyStatus::Paused => &[SurveyStatus::Active, SurveyStatus::Closed],
            SurveyStatus::Closed => &[],
        }
    }

    /// Active and paused surveys hold a slot of the plan's `active_surveys` (a paused survey
    /// can resume); closing frees it.
    pub fn holds_slot(self) -> bool {
        matches!(self, SurveyStatus::Active | SurveyStatus::Paused)
    }
}

/// Why a move is refused: the message names the allowed moves.
pub fn illegal_move(from: SurveyStatus, to: SurveyStatus) -> String {
    let allowed: Vec<&str> = from.next().iter().map(|s| s.name()).collect();
    let allowed = if allowed.is_empty() {
        "none (closed is final)".to_owned()
    } else {
        allowed.join(", ")
    };
    format!(
        "a {} survey cannot move to {}; allowed: {allowed}",
        from.name(),
        to.name()
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionType {
    Rating,
    Scale,
    SingleChoice,
    MultipleChoice,
    Text,
}

impl QuestionType {
    pub const ALL: [QuestionType; 5] = [
        QuestionType::Rating,
        QuestionType::Scale,
        QuestionType::SingleChoice,
        QuestionType::MultipleChoice,
        QuestionType::Text,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuestionType::Rating => "rating",
            QuestionType::Scale => "scale",
            QuestionType::SingleChoice => "single_choice",
            QuestionType::MultipleChoice => "multiple_choice",
            QuestionType::Text => "text",
        }
    }

    pub fn parse(s: &str) -> Option<QuestionType> {
        QuestionType::ALL.into_iter().find(|t| t.name() == s)
    }

    pub fn is_choice(self) -> bool {
        matches!(
            self,
            QuestionType::SingleChoice | QuestionType::MultipleChoice
        )
    }

    /// The default range of a numeric question (scale 0..10, rating 1..5).
    pub fn default_range(self) -> Option<(i64, i64)> {
        match self {
            QuestionType::Scale => Some((0, 10)),
            QuestionType::Rating => Some((1, 5)),
            _ => None,
        }
    }
}

/// A choice: `{"id": "opt_a", "label": "Very disappointed"}`; ids stay stable when labels change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QuestionOption {
    pub id: String,
    pub label: String,
}

/// One question (interface §2.2). `options` only on choice questions, `min`/`max` only on
/// rating and scale questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Question {
    pub id: String,
    pub text: String,
    #[serde(rename = "type")]
    pub kind: QuestionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<QuestionOption>>,
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
}

/// The operators of an attribute rule (api.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum Operator {
    Equals,
    NotEquals,
    LessThan,
    LessEqual,
    GreaterThan,
    GreaterEqual,
    IsSet,
    Contains,
    DoesNotContain,
    StartsWith,
    EndsWith,
}

impl Operator {
    pub const ALL: [Operator; 11] = [
        Operator::Equals,
        Operator::NotEquals,
        Operator::LessThan,
        Operator::LessEqual,
        Operator::GreaterThan,
        Operator::GreaterEqual,
        Operator::IsSet,
        Operator::Contains,
        Operator::DoesNotContain,
        Operator::StartsWith,
        Operator::EndsWith,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operator::Equals => "equals",
            Operator::NotEquals => "notEquals",
            Operator::LessThan => "lessThan",
            Operator::LessEqual => "lessEqual",
            Operator::GreaterThan => "greaterThan",
            Operator::GreaterEqual => "greaterEqual",
            Operator::IsSet => "isSet",
            Operator::Contains => "contains",
            Operator::DoesNotContain => "doesNotContain",
            Operator::StartsWith => "startsWith",
            Operator::EndsWith => "endsWith",
        }
    }

    pub fn parse(s: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.name() == s)
    }

    /// What `value` must be: none for isSet, a number for comparisons, a string for the text
    /// operators, a string, number or boolean for (not) equals.
    fn check_value(self, v: Option<&Value>) -> Result<(), String> {
        use Operator::*;
        match (self, v) {
            (IsSet, None | Some(Value::Null)) => Ok(()),
            (IsSet, Some(_)) => Err("isSet takes no value".into()),
            (_, None | Some(Value::Null)) => Err("is required for this operator".into()),
            (LessThan | LessEqual | GreaterThan | GreaterEqual, Some(Value::Number(_))) => Ok(()),
            (LessThan | LessEqual | GreaterThan | GreaterEqual, Some(v)) => {
                Err(format!("must be a number, not {}", type_name(v)))
            }
            (Contains | DoesNotContain | StartsWith | EndsWith, Some(Value::String(s))) => {
                check_text(s, 500, false).map(|_| ())
            }
            (Contains | DoesNotContain | StartsWith | EndsWith, Some(v)) => {
                Err(format!("must be a string, not {}", type_name(v)))
            }
            (Equals | NotEquals, Some(Value::String(s))) => check_text(s, 500, false).map(|_| ()),
            (Equals | NotEquals, Some(Value::Number(_) | Value::Bool(_))) => Ok(()),
            (Equals | NotEquals, Some(v)) => Err(format!(
                "must be a string, number or boolean, not {}",
                type_name(v)
            )),
        }
    }
}

/// `{"key": "plan", "operator": "equals", "value": "pro"}`; rules AND together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AttributeRule {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// The operators of a URL rule (Formbricks' "show on URL" filters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum UrlOperator {
    Equals,
    Contains,
    StartsWith,
    EndsWith,
    DoesNotContain,
}

impl UrlOperator {
    pub const ALL: [UrlOperator; 5] = [
        UrlOperator::Equals,
        UrlOperator::Contains,
        UrlOperator::StartsWith,
        UrlOperator::EndsWith,
        UrlOperator::DoesNotContain,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UrlOperator::Equals => "equals",
            UrlOperator::Contains => "contains",
            UrlOperator::StartsWith => "startsWith",
            UrlOperator::EndsWith => "endsWith",
            UrlOperator::DoesNotContain => "doesNotContain",
        }
    }

    pub fn parse(s: &str) -> Option<UrlOperator> {
        UrlOperator::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// `{"operator": "contains", "value": "/pricing"}`: a rule on the full URL of the page the
/// visitor is on (as the widget sends it: scheme, host, path, query and fragment), compared
/// case-sensitively as Formbricks does. URL rules OR together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UrlRule {
    pub operator: UrlOperator,
    /// 1 to 500 characters.
    pub value: String,
}

impl UrlRule {
    pub fn matches(&self, url: &str) -> bool {
        let v = self.value.as_str();
        match self.operator {
            UrlOperator::Equals => url == v,
            UrlOperator::Contains => url.contains(v),
            UrlOperator::StartsWith => url.starts_with(v),
            UrlOperator::EndsWith => url.ends_with(v),
            UrlOperator::DoesNotContain => !url.contains(v),
        }
    }
}

/// Who sees a survey: a share of visitors (deterministic sampling), attribute rules (all must
/// hold) and URL rules (one must hold; none: any page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Targeting {
    /// In (0, 100].
    pub percentage: f64,
    pub attributes: Vec<AttributeRule>,
    /// At most 20; empty: every page.
    #[serde(default)]
    pub urls: Vec<UrlRule>,
}

impl Default for Targeting {
    fn default() -> Self {
        Targeting {
            percentage: 100.0,
            attributes: Vec::new(),
            urls: Vec::new(),
        }
    }
}

/// A survey (interface §2.1), as stored and as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Survey {
    pub id: String,
    /// The board the survey belongs to, `null` when none.
    pub board_id: Option<String>,
    pub title: String,
    #[serde(rename = "type")]
    pub kind: SurveyType,
    pub status: SurveyStatus,
    pub questions: Vec<Question>,
    pub targeting: Targeting,
    pub response_count: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

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
            Some(Value::String(s)) => match check_text(s, 200, false) {
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

    /// A new draft from a create body (parsed with `create`), checked against its type's
    /// conventions.
    pub fn into_survey(self) -> Result<Survey, Vec<FieldError>> {
        let now = Timestamp::now();
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
    /// closed (409 otherwise); the result must keep its type's conventions.
    pub fn apply(&mut self, p: &SurveyPatch) -> Result<(), Rejection> {
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
        self.updated_at = Timestamp::now();
        Ok(())
    }

    /// Moves to `to` (409 with the allowed moves otherwise).
    pub fn move_to(&mut self, to: SurveyStatus) -> Result<(), String> {
        if !self.status.next().contains(&to) {
            return Err(illegal_move(self.status, to));
        }
        self.status = to;
        self.updated_at = Timestamp::now();
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
    for k in m.keys() {
        if !["id", "text", "type", "options", "required", "min", "max"].contains(&k.as_str()) {
            errors.push(FieldError::new(
                at(k),
                "is not accepted here (id, text, type, options, required, min, max)",
            ));
        }
    }
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
        Some(Value::String(s)) => match check_text(s, 1000, true) {
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
        if let Some(k) = m.keys().find(|k| *k != "id" && *k != "label") {
            errors.push(FieldError::new(
                format!("{here}.{k}"),
                "is not accepted here (id, label)",
            ));
        }
        let id = match m.get("id") {
            Some(Value::String(s)) if is_id(s) => Some(s.clone()),
            _ => {
                errors.push(FieldError::new(format!("{here}.id"), ID_RULE));
                None
            }
        };
        let label = match m.get("label") {
            Some(Value::String(s)) => match check_text(s, 200, false) {
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

fn parse_targeting(v: &Value, errors: &mut Vec<FieldError>) -> Option<Targeting> {
    let Value::Object(m) = v else {
        errors.push(FieldError::new(
            "targeting",
            format!("must be an object, not {}", type_name(v)),
        ));
        return None;
    };
    let before = errors.len();
    if let Some(k) = m
        .keys()
        .find(|k| !["percentage", "attributes", "urls"].contains(&k.as_str()))
    {
        errors.push(FieldError::new(
            format!("targeting.{k}"),
            "is not accepted here (percentage, attributes, urls)",
        ));
    }
    let percentage = match m.get("percentage") {
        None => 100.0,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(p) if p > 0.0 && p <= 100.0 => p,
            _ => {
                errors.push(FieldError::new(
                    "targeting.percentage",
                    "must be greater than 0 and at most 100",
                ));
                100.0
            }
        },
        Some(v) => {
            errors.push(FieldError::new(
                "targeting.percentage",
                format!("must be a number, not {}", type_name(v)),
            ));
            100.0
        }
    };
    let mut attributes = Vec::new();
    match m.get("attributes") {
        None | Some(Value::Null) => {}
        Some(Value::Array(rules)) if rules.len() > MAX_RULES => errors.push(FieldError::new(
            "targeting.attributes",
            format!("must hold at most {MAX_RULES} rules"),
        )),
        Some(Value::Array(rules)) => {
            for (i, r) in rules.iter().enumerate() {
                if let Some(rule) = parse_rule(i, r, errors) {
                    attributes.push(rule);
                }
            }
        }
        Some(v) => errors.push(FieldError::new(
            "targeting.attributes",
            format!("must be an array, not {}", type_name(v)),
        )),
    }
    let urls = parse_urls(m.get("urls"), errors);
    (errors.len() == before).then_some(Targeting {
        percentage,
        attributes,
        urls,
    })
}

/// `targeting.urls`: at most [`MAX_URL_RULES`] `{"operator", "value"}` objects.
fn parse_urls(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<UrlRule> {
    let rules = match v {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(rules)) if rules.len() <= MAX_URL_RULES => rules,
        Some(Value::Array(_)) => {
            errors.push(FieldError::new(
                "targeting.urls",
                format!("must hold at most {MAX_URL_RULES} rules"),
            ));
            return Vec::new();
        }
        Some(v) => {
            errors.push(FieldError::new(
                "targeting.urls",
                format!("must be an array, not {}", type_name(v)),
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let at = |f: &str| format!("targeting.urls[{i}].{f}");
        let Value::Object(m) = r else {
            errors.push(FieldError::new(
                format!("targeting.urls[{i}]"),
                "must be an object {\"operator\", \"value\"}",
            ));
            continue;
        };
        if let Some(k) = m.keys().find(|k| *k != "operator" && *k != "value") {
            errors.push(FieldError::new(
                at(k),
                "is not accepted here (operator, value)",
            ));
        }
        let operator = m
            .get("operator")
            .and_then(Value::as_str)
            .and_then(UrlOperator::parse);
        if operator.is_none() {
            errors.push(FieldError::new(
                at("operator"),
                format!(
                    "must be one of {}",
                    UrlOperator::ALL.map(UrlOperator::name).join(", ")
                ),
            ));
        }
        let value = match m.get("value") {
            Some(Value::String(s)) => match check_text(s, MAX_URL_RULE_CHARS, false) {
                Ok(t) if t.is_empty() => Err("must not be empty".to_owned()),
                other => other,
            },
            None | Some(Value::Null) => Err("is required".to_owned()),
            Some(v) => Err(format!("must be a string, not {}", type_name(v))),
        };
        match (operator, value) {
            (Some(operator), Ok(value)) => out.push(UrlRule { operator, value }),
            (_, Err(m)) => errors.push(FieldError::new(at("value"), m)),
            (None, Ok(_)) => {}
        }
    }
    out
}

fn parse_rule(i: usize, v: &Value, errors: &mut Vec<FieldError>) -> Option<AttributeRule> {
    let at = |f: &str| format!("targeting.attributes[{i}].{f}");
    let Value::Object(m) = v else {
        errors.push(FieldError::new(
            format!("targeting.attributes[{i}]"),
            "must be an object {\"key\", \"operator\", \"value\"}",
        ));
        return None;
    };
    let before = errors.len();
    if let Some(k) = m
        .keys()
        .find(|k| !["key", "operator", "value"].contains(&k.as_str()))
    {
        errors.push(FieldError::new(
            at(k),
            "is not accepted here (key, operator, value)",
        ));
    }
    let key = match m.get("key") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 100 => {
            Some(s.trim().to_owned())
        }
        _ => {
            errors.push(FieldError::new(
                at("key"),
                "must be a string of 1 to 100 characters",
            ));
            None
        }
    };
    let operator = m
        .get("operator")
        .and_then(Value::as_str)
        .and_then(Operator::parse);
    match operator {
        None => errors.push(FieldError::new(
            at("operator"),
            format!(
                "must be one of {}",
                Operator::ALL.map(Operator::name).join(", ")
            ),
        )),
        Some(op) => {
            if let Err(e) = op.check_value(m.get("value")) {
                errors.push(FieldError::new(at("value"), e));
            }
        }
    }
    if errors.len() != before {
        return None;
    }
    Some(AttributeRule {
        key: key?,
        operator: operator?,
        value: m.get("value").filter(|v| !v.is_null()).cloned(),
    })
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

/// The sortable fields of a survey list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortField {
    CreatedAt,
    UpdatedAt,
    ResponseCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub field: SortField,
    pub descending: bool,
}

impl Sort {
    /// `createdAt`, `updatedAt`, `responseCount`, each optionally with `-`; default
    /// `-createdAt`.
    pub fn parse(raw: Option<&str>) -> Option<Sort> {
        let raw = raw.unwrap_or("-createdAt").trim();
        let (descending, name) = match raw.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, raw.strip_prefix('+').unwrap_or(raw)),
        };
        let field = match name {
            "createdAt" => SortField::CreatedAt,
            "updatedAt" => SortField::UpdatedAt,
            "responseCount" => SortField::ResponseCount,
            _ => return None,
        };
        Some(Sort { field, descending })
    }

    /// The field's tag in a cursor (the shared cursor adds the direction).
    fn tag(self) -> u8 {
        match self.field {
            SortField::CreatedAt => b'c',
            SortField::UpdatedAt => b'u',
            SortField::ResponseCount => b'r',
        }
    }

    fn key(self, s: &Survey) -> i64 {
        match self.field {
            SortField::CreatedAt => s.created_at.micros(),
            SortField::UpdatedAt => s.updated_at.micros(),
            SortField::ResponseCount => s.response_count as i64,
        }
    }
}

/// A page's end as a cursor (the shared [`Cursor`] of sorted walks): the sort key (8 bytes,
/// big-endian) and the id of its last item.
fn cursor_at(key: i64, id: &str) -> Cursor {
    Cursor::new([&key.to_be_bytes()[..], id.as_bytes()].concat())
}

/// The sort key and id a cursor resumes after; `None` unless it holds a valid id.
fn position(entry: &[u8]) -> Option<(i64, String)> {
    let (key, id) = entry.split_first_chunk::<8>()?;
    let id = std::str::from_utf8(id).ok()?;
    ids::is_object_id(id.strip_prefix(RESPONSE_PREFIX).unwrap_or(id))
        .then(|| (i64::from_be_bytes(*key), id.to_owned()))
}

impl Sort {
    /// A cursor as clients see it, bound to this sort order and the list (`scope`: the app, or
    /// the app and survey; a cursor of another list is 400).
    pub fn encode_cursor(self, c: &Cursor, scope: &str) -> String {
        c.encode(self.tag(), self.descending, scope)
    }

    /// `None` for a malformed cursor, or one made for another sort order or another list.
    pub fn decode_cursor(self, raw: &str, scope: &str) -> Option<Cursor> {
        Cursor::decode(raw, self.tag(), self.descending, scope, |e| {
            position(e).is_some()
        })
    }
}

/// Which surveys a list shows: statuses (empty: any), types (empty: any), boards (empty: any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub statuses: Vec<SurveyStatus>,
    pub types: Vec<SurveyType>,
    pub board_ids: Vec<String>,
}

impl Filter {
    pub fn matches(&self, s: &Survey) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&s.status))
            && (self.types.is_empty() || self.types.contains(&s.kind))
            && (self.board_ids.is_empty()
                || s.board_id
                    .as_ref()
                    .is_some_and(|b| self.board_ids.contains(b)))
    }
}

/// One page of `items` (any order in, already filtered): sorted by `key` (sort key, id),
/// starting after `cursor`; answers the page and the cursor of the next one.
pub fn page_by<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> (i64, String),
    descending: bool,
    limit: usize,
    cursor: Option<&Cursor>,
) -> (Vec<T>, Option<Cursor>) {
    items.sort_by_cached_key(&key);
    if descending {
        items.reverse();
    }
    let after = cursor.and_then(|c| position(c.entry()));
    let rest: Vec<T> = items
        .into_iter()
        .filter(|s| match &after {
            None => true,
            Some(c) if descending => key(s) < *c,
            Some(c) => key(s) > *c,
        })
        .collect();
    let has_more = rest.len() > limit;
    let page: Vec<T> = rest.into_iter().take(limit).collect();
    let next = has_more
        .then(|| {
            page.last().map(|s| {
                let (key, id) = key(s);
                cursor_at(key, &id)
            })
        })
        .flatten();
    (page, next)
}

/// One page of surveys, filtered and sorted.
pub fn page(
    mut surveys: Vec<Survey>,
    filter: &Filter,
    sort: Sort,
    limit: usize,
    cursor: Option<&Cursor>,
) -> (Vec<Survey>, Option<Cursor>) {
    surveys.retain(|s| filter.matches(s));
    page_by(
        surveys,
        |s| (sort.key(s), s.id.clone()),
        sort.descending,
        limit,
        cursor,
    )
}

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
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseDraft {
    pub anonymous_id: String,
    pub user_id: Option<String>,
    pub answers: Vec<(String, Value)>,
    pub completed: bool,
    pub metadata: ResponseMetadata,
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
        Some(Value::String(s)) => match check_text(s, max, false) {
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

impl ResponseDraft {
    /// Parses a widget body: `{"anonymousId", "userId"?, "answers": [{"questionId", "value"}],
    /// "completed"?: true, "metadata"?: {"url", "device", "locale"}}`.
    pub fn parse(
        body: &Map<String, Value>,
        user_agent: Option<String>,
    ) -> Result<ResponseDraft, Vec<FieldError>> {
        let mut errors = Vec::new();
        only_fields(
            body,
            &["anonymousId", "userId", "answers", "completed", "metadata"],
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
        let mut answers = Vec::new();
        match body.get("answers") {
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
        let mut metadata = ResponseMetadata {
            user_agent: user_agent.map(|u| u.chars().take(1000).collect()),
            ..ResponseMetadata::default()
        };
        match body.get("metadata") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                if let Some(k) = m
                    .keys()
                    .find(|k| !["url", "device", "locale"].contains(&k.as_str()))
                {
                    errors.push(FieldError::new(
                        format!("metadata.{k}"),
                        "is not accepted here (url, device, locale)",
                    ));
                }
                metadata.url = short_text(m, "url", "metadata.url", 2000, &mut errors);
                metadata.device = short_text(m, "device", "metadata.device", 100, &mut errors);
                metadata.locale = short_text(m, "locale", "metadata.locale", 50, &mut errors);
            }
            Some(v) => errors.push(FieldError::new(
                "metadata",
                format!("must be an object, not {}", type_name(v)),
            )),
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ResponseDraft {
            anonymous_id: anonymous_id.unwrap_or_default(),
            user_id,
            answers,
            completed,
            metadata,
        })
    }
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
            Some(s) => match check_text(s, MAX_TEXT_ANSWER, true) {
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
    let now = Timestamp::now();
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

/// Which responses a list shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResponseFilter {
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    pub completed: Option<bool>,
    pub user_ids: Vec<String>,
    pub anonymous_ids: Vec<String>,
}

impl ResponseFilter {
    pub fn matches(&self, r: &SurveyResponse) -> bool {
        self.since.is_none_or(|t| r.created_at >= t)
            && self.until.is_none_or(|t| r.created_at < t)
            && self.completed.is_none_or(|c| r.completed == c)
            && (self.user_ids.is_empty()
                || r.user_id
                    .as_ref()
                    .is_some_and(|u| self.user_ids.contains(u)))
            && (self.anonymous_ids.is_empty() || self.anonymous_ids.contains(&r.anonymous_id))
    }
}

/// One page of responses, filtered and sorted (createdAt or updatedAt).
pub fn page_responses(
    mut responses: Vec<SurveyResponse>,
    filter: &ResponseFilter,
    sort: Sort,
    limit: usize,
    cursor: Option<&Cursor>,
) -> (Vec<SurveyResponse>, Option<Cursor>) {
    responses.retain(|r| filter.matches(r));
    let key = move |r: &SurveyResponse| {
        let k = match sort.field {
            SortField::UpdatedAt => r.updated_at.micros(),
            _ => r.created_at.micros(),
        };
        (k, r.id.clone())
    };
    page_by(responses, key, sort.descending, limit, cursor)
}

/// The score of a survey (api.md §4): `kind` nps, csat or pmf; `value` `null` with no answers.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Score {
    pub kind: SurveyType,
    pub value: Option<f64>,
}

/// One option's count.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OptionCount {
    pub id: String,
    pub label: String,
    pub count: u64,
}

/// What the answers to one question add up to.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionSummary {
    pub question_id: String,
    /// Responses answering the question.
    pub answered: u64,
    /// Rating and scale questions: the mean answer (two decimals), `null` with no answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<Option<f64>>,
    /// Choice questions: the count of each option (a multiple choice answer counts each).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<OptionCount>>,
    /// Rating and scale questions: the count of each value of the range.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub distribution: Option<std::collections::BTreeMap<String, u64>>,
}

/// `GET /api/v1/surveys/{id}/summary`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub survey_id: String,
    pub response_count: u64,
    pub completed_count: u64,
    /// `null` for open surveys and polls.
    pub score: Option<Score>,
    pub questions: Vec<QuestionSummary>,
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// Counts per question and option, means, and the score: NPS = % promoters (9-10) - %
/// detractors (0-6), in -100..100; CSAT = % of 4-5 answers; PMF = % "very disappointed"; each
/// over the responses answering the scored question (partial ones included), one decimal.
pub fn summarize(survey: &Survey, responses: &[SurveyResponse]) -> Summary {
    let answers_to = |qid: &str| -> Vec<&Value> {
        responses
            .iter()
            .filter_map(|r| r.answers.iter().find(|a| a.question_id == qid))
            .map(|a| &a.value)
            .collect()
    };
    let questions = survey
        .questions
        .iter()
        .map(|q| {
            let values = answers_to(&q.id);
            let mut s = QuestionSummary {
                question_id: q.id.clone(),
                answered: values.len() as u64,
                mean: None,
                options: None,
                distribution: None,
            };
            if let (Some(lo), Some(hi)) = (q.min, q.max) {
                let nums: Vec<i64> = values.iter().filter_map(|v| v.as_i64()).collect();
                let mean = (!nums.is_empty())
                    .then(|| round(nums.iter().sum::<i64>() as f64 / nums.len() as f64, 2));
                s.mean = Some(mean);
                s.distribution = Some(
                    (lo..=hi)
                        .map(|n| {
                            let c = nums.iter().filter(|x| **x == n).count() as u64;
                            (n.to_string(), c)
                        })
                        .collect(),
                );
            }
            if let Some(options) = &q.options {
                let count = |id: &str| {
                    values
                        .iter()
                        .filter(|v| match v {
                            Value::String(s) => s == id,
                            Value::Array(a) => a.iter().any(|x| x.as_str() == Some(id)),
                            _ => false,
                        })
                        .count() as u64
                };
                s.options = Some(
                    options
                        .iter()
                        .map(|o| OptionCount {
                            id: o.id.clone(),
                            label: o.label.clone(),
                            count: count(&o.id),
                        })
                        .collect(),
                );
            }
            s
        })
        .collect();
    let scored = survey
        .questions
        .iter()
        .find(|q| q.kind != QuestionType::Text);
    let share = |values: &[&Value], hit: &dyn Fn(&Value) -> bool| -> Option<f64> {
        (!values.is_empty())
            .then(|| 100.0 * values.iter().filter(|v| hit(v)).count() as f64 / values.len() as f64)
    };
    let score = match (survey.kind, scored) {
        (SurveyType::Nps | SurveyType::Csat | SurveyType::Pmf, Some(q)) => {
            let values = answers_to(&q.id);
            let int = |v: &Value| v.as_i64().unwrap_or(i64::MIN);
            let value = match survey.kind {
                SurveyType::Nps => share(&values, &|v| int(v) >= 9)
                    .zip(share(&values, &|v| (0..=6).contains(&int(v))))
                    .map(|(p, d)| p - d),
                SurveyType::Csat => share(&values, &|v| (4..=5).contains(&int(v))),
                _ => share(&values, &|v| v.as_str() == Some(PMF_OPTIONS[0])),
            };
            Some(Score {
                kind: survey.kind,
                value: value.map(|v| round(v, 1)),
            })
        }
        _ => None,
    };
    Summary {
        survey_id: survey.id.clone(),
        response_count: survey.response_count,
        completed_count: responses.iter().filter(|r| r.completed).count() as u64,
        score,
        questions,
    }
}

/// One point of a score over time: the bucket's first day, its score (`None` when no response
/// of the bucket answers the scored question) and the responses it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ScorePoint {
    pub start: chrono::NaiveDate,
    pub score: Option<f64>,
    pub responses: u64,
}

/// Responses spanning more days than this are bucketed by week instead of by day.
pub const DAILY_SPAN_DAYS: i64 = 62;

/// The score (as `summarize` computes it) per UTC day of `createdAt`, or per week (Monday
/// first) when the responses span more than [`DAILY_SPAN_DAYS`], every bucket from the first
/// response's to the last's present; empty for a survey without a score or without responses.
pub fn score_over_time(survey: &Survey, responses: &[SurveyResponse]) -> Vec<ScorePoint> {
    use chrono::{Datelike, Duration, NaiveDate};
    let scored = matches!(
        survey.kind,
        SurveyType::Nps | SurveyType::Csat | SurveyType::Pmf
    );
    let day = |r: &SurveyResponse| r.created_at.time().date_naive();
    let (Some(first), Some(last)) = (
        responses.iter().map(day).min(),
        responses.iter().map(day).max(),
    ) else {
        return Vec::new();
    };
    if !scored {
        return Vec::new();
    }
    let weekly = (last - first).num_days() > DAILY_SPAN_DAYS;
    let start_of = |d: NaiveDate| {
        if weekly {
            d - Duration::days(i64::from(d.weekday().num_days_from_monday()))
        } else {
            d
        }
    };
    let step = Duration::days(if weekly { 7 } else { 1 });
    let mut groups: std::collections::BTreeMap<NaiveDate, Vec<SurveyResponse>> =
        std::collections::BTreeMap::new();
    for r in responses {
        groups.entry(start_of(day(r))).or_default().push(r.clone());
    }
    let mut out = Vec::new();
    let mut at = start_of(first);
    while at <= last {
        let group = groups.get(&at).map_or(&[][..], Vec::as_slice);
        out.push(ScorePoint {
            start: at,
            score: summarize(survey, group).score.and_then(|s| s.value),
            responses: group.len() as u64,
        });
        at += step;
    }
    out
}

/// Deterministic sampling: the visitor's bucket in 0..10 000 for this survey (the first
/// bytes of SHA-256 of survey id and visitor), so the same visitor is always in or out.
pub fn bucket(survey_id: &str, visitor: &str) -> u64 {
    let h = <sha2::Sha256 as sha2::Digest>::digest(format!("{survey_id}\0{visitor}").as_bytes());
    u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) % 10_000
}

/// Whether the visitor falls in the survey's percentage.
pub fn sampled(survey_id: &str, visitor: &str, percentage: f64) -> bool {
    (bucket(survey_id, visitor) as f64) < percentage * 100.0
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl AttributeRule {
    /// Whether the visitor's attributes satisfy the rule. An attribute the visitor lacks
    /// satisfies no rule (a targeted survey is shown only to visitors known to match).
    pub fn matches(&self, attrs: &Map<String, Value>) -> bool {
        let Some(have) = attrs.get(&self.key).filter(|v| !v.is_null()) else {
            return false;
        };
        let want = self.value.as_ref().unwrap_or(&Value::Null);
        let text = |v: &Value| as_text(v).unwrap_or_default();
        let equal = || match (as_number(have), as_number(want)) {
            (Some(a), Some(b)) => a == b,
            _ => text(have) == text(want),
        };
        let compare = |f: fn(f64, f64) -> bool| match (as_number(have), as_number(want)) {
            (Some(a), Some(b)) => f(a, b),
            _ => false,
        };
        match self.operator {
            Operator::IsSet => !text(have).is_empty(),
            Operator::Equals => equal(),
            Operator::NotEquals => !equal(),
            Operator::LessThan => compare(|a, b| a < b),
            Operator::LessEqual => compare(|a, b| a <= b),
            Operator::GreaterThan => compare(|a, b| a > b),
            Operator::GreaterEqual => compare(|a, b| a >= b),
            Operator::Contains => text(have).contains(&text(want)),
            Operator::DoesNotContain => !text(have).contains(&text(want)),
            Operator::StartsWith => text(have).starts_with(&text(want)),
            Operator::EndsWith => text(have).ends_with(&text(want)),
        }
    }
}

impl Survey {
    /// Whether `visitor` (see [`visitor`]) with `attrs` on the page `url` is targeted: active,
    /// in the sample, satisfying every attribute rule and, when the survey has URL rules, one
    /// of them (a request without a URL matches none).
    pub fn targets(&self, visitor: &str, attrs: &Map<String, Value>, url: Option<&str>) -> bool {
        let t = &self.targeting;
        self.status == SurveyStatus::Active
            && sampled(&self.id, visitor, t.percentage)
            && t.attributes.iter().all(|r| r.matches(attrs))
            && (t.urls.is_empty() || url.is_some_and(|u| t.urls.iter().any(|r| r.matches(u))))
    }
}

/// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv_row<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let mut line = cells
        .into_iter()
        .map(csv_field)
        .collect::<Vec<_>>()
        .join(",");
    line.push_str("\r\n");
    line
}

/// The CSV header: `responseId,createdAt,updatedAt,completed,userId,anonymousId`, then one
/// column per question titled by its text.
pub fn csv_header(survey: &Survey) -> String {
    let fixed = [
        "responseId",
        "createdAt",
        "updatedAt",
        "completed",
        "userId",
        "anonymousId",
    ];
    csv_row(
        fixed
            .into_iter()
            .chain(survey.questions.iter().map(|q| q.text.as_str())),
    )
}

/// One response as a CSV row: choices as their labels (a multiple choice joined by `; `),
/// numbers and text as given, an unanswered question empty.
pub fn csv_line(survey: &Survey, r: &SurveyResponse) -> String {
    let label = |q: &Question, id: &str| {
        q.options
            .iter()
            .flatten()
            .find(|o| o.id == id)
            .map(|o| o.label.clone())
            .unwrap_or_else(|| id.to_owned())
    };
    let answers = survey.questions.iter().map(|q| {
        let Some(a) = r.answers.iter().find(|a| a.question_id == q.id) else {
            return String::new();
        };
        match &a.value {
            Value::String(s) if q.kind == QuestionType::SingleChoice => label(q, s),
            Value::String(s) => s.clone(),
            Value::Array(ids) => ids
                .iter()
                .filter_map(Value::as_str)
                .map(|id| label(q, id))
                .collect::<Vec<_>>()
                .join("; "),
            other => other.to_string(),
        }
    });
    let fixed = [
        r.id.clone(),
        r.created_at.to_string(),
        r.updated_at.to_string(),
        r.completed.to_string(),
        r.user_id.clone().unwrap_or_default(),
        r.anonymous_id.clone(),
    ];
    let cells: Vec<String> = fixed.into_iter().chain(answers).collect();
    csv_row(cells.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn fields(e: Vec<FieldError>) -> Vec<String> {
        e.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn transitions_follow_the_machine() {
        use SurveyStatus::*;
        let legal = [
            (Draft, Active),
            (Active, Paused),
            (Paused, Active),
            (Active, Closed),
            (Paused, Closed),
        ];
        for from in SurveyStatus::ALL {
            for to in SurveyStatus::ALL {
                assert_eq!(
                    from.next().contains(&to),
                    legal.contains(&(from, to)),
                    "{from:?} -> {to:?}"
                );
            }
        }
        assert!(illegal_move(Draft, Closed).contains("allowed: active"));
        assert!(illegal_move(Closed, Active).contains("none"));
    }

    #[test]
    fn an_nps_survey_needs_one_scale_from_0_to_10() {
        let ok = body(json!({"title": "NPS", "type": "nps", "questions": [
            {"id": "score", "text": "How likely?", "type": "scale"},
            {"id": "why", "text": "Why?", "type": "text", "required": false}]}));
        let s = SurveyPatch::parse(&ok, true)
            .unwrap()
            .into_survey()
            .unwrap();
        assert_eq!(
            (s.questions[0].min, s.questions[0].max),
            (Some(0), Some(10))
        );
        let bad = body(json!({"title": "NPS", "type": "nps", "questions": [
            {"id": "score", "text": "How likely?", "type": "scale", "max": 5}]}));
        let e = SurveyPatch::parse(&bad, true)
            .unwrap()
            .into_survey()
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

    fn survey(n: i64, status: SurveyStatus) -> Survey {
        let t = Timestamp::from_micros(n * 1_000_000);
        Survey {
            id: format!("{n:024x}"),
            board_id: None,
            title: "t".into(),
            kind: SurveyType::Open,
            status,
            questions: vec![],
            targeting: Targeting::default(),
            response_count: 0,
            created_at: t,
            updated_at: t,
        }
    }

    #[test]
    fn a_cursor_walk_sees_every_survey_once() {
        let all: Vec<Survey> = (0..25)
            .map(|n| survey(n % 7, SurveyStatus::Active))
            .collect();
        let all: Vec<Survey> = all
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                s.id = format!("{i:024x}");
                s
            })
            .collect();
        let sort = Sort::parse(None).unwrap();
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let c = cursor
                .as_ref()
                .map(|c: &String| sort.decode_cursor(c, "app").unwrap());
            let (page, next) = page(all.clone(), &Filter::default(), sort, 4, c.as_ref());
            seen.extend(page.into_iter().map(|s| s.id));
            match next {
                Some(n) => cursor = Some(sort.encode_cursor(&n, "app")),
                None => break,
            }
        }
        assert_eq!(seen.len(), 25);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 25);
        let c = sort.encode_cursor(&cursor_at(1, &"0".repeat(24)), "app");
        assert!(sort.decode_cursor(&c, "app").is_some());
        assert!(sort.decode_cursor(&c, "other").is_none());
        let ascending = Sort::parse(Some("createdAt")).unwrap();
        assert!(ascending.decode_cursor(&c, "app").is_none());
        let not_an_id = sort.encode_cursor(&cursor_at(1, "x"), "app");
        assert!(sort.decode_cursor(&not_an_id, "app").is_none());
    }

    #[test]
    fn sampling_buckets_are_pinned() {
        // Changing the hash would move visitors in and out of running surveys.
        assert_eq!(bucket("000000000000000000000001", "a:visitor-1"), 4036);
        assert_eq!(bucket("5f0c0c0c0c0c0c0c0c0c0c0c", "u:alice"), 3834);
        assert!(sampled("000000000000000000000001", "a:visitor-1", 40.37));
        assert!(!sampled("000000000000000000000001", "a:visitor-1", 40.36));
        assert!(sampled("000000000000000000000001", "a:visitor-1", 100.0));
    }

    #[test]
    fn url_rules_or_together_and_need_a_url() {
        let mut s = survey(1, SurveyStatus::Active);
        let none = Map::new();
        assert!(
            s.targets("a:v", &none, None),
            "no rule: any page, even unknown"
        );
        let rule = |operator, value: &str| UrlRule {
            operator,
            value: value.into(),
        };
        s.targeting.urls = vec![
            rule(UrlOperator::StartsWith, "https://a.example/docs"),
            rule(UrlOperator::Equals, "https://a.example/"),
        ];
        assert!(s.targets("a:v", &none, Some("https://a.example/docs/start")));
        assert!(s.targets("a:v", &none, Some("https://a.example/")));
        assert!(!s.targets("a:v", &none, Some("https://a.example/blog")));
        assert!(!s.targets("a:v", &none, None));
        let url = "https://a.example/pricing?x=1";
        for (op, value, want) in [
            (UrlOperator::Contains, "/pricing", true),
            (UrlOperator::Contains, "/Pricing", false),
            (UrlOperator::EndsWith, "?x=1", true),
            (UrlOperator::DoesNotContain, "/blog", true),
            (UrlOperator::DoesNotContain, "pricing", false),
            (UrlOperator::Equals, url, true),
        ] {
            assert_eq!(rule(op, value).matches(url), want, "{op:?} {value}");
        }
    }

    #[test]
    fn attribute_rules_compare_as_documented() {
        let attrs =
            body(json!({"plan": "pro", "seats": "12", "email": "ann@example.com", "beta": true}));
        let rule = |key: &str, op: Operator, value: Value| AttributeRule {
            key: key.into(),
            operator: op,
            value: (!value.is_null()).then_some(value),
        };
        use Operator::*;
        let yes = [
            rule("plan", Equals, json!("pro")),
            rule("plan", NotEquals, json!("free")),
            rule("seats", Equals, json!(12)),
            rule("seats", GreaterThan, json!(10)),
            rule("seats", LessEqual, json!(12)),
            rule("email", EndsWith, json!("@example.com")),
            rule("email", StartsWith, json!("ann")),
            rule("email", Contains, json!("example")),
            rule("email", DoesNotContain, json!("gmail")),
            rule("beta", Equals, json!(true)),
            rule("plan", IsSet, Value::Null),
        ];
        for r in yes {
            assert!(r.matches(&attrs), "{r:?}");
        }
        let no = [
            rule("plan", Equals, json!("Pro")),
            rule("seats", LessThan, json!(12)),
            rule("plan", GreaterThan, json!(1)),
            rule("missing", IsSet, Value::Null),
            rule("missing", NotEquals, json!("x")),
        ];
        for r in no {
            assert!(!r.matches(&attrs), "{r:?}");
        }
    }

    fn nps_answer(day: i64, hour: i64, value: i64) -> SurveyResponse {
        let t = Timestamp::from_micros((day * 86_400 + hour * 3_600) * 1_000_000);
        SurveyResponse {
            id: format!("resp_{day}_{hour}_{value}"),
            survey_id: "s".into(),
            user_id: None,
            anonymous_id: "a".into(),
            completed: true,
            answers: vec![AnswerValue {
                question_id: "q".into(),
                kind: QuestionType::Scale,
                value: json!(value),
            }],
            score: Some(value as f64),
            metadata: ResponseMetadata::default(),
            created_at: t,
            updated_at: t,
        }
    }

    fn nps_survey() -> Survey {
        let mut s = survey(1, SurveyStatus::Active);
        s.kind = SurveyType::Nps;
        s.questions = vec![Question {
            id: "q".into(),
            text: "How likely?".into(),
            kind: QuestionType::Scale,
            options: None,
            required: true,
            min: Some(0),
            max: Some(10),
        }];
        s
    }

    #[test]
    fn the_score_over_time_is_bucketed_by_day_with_empty_days_kept() {
        let s = nps_survey();
        // Day 0: a promoter and a detractor (0); day 1: nothing; day 2: two promoters (100).
        let rs = [
            nps_answer(2, 9, 10),
            nps_answer(0, 1, 10),
            nps_answer(0, 23, 3),
            nps_answer(2, 0, 9),
        ];
        let points = score_over_time(&s, &rs);
        let day = |n: u32| chrono::NaiveDate::from_ymd_opt(1970, 1, 1 + n).unwrap();
        assert_eq!(
            points,
            vec![
                ScorePoint {
                    start: day(0),
                    score: Some(0.0),
                    responses: 2
                },
                ScorePoint {
                    start: day(1),
                    score: None,
                    responses: 0
                },
                ScorePoint {
                    start: day(2),
                    score: Some(100.0),
                    responses: 2
                },
            ]
        );
        let mut open = s.clone();
        open.kind = SurveyType::Open;
        assert!(score_over_time(&open, &rs).is_empty());
        assert!(score_over_time(&s, &[]).is_empty());
    }

    #[test]
    fn a_long_span_is_bucketed_by_week_from_monday() {
        // 1970-01-01 was a Thursday: its week starts on Monday 1969-12-29.
        let rs = [
            nps_answer(0, 0, 10),
            nps_answer(4, 0, 0),
            nps_answer(90, 0, 9),
        ];
        let points = score_over_time(&nps_survey(), &rs);
        let monday = chrono::NaiveDate::from_ymd_opt(1969, 12, 29).unwrap();
        assert_eq!(points.len(), 14);
        assert_eq!(points[0].start, monday);
        assert_eq!((points[0].score, points[0].responses), (Some(100.0), 1));
        assert_eq!((points[1].score, points[1].responses), (Some(-100.0), 1));
        assert_eq!(points[13].start, monday + chrono::Duration::days(91));
        assert_eq!(points[13].score, Some(100.0));
        assert!(points[2..13].iter().all(|p| p.score.is_none()));
    }
}
