//! Ideas in sled, in the `ideas` tree beside their boards, so one transaction checks an idea
//! against its board, counts the use of statuses, topics and tags, and keeps the counts exact.
//!
//! Keys (`app` and ids are 24-character ObjectIds):
//! - `r` app ideaId                -> the idea (JSON), with voteCount and commentCount
//! - `n` app                       -> number of ideas (u64, big endian) for the plan limit
//! - `i` app field value ideaId    -> empty: one sort index per sortable field (8-byte values)
//! - `v` app ideaId voteId         -> a vote (JSON)
//! - `w` app ideaId voterKey       -> voteId: one entry per voter id (`i..`) and e-mail (`e..`)
//! - `c` app ideaId commentId      -> a comment (JSON)
//! - `h` app ideaId changeId       -> a status change (JSON)
//!
//! Invariant: a vote or a comment and the count on its idea change in one transaction.
//! Transactions cannot scan, so the writes that remove or move an idea's votes and comments
//! (delete, merge) read them first and then check, inside the transaction, that the idea record
//! is byte for byte what they read: every vote or comment write rewrites it, so none slipped in.

use sled::transaction::{ConflictableTransactionError, TransactionalTree};
use sled::{IVec, Transactional};

use super::model::{Idea, IdeaDraft, IdeaPatch, IdeaView, StatusChange, StatusRef};
use crate::boards::store::{self as boards, add_usage_tx, decode_count};
use crate::boards::BoardRecord;
use crate::config::Quota;
use crate::ids::{self, Timestamp};
use crate::storage::changes::{self, types, Actor, Change, Facets};
use crate::storage::{decode, encode, StoreError};
use crate::validation::FieldError;

pub use crate::boards::store::TREE;

/// What can go wrong, in domain terms.
#[derive(Debug)]
pub enum IdeaError {
    NotFound(&'static str),
    Invalid(Vec<FieldError>),
    Conflict(String),
    /// Editing someone else's comment without `ideas:moderate`.
    Forbidden(String),
    PlanLimit {
        quota: Quota,
        limit: u64,
        current: u64,
    },
    /// The idea changed between a scan and its transaction (retried, never answered).
    Changed,
    Store(StoreError),
}

crate::storage::store_error!(IdeaError);

pub type Tx<T> = Result<T, ConflictableTransactionError<IdeaError>>;

pub fn abort<T>(e: IdeaError) -> Tx<T> {
    Err(ConflictableTransactionError::Abort(e))
}

fn invalid<T>(field: &str, message: &str) -> Tx<T> {
    abort(IdeaError::Invalid(vec![FieldError::new(field, message)]))
}

pub fn record_key(app: &str, id: &str) -> Vec<u8> {
    [b"r", app.as_bytes(), id.as_bytes()].concat()
}

fn count_key(app: &str) -> Vec<u8> {
    [b"n", app.as_bytes()].concat()
}

/// The key prefix of an idea's votes (`v`), voter entries (`w`), comments (`c`) or history (`h`).
pub fn child_prefix(kind: u8, app: &str, idea: &str) -> Vec<u8> {
    [&[kind][..], app.as_bytes(), idea.as_bytes()].concat()
}

pub fn child_key(kind: u8, app: &str, idea: &str, child: &str) -> Vec<u8> {
    [child_prefix(kind, app, idea), child.as_bytes().to_vec()].concat()
}

cursor::sort_fields! {
    /// The sortable fields (api.md §6) and their index tag.
    pub SortField {
        CreatedAt = "createdAt" / b'c',
        UpdatedAt = "updatedAt" / b'u',
        VoteCount = "voteCount" / b'v',
        CommentCount = "commentCount" / b'm',
        Trending = "trending" / b't',
    }
}

impl SortField {
    /// Eight bytes that order as the field does.
    fn encode(self, idea: &Idea) -> [u8; 8] {
        let time = |t: Timestamp| ((t.micros() as u64) ^ (1 << 63)).to_be_bytes();
        match self {
            SortField::CreatedAt => time(idea.created_at),
            SortField::UpdatedAt => time(idea.updated_at),
            SortField::VoteCount => idea.vote_count.to_be_bytes(),
            SortField::CommentCount => idea.comment_count.to_be_bytes(),
            SortField::Trending => match idea.trending {
                None => [0; 8],
                Some(f) if f.is_sign_negative() => (!f.to_bits()).to_be_bytes(),
                Some(f) => (f.to_bits() ^ (1 << 63)).to_be_bytes(),
            },
        }
    }
}

/// Order of a list.
pub type Sort = cursor::Sort<SortField>;

/// Filters of `GET /api/v1/ideas`; empty vectors mean "any", a comma is an OR.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub board_ids: Vec<String>,
    pub status_ids: Vec<String>,
    pub topic_ids: Vec<String>,
    pub tag_ids: Vec<String>,
    pub author_ids: Vec<String>,
    /// Folded (lowercase, no accents) text searched in title and description.
    pub q: Option<String>,
}

impl Filter {
    fn matches(&self, i: &Idea) -> bool {
        let any = |set: &[String], v: &str| set.is_empty() || set.iter().any(|s| s == v);
        any(&self.board_ids, &i.board_id)
            && any(&self.status_ids, &i.status_id)
            && any(&self.author_ids, &i.author.id)
            && (self.topic_ids.is_empty()
                || i.topic_id
                    .as_deref()
                    .is_some_and(|t| any(&self.topic_ids, t)))
            && (self.tag_ids.is_empty() || self.tag_ids.iter().any(|t| i.tag_ids.contains(t)))
            && self.q.as_deref().is_none_or(|q| i.matches_text(q))
    }
}

use crate::storage::cursor;
pub use crate::storage::cursor::Sortable;
pub use crate::storage::cursor::{Cursor, Page, Walk};

/// Whether a cursor's entry can be one of the idea indexes'.
pub fn valid_entry(entry: &[u8]) -> bool {
    entry.len() == 32 && cursor::ends_with_id(entry)
}

fn index_prefix(app: &str, field: SortField) -> Vec<u8> {
    [b"i", app.as_bytes(), &[field.tag()]].concat()
}

fn index_keys<'a>(app: &'a str, idea: &'a Idea) -> impl Iterator<Item = Vec<u8>> + 'a {
    SortField::ALL.iter().map(move |&f| {
        [
            index_prefix(app, f),
            f.encode(idea).to_vec(),
            idea.id.as_bytes().to_vec(),
        ]
        .concat()
    })
}

/// Reads an idea in a transaction, with its raw bytes; 404 when absent.
pub fn load_tx(
    tx: &TransactionalTree,
    app: &str,
    id: &str,
    what: &'static str,
) -> Tx<(Idea, IVec)> {
    let key = record_key(app, id);
    let Some(bytes) = tx.get(&key)? else {
        return abort(IdeaError::NotFound(what));
    };
    let idea = decode(&key, &bytes).map_err(|e| ConflictableTransactionError::Abort(e.into()))?;
    Ok((idea, bytes))
}

/// The idea's board; a missing board is a corrupt store.
pub fn board_tx(tx: &TransactionalTree, app: &str, board: &str) -> Tx<BoardRecord> {
    boards::load_tx::<IdeaError>(tx, app, board)?.map_or_else(
        || {
            abort(IdeaError::Store(StoreError::Corrupt {
                key: board.to_owned(),
                cause: "board missing".into(),
            }))
        },
        Ok,
    )
}

/// Writes `new` over `old` (or as a new idea), moving the index entries whose values changed.
pub fn write_tx(tx: &TransactionalTree, app: &str, old: Option<&Idea>, new: &Idea) -> Tx<()> {
    let olds: Vec<Vec<u8>> = old
        .map(|o| index_keys(app, o).collect())
        .unwrap_or_default();
    for (i, k) in index_keys(app, new).enumerate() {
        if olds.get(i) != Some(&k) {
            if let Some(o) = olds.get(i) {
                tx.remove(o.as_slice())?;
            }
            tx.insert(k, &[][..])?;
        }
    }
    tx.insert(record_key(app, &new.id), encode(new))?;
    Ok(())
}

/// Counts (or uncounts, `delta` -1) an idea's use of its status, topic and tags.
pub fn usage_tx(tx: &TransactionalTree, app: &str, idea: &Idea, delta: i64) -> Tx<()> {
    let items = std::iter::once(&idea.status_id)
        .chain(idea.topic_id.iter())
        .chain(idea.tag_ids.iter());
    for item in items {
        add_usage_tx(tx, app, item, delta)?;
    }
    Ok(())
}

fn status_ref(board: &BoardRecord, id: &str) -> Option<StatusRef> {
    board.status(id).map(|s| StatusRef {
        id: s.id.clone(),
        name: s.name.clone(),
        color: s.color.as_str().to_owned(),
    })
}

/// Appends `from -> to`, changed at `now`, to the idea's status history.
pub fn history_tx(
    tx: &TransactionalTree,
    app: &str,
    idea: &str,
    board: &BoardRecord,
    (from, to): (&str, &str),
    now: Timestamp,
) -> Tx<StatusChange> {
    let Some(to) = status_ref(board, to) else {
        return invalid("statusId", "no such status on the idea's board");
    };
    let change = StatusChange {
        id: ids::object_id(),
        idea_id: idea.to_owned(),
        from: status_ref(board, from),
        to,
        changed_at: now,
    };
    tx.insert(child_key(b'h', app, idea, &change.id), encode(&change))?;
    Ok(change)
}

/// Records the event `kind` about an idea (`view`, of `app`) at `at` in the changes' tree `ch`;
/// `more` adds to its data (beside `idea`).
pub fn record_tx(
    ch: &TransactionalTree,
    (app, kind): (&str, &str),
    view: &IdeaView,
    (at, by): (Timestamp, &Actor),
    more: serde_json::Map<String, serde_json::Value>,
) -> Tx<()> {
    let mut data = changes::data("idea", view);
    if let Some(m) = data.as_object_mut() {
        m.extend(more);
    }
    let change = Change::new(kind, app, &view.id, at, by, data).with(Facets::board(&view.board_id));
    changes::record::<IdeaError>(ch, &change)?;
    Ok(())
}

/// Stores a new idea in the Open status of its board (the default board when none is named).
pub fn create(
    db: &sled::Db,
    app: &str,
    draft: &IdeaDraft,
    limit: Option<u64>,
    (now, by): (Timestamp, &Actor),
) -> Result<IdeaView, IdeaError> {
    let board_id = match &draft.board_id {
        Some(b) => b.clone(),
        None => boards::ensure_default(db, app)?,
    };
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let view = (&tree, &changes).transaction(|(tx, ch)| {
        let Some(board) = boards::load_tx::<IdeaError>(tx, app, &board_id)? else {
            return invalid("boardId", "no such board");
        };
        if let Some(t) = draft
            .topic_id
            .as_deref()
            .filter(|t| board.topic(t).is_none())
        {
            return invalid("topicId", &format!("no such topic on the board: {t}"));
        }
        if let Some(t) = draft.tag_ids.iter().find(|t| board.tag(t).is_none()) {
            return invalid("tagIds", &format!("no such tag on the board: {t}"));
        }
        let n = decode_count(tx.get(count_key(app))?.as_deref());
        if let Some(limit) = limit.filter(|l| n >= *l) {
            return abort(IdeaError::PlanLimit {
                quota: Quota::Ideas,
                limit,
                current: n,
            });
        }
        let idea = Idea {
            id: ids::object_id(),
            board_id: board_id.clone(),
            title: draft.title.clone(),
            description: draft.description.clone(),
            status_id: board.open_status_id.clone(),
            topic_id: draft.topic_id.clone(),
            tag_ids: draft.tag_ids.clone(),
            author: draft.author.clone(),
            vote_count: 0,
            comment_count: 0,
            internal_comment_count: 0,
            trending: None,
            merged_into_id: None,
            created_at: draft.created_at,
            updated_at: draft.created_at,
        };
        write_tx(tx, app, None, &idea)?;
        usage_tx(tx, app, &idea, 1)?;
        tx.insert(count_key(app), &(n + 1).to_be_bytes()[..])?;
        let view = idea.view(&board);
        let at = (now, by);
        record_tx(
            ch,
            (app, types::IDEA_CREATED),
            &view,
            at,
            Default::default(),
        )?;
        Ok(view)
    })?;
    db.flush()?;
    Ok(view)
}

/// Reads an idea and its board outside a transaction.
pub fn load(db: &sled::Db, app: &str, id: &str) -> Result<Option<(Idea, BoardRecord)>, StoreError> {
    if !ids::is_object_id(id) {
        return Ok(None);
    }
    let tree = db.open_tree(TREE)?;
    let key = record_key(app, id);
    let Some(bytes) = tree.get(&key)? else {
        return Ok(None);
    };
    let idea: Idea = decode(&key, &bytes)?;
    let board = boards::get(db, app, Some(&idea.board_id))?.ok_or_else(|| StoreError::Corrupt {
        key: idea.board_id.clone(),
        cause: "board missing".into(),
    })?;
    Ok(Some((idea, board)))
}

/// Whether the idea exists (an Idempotency-Key answer that shows it may be replayed).
pub fn exists(db: &sled::Db, app: &str, id: &str) -> Result<bool, StoreError> {
    Ok(ids::is_object_id(id) && db.open_tree(TREE)?.contains_key(record_key(app, id))?)
}

pub fn get(db: &sled::Db, app: &str, id: &str) -> Result<Option<IdeaView>, StoreError> {
    Ok(load(db, app, id)?.map(|(i, b)| i.view(&b)))
}

/// Applies a merge patch at `now`; a status change is appended to the history.
pub fn update(
    db: &sled::Db,
    app: &str,
    id: &str,
    patch: &IdeaPatch,
    (now, by): (Timestamp, &Actor),
) -> Result<IdeaView, IdeaError> {
    if !ids::is_object_id(id) {
        return Err(IdeaError::NotFound("idea"));
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let view = (&tree, &changes).transaction(|(tx, ch)| {
        let (old, _) = load_tx(tx, app, id, "idea")?;
        let board = board_tx(tx, app, &old.board_id)?;
        let mut new = old.clone();
        if let Err(d) = patch.apply(&mut new, &board) {
            return abort(IdeaError::Invalid(d));
        }
        let mut status_change = serde_json::Value::Null;
        if new.status_id != old.status_id {
            let h = history_tx(tx, app, id, &board, (&old.status_id, &new.status_id), now)?;
            status_change = serde_json::json!({"from": h.from, "to": h.to});
        }
        new.updated_at = now;
        usage_tx(tx, app, &old, -1)?;
        usage_tx(tx, app, &new, 1)?;
        write_tx(tx, app, Some(&old), &new)?;
        let view = new.view(&board);
        let more = serde_json::Map::from_iter([("statusChange".to_owned(), status_change)]);
        record_tx(ch, (app, types::IDEA_UPDATED), &view, (now, by), more)?;
        Ok(view)
    })?;
    db.flush()?;
    Ok(view)
}

/// Every key under `prefix` with its value.
pub fn scan(tree: &sled::Tree, prefix: &[u8]) -> Result<Vec<(IVec, IVec)>, StoreError> {
    Ok(tree.scan_prefix(prefix).collect::<Result<Vec<_>, _>>()?)
}

/// Runs `f` with the idea's current bytes until its transaction finds the idea unchanged.
pub fn retrying<T>(mut f: impl FnMut() -> Result<T, IdeaError>) -> Result<T, IdeaError> {
    for _ in 0..32 {
        match f() {
            Err(IdeaError::Changed) => continue,
            other => return other,
        }
    }
    Err(IdeaError::Conflict("the idea keeps changing; retry".into()))
}

/// Aborts with `Changed` unless the record still holds `seen`.
pub fn unchanged_tx(now: &IVec, seen: &Option<IVec>) -> Tx<()> {
    if Some(now) != seen.as_ref() {
        return abort(IdeaError::Changed);
    }
    Ok(())
}

/// Deletes an idea with its votes, voter entries, comments and history (at `now`, by `by`).
pub fn delete(
    db: &sled::Db,
    app: &str,
    id: &str,
    (now, by): (Timestamp, &Actor),
) -> Result<(), IdeaError> {
    if !ids::is_object_id(id) {
        return Err(IdeaError::NotFound("idea"));
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    retrying(|| {
        let seen = tree.get(record_key(app, id))?;
        let mut children = Vec::new();
        for kind in [b'v', b'w', b'c', b'h'] {
            children.extend(
                scan(&tree, &child_prefix(kind, app, id))?
                    .into_iter()
                    .map(|(k, _)| k),
            );
        }
        (&tree, &changes).transaction(|(tx, ch)| {
            let (idea, bytes) = load_tx(tx, app, id, "idea")?;
            unchanged_tx(&bytes, &seen)?;
            let view = idea.view(&board_tx(tx, app, &idea.board_id)?);
            record_tx(
                ch,
                (app, types::IDEA_DELETED),
                &view,
                (now, by),
                Default::default(),
            )?;
            for k in &children {
                tx.remove(k)?;
            }
            for k in index_keys(app, &idea) {
                tx.remove(k)?;
            }
            tx.remove(record_key(app, id))?;
            usage_tx(tx, app, &idea, -1)?;
            let n = decode_count(tx.get(count_key(app))?.as_deref());
            tx.insert(count_key(app), &n.saturating_sub(1).to_be_bytes()[..])?;
            Ok(())
        })?;
        Ok(())
    })?;
    // Erasure covers the answers kept for Idempotency-Key replays that show the idea, its
    // votes (voters' e-mails) or its comments.
    crate::storage::idempotency::forget_holding(db, app, id)?;
    db.flush()?;
    Ok(())
}

/// One page of a walk of the index of `field`, filtered.
pub fn list(
    db: &sled::Db,
    app: &str,
    filter: &Filter,
    field: SortField,
    walk: Walk,
) -> Result<Page<IdeaView>, StoreError> {
    let boards: Vec<BoardRecord> = boards::all(db, app)?;
    let tree = db.open_tree(TREE)?;
    cursor::page(&tree, &index_prefix(app, field), walk, |entry, _| {
        let id = std::str::from_utf8(&entry[entry.len().saturating_sub(24)..]).unwrap_or_default();
        let rkey = record_key(app, id);
        let Some(bytes) = tree.get(&rkey)? else {
            return Ok(None);
        };
        let idea: Idea = decode(&rkey, &bytes)?;
        let board = boards.iter().find(|b| b.board.id == idea.board_id);
        Ok(board
            .filter(|_| filter.matches(&idea))
            .map(|b| idea.view(b)))
    })
}

/// One page of the JSON records under `prefix` in key (creation) order, keeping those `keep`
/// accepts; the cursors' entries are the child ids.
pub fn page<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    prefix: &[u8],
    walk: Walk,
    keep: impl Fn(&T) -> bool,
) -> Result<Page<T>, StoreError> {
    cursor::page(tree, prefix, walk, |entry, value| {
        let item: T = decode(&[prefix, entry].concat(), value)?;
        Ok(keep(&item).then_some(item))
    })
}

/// An idea's status history, oldest first.
pub fn history(
    db: &sled::Db,
    app: &str,
    id: &str,
    walk: Walk,
) -> Result<Option<Page<StatusChange>>, StoreError> {
    if load(db, app, id)?.is_none() {
        return Ok(None);
    }
    let tree = db.open_tree(TREE)?;
    page(&tree, &child_prefix(b'h', app, id), walk, |_| true).map(Some)
}

/// Number of ideas of `app`.
pub fn count(db: &sled::Db, app: &str) -> Result<u64, StoreError> {
    Ok(decode_count(
        db.open_tree(TREE)?.get(count_key(app))?.as_deref(),
    ))
}
