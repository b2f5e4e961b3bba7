//! What a survey's responses add up to: counts, means, distributions, the score, and the
//! score over time.

use serde::Serialize;
use serde_json::Value;

use super::response::SurveyResponse;
use super::survey::{QuestionType, Survey, SurveyType, PMF_OPTIONS};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Timestamp;
    use crate::surveys::response::{AnswerValue, ResponseMetadata};
    use crate::surveys::survey::tests::survey;
    use crate::surveys::survey::{Question, SurveyStatus};
    use serde_json::json;

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
