//! The results parts of a survey's page (`surveys.rs`): the score over time as a line chart
//! (`surveys::model::score_over_time`, by day or by week, drawn by `charts::score_line`, its
//! figures in a table under it), and the filters of the responses table and its CSV export
//! (completed or partial, score range, days of `createdAt`), parsed from the query with every
//! bad field reported next to its input.

use chrono::NaiveDate;
use maud::{html, Markup};
use serde::Deserialize;

use crate::dashboard::charts;
use crate::dashboard::layout::{error_for, field, thousands};
use crate::ids::Timestamp;
use crate::surveys::model::{
    score_over_time, ResponseFilter, Survey, SurveyResponse, SurveyType, DAILY_SPAN_DAYS,
};
use crate::validation::FieldError;

/// The query of a survey's page and of its CSV: the page of responses and the filters.
#[derive(Debug, Default, Deserialize)]
pub struct ResultsQuery {
    pub page: Option<usize>,
    #[serde(default)]
    pub done: String,
    #[serde(default)]
    pub min: String,
    #[serde(default)]
    pub max: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
}

/// The responses shown: the model's filter (days, completion) and a score range.
#[derive(Debug, Default, PartialEq)]
pub struct Filters {
    pub base: ResponseFilter,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

fn day(raw: &str, name: &str, errors: &mut Vec<FieldError>) -> Option<NaiveDate> {
    if raw.is_empty() {
        return None;
    }
    let d = NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok();
    if d.is_none() {
        errors.push(FieldError::new(name, "must be a day, YYYY-MM-DD"));
    }
    d
}

fn number(raw: &str, name: &str, errors: &mut Vec<FieldError>) -> Option<f64> {
    if raw.trim().is_empty() {
        return None;
    }
    let n = raw.trim().parse::<f64>().ok().filter(|n| n.is_finite());
    if n.is_none() {
        errors.push(FieldError::new(name, "must be a number"));
    }
    n
}

fn start_of(d: NaiveDate) -> Option<Timestamp> {
    let t = d.and_hms_opt(0, 0, 0)?.and_utc();
    Some(Timestamp::from_micros(t.timestamp_micros()))
}

impl Filters {
    /// The filters of a query; `to` is a whole day (up to its end).
    pub fn parse(q: &ResultsQuery) -> Result<Filters, Vec<FieldError>> {
        let mut errors = Vec::new();
        let completed = match q.done.as_str() {
            "" => None,
            "completed" => Some(true),
            "partial" => Some(false),
            _ => {
                errors.push(FieldError::new("done", "must be completed or partial"));
                None
            }
        };
        let from = day(&q.from, "from", &mut errors);
        let to = day(&q.to, "to", &mut errors);
        let (min, max) = (
            number(&q.min, "min", &mut errors),
            number(&q.max, "max", &mut errors),
        );
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo > hi {
                errors.push(FieldError::new("max", "must not be below the lowest score"));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let base = ResponseFilter {
            since: from.and_then(start_of),
            until: to.and_then(|d| d.succ_opt()).and_then(start_of),
            completed,
            ..ResponseFilter::default()
        };
        Ok(Filters { base, min, max })
    }

    pub fn matches(&self, r: &SurveyResponse) -> bool {
        let ranged = self.min.is_some() || self.max.is_some();
        self.base.matches(r)
            && (!ranged
                || r.score.is_some_and(|s| {
                    self.min.is_none_or(|m| s >= m) && self.max.is_none_or(|m| s <= m)
                }))
    }
}

/// The filters of `q` as a query string (`done=partial&min=9`), for pager and CSV links.
pub fn query_string(q: &ResultsQuery) -> String {
    let pairs: Vec<(&str, &str)> = [
        ("done", &q.done),
        ("min", &q.min),
        ("max", &q.max),
        ("from", &q.from),
        ("to", &q.to),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| (k, v.as_str()))
    .collect();
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

/// The filters' form, above the responses table.
pub fn filters_form(action: &str, s: &Survey, q: &ResultsQuery, errors: &[FieldError]) -> Markup {
    let scored = matches!(s.kind, SurveyType::Nps | SurveyType::Csat);
    let done_err = error_for(errors, "done");
    html! {
        form.filters.responses role="search" aria-label="Filter responses" method="get" action=(action) {
            div.field.invalid[done_err.is_some()] {
                label for="f-done" { "Completion" }
                select #f-done name="done" {
                    option value="" selected[q.done.is_empty()] { "All" }
                    option value="completed" selected[q.done == "completed"] { "Completed" }
                    option value="partial" selected[q.done == "partial"] { "Partial" }
                }
                @if let Some(m) = done_err { p.field-error { (m) } }
            }
            @if scored {
                div.small { (field("Score from", "min", "number", &q.min, errors, html! {})) }
                div.small { (field("Score to", "max", "number", &q.max, errors, html! {})) }
            }
            (field("From day", "from", "date", &q.from, errors, html! {}))
            (field("To day", "to", "date", &q.to, errors, html! {}))
            button.button type="submit" { "Filter" }
        }
    }
}

/// The score over time (all responses, not the table's filter), with its figures; nothing
/// for a survey without a score.
pub fn score_chart(s: &Survey, responses: &[SurveyResponse]) -> Markup {
    let points = score_over_time(s, responses);
    if points.is_empty() {
        return html! {};
    }
    let weekly = points.len() > 1 && (points[1].start - points[0].start).num_days() == 7;
    let unit = if weekly { "week" } else { "day" };
    let name = format!("{} score", s.kind.name().to_uppercase());
    let range = if s.kind == SurveyType::Nps {
        (-100.0, 100.0)
    } else {
        (0.0, 100.0)
    };
    let labels: Vec<String> = points
        .iter()
        .map(|p| p.start.format("%b %-d").to_string())
        .collect();
    let values: Vec<Option<f64>> = points.iter().map(|p| p.score).collect();
    let summary = format!(
        "{name} per {unit}: {}",
        points
            .iter()
            .map(|p| match p.score {
                Some(v) => format!("{} {v:.1}", p.start),
                None => format!("{} no answers", p.start),
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    html! {
        section.card #score-over-time aria-labelledby="score-over-time-h" {
            div.card-head {
                h2 #score-over-time-h { (name) " over time" }
                span.muted { "per " (unit) @if weekly { " (over " (DAILY_SPAN_DAYS) " days), from Monday" } }
            }
            (charts::score_line(&summary, &labels, &name, &values, range))
            details.figures {
                summary { "Figures" }
                div.table-wrap { table {
                    thead { tr { th scope="col" { (if weekly { "Week of" } else { "Day" }) } th.num scope="col" { "Score" } th.num scope="col" { "Responses" } } }
                    tbody { @for p in &points { tr {
                        td { (p.start.to_string()) }
                        td.num { @match p.score { Some(v) => (format!("{v:.1}")), None => "–" } }
                        td.num { (thousands(p.responses)) }
                    } } }
                } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(done: &str, min: &str, max: &str, from: &str, to: &str) -> ResultsQuery {
        ResultsQuery {
            page: None,
            done: done.into(),
            min: min.into(),
            max: max.into(),
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn filters_read_the_query_and_report_every_bad_field() {
        let f = Filters::parse(&q("partial", "9", "10", "2026-11-01", "2026-11-02")).unwrap();
        assert_eq!(f.base.completed, Some(false));
        assert_eq!((f.min, f.max), (Some(9.0), Some(10.0)));
        let day = |s: &str| Timestamp::parse(s).unwrap();
        assert_eq!(f.base.since, Some(day("2026-11-01T00:00:00Z")));
        assert_eq!(f.base.until, Some(day("2026-11-03T00:00:00Z")));
        let e = Filters::parse(&q("maybe", "x", "", "11/01", "")).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["done", "from", "min"]);
        assert_eq!(
            Filters::parse(&q("", "5", "3", "", "")).unwrap_err()[0].field,
            "max"
        );
        assert_eq!(
            Filters::parse(&q("", "", "", "", "")).unwrap(),
            Filters::default()
        );
        assert_eq!(
            query_string(&q("completed", "", "6", "", "2026-11-02")),
            "done=completed&max=6&to=2026-11-02"
        );
    }
}
