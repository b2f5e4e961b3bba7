//! Monthly event counts per app, for the `events_per_month` plan limit.
//!
//! The shard writers add accepted events to sled (`usage` tree, `app \0 YYYY-MM -> u64`); the
//! edge checks and counts in memory (`quota.rs`), seeded from this count after a start.

use std::collections::HashMap;

use super::event::Event;
use crate::storage::StoreError;

pub const TREE: &str = "usage";

/// `YYYY-MM` of a timestamp in µs.
pub fn month_of(micros: i64) -> String {
    use chrono::Datelike;
    let day = chrono::DateTime::from_timestamp_micros(micros)
        .unwrap_or_default()
        .date_naive();
    format!("{:04}-{:02}", day.year(), day.month())
}

fn key(app: &str, month: &str) -> Vec<u8> {
    [app.as_bytes(), &[0], month.as_bytes()].concat()
}

fn read(v: Option<&[u8]>) -> u64 {
    v.and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// Adds accepted events to their app's monthly count.
pub fn add_events(db: &sled::Db, events: &[Event]) -> Result<(), StoreError> {
    // Counted per day first: the month is formatted once per day, not once per event.
    const DAY: i64 = 86_400_000_000;
    let mut per_day: HashMap<(&str, i64), u64> = HashMap::new();
    for e in events {
        *per_day
            .entry((&*e.app_id, e.received_at.div_euclid(DAY)))
            .or_default() += 1;
    }
    let mut per: HashMap<(&str, String), u64> = HashMap::new();
    for ((app, day), n) in per_day {
        *per.entry((app, month_of(day * DAY))).or_default() += n;
    }
    let tree = db.open_tree(TREE)?;
    for ((app, month), n) in per {
        tree.update_and_fetch(key(app, &month), |old| {
            Some((read(old) + n).to_be_bytes().to_vec())
        })?;
    }
    Ok(())
}

/// Every app's count of the given months: (app, month, events).
pub fn all_of(db: &sled::Db, months: &[String]) -> Result<Vec<(String, String, u64)>, StoreError> {
    let mut out = Vec::new();
    for kv in db.open_tree(TREE)?.iter() {
        let (k, v) = kv?;
        let Some(at) = k.iter().position(|b| *b == 0) else {
            continue;
        };
        let month = String::from_utf8_lossy(&k[at + 1..]).into_owned();
        if months.contains(&month) {
            let app = String::from_utf8_lossy(&k[..at]).into_owned();
            out.push((app, month, read(Some(&v))));
        }
    }
    Ok(out)
}

pub fn get(db: &sled::Db, app: &str, month: &str) -> Result<u64, StoreError> {
    Ok(read(db.open_tree(TREE)?.get(key(app, month))?.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::month_of;

    #[test]
    fn a_month_is_its_utc_year_and_month() {
        assert_eq!(month_of(0), "1970-01");
        // 2026-12-31T23:59:59.999999Z, then the next microsecond.
        assert_eq!(month_of(1_798_761_599_999_999), "2026-12");
        assert_eq!(month_of(1_798_761_600_000_000), "2027-01");
        assert_eq!(month_of(-1), "1969-12");
    }
}
