//! The Apps section: `list.rs` (every app with its plan and usage; create, plan, integration
//! key) and `keys.rs` (an app's API keys).

pub mod keys;
pub mod list;
