//! The Apps section: `list.rs` (every app with its plan and usage; create, plan, integration
//! key), `keys.rs` (an app's API keys) and `quarantine.rs` (an app's refused events).

pub mod keys;
pub mod list;
pub mod quarantine;
