//! Tributary: feedback, acquisition and analytics in one service. See ARCHITECTURE.md.

pub mod accounts;
pub mod analytics;
pub mod api;
pub mod boards;
pub mod cli;
pub mod clock;
pub mod collector;
pub mod config;
pub mod contacts;
pub mod csv;
pub mod dashboard;
pub mod fields;
pub mod ideas;
pub mod ids;
pub mod memory;
pub mod profiles;
pub mod retention;
pub mod sdk;
pub mod startup;
pub mod state;
pub mod storage;
pub mod surveys;
pub mod telemetry;
pub mod tenants;
pub mod validation;
