//! The store actor: sled on disk, served by a few dedicated threads.
//!
//! `handler -> Store::run(closure) -> [bounded queue] -> store thread -> sled -> oneshot reply`
//!
//! Architecture invariant: sled is never touched from an async worker. Requests reach it on a
//! store thread; the collector's writer and uploader threads (usage, profiles, rollups, the
//! uploaders' record) and start-up (before the server accepts requests) use it directly,
//! through the same `Db` handle (`db.rs`: reopened after a disk error). The queue is bounded:
//! when it is full, `run` answers `StoreError::Busy` at once, which the API turns into 503 +
//! Retry-After; while the database is being reopened, `run` answers its I/O error at once
//! (503 too).

pub mod changes;
pub mod cursor;
mod db;
pub mod files;
pub mod idempotency;
pub mod queue;

#[cfg(test)]
pub(crate) use db::reopen_after_drop;
pub use db::{Db, Unavailable};

use std::path::Path;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, RecvTimeoutError, Sender, TrySendError};

type Job = Box<dyn FnOnce(&Db) + Send + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store queue is full")]
    Busy,
    #[error("store is shut down")]
    Closed,
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt record under {key}: {cause}")]
    Corrupt { key: String, cause: String },
}

impl From<sled::transaction::TransactionError<StoreError>> for StoreError {
    fn from(e: sled::transaction::TransactionError<StoreError>) -> Self {
        match e {
            sled::transaction::TransactionError::Abort(e) => e,
            sled::transaction::TransactionError::Storage(e) => StoreError::Sled(e),
        }
    }
}

/// `From<StoreError>`, `From<sled::Error>` and `From<TransactionError<E>>` for a store's error
/// type `E` that has a `Store(StoreError)` variant, so `?` works on sled calls and on
/// transactions aborted with an `E`: `storage::store_error!(SurveyError);`.
macro_rules! store_error {
    ($e:ident) => {
        impl From<$crate::storage::StoreError> for $e {
            fn from(e: $crate::storage::StoreError) -> Self {
                $e::Store(e)
            }
        }

        impl From<sled::Error> for $e {
            fn from(e: sled::Error) -> Self {
                $e::Store($crate::storage::StoreError::Sled(e))
            }
        }

        impl From<sled::transaction::TransactionError<$e>> for $e {
            fn from(e: sled::transaction::TransactionError<$e>) -> Self {
                match e {
                    sled::transaction::TransactionError::Abort(e) => e,
                    sled::transaction::TransactionError::Storage(e) => e.into(),
                }
            }
        }
    };
}
pub(crate) use store_error;

/// A handle to the store actor; cheap to clone.
#[derive(Clone)]
pub struct Store {
    tx: Sender<Job>,
    db: Db,
}

/// Owns the store threads; dropping the last `Store` and calling `join` ends them.
pub struct StoreThreads {
    handles: Vec<JoinHandle<()>>,
}

impl Store {
    /// Opens (or creates) the database under `dir` with a page cache of `cache_bytes`, and
    /// starts `threads` store threads.
    pub fn open(
        dir: &Path,
        threads: usize,
        queue: usize,
        cache_bytes: u64,
    ) -> Result<(Store, StoreThreads), StoreError> {
        let db = Db::open(dir, cache_bytes)?;
        let (tx, rx) = bounded::<Job>(queue.max(1));
        let handles = (0..threads.max(1))
            .map(|i| {
                let rx = rx.clone();
                let db = db.clone();
                std::thread::Builder::new()
                    .name(format!("store-{i}"))
                    .spawn(move || loop {
                        match rx.recv_timeout(crate::memory::poll()) {
                            Ok(job) => job(&db),
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                        crate::memory::release_if_idle(crate::memory::Thread::Store);
                    })
                    .expect("spawn store thread")
            })
            .collect();
        Ok((Store { tx, db }, StoreThreads { handles }))
    }

    /// Runs `f` on a store thread and awaits its answer.
    pub async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&sled::Db) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if let Some(down) = self.db.unavailable() {
            return Err(StoreError::Sled(down.error()));
        }
        let job: Job = Box::new(move |db| {
            let _ = reply.send(db.with(f));
        });
        match self.tx.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(StoreError::Busy),
            Err(TrySendError::Disconnected(_)) => return Err(StoreError::Closed),
        }
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// The database handle, for code on its own threads: start-up (before any request is
    /// served) and the collector's writers and uploaders. Take a `sled::Db` per operation.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Writes every dirty buffer to disk.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.with(|db| db.flush())?;
        Ok(())
    }
}

impl StoreThreads {
    /// Waits for the store threads to finish their queued jobs; call after the last `Store`
    /// handle is dropped.
    pub fn join(self) {
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// JSON-decodes a stored record, naming its key when it is corrupt.
/// Every JSON record of `tree` whose key starts with `prefix`, in key order.
pub fn decode_all<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    prefix: &[u8],
) -> Result<Vec<T>, StoreError> {
    tree.scan_prefix(prefix)
        .map(|kv| {
            let (k, v) = kv?;
            decode(&k, &v)
        })
        .collect()
}

pub fn decode<T: serde::de::DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        cause: e.to_string(),
    })
}

/// JSON-encodes a record for storage.
pub fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records always serialize")
}
