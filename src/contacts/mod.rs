//! `/acq/v1/contacts`: the acquisition CRM (api.md §5).
//!
//! `http.rs (query and body parsing) -> model.rs (typed values, validation, merge patch)
//!  -> store actor -> store.rs (sled: record, indexes, count in one transaction)`

pub mod http;
pub mod model;
pub mod store;

pub use http::{configure, document_rules};
pub use model::Contact;
