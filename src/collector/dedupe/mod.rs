//! A shard's memory of messageIds, to drop client retries (api.md §7: a retry within 24 h never
//! makes a second row, across restarts).
//!
//! ```text
//!   writer: fingerprint = SipHash-1-3-128(secret key, app \0 messageId)
//!     -> filter of its generation (filter.rs, fixed size)  "absent"  -> new event
//!     -> "maybe": open ids (memory) -> in-flight flushes (memory) -> runs (runs.rs, disk)
//! ```
//!
//! Time is cut into *generations* of 12 hours of `received_at`. A shard keeps the current
//! generation and the two before it, so an id is remembered for at least 24 hours (24 to 36).
//! Per generation it holds one Bloom filter of fixed size in memory and, on disk, the sorted
//! runs its uploader writes at every flush (before the checkpoint that trims the WAL; ids
//! still in the WAL come back through its replay).
//!
//! Memory is the filters (3 x `filter_bytes` per shard, whatever the traffic) plus the ids of
//! rows not yet flushed (bounded by the file limits). More events than a filter's capacity do
//! not grow memory: they raise its false-positive rate, so more lookups go to disk (counted in
//! `tributary_collector_dedupe_disk_lookups_total`). Disk: 16 bytes per event, once compacted.
//!
//! Start-up reads no run: the filters of older generations are rebuilt from the runs by a
//! background thread, and until each is ready its generation answers "maybe" (a disk lookup),
//! so dedupe stays exact while the service is already serving.

mod filter;
mod runs;

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_channel::{bounded, Receiver};
use siphasher::sip128::{Hasher128, SipHasher13};

pub use filter::Filter;
use runs::Run;

/// Length of a generation: 12 h in µs.
const GENERATION_MICROS: i64 = 12 * 3600 * 1_000_000;
/// Generations remembered: the current one and two before it (at least 24 h).
pub const GENERATIONS: u32 = 3;
const KEY_FILE: &str = "key";

/// The generation of a time in µs.
pub fn generation(micros: i64) -> u32 {
    micros.div_euclid(GENERATION_MICROS).max(0) as u32
}

/// Fingerprints are keyed hashes already: a hash map of them needs no second hash.
#[derive(Default)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

pub type FingerprintSet = HashSet<u128, BuildHasherDefault<Identity>>;
pub type FingerprintMap<V> = HashMap<u128, V, BuildHasherDefault<Identity>>;

/// The ids of one flush, sorted per generation: in memory until its runs are on disk.
pub struct Flushed {
    pub lsn: u64,
    pub ids: Vec<(u32, Vec<u128>)>,
}

impl Flushed {
    pub fn len(&self) -> usize {
        self.ids.iter().map(|(_, v)| v.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct State {
    runs: Vec<Run>,
    in_flight: Vec<Arc<Flushed>>,
    oldest: u32,
}

/// A shard's on-disk index, shared by its writer (lookups) and uploader (writes, merges).
pub struct Index {
    dir: PathBuf,
    key: (u64, u64),
    state: Mutex<State>,
}

impl Index {
    /// Opens (or creates) the index in `<shard>/dedupe`, dropping generations older than the
    /// window and folding in the `seen-<day>.log` files of earlier releases.
    pub fn open(shard_dir: &Path, now: i64) -> io::Result<Arc<Index>> {
        let dir = shard_dir.join("dedupe");
        std::fs::create_dir_all(&dir)?;
        let key = load_key(&dir)?;
        let oldest = generation(now).saturating_sub(GENERATIONS - 1);
        let mut kept = Vec::new();
        for run in runs::open_all(&dir)? {
            if run.generation < oldest {
                run.remove()?;
            } else {
                kept.push(run);
            }
        }
        let index = Index {
            dir,
            key,
            state: Mutex::new(State {
                runs: kept,
                in_flight: Vec::new(),
                oldest,
            }),
        };
        index.migrate(shard_dir, generation(now))?;
        Ok(Arc::new(index))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fingerprint of `(app, messageId)`: keyed, so clients cannot aim collisions.
    pub fn fingerprint(
        &self,
        app: &(impl AsRef<[u8]> + ?Sized),
        message_id: &(impl AsRef<[u8]> + ?Sized),
    ) -> u128 {
        let mut h = SipHasher13::new_with_keys(self.key.0, self.key.1);
        h.write(app.as_ref());
        h.write_u8(0);
        h.write(message_id.as_ref());
        h.finish128().as_u128()
    }

    /// Whether a flushed id (in flight or on disk) of one of `generations` is `key`.
    fn lookup(&self, key: u128, generations: &[u32]) -> io::Result<bool> {
        let state = self.state();
        let in_flight = state.in_flight.iter().flat_map(|f| &f.ids);
        if in_flight
            .filter(|(g, _)| generations.contains(g))
            .any(|(_, ids)| ids.binary_search(&key).is_ok())
        {
            return Ok(true);
        }
        for run in state.runs.iter().rev() {
            if generations.contains(&run.generation) && run.contains(key)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Remembers a flush's ids in memory until `persist` puts them on disk.
    fn hold(&self, flushed: Arc<Flushed>) {
        self.state().in_flight.push(flushed);
    }

    /// Writes a flush's ids as runs (durable on return), then trades the in-memory copy for
    /// them. Called by the uploader before its checkpoint.
    pub fn persist(&self, flushed: &Arc<Flushed>) -> io::Result<()> {
        let mut written = Vec::new();
        for (g, ids) in &flushed.ids {
            written.push(runs::write(
                &self.dir,
                *g,
                flushed.lsn,
                ids.iter().map(|k| Ok(*k)),
            )?);
        }
        let mut state = self.state();
        state.runs.extend(written);
        state.in_flight.retain(|f| !Arc::ptr_eq(f, flushed));
        Ok(())
    }

    /// Merges `FAN_IN` runs of one generation and size tier into one, until none is left to
    /// merge. The merge reads its own handles outside the lock, so lookups go on meanwhile;
    /// the swap is atomic under the lock.
    pub fn compact(&self) -> io::Result<()> {
        while let Some(inputs) = self.pick_merge()? {
            let merged = runs::merge(&self.dir, &inputs.iter().collect::<Vec<_>>())?;
            let names: Vec<(u32, u64)> = inputs.iter().map(|r| (r.generation, r.lsn)).collect();
            let mut state = self.state();
            let (replaced, kept) = std::mem::take(&mut state.runs)
                .into_iter()
                .partition(|r| names.contains(&(r.generation, r.lsn)));
            state.runs = kept;
            // A generation that expired meanwhile lost its runs: the merged one goes too.
            let expired = merged.generation < state.oldest;
            let lsn = merged.lsn;
            if !expired {
                state.runs.push(merged);
                state.runs.sort_by_key(|r| (r.generation, r.lsn));
            }
            drop(state);
            let replaced: Vec<Run> = replaced;
            for r in replaced {
                // The newest input was replaced by the merged run under the same name.
                if r.lsn != lsn || expired {
                    r.remove()?;
                }
            }
        }
        Ok(())
    }

    /// Fresh handles on `FAN_IN` runs of one generation and tier, if any.
    fn pick_merge(&self) -> io::Result<Option<Vec<Run>>> {
        let state = self.state();
        let mut groups: HashMap<(u32, u32), Vec<&Run>> = HashMap::new();
        for r in &state.runs {
            let group = groups.entry((r.generation, r.tier())).or_default();
            group.push(r);
            if group.len() == runs::FAN_IN {
                return group
                    .iter()
                    .map(|r| r.reopen())
                    .collect::<io::Result<_>>()
                    .map(Some);
            }
        }
        Ok(None)
    }

    /// Forgets generations older than `oldest` and deletes their runs.
    fn expire(&self, oldest: u32) -> io::Result<()> {
        let mut state = self.state();
        state.oldest = oldest;
        let (old, kept) = std::mem::take(&mut state.runs)
            .into_iter()
            .partition(|r| r.generation < oldest);
        state.runs = kept;
        drop(state);
        for r in old {
            r.remove()?;
        }
        Ok(())
    }

    /// The runs' generations, to rebuild their filters.
    fn generations(&self) -> Vec<u32> {
        let mut g: Vec<u32> = self.state().runs.iter().map(|r| r.generation).collect();
        g.sort_unstable();
        g.dedup();
        g
    }

    /// Reads the runs of `generation` into a filter of `bytes` (the start-up rebuild).
    fn read_filter(&self, generation: u32, bytes: usize) -> io::Result<Filter> {
        let mut filter = Filter::with_bytes(bytes);
        let runs: Vec<Run> = {
            let state = self.state();
            let mut v = Vec::new();
            for r in state.runs.iter().filter(|r| r.generation == generation) {
                v.push(r.reopen()?);
            }
            v
        };
        for run in runs {
            for k in run.keys()? {
                filter.insert(k?);
            }
        }
        Ok(filter)
    }

    /// Turns the `seen-<day>.log` files of earlier releases into a run of this generation.
    fn migrate(&self, shard_dir: &Path, now_gen: u32) -> io::Result<()> {
        let mut ids = Vec::new();
        let mut old = Vec::new();
        for entry in std::fs::read_dir(shard_dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("seen-") && name.ends_with(".log") {
                let text = std::fs::read_to_string(&path)?;
                ids.extend(
                    text.lines()
                        .filter_map(|l| l.split_once('\t'))
                        .map(|(a, m)| self.fingerprint(a, m)),
                );
                old.push(path);
            }
        }
        if old.is_empty() {
            return Ok(());
        }
        ids.sort_unstable();
        ids.dedup();
        let run = runs::write(&self.dir, now_gen, 0, ids.into_iter().map(Ok))?;
        self.state().runs.push(run);
        for p in old {
            std::fs::remove_file(p)?;
        }
        tracing::info!(dir = %shard_dir.display(), "dedupe files of an earlier release converted");
        Ok(())
    }
}

/// The shard's secret hash key, created once.
fn load_key(dir: &Path) -> io::Result<(u64, u64)> {
    let path = dir.join(KEY_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) if b.len() == 16 => b,
        _ => {
            let mut b = vec![0u8; 16];
            getrandom::fill(&mut b).map_err(io::Error::other)?;
            crate::storage::files::write_atomic(dir, KEY_FILE, &b)?;
            b
        }
    };
    let half = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or_default());
    Ok((half(&bytes[..8]), half(&bytes[8..])))
}

/// One generation's filter; `complete` once it holds every id of the generation on disk.
struct Generation {
    id: u32,
    filter: Filter,
    complete: bool,
}

/// A rebuilt filter of one generation, from the start-up thread.
type Rebuilt = (u32, io::Result<Filter>);

/// The writer's side of the dedupe memory: the filters and the ids of rows not yet flushed.
pub struct Seen {
    index: Arc<Index>,
    filter_bytes: usize,
    /// Oldest first; the last is the current generation.
    generations: Vec<Generation>,
    /// Ids of the rows in the open files, with their generation.
    open: FingerprintMap<u32>,
    rebuilt: Option<Receiver<Rebuilt>>,
    disk_lookups: prometheus_client::metrics::counter::Counter,
}

impl Seen {
    /// The filters of the window, empty; a thread fills those of the generations on disk.
    pub fn open(
        index: Arc<Index>,
        now: i64,
        filter_bytes: usize,
        disk_lookups: prometheus_client::metrics::counter::Counter,
    ) -> io::Result<Seen> {
        let on_disk = index.generations();
        let current = generation(now).max(on_disk.last().copied().unwrap_or(0));
        let oldest = generation(now).saturating_sub(GENERATIONS - 1);
        let generations = (oldest..=current)
            .map(|id| Generation {
                id,
                filter: Filter::with_bytes(filter_bytes),
                complete: !on_disk.contains(&id),
            })
            .collect();
        let rebuilt = if on_disk.is_empty() {
            None
        } else {
            // One filter in the channel and one being built: at most 2 x filter_bytes more.
            let (tx, rx) = bounded(1);
            let index = index.clone();
            std::thread::Builder::new()
                .name("dedupe-rebuild".into())
                .spawn(move || {
                    for g in on_disk.into_iter().rev() {
                        if tx.send((g, index.read_filter(g, filter_bytes))).is_err() {
                            return;
                        }
                    }
                })?;
            Some(rx)
        };
        Ok(Seen {
            index,
            filter_bytes,
            generations,
            open: FingerprintMap::default(),
            rebuilt,
            disk_lookups,
        })
    }

    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// Takes the filters the start-up thread has rebuilt so far.
    pub fn poll_rebuilt(&mut self) {
        let Some(rx) = &self.rebuilt else { return };
        loop {
            match rx.try_recv() {
                Ok((g, Ok(filter))) => {
                    if let Some(gen) = self.generations.iter_mut().find(|x| x.id == g) {
                        gen.filter.union(&filter);
                        gen.complete = true;
                        tracing::info!(
                            generation = g,
                            ids = filter.inserted(),
                            "dedupe filter rebuilt"
                        );
                    }
                }
                Ok((g, Err(e))) => {
                    // The generation stays incomplete: its lookups keep going to disk.
                    tracing::error!(generation = g, error = %e, "dedupe filter not rebuilt");
                }
                Err(crossbeam_channel::TryRecvError::Empty) => return,
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    self.rebuilt = None;
                    return;
                }
            }
        }
    }

    /// True when `key` was received in the window. Exact: a filter's "maybe" is checked in
    /// memory and then on disk; a disk error is logged and counts as unseen (a possible
    /// duplicate row rather than a lost event).
    pub fn contains(&self, key: u128) -> bool {
        // A complete generation with no id (the older ones after a fresh start) is skipped
        // without touching its memory.
        let maybe =
            |g: &Generation| !g.complete || (g.filter.inserted() > 0 && g.filter.may_contain(key));
        if !self.generations.iter().any(maybe) {
            return false;
        }
        if self.open.contains_key(&key) {
            return true;
        }
        let candidates: Vec<u32> = self
            .generations
            .iter()
            .filter(|g| maybe(g))
            .map(|g| g.id)
            .collect();
        self.disk_lookups.inc();
        self.index.lookup(key, &candidates).unwrap_or_else(|e| {
            tracing::error!(error = %e, "dedupe lookup failed; the event is kept");
            false
        })
    }

    /// Brings the filter blocks of `keys` into cache, all at once, in every generation that
    /// holds ids: a group's [`Seen::contains`] or [`Seen::insert`] calls then do not each wait
    /// for a cache miss (the filters are megabytes, read at random).
    pub fn warm(&self, keys: &[u128]) {
        for g in self.generations.iter().filter(|g| g.filter.inserted() > 0) {
            std::hint::black_box(g.filter.touch(keys));
        }
    }

    /// Remembers `key`, received at `received_at` (µs).
    pub fn insert(&mut self, key: u128, received_at: i64) {
        let g = generation(received_at);
        self.advance(g);
        if let Some(gen) = self.generations.iter_mut().find(|x| x.id == g) {
            gen.filter.insert(key);
        }
        self.open.insert(key, g);
    }

    /// The ids of the rows being flushed, held in memory until the uploader writes them.
    pub fn take_open(&mut self, lsn: u64) -> Arc<Flushed> {
        let mut by_gen: std::collections::BTreeMap<u32, Vec<u128>> = Default::default();
        for (key, g) in self.open.drain() {
            by_gen.entry(g).or_default().push(key);
        }
        let ids = by_gen
            .into_iter()
            .map(|(g, mut v)| {
                v.sort_unstable();
                (g, v)
            })
            .collect();
        let flushed = Arc::new(Flushed { lsn, ids });
        self.index.hold(flushed.clone());
        flushed
    }

    /// Starts generation `g` if it is newer than the current one, forgetting those that
    /// leave the window (and their runs).
    fn advance(&mut self, g: u32) {
        if self.generations.last().is_some_and(|x| x.id >= g) {
            return;
        }
        let oldest = g.saturating_sub(GENERATIONS - 1);
        self.generations.retain(|x| x.id >= oldest);
        self.generations.push(Generation {
            id: g,
            filter: Filter::with_bytes(self.filter_bytes),
            complete: true,
        });
        if let Err(e) = self.index.expire(oldest) {
            tracing::warn!(error = %e, "expired dedupe runs not removed");
        }
    }

    /// Moves to the generation of `now` when it changes.
    pub fn roll(&mut self, now: i64) {
        self.advance(generation(now));
    }

    /// The filters' memory, whatever the traffic.
    pub fn filter_bytes(&self) -> usize {
        self.generations.iter().map(|g| g.filter.bytes()).sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A stand-in for fingerprints: splitmix64 twice.
    pub fn key(i: u64) -> u128 {
        let mix = |mut z: u64| {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        (u128::from(mix(i)) << 64) | u128::from(mix(!i))
    }

    const HOUR: i64 = 3_600_000_000;
    /// An hour into a generation.
    const T0: i64 = 41_000 * GENERATION_MICROS + HOUR;

    fn seen(dir: &Path, now: i64) -> Seen {
        Seen::open(
            Index::open(dir, now).unwrap(),
            now,
            64 * 1024,
            Default::default(),
        )
        .unwrap()
    }

    /// Writes what the writer holds the way the uploader does.
    fn flush(seen: &mut Seen, lsn: u64) {
        let flushed = seen.take_open(lsn);
        seen.index().persist(&flushed).unwrap();
    }

    fn wait_rebuilt(seen: &mut Seen) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.generations.iter().any(|g| !g.complete) {
            assert!(Instant::now() < deadline, "filters not rebuilt");
            seen.poll_rebuilt();
            std::thread::yield_now();
        }
    }

    #[test]
    fn ids_are_found_while_open_in_flight_on_disk_and_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = seen(dir.path(), T0);
        for i in 0..1000 {
            s.insert(key(i), T0);
        }
        let present = |s: &Seen| (0..1000).all(|i| s.contains(key(i)));
        let absent = |s: &Seen| (1000..3000).all(|i| !s.contains(key(i)));
        assert!(present(&s) && absent(&s), "open");
        let flushed = s.take_open(7);
        assert!(present(&s) && absent(&s), "in flight");
        s.index().persist(&flushed).unwrap();
        assert!(present(&s) && absent(&s), "on disk");
        drop(s);
        // A restart answers exactly at once (from disk), before its filters are rebuilt...
        let mut s = seen(dir.path(), T0 + HOUR);
        assert!(s.generations.iter().any(|g| !g.complete));
        assert!(present(&s) && absent(&s), "restarted, filters not rebuilt");
        // ...and from the rebuilt filters afterwards, with few disk lookups for new ids.
        wait_rebuilt(&mut s);
        assert!(present(&s) && absent(&s), "filters rebuilt");
        let before = s.disk_lookups.get();
        assert!((5000..15_000).all(|i| !s.contains(key(i))));
        assert!(
            s.disk_lookups.get() - before < 300,
            "the filter rules out most new ids"
        );
    }

    #[test]
    fn an_id_is_remembered_for_24_hours_and_forgotten_with_its_runs_after_36() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = seen(dir.path(), T0);
        s.insert(key(1), T0);
        flush(&mut s, 1);
        s.roll(T0 + 24 * HOUR);
        assert!(s.contains(key(1)), "24 h later");
        s.insert(key(2), T0 + 24 * HOUR);
        flush(&mut s, 2);
        let runs = |dir: &Path| std::fs::read_dir(dir.join("dedupe")).unwrap().count() - 1;
        assert_eq!(runs(dir.path()), 2);
        s.roll(T0 + 36 * HOUR);
        assert!(!s.contains(key(1)), "three generations later");
        assert!(s.contains(key(2)));
        assert_eq!(runs(dir.path()), 1, "the old run is deleted");
        assert!(s.generations.len() <= GENERATIONS as usize);
    }

    #[test]
    fn runs_are_merged_by_tiers_and_stay_exact() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = seen(dir.path(), T0);
        for lsn in 0..runs::FAN_IN as u64 * 2 {
            for i in 0..100 {
                s.insert(key(lsn * 100 + i), T0);
            }
            flush(&mut s, lsn);
            s.index().compact().unwrap();
        }
        let state = s.index().state();
        let lens: Vec<u64> = state.runs.iter().map(|r| r.len).collect();
        drop(state);
        assert_eq!(lens, [800, 800], "two merges of eight runs");
        assert!((0..1600).all(|i| s.contains(key(i))));
        assert!((1600..3000).all(|i| !s.contains(key(i))));
        let files = std::fs::read_dir(dir.path().join("dedupe"))
            .unwrap()
            .count();
        assert_eq!(files, 3, "two runs and the key");
    }

    #[test]
    fn the_seen_logs_of_an_earlier_release_become_a_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("seen-20000.log"),
            "app\tmsg_1\napp\tmsg_2\n",
        )
        .unwrap();
        let index = Index::open(dir.path(), T0).unwrap();
        let (k1, k3) = (
            index.fingerprint("app", "msg_1"),
            index.fingerprint("app", "msg_3"),
        );
        let s = Seen::open(index, T0, 4096, Default::default()).unwrap();
        assert!(s.contains(k1) && !s.contains(k3));
        assert!(!dir.path().join("seen-20000.log").exists());
    }

    #[test]
    fn fingerprints_are_keyed_per_shard_and_stable_across_restarts() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let f = |dir: &Path| Index::open(dir, T0).unwrap().fingerprint("app", "msg_1");
        assert_eq!(f(a.path()), f(a.path()));
        assert_ne!(f(a.path()), f(b.path()));
        let app_split = Index::open(a.path(), T0).unwrap();
        assert_ne!(
            app_split.fingerprint("ap", "pmsg"),
            app_split.fingerprint("app", "msg")
        );
    }

    #[test]
    fn filter_memory_does_not_grow_with_ids() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = seen(dir.path(), T0);
        let before = s.filter_bytes();
        for i in 0..200_000 {
            s.insert(key(i), T0);
            if i % 50_000 == 0 {
                flush(&mut s, i);
            }
        }
        assert_eq!(s.filter_bytes(), before);
        assert_eq!(before, GENERATIONS as usize * 64 * 1024);
    }
}
