//! A survey's responses as CSV rows (the API's `responses.csv` and the dashboard's export),
//! written by `crate::csv`.

use actix_web::HttpResponse;
use serde_json::Value;

use super::response::SurveyResponse;
use super::survey::{Question, QuestionType, Survey};

/// The responses as a streamed `text/csv` attachment named `responses.csv`: the header, then
/// one row per response, oldest first (ties by id).
pub fn csv_download(survey: Survey, mut responses: Vec<SurveyResponse>) -> HttpResponse {
    responses.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    let header = csv_header(&survey);
    let rows = responses.into_iter().map(move |r| csv_line(&survey, &r));
    let body = futures_util::stream::iter(
        std::iter::once(header)
            .chain(rows)
            .map(|line| Ok::<_, actix_web::Error>(bytes::Bytes::from(line))),
    );
    HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            actix_web::http::header::CONTENT_DISPOSITION,
            "attachment; filename=\"responses.csv\"",
        ))
        .streaming(body)
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
