//! A survey as a typed value (interface §2.1-2.2, api.md §4): its type, its questions and
//! their options, and the status machine. No sled, no HTTP.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::targeting::{sampled, Targeting};
use crate::fields::names;
use crate::ids::Timestamp;

/// The most questions a survey holds.
pub const MAX_QUESTIONS: usize = 50;
/// The most options a choice question holds.
pub const MAX_OPTIONS: usize = 50;

/// The PMF question's fixed option ids (api.md §4), labels free.
pub const PMF_OPTIONS: [&str; 3] = [
    "very_disappointed",
    "somewhat_disappointed",
    "not_disappointed",
];

names! {
    pub SurveyType {
        Nps = "nps",
        Csat = "csat",
        Pmf = "pmf",
        Open = "open",
        Poll = "poll",
    }
}

names! {
    pub SurveyStatus {
        Draft = "draft",
        Active = "active",
        Paused = "paused",
        Closed = "closed",
    }
}

impl SurveyStatus {
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

names! {
    pub QuestionType {
        Rating = "rating",
        Scale = "scale",
        SingleChoice = "single_choice",
        MultipleChoice = "multiple_choice",
        Text = "text",
    }
}

impl QuestionType {
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

impl Survey {
    /// Moves to `to` at `now` (409 with the allowed moves otherwise).
    pub fn move_to(&mut self, to: SurveyStatus, now: Timestamp) -> Result<(), String> {
        if !self.status.next().contains(&to) {
            return Err(illegal_move(self.status, to));
        }
        self.status = to;
        self.updated_at = now;
        Ok(())
    }
}

impl Survey {
    /// Whether `visitor` (see [`visitor`](super::response::visitor)) with `attrs` on the page
    /// `url` is targeted: active, and not [`outside`](Survey::outside) the targeting.
    pub fn targets(&self, visitor: &str, attrs: &Map<String, Value>, url: Option<&str>) -> bool {
        self.status == SurveyStatus::Active && self.outside(visitor, attrs, url).is_none()
    }

    /// Why the visitor is outside the targeting (`None`: inside): not in the sample, an
    /// attribute rule not satisfied, or, when the survey has URL rules, none of them matching
    /// the page (a request without a URL matches none).
    pub fn outside(
        &self,
        visitor: &str,
        attrs: &Map<String, Value>,
        url: Option<&str>,
    ) -> Option<String> {
        let t = &self.targeting;
        if !sampled(&self.id, visitor, t.percentage) {
            return Some(format!(
                "the visitor is not in the survey's sample ({}% of visitors)",
                t.percentage
            ));
        }
        if let Some(r) = t.attributes.iter().find(|r| !r.matches(attrs)) {
            return Some(format!(
                "the visitor's attribute {:?} does not satisfy the survey's rule ({})",
                r.key,
                r.operator.name()
            ));
        }
        if !t.urls.is_empty() && !url.is_some_and(|u| t.urls.iter().any(|r| r.matches(u))) {
            return Some(match url {
                None => "the survey is shown on some pages only: metadata.url is required".into(),
                Some(_) => "the page (metadata.url) matches none of the survey's URL rules".into(),
            });
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::surveys::targeting::{UrlOperator, UrlRule};

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
        for &from in SurveyStatus::ALL {
            for &to in SurveyStatus::ALL {
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

    pub(crate) fn survey(n: i64, status: SurveyStatus) -> Survey {
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

    /// A JSON object (a request body) from `json!`.
    pub(crate) fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
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
}
