//! What a survey's responses add up to: counts, means, distributions, the score, and the
//! score over time.

use serde::Serialize;
use std::collections::BTreeMap;

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
    let score = ScoreTally::of(survey).map(|mut tally| {
        for r in responses {
            tally.add(r);
        }
        Score {
            kind: survey.kind,
            value: tally.value(),
        }
    });
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
/// One pass over the responses tallies each day; the days then fold into their buckets.
pub fn score_over_time(survey: &Survey, responses: &[SurveyResponse]) -> Vec<ScorePoint> {
    use chrono::{Datelike, Duration, NaiveDate};
    if responses.is_empty() {
        return Vec::new();
    }
    let Some(empty) = ScoreTally::of(survey) else {
        return Vec::new();
    };
    let mut days: BTreeMap<NaiveDate, ScoreTally> = BTreeMap::new();
    for r in responses {
        let day = r.created_at.time().date_naive();
        days.entry(day).or_insert_with(|| empty.clone()).add(r);
    }
    let (Some(first), Some(last)) = (days.keys().next().copied(), days.keys().last().copied())
    else {
        return Vec::new();
    };
    let weekly = (last - first).num_days() > DAILY_SPAN_DAYS;
    let start_of = |d: NaiveDate| {
        if weekly {
            d - Duration::days(i64::from(d.weekday().num_days_from_monday()))
        } else {
            d
        }
    };
    let step = Duration::days(if weekly { 7 } else { 1 });
    let mut buckets: BTreeMap<NaiveDate, ScoreTally> = BTreeMap::new();
    for (day, tally) in days {
        buckets
            .entry(start_of(day))
            .or_insert_with(|| empty.clone())
            .merge(&tally);
    }
    let mut out = Vec::new();
    let mut at = start_of(first);
    while at <= last {
        let tally = buckets.get(&at).unwrap_or(&empty);
        out.push(ScorePoint {
            start: at,
            score: tally.value(),
            responses: tally.responses,
        });
        at += step;
    }
    out
}

/// The counts a score is computed from: the responses seen, those answering the scored
/// question, and among them the hits (NPS promoters, CSAT 4-5, PMF "very disappointed") and
/// the misses that count against (NPS detractors).
#[derive(Debug, Clone)]
struct ScoreTally {
    kind: SurveyType,
    question_id: String,
    responses: u64,
    answered: u64,
    hits: u64,
    against: u64,
}

impl ScoreTally {
    /// An empty tally; `None` for a survey without a score (open, poll, or no scored
    /// question).
    fn of(survey: &Survey) -> Option<ScoreTally> {
        if !matches!(
            survey.kind,
            SurveyType::Nps | SurveyType::Csat | SurveyType::Pmf
        ) {
            return None;
        }
        let q = survey
            .questions
            .iter()
            .find(|q| q.kind != QuestionType::Text)?;
        Some(ScoreTally {
            kind: survey.kind,
            question_id: q.id.clone(),
            responses: 0,
            answered: 0,
            hits: 0,
            against: 0,
        })
    }

    fn add(&mut self, r: &SurveyResponse) {
        self.responses += 1;
        let Some(a) = r.answers.iter().find(|a| a.question_id == self.question_id) else {
            return;
        };
        let v = &a.value;
        let int = v.as_i64().unwrap_or(i64::MIN);
        let (hit, against) = match self.kind {
            SurveyType::Nps => (int >= 9, (0..=6).contains(&int)),
            SurveyType::Csat => ((4..=5).contains(&int), false),
            _ => (v.as_str() == Some(PMF_OPTIONS[0]), false),
        };
        self.answered += 1;
        self.hits += u64::from(hit);
        self.against += u64::from(against);
    }

    fn merge(&mut self, other: &ScoreTally) {
        self.responses += other.responses;
        self.answered += other.answered;
        self.hits += other.hits;
        self.against += other.against;
    }

    /// NPS = % promoters - % detractors; CSAT and PMF = % hits; one decimal; `None` when no
    /// response answers the scored question.
    fn value(&self) -> Option<f64> {
        if self.answered == 0 {
            return None;
        }
        let share = |n: u64| 100.0 * n as f64 / self.answered as f64;
        let v = match self.kind {
            SurveyType::Nps => share(self.hits) - share(self.against),
            _ => share(self.hits),
        };
        Some(round(v, 1))
    }
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

    /// The score of `summarize` as it was before the tally: shares of the answers' values.
    fn score_as_summarize_had_it(survey: &Survey, rs: &[SurveyResponse]) -> Option<f64> {
        let q = survey
            .questions
            .iter()
            .find(|q| q.kind != QuestionType::Text)?;
        let values: Vec<&Value> = rs
            .iter()
            .filter_map(|r| r.answers.iter().find(|a| a.question_id == q.id))
            .map(|a| &a.value)
            .collect();
        let share = |hit: &dyn Fn(&Value) -> bool| -> Option<f64> {
            (!values.is_empty()).then(|| {
                100.0 * values.iter().filter(|v| hit(v)).count() as f64 / values.len() as f64
            })
        };
        let int = |v: &Value| v.as_i64().unwrap_or(i64::MIN);
        let value = match survey.kind {
            SurveyType::Nps => share(&|v| int(v) >= 9)
                .zip(share(&|v| (0..=6).contains(&int(v))))
                .map(|(p, d)| p - d),
            SurveyType::Csat => share(&|v| (4..=5).contains(&int(v))),
            _ => share(&|v| v.as_str() == Some(PMF_OPTIONS[0])),
        };
        value.map(|v| round(v, 1))
    }

    /// The score over time as it was computed before the one-pass tally: the whole score
    /// over each bucket's responses.
    fn score_over_time_by_summaries(survey: &Survey, rs: &[SurveyResponse]) -> Vec<ScorePoint> {
        use chrono::{Datelike, Duration, NaiveDate};
        let day = |r: &SurveyResponse| r.created_at.time().date_naive();
        let (Some(first), Some(last)) = (rs.iter().map(day).min(), rs.iter().map(day).max()) else {
            return Vec::new();
        };
        let weekly = (last - first).num_days() > DAILY_SPAN_DAYS;
        let start_of = |d: NaiveDate| match weekly {
            true => d - Duration::days(i64::from(d.weekday().num_days_from_monday())),
            false => d,
        };
        let mut groups: BTreeMap<NaiveDate, Vec<SurveyResponse>> = BTreeMap::new();
        for r in rs {
            groups.entry(start_of(day(r))).or_default().push(r.clone());
        }
        let mut out = Vec::new();
        let mut at = start_of(first);
        while at <= last {
            let group = groups.get(&at).map_or(&[][..], Vec::as_slice);
            out.push(ScorePoint {
                start: at,
                score: score_as_summarize_had_it(survey, group),
                responses: group.len() as u64,
            });
            at += Duration::days(if weekly { 7 } else { 1 });
        }
        out
    }

    #[test]
    fn the_one_pass_score_over_time_matches_summaries_per_bucket() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let why = Question {
            id: "why".into(),
            text: "Why?".into(),
            kind: QuestionType::Text,
            options: None,
            required: false,
            min: None,
            max: None,
        };
        let mut csat = nps_survey();
        csat.kind = SurveyType::Csat;
        csat.questions[0].kind = QuestionType::Rating;
        (csat.questions[0].min, csat.questions[0].max) = (Some(1), Some(5));
        let mut pmf = nps_survey();
        pmf.kind = SurveyType::Pmf;
        pmf.questions[0].kind = QuestionType::SingleChoice;
        pmf.questions[0].options = Some(
            PMF_OPTIONS
                .iter()
                .map(|id| crate::surveys::survey::QuestionOption {
                    id: (*id).into(),
                    label: id.replace('_', " "),
                })
                .collect(),
        );
        for mut s in [nps_survey(), csat, pmf] {
            s.questions.insert(0, why.clone());
            for (span, count) in [(1, 7), (20, 300), (62, 500), (63, 400), (400, 2000)] {
                let rs: Vec<SurveyResponse> = (0..count)
                    .map(|_| {
                        let mut r = nps_answer(next(span + 1) as i64, next(24) as i64, 0);
                        r.answers[0].value = match s.kind {
                            SurveyType::Pmf => json!(PMF_OPTIONS[next(3) as usize]),
                            SurveyType::Csat => json!(1 + next(5)),
                            _ => json!(next(11)),
                        };
                        match next(4) {
                            0 => r.answers.clear(),
                            1 => r.answers.push(AnswerValue {
                                question_id: "why".into(),
                                kind: QuestionType::Text,
                                value: json!("because"),
                            }),
                            _ => {}
                        }
                        r
                    })
                    .collect();
                let whole = summarize(&s, &rs).score.and_then(|x| x.value);
                assert_eq!(whole, score_as_summarize_had_it(&s, &rs));
                let got = score_over_time(&s, &rs);
                assert!(!got.is_empty());
                assert_eq!(
                    got,
                    score_over_time_by_summaries(&s, &rs),
                    "{:?} {span}",
                    s.kind
                );
            }
        }
    }
}
