//! `/api/v1/ideas`: feedback ideas with statuses, votes, comments, status history and merge
//! (interface §2.4, api.md §6). Boards and their statuses, topics and tags are `boards/`.
//!
//! `http.rs (query and body parsing, permissions) -> model.rs (typed values, validation,
//!  trending) -> store actor -> store.rs (ideas, indexes, history) and engagement.rs (votes,
//!  comments, merge: records and counts in one sled transaction)`

pub mod engagement;
pub mod http;
pub mod model;
pub mod store;

pub use http::configure;
pub use model::IdeaView;

#[cfg(test)]
mod events_tests;
