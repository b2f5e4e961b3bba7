//! What every handler shares: the settings, the store actor and the clock.
//!
//! Resource state that only some handlers need is registered beside it as its own
//! `web::Data`: the key registry and rate limits (`tenants::Access`) and the collector
//! (`collector::Collector`). So this module sits below every resource and imports none of them.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Settings;
use crate::ids::Timestamp;
use crate::storage::Store;

pub struct AppState {
    pub settings: Settings,
    pub store: Store,
    /// Every "now" a handler records or compares (`clock.rs`).
    pub clock: Arc<dyn Clock>,
}

impl AppState {
    /// Now, on the server's clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }
}
