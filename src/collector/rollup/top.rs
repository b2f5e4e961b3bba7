//! Bounded heavy-hitter counts (top pages, top events): exact while at most `CAP` distinct
//! names are counted, Space-Saving (Metwally et al., 2005) beyond.
//!
//! Space-Saving: a name not yet counted, when the table is full, takes the place of the name
//! with the smallest count `min` and starts at `min + n`. Counts may then overestimate by at
//! most `min`, never underestimate, and every name whose true count exceeds `total / CAP` is
//! kept. Two tables merge by adding counts and keeping the `CAP` largest (the mergeable
//! summaries of Agarwal et al., 2012), so rollups of hours and days keep the same bound.
//!
//! The names are a binary min-heap by count (ties: the greatest name first), indexed by a hash
//! table of their positions, so the name to replace is always at the top: an addition costs
//! O(log CAP) however many distinct names a site has (a scan of the table for its smallest
//! count took 11 µs per new name once it was full; `benches/collector.rs`, `rollup/`).
//!
//! Memory: at most `CAP` names and their entries (1 000 x (name + ~80 bytes)).

use std::collections::HashMap;

use hashbrown::HashTable;
use serde::{Deserialize, Serialize};

/// Distinct names kept per table.
pub const CAP: usize = 1_000;

/// A table as it is stored and sent: each name and its count.
type Counts = HashMap<String, u64>;

/// One counted name.
#[derive(Debug, Clone)]
struct Slot {
    name: String,
    count: u64,
    /// The name's hash (the index's key).
    hash: u64,
    /// Its position in the heap.
    at: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "Counts", into = "Counts")]
pub struct Top {
    slots: Vec<Slot>,
    /// Slot numbers in heap order: each slot comes before its children (see `before`).
    heap: Vec<usize>,
    /// Slot numbers by their name's hash.
    index: HashTable<usize>,
    /// Names are chosen by clients, so the index's hash is keyed (per process, at random):
    /// aHash, several times faster than std's SipHash on short names and as hard to flood.
    hasher: ahash::RandomState,
}

impl Top {
    /// Counts `n` occurrences of `name`.
    pub fn add(&mut self, name: &str, n: u64) {
        let hash = self.hasher.hash_one(name);
        match self.find(name, hash) {
            Some(id) => self.grow(id, n),
            None if self.slots.len() < CAP => self.push(name.to_owned(), n, hash),
            None => self.replace_smallest(name, n, hash),
        }
    }

    /// Adds every count of `other`, then keeps the `CAP` largest.
    pub fn merge(&mut self, other: &Top) {
        for s in &other.slots {
            self.add_kept(&s.name, s.count);
        }
        if self.len() > CAP {
            *self = self.ranked(CAP).into_iter().collect::<Counts>().into();
        }
    }

    /// Adds every count of `other` and keeps them all (a read over a window: bounded by the
    /// tables read, each at most `CAP`).
    pub fn absorb(&mut self, other: Top) {
        for s in other.slots {
            self.add_kept(&s.name, s.count);
        }
    }

    /// The `n` largest counts, by count then name.
    pub fn ranked(&self, n: usize) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = self
            .slots
            .iter()
            .map(|s| (s.name.clone(), s.count))
            .collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes held, roughly: the names plus their slot, heap and index entries.
    pub fn approx_bytes(&self) -> usize {
        self.slots.iter().map(|s| s.name.len() + 80).sum()
    }

    /// `name`'s count, if it has one.
    fn get(&self, name: &str) -> Option<u64> {
        let id = self.find(name, self.hasher.hash_one(name))?;
        Some(self.slots[id].count)
    }

    fn find(&self, name: &str, hash: u64) -> Option<usize> {
        let slots = &self.slots;
        self.index.find(hash, |&s| slots[s].name == name).copied()
    }

    /// Adds `n` to `name`, never replacing another (a merge trims afterwards).
    fn add_kept(&mut self, name: &str, n: u64) {
        let hash = self.hasher.hash_one(name);
        match self.find(name, hash) {
            Some(id) => self.grow(id, n),
            None => self.push(name.to_owned(), n, hash),
        }
    }

    fn grow(&mut self, id: usize, n: u64) {
        self.slots[id].count += n;
        self.sift_down(self.slots[id].at);
    }

    /// The smallest count (ties: the greatest name, so what is kept does not depend on the
    /// hash's key) makes room: its slot takes the name, from its count on.
    fn replace_smallest(&mut self, name: &str, n: u64, hash: u64) {
        let id = self.heap[0];
        let old = self.slots[id].hash;
        if let Ok(entry) = self.index.find_entry(old, |&s| s == id) {
            entry.remove();
        }
        let slot = &mut self.slots[id];
        slot.name.clear();
        slot.name.push_str(name);
        slot.count += n;
        slot.hash = hash;
        let slots = &self.slots;
        self.index.insert_unique(hash, id, |&s| slots[s].hash);
        self.sift_down(0);
    }

    fn push(&mut self, name: String, count: u64, hash: u64) {
        let id = self.slots.len();
        let at = self.heap.len();
        self.slots.push(Slot {
            name,
            count,
            hash,
            at,
        });
        self.heap.push(id);
        let slots = &self.slots;
        self.index.insert_unique(hash, id, |&s| slots[s].hash);
        self.sift_up(at);
    }

    /// Whether the slot at heap position `a` comes before the one at `b`: a smaller count, or
    /// the same count and a greater name (the first to be replaced).
    fn before(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.slots[self.heap[a]], &self.slots[self.heap[b]]);
        a.count < b.count || (a.count == b.count && a.name > b.name)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.slots[self.heap[a]].at = a;
        self.slots[self.heap[b]].at = b;
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if !self.before(at, parent) {
                break;
            }
            self.swap(at, parent);
            at = parent;
        }
    }

    /// Moves the slot at `at` down after its count grew (or it took a new name).
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut first = at;
            if left < self.heap.len() && self.before(left, first) {
                first = left;
            }
            if right < self.heap.len() && self.before(right, first) {
                first = right;
            }
            if first == at {
                break;
            }
            self.swap(at, first);
            at = first;
        }
    }
}

impl From<Counts> for Top {
    fn from(counts: Counts) -> Top {
        let mut top = Top::default();
        for (name, count) in counts {
            let hash = top.hasher.hash_one(name.as_str());
            top.push(name, count, hash);
        }
        top
    }
}

impl From<Top> for Counts {
    fn from(top: Top) -> Counts {
        top.slots.into_iter().map(|s| (s.name, s.count)).collect()
    }
}

/// Two tables are equal when they count the same names the same.
impl PartialEq for Top {
    fn eq(&self, other: &Top) -> bool {
        self.len() == other.len()
            && self
                .slots
                .iter()
                .all(|s| other.get(&s.name) == Some(s.count))
    }
}

impl Eq for Top {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Space-Saving as first written: a map, scanned for its smallest count when full.
    #[derive(Default)]
    struct Scanned(Counts);

    impl Scanned {
        fn add(&mut self, name: &str, n: u64) {
            if let Some(c) = self.0.get_mut(name) {
                *c += n;
                return;
            }
            let start = if self.0.len() < CAP {
                0
            } else {
                let (name, min) = self
                    .0
                    .iter()
                    .min_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                    .map(|(k, v)| (k.clone(), *v))
                    .unwrap();
                self.0.remove(&name);
                min
            };
            self.0.insert(name.to_owned(), start + n);
        }
    }

    #[test]
    fn the_heap_replaces_the_name_a_scan_for_the_smallest_count_would() {
        // Skewed names (a few heavy, a long tail), counts of 1 to 3, with ties everywhere.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rng = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut heap, mut scan) = (Top::default(), Scanned::default());
        for step in 0..30_000u64 {
            let r = rng();
            let name = match r % 10 {
                0..=2 => format!("/heavy{}", r % 37),
                _ => format!("/tail{}", r % 5_000),
            };
            let n = 1 + (r >> 20) % 3;
            heap.add(&name, n);
            scan.add(&name, n);
            if step % 997 == 0 {
                assert_eq!(Counts::from(heap.clone()), scan.0, "step {step}");
            }
        }
        assert_eq!(heap.len(), CAP);
        assert_eq!(Counts::from(heap.clone()), scan.0);
        // Read back from its stored form, it goes on the same way.
        let mut back: Top = serde_json::from_slice(&serde_json::to_vec(&heap).unwrap()).unwrap();
        assert_eq!(back, heap);
        for i in 0..3_000 {
            back.add(&format!("/later{i}"), 1);
            scan.add(&format!("/later{i}"), 1);
        }
        assert_eq!(Counts::from(back), scan.0);
    }

    #[test]
    fn counts_are_exact_up_to_the_cap() {
        let mut t = Top::default();
        for i in 0..CAP {
            for _ in 0..(i % 7 + 1) {
                t.add(&format!("/p{i}"), 1);
            }
        }
        assert_eq!(t.len(), CAP);
        let top = t.ranked(3);
        assert_eq!(top[0].1, 7);
        assert_eq!(top[0].0, "/p104", "ties ranked by name");
    }

    #[test]
    fn beyond_the_cap_the_table_stays_bounded_and_keeps_the_heavy_hitters() {
        let mut t = Top::default();
        // 50 heavy pages among 20 000 pages seen once each, interleaved.
        for i in 0..20_000 {
            t.add(&format!("/rare{i}"), 1);
            if i % 10 == 0 {
                t.add(&format!("/heavy{}", (i / 10) % 50), 1);
            }
        }
        assert_eq!(t.len(), CAP, "never more than CAP names");
        let top: Vec<String> = t.ranked(10).into_iter().map(|(k, _)| k).collect();
        assert!(top.iter().all(|k| k.starts_with("/heavy")), "{top:?}");
        // Space-Saving never underestimates: each heavy page was seen 40 times.
        assert!(t.ranked(50).iter().all(|(_, c)| *c >= 40));
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_cap() {
        let (mut a, mut b) = (Top::default(), Top::default());
        a.add("/x", 3);
        b.add("/x", 2);
        b.add("/y", 1);
        a.merge(&b);
        assert_eq!(a.ranked(10), [("/x".to_owned(), 5), ("/y".to_owned(), 1)]);
        let mut big = Top::default();
        for i in 0..CAP {
            big.add(&format!("/b{i}"), 2);
        }
        a.merge(&big);
        assert_eq!(a.len(), CAP);
        assert_eq!(a.ranked(1)[0], ("/x".to_owned(), 5));
    }
}
