//! `Idempotency-Key` on POST (api.md §2): the same key with the same request replays the stored
//! answer for 24 h; the same key with another request is 409 CONFLICT; a key whose first request
//! is still running is 409 too. Only successful answers are kept, so a failed request can be
//! retried with the same key. The fingerprint is SHA-256 of method, path and the body's canonical
//! JSON (object keys sorted, no insignificant whitespace), so the same JSON sent with other
//! spacing or key order is the same request; the records are kept by `storage::idempotency`.
//!
//! Erasure: an answer names the records it shows (`StoredAnswer::holds`); deleting one of them
//! forgets the answer (`storage::idempotency::forget_holding`), and an answer whose records
//! were deleted while its request ran is forgotten at once (checked with `alive`), so a replay
//! never brings erased data back. A repeat of the request after that runs again.

use std::future::Future;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use crate::state::AppState;
use crate::storage::idempotency::{self as records, Begin, StoredAnswer};
use crate::storage::StoreError;

/// Whether the record `id` of app `app` still exists (the store's view).
pub type Alive = fn(&sled::Db, &str, &str) -> Result<bool, StoreError>;

/// Runs `work` once per idempotency key (when the request has one).
pub async fn once<F, Fut>(
    state: &AppState,
    app_id: &str,
    req: &HttpRequest,
    body: &Map<String, Value>,
    alive: Alive,
    work: F,
) -> Result<HttpResponse, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<StoredAnswer, ApiError>>,
{
    let Some(raw) = req.headers().get("idempotency-key") else {
        return work().await.map(|a| super::replay(&a));
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
    h.update(canonical(&Value::Object(body.clone())));
    let fingerprint = hex::encode(h.finalize());
    let (ttl, now) = (state.settings.api.idempotency_ttl_secs as i64, state.now());
    let (app, idem) = (app_id.to_owned(), idem.to_owned());
    let (a, k, fp) = (app.clone(), idem.clone(), fingerprint.clone());
    match state
        .store
        .run(move |db| records::begin(db, &a, &k, &fp, ttl, now))
        .await?
    {
        Begin::Started => {}
        Begin::Replay(answer) => {
            let mut res = super::replay(&answer);
            res.headers_mut().insert(
                HeaderName::from_static("idempotent-replayed"),
                HeaderValue::from_static("true"),
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
            let (answer, now) = (answer.clone(), state.now());
            state
                .store
                .run(move |db| keep(db, (&app, &idem), fingerprint, answer, alive, now))
                .await
        }
        Err(_) => {
            state
                .store
                .run(move |db| records::abandon(db, &app, &idem))
                .await
        }
    };
    if let Err(e) = finished {
        tracing::warn!(error = %e, "could not record the idempotency outcome");
    }
    result.map(|a| super::replay(&a))
}

/// Keeps `answer` for replay, unless a record it shows was deleted meanwhile.
fn keep(
    db: &sled::Db,
    (app, idem): (&str, &str),
    fingerprint: String,
    answer: StoredAnswer,
    alive: Alive,
    now: crate::ids::Timestamp,
) -> Result<(), StoreError> {
    let held = answer.holds.clone();
    records::finish(db, app, idem, fingerprint, answer, now)?;
    for id in held {
        if !alive(db, app, &id)? {
            records::forget_holding(db, app, &id)?;
        }
    }
    Ok(())
}

/// The canonical text of a JSON value: object keys sorted (by their UTF-8 bytes), no
/// whitespace, strings and numbers as serde_json writes them.
pub fn canonical(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<_> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(v, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(v, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn canonical_json_ignores_key_order_and_whitespace_but_not_values() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": "é"}], "a": null}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str("{\"a\":null,\n \"b\":[1,{\"x\":\"\\u00e9\",\"y\":2}]}").unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(canonical(&a), r#"{"a":null,"b":[1,{"x":"é","y":2}]}"#);
        let c: serde_json::Value =
            serde_json::from_str(r#"{"a": null, "b": [{"x": "é", "y": 2}, 1]}"#).unwrap();
        assert_ne!(canonical(&a), canonical(&c));
    }
}
