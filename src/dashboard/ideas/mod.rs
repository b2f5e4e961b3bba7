//! The Ideas section: `board.rs` (the board in columns by status), `detail.rs` (an idea's
//! page: edit, comments, merge), `settings.rs` (boards, statuses, topics and tags).

pub mod board;
pub mod detail;
pub mod settings;
