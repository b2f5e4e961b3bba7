//! Settling an app across the fleet: every event of the app that any node acknowledged before
//! now is in the lake. Erasure and app deletion need it before they rewrite or delete the
//! lake, or an edge's outbox would bring the rows back later.
//!
//! `control: request(app) -> seq` (tree `fleet_settle`, app -> the latest request, part of the
//! registry) -> each edge, at its next registry sync (after the same registry's suppressions
//! and app marks, so nothing new of the app or person is committed after it), runs
//! `Collector::settle(app)` and records the seq it reached (tree `fleet_settled`), which its
//! heartbeat reports -> `control: wait` until every edge heard from within `ACTIVE` has
//! reported at least seq. An edge silent for longer is taken as gone (README: its outbox
//! would still be uploaded when it comes back).

use std::time::Duration;

use super::nodes::{self, Settled};
use crate::ids::Timestamp;
use crate::storage::{Store, StoreError};

/// The requests, `app \0` -> seq (u64 big endian); replicated to the edges with the registry.
pub const TREE: &str = "fleet_settle";
/// An edge's settled requests, `app \0` -> seq (u64 big endian); its own, never replicated.
const DONE: &str = "fleet_settled";
/// Edges heard from within this long must settle; older ones are taken as gone.
pub const ACTIVE: Duration = Duration::from_secs(600);
/// How long one wait lasts before the job's step is retried.
pub const WAIT: Duration = Duration::from_secs(30);

/// `app \0`: the key of both trees (the shape app deletion sweeps).
fn key(app: &str) -> Vec<u8> {
    [app.as_bytes(), &[0]].concat()
}

fn app_of(key: &[u8]) -> String {
    String::from_utf8_lossy(key.strip_suffix(&[0]).unwrap_or(key)).into_owned()
}

fn be(v: Option<&[u8]>) -> u64 {
    v.and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_be_bytes)
}

/// Asks every edge to settle `app`; answers the request's seq.
pub fn request(db: &sled::Db, app: &str) -> Result<u64, StoreError> {
    let seq = db
        .open_tree(TREE)?
        .update_and_fetch(key(app), |v| Some((be(v) + 1).to_be_bytes().to_vec()))?;
    db.flush()?;
    Ok(be(seq.as_deref()))
}

/// The edges heard from within `ACTIVE` of `now` that have not settled `app` up to `seq`.
pub fn lagging(
    db: &sled::Db,
    app: &str,
    seq: u64,
    now: Timestamp,
) -> Result<Vec<String>, StoreError> {
    let since = now.micros() - ACTIVE.as_micros() as i64;
    Ok(nodes::all(db)?
        .into_iter()
        .filter(|r| r.last_contact_at.micros() >= since)
        .filter(|r| {
            !r.heartbeat
                .settled
                .iter()
                .any(|s| s.app_id == app && s.seq >= seq)
        })
        .map(|r| r.heartbeat.node_id)
        .collect())
}

/// On the control node: asks the edges to settle `app` and waits until they all did, or
/// `WAIT` passed (an error naming the edges still to settle: the job retries).
pub async fn fleet(
    store: &Store,
    app: &str,
    clock: &dyn crate::clock::Clock,
) -> Result<(), String> {
    let a = app.to_owned();
    let seq = store
        .run(move |db| request(db, &a))
        .await
        .map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (a, now) = (app.to_owned(), clock.now());
        let lagging = store
            .run(move |db| lagging(db, &a, seq, now))
            .await
            .map_err(|e| e.to_string())?;
        if lagging.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("edges not settled yet: {}", lagging.join(", ")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// On an edge: the requests it has not settled yet, (app, seq).
pub fn pending(db: &sled::Db) -> Result<Vec<(String, u64)>, StoreError> {
    let done = db.open_tree(DONE)?;
    let mut out = Vec::new();
    for kv in db.open_tree(TREE)?.iter() {
        let (app, seq) = kv?;
        let seq = be(Some(&seq));
        if be(done.get(&app)?.as_deref()) < seq {
            out.push((app_of(&app), seq));
        }
    }
    Ok(out)
}

/// On an edge: records that `app` is settled up to `seq`.
pub fn done(db: &sled::Db, app: &str, seq: u64) -> Result<(), StoreError> {
    db.open_tree(DONE)?.insert(key(app), &seq.to_be_bytes())?;
    db.flush()?;
    Ok(())
}

/// On an edge: every settle it did, for its heartbeat (requests no longer in the registry, of
/// deleted apps, are dropped).
pub fn reported(db: &sled::Db) -> Result<Vec<Settled>, StoreError> {
    let asked = db.open_tree(TREE)?;
    let done = db.open_tree(DONE)?;
    let mut out = Vec::new();
    for kv in done.iter() {
        let (app, seq) = kv?;
        if asked.contains_key(&app)? {
            out.push(Settled {
                app_id: app_of(&app),
                seq: be(Some(&seq)),
            });
        } else {
            done.remove(&app)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::nodes::{record, Heartbeat, Settled};

    fn beat(node: &str, settled: &[(&str, u64)]) -> Heartbeat {
        let mut b = crate::fleet::nodes::tests::beat(node, &[]);
        b.settled = settled
            .iter()
            .map(|(a, s)| Settled {
                app_id: (*a).into(),
                seq: *s,
            })
            .collect();
        b
    }

    #[test]
    fn the_control_node_waits_for_every_active_edge_and_an_edge_settles_each_request_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let now = Timestamp::parse("2026-11-26T12:00:00Z").unwrap();
        let long_ago = Timestamp::from_micros(now.micros() - 2 * ACTIVE.as_micros() as i64);
        record(&db, "t", &beat("e1", &[]), now).unwrap();
        record(&db, "t", &beat("gone", &[]), long_ago).unwrap();
        assert_eq!(request(&db, "app").unwrap(), 1);
        assert_eq!(request(&db, "app").unwrap(), 2);
        assert_eq!(
            lagging(&db, "app", 2, now).unwrap(),
            ["e1"],
            "a silent edge is not waited for"
        );
        // The edge's side (here the same sled: the registry carried the requests).
        assert_eq!(pending(&db).unwrap(), [("app".to_owned(), 2)]);
        done(&db, "app", 2).unwrap();
        assert!(pending(&db).unwrap().is_empty());
        let settled = reported(&db).unwrap();
        record(&db, "t", &beat("e1", &[("app", settled[0].seq)]), now).unwrap();
        assert!(lagging(&db, "app", 2, now).unwrap().is_empty());
        assert_eq!(lagging(&db, "app", 3, now).unwrap(), ["e1"]);
    }
}
