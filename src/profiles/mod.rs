//! Visitor profiles: `identify` links an anonymousId to a userId, and a profile per user merges
//! traits, anonymousIds, groups, first and last seen. Written by the collector's shard writers,
//! read by `GET /api/v1/profiles/{userId}`.

pub mod http;

pub use http::configure;
