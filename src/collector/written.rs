//! The record of the lake files the uploaders put, so the dashboard can list an app's recent
//! files (path, rows, bytes, time) without listing or reading the object store.
//!
//! Tree `lake_files`:
//! - `f` app 0x00 time (u64 µs, big endian) path -> the file (JSON)
//! - `p` path                                   -> its `f` key
//!
//! The uploader records a flush's files after putting them and before its checkpoint, and
//! forgets the paths of an unfinished intent when it deletes them at start, so the record names
//! exactly the files in the lake (a crash between the puts and the record leaves those files
//! unrecorded until the replay puts them again). Records older than `KEEP_HOURS` are dropped whenever
//! the same app gets a new file: an app that stops sending keeps its last records until the
//! retention sweep drops them (its plan's `lake_file_records_days`).

use serde::{Deserialize, Serialize};
use sled::transaction::ConflictableTransactionError;

use crate::ids::Timestamp;
use crate::storage::{decode, encode, StoreError};

pub const TREE: &str = "lake_files";
/// How long a record is kept (the dashboard shows the last 24 hours).
pub const KEEP_HOURS: i64 = 48;

/// One file put in the lake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenFile {
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    pub written_at: Timestamp,
}

fn app_prefix(app: &str) -> Vec<u8> {
    [b"f", app.as_bytes(), b"\0"].concat()
}

fn file_key(app: &str, at: Timestamp, path: &str) -> Vec<u8> {
    let micros = u64::try_from(at.micros()).unwrap_or(0);
    [&app_prefix(app)[..], &micros.to_be_bytes(), path.as_bytes()].concat()
}

fn path_key(path: &str) -> Vec<u8> {
    [b"p", path.as_bytes()].concat()
}

/// Records the files of one flush (`(app, file)`), in one transaction, then drops the
/// touched apps' records older than `KEEP_HOURS`.
pub fn record(
    db: &sled::Db,
    files: &[(String, WrittenFile)],
    now: Timestamp,
) -> Result<(), sled::Error> {
    let tree = db.open_tree(TREE)?;
    tree.transaction(|tx| {
        for (app, f) in files {
            let key = file_key(app, f.written_at, &f.path);
            if let Some(old) = tx.insert(path_key(&f.path), key.as_slice())? {
                tx.remove(old)?;
            }
            tx.insert(key, encode(f))?;
        }
        Ok::<_, ConflictableTransactionError<()>>(())
    })
    .map_err(|e| match e {
        sled::transaction::TransactionError::Storage(e) => e,
        sled::transaction::TransactionError::Abort(()) => {
            sled::Error::Unsupported("lake_files transaction aborted".into())
        }
    })?;
    let cutoff = Timestamp::from_micros(now.micros() - KEEP_HOURS * 3_600_000_000);
    let mut apps: Vec<&str> = files.iter().map(|(a, _)| a.as_str()).collect();
    apps.dedup();
    for app in apps {
        drop_before(db, app, cutoff)?;
    }
    Ok(())
}

/// Drops `app`'s records of files written before `cutoff` (the retention sweep, and `record`);
/// returns how many went.
pub fn drop_before(db: &sled::Db, app: &str, cutoff: Timestamp) -> Result<usize, sled::Error> {
    let tree = db.open_tree(TREE)?;
    let mut dropped = 0;
    for kv in tree.range(app_prefix(app)..file_key(app, cutoff, "")) {
        let (k, v) = kv?;
        if let Ok(f) = decode::<WrittenFile>(&k, &v) {
            tree.remove(path_key(&f.path))?;
        }
        if tree.remove(k)?.is_some() {
            dropped += 1;
        }
    }
    Ok(dropped)
}

/// Forgets the files at `paths` (the files of an unfinished flush, deleted at start).
pub fn forget(db: &sled::Db, paths: &[&str]) -> Result<(), sled::Error> {
    let tree = db.open_tree(TREE)?;
    for p in paths {
        if let Some(key) = tree.remove(path_key(p))? {
            tree.remove(key)?;
        }
    }
    Ok(())
}

/// The app's files written since `since`, newest first, at most `limit`.
pub fn recent(
    db: &sled::Db,
    app: &str,
    since: Timestamp,
    limit: usize,
) -> Result<Vec<WrittenFile>, StoreError> {
    let tree = db.open_tree(TREE)?;
    let start = file_key(app, since, "");
    let mut end = app_prefix(app);
    *end.last_mut().expect("not empty") += 1;
    let mut out = Vec::new();
    for kv in tree.range(start..end).rev().take(limit) {
        let (k, v) = kv?;
        out.push(decode(&k, &v)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, at: Timestamp) -> WrittenFile {
        WrittenFile {
            path: path.into(),
            rows: 3,
            bytes: 100,
            written_at: at,
        }
    }

    #[test]
    fn recent_files_come_newest_first_per_app_and_old_or_forgotten_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let now = Timestamp::from_micros(1_750_000_000_000_000);
        let hours_ago = |h: i64| Timestamp::from_micros(now.micros() - h * 3_600_000_000);
        record(&db, &[("a".into(), file("x/old", hours_ago(30)))], now).unwrap();
        record(
            &db,
            &[
                ("a".into(), file("x/1", hours_ago(2))),
                ("a".into(), file("x/2", hours_ago(1))),
                ("b".into(), file("y/1", hours_ago(1))),
            ],
            now,
        )
        .unwrap();
        let day = hours_ago(24);
        let paths = |app: &str| -> Vec<String> {
            recent(&db, app, day, 10)
                .unwrap()
                .into_iter()
                .map(|f| f.path)
                .collect()
        };
        assert_eq!(paths("a"), ["x/2", "x/1"]);
        assert_eq!(paths("b"), ["y/1"]);
        assert_eq!(recent(&db, "a", hours_ago(48), 10).unwrap().len(), 3);
        assert_eq!(recent(&db, "a", day, 1).unwrap()[0].path, "x/2");
        forget(&db, &["x/2"]).unwrap();
        assert_eq!(paths("a"), ["x/1"]);
        record(&db, &[("a".into(), file("x/ancient", hours_ago(72)))], now).unwrap();
        assert_eq!(
            recent(&db, "a", hours_ago(100), 10).unwrap().len(),
            2,
            "older than 48 h dropped"
        );
        assert_eq!(
            drop_before(&db, "a", hours_ago(1)).unwrap(),
            2,
            "x/old and x/1 went"
        );
        assert_eq!(paths("a"), Vec::<String>::new());
        assert_eq!(paths("b"), ["y/1"], "another app untouched");
        let t = db.open_tree(TREE).unwrap();
        assert!(
            t.get(path_key("x/1")).unwrap().is_none(),
            "its path entry too"
        );
    }
}
