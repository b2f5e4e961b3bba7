//! Idempotency records: the stored side of `Idempotency-Key` (the HTTP side is
//! `api/idempotency.rs`). A record is pending while its first request runs, then holds the
//! answer to replay; records expire after the configured TTL.
//!
//! Records live in the `idempotency` tree under `appId \0 key`, with the request's fingerprint.

use serde::{Deserialize, Serialize};

use super::{decode, encode, StoreError};

const TREE: &str = "idempotency";
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

/// Claims `key` for the request with `fingerprint` (compare-and-swap, so of two concurrent
/// requests one runs and the other is told it is in flight).
pub fn begin(db: &sled::Db, key: &[u8], fingerprint: &str, ttl: i64) -> Result<Begin, StoreError> {
    let tree = db.open_tree(TREE)?;
    let now = chrono::Utc::now().timestamp();
    loop {
        let current = tree.get(key)?;
        if let Some(bytes) = &current {
            let rec: Record = decode(key, bytes)?;
            let age = now - rec.created_unix;
            match &rec.answer {
                Some(answer) if age < ttl => {
                    return Ok(if rec.fingerprint == fingerprint {
                        Begin::Replay(answer.clone())
                    } else {
                        Begin::Mismatch
                    });
                }
                None if age < PENDING_TIMEOUT_SECS => {
                    return Ok(if rec.fingerprint == fingerprint {
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
        if tree.compare_and_swap(key, current, Some(pending))?.is_ok() {
            return Ok(Begin::Started);
        }
    }
}

/// Deletes records older than `ttl` seconds; returns how many went.
pub fn sweep(db: &sled::Db, ttl: i64) -> Result<usize, StoreError> {
    let tree = db.open_tree(TREE)?;
    let now = chrono::Utc::now().timestamp();
    let mut removed = 0;
    for kv in tree.iter() {
        let (k, v) = kv?;
        let expired = decode::<Record>(&k, &v)
            .map(|r| now - r.created_unix >= ttl)
            .unwrap_or(true);
        if expired {
            tree.remove(k)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Keeps the answer of the request that holds `key`, for replay.
pub fn finish(
    db: &sled::Db,
    key: &[u8],
    fingerprint: String,
    answer: StoredAnswer,
) -> Result<(), StoreError> {
    let record = encode(&Record {
        fingerprint,
        created_unix: chrono::Utc::now().timestamp(),
        answer: Some(answer),
    });
    db.open_tree(TREE)?.insert(key, record)?;
    db.flush()?;
    Ok(())
}

/// Frees `key` after its request failed, so it can be retried.
pub fn abandon(db: &sled::Db, key: &[u8]) -> Result<(), StoreError> {
    db.open_tree(TREE)?.remove(key)?;
    Ok(())
}
