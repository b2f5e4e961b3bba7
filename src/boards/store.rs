//! Boards in sled. They live in the `ideas` tree with the ideas, so one transaction can check
//! an idea's status, topic and tags against its board and count their use.
//!
//! Keys (`app` and ids are 24-character ObjectIds):
//! - `b` app boardId -> the board with its statuses, topics and tags (JSON)
//! - `B` app         -> id of the app's default board (present once the defaults exist)
//! - `N` app         -> number of boards (u64, big endian) for the plan limit
//! - `u` app itemId  -> number of ideas using a status, topic or tag (u64, big endian)
//!
//! Every app gets a default board on first access ([`ensure_default`]): tenants know nothing of
//! boards, so app creation stays below this module.

use sled::transaction::{ConflictableTransactionError, TransactionalTree};

use super::model::{BoardRecord, ItemPatch, Part, Rejection};
use crate::ids::{self, Timestamp};
use crate::storage::{decode, encode, StoreError};
use crate::validation::FieldError;

/// The tree of boards and ideas.
pub const TREE: &str = "ideas";

#[derive(Debug)]
pub enum BoardError {
    NotFound(&'static str),
    Invalid(Vec<FieldError>),
    Conflict(String),
    PlanLimit { limit: u64, current: u64 },
    Store(StoreError),
}

crate::storage::store_error!(BoardError);

impl From<Rejection> for BoardError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::Invalid(d) => BoardError::Invalid(d),
            Rejection::Conflict(m) => BoardError::Conflict(m),
            Rejection::NotFound(w) => BoardError::NotFound(w),
        }
    }
}

type Tx<T, E> = Result<T, ConflictableTransactionError<E>>;

pub fn board_key(app: &str, id: &str) -> Vec<u8> {
    [b"b", app.as_bytes(), id.as_bytes()].concat()
}

fn default_key(app: &str) -> Vec<u8> {
    [b"B", app.as_bytes()].concat()
}

fn count_key(app: &str) -> Vec<u8> {
    [b"N", app.as_bytes()].concat()
}

fn usage_key(app: &str, item: &str) -> Vec<u8> {
    [b"u", app.as_bytes(), item.as_bytes()].concat()
}

pub fn decode_count(v: Option<&[u8]>) -> u64 {
    v.and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// Reads a board inside a transaction (`None`: no such board in this app).
pub fn load_tx<E: From<StoreError>>(
    tx: &TransactionalTree,
    app: &str,
    id: &str,
) -> Tx<Option<BoardRecord>, E> {
    let key = board_key(app, id);
    match tx.get(&key)? {
        Some(v) => decode(&key, &v)
            .map(Some)
            .map_err(|e| ConflictableTransactionError::Abort(E::from(e))),
        None => Ok(None),
    }
}

/// Adds `delta` to the number of ideas using status, topic or tag `item`.
pub fn add_usage_tx<E>(tx: &TransactionalTree, app: &str, item: &str, delta: i64) -> Tx<(), E> {
    let key = usage_key(app, item);
    let n = decode_count(tx.get(&key)?.as_deref()).saturating_add_signed(delta);
    if n == 0 {
        tx.remove(key)?;
    } else {
        tx.insert(key, &n.to_be_bytes()[..])?;
    }
    Ok(())
}

/// The id of the app's default board, creating it (with the default statuses) on first use.
/// That first use is often a read, which passes no request time: the board is stamped with
/// the system clock (`SystemClock`), the one "now" of the stores not handed in.
pub fn ensure_default(db: &sled::Db, app: &str) -> Result<String, StoreError> {
    let tree = db.open_tree(TREE)?;
    if let Some(id) = tree.get(default_key(app))? {
        return Ok(String::from_utf8_lossy(&id).into_owned());
    }
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let record = BoardRecord::new("Feedback".into(), None, true, now);
    let id = tree.transaction(|tx| {
        if let Some(id) = tx.get(default_key(app))? {
            return Ok(String::from_utf8_lossy(&id).into_owned());
        }
        let id = &record.board.id;
        tx.insert(board_key(app, id), encode(&record))?;
        tx.insert(default_key(app), id.as_bytes())?;
        let n = decode_count(tx.get(count_key(app))?.as_deref());
        tx.insert(count_key(app), &(n + 1).to_be_bytes()[..])?;
        Ok::<_, ConflictableTransactionError<StoreError>>(id.clone())
    })?;
    db.flush()?;
    Ok(id)
}

/// Every board of `app`, oldest first (the default board first). Boards are few (a plan
/// limit); the API pages them all the same.
pub fn all(db: &sled::Db, app: &str) -> Result<Vec<BoardRecord>, StoreError> {
    ensure_default(db, app)?;
    crate::storage::decode_all(&db.open_tree(TREE)?, &[b"b", app.as_bytes()].concat())
}

/// A board of `app` (`None` for `id` = `None`: the default board).
pub fn get(db: &sled::Db, app: &str, id: Option<&str>) -> Result<Option<BoardRecord>, StoreError> {
    let id = match id {
        Some(id) if !ids::is_object_id(id) => return Ok(None),
        Some(id) => id.to_owned(),
        None => ensure_default(db, app)?,
    };
    let key = board_key(app, &id);
    match db.open_tree(TREE)?.get(&key)? {
        Some(v) => Ok(Some(decode(&key, &v)?)),
        None => Ok(None),
    }
}

/// Stores a new board made at `now`; `limit` is the plan's board quota (the default board
/// counts).
pub fn create(
    db: &sled::Db,
    app: &str,
    p: &ItemPatch,
    limit: Option<u64>,
    now: Timestamp,
) -> Result<BoardRecord, BoardError> {
    ensure_default(db, app)?;
    let record = BoardRecord::new(
        p.name.clone().unwrap_or_default(),
        p.description.clone().flatten(),
        false,
        now,
    );
    let tree = db.open_tree(TREE)?;
    tree.transaction(|tx| {
        let n = decode_count(tx.get(count_key(app))?.as_deref());
        if let Some(limit) = limit.filter(|l| n >= *l) {
            return Err(ConflictableTransactionError::Abort(BoardError::PlanLimit {
                limit,
                current: n,
            }));
        }
        tx.insert(board_key(app, &record.board.id), encode(&record))?;
        tx.insert(count_key(app), &(n + 1).to_be_bytes()[..])?;
        Ok(())
    })?;
    db.flush()?;
    Ok(record)
}

/// What an admin call does to a board.
#[derive(Debug, Clone)]
pub enum Change {
    Board(ItemPatch),
    Add(Part, ItemPatch),
    Patch(Part, String, ItemPatch),
    /// Refused (409) while an idea uses the item.
    Remove(Part, String),
}

/// Applies one change to board `id` of `app` in a transaction, updated at `now`; answers the
/// board and the id of the item added or changed.
pub fn change(
    db: &sled::Db,
    app: &str,
    id: &str,
    change: &Change,
    now: Timestamp,
) -> Result<(BoardRecord, Option<String>), BoardError> {
    if !ids::is_object_id(id) {
        return Err(BoardError::NotFound("board"));
    }
    ensure_default(db, app)?;
    let tree = db.open_tree(TREE)?;
    let abort = ConflictableTransactionError::Abort;
    let out = tree.transaction(|tx| {
        let mut board =
            load_tx::<BoardError>(tx, app, id)?.ok_or(abort(BoardError::NotFound("board")))?;
        let item = match change {
            Change::Board(p) => {
                board.patch_board(p);
                None
            }
            Change::Add(part, p) => Some(board.add(*part, p).map_err(|r| abort(r.into()))?),
            Change::Patch(part, item, p) => {
                board.patch(*part, item, p).map_err(|r| abort(r.into()))?;
                Some(item.clone())
            }
            Change::Remove(part, item) => {
                let used = decode_count(tx.get(usage_key(app, item))?.as_deref());
                board.remove(*part, item).map_err(|r| abort(r.into()))?;
                if used > 0 {
                    let what = part.item();
                    return Err(abort(BoardError::Conflict(format!(
                        "the {what} is used by {used} ideas"
                    ))));
                }
                None
            }
        };
        board.board.updated_at = now;
        tx.insert(board_key(app, id), encode(&board))?;
        Ok((board, item))
    })?;
    db.flush()?;
    Ok(out)
}
