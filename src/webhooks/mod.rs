//! Webhooks: each app's endpoints, and every change a team cares about delivered to them,
//! signed (Standard Webhooks), retried and logged (README, "Webhooks").
//!
//! `storage::changes (queue) -> outbox.rs fan-out -> deliveries (sled) -> engine.rs lanes
//!  -> deliver.rs (sign.rs, guard.rs) -> outbox.rs settle (log, retry, give up + disable)`
//!
//! `model.rs` (endpoint, secrets, attempts, validation), `store.rs` (sled; the service
//! functions the admin API and the dashboard share), `http.rs` (admin API), `metrics.rs`.

pub mod deliver;
pub mod engine;
pub mod guard;
pub mod http;
pub mod metrics;
pub mod model;
pub mod outbox;
pub mod sign;
pub mod store;

pub use engine::Webhooks;
pub use http::configure;
