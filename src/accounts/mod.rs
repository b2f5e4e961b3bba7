//! Team accounts of the dashboard (owners and members) and their sign-in sessions.
//!
//! `model.rs` (roles, argon2id passwords, session expiry, the CSRF check) and `store.rs` (tree
//! `accounts`). The pages that use them live in `dashboard/`, above this module.

pub mod model;
pub mod store;

pub use model::{Role, Session, User};
