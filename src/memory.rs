//! When freed memory goes back to the system.
//!
//! The binary allocates with mimalloc (v3). mimalloc returns freed pages to the system by
//! arena: the first page freed after a purge sets the arena's purge time `purge_delay` later,
//! and when that time comes *every* page freed since is decommitted, even one freed a moment
//! before. Under steady load the collector frees and reuses its buffers (row groups, files,
//! request bodies) every few seconds, so with any delay short enough to matter RSS fell by
//! 20-35 MB at each purge and climbed back within seconds, forever (BENCHMARKS.md, the soak).
//!
//! The rule here instead:
//! - **Under load**, freed memory is kept for [`PURGE_DELAY`] (an hour) and reused. RSS sits at
//!   the high-water mark of the load, which `collector.max_memory_mb` and the fixed pools bound
//!   (ARCHITECTURE.md, "Memory budget"). Under steady load the arenas' purge still comes, once
//!   an hour, with the same drop and refault as before; after a spike, the excess goes back
//!   within the hour.
//! - **When idle**, it goes back: once no batch was committed, no file flushed and no upload
//!   made for `collector.release_memory_after_idle_secs` (60 s; see [`note_activity`]), the
//!   writer, encoder, uploader, store and HTTP worker threads each call [`release_if_idle`] on
//!   their next pass (at most 10 s later), once per quiet period. With the defaults that is
//!   about two minutes after the last batch: the last open file is flushed when its oldest row
//!   is `collector.max_file_age_ms` old, and that work restarts the quiet period.
//! - A release (`mi_collect(true)`) frees the pages the calling thread still holds (retired
//!   pages, blocks other threads freed into its pages), which only that thread can do, and
//!   then purges every arena of the process; releases take turns, because mimalloc skips a
//!   purge while another runs. `tributary_collector_idle_memory_releases_total` counts them by
//!   thread kind.
//!
//! `MIMALLOC_PURGE_DELAY` in the environment overrides the delay (milliseconds; `-1` never
//! purges, not even when idle).
//!
//! The C code in the process (zstd, through Parquet) allocates with glibc's malloc instead.
//! Parquet makes a zstd codec (a compression and a decompression context) for each column of
//! each row group and drops it at the row group's end: with glibc's defaults each thread's
//! arena gave the freed contexts back at once (`madvise`) and faulted them in again at the next
//! row group, 14% of the encoder thread's samples at saturation. So [`configure_allocator`]
//! raises glibc's trim and mmap thresholds to [`C_HEAP_KEEP`]: an arena keeps what its thread's
//! C code freed (never more than that code had allocated at once: about 6 MB for an encoder) for
//! reuse, and [`release`] gives it back when idle (`malloc_trim`). `GLIBC_TUNABLES` with a
//! `glibc.malloc.` setting in the environment leaves glibc's own settings alone.

// The allocator calls below are the crate's only unsafe code (Cargo.toml denies it elsewhere).
#![allow(
    unsafe_code,
    reason = "mimalloc's C API (mi_collect, mi_option_get) and glibc's (mallopt, malloc_trim, getrusage) have no safe wrapper"
)]

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// How long memory freed under load is kept for reuse before it goes back to the system.
pub const PURGE_DELAY: Duration = Duration::from_secs(3600);

/// The longest a sleeping thread waits before it checks for idleness again.
const MAX_POLL: Duration = Duration::from_secs(10);

/// mimalloc's `purge_delay` option (`mi_option_purge_delay` in mimalloc.h).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Counts the collector's work: batches taken, files flushed, uploads made.
static ACTIVITY: AtomicU64 = AtomicU64::new(0);

/// How long the collector must be quiet before threads give their free memory back, in ms
/// (`collector.release_memory_after_idle_secs`).
static IDLE_MS: AtomicU64 = AtomicU64::new(60_000);

/// The threads that give memory back, one label each in the releases counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Thread {
    Writer,
    Encoder,
    Stager,
    Uploader,
    Store,
    Http,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ThreadLabel {
    thread: &'static str,
}

/// Idle releases so far, by thread kind (served at `GET /metrics`).
pub static RELEASES: LazyLock<Family<ThreadLabel, Counter>> = LazyLock::new(Family::default);

/// glibc's trim and mmap thresholds for the C code's allocations (see the module doc): above
/// what an encoder's zstd contexts take at once, well under an arena's 64 MiB.
pub const C_HEAP_KEEP: usize = 16 << 20;

/// Sets the purge delay, unless `MIMALLOC_PURGE_DELAY` is set, and glibc's thresholds, unless
/// `GLIBC_TUNABLES` sets malloc's. Call first thing in `main`.
pub fn configure_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets a documented runtime option; no pointer is passed.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY.as_millis() as _)
        };
    }
    let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."));
    if !tuned {
        keep_c_heap();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_c_heap() {
    let keep = C_HEAP_KEEP as libc::c_int;
    // SAFETY: `mallopt` sets documented malloc parameters; no pointer is passed. Setting the
    // mmap threshold first keeps the contexts in the arenas (a fixed trim threshold turns off
    // glibc's own raising of it).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, keep);
        libc::mallopt(libc::M_TRIM_THRESHOLD, keep);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_c_heap() {}

/// Gives the free memory of glibc's arenas back to the system.
fn trim_c_heap() {
    // SAFETY: trims the arenas of glibc's malloc; takes no pointer.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Sets how long the collector must be quiet before threads give memory back (at start).
pub fn set_idle(idle: Duration) {
    let ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    IDLE_MS.store(ms, Ordering::Relaxed);
}

fn idle() -> Duration {
    Duration::from_millis(IDLE_MS.load(Ordering::Relaxed))
}

/// How long a thread with nothing else to wake it may sleep between [`release_if_idle`] calls.
pub fn poll() -> Duration {
    idle().clamp(Duration::from_millis(100), MAX_POLL)
}

/// Records that the collector did some work, which restarts the idle clock of every thread.
pub fn note_activity() {
    ACTIVITY.fetch_add(1, Ordering::Relaxed);
}

/// Returns the calling thread's free memory, and what glibc's arenas hold free, to the system now.
pub fn release() {
    // mimalloc lets one thread purge the arenas at a time and skips the others: take turns,
    // so no release is lost to another one running. A poisoned lock guards nothing.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: collects the calling thread's own heap; takes no pointer.
    unsafe { libmimalloc_sys::mi_collect(true) };
    trim_c_heap();
}

thread_local! {
    static CLOCK: Cell<Option<IdleClock>> = const { Cell::new(None) };
}

/// Calls [`release`] on this thread once per quiet period: when the idle time has passed since
/// the last [`note_activity`] this thread saw. Cheap enough to call on every loop of a thread.
pub fn release_if_idle(thread: Thread) {
    let now = Instant::now();
    let activity = ACTIVITY.load(Ordering::Relaxed);
    let due = CLOCK.with(|c| {
        let mut clock = c.get().unwrap_or_else(|| IdleClock::new(activity, now));
        let due = clock.due(activity, now, idle());
        c.set(Some(clock));
        due
    });
    if due {
        release();
        let thread = match thread {
            Thread::Writer => "writer",
            Thread::Encoder => "encoder",
            Thread::Stager => "stager",
            Thread::Uploader => "uploader",
            Thread::Store => "store",
            Thread::Http => "http",
        };
        RELEASES.get_or_create(&ThreadLabel { thread }).inc();
        tracing::debug!(
            thread = std::thread::current().name().unwrap_or(thread),
            "idle: free memory returned to the system"
        );
    }
}

/// The pages the calling thread has faulted in so far (`getrusage`), for tests.
#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
pub(crate) fn thread_page_faults() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given, zeroed and of the type it takes; it is
    // read only when the call succeeds.
    unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()), 0);
        usage.assume_init().ru_minflt
    }
}

/// One thread's view of the idle clock.
#[derive(Clone, Copy, Debug)]
struct IdleClock {
    seen: u64,
    since: Instant,
    released: bool,
}

impl IdleClock {
    fn new(activity: u64, now: Instant) -> Self {
        IdleClock {
            seen: activity,
            since: now,
            released: false,
        }
    }

    /// Whether to release now: quiet for `idle` and not yet released in this quiet period.
    fn due(&mut self, activity: u64, now: Instant, idle: Duration) -> bool {
        if activity != self.seen {
            *self = IdleClock::new(activity, now);
            return false;
        }
        if self.released || now.duration_since(self.since) < idle {
            return false;
        }
        self.released = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_releases_once_per_quiet_period_and_never_while_work_goes_on() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let idle = Duration::from_secs(60);
        let mut clock = IdleClock::new(7, t0);
        assert!(
            !clock.due(7, at(59), idle),
            "not before a full quiet minute"
        );
        assert!(clock.due(7, at(60), idle));
        assert!(!clock.due(7, at(61), idle), "once per quiet period");
        assert!(!clock.due(7, at(600), idle));
        // Work again: the clock restarts from the moment it is seen.
        assert!(!clock.due(8, at(700), idle));
        assert!(!clock.due(8, at(759), idle));
        assert!(clock.due(8, at(760), idle));
        // Steady work never lets the minute pass.
        let mut clock = IdleClock::new(0, t0);
        for s in 1..300 {
            assert!(!clock.due(s, at(s * 30), idle));
        }
    }

    /// The process's resident memory, from `/proc/self/statm`.
    fn rss() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[test]
    fn freed_memory_stays_for_reuse_until_a_release_gives_it_back() {
        const BLOCK: usize = 16 * 1024;
        const TOTAL: usize = 256 << 20;
        configure_allocator();
        // SAFETY: reads a runtime option.
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay as u128, PURGE_DELAY.as_millis());
        let before = rss();
        let blocks: Vec<*mut u8> = (0..TOTAL / BLOCK)
            .map(|_| {
                // SAFETY: a plain allocation, checked, written and freed below.
                let p = unsafe { libmimalloc_sys::mi_malloc(BLOCK) } as *mut u8;
                assert!(!p.is_null());
                unsafe { p.write_bytes(1, BLOCK) };
                p
            })
            .collect();
        let held = rss();
        assert!(
            held >= before + TOTAL * 9 / 10,
            "{held} B resident after {TOTAL} B"
        );
        for p in blocks {
            // SAFETY: each pointer came from mi_malloc above and is freed once.
            unsafe { libmimalloc_sys::mi_free(p.cast()) };
        }
        let freed = rss();
        assert!(
            freed + TOTAL / 4 >= held,
            "kept for reuse under the purge delay: {freed} B resident, {held} B before the frees"
        );
        release();
        let released = rss();
        assert!(
            released + TOTAL / 2 <= freed,
            "given back: {released} B resident, {freed} B before the release"
        );
    }
}
