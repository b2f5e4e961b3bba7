//! Surveys (interface §2.1-2.2, api.md §4): admins create and run them under
//! `/admin/v1/apps/{appId}/surveys`; the public API lists and reads the active ones and their
//! responses; visitors answer through the widget (`/api/w/surveys/{id}/responses`).
//!
//! `http.rs (admin and public routes, query and body parsing, permissions) -> model.rs (the
//!  re-exports of survey.rs, patch.rs, targeting.rs, order.rs, response.rs, summary.rs,
//!  export.rs) -> store actor -> store.rs (sled: survey records, count of live surveys for the plan limit)`

mod export;
pub mod http;
pub mod model;
mod order;
mod patch;
mod response;
pub mod store;
mod summary;
mod survey;
mod targeting;

pub use http::{configure_admin, configure_public, configure_widget};
pub use model::{Survey, SurveyResponse};
