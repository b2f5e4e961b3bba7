//! Tributary: feedback, acquisition and analytics in one service. See ARCHITECTURE.md.

pub mod admin;
pub mod api;
pub mod cli;
pub mod collector;
pub mod config;
pub mod contacts;
pub mod error;
pub mod idempotency;
pub mod ids;
pub mod profiles;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod tenants;
