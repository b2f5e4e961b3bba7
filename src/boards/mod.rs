//! Feedback boards: each app's boards and, per board, the statuses, topics and tags its ideas
//! use (api.md §6). Admin API under `/admin/v1/apps/{appId}/boards`, public reads under `/api/v1`.
//!
//! `http.rs (admin and public routes) -> model.rs (board record, validation, default statuses)
//!  -> store actor -> store.rs (sled: one record per board, counts of use, default board)`

pub mod http;
pub mod model;
pub mod store;

pub use http::{configure_admin, configure_public};
pub use model::{Board, BoardRecord};
