//! Job records in sled: the tree `jobs`, keyed by job id (`job_<objectId>`, so in order of
//! creation). Every write is flushed before it returns: a saved cursor survives `kill -9`.

use sled::transaction::ConflictableTransactionError;
use sled::Transactional;

use crate::storage::changes::{self, Change};
use crate::storage::{decode, decode_all, encode, StoreError};

use super::model::{Job, JobKind};

/// The tree of job records.
pub const TREE: &str = "jobs";

fn tree(db: &sled::Db) -> Result<sled::Tree, StoreError> {
    Ok(db.open_tree(TREE)?)
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
    let mut trees = vec![tree(db)?, db.open_tree(changes::TREE)?];
    for (name, _, _) in companions {
        trees.push(db.open_tree(name)?);
    }
    let record = encode(job);
    trees.as_slice().transaction(|ts| {
        ts[0].insert(job.id.as_bytes(), record.as_slice())?;
        if let Some(c) = change {
            changes::record::<StoreError>(&ts[1], c)?;
        }
        for (t, (_, k, v)) in ts[2..].iter().zip(companions) {
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
    let Some(change) = change else {
        let old =
            tree(db)?.fetch_and_update(job.id.as_bytes(), |old| old.map(|_| bytes.clone()))?;
        db.flush()?;
        return Ok(old.is_some());
    };
    let (jobs, queue) = (tree(db)?, db.open_tree(changes::TREE)?);
    let saved = (&jobs, &queue).transaction(|(tx, ch)| {
        if tx.get(job.id.as_bytes())?.is_none() {
            return Ok(false);
        }
        tx.insert(job.id.as_bytes(), bytes.as_slice())?;
        changes::record::<StoreError>(ch, change)?;
        Ok(true)
    })?;
    db.flush()?;
    Ok(saved)
}

/// Every job not finished yet, oldest first.
pub fn unfinished(db: &sled::Db) -> Result<Vec<Job>, StoreError> {
    let all: Vec<Job> = decode_all(&tree(db)?, b"")?;
    Ok(all.into_iter().filter(|j| !j.state.finished()).collect())
}

/// Every job of `app` (of `kind` only, if given), oldest first.
pub fn of_app(db: &sled::Db, app: &str, kind: Option<JobKind>) -> Result<Vec<Job>, StoreError> {
    let all: Vec<Job> = decode_all(&tree(db)?, b"")?;
    Ok(all
        .into_iter()
        .filter(|j| j.app_id == app && kind.is_none_or(|k| j.kind == k))
        .collect())
}

/// Deletes the job `id`; true when it was there.
pub fn delete(db: &sled::Db, id: &str) -> Result<bool, StoreError> {
    let old = tree(db)?.remove(id.as_bytes())?;
    db.flush()?;
    Ok(old.is_some())
}
