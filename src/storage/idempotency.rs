//! Idempotency records: the stored side of `Idempotency-Key` (the HTTP side is
//! `api/idempotency.rs`). A record is pending while its first request runs, then holds the
//! answer to replay; records expire after the configured TTL and are swept on a timer.
//!
//! Records live in the `idempotency` tree under `appId \0 key`, with the request's fingerprint.
//! A kept answer names the records it shows (`StoredAnswer::holds`, e.g. the contacts it
//! created); tree `idempotency_holds` indexes them as `appId \0 recordId \0 key`, so erasing a
//! record forgets every answer that holds it (`forget_holding`): a replay never brings erased
//! personal data back.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{decode, encode, Store, StoreError};
use crate::clock::Clock;
use crate::ids::Timestamp;

pub const TREE: &str = "idempotency";
pub const HOLDS: &str = "idempotency_holds";
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

/// Deletes records older than `ttl` seconds at `now`; returns how many went.
pub fn sweep(db: &sled::Db, ttl: i64, now: Timestamp) -> Result<usize, StoreError> {
    let tree = db.open_tree(TREE)?;
    let now = now.unix_secs();
    let mut removed = 0;
    for kv in tree.iter() {
        let (k, v) = kv?;
        let expired = decode::<Record>(&k, &v)
            .map(|r| now - r.created_unix >= ttl)
            .unwrap_or(true);
        if expired {
            remove_record(db, &k)?;
            removed += 1;
        }
    }
    Ok(removed)
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
