//! A delta on the wire: what an edge sends its control node for each flush (the fleet's
//! uplink), `{"shard", "lsn", "delta": [{"app", "hour", "bucket"}]}` as JSON.
//!
//! A bucket travels in its stored form (`store.rs`: the counts as JSON, the two visitor
//! sketches as bytes, 16 KiB at most each), base64 in the JSON: a dense sketch weighs 22 KiB
//! rather than the ~50 KiB of a JSON array of registers.

use base64::Engine;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{store, Bucket, Delta};
use crate::storage::queue::Queue;
use sled::Transactional;

/// The uplink item kind (`storage::queue`) of a rollup.
pub const KIND: u8 = 1;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

#[derive(Serialize, Deserialize)]
struct WireBucket {
    app: String,
    hour: i64,
    /// The stored form (`store.rs`), base64.
    bucket: String,
}

impl Serialize for Delta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.buckets().map(|(app, hour, b)| WireBucket {
            app: app.to_owned(),
            hour,
            bucket: B64.encode(store::encode(b)),
        }))
    }
}

impl<'de> Deserialize<'de> for Delta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Delta, D::Error> {
        let mut delta = Delta::default();
        for w in Vec::<WireBucket>::deserialize(d)? {
            let bytes = B64.decode(&w.bucket).map_err(D::Error::custom)?;
            let b: Bucket = store::decode(&bytes)
                .ok_or_else(|| D::Error::custom(format!("bad bucket of {} {}", w.app, w.hour)))?;
            delta
                .buckets
                .entry(w.app)
                .or_default()
                .entry(w.hour)
                .or_default()
                .merge(&b);
        }
        Ok(delta)
    }
}

/// One flush of one shard of a node: applied once per (node, shard, lsn).
#[derive(Debug, Serialize, Deserialize)]
pub struct Item {
    pub shard: usize,
    pub lsn: u64,
    pub delta: Delta,
}

#[derive(Serialize)]
struct ItemRef<'a> {
    shard: usize,
    lsn: u64,
    delta: &'a Delta,
}

impl Item {
    /// The JSON payload of an item, without copying the delta.
    pub fn payload(shard: usize, lsn: u64, delta: &Delta) -> Vec<u8> {
        serde_json::to_vec(&ItemRef { shard, lsn, delta }).expect("a delta serializes")
    }
}

/// On an edge: instead of applying a flush's delta, records `last_lsn` as the shard's rollup LSN
/// and pushes the delta onto `uplink` (`Item`), in one transaction, so the control node
/// gets each flush once. A job at or below the recorded LSN pushes nothing. Returns whether
/// it was pushed.
pub fn forward(
    db: &sled::Db,
    uplink: Queue,
    shard: usize,
    last_lsn: u64,
    delta: &Delta,
    at: i64,
) -> Result<bool, store::RollupError> {
    let (tree, queue) = (db.open_tree(store::TREE)?, db.open_tree(uplink.tree())?);
    let lsn_key = store::lsn_key("", shard);
    let payload = Item::payload(shard, last_lsn, delta);
    let pushed = (&tree, &queue).transaction(|(tx, q)| {
        if last_lsn <= store::lsn_of(tx.get(&lsn_key)?) {
            return Ok(false);
        }
        if !delta.is_empty() {
            Queue::push_in::<String>(q, KIND, at, &payload)?;
        }
        tx.insert(lsn_key.as_slice(), &last_lsn.to_be_bytes())?;
        Ok(true)
    })?;
    Ok(pushed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::event::{Event, EventType};
    use crate::collector::rollup::HOUR_MICROS;

    const T0: i64 = 1_790_000_000_000_000;

    #[test]
    fn a_delta_travels_and_comes_back_equal_sketches_and_tables_included() {
        let mut d = Delta::default();
        for i in 0..3_000 {
            d.add(&Event {
                page_path: Some(format!("/p{}", i % 7).into()),
                country: Some("FR".into()),
                user_id: (i % 2 == 0).then(|| format!("u{i}").into()),
                ..Event::example("a", "m", &format!("v{i}"), T0)
            });
        }
        d.add(&Event {
            kind: EventType::Track,
            event: Some("Signed Up".into()),
            ..Event::example("b", "m", "v1", T0 + HOUR_MICROS)
        });
        let json = Item::payload(2, 41, &d);
        let back: Item = serde_json::from_slice(&json).unwrap();
        assert_eq!((back.shard, back.lsn), (2, 41));
        let (a, b): (Vec<_>, Vec<_>) = (d.buckets().collect(), back.delta.buckets().collect());
        assert_eq!(a, b);
        assert_eq!(back.delta.rows(), 3_001);
        // 3 000 visitors: a dense sketch (16 KiB) each for visitors and identified.
        assert!(json.len() < 50_000, "compact: {} bytes", json.len());
        assert!(serde_json::from_slice::<Item>(
            br#"{"shard":0,"lsn":1,"delta":[{"app":"a","hour":1,"bucket":"AAAA"}]}"#
        )
        .is_err());
    }
}
