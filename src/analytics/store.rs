//! Reads a window of an app's rollups (tree `rollups`, laid out by `collector/rollup/store.rs`)
//! and adds the rows committed and not yet stored (`collector/rollup/live.rs`), so an event
//! counts from its 200.

use crate::collector::rollup::live::Live;
use crate::collector::rollup::store::{self as rollups, RollupError, Unit};
use crate::collector::rollup::Bucket;
use crate::storage::StoreError;

use super::model::{Interval, Traffic, Window};

fn store_error(e: RollupError) -> StoreError {
    match e {
        RollupError::Sled(e) => StoreError::Sled(e),
        RollupError::Corrupt(key) => StoreError::Corrupt {
            key,
            cause: "unreadable rollup".into(),
        },
    }
}

/// The traffic of `app` over `w`: what sled holds plus the live hours of the window, read as
/// one view (each row in one of them: `Live::read`).
pub fn traffic(db: &sled::Db, live: &Live, app: &str, w: &Window) -> Result<Traffic, StoreError> {
    let (stored, hours) = live.read(app, w.hours(), || stored(db, app, w));
    let (mut series, mut totals) = stored?;
    for (hour, b) in hours {
        totals.merge(&b);
        let at = w.interval_of(hour);
        match series.binary_search_by_key(&at, |(i, _)| *i) {
            Ok(i) => series[i].1.merge(&b),
            Err(i) => series.insert(i, (at, b)),
        }
    }
    Ok(Traffic::build(w, &series, &totals))
}

/// The stored series of `w` (buckets of its interval, by index) and their union: from the day
/// buckets of the whole days and the hour buckets of the partial days at the edges, so a long
/// window reads one bucket per day, not 24.
fn stored(
    db: &sled::Db,
    app: &str,
    w: &Window,
) -> Result<(Vec<(i64, Bucket)>, Bucket), StoreError> {
    let unit = w.interval.unit();
    let series = rollups::read(db, app, unit, w.first, w.last + 1).map_err(store_error)?;
    let mut totals = Bucket::default();
    match w.interval {
        Interval::Day => series.iter().for_each(|(_, b)| totals.merge(b)),
        Interval::Hour => {
            let (d0, d1) = w.whole_days();
            for (_, b) in rollups::read(db, app, Unit::Day, d0, d1).map_err(store_error)? {
                totals.merge(&b);
            }
            series
                .iter()
                .filter(|(h, _)| !(d0..d1).contains(&h.div_euclid(24)))
                .for_each(|(_, b)| totals.merge(b));
        }
    }
    Ok((series, totals))
}
