//! Visitor profiles: `identify` links an anonymousId to a userId, and a profile per user merges
//! traits, anonymousIds, groups, first and last seen.
//!
//! `collector writer -> store.rs (sled) <- http.rs (GET /api/v1/profiles/{userId})`;
//! `model.rs` holds the profile and the merge rules.

pub mod http;
pub mod model;
pub mod store;

pub use http::configure;
pub use model::{Change, OwnedTouch, Profile, Touch};
