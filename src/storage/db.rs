//! `Db`: the process's sled database behind a handle that reopens it after a disk error.
//!
//! sled 0.34 keeps a failed write (ENOSPC, EIO) as its *global error*: every later write through
//! that database returns it, even once space is freed. Only opening the database again clears
//! it, and opening takes sled's file lock, which the old database holds until its last clone
//! is dropped. So nothing long-lived keeps a `sled::Db`: the store threads, the collector's
//! threads and start-up keep a `Db` and take a `sled::Db` from it per operation (`get`, `with`).
//!
//! When the global error is set, the handle lets go of the database (`Reopening`) and a
//! `store-reopen` thread drops it and opens it again once the disk has `MIN_FREE` bytes free
//! (an open recovers sled's log: not something to repeat against a full disk), retrying every
//! `RETRY_FIRST` to `RETRY_MAX` while a clone still holds the lock. Meanwhile `get`
//! fails at once with an I/O error, which the API answers 503 + Retry-After. Nothing that was
//! acknowledged is lost: every API write is flushed before its answer, and a write that sled
//! failed to flush was answered 503.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// The first wait between two attempts to reopen; it doubles up to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_millis(10);
/// The longest wait between two attempts: space freed is noticed within this.
const RETRY_MAX: Duration = Duration::from_millis(200);
/// The free space an attempt to reopen waits for (sled writes 512 KiB segments and snapshots).
const MIN_FREE: u64 = 4 << 20;

/// The sled database of the process; cheap to clone. Take a `sled::Db` per operation and drop
/// it after: a clone kept for long would hold the file lock and stop a reopen.
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
}

struct Shared {
    path: PathBuf,
    cache_bytes: u64,
    state: Mutex<State>,
}

enum State {
    Open {
        db: sled::Db,
        /// The configuration `db` was opened with: it shares sled's global error, which
        /// `Config::global_error` reads (public but undocumented in sled 0.34; the tests below
        /// fail if an upgrade changes it).
        config: sled::Config,
    },
    Reopening {
        since: Instant,
        cause: String,
    },
}

/// Why the database is not available, and for how long it has not been.
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable {
    pub cause: String,
    pub since: Instant,
}

impl Unavailable {
    /// The error a store call answers with meanwhile: an I/O error, like the one that caused it.
    pub fn error(&self) -> sled::Error {
        sled::Error::Io(std::io::Error::other(format!(
            "the store is reopening after a write failed ({})",
            self.cause
        )))
    }
}

impl State {
    fn db(&self) -> Result<&sled::Db, Unavailable> {
        match self {
            State::Open { db, .. } => Ok(db),
            State::Reopening { since, cause } => Err(Unavailable {
                cause: cause.clone(),
                since: *since,
            }),
        }
    }
}

fn open(path: &Path, cache_bytes: u64) -> sled::Result<State> {
    let config = sled::Config::new()
        .path(path)
        .cache_capacity(cache_bytes)
        .mode(sled::Mode::HighThroughput);
    let db = config.open()?;
    Ok(State::Open { db, config })
}

impl Db {
    /// Opens (or creates) the database under `path` with a page cache of `cache_bytes`.
    pub fn open(path: &Path, cache_bytes: u64) -> sled::Result<Db> {
        let state = open(path, cache_bytes)?;
        Ok(Db {
            shared: Arc::new(Shared {
                path: path.to_owned(),
                cache_bytes,
                state: Mutex::new(state),
            }),
        })
    }

    /// A database deleted when its last handle is dropped, for unit tests (never reopened).
    #[cfg(test)]
    pub fn temporary() -> Db {
        let config = sled::Config::new().temporary(true);
        let db = config.open().expect("a temporary database");
        Db {
            shared: Arc::new(Shared {
                path: PathBuf::new(),
                cache_bytes: 0,
                state: Mutex::new(State::Open { db, config }),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, after starting the reopen if sled's global error is set (no I/O: the old
    /// database is dropped on the reopening thread).
    fn checked(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if let State::Open { config, .. } = &*state {
            if let Err(e) = config.global_error() {
                self.start_reopen(&mut state, e);
            }
        }
        state
    }

    /// The database for one operation, or the I/O error of a database being reopened. Finding
    /// sled's global error set starts the reopen.
    pub fn get(&self) -> sled::Result<sled::Db> {
        match self.checked().db() {
            Ok(db) => Ok(db.clone()),
            Err(u) => Err(u.error()),
        }
    }

    /// Runs `f` on the database; when it leaves sled's global error set, the reopen starts at
    /// once (not at the next call).
    pub fn with<T, E: From<sled::Error>>(
        &self,
        f: impl FnOnce(&sled::Db) -> Result<T, E>,
    ) -> Result<T, E> {
        let db = self.get()?;
        let result = f(&db);
        drop(db);
        self.unavailable();
        result
    }

    /// Why the database cannot be used now, if it cannot; starts the reopen if sled's global
    /// error is set. Never blocks on I/O: async workers may call it.
    pub fn unavailable(&self) -> Option<Unavailable> {
        self.checked().db().err()
    }

    /// Lets go of the database and starts the thread that opens it again. The old database
    /// is dropped on that thread (its flusher may take a moment to stop).
    fn start_reopen(&self, state: &mut State, error: sled::Error) {
        let cause = error.to_string();
        tracing::error!(error = %cause, "the store failed to write; reopening it");
        let old = std::mem::replace(
            state,
            State::Reopening {
                since: Instant::now(),
                cause,
            },
        );
        let weak = Arc::downgrade(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("store-reopen".into())
            .spawn(move || reopen(weak, old));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the thread that reopens the store");
        }
    }
}

/// Opens the sled database under `path` again in a unit test, waiting up to 20 s while the file
/// lock is held: a database dropped in this process keeps it until sled's flusher thread lets
/// go of its last reference.
#[cfg(test)]
pub(crate) fn reopen_after_drop(path: &Path) -> sled::Db {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match sled::open(path) {
            Err(e) if e.to_string().contains("could not acquire lock") => {
                assert!(Instant::now() < deadline, "{path:?} stays locked: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            opened => return opened.expect("the database reopens"),
        }
    }
}

/// Drops the old database, then opens it again until it works (the disk has room and the lock
/// is free), backing off from `RETRY_FIRST` to `RETRY_MAX`. Gives up when every `Db` handle is
/// gone.
fn reopen(shared: Weak<Shared>, old: State) {
    drop(old);
    let started = Instant::now();
    let mut wait = RETRY_FIRST;
    for attempt in 1u64.. {
        let Some(s) = shared.upgrade() else { return };
        let free = fs2::available_space(&s.path).unwrap_or(u64::MAX);
        let opened = if free >= MIN_FREE {
            open(&s.path, s.cache_bytes)
        } else {
            let short = format!("{free} bytes free, waiting for {MIN_FREE}");
            Err(sled::Error::Io(std::io::Error::other(short)))
        };
        match opened {
            Ok(state) => {
                *s.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
                tracing::info!(
                    attempts = attempt,
                    after_ms = started.elapsed().as_millis() as u64,
                    "the store is reopened"
                );
                return;
            }
            // Logged at the first failure, then about every minute.
            Err(e) if attempt == 1 || attempt % 300 == 0 => {
                tracing::warn!(error = %e, attempt, "the store cannot be reopened yet; retrying");
            }
            Err(_) => {}
        }
        drop(s);
        std::thread::sleep(wait);
        wait = (wait * 2).min(RETRY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small tmpfs, mounted for the test (we run as root) and unmounted when dropped.
    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn mount(size: &str) -> Tmpfs {
            let dir = tempfile::tempdir().unwrap();
            let opts = format!("size={size}");
            let args = ["-t", "tmpfs", "-o", &opts, "tmpfs"];
            let status = std::process::Command::new("mount")
                .args(args)
                .arg(dir.path())
                .status()
                .expect("run mount");
            assert!(status.success(), "mounting a tmpfs needs root");
            Tmpfs(dir)
        }

        /// A 16 MiB tmpfs and the path of an 8 MiB filler on it.
        fn half_filled() -> (Tmpfs, PathBuf) {
            let fs = Tmpfs::mount("16m");
            let filler = fs.0.path().join("filler");
            std::fs::write(&filler, vec![0u8; 8 << 20]).unwrap();
            (fs, filler)
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.0.path())
                .status();
        }
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Duration {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
        started.elapsed()
    }

    /// Inserts 4 KiB records and flushes every 16 until sled fails; returns the keys flushed.
    fn fill(db: &Db) -> (u64, sled::Error) {
        let mut flushed = 0;
        for i in 0u64.. {
            let wrote = db.with(|d| {
                d.insert(i.to_be_bytes(), vec![7u8; 4096])?;
                if i % 16 == 15 {
                    d.flush()?;
                }
                Ok::<_, sled::Error>(())
            });
            match wrote {
                Ok(()) if i % 16 == 15 => flushed = i + 1,
                Ok(()) => {}
                Err(e) => return (flushed, e),
            }
        }
        unreachable!()
    }

    #[test]
    fn a_full_disk_makes_the_store_unavailable_until_it_is_reopened_with_space() {
        let (fs, filler) = Tmpfs::half_filled();
        let db = Db::open(&fs.0.path().join("db"), 4 << 20).unwrap();
        let (flushed, error) = fill(&db);
        assert!(
            matches!(&error, sled::Error::Io(e) if e.to_string().contains("No space left")),
            "{error:?}"
        );
        // sled's error is sticky; the handle saw it and let go of the database.
        let down = db.unavailable().expect("the store is reopening");
        assert!(down.cause.contains("No space left"), "{down:?}");
        assert!(matches!(db.get(), Err(sled::Error::Io(_))));
        std::fs::remove_file(&filler).unwrap();
        let took = wait_until("reopened", || db.unavailable().is_none());
        eprintln!("reopened {took:?} after the filler was removed");
        db.with(|d| {
            d.insert(b"after", b"space".to_vec())?;
            d.flush()
        })
        .unwrap();
        let d = db.get().unwrap();
        for i in 0..flushed {
            assert!(d.get(i.to_be_bytes()).unwrap().is_some(), "key {i} lost");
        }
    }

    #[test]
    fn a_clone_held_across_the_failure_delays_the_reopen_until_it_is_dropped() {
        let (fs, filler) = Tmpfs::half_filled();
        let db = Db::open(&fs.0.path().join("db"), 4 << 20).unwrap();
        let held = db.get().unwrap();
        fill(&db);
        std::fs::remove_file(&filler).unwrap();
        assert!(db.unavailable().is_some());
        // The old database still answers reads through the clone, never writes.
        assert!(held.get(0u64.to_be_bytes()).unwrap().is_some());
        assert!(held.insert(b"x", b"y".to_vec()).and(held.flush()).is_err());
        assert!(
            db.unavailable().is_some(),
            "reopened while a clone held the lock"
        );
        drop(held);
        wait_until("reopened", || db.unavailable().is_none());
        db.with(|d| d.insert(b"x", b"y".to_vec())).unwrap();
    }

    #[tokio::test]
    async fn store_calls_fail_fast_while_the_disk_is_full_and_work_again_once_it_has_room() {
        let (fs, filler) = Tmpfs::half_filled();
        let (store, threads) =
            crate::storage::Store::open(&fs.0.path().join("db"), 2, 16, 4 << 20).unwrap();
        let write = |i: u64| {
            store.run(move |db| {
                db.insert(i.to_be_bytes(), vec![1u8; 4096])?;
                db.flush()?;
                Ok(())
            })
        };
        let mut i = 0;
        let error = loop {
            match write(i).await {
                Ok(()) => i += 1,
                Err(e) => break e,
            }
        };
        assert!(
            matches!(&error, crate::storage::StoreError::Sled(sled::Error::Io(_))),
            "{error:?}"
        );
        // Reads too fail at once while the database is being reopened.
        let started = Instant::now();
        let read = store.run(|db| Ok(db.len())).await;
        assert!(matches!(
            read,
            Err(crate::storage::StoreError::Sled(sled::Error::Io(_)))
        ));
        assert!(started.elapsed() < Duration::from_secs(1));
        std::fs::remove_file(&filler).unwrap();
        let started = Instant::now();
        while write(i).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "never reopened"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(store.run(|db| Ok(db.len())).await.unwrap(), i as usize + 1);
        drop(store);
        threads.join();
    }
}
