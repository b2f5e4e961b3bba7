//! A durable FIFO in one sled tree: what a node must send elsewhere and has not yet had
//! acknowledged (the fleet's uplink; webhooks may reuse it).
//!
//! ```text
//! <seq u64 BE> -> <kind u8> <pushed at, µs, i64 BE> <payload>
//! ```
//!
//! `seq` is 1 + sled's `generate_id` (never 0, unique and increasing across restarts, also inside a
//! transaction), so keys sort in push order; the kind byte tells the consumer how to read the
//! payload. A sender `peek`s from the oldest, sends, then `ack_through` the last sequence it
//! got an answer for: an item leaves only once acknowledged, so a crash or an unreachable
//! receiver loses nothing, and the receiver must be idempotent (it may see an item twice).
//!
//! Size: 9 bytes of header per item plus its payload; the queue is bounded only by the disk
//! (a receiver away for long grows it: `stats` says how much and how old).

use sled::transaction::{ConflictableTransactionResult, TransactionalTree};

/// An edge's uplink (`fleet/uplink.rs`): what the control node must learn (rollups, profiles,
/// survey responses), pushed by the collector and the surveys only on an edge.
pub const UPLINK: Queue = Queue::new("uplink");

/// Header bytes before the payload: the kind and the push time.
const HEADER: usize = 9;

/// A queue: the name of its tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    tree: &'static str,
}

/// One queued item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub seq: u64,
    pub kind: u8,
    /// When it was pushed (µs since the epoch).
    pub at: i64,
    pub payload: Vec<u8>,
}

/// What `Queue::edit` does with an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    Keep,
    Drop,
    /// Keeps its sequence, kind and time with a new payload.
    Replace(Vec<u8>),
}

/// What a queue holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub len: usize,
    /// The oldest item's sequence and push time.
    pub oldest: Option<(u64, i64)>,
}

fn value(kind: u8, at: i64, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + payload.len());
    v.push(kind);
    v.extend_from_slice(&at.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn item(key: &[u8], value: &[u8]) -> Option<Item> {
    let seq = u64::from_be_bytes(key.try_into().ok()?);
    let (&kind, rest) = value.split_first()?;
    let at = i64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    Some(Item {
        seq,
        kind,
        at,
        payload: rest[8..].to_vec(),
    })
}

impl Queue {
    pub const fn new(tree: &'static str) -> Queue {
        Queue { tree }
    }

    pub fn tree(&self) -> &'static str {
        self.tree
    }

    /// Appends an item; returns its sequence.
    pub fn push(&self, db: &sled::Db, kind: u8, at: i64, payload: &[u8]) -> sled::Result<u64> {
        let seq = db.generate_id()? + 1;
        db.open_tree(self.tree)?
            .insert(seq.to_be_bytes(), value(kind, at, payload))?;
        Ok(seq)
    }

    /// Appends an item inside a transaction over the queue's tree (`tx`), so it is queued
    /// exactly when the rest of the transaction commits.
    pub fn push_in<E>(
        tx: &TransactionalTree,
        kind: u8,
        at: i64,
        payload: &[u8],
    ) -> ConflictableTransactionResult<u64, E> {
        let seq = tx.generate_id()? + 1;
        tx.insert(&seq.to_be_bytes(), value(kind, at, payload))?;
        Ok(seq)
    }

    /// The oldest items, at most `max_items` and, beyond the first, at most `max_bytes` of
    /// payload. An undecodable record (never written by `push`) is dropped from the answer.
    pub fn peek(
        &self,
        db: &sled::Db,
        max_items: usize,
        max_bytes: usize,
    ) -> sled::Result<Vec<Item>> {
        let mut out = Vec::new();
        let mut bytes = 0;
        for kv in db.open_tree(self.tree)?.iter() {
            if out.len() >= max_items {
                break;
            }
            let (k, v) = kv?;
            let Some(item) = item(&k, &v) else {
                tracing::warn!(tree = self.tree, "an unreadable queue record is skipped");
                continue;
            };
            bytes += item.payload.len();
            if !out.is_empty() && bytes > max_bytes {
                break;
            }
            out.push(item);
        }
        Ok(out)
    }

    /// Removes every item up to `seq` (included); returns how many went.
    pub fn ack_through(&self, db: &sled::Db, seq: u64) -> sled::Result<usize> {
        let tree = db.open_tree(self.tree)?;
        let mut gone = 0;
        for kv in tree.range(..=seq.to_be_bytes()) {
            let (k, _) = kv?;
            if tree.remove(k)?.is_some() {
                gone += 1;
            }
        }
        Ok(gone)
    }

    /// Passes every item to `edit`, which keeps, drops or rewrites it (same sequence); an item
    /// acknowledged meanwhile stays gone (compare-and-swap). Returns how many changed.
    pub fn edit(&self, db: &sled::Db, mut edit: impl FnMut(&Item) -> Edit) -> sled::Result<usize> {
        let tree = db.open_tree(self.tree)?;
        let mut changed = 0;
        for kv in tree.iter() {
            let (k, v) = kv?;
            let Some(item) = item(&k, &v) else { continue };
            let new = match edit(&item) {
                Edit::Keep => continue,
                Edit::Drop => None,
                Edit::Replace(payload) => Some(value(item.kind, item.at, &payload)),
            };
            if tree.compare_and_swap(&k, Some(&v), new)?.is_ok() {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// How many items `f` picks (each item read in turn, none held).
    pub fn count(&self, db: &sled::Db, mut f: impl FnMut(&Item) -> bool) -> sled::Result<usize> {
        let mut n = 0;
        for kv in db.open_tree(self.tree)?.iter() {
            let (k, v) = kv?;
            n += usize::from(item(&k, &v).is_some_and(|i| f(&i)));
        }
        Ok(n)
    }

    /// How many items wait and the oldest one.
    pub fn stats(&self, db: &sled::Db) -> sled::Result<Stats> {
        let tree = db.open_tree(self.tree)?;
        let oldest = match tree.first()? {
            Some((k, v)) => item(&k, &v).map(|i| (i.seq, i.at)),
            None => None,
        };
        Ok(Stats {
            len: tree.len(),
            oldest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sled::Transactional;

    const Q: Queue = Queue::new("q");

    fn db() -> sled::Db {
        sled::Config::new().temporary(true).open().unwrap()
    }

    #[test]
    fn count_reads_every_item_it_is_asked_about() {
        let db = db();
        Q.push(&db, 1, 10, b"one").unwrap();
        Q.push(&db, 2, 20, b"two").unwrap();
        Q.push(&db, 1, 30, b"three").unwrap();
        assert_eq!(Q.count(&db, |i| i.kind == 1).unwrap(), 2);
        assert_eq!(Q.count(&db, |i| i.payload == b"two").unwrap(), 1);
    }

    #[test]
    fn items_come_out_in_push_order_until_acknowledged() {
        let db = db();
        assert_eq!(Q.stats(&db).unwrap(), Stats::default());
        let a = Q.push(&db, 1, 10, b"one").unwrap();
        let b = Q.push(&db, 2, 20, b"two").unwrap();
        let c = Q.push(&db, 1, 30, b"three").unwrap();
        assert!(
            0 < a && a < b && b < c,
            "0 is never a sequence: a receiver's none"
        );
        let got = Q.peek(&db, 10, 1 << 20).unwrap();
        let kinds: Vec<(u8, i64, &[u8])> = got
            .iter()
            .map(|i| (i.kind, i.at, i.payload.as_slice()))
            .collect();
        assert_eq!(
            kinds,
            [(1, 10, &b"one"[..]), (2, 20, b"two"), (1, 30, b"three")]
        );
        assert_eq!(Q.peek(&db, 10, 1 << 20).unwrap(), got, "peek takes nothing");
        assert_eq!(
            Q.stats(&db).unwrap(),
            Stats {
                len: 3,
                oldest: Some((a, 10))
            }
        );
        assert_eq!(Q.ack_through(&db, b).unwrap(), 2);
        assert_eq!(
            Q.ack_through(&db, b).unwrap(),
            0,
            "an ack again is harmless"
        );
        let left = Q.peek(&db, 10, 1 << 20).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].seq, c);
        assert_eq!(Q.stats(&db).unwrap().oldest, Some((c, 30)));
    }

    #[test]
    fn a_peek_is_bounded_by_items_and_bytes_but_always_moves() {
        let db = db();
        for i in 0..5u8 {
            Q.push(&db, 0, 0, &[i; 100]).unwrap();
        }
        assert_eq!(Q.peek(&db, 2, 1 << 20).unwrap().len(), 2);
        assert_eq!(Q.peek(&db, 10, 250).unwrap().len(), 2);
        assert_eq!(
            Q.peek(&db, 10, 10).unwrap().len(),
            1,
            "an item larger than the bound still goes alone"
        );
    }

    #[test]
    fn a_push_in_a_transaction_is_queued_only_when_it_commits() {
        let db = db();
        let (q, other) = (db.open_tree("q").unwrap(), db.open_tree("other").unwrap());
        let aborted: Result<(), _> = (&q, &other).transaction(|(q, other)| {
            Queue::push_in::<()>(q, 7, 1, b"x")?;
            other.insert(b"k", b"v")?;
            sled::transaction::abort(())
        });
        assert!(aborted.is_err());
        assert_eq!(Q.stats(&db).unwrap().len, 0);
        let seq = (&q, &other)
            .transaction(|(q, other)| {
                other.insert(b"k", b"v")?;
                Queue::push_in::<()>(q, 7, 1, b"x")
            })
            .unwrap();
        let outside = Q.push(&db, 7, 2, b"y").unwrap();
        assert!(
            seq < outside,
            "one sequence inside and outside transactions"
        );
        assert_eq!(Q.peek(&db, 10, 100).unwrap()[0].payload, b"x");
    }

    #[test]
    fn an_edit_keeps_drops_or_rewrites_items_in_place() {
        let db = db();
        for p in [&b"keep"[..], b"drop", b"grow"] {
            Q.push(&db, 4, 9, p).unwrap();
        }
        let changed = Q
            .edit(&db, |i| match i.payload.as_slice() {
                b"drop" => Edit::Drop,
                b"grow" => Edit::Replace(b"grown".to_vec()),
                _ => Edit::Keep,
            })
            .unwrap();
        assert_eq!(changed, 2);
        let left: Vec<(u8, i64, Vec<u8>)> = Q
            .peek(&db, 10, 100)
            .unwrap()
            .into_iter()
            .map(|i| (i.kind, i.at, i.payload))
            .collect();
        assert_eq!(left, [(4, 9, b"keep".to_vec()), (4, 9, b"grown".to_vec())]);
    }

    #[test]
    fn sequences_keep_growing_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let first = {
            let db = sled::open(dir.path()).unwrap();
            let s = Q.push(&db, 0, 0, b"a").unwrap();
            db.flush().unwrap();
            s
        };
        let db = sled::open(dir.path()).unwrap();
        let second = Q.push(&db, 0, 0, b"b").unwrap();
        assert!(second > first);
        assert_eq!(Q.peek(&db, 10, 100).unwrap().len(), 2);
    }
}
