//! `Idempotency-Key` on POST (api.md §2): the same key with the same request replays the stored
//! answer for 24 h; the same key with another request is 409 CONFLICT; a key whose first request
//! is still running is 409 too. Only successful answers are kept, so a failed request can be
//! retried with the same key.
//!
//! Records live in the `idempotency` tree under `appId \0 key`; the fingerprint is SHA-256 of
//! method, path and body.

use std::future::Future;

use actix_web::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api::StoredAnswer;
use crate::error::ApiError;
use crate::startup::AppState;
use crate::store::{decode, encode, StoreError};

const TREE: &str = "idempotency";
/// A pending record older than this is taken to be abandoned (its request died).
const PENDING_TIMEOUT_SECS: i64 = 60;

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    fingerprint: String,
    created_unix: i64,
    answer: Option<StoredAnswer>,
}

enum Begin {
    Started,
    Replay(StoredAnswer),
    Mismatch,
    InFlight,
}

fn begin(db: &sled::Db, key: &[u8], fingerprint: &str, ttl: i64) -> Result<Begin, StoreError> {
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

/// Runs `work` once per idempotency key (when the request has one).
pub async fn once<F, Fut>(
    state: &AppState,
    app_id: &str,
    req: &HttpRequest,
    body: &[u8],
    work: F,
) -> Result<HttpResponse, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<StoredAnswer, ApiError>>,
{
    let Some(raw) = req.headers().get("idempotency-key") else {
        return work().await.map(|a| a.respond());
    };
    let idem = raw
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            ApiError::field(
                "Idempotency-Key",
                "must be 1 to 255 printable ASCII characters",
            )
        })?;
    let mut h = Sha256::new();
    h.update(req.method().as_str());
    h.update([0]);
    h.update(req.path());
    h.update([0]);
    h.update(body);
    let fingerprint = hex::encode(h.finalize());
    let key = [app_id.as_bytes(), &[0], idem.as_bytes()].concat();
    let ttl = state.settings.api.idempotency_ttl_secs as i64;
    let (k, fp) = (key.clone(), fingerprint.clone());
    match state.store.run(move |db| begin(db, &k, &fp, ttl)).await? {
        Begin::Started => {}
        Begin::Replay(answer) => {
            let mut res = answer.respond();
            res.headers_mut().insert(
                actix_web::http::header::HeaderName::from_static("idempotent-replayed"),
                actix_web::http::header::HeaderValue::from_static("true"),
            );
            return Ok(res);
        }
        Begin::Mismatch => {
            return Err(ApiError::conflict(
                "this Idempotency-Key was used for a different request",
            ))
        }
        Begin::InFlight => {
            return Err(ApiError::conflict(
                "a request with this Idempotency-Key is still in progress",
            ))
        }
    }
    let result = work().await;
    let finished = match &result {
        Ok(answer) => {
            let record = encode(&Record {
                fingerprint,
                created_unix: chrono::Utc::now().timestamp(),
                answer: Some(answer.clone()),
            });
            state
                .store
                .run(move |db| {
                    db.open_tree(TREE)?.insert(key, record)?;
                    db.flush()?;
                    Ok(())
                })
                .await
        }
        Err(_) => {
            state
                .store
                .run(move |db| Ok(db.open_tree(TREE)?.remove(key).map(|_| ())?))
                .await
        }
    };
    if let Err(e) = finished {
        tracing::warn!(error = %e, "could not record the idempotency outcome");
    }
    result.map(|a| a.respond())
}
