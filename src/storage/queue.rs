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
//!
//! Its length is kept under [`LEN`] (9 bytes, after every item's key), changed in the same
//! sled transaction as each item pushed or removed, so `stats` reads one key instead of walking
//! the queue: sled 0.34 keeps in memory what it reads (ARCHITECTURE.md, Known limits), and a
//! heartbeat that walked an uplink grown during a control node's absence would hold all of it.
//! A queue of an earlier version is counted once at start-up ([`Queue::count_once`]); until
//! then pushes leave the length absent and `stats` walks.

use sled::transaction::{ConflictableTransactionResult, TransactionError, TransactionalTree};
use sled::{IVec, Tree};

/// An edge's uplink (`fleet/uplink.rs`): what the control node must learn (rollups, profiles,
/// survey responses), pushed by the collector and the surveys only on an edge.
pub const UPLINK: Queue = Queue::new("uplink");

/// Header bytes before the payload: the kind and the push time.
const HEADER: usize = 9;

/// The key of the queue's length (u64 BE). Longer than an item's 8-byte key and all 0xFF, it
/// sorts after every item, outside `..LEN`, the range each walk of the items reads.
const LEN: [u8; 9] = [0xFF; 9];

/// Removals per transaction when acknowledging (a bound on what one transaction holds).
const ACK_CHUNK: usize = 1000;

/// The items of a queue's tree, oldest first (the length key left out).
fn items(tree: &Tree) -> sled::Iter {
    tree.range(..LEN)
}

/// Changes the kept length by `delta`, when the queue is counted.
fn add<E>(tx: &TransactionalTree, delta: i64) -> ConflictableTransactionResult<(), E> {
    if delta == 0 {
        return Ok(());
    }
    if let Some(v) = tx.get(LEN)? {
        let n = decode_len(&v).saturating_add_signed(delta);
        tx.insert(&LEN, &n.to_be_bytes())?;
    }
    Ok(())
}

fn decode_len(v: &[u8]) -> u64 {
    v.try_into().map_or(0, u64::from_be_bytes)
}

/// Runs a transaction over one tree whose closure never aborts.
fn transact<T>(
    tree: &Tree,
    f: impl Fn(&TransactionalTree) -> ConflictableTransactionResult<T, ()>,
) -> sled::Result<T> {
    tree.transaction(f).map_err(|e| match e {
        TransactionError::Storage(e) => e,
        TransactionError::Abort(()) => sled::Error::Unsupported("queue transaction aborted".into()),
    })
}

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
        transact(&db.open_tree(self.tree)?, |tx| {
            Queue::push_in(tx, kind, at, payload)
        })
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
        add(tx, 1)?;
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
        for kv in items(&db.open_tree(self.tree)?) {
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
        let keys = tree
            .range(..=seq.to_be_bytes())
            .keys()
            .collect::<sled::Result<Vec<IVec>>>()?;
        let mut gone = 0;
        for chunk in keys.chunks(ACK_CHUNK) {
            gone += transact(&tree, |tx| {
                let mut n = 0;
                for k in chunk {
                    n += usize::from(tx.remove(k)?.is_some());
                }
                add(tx, -(n as i64))?;
                Ok(n)
            })?;
        }
        Ok(gone)
    }

    /// Passes every item to `edit`, which keeps, drops or rewrites it (same sequence); an item
    /// acknowledged meanwhile stays gone (compare-and-swap). Returns how many changed.
    pub fn edit(&self, db: &sled::Db, mut edit: impl FnMut(&Item) -> Edit) -> sled::Result<usize> {
        let tree = db.open_tree(self.tree)?;
        let mut changed = 0;
        for kv in items(&tree) {
            let (k, v) = kv?;
            let Some(item) = item(&k, &v) else { continue };
            let new = match edit(&item) {
                Edit::Keep => continue,
                Edit::Drop => None,
                Edit::Replace(payload) => Some(value(item.kind, item.at, &payload)),
            };
            changed += transact(&tree, |tx| {
                if tx.get(&k)?.as_ref() != Some(&v) {
                    return Ok(0);
                }
                match &new {
                    Some(n) => {
                        tx.insert(&k, n.as_slice())?;
                    }
                    None => {
                        tx.remove(&k)?;
                        add(tx, -1)?;
                    }
                }
                Ok(1)
            })?;
        }
        Ok(changed)
    }

    /// How many items `f` picks (each item read in turn, none held).
    pub fn count(&self, db: &sled::Db, mut f: impl FnMut(&Item) -> bool) -> sled::Result<usize> {
        let mut n = 0;
        for kv in items(&db.open_tree(self.tree)?) {
            let (k, v) = kv?;
            n += usize::from(item(&k, &v).is_some_and(|i| f(&i)));
        }
        Ok(n)
    }

    /// How many items wait and the oldest one: two keys read (a walk only in a queue not
    /// counted yet).
    pub fn stats(&self, db: &sled::Db) -> sled::Result<Stats> {
        let tree = db.open_tree(self.tree)?;
        let oldest = match items(&tree).next().transpose()? {
            Some((k, v)) => item(&k, &v).map(|i| (i.seq, i.at)),
            None => None,
        };
        let len = match tree.get(LEN)? {
            Some(v) => decode_len(&v) as usize,
            None => items(&tree).count(),
        };
        Ok(Stats { len, oldest })
    }

    /// The newest item's sequence, if any.
    pub fn newest(&self, db: &sled::Db) -> sled::Result<Option<u64>> {
        let last = items(&db.open_tree(self.tree)?).next_back().transpose()?;
        Ok(last.and_then(|(k, _)| k.as_ref().try_into().ok().map(u64::from_be_bytes)))
    }

    /// Counts the queue once and keeps its length from then on: a queue of an earlier version,
    /// or a new one. Start-up calls it before anything pushes; answers the items counted (0
    /// when already counted).
    pub fn count_once(&self, db: &sled::Db) -> sled::Result<u64> {
        let tree = db.open_tree(self.tree)?;
        if tree.get(LEN)?.is_some() {
            return Ok(0);
        }
        let n = items(&tree).count() as u64;
        let set = transact(&tree, |tx| {
            if tx.get(LEN)?.is_some() {
                return Ok(false);
            }
            tx.insert(&LEN, &n.to_be_bytes())?;
            Ok(true)
        })?;
        Ok(if set { n } else { 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sled::Transactional;

    const Q: Queue = Queue::new("q");

    /// A database whose queue `Q` is counted, as start-up leaves it.
    fn db() -> sled::Db {
        let db = sled::Config::new().temporary(true).open().unwrap();
        assert_eq!(Q.count_once(&db).unwrap(), 0);
        db
    }

    /// The kept length equals the items there are.
    fn assert_counted(db: &sled::Db) {
        let tree = db.open_tree(Q.tree()).unwrap();
        let kept = tree.get(LEN).unwrap().expect("the queue is counted");
        assert_eq!(decode_len(&kept) as usize, items(&tree).count());
    }

    #[test]
    fn count_reads_every_item_it_is_asked_about() {
        let db = db();
        Q.push(&db, 1, 10, b"one").unwrap();
        Q.push(&db, 2, 20, b"two").unwrap();
        Q.push(&db, 1, 30, b"three").unwrap();
        assert_eq!(Q.count(&db, |i| i.kind == 1).unwrap(), 2);
        assert_eq!(Q.count(&db, |i| i.payload == b"two").unwrap(), 1);
        assert_counted(&db);
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
        assert_eq!(Q.newest(&db).unwrap(), Some(c));
        assert_eq!(Q.ack_through(&db, b).unwrap(), 2);
        assert_eq!(
            Q.ack_through(&db, b).unwrap(),
            0,
            "an ack again is harmless"
        );
        let left = Q.peek(&db, 10, 1 << 20).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].seq, c);
        assert_eq!(
            Q.stats(&db).unwrap(),
            Stats {
                len: 1,
                oldest: Some((c, 30))
            }
        );
        assert_counted(&db);
        assert_eq!(Q.ack_through(&db, u64::MAX).unwrap(), 1);
        assert_eq!(Q.stats(&db).unwrap(), Stats::default());
        assert_eq!(Q.newest(&db).unwrap(), None, "the length key is no item");
        assert!(Q.peek(&db, 10, 1 << 20).unwrap().is_empty());
        assert_counted(&db);
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
        assert_counted(&db);
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
        assert_eq!(Q.stats(&db).unwrap().len, 2);
        assert_counted(&db);
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
        assert_eq!(Q.stats(&db).unwrap().len, 2);
        assert_counted(&db);
    }

    #[test]
    fn an_ack_of_many_items_counts_each_once_across_its_transactions() {
        let db = db();
        let mut last = 0;
        for i in 0..(ACK_CHUNK as u32 * 2 + 7) {
            last = Q.push(&db, 0, 0, &i.to_be_bytes()).unwrap();
        }
        let tail = Q.push(&db, 0, 0, b"tail").unwrap();
        assert_eq!(Q.ack_through(&db, last).unwrap(), ACK_CHUNK * 2 + 7);
        assert_eq!(
            Q.stats(&db).unwrap(),
            Stats {
                len: 1,
                oldest: Some((tail, 0))
            }
        );
        assert_counted(&db);
    }

    #[test]
    fn a_queue_of_an_earlier_version_is_walked_until_counted_once() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree(Q.tree()).unwrap();
        // Written as an earlier version did: items, no length.
        let mut seqs = Vec::new();
        for _ in 0..3 {
            let seq = db.generate_id().unwrap() + 1;
            tree.insert(seq.to_be_bytes(), value(1, 5, b"old")).unwrap();
            seqs.push(seq);
        }
        assert_eq!(Q.stats(&db).unwrap().len, 3, "walked");
        Q.push(&db, 1, 6, b"pushed before the count").unwrap();
        assert!(tree.get(LEN).unwrap().is_none(), "no length from a guess");
        assert_eq!(Q.count_once(&db).unwrap(), 4);
        assert_eq!(Q.count_once(&db).unwrap(), 0, "once");
        Q.push(&db, 1, 7, b"new").unwrap();
        assert_eq!(Q.ack_through(&db, seqs[1]).unwrap(), 2);
        assert_eq!(Q.stats(&db).unwrap().len, 3);
        assert_counted(&db);
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
        let db = crate::storage::reopen_after_drop(dir.path());
        let second = Q.push(&db, 0, 0, b"b").unwrap();
        assert!(second > first);
        assert_eq!(Q.peek(&db, 10, 100).unwrap().len(), 2);
        assert_eq!(Q.count_once(&db).unwrap(), 2);
        assert_eq!(Q.stats(&db).unwrap().len, 2);
    }
}
