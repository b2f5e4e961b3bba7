//! Accounts: `auth.rs` (setup, sign-in, sign-out) and `team.rs` (the members).

pub mod auth;
pub mod team;
