//! Webhooks in sled: ONE tree, every key tagged then keyed by the app (24 characters), so an
//! app's deletion removes them (`deletion/sled.rs`, `Shape::Tagged`):
//!
//! - `e` app endpoint                 -> the endpoint with its secrets (JSON, [`EndpointRecord`])
//! - `d` app endpoint lane seq(u64 BE) -> a delivery waiting, without its body (JSON,
//!   [`Delivery`]: event, attempts, due)
//! - `b` app endpoint lane seq(u64 BE) -> that delivery's body (the bytes sent), written and
//!   removed with it ([`put_delivery`], [`remove_delivery`]). Apart because sled keeps in
//!   memory every page a scan reads: what walks the `d` keys (a give-up, an erasure) reads
//!   small records (about 250 bytes) however big the bodies are.
//! - `n` app endpoint                 -> how many deliveries wait for it (u64 BE), kept in the
//!   same transaction as each delivery written or removed ([`add_pending`]): the pending
//!   gauge and counts read these, never walk. `v/counts` marks a database counted so
//!   (one from an earlier version is counted once at start-up, [`count_pending_once`]).
//! - `l` app endpoint seq(u64 BE)      -> a logged attempt (JSON, [`AttemptRecord`]; at most
//!   `webhooks.log_per_endpoint` per endpoint, trimmed on insert)
//!
//! `seq` is sled's `generate_id` + 1: a delivery's is its change's queue sequence (a redeliver
//! takes a new one), so a lane's keys sort in the order of the changes. The service functions
//! here are what the admin API and the dashboard share; the engine's own
//! (fan-out, lane heads, outcomes) are in `outbox.rs`.

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionResult, TransactionalTree};

use super::model::{
    Attempt, AttemptRecord, AttemptTrigger, Endpoint, EndpointPatch, EndpointRecord,
    EndpointStatus, Redelivery, Rotated, SigningSecret,
};
use crate::ids::{self, Timestamp};
use crate::storage::changes::{self, Change};
use crate::storage::{decode, encode, StoreError};
use crate::validation::FieldError;

/// The tree of endpoints, deliveries and the attempts log.
pub const TREE: &str = "webhooks";

pub const ENDPOINT: u8 = b'e';
pub const DELIVERY: u8 = b'd';
pub const BODY: u8 = b'b';
pub const COUNT: u8 = b'n';
/// Present once every waiting delivery is counted under [`COUNT`].
const COUNTED: &[u8] = b"v/counts";
pub const LOG: u8 = b'l';

#[derive(Debug)]
pub enum WebhookError {
    NotFound(&'static str),
    Invalid(Vec<FieldError>),
    /// 409: too many endpoints.
    Conflict(String),
    Store(StoreError),
}

crate::storage::store_error!(WebhookError);

/// A delivery waiting in an endpoint's lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub subject: String,
    /// The request body, fixed at fan-out. Stored under its own key ([`BODY`]); a record
    /// written before bodies were kept apart still holds it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (µs).
    pub due: i64,
    /// `event` or `redeliver`.
    pub trigger: AttemptTrigger,
}

/// `tag app endpoint`.
pub fn prefix(tag: u8, app: &str, endpoint: &str) -> Vec<u8> {
    [&[tag], app.as_bytes(), endpoint.as_bytes()].concat()
}

pub fn endpoint_key(app: &str, id: &str) -> Vec<u8> {
    prefix(ENDPOINT, app, id)
}

pub fn delivery_key(app: &str, endpoint: &str, lane: u8, seq: u64) -> Vec<u8> {
    [
        &prefix(DELIVERY, app, endpoint)[..],
        &[lane],
        &seq.to_be_bytes(),
    ]
    .concat()
}

/// The key of the body of the delivery at `delivery_key`.
pub fn body_key(delivery_key: &[u8]) -> Vec<u8> {
    let mut k = delivery_key.to_vec();
    if let Some(tag) = k.first_mut() {
        *tag = BODY;
    }
    k
}

/// The length of a `tag app endpoint` prefix (where a delivery key's lane byte starts).
pub const ENDPOINT_PREFIX: usize = 1 + 24 + 24;

/// The key of the count of the endpoint of the delivery at `delivery_key`.
fn count_key(delivery_key: &[u8]) -> Vec<u8> {
    let endpoint = delivery_key.get(1..ENDPOINT_PREFIX).unwrap_or_default();
    [&[COUNT], endpoint].concat()
}

fn read_count(v: Option<sled::IVec>) -> u64 {
    v.and_then(|v| v.as_ref().try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Adds `delta` to the count of the endpoint of the delivery at `key`, inside a transaction
/// over the webhooks' tree (a count of 0 is removed).
pub fn add_pending<E>(
    tx: &TransactionalTree,
    key: &[u8],
    delta: i64,
) -> ConflictableTransactionResult<(), E> {
    let k = count_key(key);
    let n = read_count(tx.get(&k)?).saturating_add_signed(delta);
    if n == 0 {
        tx.remove(k)?;
    } else {
        tx.insert(k, &n.to_be_bytes())?;
    }
    Ok(())
}

/// What storing `d` at `key` writes: the delivery without its body, then the body. Written
/// together, in one transaction with its count ([`put_delivery`], the fan-out).
pub fn delivery_writes(key: Vec<u8>, mut d: Delivery) -> [(Vec<u8>, Vec<u8>); 2] {
    let body = std::mem::take(&mut d.body).into_bytes();
    let body_key = body_key(&key);
    [(key, encode(&d)), (body_key, body)]
}

/// Stores `d` at `key`: a new delivery (counted), or when `replace`, only if one is still
/// there (a retry: same count). Answers whether it wrote.
pub fn put_delivery(
    t: &sled::Tree,
    key: Vec<u8>,
    d: Delivery,
    replace: bool,
) -> Result<bool, StoreError> {
    let writes = delivery_writes(key, d);
    let key = &writes[0].0;
    Ok(t.transaction(|tx| {
        let there = tx.get(key)?.is_some();
        if replace && !there {
            return Ok(false);
        }
        for (k, v) in &writes {
            tx.insert(&k[..], &v[..])?;
        }
        if !there {
            add_pending::<StoreError>(tx, key, 1)?;
        }
        Ok(true)
    })?)
}

/// Removes the delivery at `key` with its body and its count; answers whether it was there.
pub fn remove_delivery(t: &sled::Tree, key: &[u8]) -> Result<bool, StoreError> {
    Ok(t.transaction(|tx| {
        if tx.remove(key)?.is_none() {
            return Ok(false);
        }
        tx.remove(body_key(key))?;
        add_pending::<StoreError>(tx, key, -1)?;
        Ok(true)
    })?)
}

/// How many deliveries wait under `prefix` (`n`, then an app, then maybe an endpoint).
fn sum_counts(t: &sled::Tree, prefix: &[u8]) -> Result<u64, StoreError> {
    let mut n = 0u64;
    for v in t.scan_prefix(prefix).values() {
        n = n.saturating_add(read_count(Some(v?)));
    }
    Ok(n)
}

/// How many deliveries wait, over every endpoint.
pub fn pending_total(db: &sled::Db) -> Result<u64, StoreError> {
    sum_counts(&tree(db)?, &[COUNT])
}

/// Counts every waiting delivery under [`COUNT`], once: a database from a version that did not
/// keep counts. Start-up calls it before anything else touches the webhooks; answers how many
/// deliveries it counted (0 when already counted).
pub fn count_pending_once(db: &sled::Db) -> Result<u64, StoreError> {
    let t = tree(db)?;
    if t.get(COUNTED)?.is_some() {
        return Ok(0);
    }
    let mut counts: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
    for k in t.scan_prefix([DELIVERY]).keys() {
        let k = k?;
        if k.len() > ENDPOINT_PREFIX {
            *counts.entry(count_key(&k)).or_default() += 1;
        }
    }
    let mut batch = sled::Batch::default();
    for (k, n) in &counts {
        batch.insert(&k[..], &n.to_be_bytes());
    }
    batch.insert(COUNTED, &b"1"[..]);
    t.apply_batch(batch)?;
    db.flush()?;
    Ok(counts.values().sum())
}

/// The delivery `d` read at `key`, with its body (`None`: the body is missing).
pub fn with_body(
    t: &sled::Tree,
    key: &[u8],
    mut d: Delivery,
) -> Result<Option<Delivery>, StoreError> {
    if d.body.is_empty() {
        let Some(body) = t.get(body_key(key))? else {
            return Ok(None);
        };
        d.body = String::from_utf8_lossy(&body).into_owned();
    }
    Ok(Some(d))
}

pub fn log_key(app: &str, endpoint: &str, seq: u64) -> Vec<u8> {
    [&prefix(LOG, app, endpoint)[..], &seq.to_be_bytes()].concat()
}

/// The lane of `subject` among `lanes`: a stable hash (keys keep their lane across restarts).
pub fn lane(subject: &str, lanes: u8) -> u8 {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x7472_6962, 0x7765_6268);
    h.write(subject.as_bytes());
    (h.finish() % u64::from(lanes.max(1))) as u8
}

/// An attempt's id: its log sequence in 16 hex characters.
pub fn attempt_id(seq: u64) -> String {
    format!("{seq:016x}")
}

pub fn parse_attempt_id(id: &str) -> Option<u64> {
    (id.len() == 16)
        .then(|| u64::from_str_radix(id, 16).ok())
        .flatten()
}

fn tree(db: &sled::Db) -> Result<sled::Tree, StoreError> {
    Ok(db.open_tree(TREE)?)
}

/// How many keys start with `prefix`.
fn count(tree: &sled::Tree, prefix: &[u8]) -> Result<u64, StoreError> {
    let mut n = 0;
    for k in tree.scan_prefix(prefix).keys() {
        k?;
        n += 1;
    }
    Ok(n)
}

/// Reads an endpoint record.
pub fn load(db: &sled::Db, app: &str, id: &str) -> Result<Option<EndpointRecord>, StoreError> {
    if !ids::is_object_id(id) {
        return Ok(None);
    }
    let key = endpoint_key(app, id);
    match tree(db)?.get(&key)? {
        Some(v) => Ok(Some(decode(&key, &v)?)),
        None => Ok(None),
    }
}

/// The endpoint as shown, with its deliveries waiting.
fn view(tree: &sled::Tree, app: &str, r: EndpointRecord) -> Result<Endpoint, StoreError> {
    let mut e = r.endpoint;
    e.pending = sum_counts(tree, &prefix(COUNT, app, &e.id))?;
    Ok(e)
}

/// Every endpoint record of `app`, oldest first.
pub fn records(db: &sled::Db, app: &str) -> Result<Vec<EndpointRecord>, StoreError> {
    crate::storage::decode_all(&tree(db)?, &[&[ENDPOINT], app.as_bytes()].concat())
}

/// Every endpoint of `app`, oldest first (ids sort by creation), with their pending counts.
pub fn list(db: &sled::Db, app: &str) -> Result<Vec<Endpoint>, StoreError> {
    let t = tree(db)?;
    records(db, app)?
        .into_iter()
        .map(|r| view(&t, app, r))
        .collect()
}

/// One endpoint of `app`.
pub fn get(db: &sled::Db, app: &str, id: &str) -> Result<Option<Endpoint>, StoreError> {
    match load(db, app, id)? {
        Some(r) => Ok(Some(view(&tree(db)?, app, r)?)),
        None => Ok(None),
    }
}

/// Stores a new endpoint made at `now` from a create body; at most `max` per app. Answers it
/// with its secret (shown only now).
pub fn create(
    db: &sled::Db,
    app: &str,
    p: &EndpointPatch,
    max: usize,
    now: Timestamp,
) -> Result<(Endpoint, String), WebhookError> {
    let t = tree(db)?;
    let have = count(&t, &[&[ENDPOINT], app.as_bytes()].concat())?;
    if have >= max as u64 {
        return Err(WebhookError::Conflict(format!(
            "an app has at most {max} webhook endpoints (webhooks.max_endpoints_per_app)"
        )));
    }
    let record = p.create(now);
    t.insert(endpoint_key(app, &record.endpoint.id), encode(&record))?;
    db.flush()?;
    let secret = record.secrets[0].secret.clone();
    Ok((view(&t, app, record)?, secret))
}

/// Changes an endpoint with `f` in a compare-and-swap loop; answers it as shown.
pub fn change(
    db: &sled::Db,
    app: &str,
    id: &str,
    mut f: impl FnMut(&mut EndpointRecord),
) -> Result<EndpointRecord, WebhookError> {
    let t = tree(db)?;
    let key = endpoint_key(app, id);
    loop {
        let Some(old) = (ids::is_object_id(id).then(|| t.get(&key)).transpose()?).flatten() else {
            return Err(WebhookError::NotFound("webhook"));
        };
        let mut record: EndpointRecord = decode(&key, &old)?;
        f(&mut record);
        if t.compare_and_swap(&key, Some(&old), Some(encode(&record)))?
            .is_ok()
        {
            db.flush()?;
            return Ok(record);
        }
    }
}

/// Applies a merge patch made at `now`.
pub fn update(
    db: &sled::Db,
    app: &str,
    id: &str,
    p: &EndpointPatch,
    now: Timestamp,
) -> Result<Endpoint, WebhookError> {
    let r = change(db, app, id, |r| p.apply(&mut r.endpoint, now))?;
    Ok(view(&tree(db)?, app, r)?)
}

/// Removes every key under `prefix` (in batches).
fn remove_prefix(tree: &sled::Tree, prefix: &[u8]) -> Result<u64, StoreError> {
    let mut removed = 0;
    loop {
        let keys: Vec<_> = tree
            .scan_prefix(prefix)
            .keys()
            .take(1000)
            .collect::<Result<_, _>>()?;
        if keys.is_empty() {
            return Ok(removed);
        }
        let mut batch = sled::Batch::default();
        for k in &keys {
            batch.remove(k.clone());
        }
        tree.apply_batch(batch)?;
        removed += keys.len() as u64;
    }
}

/// Deletes an endpoint with its waiting deliveries and its log.
pub fn delete(db: &sled::Db, app: &str, id: &str) -> Result<(), WebhookError> {
    let t = tree(db)?;
    if load(db, app, id)?.is_none() {
        return Err(WebhookError::NotFound("webhook"));
    }
    t.remove(endpoint_key(app, id))?;
    remove_prefix(&t, &prefix(DELIVERY, app, id))?;
    remove_prefix(&t, &prefix(BODY, app, id))?;
    t.remove(prefix(COUNT, app, id))?;
    remove_prefix(&t, &prefix(LOG, app, id))?;
    db.flush()?;
    Ok(())
}

/// A new secret that signs from `now`; the previous ones keep signing for `overlap_secs` (0:
/// they stop at once).
pub fn rotate_secret(
    db: &sled::Db,
    app: &str,
    id: &str,
    overlap_secs: i64,
    now: Timestamp,
) -> Result<Rotated, WebhookError> {
    let fresh = SigningSecret::generate();
    let until = Timestamp::from_micros(now.micros() + overlap_secs * 1_000_000);
    let r = change(db, app, id, |r| {
        let mut kept = vec![fresh.clone()];
        for mut s in r.secrets.drain(..).filter(|s| s.live(now)) {
            if overlap_secs > 0 {
                s.expires_at = Some(s.expires_at.map_or(until, |at| at.min(until)));
                kept.push(s);
            }
        }
        r.secrets = kept;
        r.endpoint.updated_at = now;
    })?;
    Ok(Rotated {
        secret: fresh.secret,
        previous_secret_expires_at: r.secrets.get(1).and_then(|s| s.expires_at),
    })
}

/// The logged attempts of an endpoint, oldest first, with their sequence (`None`: no such
/// endpoint).
pub fn attempts(
    db: &sled::Db,
    app: &str,
    id: &str,
) -> Result<Option<Vec<(u64, Attempt)>>, StoreError> {
    if load(db, app, id)?.is_none() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for kv in tree(db)?.scan_prefix(prefix(LOG, app, id)) {
        let (k, v) = kv?;
        let seq = u64::from_be_bytes(k[k.len() - 8..].try_into().unwrap_or_default());
        out.push((seq, decode::<AttemptRecord>(&k, &v)?.attempt));
    }
    Ok(Some(out))
}

/// Appends an attempt to an endpoint's log, trimmed to the newest `keep`; answers it with its id.
pub fn log_attempt(
    db: &sled::Db,
    app: &str,
    endpoint: &str,
    mut record: AttemptRecord,
    keep: usize,
) -> Result<Attempt, StoreError> {
    let t = tree(db)?;
    let seq = db.generate_id()? + 1;
    record.attempt.id = attempt_id(seq);
    t.insert(log_key(app, endpoint, seq), encode(&record))?;
    let p = prefix(LOG, app, endpoint);
    let n = count(&t, &p)? as usize;
    if n > keep {
        let old: Vec<_> = t
            .scan_prefix(&p)
            .keys()
            .take(n - keep)
            .collect::<Result<_, _>>()?;
        for k in old {
            t.remove(k)?;
        }
    }
    Ok(record.attempt)
}

/// Queues the logged event of attempt `attempt` again for its endpoint (same `webhook-id`, same
/// body), due now, at the end of its subject's lane.
pub fn redeliver(
    db: &sled::Db,
    app: &str,
    id: &str,
    attempt: &str,
    lanes: u8,
    now: Timestamp,
) -> Result<Redelivery, WebhookError> {
    let record = load(db, app, id)?.ok_or(WebhookError::NotFound("webhook"))?;
    if record.endpoint.status == EndpointStatus::Disabled {
        return Err(WebhookError::Conflict(
            "the endpoint is disabled: re-enable it (status active) first".into(),
        ));
    }
    let key = parse_attempt_id(attempt).map(|seq| log_key(app, id, seq));
    let t = tree(db)?;
    let Some((key, v)) = key.and_then(|k| t.get(&k).transpose().map(|v| (k, v))) else {
        return Err(WebhookError::NotFound("attempt"));
    };
    let logged: AttemptRecord = decode(&key, &v?)?;
    let delivery = Delivery {
        event_id: logged.attempt.event_id.clone(),
        kind: logged.attempt.kind.clone(),
        subject: logged.subject.clone(),
        body: logged.body,
        attempts: 0,
        due: now.micros(),
        trigger: AttemptTrigger::Redeliver,
    };
    let seq = db.generate_id()? + 1;
    let lane = lane(&delivery.subject, lanes);
    put_delivery(&t, delivery_key(app, id, lane, seq), delivery, false)?;
    db.flush()?;
    Ok(Redelivery {
        webhook_id: record.endpoint.id,
        event_id: logged.attempt.event_id,
        queued: true,
    })
}

/// What of `app` the webhooks have yet to send: its deliveries waiting plus its changes not
/// yet fanned out (the app's deletion waits for, or reports, these).
pub fn pending_of_app(db: &sled::Db, app: &str) -> Result<u64, StoreError> {
    let waiting = sum_counts(&tree(db)?, &[&[COUNT], app.as_bytes()].concat())?;
    let changes_left = changes::CHANGES.count(db, |item| {
        Change::decode(&item.payload).is_some_and(|c| c.app_id == app)
    })? as u64;
    Ok(waiting + changes_left)
}

/// Drops what the webhooks still hold of `app` that names one of `needles` (an erased
/// person's ids and e-mail, matched as JSON strings in the event's body): waiting deliveries,
/// logged attempts and changes not yet fanned out. Answers how many went.
pub fn forget_mentions(db: &sled::Db, app: &str, needles: &[&str]) -> Result<u64, StoreError> {
    let quoted: Vec<String> = needles
        .iter()
        .map(|n| serde_json::Value::from(*n).to_string())
        .collect();
    let names = |text: &str| quoted.iter().any(|q| text.contains(q.as_str()));
    if quoted.is_empty() {
        return Ok(0);
    }
    let t = tree(db)?;
    let mut gone = 0;
    for kv in t.scan_prefix([&[DELIVERY], app.as_bytes()].concat()) {
        let (k, v) = kv?;
        let body = with_body(&t, &k, decode(&k, &v)?)?.map(|d| d.body);
        if body.is_some_and(|b| names(&b)) && remove_delivery(&t, &k)? {
            gone += 1;
        }
    }
    for kv in t.scan_prefix([&[LOG], app.as_bytes()].concat()) {
        let (k, v) = kv?;
        let body = decode::<AttemptRecord>(&k, &v)?.body;
        if names(&body) && t.compare_and_swap(&k, Some(&v), None::<&[u8]>)?.is_ok() {
            gone += 1;
        }
    }
    gone += changes::CHANGES.edit(db, |item| {
        let change = Change::decode(&item.payload);
        let named = change
            .is_some_and(|c| c.app_id == app && names(&String::from_utf8_lossy(&item.payload)));
        if named {
            crate::storage::queue::Edit::Drop
        } else {
            crate::storage::queue::Edit::Keep
        }
    })? as u64;
    Ok(gone)
}

/// How many endpoints are disabled, over every app.
pub fn disabled_count(db: &sled::Db) -> Result<u64, StoreError> {
    let mut n = 0;
    for kv in tree(db)?.scan_prefix([ENDPOINT]) {
        let (k, v) = kv?;
        let r: EndpointRecord = decode(&k, &v)?;
        n += u64::from(r.endpoint.status == EndpointStatus::Disabled);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::Mode;
    use serde_json::json;

    pub const APP: &str = "0123456789abcdef01234567";
    pub const OTHER: &str = "0123456789abcdef01234568";

    fn db() -> sled::Db {
        sled::Config::new().temporary(true).open().unwrap()
    }

    fn body(v: serde_json::Value) -> EndpointPatch {
        EndpointPatch::parse(v.as_object().unwrap(), Mode::Create).unwrap()
    }

    #[test]
    fn endpoints_are_per_app_and_bounded() {
        let db = db();
        let t = Timestamp::t0();
        let p = body(json!({"url": "https://x.example/", "eventTypes": ["*"]}));
        let (a, secret) = create(&db, APP, &p, 2, t).unwrap();
        assert!(secret.starts_with("whsec_"));
        create(&db, APP, &p, 2, t).unwrap();
        assert!(matches!(
            create(&db, APP, &p, 2, t),
            Err(WebhookError::Conflict(_))
        ));
        assert_eq!(list(&db, APP).unwrap().len(), 2);
        assert!(
            get(&db, OTHER, &a.id).unwrap().is_none(),
            "another app's id"
        );
        assert!(matches!(
            delete(&db, OTHER, &a.id),
            Err(WebhookError::NotFound(_))
        ));
        let paused = EndpointPatch {
            status: Some(EndpointStatus::Paused),
            ..EndpointPatch::default()
        };
        assert_eq!(
            update(&db, APP, &a.id, &paused, t).unwrap().status,
            EndpointStatus::Paused
        );
        delete(&db, APP, &a.id).unwrap();
        assert_eq!(list(&db, APP).unwrap().len(), 1);
    }

    #[test]
    fn a_rotation_keeps_the_previous_secret_signing_for_the_overlap() {
        let db = db();
        let t = Timestamp::t0();
        let p = body(json!({"url": "https://x.example/", "eventTypes": ["*"]}));
        let (e, first) = create(&db, APP, &p, 20, t).unwrap();
        let r = rotate_secret(&db, APP, &e.id, 60, t).unwrap();
        let until = Timestamp::from_micros(t.micros() + 60_000_000);
        assert_eq!(r.previous_secret_expires_at, Some(until));
        let rec = load(&db, APP, &e.id).unwrap().unwrap();
        assert_eq!(rec.live_secrets(t), [r.secret.as_str(), first.as_str()]);
        assert_eq!(rec.live_secrets(until), [r.secret.as_str()]);
        let again = rotate_secret(&db, APP, &e.id, 0, t).unwrap();
        assert_eq!(again.previous_secret_expires_at, None);
        let rec = load(&db, APP, &e.id).unwrap().unwrap();
        assert_eq!(rec.live_secrets(t), [again.secret.as_str()]);
    }

    fn logged(n: u32) -> AttemptRecord {
        AttemptRecord {
            attempt: Attempt {
                id: String::new(),
                event_id: format!("evt_{n}"),
                kind: "idea.created".into(),
                attempt: 1,
                at: Timestamp::t0(),
                status: Some(500),
                error: None,
                latency_ms: 1,
                response: String::new(),
                trigger: AttemptTrigger::Event,
            },
            subject: "s".into(),
            body: format!("{{\"n\":{n}}}"),
        }
    }

    #[test]
    fn an_erased_persons_events_leave_the_deliveries_the_log_and_the_queue() {
        let db = db();
        let t = Timestamp::t0();
        let p = body(json!({"url": "https://x.example/", "eventTypes": ["*"]}));
        let (e, _) = create(&db, APP, &p, 20, t).unwrap();
        let record = |app: &str, email: &str| {
            let data = json!({"contact": {"id": "c", "email": email}});
            let c = Change::new(
                "contact.created",
                app,
                "c",
                t,
                &changes::Actor::System,
                data,
            );
            changes::CHANGES
                .push(&db, changes::KIND, 0, &c.encode())
                .unwrap();
        };
        record(APP, "ann@example.com");
        record(APP, "bob@example.com");
        crate::webhooks::outbox::fan_out(&db, 4).unwrap();
        record(APP, "ann@example.com");
        record(OTHER, "ann@example.com");
        let mut ann = logged(1);
        ann.body = json!({"data": {"email": "ann@example.com"}}).to_string();
        log_attempt(&db, APP, &e.id, ann, 5).unwrap();
        log_attempt(&db, APP, &e.id, logged(2), 5).unwrap();
        assert_eq!(pending_of_app(&db, APP).unwrap(), 3);
        // "ann@example.co" is not "ann@example.com": whole JSON strings only.
        let gone = forget_mentions(&db, APP, &["ann@example.co"]).unwrap();
        assert_eq!(gone, 0);
        let gone = forget_mentions(&db, APP, &["ann@example.com"]).unwrap();
        assert_eq!(gone, 3, "a delivery, a logged attempt, a queued change");
        assert_eq!(pending_of_app(&db, APP).unwrap(), 1, "bob's delivery stays");
        let kept = attempts(&db, APP, &e.id).unwrap().unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].1.event_id, "evt_2");
        assert_eq!(changes::CHANGES.stats(&db).unwrap().len, 1, "another app's");
    }

    #[test]
    fn the_log_keeps_the_newest_attempts_and_a_redeliver_queues_the_logged_body() {
        let db = db();
        let t = Timestamp::t0();
        let p = body(json!({"url": "https://x.example/", "eventTypes": ["*"]}));
        let (e, _) = create(&db, APP, &p, 20, t).unwrap();
        for n in 0..7 {
            log_attempt(&db, APP, &e.id, logged(n), 5).unwrap();
        }
        let kept = attempts(&db, APP, &e.id).unwrap().unwrap();
        let events: Vec<&str> = kept.iter().map(|(_, a)| a.event_id.as_str()).collect();
        assert_eq!(events, ["evt_2", "evt_3", "evt_4", "evt_5", "evt_6"]);
        assert!(attempts(&db, OTHER, &e.id).unwrap().is_none());
        let last = &kept[4].1.id;
        let r = redeliver(&db, APP, &e.id, last, 4, t).unwrap();
        assert_eq!(r.event_id, "evt_6");
        assert!(matches!(
            redeliver(&db, APP, &e.id, "0000000000000000", 4, t),
            Err(WebhookError::NotFound("attempt"))
        ));
        assert_eq!(get(&db, APP, &e.id).unwrap().unwrap().pending, 1);
        assert_eq!(pending_of_app(&db, APP).unwrap(), 1);
        assert_eq!(pending_of_app(&db, OTHER).unwrap(), 0);
        let t = db.open_tree(TREE).unwrap();
        let d: Vec<Delivery> =
            crate::storage::decode_all(&t, &prefix(DELIVERY, APP, &e.id)).unwrap();
        assert_eq!(d[0].body, "", "the body is kept apart");
        let key = t
            .scan_prefix(prefix(DELIVERY, APP, &e.id))
            .keys()
            .next()
            .unwrap()
            .unwrap();
        let d = with_body(&t, &key, d[0].clone()).unwrap().unwrap();
        assert_eq!(d.body, "{\"n\":6}");
        assert_eq!(d.trigger, AttemptTrigger::Redeliver);
        delete(&db, APP, &e.id).unwrap();
        assert_eq!(pending_of_app(&db, APP).unwrap(), 0);
        assert!(db.open_tree(TREE).unwrap().is_empty());
    }

    #[test]
    fn changes_not_yet_fanned_out_count_as_pending_for_their_app() {
        let db = db();
        let c = Change::new(
            "idea.created",
            APP,
            "s",
            Timestamp::t0(),
            &changes::Actor::System,
            json!({}),
        );
        changes::CHANGES
            .push(&db, changes::KIND, 0, &c.encode())
            .unwrap();
        assert_eq!(pending_of_app(&db, APP).unwrap(), 1);
        assert_eq!(pending_of_app(&db, OTHER).unwrap(), 0);
    }
}
