//! A split-block Bloom filter (the layout of Parquet's SBBF): 32-byte blocks of eight 32-bit
//! words; a key picks one block with its high 64 bits and sets one bit in each word with its
//! low 32 bits. One cache line per lookup, fixed size whatever the number of keys.
//!
//! Keys are already uniform (keyed SipHash fingerprints), so no further hashing is needed.

/// The salts of Parquet's split-block Bloom filter.
const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// Bits per key at which the filter answers "maybe" for about 1% of absent keys.
const BITS_PER_KEY_AT_ONE_PERCENT: u64 = 10;

pub struct Filter {
    blocks: Vec<[u32; 8]>,
    inserted: u64,
}

impl Filter {
    /// A filter of `bytes` (rounded down to whole 32-byte blocks, at least one). The memory is
    /// allocated zeroed, so pages are only touched as keys arrive.
    pub fn with_bytes(bytes: usize) -> Filter {
        Filter {
            blocks: vec![[0; 8]; (bytes / 32).max(1)],
            inserted: 0,
        }
    }

    fn block(&self, key: u128) -> usize {
        (((key >> 64) as u64 as u128 * self.blocks.len() as u128) >> 64) as usize
    }

    fn mask(key: u128) -> [u32; 8] {
        let x = key as u32;
        SALT.map(|s| 1 << (x.wrapping_mul(s) >> 27))
    }

    pub fn insert(&mut self, key: u128) {
        let b = self.block(key);
        let mask = Filter::mask(key);
        for (word, bit) in self.blocks[b].iter_mut().zip(mask) {
            *word |= bit;
        }
        self.inserted += 1;
    }

    /// Reads the block of each key and returns a fold of them (for `black_box`). The loads are
    /// independent, so their cache misses overlap: a group's lookups that follow find their
    /// blocks in cache instead of waiting for each miss in turn.
    pub fn touch(&self, keys: &[u128]) -> u32 {
        keys.iter()
            .fold(0, |acc, k| acc ^ self.blocks[self.block(*k)][0])
    }

    /// False: certainly never inserted. True: maybe (look it up exactly).
    pub fn may_contain(&self, key: u128) -> bool {
        let block = &self.blocks[self.block(key)];
        block
            .iter()
            .zip(Filter::mask(key))
            .all(|(w, bit)| w & bit != 0)
    }

    /// Adds every key of `other`, a filter of the same size.
    pub fn union(&mut self, other: &Filter) {
        debug_assert_eq!(self.blocks.len(), other.blocks.len());
        for (a, b) in self.blocks.iter_mut().zip(&other.blocks) {
            for (x, y) in a.iter_mut().zip(b) {
                *x |= y;
            }
        }
        self.inserted += other.inserted;
    }

    pub fn bytes(&self) -> usize {
        self.blocks.len() * 32
    }

    /// Keys it holds with about 1% false positives; beyond, more lookups go to disk.
    pub fn capacity(&self) -> u64 {
        self.bytes() as u64 * 8 / BITS_PER_KEY_AT_ONE_PERCENT
    }

    pub fn inserted(&self) -> u64 {
        self.inserted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::collector::dedupe::tests::key;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives_at_capacity() {
        let mut f = Filter::with_bytes(64 * 1024);
        let n = f.capacity();
        for i in 0..n {
            f.insert(key(i));
        }
        assert!((0..n).all(|i| f.may_contain(key(i))));
        let trials = 200_000;
        let fp = (n..n + trials).filter(|i| f.may_contain(key(*i))).count();
        let rate = fp as f64 / trials as f64;
        assert!(rate < 0.02, "false positive rate {rate}");
        assert_eq!(f.bytes(), 64 * 1024, "the size never changes");
    }

    #[test]
    fn a_union_holds_the_keys_of_both() {
        let (mut a, mut b) = (Filter::with_bytes(4096), Filter::with_bytes(4096));
        a.insert(key(1));
        b.insert(key(2));
        a.union(&b);
        assert!(a.may_contain(key(1)) && a.may_contain(key(2)));
        assert_eq!(a.inserted(), 2);
    }
}
