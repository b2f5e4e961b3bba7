//! The fleet in `/metrics`, under `tributary_fleet_*`, read at each scrape (a
//! `collector::metrics::Section` registered at start, so the collector imports nothing of the
//! fleet). Both roles say which node they are (`tributary_fleet_node_info{role, node}`); an
//! edge says how its link to the control node fares (`edge::LinkState`), the control node what
//! each edge reported at its last heartbeat (label `node`), so the two sides can be compared
//! name for name: an edge's `uplink_items` is the control node's `node_uplink_items{node}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix_web::web;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::edge::LinkState;
use super::nodes::{self, NodeRecord};
use super::snapshot::Cache;
use crate::clock::Clock;
use crate::ids::Timestamp;
use crate::storage::{Db, StoreError};

/// An edge not heard from for this long is stale (the Fleet page marks it, `nodes_stale`
/// counts it): three sync intervals with room for a slow control node.
pub const STALE_AFTER_SECS: f64 = 30.0;

/// Seconds from `last` to `now_micros` (never negative).
pub fn age_seconds(last: Timestamp, now_micros: i64) -> f64 {
    (now_micros - last.micros()).max(0) as f64 / 1e6
}

type F64Gauge = Gauge<f64, AtomicU64>;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct NodeLabel {
    node: String,
}

/// What the fleet section reads: the node's own role and link, or the edges' records.
pub struct FleetSection {
    node: String,
    clock: Arc<dyn Clock>,
    /// When this node started, µs (the age of a link that never answered).
    started: i64,
    /// An edge's link to its control node.
    link: Option<Arc<LinkState>>,
    /// A control node's store and registry (for the edges' heartbeats).
    control: Option<(Db, web::Data<Cache>)>,
}

impl std::fmt::Debug for FleetSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetSection")
            .field("node", &self.node)
            .field("edge", &self.link.is_some())
            .finish_non_exhaustive()
    }
}

impl FleetSection {
    /// An edge's section: its link.
    pub fn edge(node: &str, clock: Arc<dyn Clock>, link: Arc<LinkState>) -> FleetSection {
        FleetSection {
            node: node.to_owned(),
            started: clock.now_micros(),
            clock,
            link: Some(link),
            control: None,
        }
    }

    /// A control node's section: the edges it knows.
    pub fn control(
        node: &str,
        clock: Arc<dyn Clock>,
        db: Db,
        cache: web::Data<Cache>,
    ) -> FleetSection {
        FleetSection {
            node: node.to_owned(),
            started: clock.now_micros(),
            clock,
            link: None,
            control: Some((db, cache)),
        }
    }

    fn fill_link(&self, r: &mut Registry, link: &LinkState) {
        let now = self.clock.now_micros();
        let last = link.last_contact.load(Ordering::Relaxed);
        let age = F64Gauge::default();
        age.set((now - if last > 0 { last } else { self.started }).max(0) as f64 / 1e6);
        let reachable: Gauge = Gauge::default();
        reachable.set(link.reachable.load(Ordering::Relaxed).into());
        let changes: Counter = Counter::default();
        changes.inc_by(link.registry_changes.load(Ordering::Relaxed));
        let failures: Counter = Counter::default();
        failures.inc_by(link.failures.load(Ordering::Relaxed));
        let (items, lag) = link.uplink();
        let pending: Gauge = Gauge::default();
        pending.set(items.try_into().unwrap_or(i64::MAX));
        let waited = F64Gauge::default();
        waited.set(lag);
        r.register(
            "last_contact_age_seconds",
            "Seconds since the control node last answered (since start when it never did)",
            age,
        );
        r.register(
            "control_reachable",
            "Whether the last call to the control node was answered (1) or failed (0)",
            reachable,
        );
        r.register(
            "registry_changes",
            "Registry versions pulled from the control node and applied since start",
            changes,
        );
        r.register(
            "sync_failures",
            "Calls to the control node (registry, heartbeat, uplink) that failed since start",
            failures,
        );
        r.register(
            "uplink_items",
            "Items of the uplink (rollups, profiles, responses) not yet sent to the control node",
            pending,
        );
        r.register(
            "uplink_lag_seconds",
            "How long the oldest item of the uplink has waited",
            waited,
        );
    }

    fn fill_nodes(&self, r: &mut Registry, records: &[NodeRecord], current: Option<&str>) {
        let now = self.clock.now_micros();
        let known: Gauge = Gauge::default();
        known.set(records.len().try_into().unwrap_or(i64::MAX));
        let stale: Gauge = Gauge::default();
        let age = Family::<NodeLabel, F64Gauge>::default();
        let rate = Family::<NodeLabel, F64Gauge>::default();
        let backlog = Family::<NodeLabel, Gauge>::default();
        let outbox = Family::<NodeLabel, Gauge>::default();
        let items = Family::<NodeLabel, Gauge>::default();
        let lag = Family::<NodeLabel, F64Gauge>::default();
        let fresh = Family::<NodeLabel, Gauge>::default();
        let int = |n: u64| n.try_into().unwrap_or(i64::MAX);
        for rec in records {
            let b = &rec.heartbeat;
            let l = NodeLabel {
                node: b.node_id.clone(),
            };
            let secs = age_seconds(rec.last_contact_at, now);
            if secs > STALE_AFTER_SECS {
                stale.inc();
            }
            age.get_or_create(&l).set(secs);
            rate.get_or_create(&l).set(b.events_per_second);
            backlog.get_or_create(&l).set(int(b.backlog_bytes));
            outbox.get_or_create(&l).set(int(b.outbox_files));
            items.get_or_create(&l).set(int(b.uplink_items));
            lag.get_or_create(&l).set(b.uplink_lag_seconds);
            let is_current = current.is_some() && b.registry_version.as_deref() == current;
            fresh.get_or_create(&l).set(is_current.into());
        }
        register_nodes(r, known, stale);
        r.register(
            "node_last_contact_age_seconds",
            "Seconds since each edge's last heartbeat",
            age,
        );
        r.register(
            "node_events_per_second",
            "Events each edge acknowledged per second, at its last heartbeat",
            rate,
        );
        r.register(
            "node_backlog_bytes",
            "Bytes on each edge's disk not in the lake yet (WAL, parts, outbox)",
            backlog,
        );
        r.register(
            "node_outbox_files",
            "Closed files on each edge waiting for the lake",
            outbox,
        );
        r.register(
            "node_uplink_items",
            "Items of each edge's uplink not yet sent to this control node",
            items,
        );
        r.register(
            "node_uplink_lag_seconds",
            "How long the oldest item of each edge's uplink has waited",
            lag,
        );
        r.register(
            "node_registry_current",
            "Whether each edge holds this control node's current registry (1) or not (0)",
            fresh,
        );
    }
}

fn register_nodes(r: &mut Registry, known: Gauge, stale: Gauge) {
    r.register("nodes", "Edges this control node has heard from", known);
    r.register(
        "nodes_stale",
        "Edges not heard from for more than 30 s",
        stale,
    );
}

impl crate::collector::metrics::Section for FleetSection {
    fn fill(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("tributary_fleet");
        let role = if self.link.is_some() {
            "edge"
        } else {
            "control"
        };
        r.register(
            "node",
            "This node of the fleet: its role (control or edge) and its node id",
            Info::new(vec![("role", role.to_owned()), ("node", self.node.clone())]),
        );
        if let Some(link) = &self.link {
            self.fill_link(r, link);
        }
        if let Some((db, cache)) = &self.control {
            let read = db.with(|db| {
                let records = nodes::all(db)?;
                let current = match records.is_empty() {
                    true => None,
                    false => Some(cache.get(db)?.1),
                };
                Ok::<_, StoreError>((records, current))
            });
            // A store that fails to read shows no edges rather than no metrics at all.
            let (records, current) = read.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "fleet metrics: the edges' records could not be read");
                (Vec::new(), None)
            });
            self.fill_nodes(r, &records, current.as_deref());
        }
    }
}
