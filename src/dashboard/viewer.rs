//! Who is signed in: read by the session extractor (`session.rs`), shown by the layout.

use crate::accounts::{Session, User};

/// A signed-in team member and their session.
pub struct Viewer {
    pub user: User,
    pub session: Session,
    /// The store key of the session (for sign-out).
    pub session_key: String,
}
