//! Bounded heavy-hitter counts (top pages, top events): exact while at most `CAP` distinct
//! names are counted, Space-Saving (Metwally et al., 2005) beyond.
//!
//! Space-Saving: a name not yet counted, when the table is full, takes the place of the name
//! with the smallest count `min` and starts at `min + n`. Counts may then overestimate by at
//! most `min`, never underestimate, and every name whose true count exceeds `total / CAP` is
//! kept. Two tables merge by adding counts and keeping the `CAP` largest (the mergeable
//! summaries of Agarwal et al., 2012), so rollups of hours and days keep the same bound.
//!
//! Memory: at most `CAP` names and their counts (1 000 x (name + ~48 bytes)).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Distinct names kept per table.
pub const CAP: usize = 1_000;

/// Names are chosen by clients, so the table's hash is keyed (per process, at random): aHash,
/// several times faster than std's SipHash on short names and as hard to flood.
type Names = HashMap<String, u64, ahash::RandomState>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Top {
    counts: Names,
}

impl Top {
    /// Counts `n` occurrences of `name`.
    pub fn add(&mut self, name: &str, n: u64) {
        if let Some(c) = self.counts.get_mut(name) {
            *c += n;
            return;
        }
        let start = if self.counts.len() < CAP {
            0
        } else {
            // The smallest count (ties: the greatest name, so what is kept does not depend
            // on the hash map's order) makes room.
            let (name, min) = self
                .counts
                .iter()
                .min_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(k, v)| (k.clone(), *v))
                .unwrap_or_default();
            self.counts.remove(&name);
            min
        };
        self.counts.insert(name.to_owned(), start + n);
    }

    /// Adds every count of `other`, then keeps the `CAP` largest.
    pub fn merge(&mut self, other: &Top) {
        for (k, v) in &other.counts {
            *self.counts.entry(k.clone()).or_default() += v;
        }
        if self.counts.len() > CAP {
            let kept = self.ranked(CAP);
            self.counts = kept.into_iter().collect();
        }
    }

    /// Adds every count of `other` and keeps them all (a read over a window: bounded by the
    /// tables read, each at most `CAP`).
    pub fn absorb(&mut self, other: Top) {
        for (k, v) in other.counts {
            *self.counts.entry(k).or_default() += v;
        }
    }

    /// The `n` largest counts, by count then name.
    pub fn ranked(&self, n: usize) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> =
            self.counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Bytes held, roughly: the names plus a map entry each.
    pub fn approx_bytes(&self) -> usize {
        self.counts.keys().map(|k| k.len() + 48).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
