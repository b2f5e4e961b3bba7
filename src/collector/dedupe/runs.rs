//! The exact on-disk index: immutable *runs* of sorted 16-byte fingerprints.
//!
//! A run is written once per flush (per generation of its rows) and never changed; eight runs
//! of the same generation and size tier are merged into one, so a generation holds a few runs
//! per tier (at most 7 per tier, tiers growing 8x). A lookup interpolates the key's position
//! (fingerprints are uniform), reads a 4 KiB window there with `pread`, and narrows until the
//! window brackets the key: one or two reads per run, nothing held in memory.
//!
//! File name: `<generation>-<lsn>.ids`, big-endian fingerprints, nothing else. A run is written
//! to a temporary, fsync'd and renamed, so a crash leaves it whole or absent.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::storage::files::sync_dir;

/// Fingerprints read at once by a lookup (4 KiB).
const WINDOW: u64 = 256;
/// Runs of one tier merged into one of the next.
pub const FAN_IN: usize = 8;
const KEY: u64 = 16;

pub struct Run {
    pub generation: u32,
    pub lsn: u64,
    pub len: u64,
    path: PathBuf,
    file: File,
}

fn file_name(generation: u32, lsn: u64) -> String {
    format!("{generation:08}-{lsn:020}.ids")
}

fn parse_name(name: &str) -> Option<(u32, u64)> {
    let (g, lsn) = name.strip_suffix(".ids")?.split_once('-')?;
    Some((g.parse().ok()?, lsn.parse().ok()?))
}

impl Run {
    fn open(path: PathBuf, generation: u32, lsn: u64) -> io::Result<Run> {
        let file = File::open(&path)?;
        let len = file.metadata()?.len() / KEY;
        Ok(Run {
            generation,
            lsn,
            len,
            path,
            file,
        })
    }

    /// Another handle on the same file, to read it without the index's lock.
    pub fn reopen(&self) -> io::Result<Run> {
        Run::open(self.path.clone(), self.generation, self.lsn)
    }

    /// The size tier: runs of 8^t to 8^(t+1) keys.
    pub fn tier(&self) -> u32 {
        self.len.max(1).ilog(FAN_IN as u64)
    }

    fn read_range(&self, start: u64, end: u64) -> io::Result<Vec<u128>> {
        let mut buf = vec![0u8; ((end - start) * KEY) as usize];
        self.file.read_exact_at(&mut buf, start * KEY)?;
        Ok(buf
            .chunks_exact(KEY as usize)
            .map(|c| u128::from_be_bytes(c.try_into().unwrap_or_default()))
            .collect())
    }

    /// Whether the run holds `key`: interpolation over uniform keys, then a window read.
    pub fn contains(&self, key: u128) -> io::Result<bool> {
        let (mut lo, mut hi) = (0u64, self.len);
        let (mut key_lo, mut key_hi) = (0u128, u128::MAX);
        while lo < hi {
            if hi - lo <= WINDOW {
                return Ok(self.read_range(lo, hi)?.binary_search(&key).is_ok());
            }
            let frac = (key - key_lo) as f64 / (key_hi - key_lo).max(1) as f64;
            let guess = lo + ((hi - lo) as f64 * frac) as u64;
            let start = guess.saturating_sub(WINDOW / 2).clamp(lo, hi - WINDOW);
            let window = self.read_range(start, start + WINDOW)?;
            let (first, last) = (window[0], window[window.len() - 1]);
            if key < first {
                (hi, key_hi) = (start, first);
            } else if key > last {
                (lo, key_lo) = (start + WINDOW, last);
            } else {
                return Ok(window.binary_search(&key).is_ok());
            }
        }
        Ok(false)
    }

    /// Every key, in order, streamed (64 KiB of buffer).
    pub fn keys(&self) -> io::Result<impl Iterator<Item = io::Result<u128>>> {
        let mut r = BufReader::with_capacity(64 * 1024, File::open(&self.path)?);
        let mut left = self.len;
        Ok(std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            left -= 1;
            let mut b = [0u8; KEY as usize];
            Some(r.read_exact(&mut b).map(|()| u128::from_be_bytes(b)))
        }))
    }

    pub fn remove(self) -> io::Result<()> {
        fs::remove_file(&self.path)
    }
}

/// Writes `keys` (sorted) as run `(generation, lsn)`; durable when it returns.
pub fn write(
    dir: &Path,
    generation: u32,
    lsn: u64,
    keys: impl IntoIterator<Item = io::Result<u128>>,
) -> io::Result<Run> {
    let name = file_name(generation, lsn);
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let written = (|| {
        let mut w = BufWriter::with_capacity(64 * 1024, File::create(&tmp)?);
        for k in keys {
            w.write_all(&k?.to_be_bytes())?;
        }
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        // A full disk: give the space of the half-written run back at once.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)?;
    Run::open(path, generation, lsn)
}

/// Merges sorted runs into one sorted run without duplicates, streaming.
pub fn merge(dir: &Path, runs: &[&Run]) -> io::Result<Run> {
    let generation = runs.first().map_or(0, |r| r.generation);
    let lsn = runs.iter().map(|r| r.lsn).max().unwrap_or(0);
    let mut heads = Vec::with_capacity(runs.len());
    for r in runs {
        let mut it = r.keys()?;
        let first = it.next().transpose()?;
        heads.push((first, it));
    }
    let mut last = None;
    let merged = std::iter::from_fn(|| loop {
        let (i, _) = heads
            .iter()
            .enumerate()
            .filter_map(|(i, (k, _))| k.map(|k| (i, k)))
            .min_by_key(|(_, k)| *k)?;
        let (head, it) = &mut heads[i];
        let k = head.take()?;
        match it.next().transpose() {
            Ok(next) => *head = next,
            Err(e) => return Some(Err(e)),
        }
        if last != Some(k) {
            last = Some(k);
            return Some(Ok(k));
        }
    });
    // The merged run takes the newest input's name: the rename replaces it atomically.
    write(dir, generation, lsn, merged)
}

/// The runs in `dir`, oldest generation first; leftovers of an interrupted write are removed.
pub fn open_all(dir: &Path) -> io::Result<Vec<Run>> {
    let mut runs = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(".ids.tmp") {
            fs::remove_file(&path)?;
        } else if let Some((g, lsn)) = parse_name(name) {
            runs.push(Run::open(path, g, lsn)?);
        }
    }
    runs.sort_by_key(|r| (r.generation, r.lsn));
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> u128 {
        let h = crate::collector::dedupe::tests::key(i);
        h | 1 // odd keys are present, even ones absent
    }

    fn sorted(range: std::ops::Range<u64>) -> Vec<u128> {
        let mut v: Vec<u128> = range.map(key).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn a_lookup_finds_every_key_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        for n in [0u64, 1, 255, 256, 257, 20_000] {
            let keys = sorted(0..n);
            let run = write(dir.path(), 1, n, keys.iter().map(|k| Ok(*k))).unwrap();
            assert_eq!(run.len, n);
            assert!(keys.iter().all(|k| run.contains(*k).unwrap()), "n = {n}");
            assert!((0..2000).all(|i| !run.contains(key(i) & !1).unwrap()));
            assert!(!run.contains(0).unwrap() && !run.contains(u128::MAX - 1).unwrap());
        }
    }

    #[test]
    fn merging_keeps_every_key_once_and_replaces_the_newest_input() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), 3, 10, sorted(0..1000).into_iter().map(Ok)).unwrap();
        let b = write(dir.path(), 3, 20, sorted(500..3000).into_iter().map(Ok)).unwrap();
        let merged = merge(dir.path(), &[&a, &b]).unwrap();
        a.remove().unwrap();
        assert_eq!((merged.generation, merged.lsn, merged.len), (3, 20, 3000));
        let keys: Vec<u128> = merged.keys().unwrap().map(|k| k.unwrap()).collect();
        assert_eq!(keys, sorted(0..3000));
        let names: Vec<_> = open_all(dir.path())
            .unwrap()
            .iter()
            .map(|r| r.lsn)
            .collect();
        assert_eq!(names, [20], "one run left");
    }

    #[test]
    fn a_torn_write_leaves_no_run() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("00000001-00000000000000000009.ids.tmp"),
            b"xx",
        )
        .unwrap();
        assert!(open_all(dir.path()).unwrap().is_empty());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
