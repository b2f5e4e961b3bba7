//! Erasure (GDPR art. 17, CCPA): a person's data removed from every store of one app, by a
//! durable job, and their ids refused at ingest from the job's start (`tenants::suppression`).
//!
//! `model.rs` (the request, the person, the audit's hashes), `store.rs` (the sled stores, each
//! through its resource's functions), `lake.rs` (the lake's files rewritten without the
//! person's rows), `job.rs` (the job's steps, `submit`), `http.rs` (`/api/v1/erasures`).
//! Above the resources it erases and the collector (whose `settle` it waits for); below
//! startup and the dashboard.

pub mod http;
pub mod job;
pub mod lake;
pub mod model;
pub mod store;

pub use http::configure;
