//! What the control node knows of each edge: its last heartbeat (tree `fleet_nodes`, node id ->
//! record), and from those the fleet's monthly usage. An edge reports absolute counts (its own
//! `usage` tree), so a heartbeat repeated or lost never counts twice or drifts; the control node
//! answers each edge the count of every *other* node (itself included) per app-month, which the
//! edge's quota adds to its own (`collector::quota`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::Timestamp;
use crate::storage::{decode_all, encode, StoreError};

pub const TREE: &str = "fleet_nodes";

/// One app-month's accepted events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub app_id: String,
    /// `YYYY-MM` (UTC).
    pub month: String,
    pub events: u64,
}

/// One app's settle, as an edge reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Settled {
    pub app_id: String,
    pub seq: u64,
}

/// What an edge says of itself at each sync.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    pub node_id: String,
    /// The edge's release (`CARGO_PKG_VERSION`).
    pub version: String,
    /// Events acknowledged since the edge started.
    pub accepted_total: u64,
    /// Events acknowledged per second since its previous heartbeat.
    pub events_per_second: f64,
    /// Bytes on its disk not in the lake yet (WAL, parts, outbox files).
    pub backlog_bytes: u64,
    /// Closed files waiting for the lake.
    pub outbox_files: u64,
    /// Items of its uplink (rollups, profiles, responses) not yet sent to the control node.
    pub uplink_items: u64,
    /// How long the oldest of them has waited, seconds.
    pub uplink_lag_seconds: f64,
    /// The registry version it holds (`None`: never synced).
    pub registry_version: Option<String>,
    /// Its events of the current and previous month, per app (absolute counts).
    pub usage: Vec<Usage>,
    /// The apps it settled and up to which request (`settle.rs`).
    #[serde(default)]
    pub settled: Vec<Settled>,
}

/// A node as the control node keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    pub heartbeat: Heartbeat,
    pub last_contact_at: Timestamp,
    /// The fleet token it presented.
    pub token_id: String,
}

/// An edge on the admin API and the Fleet page.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    #[serde(flatten)]
    pub heartbeat: Heartbeat,
    /// Always `edge`.
    pub role: &'static str,
    pub last_contact_at: Timestamp,
    pub token_id: String,
    /// Whether it holds the control node's current registry.
    pub registry_current: bool,
}

/// Records an edge's heartbeat.
pub fn record(
    db: &sled::Db,
    token_id: &str,
    heartbeat: &Heartbeat,
    now: Timestamp,
) -> Result<(), StoreError> {
    let rec = NodeRecord {
        heartbeat: heartbeat.clone(),
        last_contact_at: now,
        token_id: token_id.to_owned(),
    };
    db.open_tree(TREE)?
        .insert(heartbeat.node_id.as_bytes(), encode(&rec))?;
    Ok(())
}

/// Every edge the control node has heard from, by node id.
pub fn all(db: &sled::Db) -> Result<Vec<NodeRecord>, StoreError> {
    decode_all(&db.open_tree(TREE)?, b"")
}

/// The views of every edge, given the current registry version.
pub fn views(db: &sled::Db, current: &str) -> Result<Vec<NodeView>, StoreError> {
    Ok(all(db)?
        .into_iter()
        .map(|r| NodeView {
            registry_current: r.heartbeat.registry_version.as_deref() == Some(current),
            heartbeat: r.heartbeat,
            role: "edge",
            last_contact_at: r.last_contact_at,
            token_id: r.token_id,
        })
        .collect())
}

/// The edges' events per app-month, every edge but `except` (none: all of them).
pub fn edges_usage(
    db: &sled::Db,
    except: Option<&str>,
) -> Result<BTreeMap<(String, String), u64>, StoreError> {
    let mut sum = BTreeMap::new();
    for r in all(db)? {
        if Some(r.heartbeat.node_id.as_str()) == except {
            continue;
        }
        for u in r.heartbeat.usage {
            *sum.entry((u.app_id, u.month)).or_default() += u.events;
        }
    }
    Ok(sum)
}

/// One app-month's events across the fleet, and each node's share.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetUsage {
    pub app_id: String,
    pub month: String,
    /// Every node's events together: what the plan's `events_per_month` is checked against.
    pub events: u64,
    /// Per node id (this control node under its own `collector.node_id`).
    #[schema(value_type = Object)]
    pub by_node: BTreeMap<String, u64>,
}

/// The fleet's usage of `months`: this node's own count (as `own_node`) and every edge's last
/// report, per app-month.
pub fn fleet_usage(
    db: &sled::Db,
    own_node: &str,
    months: &[String],
) -> Result<Vec<FleetUsage>, StoreError> {
    let mut out: BTreeMap<(String, String), BTreeMap<String, u64>> = BTreeMap::new();
    for (app, month, n) in crate::collector::usage::all_of(db, months)? {
        out.entry((app, month))
            .or_default()
            .insert(own_node.to_owned(), n);
    }
    for r in all(db)? {
        for u in r.heartbeat.usage {
            if months.contains(&u.month) {
                out.entry((u.app_id, u.month))
                    .or_default()
                    .insert(r.heartbeat.node_id.clone(), u.events);
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|((app_id, month), by_node)| FleetUsage {
            app_id,
            month,
            events: by_node.values().sum(),
            by_node,
        })
        .collect())
}

/// What `node` must add to its own count, per app-month of `months`: the control node's own
/// count and every other edge's.
pub fn others_of(db: &sled::Db, node: &str, months: &[String]) -> Result<Vec<Usage>, StoreError> {
    // The control node's own share is under "", which no edge's id can be.
    Ok(fleet_usage(db, "", months)?
        .into_iter()
        .filter_map(|u| {
            let events = u.events - u.by_node.get(node).copied().unwrap_or(0);
            (events > 0).then_some(Usage {
                app_id: u.app_id,
                month: u.month,
                events,
            })
        })
        .collect())
}

/// The month of `now` and the one before (`YYYY-MM`): what usage a sync carries.
pub fn months(now: Timestamp) -> Vec<String> {
    use chrono::Datelike;
    let t = now.time();
    let this = format!("{:04}-{:02}", t.year(), t.month());
    let (y, m) = if t.month() == 1 {
        (t.year() - 1, 12)
    } else {
        (t.year(), t.month() - 1)
    };
    vec![format!("{y:04}-{m:02}"), this]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A heartbeat of `node` with its usage (shared by the fleet's tests).
    pub(crate) fn beat(node: &str, usage: &[(&str, &str, u64)]) -> Heartbeat {
        Heartbeat {
            node_id: node.into(),
            version: "0".into(),
            accepted_total: 0,
            events_per_second: 0.0,
            backlog_bytes: 0,
            outbox_files: 0,
            uplink_items: 0,
            uplink_lag_seconds: 0.0,
            registry_version: None,
            settled: vec![],
            usage: usage
                .iter()
                .map(|(a, m, n)| Usage {
                    app_id: (*a).into(),
                    month: (*m).into(),
                    events: *n,
                })
                .collect(),
        }
    }

    #[test]
    fn each_node_is_told_the_count_of_every_other_node_and_heartbeats_never_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let t = Timestamp::t0();
        db.open_tree(crate::collector::usage::TREE)
            .unwrap()
            .insert(b"a\x002026-11", &5u64.to_be_bytes())
            .unwrap();
        record(&db, "tok", &beat("e1", &[("a", "2026-11", 10)]), t).unwrap();
        // A repeated heartbeat replaces the count, never adds to it.
        record(&db, "tok", &beat("e1", &[("a", "2026-11", 12)]), t).unwrap();
        record(
            &db,
            "tok",
            &beat("e2", &[("a", "2026-11", 7), ("b", "2026-10", 1)]),
            t,
        )
        .unwrap();
        let months = vec!["2026-10".to_owned(), "2026-11".to_owned()];
        let of = |n| {
            others_of(&db, n, &months)
                .unwrap()
                .into_iter()
                .map(|u| (u.app_id, u.month, u.events))
                .collect::<Vec<_>>()
        };
        let row = |a: &str, m: &str, n: u64| (a.to_owned(), m.to_owned(), n);
        // e1 is told the control node's 5 and e2's 7, not its own 12.
        assert_eq!(of("e1"), [row("a", "2026-11", 12), row("b", "2026-10", 1)]);
        assert_eq!(of("e2"), [row("a", "2026-11", 17)]);
        assert_eq!(
            edges_usage(&db, None).unwrap()[&("a".to_owned(), "2026-11".to_owned())],
            19
        );
    }

    #[test]
    fn months_are_this_one_and_the_one_before() {
        let jan = Timestamp::parse("2027-01-15T00:00:00Z").unwrap();
        assert_eq!(months(jan), ["2026-12", "2027-01"]);
    }
}
