//! Traffic analytics read from the rollups the collector keeps (`collector/rollup/`), never
//! from the lake: `GET /api/v1/analytics/traffic` (api.md §9).
//!
//! `http.rs (query, permission) -> store.rs (reads the rollup tree) -> model.rs (window, answer)`
//!
//! Above `collector/` in the layer picture: it reads what the shard writers wrote.

pub mod http;
pub mod model;
pub mod store;

pub use http::configure;
