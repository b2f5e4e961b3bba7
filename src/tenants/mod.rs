//! Tenants: apps, their API keys and integration keys, who may do what, and the `/admin/v1`
//! API that manages them.
//!
//! `http.rs (admin API) -> store.rs (sled, compare-and-swap) -> registry.rs (in memory)`;
//! `auth.rs` turns a request's key into a `Principal` (or an `Admin`) through the registry.

pub mod auth;
pub mod http;
pub mod model;
pub mod registry;
pub mod service;
pub mod store;
pub mod suppression;

pub use auth::{Access, Admin, Principal};
pub use http::configure;
pub use model::{App, KeyKind, KeyRecord, KeyView, Permission, Plan};
pub use registry::Registry;
pub use service::{AdminApp, AppChange, Tenants};
pub use suppression::Suppressions;
