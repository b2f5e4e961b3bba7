//! The rollups in sled, tree `rollups`:
//!
//! ```text
//! 0x00 "lsn" <shard u32 BE>                      -> the last LSN whose rows are applied (u64 BE)
//! 0x00 "lsn" <shard u32 BE> <node>               -> the same for a shard of an edge node (the
//!                                                   control node's uplink, `apply_from`)
//! 0x01 <app> 0x00 'h' <hour since epoch, i64>     -> bucket of that hour
//! 0x01 <app> 0x00 'd' <day since epoch, i64>      -> bucket of that day (the union of its hours)
//! ```
//!
//! Times are written big-endian with the sign bit flipped, so keys sort by time and a window is
//! one range scan under the app's prefix. A bucket is stored as the length of its JSON part
//! (u32 BE), the JSON `{"t": [page, track, identify, group], "p": pages, "e": events}`, the
//! length of the visitors sketch (u32 BE), that sketch, then the identified sketch (`hll.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError};

use super::hll::Hll;
use super::top::Top;
use super::{Bucket, Delta};
use crate::collector::event::EventType;

pub const TREE: &str = "rollups";

/// The time unit of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Hour,
    Day,
}

impl Unit {
    fn tag(self) -> u8 {
        match self {
            Unit::Hour => b'h',
            Unit::Day => b'd',
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RollupError {
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt rollup record {0}")]
    Corrupt(String),
}

impl From<TransactionError<String>> for RollupError {
    fn from(e: TransactionError<String>) -> Self {
        match e {
            TransactionError::Abort(key) => RollupError::Corrupt(key),
            TransactionError::Storage(e) => RollupError::Sled(e),
        }
    }
}

/// The rollup LSN's key of `shard` of `node` ("": this node's own shards).
pub(super) fn lsn_key(node: &str, shard: usize) -> Vec<u8> {
    let mut k = b"\x00lsn".to_vec();
    k.extend_from_slice(&(shard as u32).to_be_bytes());
    k.extend_from_slice(node.as_bytes());
    k
}

pub(super) fn lsn_of(v: Option<impl AsRef<[u8]>>) -> u64 {
    v.and_then(|v| v.as_ref().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0)
}

fn app_prefix(app: &str, unit: Unit) -> Vec<u8> {
    let mut k = Vec::with_capacity(app.len() + 11);
    k.push(1);
    k.extend_from_slice(app.as_bytes());
    k.push(0);
    k.push(unit.tag());
    k
}

fn bucket_key(app: &str, unit: Unit, at: i64) -> Vec<u8> {
    let mut k = app_prefix(app, unit);
    k.extend_from_slice(&((at as u64) ^ (1 << 63)).to_be_bytes());
    k
}

fn time_of(key: &[u8]) -> Option<i64> {
    let tail: [u8; 8] = key.get(key.len().checked_sub(8)?..)?.try_into().ok()?;
    Some((u64::from_be_bytes(tail) ^ (1 << 63)) as i64)
}

#[derive(Serialize, Deserialize)]
struct Counts {
    /// Events per type, in the order of `EventType::ALL` (buckets stored before `screen` and
    /// `alias` hold four).
    t: Vec<u64>,
    p: Top,
    e: Top,
    /// Countries and device classes (absent from buckets stored before them).
    #[serde(default)]
    c: Top,
    #[serde(default)]
    d: Top,
}

pub(super) fn encode(b: &Bucket) -> Vec<u8> {
    let json = serde_json::to_vec(&Counts {
        t: b.by_type.to_vec(),
        p: b.pages.clone(),
        e: b.events.clone(),
        c: b.countries.clone(),
        d: b.devices.clone(),
    })
    .expect("counts serialize");
    let visitors = b.visitors.to_bytes();
    let mut out = Vec::with_capacity(8 + json.len() + visitors.len() + 64);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&(visitors.len() as u32).to_be_bytes());
    out.extend_from_slice(&visitors);
    out.extend_from_slice(&b.identified.to_bytes());
    out
}

/// A length (u32 BE) and what follows it.
fn take(b: &[u8]) -> Option<(usize, &[u8])> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    Some((n, b.get(4..)?))
}

pub(super) fn decode(bytes: &[u8]) -> Option<Bucket> {
    let (n, rest) = take(bytes)?;
    let counts: Counts = serde_json::from_slice(rest.get(..n)?).ok()?;
    let (v, rest) = take(rest.get(n..)?)?;
    let mut by_type = [0; EventType::ALL.len()];
    for (slot, n) in by_type.iter_mut().zip(counts.t) {
        *slot = n;
    }
    Some(Bucket {
        by_type,
        pages: counts.p,
        events: counts.e,
        countries: counts.c,
        devices: counts.d,
        visitors: Hll::from_bytes(rest.get(..v)?)?,
        identified: Hll::from_bytes(rest.get(v..)?)?,
    })
}

fn corrupt(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// The last LSN of `shard` whose rows are in the rollups (0: none).
pub fn applied_lsn(db: &sled::Db, shard: usize) -> Result<u64, RollupError> {
    applied_lsn_of(db, "", shard)
}

/// The last LSN of `shard` of `node` ("": this node) whose rows are in the rollups (0: none).
pub fn applied_lsn_of(db: &sled::Db, node: &str, shard: usize) -> Result<u64, RollupError> {
    Ok(lsn_of(db.open_tree(TREE)?.get(lsn_key(node, shard))?))
}

/// Adds a flush's delta to the rollups (every bucket to its hour and its day) and records
/// `last_lsn` as the shard's rollup LSN, in one transaction. A job at or below the recorded
/// LSN was applied before (a retry, or a replay after a crash that came before the
/// checkpoint): nothing changes. Returns whether it was applied.
pub fn apply(
    db: &sled::Db,
    shard: usize,
    last_lsn: u64,
    delta: &Delta,
) -> Result<bool, RollupError> {
    apply_from(db, "", shard, last_lsn, delta)
}

/// `apply` for a shard of `node` ("": this node): the control node applies its edges' deltas
/// (the uplink) once per (node, shard, LSN).
pub fn apply_from(
    db: &sled::Db,
    node: &str,
    shard: usize,
    last_lsn: u64,
    delta: &Delta,
) -> Result<bool, RollupError> {
    let tree = db.open_tree(TREE)?;
    let mut updates: BTreeMap<Vec<u8>, Bucket> = BTreeMap::new();
    for (app, hour, b) in delta.buckets() {
        updates
            .entry(bucket_key(app, Unit::Hour, hour))
            .or_default()
            .merge(b);
        updates
            .entry(bucket_key(app, Unit::Day, hour.div_euclid(24)))
            .or_default()
            .merge(b);
    }
    let lsn_key = lsn_key(node, shard);
    let applied = tree.transaction(|tx| {
        if last_lsn <= lsn_of(tx.get(&lsn_key)?) {
            return Ok(false);
        }
        for (key, add) in &updates {
            let mut b = match tx.get(key)? {
                Some(v) => {
                    decode(&v).ok_or_else(|| ConflictableTransactionError::Abort(corrupt(key)))?
                }
                None => Bucket::default(),
            };
            b.merge(add);
            tx.insert(key.as_slice(), encode(&b))?;
        }
        tx.insert(lsn_key.as_slice(), &last_lsn.to_be_bytes())?;
        Ok(true)
    })?;
    Ok(applied)
}

/// The buckets of `app` in `unit` from `from` (inclusive) to `to` (exclusive), by time.
pub fn read(
    db: &sled::Db,
    app: &str,
    unit: Unit,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, Bucket)>, RollupError> {
    let tree = db.open_tree(TREE)?;
    let mut out = Vec::new();
    for kv in tree.range(bucket_key(app, unit, from)..bucket_key(app, unit, to)) {
        let (k, v) = kv?;
        let at = time_of(&k).ok_or_else(|| RollupError::Corrupt(corrupt(&k)))?;
        let b = decode(&v).ok_or_else(|| RollupError::Corrupt(corrupt(&k)))?;
        out.push((at, b));
    }
    Ok(out)
}

/// Removes `app`'s buckets in `unit` before `first_kept` (hours or days since the epoch, not
/// included: the retention sweep); returns how many went.
pub fn drop_before(
    db: &sled::Db,
    app: &str,
    unit: Unit,
    first_kept: i64,
) -> Result<usize, sled::Error> {
    let tree = db.open_tree(TREE)?;
    let mut dropped = 0;
    for kv in tree.range(app_prefix(app, unit)..bucket_key(app, unit, first_kept)) {
        let (k, _) = kv?;
        if tree.remove(k)?.is_some() {
            dropped += 1;
        }
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::event::Event;
    use crate::collector::rollup::HOUR_MICROS;

    const T0: i64 = 1_790_000_000_000_000;

    fn delta(app: &str, visitors: &[&str], at: i64) -> Delta {
        let mut d = Delta::default();
        for v in visitors {
            d.add(&Event {
                page_path: Some(format!("/{v}").into()),
                ..Event::example(app, "m", v, at)
            });
        }
        d
    }

    fn db() -> sled::Db {
        sled::Config::new().temporary(true).open().unwrap()
    }

    #[test]
    fn a_bucket_stored_with_four_types_and_no_countries_or_devices_reads_with_them() {
        let mut b = Bucket::default();
        b.by_type[0] = 7;
        b.by_type[3] = 2;
        let mut with = b.clone();
        with.countries.add("FR", 3);
        with.devices.add("mobile", 3);
        assert_eq!(decode(&encode(&with)), Some(with));
        let bytes = encode(&b);
        let (n, rest) = take(&bytes).unwrap();
        let mut counts: serde_json::Value = serde_json::from_slice(&rest[..n]).unwrap();
        assert_eq!(counts["t"], serde_json::json!([7, 0, 0, 2, 0, 0]));
        counts["t"] = serde_json::json!([7, 0, 0, 2]);
        let fields = counts.as_object_mut().unwrap();
        assert!(fields.remove("c").is_some() && fields.remove("d").is_some());
        let json = serde_json::to_vec(&counts).unwrap();
        let mut old = (json.len() as u32).to_be_bytes().to_vec();
        old.extend_from_slice(&json);
        old.extend_from_slice(&rest[n..]);
        assert_eq!(decode(&old), Some(b));
    }

    #[test]
    fn applying_a_job_twice_counts_it_once() {
        let db = db();
        let h = T0.div_euclid(HOUR_MICROS);
        assert_eq!(applied_lsn(&db, 0).unwrap(), 0);
        assert!(apply(&db, 0, 5, &delta("a", &["v1", "v2"], T0)).unwrap());
        assert!(!apply(&db, 0, 5, &delta("a", &["v1", "v2"], T0)).unwrap());
        assert!(!apply(&db, 0, 3, &delta("a", &["v9"], T0)).unwrap());
        assert_eq!(applied_lsn(&db, 0).unwrap(), 5);
        // Another shard has its own LSN.
        assert!(apply(&db, 1, 2, &delta("a", &["v3"], T0 + 1)).unwrap());
        let hours = read(&db, "a", Unit::Hour, h - 1, h + 2).unwrap();
        assert_eq!(hours.len(), 1);
        assert_eq!(hours[0].0, h);
        assert_eq!(hours[0].1.events(), 3);
        assert_eq!(hours[0].1.visitors.estimate().round(), 3.0);
        let days = read(&db, "a", Unit::Day, h / 24, h / 24 + 1).unwrap();
        assert_eq!(days[0].1, hours[0].1, "the day is the union of its hours");
        assert!(read(&db, "b", Unit::Hour, h - 1, h + 2).unwrap().is_empty());
    }

    #[test]
    fn hours_of_a_day_add_up_in_the_day_and_read_back_in_order() {
        let db = db();
        let day_start = (T0.div_euclid(HOUR_MICROS * 24)) * 24;
        let at = |h: i64| (day_start + h) * HOUR_MICROS;
        apply(&db, 0, 1, &delta("a", &["v1"], at(3))).unwrap();
        apply(&db, 0, 2, &delta("a", &["v1", "v2"], at(1))).unwrap();
        let hours = read(&db, "a", Unit::Hour, day_start, day_start + 24).unwrap();
        let got: Vec<(i64, u64)> = hours
            .iter()
            .map(|(h, b)| (h - day_start, b.events()))
            .collect();
        assert_eq!(got, [(1, 2), (3, 1)]);
        let days = read(&db, "a", Unit::Day, day_start / 24, day_start / 24 + 1).unwrap();
        assert_eq!(days[0].1.events(), 3);
        assert_eq!(days[0].1.visitors.estimate().round(), 2.0);
        assert_eq!(decode(&encode(&days[0].1)).as_ref(), Some(&days[0].1));
    }

    #[test]
    fn dropping_before_a_time_keeps_later_buckets_the_other_unit_and_other_apps() {
        let db = db();
        let h = T0.div_euclid(HOUR_MICROS);
        for (lsn, at) in [(1, h - 30), (2, h - 25), (3, h)].into_iter() {
            apply(&db, 0, lsn, &delta("a", &["v"], at * HOUR_MICROS)).unwrap();
            apply(&db, 1, lsn, &delta("ab", &["v"], at * HOUR_MICROS)).unwrap();
        }
        let hours = |app| -> Vec<i64> {
            read(&db, app, Unit::Hour, h - 100, h + 1)
                .unwrap()
                .into_iter()
                .map(|(at, _)| at)
                .collect()
        };
        assert_eq!(drop_before(&db, "a", Unit::Hour, h - 25).unwrap(), 1);
        assert_eq!(hours("a"), [h - 25, h]);
        assert_eq!(drop_before(&db, "a", Unit::Hour, h - 25).unwrap(), 0);
        assert_eq!(hours("ab"), [h - 30, h - 25, h], "another app untouched");
        let days = read(&db, "a", Unit::Day, h / 24 - 5, h / 24 + 1).unwrap();
        assert_eq!(
            days.len(),
            (h / 24 - (h - 30) / 24 + 1) as usize,
            "days stay"
        );
        assert_eq!(
            drop_before(&db, "a", Unit::Day, h / 24).unwrap(),
            days.len() - 1
        );
        assert_eq!(read(&db, "a", Unit::Day, 0, i64::MAX).unwrap().len(), 1);
    }
}
