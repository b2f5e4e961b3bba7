//! A survey's responses as CSV rows (the API's `responses.csv` and the dashboard's export),
//! written by `crate::csv`.

use serde_json::Value;

use super::response::SurveyResponse;
use super::survey::{Question, QuestionType, Survey};

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
    crate::csv::row(
        fixed
            .into_iter()
            .chain(survey.questions.iter().map(|q| q.text.as_str())),
    )
}

/// One response as a CSV row: choices as their labels (a multiple choice joined by `; `),
/// numbers and text as given, an unanswered question empty; formula cells defused like every
/// CSV's (`crate::csv::row`).
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
    crate::csv::row(fixed.into_iter().chain(answers))
}
