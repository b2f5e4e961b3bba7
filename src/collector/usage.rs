//! Monthly event counts per app, for the `events_per_month` plan limit.
//!
//! The shard writers add accepted events to sled (`usage` tree, `app \0 YYYY-MM -> u64`; at most
//! every 250 ms, see `Pending`); the edge checks and counts in memory (`quota.rs`), seeded from
//! this count after a start.

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

/// The key of a shard's usage LSN (outside every `app \0 month` key: it starts with `\0`).
fn lsn_key(shard: usize) -> Vec<u8> {
    [b"\0lsn".as_slice(), &(shard as u32).to_be_bytes()].concat()
}

/// The last LSN of `shard` whose events are in the counts (0: none). After a crash, the WAL
/// records above it are counted again by the replay, so a `kill -9` loses no count.
pub fn counted_lsn(db: &sled::Db, shard: usize) -> Result<u64, StoreError> {
    Ok(read(db.open_tree(TREE)?.get(lsn_key(shard))?.as_deref()))
}

/// Events per app and day (the month is formatted once per day, not once per event).
#[derive(Debug, Default)]
pub struct Counts(HashMap<String, HashMap<i64, u64>>);

impl Counts {
    /// Counts `n` events of `e`'s app and day.
    pub fn add(&mut self, e: &Event<'_>, n: u64) {
        const DAY: i64 = 86_400_000_000;
        let day = e.received_at.div_euclid(DAY);
        let days = match self.0.get_mut(&*e.app_id) {
            Some(days) => days,
            None => self.0.entry(e.app_id.to_string()).or_default(),
        };
        *days.entry(day).or_default() += n;
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Adds `counts` to the monthly counts and, with `lsn` (shard, last LSN), records that shard's
/// events up to that LSN as counted, in one transaction (an LSN at or below the recorded one
/// adds nothing: counted before).
pub fn add_counts(
    db: &sled::Db,
    counts: &Counts,
    lsn: Option<(usize, u64)>,
) -> Result<(), StoreError> {
    const DAY: i64 = 86_400_000_000;
    let mut per: HashMap<(&str, String), u64> = HashMap::new();
    for (app, days) in &counts.0 {
        for (day, n) in days {
            *per.entry((app, month_of(day * DAY))).or_default() += n;
        }
    }
    let tree = db.open_tree(TREE)?;
    tree.transaction(|tx| {
        if let Some((shard, last)) = lsn {
            if last <= read(tx.get(lsn_key(shard))?.as_deref()) {
                return Ok(());
            }
            tx.insert(lsn_key(shard), &last.to_be_bytes())?;
        }
        for ((app, month), n) in &per {
            let k = key(app, month);
            let now = read(tx.get(&k)?.as_deref()) + n;
            tx.insert(k, &now.to_be_bytes())?;
        }
        Ok::<_, sled::transaction::ConflictableTransactionError<StoreError>>(())
    })?;
    Ok(())
}

/// The shard writer's counts not yet in sled: written at most every [`Pending::EVERY`] (the
/// first batch after a quiet spell at once), before every flush hands files over (so the WAL
/// is never trimmed past an uncounted LSN), and at stop. A crash loses none of them: the
/// replay counts every record above the shard's usage LSN. Bounded by apps x days seen in one
/// interval.
#[derive(Debug, Default)]
pub struct Pending {
    counts: Counts,
    /// The newest LSN in `counts`.
    last_lsn: u64,
    /// When the counts were last written (µs).
    written_at: i64,
}

impl Pending {
    /// At most four sled transactions a second per shard, instead of one per group commit.
    pub const EVERY: std::time::Duration = std::time::Duration::from_millis(250);

    /// Adds committed events, in runs of one app and hour (counted once per run), the last
    /// one at `last_lsn`.
    pub fn add(&mut self, runs: &[&[&Event<'_>]], last_lsn: u64) {
        for run in runs {
            if let Some(first) = run.first() {
                self.counts.add(first, run.len() as u64);
            }
        }
        self.last_lsn = last_lsn;
    }

    /// When the counts held are due to be written (µs), if any are held.
    pub fn due_at(&self) -> Option<i64> {
        (!self.counts.is_empty()).then(|| self.written_at + Self::EVERY.as_micros() as i64)
    }

    /// Writes what is held when it is due at `now` (or `force`); kept on an error, tried again.
    pub fn write(&mut self, db: &crate::storage::Db, shard: usize, now: i64, force: bool) {
        if !self.due_at().is_some_and(|due| force || due <= now) {
            return;
        }
        let lsn = Some((shard, self.last_lsn));
        match db.with(|db| add_counts(db, &self.counts, lsn)) {
            Ok(()) => {
                self.counts = Counts::default();
                self.written_at = now;
            }
            Err(e) => tracing::warn!(shard, error = %e, "usage counter not updated"),
        }
    }
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
    use super::*;

    #[test]
    fn counts_with_an_lsn_add_once_and_the_lsn_says_what_a_replay_must_count_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let mut counts = Counts::default();
        // A run of two events and one alone: three.
        for (i, n) in [2, 1].into_iter().enumerate() {
            let e = Event::example("app", &format!("m{i}"), "v", 1_795_000_000_000_000);
            counts.add(&e, n);
        }
        assert_eq!(counted_lsn(&db, 1).unwrap(), 0);
        add_counts(&db, &counts, Some((1, 7))).unwrap();
        // The same LSN again (a replay of what was counted): nothing more.
        add_counts(&db, &counts, Some((1, 7))).unwrap();
        assert_eq!(counted_lsn(&db, 1).unwrap(), 7);
        assert_eq!(counted_lsn(&db, 0).unwrap(), 0, "per shard");
        let month = month_of(1_795_000_000_000_000);
        assert_eq!(get(&db, "app", &month).unwrap(), 3);
        add_counts(&db, &counts, Some((1, 8))).unwrap();
        assert_eq!(get(&db, "app", &month).unwrap(), 6);
        assert_eq!(
            all_of(&db, &[month]).unwrap().len(),
            1,
            "the LSN is no app's count"
        );
    }

    #[test]
    fn a_month_is_its_utc_year_and_month() {
        assert_eq!(month_of(0), "1970-01");
        // 2026-12-31T23:59:59.999999Z, then the next microsecond.
        assert_eq!(month_of(1_798_761_599_999_999), "2026-12");
        assert_eq!(month_of(1_798_761_600_000_000), "2027-01");
        assert_eq!(month_of(-1), "1969-12");
    }
}
