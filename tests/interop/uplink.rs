//! An edge's uplink (what the control node must learn) while the control node is away: it grows
//! on the edge's disk, and the heartbeat that reports its length every sync interval reads one
//! kept count, not the whole queue. sled 0.34 keeps in memory what it reads, so a heartbeat
//! that walked the queue would hold every item in memory (ARCHITECTURE.md, Known limits).

use std::time::Duration;

use serde_json::{json, Value};

use crate::fleet::Fleet;
use crate::helpers::anon;
use crate::load::post_until_taken;
use crate::observe::{eventually, rss_bytes, Node};

/// Events per request, and the padding of each event's traits (an uplink item a little larger).
const PER_BATCH: usize = 50;
const PAD: usize = 2700;
/// The edge's failed calls to its control node (the registry, the heartbeat, the uplink).
const FAILURES: &str = "tributary_fleet_sync_failures_total";

/// Sends `n` identifies of new users `<prefix><i>` with padded traits through `base`.
async fn identifies(client: &reqwest::Client, base: &str, ik: &str, prefix: &str, n: usize) {
    for start in (0..n).step_by(PER_BATCH) {
        let events: Vec<Value> = (start..n.min(start + PER_BATCH))
            .map(|i| {
                let user = format!("{prefix}{i}");
                json!({"type": "identify", "userId": user, "anonymousId": anon(&user),
                    "messageId": format!("msg_uplink_{user}"),
                    "traits": {"name": user, "bio": "b".repeat(PAD)}})
            })
            .collect();
        post_until_taken(client, base, ik, events).await;
    }
}

#[tokio::test]
async fn an_uplink_grown_while_the_control_node_is_away_stays_on_disk_not_in_memory() {
    // A small page cache, freed pages given back at once (RSS follows what is live), and a
    // heartbeat every 250 ms: a walk of the uplink would run 4 times a second.
    let mut fleet = Fleet::start(
        1,
        &[
            ("TRIBUTARY__STORAGE__CACHE_MB", "8"),
            ("MIMALLOC_PURGE_DELAY", "0"),
            ("TRIBUTARY__FLEET__SYNC_INTERVAL_MS", "250"),
        ],
    )
    .await;
    let app = fleet.app("enterprise").await;
    fleet.registry_current().await;
    fleet.control.kill_9();
    let edge = &fleet.edges[0];
    let (base, pid) = (edge.base(), edge.server().child.id());
    let node = Node::new(edge.server(), edge.dir());
    let client = crate::helpers::test_client();
    // Each new user's identify queues one profile item of about 3 KB for the control node.
    let queued = async |at_least: f64| {
        eventually(
            "the heartbeat reports the uplink's items",
            Duration::from_secs(120),
            None,
            async || {
                let n = node.metrics().await.named("tributary_fleet_uplink_items")?;
                (n >= at_least).then_some(n)
            },
        )
        .await
        .0
    };
    // Warm up: the same work (the collector, sled, the allocator, the HTTP layer).
    identifies(&client, &base, &app.ik, "warm", 2000).await;
    queued(2000.0).await;
    let mut rss = vec![rss_bytes(pid)];
    let mut items = 0.0;
    // Three rounds of 10 000 items (about 30 MB each) queued while the control node is away,
    // each reported by a heartbeat (which walked the whole queue before its length was kept).
    for round in 1..=3 {
        identifies(&client, &base, &app.ik, &format!("r{round}_"), 10_000).await;
        items = queued(2000.0 + 10_000.0 * f64::from(round)).await;
        // A few more heartbeats over the round's items (each one fails: the control node is
        // away, and every failed call to it is counted).
        let failures = async || node.metrics().await.named(FAILURES);
        let before = failures().await.expect(FAILURES);
        eventually(
            "more heartbeats",
            Duration::from_secs(30),
            None,
            async || (failures().await? >= before + 6.0).then_some(()),
        )
        .await;
        rss.push(rss_bytes(pid));
    }
    let mb: Vec<u64> = rss.iter().map(|r| r >> 20).collect();
    eprintln!(
        "uplink memory: RSS (MB) before, then with 10 000, 20 000, 30 000 more queued: {mb:?} \
         ({items} items reported)"
    );
    assert!(
        items < 32_000.0 + 1_000.0,
        "{items} items: one per identify, and a rollup per flush"
    );
    // The first round settles what warming up did not (measured: +5 to +14 MB). Walked at
    // each heartbeat, the two later rounds' 60 MB grew RSS by 56 MB; kept on disk, by 6 to 8.
    let later = rss[3].saturating_sub(rss[1]);
    assert!(
        later < 25 << 20,
        "the second and third 10 000 queued items grew RSS by {} MB: {mb:?}",
        later >> 20
    );
}
