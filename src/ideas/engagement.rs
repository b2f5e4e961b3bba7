//! Votes, comments and merges in sled: each one writes its records and the counts of the ideas
//! it touches in one transaction (see `store.rs` for the key layout).

use sled::transaction::{ConflictableTransactionError, TransactionalTree};
use sled::Transactional;

use super::model::{
    trending_add, trending_remove, Comment, CommentDraft, Idea, IdeaView, Person, Vote, Voter,
};
use super::store::{
    abort, board_tx, child_key, child_prefix, history_tx, load, load_tx, page, retrying, scan,
    unchanged_tx, usage_tx, write_tx, IdeaError, Page, Tx, Walk, TREE,
};
use crate::boards::model::StatusKind;
use crate::config::{PlanLimits, Quota};
use crate::ids::{self, Timestamp};
use crate::storage::changes::{self, types, Actor, Change, Facets};
use crate::storage::{decode, encode, StoreError};
use crate::validation::FieldError;

/// The name under which an `Idempotency-Key` answer holds an idea's vote (`b'v'`) or comment
/// (`b'c'`), so deleting it forgets the answer (a replay never shows a deleted record).
pub fn child_hold(kind: u8, idea_id: &str, id: &str) -> String {
    format!("{idea_id}/{}/{id}", kind as char)
}

/// Whether a record an answer holds still exists: an idea, or a vote or comment (`child_hold`).
pub fn held_exists(db: &sled::Db, app: &str, id: &str) -> Result<bool, StoreError> {
    match id.split('/').collect::<Vec<_>>()[..] {
        [idea, kind, child] if kind.len() == 1 => Ok(db
            .open_tree(TREE)?
            .contains_key(child_key(kind.as_bytes()[0], app, idea, child))?),
        _ => super::store::exists(db, app, id),
    }
}

/// Records the event `kind` about a vote or comment (`key`: `vote` or `comment`) of `idea` in
/// the changes' tree `ch`: the record as the API shows it and the idea's id.
fn record_child_tx(
    ch: &TransactionalTree,
    (app, kind): (&str, &str),
    idea: &Idea,
    (key, child): (&str, &impl serde::Serialize),
    (at, by, internal): (Timestamp, &Actor, bool),
) -> Tx<()> {
    let mut data = changes::data(key, child);
    if let Some(m) = data.as_object_mut() {
        m.insert("ideaId".into(), idea.id.clone().into());
    }
    let facets = Facets {
        internal,
        ..Facets::board(&idea.board_id)
    };
    let change = Change::new(kind, app, &idea.id, at, by, data).with(facets);
    changes::record::<IdeaError>(ch, &change)?;
    Ok(())
}

fn voter_taken(
    tx: &sled::transaction::TransactionalTree,
    app: &str,
    idea: &str,
    voter: &Voter,
) -> Tx<bool> {
    for k in voter.keys() {
        if tx.get(child_key(b'w', app, idea, &k))?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Writes a vote and its voter entries, and counts it on `idea`.
fn add_vote_tx(
    tx: &sled::transaction::TransactionalTree,
    app: &str,
    idea: &mut Idea,
    vote: &Vote,
) -> Tx<()> {
    tx.insert(child_key(b'v', app, &idea.id, &vote.id), encode(vote))?;
    for k in vote.voter.keys() {
        tx.insert(child_key(b'w', app, &idea.id, &k), vote.id.as_bytes())?;
    }
    idea.vote_count += 1;
    idea.trending = trending_add(idea.trending, vote.created_at);
    Ok(())
}

/// Records a vote: 409 when the voter (same id or same e-mail) already voted, or when the idea
/// is in a closed-kind status.
pub fn vote(
    db: &sled::Db,
    app: &str,
    idea_id: &str,
    voter: &Voter,
    at: Timestamp,
    (now, by): (Timestamp, &Actor),
    plan: &PlanLimits,
) -> Result<Vote, IdeaError> {
    if !ids::is_object_id(idea_id) {
        return Err(IdeaError::NotFound("idea"));
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let vote = (&tree, &changes).transaction(|(tx, ch)| {
        let (old, _) = load_tx(tx, app, idea_id, "idea")?;
        let board = board_tx(tx, app, &old.board_id)?;
        if let Some(s) = board
            .status(&old.status_id)
            .filter(|s| s.kind == StatusKind::Closed)
        {
            return abort(IdeaError::Conflict(format!(
                "the idea is {}: it takes no more votes",
                s.name
            )));
        }
        if let Some(limit) = plan.limit(Quota::VotesPerIdea) {
            over(Quota::VotesPerIdea, limit, old.vote_count)?;
        }
        if voter_taken(tx, app, idea_id, voter)? {
            return abort(IdeaError::Conflict(
                "this voter already voted for the idea".into(),
            ));
        }
        let vote = Vote {
            id: ids::object_id(),
            idea_id: idea_id.to_owned(),
            voter: voter.clone(),
            created_at: at,
        };
        let mut new = old.clone();
        add_vote_tx(tx, app, &mut new, &vote)?;
        write_tx(tx, app, Some(&old), &new)?;
        let kind = (app, types::VOTE_CREATED);
        record_child_tx(ch, kind, &new, ("vote", &vote), (now, by, false))?;
        Ok(vote)
    })?;
    db.flush()?;
    Ok(vote)
}

/// Removes a vote and uncounts it (at `now`, by `by`).
pub fn unvote(
    db: &sled::Db,
    app: &str,
    (idea_id, vote_id): (&str, &str),
    (now, by): (Timestamp, &Actor),
) -> Result<(), IdeaError> {
    remove_vote(db, app, (idea_id, vote_id), Some((now, by)))
}

/// Removes a vote; records `vote.deleted` when `event` says when and by whom (an erasure does
/// not: its own event covers what it removes, and nothing of the person is sent out).
fn remove_vote(
    db: &sled::Db,
    app: &str,
    (idea_id, vote_id): (&str, &str),
    event: Option<(Timestamp, &Actor)>,
) -> Result<(), IdeaError> {
    if !ids::is_object_id(idea_id) || !ids::is_object_id(vote_id) {
        return Err(IdeaError::NotFound("vote"));
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    (&tree, &changes).transaction(|(tx, ch)| {
        let (old, _) = load_tx(tx, app, idea_id, "idea")?;
        let key = child_key(b'v', app, idea_id, vote_id);
        let Some(bytes) = tx.get(&key)? else {
            return abort(IdeaError::NotFound("vote"));
        };
        let vote: Vote =
            decode(&key, &bytes).map_err(|e| ConflictableTransactionError::Abort(e.into()))?;
        tx.remove(key)?;
        for k in vote.voter.keys() {
            let wk = child_key(b'w', app, idea_id, &k);
            if tx.get(&wk)?.as_deref() == Some(vote.id.as_bytes()) {
                tx.remove(wk)?;
            }
        }
        let mut new = old.clone();
        new.vote_count = new.vote_count.saturating_sub(1);
        new.trending = trending_remove(new.trending, vote.created_at, new.vote_count);
        write_tx(tx, app, Some(&old), &new)?;
        if let Some((now, by)) = event {
            let kind = (app, types::VOTE_DELETED);
            record_child_tx(ch, kind, &new, ("vote", &vote), (now, by, false))?;
        }
        Ok(())
    })?;
    crate::storage::idempotency::forget_holding(db, app, &child_hold(b'v', idea_id, vote_id))?;
    db.flush()?;
    Ok(())
}

/// A page of an idea's votes, oldest first (`None`: no such idea).
pub fn votes(
    db: &sled::Db,
    app: &str,
    idea_id: &str,
    walk: Walk,
) -> Result<Option<Page<Vote>>, StoreError> {
    if load(db, app, idea_id)?.is_none() {
        return Ok(None);
    }
    let tree = db.open_tree(TREE)?;
    page(&tree, &child_prefix(b'v', app, idea_id), walk, |_| true).map(Some)
}

fn count_comment(idea: &mut Idea, c: &Comment, delta: i64) {
    let n = if c.internal {
        &mut idea.internal_comment_count
    } else {
        &mut idea.comment_count
    };
    *n = n.saturating_add_signed(delta);
}

/// 403 PLAN_LIMIT_REACHED when `current` has reached `limit`.
fn over(quota: Quota, limit: u64, current: u64) -> Tx<()> {
    if current >= limit {
        return abort(IdeaError::PlanLimit {
            quota,
            limit,
            current,
        });
    }
    Ok(())
}

/// The depth of a reply to `parent` (a top-level comment is 1), counted up the parents until
/// `limit` is passed; `None` when `parent` is no comment of the idea. A deleted ancestor ends
/// the chain (its replies stand at the top).
fn reply_depth(
    tx: &sled::transaction::TransactionalTree,
    (app, idea_id): (&str, &str),
    parent: &str,
    limit: u64,
) -> Tx<Option<u64>> {
    let mut depth = 1;
    let mut next = Some(parent.to_owned());
    while let Some(id) = next.take() {
        let key = child_key(b'c', app, idea_id, &id);
        let Some(bytes) = tx.get(&key)? else {
            return Ok((depth > 1).then_some(depth));
        };
        depth += 1;
        if depth > limit {
            break;
        }
        let c: Comment =
            decode(&key, &bytes).map_err(|e| ConflictableTransactionError::Abort(e.into()))?;
        next = c.parent_id;
    }
    Ok(Some(depth))
}

/// Adds a comment; its parent must be a comment of the same idea (else 400). The plan bounds
/// the comments of one idea and how deep replies nest (403 PLAN_LIMIT_REACHED).
pub fn comment(
    db: &sled::Db,
    app: &str,
    idea_id: &str,
    draft: &CommentDraft,
    plan: &PlanLimits,
    (now, by): (Timestamp, &Actor),
) -> Result<Comment, IdeaError> {
    if !ids::is_object_id(idea_id) {
        return Err(IdeaError::NotFound("idea"));
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let c = (&tree, &changes).transaction(|(tx, ch)| {
        let (old, _) = load_tx(tx, app, idea_id, "idea")?;
        if let Some(limit) = plan.limit(Quota::CommentsPerIdea) {
            let current = old.comment_count + old.internal_comment_count;
            over(Quota::CommentsPerIdea, limit, current)?;
        }
        if let Some(p) = &draft.parent_id {
            let limit = plan.limit(Quota::CommentDepth).unwrap_or(u64::MAX);
            match reply_depth(tx, (app, idea_id), p, limit)? {
                None => {
                    let e = FieldError::new("parentId", "no such comment on this idea");
                    return abort(IdeaError::Invalid(vec![e]));
                }
                Some(depth) if depth > limit => over(Quota::CommentDepth, limit, limit)?,
                Some(_) => {}
            }
        }
        let c = draft.comment(idea_id, now);
        tx.insert(child_key(b'c', app, idea_id, &c.id), encode(&c))?;
        let mut new = old.clone();
        count_comment(&mut new, &c, 1);
        write_tx(tx, app, Some(&old), &new)?;
        let kind = (app, types::COMMENT_CREATED);
        record_child_tx(ch, kind, &new, ("comment", &c), (now, by, c.internal))?;
        Ok(c)
    })?;
    db.flush()?;
    Ok(c)
}

/// Reads a comment the caller may see (internal ones only for moderators) in a transaction.
fn comment_tx(
    tx: &sled::transaction::TransactionalTree,
    app: &str,
    idea: &str,
    id: &str,
    moderator: bool,
) -> Tx<Comment> {
    let key = child_key(b'c', app, idea, id);
    let Some(bytes) = tx.get(&key)? else {
        return abort(IdeaError::NotFound("comment"));
    };
    let c: Comment =
        decode(&key, &bytes).map_err(|e| ConflictableTransactionError::Abort(e.into()))?;
    if c.internal && !moderator {
        return abort(IdeaError::NotFound("comment"));
    }
    Ok(c)
}

/// Edits a comment's content: a moderator may edit any; others only their own (`author_id`).
pub fn edit_comment(
    db: &sled::Db,
    app: &str,
    (idea_id, id): (&str, &str),
    content: &str,
    author_id: Option<&str>,
    moderator: bool,
    now: Timestamp,
) -> Result<Comment, IdeaError> {
    if !ids::is_object_id(idea_id) || !ids::is_object_id(id) {
        return Err(IdeaError::NotFound("comment"));
    }
    let tree = db.open_tree(TREE)?;
    let c = tree.transaction(|tx| {
        load_tx(tx, app, idea_id, "idea")?;
        let mut c = comment_tx(tx, app, idea_id, id, moderator)?;
        if !moderator && author_id != Some(c.author.id.as_str()) {
            return abort(IdeaError::Forbidden(
                "only the comment's author (author.id) or ideas:moderate may edit it".into(),
            ));
        }
        c.content = content.to_owned();
        c.updated_at = now;
        tx.insert(child_key(b'c', app, idea_id, id), encode(&c))?;
        Ok(c)
    })?;
    db.flush()?;
    Ok(c)
}

/// Deletes a comment and uncounts it (its replies stay, with their `parentId`).
pub fn delete_comment(db: &sled::Db, app: &str, idea_id: &str, id: &str) -> Result<(), IdeaError> {
    if !ids::is_object_id(idea_id) || !ids::is_object_id(id) {
        return Err(IdeaError::NotFound("comment"));
    }
    let tree = db.open_tree(TREE)?;
    tree.transaction(|tx| {
        let (old, _) = load_tx(tx, app, idea_id, "idea")?;
        let c = comment_tx(tx, app, idea_id, id, true)?;
        tx.remove(child_key(b'c', app, idea_id, id))?;
        let mut new = old.clone();
        count_comment(&mut new, &c, -1);
        write_tx(tx, app, Some(&old), &new)?;
        Ok(())
    })?;
    crate::storage::idempotency::forget_holding(db, app, &child_hold(b'c', idea_id, id))?;
    db.flush()?;
    Ok(())
}

/// A page of an idea's comments, oldest first; internal ones only with `moderator`.
pub fn comments(
    db: &sled::Db,
    app: &str,
    idea_id: &str,
    moderator: bool,
    walk: Walk,
) -> Result<Option<Page<Comment>>, StoreError> {
    if load(db, app, idea_id)?.is_none() {
        return Ok(None);
    }
    let tree = db.open_tree(TREE)?;
    let keep = |c: &Comment| moderator || !c.internal;
    page(&tree, &child_prefix(b'c', app, idea_id), walk, keep).map(Some)
}

/// What an erasure removed from the ideas: votes, comments, and the idempotency answers that
/// showed them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Erased {
    pub votes: usize,
    pub comments: usize,
    /// Ideas whose author was the person: kept, their author made anonymous.
    pub ideas: usize,
    pub answers: usize,
}

/// The author of an idea whose author was erased: the idea stays, nothing of the person does.
pub fn anonymous_author() -> Person {
    Person {
        id: "anonymous".into(),
        name: "Anonymous".into(),
        email: String::new(),
    }
}

/// Removes a person's votes (voter id or e-mail) and comments (author id or e-mail) from every
/// idea of `app`, each as `unvote` and `delete_comment` do (counts, trending, idempotency
/// answers); replies to a removed comment stay, at the top of the thread as after any delete.
pub fn erase_person(
    db: &sled::Db,
    app: &str,
    id: Option<&str>,
    email: Option<&str>,
) -> Result<Erased, IdeaError> {
    let is = |pid: Option<&str>, pemail: Option<&str>| {
        (id.is_some() && pid == id) || (email.is_some() && pemail == email)
    };
    let mut answers = 0;
    let votes = erase_children(db, app, b'v', &mut answers, |v: &Vote| {
        is(v.voter.id.as_deref(), v.voter.email.as_deref())
            .then(|| (v.idea_id.clone(), v.id.clone()))
    })?;
    let comments = erase_children(db, app, b'c', &mut answers, |c: &Comment| {
        is(Some(&c.author.id), Some(&c.author.email)).then(|| (c.idea_id.clone(), c.id.clone()))
    })?;
    let ideas = anonymise_ideas(db, app, &mut answers, |a: &Person| {
        is(Some(&a.id), Some(&a.email))
    })?;
    Ok(Erased {
        votes,
        comments,
        ideas,
        answers,
    })
}

/// Replaces the author of every idea of `app` that `theirs` names with `anonymous_author()`
/// (the indexes follow, `updatedAt` stays) and forgets the idempotency answers that held those
/// ideas (added to `answers`); answers how many ideas changed.
fn anonymise_ideas(
    db: &sled::Db,
    app: &str,
    answers: &mut usize,
    theirs: impl Fn(&Person) -> bool,
) -> Result<usize, IdeaError> {
    let tree = db.open_tree(TREE)?;
    let all: Vec<Idea> = crate::storage::decode_all(&tree, &[b"r", app.as_bytes()].concat())?;
    let mut changed = 0;
    for idea in all.iter().filter(|i| theirs(&i.author)) {
        let done = tree.transaction(|tx| {
            let (old, _) = load_tx(tx, app, &idea.id, "idea")?;
            if !theirs(&old.author) {
                return Ok(false);
            }
            let mut new = old.clone();
            new.author = anonymous_author();
            write_tx(tx, app, Some(&old), &new)?;
            Ok(true)
        });
        match done {
            Ok(true) => changed += 1,
            Ok(false) | Err(sled::transaction::TransactionError::Abort(IdeaError::NotFound(_))) => {
            }
            Err(e) => return Err(e.into()),
        }
        *answers += crate::storage::idempotency::forget_holding(db, app, &idea.id)?;
    }
    db.flush().map_err(StoreError::from)?;
    Ok(changed)
}

/// Removes the votes (`b'v'`) or comments (`b'c'`) of `app` that `pick` names (idea, id), and
/// the idempotency answers that held them (added to `answers`); answers how many went.
fn erase_children<T: serde::de::DeserializeOwned>(
    db: &sled::Db,
    app: &str,
    kind: u8,
    answers: &mut usize,
    pick: impl Fn(&T) -> Option<(String, String)>,
) -> Result<usize, IdeaError> {
    let tree = db.open_tree(TREE)?;
    let all: Vec<T> = crate::storage::decode_all(&tree, &[&[kind][..], app.as_bytes()].concat())?;
    let mut gone = 0;
    for (idea, id) in all.iter().filter_map(pick) {
        *answers +=
            crate::storage::idempotency::forget_holding(db, app, &child_hold(kind, &idea, &id))?;
        let removed = if kind == b'v' {
            remove_vote(db, app, (&idea, &id), None)
        } else {
            delete_comment(db, app, &idea, &id)
        };
        match removed {
            Ok(()) => gone += 1,
            Err(IdeaError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(gone)
}

/// Merges idea `source` into `target` (api.md §6): the target gains the voters it lacked, the
/// comments move to it, the source becomes Duplicate with `mergedIntoId` (at `now`). Answers
/// the target.
pub fn merge(
    db: &sled::Db,
    app: &str,
    source: &str,
    target: &str,
    (now, by): (Timestamp, &Actor),
) -> Result<IdeaView, IdeaError> {
    if !ids::is_object_id(source) {
        return Err(IdeaError::NotFound("idea"));
    }
    if !ids::is_object_id(target) {
        return Err(IdeaError::NotFound("idea (intoId)"));
    }
    let (tree, changes) = changes::with_changes(db, TREE)?;
    let view = retrying(|| {
        let seen = tree.get(super::store::record_key(app, source))?;
        let decode_all = |kind: u8| -> Result<Vec<(Vec<u8>, sled::IVec)>, StoreError> {
            Ok(scan(&tree, &child_prefix(kind, app, source))?
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v))
                .collect())
        };
        let votes: Vec<Vote> = decode_all(b'v')?
            .iter()
            .map(|(k, v)| decode(k, v))
            .collect::<Result<_, _>>()?;
        let comments: Vec<Comment> = decode_all(b'c')?
            .iter()
            .map(|(k, v)| decode(k, v))
            .collect::<Result<_, _>>()?;
        Ok((&tree, &changes).transaction(|(tx, ch)| {
            let (src, dst) = merge_tx(tx, app, (source, target), &seen, (&votes, &comments), now)?;
            let into = serde_json::to_value(&dst).unwrap_or_default();
            let into = serde_json::Map::from_iter([("into".to_owned(), into)]);
            super::store::record_tx(ch, (app, types::IDEA_MERGED), &src, (now, by), into)?;
            Ok(dst)
        })?)
    })?;
    db.flush()?;
    Ok(view)
}

fn merge_tx(
    tx: &sled::transaction::TransactionalTree,
    app: &str,
    (source, target): (&str, &str),
    seen: &Option<sled::IVec>,
    (votes, comments): (&[Vote], &[Comment]),
    now: Timestamp,
) -> Tx<(IdeaView, IdeaView)> {
    let (src_old, bytes) = load_tx(tx, app, source, "idea")?;
    unchanged_tx(&bytes, seen)?;
    let (dst_old, _) = load_tx(tx, app, target, "idea (intoId)")?;
    if src_old.merged_into_id.is_some() {
        return abort(IdeaError::Conflict("the idea was already merged".into()));
    }
    if dst_old.merged_into_id.is_some() {
        return abort(IdeaError::Conflict(
            "the target idea was merged into another one".into(),
        ));
    }
    let (mut src, mut dst) = (src_old.clone(), dst_old.clone());
    for v in votes {
        if !voter_taken(tx, app, target, &v.voter)? {
            let copy = Vote {
                id: ids::object_id(),
                idea_id: target.to_owned(),
                voter: v.voter.clone(),
                created_at: v.created_at,
            };
            add_vote_tx(tx, app, &mut dst, &copy)?;
        }
    }
    for c in comments {
        tx.remove(child_key(b'c', app, source, &c.id))?;
        let moved = Comment {
            idea_id: target.to_owned(),
            ..c.clone()
        };
        tx.insert(child_key(b'c', app, target, &c.id), encode(&moved))?;
        count_comment(&mut src, c, -1);
        count_comment(&mut dst, c, 1);
    }
    let src_board = board_tx(tx, app, &src.board_id)?;
    usage_tx(tx, app, &src_old, -1)?;
    src.status_id = src_board.duplicate_status_id.clone();
    src.merged_into_id = Some(target.to_owned());
    if src.status_id != src_old.status_id {
        history_tx(
            tx,
            app,
            source,
            &src_board,
            (&src_old.status_id, &src.status_id),
            now,
        )?;
    }
    usage_tx(tx, app, &src, 1)?;
    (src.updated_at, dst.updated_at) = (now, now);
    write_tx(tx, app, Some(&src_old), &src)?;
    write_tx(tx, app, Some(&dst_old), &dst)?;
    let dst_board = board_tx(tx, app, &dst.board_id)?;
    Ok((src.view(&src_board), dst.view(&dst_board)))
}

#[cfg(test)]
mod tests {
    //! The store against a simple model: random votes, unvotes, comments and deletions on a
    //! few ideas, then the counts compared with the model and with the records, before and
    //! after reopening the database.

    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::ideas::store;

    fn open(dir: &std::path::Path) -> sled::Db {
        sled::Config::new().path(dir).open().expect("open sled")
    }

    fn idea(db: &sled::Db, app: &str) -> String {
        let body = serde_json::json!({"title": "Idea", "author": {"id": "a", "name": "A", "email": "a@b.co"}});
        let draft =
            super::super::model::IdeaDraft::parse(body.as_object().unwrap(), Timestamp::t0())
                .unwrap();
        store::create(db, app, &draft, None, (Timestamp::t0(), &Actor::System))
            .unwrap()
            .id
    }

    #[derive(Default)]
    struct Model {
        votes: BTreeMap<String, (String, String)>,
        comments: BTreeMap<String, (String, bool)>,
    }

    fn check(db: &sled::Db, app: &str, ideas: &[String], m: &Model) {
        for id in ideas {
            let v = store::get(db, app, id).unwrap().unwrap();
            let want_votes = m.votes.values().filter(|(i, _)| i == id).count();
            let want_comments = m
                .comments
                .values()
                .filter(|(i, internal)| i == id && !internal)
                .count();
            assert_eq!(v.vote_count as usize, want_votes);
            assert_eq!(v.comment_count as usize, want_comments);
            let records = votes(db, app, id, Walk::new(100, None))
                .unwrap()
                .unwrap()
                .items;
            assert_eq!(records.len(), want_votes);
            let all = comments(db, app, id, true, Walk::new(100, None))
                .unwrap()
                .unwrap()
                .items;
            assert_eq!(
                all.len(),
                m.comments.values().filter(|(i, _)| i == id).count()
            );
        }
    }

    #[test]
    fn counts_match_a_model_through_random_operations_and_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let app = ids::object_id();
        let plan = crate::config::Settings::load(None)
            .unwrap()
            .plan(crate::config::Plan::Enterprise);
        let db = open(dir.path());
        let ideas: Vec<String> = (0..3).map(|_| idea(&db, &app)).collect();
        let (mut m, mut seed) = (Model::default(), 0x9e37_79b9_7f4a_7c15_u64);
        let mut voters: BTreeSet<(String, String)> = BTreeSet::new();
        for _ in 0..400 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let (op, k, n) = (seed % 5, (seed >> 8) as usize % 3, (seed >> 16) % 12);
            let idea_id = &ideas[k];
            match op {
                0 | 1 => {
                    let voter = Voter {
                        id: Some(format!("v{n}")),
                        name: None,
                        email: None,
                    };
                    let fresh = voters.insert((idea_id.clone(), format!("v{n}")));
                    match vote(
                        &db,
                        &app,
                        idea_id,
                        &voter,
                        Timestamp::t0(),
                        (Timestamp::t0(), &Actor::System),
                        &plan,
                    ) {
                        Ok(v) => {
                            assert!(fresh);
                            m.votes.insert(v.id, (idea_id.clone(), format!("v{n}")));
                        }
                        Err(IdeaError::Conflict(_)) => assert!(!fresh),
                        Err(e) => panic!("{e:?}"),
                    }
                }
                2 => {
                    if let Some((vid, (i, who))) = m
                        .votes
                        .iter()
                        .find(|(_, (i, _))| i == idea_id)
                        .map(|(a, b)| (a.clone(), b.clone()))
                    {
                        unvote(&db, &app, (&i, &vid), (Timestamp::t0(), &Actor::System)).unwrap();
                        m.votes.remove(&vid);
                        voters.remove(&(i, who));
                    }
                }
                3 => {
                    let body = serde_json::json!({"content": "c", "author": {"id": "a", "name": "A", "email": "a@b.co"}, "internal": n % 3 == 0});
                    let draft = CommentDraft::parse(body.as_object().unwrap()).unwrap();
                    let c = comment(
                        &db,
                        &app,
                        idea_id,
                        &draft,
                        &plan,
                        (Timestamp::t0(), &Actor::System),
                    )
                    .unwrap();
                    m.comments.insert(c.id, (idea_id.clone(), c.internal));
                }
                _ => {
                    if let Some(cid) = m
                        .comments
                        .iter()
                        .find(|(_, (i, _))| i == idea_id)
                        .map(|(c, _)| c.clone())
                    {
                        delete_comment(&db, &app, idea_id, &cid).unwrap();
                        m.comments.remove(&cid);
                    }
                }
            }
        }
        check(&db, &app, &ideas, &m);
        drop(db);
        let db = crate::storage::reopen_after_drop(dir.path());
        check(&db, &app, &ideas, &m);
    }
}
