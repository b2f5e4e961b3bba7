//! The Apps section: `list.rs` (every app with its plan and usage; create, plan, integration
//! key), `delete.rs` (an app's deletion and its progress), `keys.rs` (an app's API keys),
//! `quarantine.rs` (an app's refused events) and `erasure.rs` (erase a person, the erasure
//! jobs).

pub mod delete;
pub mod erasure;
pub mod keys;
pub mod list;
pub mod quarantine;
