//! Job records in sled: the tree `jobs`, keyed by job id (`job_<objectId>`, so in order of
//! creation). Every write is flushed before it returns: a saved cursor survives `kill -9`.
//!
//! Finished jobs are kept (their answers stay readable), so the runner, which looks for the
//! unfinished ones before each step, reads the index [`UNFINISHED`] (the ids of the jobs not
//! finished, changed in the same transaction as the record) instead of decoding every job
//! ever run. A store of an earlier version is indexed once at start-up ([`index_once`]).

use sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionalTree,
};
use sled::Transactional;

use crate::storage::changes::{self, Change};
use crate::storage::{decode, decode_all, encode, StoreError};

use super::model::{Job, JobKind};

/// The tree of job records.
pub const TREE: &str = "jobs";
/// The ids of the jobs not finished (empty values), in order of creation.
pub const UNFINISHED: &str = "jobs_unfinished";
/// In [`UNFINISHED`] once a store is indexed: after every id (`job_...` is ASCII).
const INDEXED: &[u8] = b"\xffindexed";

fn tree(db: &sled::Db) -> Result<sled::Tree, StoreError> {
    Ok(db.open_tree(TREE)?)
}

/// Keeps `job`'s entry in [`UNFINISHED`] (`index`) as its state says.
fn mark<E>(index: &TransactionalTree, job: &Job) -> ConflictableTransactionResult<(), E> {
    if job.state.finished() {
        index.remove(job.id.as_bytes())?;
    } else {
        index.insert(job.id.as_bytes(), &[])?;
    }
    Ok(())
}

/// A record written with a new job, in the same transaction: (tree, key, value).
pub type Companion = (&'static str, Vec<u8>, Vec<u8>);

/// Stores a new job and its `companions` in one sled transaction, with `change` recorded in
/// it when there is one: a crash leaves all or none.
pub fn insert_with(
    db: &sled::Db,
    job: &Job,
    companions: &[Companion],
    change: Option<&Change>,
) -> Result<(), StoreError> {
    let mut trees = vec![
        tree(db)?,
        db.open_tree(changes::TREE)?,
        db.open_tree(UNFINISHED)?,
    ];
    for (name, _, _) in companions {
        trees.push(db.open_tree(name)?);
    }
    let record = encode(job);
    trees.as_slice().transaction(|ts| {
        ts[0].insert(job.id.as_bytes(), record.as_slice())?;
        if let Some(c) = change {
            changes::record::<StoreError>(&ts[1], c)?;
        }
        mark(&ts[2], job)?;
        for (t, (_, k, v)) in ts[3..].iter().zip(companions) {
            t.insert(k.as_slice(), v.as_slice())?;
        }
        Ok::<_, ConflictableTransactionError<StoreError>>(())
    })?;
    db.flush()?;
    Ok(())
}

/// The job `id`, if there is one.
pub fn get(db: &sled::Db, id: &str) -> Result<Option<Job>, StoreError> {
    match tree(db)?.get(id.as_bytes())? {
        Some(v) => Ok(Some(decode(id.as_bytes(), &v)?)),
        None => Ok(None),
    }
}

/// Replaces the record of `job` if it is still there; false when it was deleted meanwhile
/// (then nothing is written).
pub fn save(db: &sled::Db, job: &Job) -> Result<bool, StoreError> {
    save_with(db, job, None)
}

/// `save`, with `change` recorded in the same transaction when there is one (a job's end).
pub fn save_with(db: &sled::Db, job: &Job, change: Option<&Change>) -> Result<bool, StoreError> {
    let bytes = encode(job);
    let trees = (
        tree(db)?,
        db.open_tree(UNFINISHED)?,
        db.open_tree(changes::TREE)?,
    );
    let saved = (&trees.0, &trees.1, &trees.2).transaction(|(tx, index, ch)| {
        if tx.get(job.id.as_bytes())?.is_none() {
            return Ok(false);
        }
        tx.insert(job.id.as_bytes(), bytes.as_slice())?;
        mark(index, job)?;
        if let Some(change) = change {
            changes::record::<StoreError>(ch, change)?;
        }
        Ok(true)
    })?;
    db.flush()?;
    Ok(saved)
}

/// Every job not finished yet, oldest first: the records [`UNFINISHED`] names.
pub fn unfinished(db: &sled::Db) -> Result<Vec<Job>, StoreError> {
    let (jobs, index) = (tree(db)?, db.open_tree(UNFINISHED)?);
    let mut out = Vec::new();
    for id in index.range(..INDEXED).keys() {
        let id = id?;
        if let Some(v) = jobs.get(&id)? {
            let job: Job = decode(&id, &v)?;
            if !job.state.finished() {
                out.push(job);
            }
        }
    }
    Ok(out)
}

/// Indexes the unfinished jobs of a store from a version without [`UNFINISHED`], once.
/// Start-up calls it before the runner starts; answers how many it indexed.
pub fn index_once(db: &sled::Db) -> Result<usize, StoreError> {
    let index = db.open_tree(UNFINISHED)?;
    if index.contains_key(INDEXED)? {
        return Ok(0);
    }
    let all: Vec<Job> = decode_all(&tree(db)?, b"")?;
    let mut indexed = 0;
    for job in all.iter().filter(|j| !j.state.finished()) {
        index.insert(job.id.as_bytes(), &[])?;
        indexed += 1;
    }
    index.insert(INDEXED, &[])?;
    db.flush()?;
    Ok(indexed)
}

/// Every job of `app` (of `kind` only, if given), oldest first.
pub fn of_app(db: &sled::Db, app: &str, kind: Option<JobKind>) -> Result<Vec<Job>, StoreError> {
    let all: Vec<Job> = decode_all(&tree(db)?, b"")?;
    Ok(all
        .into_iter()
        .filter(|j| j.app_id == app && kind.is_none_or(|k| j.kind == k))
        .collect())
}

/// Deletes the job `id` (and its entry in [`UNFINISHED`]); true when it was there.
pub fn delete(db: &sled::Db, id: &str) -> Result<bool, StoreError> {
    let (jobs, index) = (tree(db)?, db.open_tree(UNFINISHED)?);
    let old = (&jobs, &index).transaction(|(tx, index)| {
        index.remove(id.as_bytes())?;
        Ok::<_, ConflictableTransactionError<StoreError>>(tx.remove(id.as_bytes())?)
    })?;
    db.flush()?;
    Ok(old.is_some())
}
