//! An app's records in sled, found by the way each store keys them, and removed in pieces.
//!
//! Every store keys its records under the app: either a tag byte then the app id (`contacts`,
//! `ideas` with boards, votes and comments, `surveys` with responses, `rollups`, `lake_files`,
//! `suppressions`, `webhooks`) or the app id then `\0` (`identities`, `profiles`, `usage`, `quarantine`,
//! `idempotency` with its holds and expiry). App ids are 24-character ObjectIds, so a prefix never reaches another app. Apps,
//! keys and jobs (with an erasure's subject) are keyed by their own ids:
//! `tenants::store::remove_app` and the deletion's last step take those. `traces` scans every tree for anything left (the tests' proof).

use crate::storage::StoreError;

/// A sled tree and how it keys an app's records.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// `tag app ...`, for any tag byte.
    Tagged,
    /// `app \0 ...`.
    Leading,
}

/// Every tree that holds records of an app under its prefix, with its shape.
const TREES: [(&str, Shape); 15] = [
    (crate::contacts::store::TREE, Shape::Tagged),
    (crate::boards::store::TREE, Shape::Tagged),
    (crate::surveys::store::TREE, Shape::Tagged),
    (crate::collector::rollup::store::TREE, Shape::Tagged),
    (crate::collector::written::TREE, Shape::Tagged),
    (crate::tenants::suppression::TREE, Shape::Tagged),
    (crate::webhooks::store::TREE, Shape::Tagged),
    (crate::profiles::store::IDENTITIES, Shape::Leading),
    (crate::profiles::store::PROFILES, Shape::Leading),
    (crate::collector::usage::TREE, Shape::Leading),
    (crate::collector::quarantine::TREE, Shape::Leading),
    (crate::storage::idempotency::TREE, Shape::Leading),
    (crate::storage::idempotency::HOLDS, Shape::Leading),
    (crate::fleet::settle::TREE, Shape::Leading),
    // Last: a deletion job's token indexes the places, so new trees go at the end.
    (crate::storage::idempotency::EXPIRY, Shape::Leading),
];

/// The places of `app`'s records: (tree, key prefix), in a fixed order (a job's token is an
/// index into it).
pub fn places(app: &str) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (tree, shape) in TREES {
        match shape {
            Shape::Tagged => {
                out.extend((0..=u8::MAX).map(|tag| (tree, [&[tag], app.as_bytes()].concat())))
            }
            Shape::Leading => out.push((tree, [app.as_bytes(), &[0]].concat())),
        }
    }
    out
}

/// Removes every record of `app` at once (an edge, once the app is gone from its control
/// node's registry: the control node's deletion job already settled the edge), its items in
/// the edge's uplink included. Answers the keys removed.
pub fn remove_all(db: &sled::Db, app: &str) -> Result<u64, StoreError> {
    let places = places(app);
    let (mut at, mut total) = (0, forget_lake_files(db, app)?);
    total += crate::fleet::uplink::forget_app(db, app)? as u64;
    while at < places.len() {
        let (next, removed) = remove_from(db, &places, at, 5_000)?;
        total += removed.iter().map(|(_, n)| n).sum::<u64>();
        at = next;
    }
    Ok(total)
}

/// The last instant a record can carry (9999-12-31T23:59:59Z).
const END_OF_TIME: i64 = 253_402_300_799_000_000;

/// Removes the app's lake-file records with their by-path entries (`p path`, which are not
/// keyed by the app); returns how many files they named.
pub fn forget_lake_files(db: &sled::Db, app: &str) -> Result<u64, StoreError> {
    let end = crate::ids::Timestamp::from_micros(END_OF_TIME);
    Ok(crate::collector::written::drop_before(db, app, end)? as u64)
}

/// Keys removed per tree.
pub type Removed = Vec<(&'static str, u64)>;

/// Removes at most `budget` keys of the places from index `from` on, place by place, and
/// flushes. Returns the index of the first place not emptied (`places.len()` once all are) and
/// the keys removed per tree.
pub fn remove_from(
    db: &sled::Db,
    places: &[(&'static str, Vec<u8>)],
    from: usize,
    budget: usize,
) -> Result<(usize, Removed), StoreError> {
    let (mut at, mut left, mut removed) = (from, budget, Vec::new());
    while let Some((name, prefix)) = places.get(at) {
        let tree = db.open_tree(name)?;
        let keys = tree
            .scan_prefix(prefix)
            .keys()
            .take(left)
            .collect::<Result<Vec<_>, _>>()?;
        let mut batch = sled::Batch::default();
        for k in &keys {
            batch.remove(k.clone());
        }
        tree.apply_batch(batch)?;
        if !keys.is_empty() {
            removed.push((*name, keys.len() as u64));
        }
        left -= keys.len();
        if left == 0 {
            break;
        }
        at += 1;
    }
    if places
        .get(at)
        .is_some_and(|(name, prefix)| is_empty(db, name, prefix).unwrap_or(false))
    {
        at += 1;
    }
    db.flush()?;
    Ok((at, removed))
}

fn is_empty(db: &sled::Db, tree: &str, prefix: &[u8]) -> Result<bool, StoreError> {
    Ok(db.open_tree(tree)?.scan_prefix(prefix).next().is_none())
}

/// Every `(tree, key)` of the database whose key or value holds `app` (its id as bytes): what
/// is left of an app. Reads the whole database: for tests and checks, not for requests.
pub fn traces(db: &sled::Db, app: &str) -> Result<Vec<(String, String)>, StoreError> {
    let needle = app.as_bytes();
    let holds = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle);
    let mut found = Vec::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name)?;
        for kv in tree.iter() {
            let (k, v) = kv?;
            if holds(&k) || holds(&v) {
                found.push((
                    String::from_utf8_lossy(&name).into_owned(),
                    String::from_utf8_lossy(&k).into_owned(),
                ));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef01234567";
    const B: &str = "0123456789abcdef01234568";

    #[test]
    fn an_apps_places_are_emptied_in_pieces_and_another_app_is_untouched() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        for app in [A, B] {
            let contacts = db.open_tree(crate::contacts::store::TREE).unwrap();
            for i in 0..5u8 {
                contacts
                    .insert([b"r", app.as_bytes(), &[i]].concat(), app)
                    .unwrap();
                contacts
                    .insert([b"e", app.as_bytes(), &[i]].concat(), "x")
                    .unwrap();
            }
            let profiles = db.open_tree(crate::profiles::store::PROFILES).unwrap();
            profiles
                .insert([app.as_bytes(), b"\0u1"].concat(), "{}")
                .unwrap();
        }
        let written = crate::collector::written::WrittenFile {
            path: format!("events/app_id={A}/dt=2026-01-01/hour=00/part-n-0-1.parquet"),
            rows: 1,
            bytes: 1,
            written_at: crate::ids::Timestamp::t0(),
        };
        let t0 = crate::ids::Timestamp::t0();
        crate::collector::written::record(&db, &[(A.to_owned(), written)], t0).unwrap();
        assert_eq!(traces(&db, A).unwrap().len(), 13);
        assert_eq!(forget_lake_files(&db, A).unwrap(), 1);
        let places = places(A);
        let (mut at, mut total) = (0, 0);
        let mut pieces = 0;
        while at < places.len() {
            let (next, removed) = remove_from(&db, &places, at, 3).unwrap();
            total += removed.iter().map(|(_, n)| n).sum::<u64>();
            at = next;
            pieces += 1;
        }
        assert_eq!(total, 11);
        assert!(pieces >= 4, "{pieces} pieces of at most 3 keys");
        assert_eq!(traces(&db, A).unwrap(), Vec::<(String, String)>::new());
        assert_eq!(traces(&db, B).unwrap().len(), 11);
    }
}
