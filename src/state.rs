//! What every handler shares: the settings and the store actor.
//!
//! Resource state that only some handlers need is registered beside it as its own
//! `web::Data`: the key registry and rate limits (`tenants::Access`) and the collector
//! (`collector::Collector`). So this module sits below every resource and imports none of them.

use crate::config::Settings;
use crate::storage::Store;

pub struct AppState {
    pub settings: Settings,
    pub store: Store,
}
