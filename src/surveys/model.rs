//! Surveys as typed values, one import for the layers above (`http.rs`, `store.rs`, the
//! dashboard): the survey and its status machine (`survey.rs`), the parsed create and PATCH
//! bodies and the type conventions (`patch.rs`), targeting and sampling (`targeting.rs`),
//! responses (`response.rs`), list order and cursors (`order.rs`), the summary and the score
//! over time (`summary.rs`) and the CSV rows (`export.rs`). No sled, no HTTP.

pub use super::export::{csv_download, csv_header, csv_line};
pub use super::order::{page, page_responses, Filter, ResponseFilter, Sort, SortField};
pub use super::patch::{conventions, Rejection, SurveyPatch};
pub use super::response::{
    respond, visitor, AnswerValue, ResponseDraft, ResponseItem, ResponseMetadata, SurveyResponse,
    MAX_TEXT_ANSWER, RESPONSE_PREFIX, UPLINK_KIND,
};
pub use super::summary::{
    score_over_time, summarize, OptionCount, QuestionSummary, Score, ScorePoint, Summary,
    DAILY_SPAN_DAYS,
};
pub use super::survey::{
    illegal_move, Question, QuestionOption, QuestionType, Survey, SurveyStatus, SurveyType,
    MAX_OPTIONS, MAX_QUESTIONS, PMF_OPTIONS,
};
pub use super::targeting::{
    bucket, sampled, AttributeRule, Operator, Targeting, UrlOperator, UrlRule, MAX_RULES,
    MAX_URL_RULES, MAX_URL_RULE_CHARS,
};
