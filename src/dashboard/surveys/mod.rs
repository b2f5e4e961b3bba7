//! The Surveys section: `list.rs` (the list by status and a survey's page, moves, CSV),
//! `form.rs` (the builder), `targeting.rs` (its targeting part), `results.rs` (the charts and
//! the responses' filters).

pub mod form;
pub mod list;
pub mod results;
pub mod targeting;
