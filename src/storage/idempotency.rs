//! Idempotency records: the stored side of `Idempotency-Key` (the HTTP side is
//! `api/idempotency.rs`). A record is pending while its first request runs, then holds the
//! answer to replay; records expire after the configured TTL and are swept on a timer.
//!
//! Records live in the `idempotency` tree under `appId \0 key`, with the request's fingerprint.
//! A kept answer names the records it shows (`StoredAnswer::holds`, e.g. the contacts it
//! created); tree `idempotency_holds` indexes them as `appId \0 recordId \0 key`, so erasing a
//! record forgets every answer that holds it (`forget_holding`): a replay never brings erased
//! personal data back.
//!
//! Tree `idempotency_expiry` indexes the records by when they were written
//! (`appId \0 created (u64 BE) key`, written before the record), so the sweep reads the
//! expired ones and nothing else: sled 0.34 keeps in memory what it reads (ARCHITECTURE.md,
//! Known limits), and a sweep that walked every kept answer each hour would hold them all. An
//! entry whose record was written again later, or removed, is dropped when the sweep reaches
//! it. A store of an earlier version is indexed once at start-up ([`index_once`]).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{decode, encode, Store, StoreError};
use crate::clock::Clock;
use crate::ids::Timestamp;

pub const TREE: &str = "idempotency";
pub const HOLDS: &str = "idempotency_holds";
pub const EXPIRY: &str = "idempotency_expiry";
/// In [`EXPIRY`] once every record is indexed (after every app's entries: app ids are ASCII).
const INDEXED: &[u8] = b"\xffindexed";
/// A pending record older than this is taken to be abandoned (its request died).
const PENDING_TIMEOUT_SECS: i64 = 60;

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    fingerprint: String,
    created_unix: i64,
    answer: Option<StoredAnswer>,
}

/// A success answer kept for replay, independent of the request id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredAnswer {
    pub status: u16,
    pub location: Option<String>,
    pub data: serde_json::Value,
    /// Ids of the records (of the same app) whose data the answer shows.
    #[serde(default)]
    pub holds: Vec<String>,
}

/// What a request with an idempotency key finds.
pub enum Begin {
    /// No live record: this request runs (a pending record now holds the key).
    Started,
    /// The same request succeeded before: replay its answer.
    Replay(StoredAnswer),
    /// The key was used for another request.
    Mismatch,
    /// The same request is still running.
    InFlight,
}

fn record_key(app: &str, idem: &str) -> Vec<u8> {
    [app.as_bytes(), &[0], idem.as_bytes()].concat()
}

/// The expiry entry of the record `app \0 idem` written at `created` (unix seconds).
fn expiry_key(app: &[u8], created: i64, idem: &[u8]) -> Vec<u8> {
    let at = u64::try_from(created).unwrap_or(0).to_be_bytes();
    [app, &[0], &at, idem].concat()
}

/// Indexes a record about to be written at `created` (before it is: a crash between the two
/// leaves an entry without its record, which the sweep drops, never a record it would miss).
fn index(db: &sled::Db, app: &str, idem: &str, created: i64) -> Result<(), StoreError> {
    db.open_tree(EXPIRY)?
        .insert(expiry_key(app.as_bytes(), created, idem.as_bytes()), &[])?;
    Ok(())
}

fn hold_prefix(app: &str, id: &str) -> Vec<u8> {
    [app.as_bytes(), &[0], id.as_bytes(), &[0]].concat()
}

/// Claims the key `idem` of `app` for the request with `fingerprint` (compare-and-swap, so of
/// two concurrent requests one runs and the other is told it is in flight).
pub fn begin(
    db: &sled::Db,
    app: &str,
    idem: &str,
    fingerprint: &str,
    ttl: i64,
    now: Timestamp,
) -> Result<Begin, StoreError> {
    let tree = db.open_tree(TREE)?;
    let key = record_key(app, idem);
    let now = now.unix_secs();
    loop {
        let current = tree.get(&key)?;
        if let Some(bytes) = &current {
            let rec: Record = decode(&key, bytes)?;
            let age = now - rec.created_unix;
            let same = rec.fingerprint == fingerprint;
            match &rec.answer {
                Some(answer) if age < ttl => {
                    return Ok(if same {
                        Begin::Replay(answer.clone())
                    } else {
                        Begin::Mismatch
                    });
                }
                None if age < PENDING_TIMEOUT_SECS => {
                    return Ok(if same {
                        Begin::InFlight
                    } else {
                        Begin::Mismatch
                    });
                }
                _ => {}
            }
        }
        let pending = encode(&Record {
            fingerprint: fingerprint.to_owned(),
            created_unix: now,
            answer: None,
        });
        index(db, app, idem, now)?;
        if tree.compare_and_swap(&key, current, Some(pending))?.is_ok() {
            return Ok(Begin::Started);
        }
    }
}

/// Removes the record under `key` and its hold entries.
fn remove_record(db: &sled::Db, key: &[u8]) -> Result<(), StoreError> {
    let Some(bytes) = db.open_tree(TREE)?.remove(key)? else {
        return Ok(());
    };
    let holds = db.open_tree(HOLDS)?;
    let held = decode::<Record>(key, &bytes)
        .ok()
        .and_then(|r| r.answer)
        .map(|a| a.holds)
        .unwrap_or_default();
    if let Some(split) = key.iter().position(|b| *b == 0) {
        let (app, idem) = (&key[..split], &key[split + 1..]);
        for id in held {
            holds.remove([app, &[0], id.as_bytes(), &[0], idem].concat())?;
        }
    }
    Ok(())
}

/// Whether the record under `key` (`bytes`) is `ttl` seconds old at `now` (unix seconds); an
/// unreadable one is.
fn expired(key: &[u8], bytes: &[u8], ttl: i64, now: i64) -> bool {
    decode::<Record>(key, bytes).map_or(true, |r| now - r.created_unix >= ttl)
}

/// Deletes records older than `ttl` seconds at `now`; returns how many went. Reads the expiry
/// entries up to the cut-off, one app after the other, and their records: nothing younger.
pub fn sweep(db: &sled::Db, ttl: i64, now: Timestamp) -> Result<usize, StoreError> {
    let (records, expiry) = (db.open_tree(TREE)?, db.open_tree(EXPIRY)?);
    let now = now.unix_secs();
    let cutoff = now - ttl;
    let mut removed = 0;
    let mut from = Vec::new();
    // Each round: the first entry at or after `from` names an app; its expired entries go; then
    // on to the next app (past every `app \0 ...` key).
    while let Some((first, _)) = expiry.range(from.as_slice()..).next().transpose()? {
        let Some(split) = first.iter().position(|b| *b == 0) else {
            break; // INDEXED, after every app
        };
        let app = &first[..split];
        let end = expiry_key(app, cutoff.saturating_add(1), b"");
        for kv in expiry.range(first.to_vec()..end) {
            let (entry, _) = kv?;
            let record_key = [app, &[0], entry.get(split + 9..).unwrap_or_default()].concat();
            if let Some(bytes) = records.get(&record_key)? {
                if expired(&record_key, &bytes, ttl, now) {
                    remove_record(db, &record_key)?;
                    removed += 1;
                }
            }
            expiry.remove(entry)?;
        }
        from = [app, &[1]].concat();
    }
    Ok(removed)
}

/// Indexes the records of a store from a version without [`EXPIRY`] (those expired at `now`
/// are removed instead), once. Start-up calls it before the first sweep; answers how many it
/// indexed.
pub fn index_once(db: &sled::Db, ttl: i64, now: Timestamp) -> Result<usize, StoreError> {
    let expiry = db.open_tree(EXPIRY)?;
    if expiry.contains_key(INDEXED)? {
        return Ok(0);
    }
    let now = now.unix_secs();
    let mut indexed = 0;
    for kv in db.open_tree(TREE)?.iter() {
        let (k, v) = kv?;
        let (Some(split), Ok(r)) = (k.iter().position(|b| *b == 0), decode::<Record>(&k, &v))
        else {
            remove_record(db, &k)?;
            continue;
        };
        if now - r.created_unix >= ttl {
            remove_record(db, &k)?;
        } else {
            expiry.insert(
                expiry_key(&k[..split], r.created_unix, &k[split + 1..]),
                &[],
            )?;
            indexed += 1;
        }
    }
    expiry.insert(INDEXED, &[])?;
    Ok(indexed)
}

/// Sweeps expired records every `every` for as long as the returned task runs (abort it
/// before the store shuts down: it holds a `Store` handle). Runs the sweep on a store thread,
/// at `clock`'s time.
pub fn spawn_sweeper(
    store: Store,
    ttl: i64,
    every: Duration,
    clock: Arc<dyn Clock>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut timer = tokio::time::interval(every);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        timer.tick().await;
        loop {
            timer.tick().await;
            let now = clock.now();
            match store.run(move |db| sweep(db, ttl, now)).await {
                Ok(0) => {}
                Ok(swept) => tracing::info!(swept, "expired idempotency records removed"),
                Err(e) => tracing::warn!(error = %e, "idempotency sweep failed"),
            }
        }
    })
}

/// Keeps the answer of the request that holds the key `idem` of `app`, for replay. The hold
/// entries are written first, so a concurrent `forget_holding` that misses the record itself
/// still finds them (the caller checks that the held records still exist afterwards).
pub fn finish(
    db: &sled::Db,
    app: &str,
    idem: &str,
    fingerprint: String,
    answer: StoredAnswer,
    now: Timestamp,
) -> Result<(), StoreError> {
    let key = record_key(app, idem);
    let holds = db.open_tree(HOLDS)?;
    for id in &answer.holds {
        holds.insert(
            [hold_prefix(app, id), idem.as_bytes().to_vec()].concat(),
            &key[..],
        )?;
    }
    let record = encode(&Record {
        fingerprint,
        created_unix: now.unix_secs(),
        answer: Some(answer),
    });
    index(db, app, idem, now.unix_secs())?;
    db.open_tree(TREE)?.insert(&key, record)?;
    db.flush()?;
    Ok(())
}

/// Frees the key `idem` of `app` after its request failed, so it can be retried.
pub fn abandon(db: &sled::Db, app: &str, idem: &str) -> Result<(), StoreError> {
    remove_record(db, &record_key(app, idem))
}

/// Forgets every kept answer that shows the record `id` of `app` (its erasure): a later
/// request with one of those keys runs again instead of replaying the erased data.
pub fn forget_holding(db: &sled::Db, app: &str, id: &str) -> Result<usize, StoreError> {
    let holds = db.open_tree(HOLDS)?;
    let mut forgotten = 0;
    for kv in holds.scan_prefix(hold_prefix(app, id)) {
        let (hold, record) = kv?;
        remove_record(db, &record)?;
        holds.remove(hold)?;
        forgotten += 1;
    }
    Ok(forgotten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn answer(holds: &[&str]) -> StoredAnswer {
        StoredAnswer {
            status: 201,
            location: None,
            data: serde_json::json!({"email": "a@b.co"}),
            holds: holds.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn forgetting_a_record_removes_every_answer_that_holds_it_and_only_those() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        for (idem, holds) in [
            ("k1", vec!["c1"]),
            ("k2", vec!["c1", "c2"]),
            ("k3", vec!["c3"]),
        ] {
            assert!(matches!(
                begin(&db, "app", idem, "fp", 60, Timestamp::t0()).unwrap(),
                Begin::Started
            ));
            finish(
                &db,
                "app",
                idem,
                "fp".into(),
                answer(&holds),
                Timestamp::t0(),
            )
            .unwrap();
        }
        assert_eq!(forget_holding(&db, "app", "c1").unwrap(), 2);
        assert!(matches!(
            begin(&db, "app", "k1", "fp", 60, Timestamp::t0()).unwrap(),
            Begin::Started
        ));
        assert!(matches!(
            begin(&db, "app", "k2", "fp", 60, Timestamp::t0()).unwrap(),
            Begin::Started
        ));
        assert!(matches!(
            begin(&db, "app", "k3", "fp", 60, Timestamp::t0()).unwrap(),
            Begin::Replay(_)
        ));
        // k2's other hold went with its record.
        assert_eq!(forget_holding(&db, "app", "c2").unwrap(), 0);
    }

    /// A record of `app` under `idem` kept at `at` (unix seconds).
    fn keep(db: &sled::Db, app: &str, idem: &str, at: i64) {
        let at = Timestamp::from_micros(at * 1_000_000);
        assert!(matches!(
            begin(db, app, idem, "fp", 60, at).unwrap(),
            Begin::Started
        ));
        finish(db, app, idem, "fp".into(), answer(&[]), at).unwrap();
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_micros(secs * 1_000_000)
    }

    /// The record keys left, and the expiry entries left (the marker aside).
    fn left(db: &sled::Db) -> (Vec<Vec<u8>>, usize) {
        let records = db.open_tree(TREE).unwrap().iter().keys();
        let records = records.map(|k| k.unwrap().to_vec()).collect();
        let expiry = db.open_tree(EXPIRY).unwrap();
        let entries = expiry
            .iter()
            .keys()
            .filter(|k| &**k.as_ref().unwrap() != INDEXED);
        (records, entries.count())
    }

    #[test]
    fn the_sweep_reads_the_expired_entries_not_every_record() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        assert_eq!(index_once(&db, 100, at(1_000)).unwrap(), 0);
        keep(&db, "app1", "old", 1_000);
        keep(&db, "app2", "old", 1_000);
        keep(&db, "app2", "young", 1_050);
        // A record with no entry (never written so since the index exists): a sweep that
        // walked the records would remove it.
        let stray = encode(&Record {
            fingerprint: "fp".into(),
            created_unix: 1_000,
            answer: None,
        });
        db.open_tree(TREE)
            .unwrap()
            .insert(record_key("app3", "stray"), stray)
            .unwrap();
        assert_eq!(
            sweep(&db, 100, at(1_099)).unwrap(),
            0,
            "nothing is 100 s old"
        );
        assert_eq!(sweep(&db, 100, at(1_100)).unwrap(), 2);
        let (records, entries) = left(&db);
        assert_eq!(
            records,
            [record_key("app2", "young"), record_key("app3", "stray")]
        );
        assert_eq!(entries, 1, "the young record's");
        assert_eq!(sweep(&db, 100, at(1_150)).unwrap(), 1);
        assert_eq!(left(&db), (vec![record_key("app3", "stray")], 0));
    }

    #[test]
    fn a_key_kept_again_outlives_its_first_entry_and_a_removed_record_leaves_none() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        keep(&db, "app", "k", 1_000);
        keep(&db, "app", "gone", 1_000);
        abandon(&db, "app", "gone").unwrap();
        // Expired at 1 100, then used again: a new record, a new entry.
        keep(&db, "app", "k", 1_120);
        assert_eq!(sweep(&db, 100, at(1_150)).unwrap(), 0);
        assert_eq!(left(&db), (vec![record_key("app", "k")], 1));
        assert_eq!(sweep(&db, 100, at(1_220)).unwrap(), 1);
        assert_eq!(left(&db), (vec![], 0));
    }

    #[test]
    fn a_store_of_an_earlier_version_is_indexed_once() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree(TREE).unwrap();
        for (idem, created) in [("old", 1_000), ("young", 1_090)] {
            let r = encode(&Record {
                fingerprint: "fp".into(),
                created_unix: created,
                answer: None,
            });
            tree.insert(record_key("app", idem), r).unwrap();
        }
        assert_eq!(index_once(&db, 100, at(1_100)).unwrap(), 1, "the young one");
        assert_eq!(left(&db), (vec![record_key("app", "young")], 1));
        assert_eq!(index_once(&db, 100, at(1_100)).unwrap(), 0, "once");
        assert_eq!(sweep(&db, 100, at(1_190)).unwrap(), 1);
        assert_eq!(left(&db), (vec![], 0));
    }

    #[tokio::test]
    async fn expired_records_are_swept_on_a_timer_while_the_store_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (store, threads) = Store::open(dir.path(), 1, 16, 8 << 20).unwrap();
        let db = store.db().get().unwrap();
        assert!(matches!(
            begin(&db, "app", "k", "fp", 1, Timestamp::t0()).unwrap(),
            Begin::Started
        ));
        finish(
            &db,
            "app",
            "k",
            "fp".into(),
            answer(&["c1"]),
            Timestamp::t0(),
        )
        .unwrap();
        // A second later on the sweeper's clock, the record is a second old: expired.
        let clock = Arc::new(ManualClock::at(Timestamp::t0().micros() + 1_000_000));
        let sweeper = spawn_sweeper(store.clone(), 1, Duration::from_millis(50), clock);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !db.open_tree(TREE).unwrap().is_empty() || !db.open_tree(HOLDS).unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the record was never swept"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sweeper.abort();
        let _ = sweeper.await;
        drop((store, db));
        threads.join();
    }
}
