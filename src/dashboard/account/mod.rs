//! Accounts: `auth.rs` (setup, sign-in, sign-out), `team.rs` (the members: add, remove, end
//! their sessions) and `password.rs` (your own account: change the password).

pub mod auth;
pub mod password;
pub mod team;
