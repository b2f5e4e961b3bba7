//! Who may still write, checked by the shard writer at commit (`writer.rs`): the edge refuses
//! an erased person's events and a deleted app's keys first, but a batch may wait (a quota
//! reservation, its shard's queue) while an erasure or an app deletion starts, and that job's
//! `settle` (`settle.rs`) must not be overtaken by it. The server's gatekeeper reads the key
//! registry and the suppression list (`startup.rs`).

use std::sync::Arc;

use super::event::{Event, Text};
use crate::tenants::suppression::{AppList, IdKind};

/// What an app's events meet at commit. The edge checks first; the writer checks again,
/// because a batch may wait (a quota reservation, its shard's queue) while an erasure or an
/// app deletion starts, and that deletion's `settle` must not be overtaken.
pub enum AppGate {
    Open,
    /// The app's erased persons (`tenants::suppression`): their events are dropped.
    Suppressing(Arc<AppList>),
    /// The app is being deleted: every event is dropped.
    Closed,
}

pub trait Gatekeeper: Send + Sync {
    fn gate(&self, app: &str) -> AppGate;
}

impl AppGate {
    /// Whether `e` may be written at `now` (µs).
    pub fn admits(&self, e: &Event<'_>, now: i64) -> bool {
        match self {
            AppGate::Open => true,
            AppGate::Closed => false,
            AppGate::Suppressing(list) => {
                let refused = |kind, id: &Option<Text<'_>>| {
                    id.as_deref()
                        .is_some_and(|id| list.refuses(&e.app_id, kind, id, now))
                };
                !refused(IdKind::User, &e.user_id) && !refused(IdKind::Anonymous, &e.anonymous_id)
            }
        }
    }
}

/// Admits every event: a collector run without tenants (the benches, tests of the pipeline).
pub struct AdmitAll;

impl Gatekeeper for AdmitAll {
    fn gate(&self, _: &str) -> AppGate {
        AppGate::Open
    }
}
