//! A shard's memory of recent messageIds, to drop client retries (api.md §7: 24 h window).
//!
//! In memory: a hash set of `(app, messageId)` with the day each was received. On disk: the
//! uploader appends the ids of every flushed event to `seen-<day>.log` in the shard's directory
//! (fsync'd before the checkpoint), and ids still in the WAL come back with its replay. At start,
//! the files of today and yesterday are loaded, so the window is 24 to 48 hours and survives
//! restarts. Older files are deleted as days pass.
//!
//! This keeps the hot path free of disk lookups: checking and recording an id costs a hash.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

/// Day number (days since the epoch) of a timestamp in µs.
pub fn day(micros: i64) -> u32 {
    micros.div_euclid(86_400_000_000).max(0) as u32
}

/// 128 bits of SipHash over the pair: collisions are out of reach in any realistic window.
fn fingerprint(app: &str, message_id: &str) -> u128 {
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (salt, app, message_id).hash(&mut h);
        h.finish() as u128
    };
    (half(0) << 64) | half(1)
}

#[derive(Default)]
pub struct Seen {
    ids: HashMap<u128, u32>,
    oldest_day: u32,
}

fn file_name(day: u32) -> String {
    format!("seen-{day}.log")
}

/// The day of a `seen-<day>.log` path.
fn file_day(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("seen-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

impl Seen {
    /// Loads the ids received since yesterday (relative to `today`) from `dir`, and deletes
    /// older files.
    pub fn load(dir: &Path, today: u32) -> io::Result<Seen> {
        let mut seen = Seen {
            ids: HashMap::new(),
            oldest_day: today.saturating_sub(1),
        };
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            let Some(d) = file_day(&path) else { continue };
            if d < seen.oldest_day {
                fs::remove_file(&path)?;
                continue;
            }
            for line in BufReader::new(fs::File::open(&path)?).lines() {
                // A torn last line (a crash mid-append) is simply an id we do not remember.
                if let Some((app, id)) = line?.split_once('\t') {
                    seen.ids.insert(fingerprint(app, id), d);
                }
            }
        }
        Ok(seen)
    }

    /// True when the pair was received in the window.
    pub fn contains(&self, app: &str, message_id: &str) -> bool {
        self.ids
            .get(&fingerprint(app, message_id))
            .is_some_and(|d| *d >= self.oldest_day)
    }

    pub fn insert(&mut self, app: &str, message_id: &str, day: u32) {
        self.ids.insert(fingerprint(app, message_id), day);
    }

    /// Forgets what is older than yesterday; deletes its files from `dir`.
    pub fn expire(&mut self, dir: &Path, today: u32) -> io::Result<()> {
        let oldest = today.saturating_sub(1);
        if oldest <= self.oldest_day {
            return Ok(());
        }
        self.oldest_day = oldest;
        self.ids.retain(|_, d| *d >= oldest);
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if file_day(&path).is_some_and(|d| d < oldest) {
                fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Appends `(day, app, messageId)` entries to their day files and fsyncs them.
pub fn persist(dir: &Path, entries: &[(u32, String, String)]) -> io::Result<()> {
    let mut by_day: HashMap<u32, Vec<u8>> = HashMap::new();
    for (d, app, id) in entries {
        let buf = by_day.entry(*d).or_default();
        buf.extend_from_slice(app.as_bytes());
        buf.push(b'\t');
        buf.extend_from_slice(id.as_bytes());
        buf.push(b'\n');
    }
    for (d, buf) in by_day {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(file_name(d)))?;
        f.write_all(&buf)?;
        f.sync_data()?;
    }
    crate::storage::files::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_survive_a_reload_for_two_days_and_then_expire() {
        let dir = tempfile::tempdir().unwrap();
        let mut seen = Seen::load(dir.path(), 100).unwrap();
        assert!(!seen.contains("app", "msg_1"));
        seen.insert("app", "msg_1", 100);
        persist(
            dir.path(),
            &[
                (100, "app".into(), "msg_1".into()),
                (99, "app".into(), "msg_0".into()),
            ],
        )
        .unwrap();
        let reloaded = Seen::load(dir.path(), 101).unwrap();
        assert!(reloaded.contains("app", "msg_1"));
        assert!(!reloaded.contains("other", "msg_1"), "ids are per app");
        assert!(
            !reloaded.contains("app", "msg_0"),
            "day 99 is older than yesterday"
        );
        let mut later = Seen::load(dir.path(), 101).unwrap();
        later.expire(dir.path(), 101).unwrap();
        assert!(
            later.contains("app", "msg_1"),
            "the same day changes nothing"
        );
        later.expire(dir.path(), 102).unwrap();
        assert!(
            !later.contains("app", "msg_1"),
            "day 100 is older than yesterday on day 102"
        );
        assert!(later.is_empty());
        assert!(!dir.path().join("seen-100.log").exists());
    }
}
