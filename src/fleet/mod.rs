//! The fleet: edge collectors that share one control node and one bucket.
//!
//! One binary, two roles (`fleet.role`). The all-in-one server is the control node: beside
//! everything else it answers its edges on `/fleet/v1` (`control.rs`, a fleet token of
//! `token.rs`) and keeps what they report (`nodes.rs`). An edge (`edge.rs`) serves only what
//! browsers and SDKs call; it pulls the registry (`snapshot.rs`: apps, integration keys,
//! surveys, erased ids) into its own sled, sends its state and usage at each heartbeat, and
//! sends what it learns (rollups, profiles, survey responses) through its uplink. Both say how
//! the fleet fares in `/metrics` (`metrics.rs`).

pub mod control;
pub mod edge;
pub mod forget;
pub mod metrics;
pub mod nodes;
pub mod settle;
pub mod snapshot;
pub mod token;
pub mod uplink;

pub use edge::Edge;
pub use snapshot::Cache;
pub use token::Tokens;

use actix_web::web;

/// The fleet's pieces of a server: the tokens and registry cache every node registers (they
/// answer only on a control node), and on an edge its link and running sync loops.
pub struct Parts {
    pub tokens: web::Data<Tokens>,
    pub cache: web::Data<Cache>,
    pub edge: Option<web::Data<Edge>>,
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Loads the fleet tokens and, on an edge, starts the sync loops.
pub fn start(
    settings: &crate::config::Settings,
    store: &crate::storage::Store,
    access: &web::Data<crate::tenants::Access>,
    collector: &web::Data<crate::collector::Collector>,
    forget_app: edge::ForgetApp,
) -> Result<Parts, crate::storage::StoreError> {
    let tokens = web::Data::new(store.db().with(Tokens::load)?);
    let edge = settings.fleet.is_edge().then(|| {
        tracing::info!(
            control = %settings.fleet.control_url,
            node = %settings.collector.node_id,
            "edge collector: syncing with the control node"
        );
        web::Data::new(Edge::new(
            settings,
            store.clone(),
            access.clone(),
            collector.clone(),
            forget_app,
        ))
    });
    let tasks = edge
        .as_ref()
        .map(|e| Edge::clone(e).spawn())
        .unwrap_or_default();
    let cache = web::Data::<Cache>::default();
    let (node, clock) = (&settings.collector.node_id, collector.clock.clone());
    let section = match &edge {
        Some(e) => metrics::FleetSection::edge(node, clock, e.link.clone()),
        None => metrics::FleetSection::control(node, clock, store.db().clone(), cache.clone()),
    };
    collector.metrics.add_section(Box::new(section));
    Ok(Parts {
        tokens,
        cache,
        edge,
        tasks,
    })
}
