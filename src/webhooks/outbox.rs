//! The engine's side of sled: the fan-out (changes -> deliveries, exactly once), the heads of
//! the lanes due now, and each attempt's outcome (delivered, retry later, or given up with the
//! endpoint disabled). Called on store threads (`Store::run`).
//!
//! `changes queue -> fan_out -> d app endpoint lane seq -> heads -> (HTTP) -> settle`

use std::collections::{HashMap, HashSet};

use sled::transaction::ConflictableTransactionError;
use sled::Transactional;

use super::model::{event_body, AttemptRecord, AttemptTrigger, EndpointRecord, EndpointStatus};
use super::store::{self, Delivery, DELIVERY, TREE};
use crate::ids::Timestamp;
use crate::storage::changes::{self, Change};
use crate::storage::{decode, StoreError};

/// The most changes one fan-out takes (and holds in memory).
pub const BATCH: usize = 256;
/// The most payload bytes of one fan-out batch.
const BATCH_BYTES: usize = 4 << 20;

/// What one fan-out did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FannedOut {
    /// Changes taken from the queue (delivered somewhere or dropped).
    pub changes: usize,
    pub deliveries: usize,
}

/// The deliveries (key, value: each a delivery and its body) one change makes.
type Writes = Vec<(Vec<u8>, Vec<u8>)>;

/// Moves the oldest changes to the deliveries of the endpoints that want them, in ONE
/// transaction over (`changes`, `webhooks`) that removes each change as its deliveries are
/// written: a change is fanned out exactly once, also across a crash. A change no endpoint
/// wants (an edge has none) is just removed.
pub fn fan_out(db: &sled::Db, lanes: u8) -> Result<FannedOut, StoreError> {
    let items = changes::CHANGES.peek(db, BATCH, BATCH_BYTES)?;
    if items.is_empty() {
        return Ok(FannedOut::default());
    }
    let mut endpoints: HashMap<String, Vec<EndpointRecord>> = HashMap::new();
    let mut plan: Vec<([u8; 8], Writes)> = Vec::with_capacity(items.len());
    for item in &items {
        let change = (item.kind == changes::KIND)
            .then(|| Change::decode(&item.payload))
            .flatten();
        let Some(change) = change else {
            tracing::warn!(seq = item.seq, "an unreadable change is dropped");
            plan.push((item.seq.to_be_bytes(), Vec::new()));
            continue;
        };
        if !endpoints.contains_key(&change.app_id) {
            endpoints.insert(change.app_id.clone(), store::records(db, &change.app_id)?);
        }
        let lane = store::lane(&change.subject, lanes);
        let body = event_body(&change, item.seq);
        let writes = endpoints[&change.app_id]
            .iter()
            .filter(|r| r.wants(&change))
            .flat_map(|r| {
                let d = Delivery {
                    event_id: change.id.clone(),
                    kind: change.kind.clone(),
                    subject: change.subject.clone(),
                    body: body.clone(),
                    attempts: 0,
                    due: 0,
                    trigger: AttemptTrigger::Event,
                };
                let key = store::delivery_key(&change.app_id, &r.endpoint.id, lane, item.seq);
                store::delivery_writes(key, d)
            })
            .collect();
        plan.push((item.seq.to_be_bytes(), writes));
    }
    let (queue, hooks) = (db.open_tree(changes::TREE)?, db.open_tree(TREE)?);
    let done = (&queue, &hooks).transaction(|(q, h)| {
        let mut done = FannedOut::default();
        for (seq, writes) in &plan {
            if q.remove(&seq[..])?.is_none() {
                continue;
            }
            done.changes += 1;
            for (k, v) in writes {
                h.insert(&k[..], &v[..])?;
                if k.first() == Some(&DELIVERY) {
                    store::add_pending(h, k, 1)?;
                    done.deliveries += 1;
                }
            }
        }
        Ok::<_, ConflictableTransactionError<StoreError>>(done)
    })?;
    Ok(done)
}

/// The lane of a delivery key: `d app endpoint lane` (its first 50 bytes).
pub const LANE_PREFIX: usize = store::ENDPOINT_PREFIX + 1;

/// A delivery due now at the head of its lane, with its endpoint.
#[derive(Debug, Clone)]
pub struct Head {
    pub key: Vec<u8>,
    pub app: String,
    pub delivery: Delivery,
    pub endpoint: EndpointRecord,
}

impl Head {
    pub fn lane(&self) -> Vec<u8> {
        self.key[..LANE_PREFIX].to_vec()
    }
}

/// The first key after every key starting with `prefix`.
fn after(prefix: &[u8]) -> Vec<u8> {
    [prefix, &[0xff; 10]].concat()
}

/// Where the next [`heads`] starts: just after the lane of the last head taken, so every
/// endpoint gets its turn (the scan wraps around), not the first ones in key order.
pub fn next_start(heads: &[Head]) -> Option<Vec<u8>> {
    heads.last().map(|h| after(&h.key[..LANE_PREFIX]))
}

/// At most `max` deliveries due at `now` (µs), each the oldest of its lane, skipping the
/// lanes in `busy` and paused endpoints, from the lane at `start` on (then from the first
/// one, up to `start`). Deliveries of an endpoint gone (deleted meanwhile) or disabled are
/// removed on the way.
pub fn heads(
    db: &sled::Db,
    now: i64,
    busy: &HashSet<Vec<u8>>,
    max: usize,
    start: &[u8],
) -> Result<Vec<Head>, StoreError> {
    let t = db.open_tree(TREE)?;
    let mut out = Vec::new();
    let (mut from, whole) = (start.to_vec(), start <= &[DELIVERY][..]);
    // Once wrapped around: where to stop.
    let mut limit: Option<&[u8]> = None;
    let mut endpoints: HashMap<Vec<u8>, Option<EndpointRecord>> = HashMap::new();
    while out.len() < max {
        let next = t.range(from.clone()..).next().transpose()?;
        let (k, v) = match next {
            Some((k, _)) if limit.is_some_and(|l| k.as_ref() >= l) => break,
            Some((k, v)) if k.first() == Some(&DELIVERY) => (k, v),
            _ if whole || limit.is_some() => break,
            _ => {
                (from, limit) = (vec![DELIVERY], Some(start));
                continue;
            }
        };
        if k.len() != LANE_PREFIX + 8 {
            t.remove(&k)?;
            continue;
        }
        let (app, id) = (&k[1..25], &k[25..store::ENDPOINT_PREFIX]);
        let app = String::from_utf8_lossy(app).into_owned();
        let id = String::from_utf8_lossy(id).into_owned();
        let record = match endpoints.get(&k[..store::ENDPOINT_PREFIX]) {
            Some(r) => r.clone(),
            None => {
                let r = store::load(db, &app, &id)?;
                endpoints.insert(k[..store::ENDPOINT_PREFIX].to_vec(), r.clone());
                r
            }
        };
        let Some(record) = record.filter(|r| r.endpoint.status != EndpointStatus::Disabled) else {
            let gone = drop_waiting(&t, &k[..store::ENDPOINT_PREFIX])?;
            tracing::info!(
                app,
                webhook = id,
                gone,
                "deliveries of a deleted or disabled endpoint dropped"
            );
            from = after(&k[..store::ENDPOINT_PREFIX]);
            continue;
        };
        if record.endpoint.status == EndpointStatus::Paused {
            from = after(&k[..store::ENDPOINT_PREFIX]);
            continue;
        }
        from = after(&k[..LANE_PREFIX]);
        if busy.contains(&k[..LANE_PREFIX]) {
            continue;
        }
        let header: Delivery = decode(&k, &v)?;
        if header.due > now {
            continue;
        }
        let Some(delivery) = store::with_body(&t, &k, header)? else {
            tracing::warn!(app, webhook = id, "a delivery without its body is dropped");
            store::remove_delivery(&t, &k)?;
            continue;
        };
        out.push(Head {
            key: k.to_vec(),
            app,
            delivery,
            endpoint: record,
        });
    }
    Ok(out)
}

/// Removes every delivery (with its body) under an endpoint's prefix; answers how many.
fn drop_waiting(t: &sled::Tree, endpoint_prefix: &[u8]) -> Result<u64, StoreError> {
    let keys: Vec<_> = t
        .scan_prefix(endpoint_prefix)
        .keys()
        .collect::<Result<_, _>>()?;
    let mut gone = 0;
    for k in &keys {
        gone += u64::from(store::remove_delivery(t, k)?);
    }
    Ok(gone)
}

/// What becomes of a delivery after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    /// Tried again at this time (µs).
    RetryAt(i64),
    /// The retry schedule is over: the endpoint is disabled for this reason.
    GiveUp(String),
}

/// Records an attempt of `head`: logs it, then removes the delivery (delivered), pushes it
/// back (retry), or gives it up, disables the endpoint and drops its other waiting deliveries.
/// Answers how many of those others were dropped.
pub fn settle(
    db: &sled::Db,
    head: &Head,
    logged: AttemptRecord,
    verdict: &Verdict,
    keep: usize,
    now: Timestamp,
) -> Result<u64, StoreError> {
    let t = db.open_tree(TREE)?;
    let id = &head.endpoint.endpoint.id;
    let exists = store::load(db, &head.app, id)?.is_some();
    if exists {
        store::log_attempt(db, &head.app, id, logged, keep)?;
    }
    let mut dropped = 0;
    match verdict {
        Verdict::Delivered => {
            store::remove_delivery(&t, &head.key)?;
        }
        Verdict::RetryAt(due) => {
            let mut d = head.delivery.clone();
            d.attempts += 1;
            d.due = *due;
            // The body again too: a delivery stored before bodies were kept apart gets its
            // body key here.
            store::put_delivery(&t, head.key.clone(), d, true)?;
        }
        Verdict::GiveUp(reason) => {
            store::remove_delivery(&t, &head.key)?;
            // The waiting deliveries go before the endpoint shows as disabled (a reader who
            // sees it disabled sees none pending), and again after, for any that the fan-out
            // added meanwhile.
            let lane = &head.key[..store::ENDPOINT_PREFIX];
            dropped = drop_waiting(&t, lane)?;
            if exists {
                disable(db, &head.app, id, reason, now)?;
            }
            dropped += drop_waiting(&t, lane)?;
            db.flush()?;
        }
    }
    // No flush for the others: sled writes them within `flush_every_ms`, and a crash before
    // only sends the delivery again (at least once) or forgets a failed attempt's count.
    Ok(dropped)
}

/// Marks an endpoint disabled (by Tributary) for `reason` at `now`.
fn disable(
    db: &sled::Db,
    app: &str,
    id: &str,
    reason: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    let r = store::change(db, app, id, |r| {
        r.endpoint.status = EndpointStatus::Disabled;
        r.endpoint.disabled_reason = Some(reason.to_owned());
        r.endpoint.disabled_at = Some(now);
        r.endpoint.updated_at = now;
    });
    match r {
        Ok(_) | Err(store::WebhookError::NotFound(_)) => Ok(()),
        Err(store::WebhookError::Store(e)) => Err(e),
        Err(e) => Err(StoreError::Corrupt {
            key: id.to_owned(),
            cause: format!("{e:?}"),
        }),
    }
}

/// The gauges of `/metrics`: deliveries waiting, changes not yet fanned out, endpoints
/// disabled.
pub fn gauges(db: &sled::Db) -> Result<(u64, u64, u64), StoreError> {
    let pending = store::pending_total(db)?;
    let changes = changes::CHANGES.stats(db)?.len as u64;
    Ok((pending, changes, store::disabled_count(db)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::Mode;
    use crate::storage::changes::{Actor, Facets};
    use crate::webhooks::model::{Attempt, EndpointPatch};
    use serde_json::json;

    const APP: &str = "0123456789abcdef01234567";
    const OTHER: &str = "0123456789abcdef01234568";

    fn db() -> sled::Db {
        sled::Config::new().temporary(true).open().unwrap()
    }

    fn endpoint(db: &sled::Db, app: &str, body: serde_json::Value) -> String {
        let p = EndpointPatch::parse(body.as_object().unwrap(), Mode::Create).unwrap();
        store::create(db, app, &p, 20, Timestamp::t0())
            .unwrap()
            .0
            .id
    }

    fn push(db: &sled::Db, app: &str, kind: &str, subject: &str, facets: Facets) -> Change {
        let c = Change::new(
            kind,
            app,
            subject,
            Timestamp::t0(),
            &Actor::Admin,
            json!({"n": subject}),
        )
        .with(facets);
        changes::CHANGES
            .push(db, changes::KIND, 0, &c.encode())
            .unwrap();
        c
    }

    fn waiting(db: &sled::Db) -> Vec<(Vec<u8>, Delivery)> {
        db.open_tree(TREE)
            .unwrap()
            .scan_prefix([DELIVERY])
            .map(|kv| {
                let (k, v) = kv.unwrap();
                let d = store::with_body(&db.open_tree(TREE).unwrap(), &k, decode(&k, &v).unwrap());
                (k.to_vec(), d.unwrap().expect("every delivery has its body"))
            })
            .collect()
    }

    #[test]
    fn a_change_is_fanned_out_exactly_once_to_the_endpoints_that_want_it() {
        let db = db();
        let all = endpoint(
            &db,
            APP,
            json!({"url": "https://a.example/", "eventTypes": ["*"]}),
        );
        let board = "0123456789abcdef0123456a";
        let filtered = endpoint(
            &db,
            APP,
            json!({"url": "https://b.example/", "eventTypes": ["comment.created"],
                   "filters": {"boardIds": [board]}}),
        );
        let paused = endpoint(
            &db,
            APP,
            json!({"url": "https://c.example/", "eventTypes": ["*"], "status": "paused"}),
        );
        let on_board = Facets {
            board_id: Some(board.into()),
            ..Facets::default()
        };
        let internal = Facets {
            internal: true,
            ..on_board.clone()
        };
        let c1 = push(&db, APP, "comment.created", "i1", on_board);
        push(&db, APP, "comment.created", "i2", internal);
        push(&db, OTHER, "idea.created", "i3", Facets::default());
        // Two fan-outs at once (they never run together, but the transaction makes it safe).
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| fan_out(&db, 4).unwrap());
            let b = s.spawn(|| fan_out(&db, 4).unwrap());
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(a.changes + b.changes, 3, "each change taken once");
        assert_eq!(a.deliveries + b.deliveries, 2);
        assert_eq!(fan_out(&db, 4).unwrap(), FannedOut::default());
        assert_eq!(
            changes::CHANGES.stats(&db).unwrap().len,
            0,
            "the other app's is dropped"
        );
        let got = waiting(&db);
        let to: Vec<(&[u8], &str)> = got
            .iter()
            .map(|(k, d)| (&k[25..store::ENDPOINT_PREFIX], d.subject.as_str()))
            .collect();
        let (all_b, filtered_b) = (all.as_bytes(), filtered.as_bytes());
        assert!(to.contains(&(filtered_b, "i1")), "{to:?}");
        assert!(to.contains(&(all_b, "i1")));
        assert!(
            !to.iter().any(|(_, s)| *s == "i2"),
            "internal comments only on request"
        );
        assert!(!to.iter().any(|(e, _)| *e == paused.as_bytes()));
        let body: serde_json::Value = serde_json::from_str(&got[0].1.body).unwrap();
        assert_eq!(body["id"], c1.id.as_str());
        assert_eq!(body["type"], "comment.created");
        assert_eq!(body["actor"], json!({"type": "admin"}));
        assert!(body["sequence"].as_u64().unwrap() > 0);
        assert_eq!(store::pending_of_app(&db, APP).unwrap(), 2);
    }

    /// The log record of a failed first attempt of `h`.
    fn logged(h: &Head) -> AttemptRecord {
        AttemptRecord {
            attempt: Attempt {
                id: String::new(),
                event_id: h.delivery.event_id.clone(),
                kind: h.delivery.kind.clone(),
                attempt: 1,
                at: Timestamp::t0(),
                status: Some(500),
                error: None,
                latency_ms: 0,
                response: String::new(),
                trigger: AttemptTrigger::Event,
            },
            subject: h.delivery.subject.clone(),
            body: h.delivery.body.clone(),
        }
    }

    /// Settles `h` now with `verdict`, its attempt logged.
    fn settle_now(db: &sled::Db, h: &Head, verdict: &Verdict) {
        settle(db, h, logged(h), verdict, 10, Timestamp::t0()).unwrap();
    }

    /// Checks each endpoint's kept count against its deliveries walked.
    fn assert_counted(db: &sled::Db) {
        let t = db.open_tree(TREE).unwrap();
        let mut walked: HashMap<Vec<u8>, u64> = HashMap::new();
        for k in t.scan_prefix([DELIVERY]).keys() {
            *walked
                .entry(k.unwrap()[1..store::ENDPOINT_PREFIX].to_vec())
                .or_default() += 1;
        }
        let kept: HashMap<Vec<u8>, u64> = t
            .scan_prefix([store::COUNT])
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (
                    k[1..].to_vec(),
                    u64::from_be_bytes(v.as_ref().try_into().unwrap()),
                )
            })
            .collect();
        assert_eq!(kept, walked, "the counts kept are the deliveries waiting");
        assert_eq!(
            store::pending_total(db).unwrap(),
            walked.values().sum::<u64>()
        );
    }

    /// How many keys of the webhooks' tree carry `tag`.
    fn tagged(db: &sled::Db, tag: u8) -> usize {
        db.open_tree(TREE).unwrap().scan_prefix([tag]).count()
    }

    #[test]
    fn a_deliverys_body_is_stored_apart_and_goes_with_it() {
        let db = db();
        endpoint(
            &db,
            APP,
            json!({"url": "https://a.example/", "eventTypes": ["*"]}),
        );
        let text = "x".repeat(50_000);
        let c = Change::new(
            "idea.created",
            APP,
            "s",
            Timestamp::t0(),
            &Actor::Admin,
            json!({ "text": text }),
        );
        changes::CHANGES
            .push(&db, changes::KIND, 0, &c.encode())
            .unwrap();
        fan_out(&db, 4).unwrap();
        let t = db.open_tree(TREE).unwrap();
        let (k, v) = t.scan_prefix([DELIVERY]).next().unwrap().unwrap();
        // What the counts of waiting deliveries walk stays small, whatever the body.
        assert!(v.len() < 1000, "the waiting record: {} bytes", v.len());
        let body = t.get(store::body_key(&k)).unwrap().unwrap();
        assert!(body.len() > 50_000);
        let h = heads(&db, 0, &HashSet::new(), 10, b"d").unwrap();
        assert_eq!(h[0].delivery.body.as_bytes(), &body[..]);
        settle_now(&db, &h[0], &Verdict::RetryAt(0));
        assert!(
            t.get(&k).unwrap().unwrap().len() < 1000,
            "a retry keeps it apart"
        );
        let h = heads(&db, 0, &HashSet::new(), 10, b"d").unwrap();
        assert_eq!(
            (h[0].delivery.attempts, h[0].delivery.body.as_bytes()),
            (1, &body[..])
        );
        assert_counted(&db);
        settle_now(&db, &h[0], &Verdict::Delivered);
        assert_eq!((tagged(&db, DELIVERY), tagged(&db, store::BODY)), (0, 0));
        assert_eq!(tagged(&db, store::COUNT), 0, "a count of 0 is no key");
    }

    #[test]
    fn a_delivery_stored_with_its_body_inside_is_sent_and_a_retry_moves_the_body_apart() {
        let db = db();
        let id = endpoint(
            &db,
            APP,
            json!({"url": "https://a.example/", "eventTypes": ["*"]}),
        );
        // As a version before bodies were kept apart wrote it.
        let old = Delivery {
            event_id: "evt_old".into(),
            kind: "idea.created".into(),
            subject: "s".into(),
            body: "{\"old\":1}".into(),
            attempts: 0,
            due: 0,
            trigger: AttemptTrigger::Event,
        };
        let key = store::delivery_key(APP, &id, 0, 7);
        let t = db.open_tree(TREE).unwrap();
        t.insert(&key, crate::storage::encode(&old)).unwrap();
        // Start-up counts it, once.
        assert_eq!(store::count_pending_once(&db).unwrap(), 1);
        assert_eq!(store::count_pending_once(&db).unwrap(), 0);
        assert_eq!(store::get(&db, APP, &id).unwrap().unwrap().pending, 1);
        assert_counted(&db);
        let h = heads(&db, 0, &HashSet::new(), 10, b"d").unwrap();
        assert_eq!(h[0].delivery, old);
        settle_now(&db, &h[0], &Verdict::RetryAt(0));
        let header: Delivery = decode(&key, &t.get(&key).unwrap().unwrap()).unwrap();
        assert_eq!((header.body.as_str(), header.attempts), ("", 1));
        let h = heads(&db, 0, &HashSet::new(), 10, b"d").unwrap();
        assert_eq!(h[0].delivery.body, old.body);
        settle_now(&db, &h[0], &Verdict::Delivered);
        assert_eq!((tagged(&db, DELIVERY), tagged(&db, store::BODY)), (0, 0));
        assert_eq!(tagged(&db, store::COUNT), 0, "a count of 0 is no key");
    }

    #[test]
    fn a_lane_offers_only_its_oldest_delivery_and_none_while_busy_or_paused() {
        let db = db();
        let id = endpoint(
            &db,
            APP,
            json!({"url": "https://a.example/", "eventTypes": ["*"]}),
        );
        for subject in ["s", "s", "s"] {
            push(&db, APP, "idea.updated", subject, Facets::default());
        }
        fan_out(&db, 1).unwrap();
        let first = heads(&db, 0, &HashSet::new(), 10, b"d").unwrap();
        assert_eq!(first.len(), 1, "one lane, one head");
        let busy = HashSet::from([first[0].lane()]);
        assert!(heads(&db, 0, &busy, 10, b"d").unwrap().is_empty());
        let t = Timestamp::t0();
        settle(
            &db,
            &first[0],
            logged(&first[0]),
            &Verdict::RetryAt(1_000),
            10,
            t,
        )
        .unwrap();
        assert!(
            heads(&db, 999, &HashSet::new(), 10, b"d")
                .unwrap()
                .is_empty(),
            "not yet due"
        );
        let again = heads(&db, 1_000, &HashSet::new(), 10, b"d").unwrap();
        assert_eq!(
            again[0].delivery.event_id, first[0].delivery.event_id,
            "the order holds"
        );
        assert_eq!(again[0].delivery.attempts, 1);
        settle(
            &db,
            &again[0],
            logged(&again[0]),
            &Verdict::Delivered,
            10,
            t,
        )
        .unwrap();
        let next = heads(&db, 1_000, &HashSet::new(), 10, b"d").unwrap();
        assert!(next[0].key > again[0].key, "then the next of the lane");
        let pause = EndpointPatch {
            status: Some(EndpointStatus::Paused),
            ..EndpointPatch::default()
        };
        store::update(&db, APP, &id, &pause, t).unwrap();
        assert!(heads(&db, 1_000, &HashSet::new(), 10, b"d")
            .unwrap()
            .is_empty());
        store::update(
            &db,
            APP,
            &id,
            &EndpointPatch {
                status: Some(EndpointStatus::Active),
                ..pause
            },
            t,
        )
        .unwrap();
        let dropped = settle(
            &db,
            &next[0],
            logged(&next[0]),
            &Verdict::GiveUp("down".into()),
            10,
            t,
        )
        .unwrap();
        assert_eq!(dropped, 1, "the third waited behind it");
        let e = store::get(&db, APP, &id).unwrap().unwrap();
        assert_eq!(e.status, EndpointStatus::Disabled);
        assert_eq!(e.disabled_reason.as_deref(), Some("down"));
        assert_eq!(e.pending, 0);
        assert_eq!(store::attempts(&db, APP, &id).unwrap().unwrap().len(), 3);
        assert_eq!(gauges(&db).unwrap(), (0, 0, 1));
    }

    #[test]
    fn the_look_for_due_deliveries_takes_turns_among_endpoints() {
        let db = db();
        let a = endpoint(
            &db,
            APP,
            json!({"url": "https://a.example/", "eventTypes": ["*"]}),
        );
        let b = endpoint(
            &db,
            APP,
            json!({"url": "https://b.example/", "eventTypes": ["*"]}),
        );
        for subject in ["x", "y", "z"] {
            push(&db, APP, "idea.created", subject, Facets::default());
        }
        fan_out(&db, 1).unwrap();
        let none = HashSet::new();
        let mut start = vec![DELIVERY];
        let mut served = Vec::new();
        for _ in 0..4 {
            let h = heads(&db, 0, &none, 1, &start).unwrap();
            served.push(h[0].endpoint.endpoint.id.clone());
            start = next_start(&h).unwrap();
        }
        assert_eq!(
            served,
            [a.clone(), b.clone(), a, b],
            "not the first endpoint only"
        );
        assert_eq!(
            heads(&db, 0, &none, 10, &start).unwrap().len(),
            2,
            "each lane once"
        );
    }

    #[test]
    fn giving_up_drops_the_endpoints_other_deliveries_and_a_deleted_endpoints_are_cleared() {
        let db = db();
        let id = endpoint(
            &db,
            APP,
            json!({"url": "https://a.example/", "eventTypes": ["*"]}),
        );
        let gone = endpoint(
            &db,
            APP,
            json!({"url": "https://b.example/", "eventTypes": ["*"]}),
        );
        for subject in ["a", "b", "c", "d"] {
            push(&db, APP, "idea.created", subject, Facets::default());
        }
        fan_out(&db, 4).unwrap();
        assert_eq!(waiting(&db).len(), 8);
        assert_counted(&db);
        // An endpoint deleted behind the engine's back: its deliveries go at the next read.
        db.open_tree(TREE)
            .unwrap()
            .remove(store::endpoint_key(APP, &gone))
            .unwrap();
        let h = heads(&db, 0, &HashSet::new(), 10, b"d").unwrap();
        assert!(h.iter().all(|h| h.endpoint.endpoint.id == id));
        assert_eq!(waiting(&db).len(), 4);
        assert_counted(&db);
        let record = AttemptRecord {
            attempt: Attempt {
                id: String::new(),
                event_id: "evt".into(),
                kind: "idea.created".into(),
                attempt: 1,
                at: Timestamp::t0(),
                status: None,
                error: Some("refused".into()),
                latency_ms: 0,
                response: String::new(),
                trigger: AttemptTrigger::Event,
            },
            subject: "a".into(),
            body: "{}".into(),
        };
        let v = Verdict::GiveUp("down".into());
        assert_eq!(
            settle(&db, &h[0], record, &v, 10, Timestamp::t0()).unwrap(),
            3
        );
        assert!(waiting(&db).is_empty());
        assert_eq!(tagged(&db, store::BODY), 0, "the bodies went with them");
        assert_counted(&db);
    }
}
