//! Who is signed in: read by the session extractor (`session.rs`), shown by the layout.

use crate::accounts::{Session, User};

/// A signed-in team member and their session.
pub struct Viewer {
    pub user: User,
    pub session: Session,
    /// The store key of the session (for sign-out).
    pub session_key: String,
}

impl Viewer {
    /// Who a change made on the dashboard is by (`actor` of its webhook events).
    pub fn actor(&self) -> crate::storage::changes::Actor {
        crate::storage::changes::Actor::User {
            id: self.user.id.clone(),
            email: self.user.email.clone(),
        }
    }
}
